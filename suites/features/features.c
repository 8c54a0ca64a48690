/* Production-feature checks (see features.h for each check and where its bound comes from). */
#include "suites/features/features.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sampling.h"
#include "common/philox.h"
#include "suites/paths/paths.h"
#include "suites/engine/stats_tests.h"
#include "suites/engine/routing.h"

const char *feat_status_name(feat_status s) {
  return s == FEAT_PASS ? "pass" : s == FEAT_FAIL ? "fail" : s == FEAT_UNDECIDED ? "undecided" : "not_supported";
}

#define ROWS 16     /* logit rows of scratch per path */
#define STEP_MAX 16 /* the most tokens one step of a check carries (speculative: a 6-token prompt) */

typedef struct {
  vpath ref, test, flr; /* reference, path under test, floor (flr.ops NULL: no floor) */
  const ds_model *m;    /* the model all three run */
  int V;
  float *lr, *lt, *lf;  /* [ROWS * V] logits of each */
  double *scratch;      /* [2V] */
  const feat_opts *o;
  vstatus rows_st;      /* the test path's status on the sampling rows (rows 0..7, sampling_rows) */
  double fd_rows;       /* the floor's largest top-2 error on the sampling rows (0 without a floor) */
  double eps_rows;      /* margin epsilon from the sampling rows' floor (full_context reuses it) */
  char eps_src[120];    /* where eps_rows comes from, for the bound sources */
  int32_t *fexp;        /* [n_moe][STEP_MAX][K] forced expert ids of one step (NULL: natural routing) */
  int32_t *fone;        /* [n_moe][K] the forced ids of one position (scratch of forced_ids) */
} pair;

/* Bounds of one check, derived from the floor's figures on the same rows (or the options). */
typedef struct {
  double kld, tv, eps;  /* nats, probability, logits */
  char src[224];        /* cut to feat_check.bound_source (160) where it is set */
} bounds;

static bool has_floor(const pair *P) { return P->flr.ops != NULL; }

static bounds derive(const pair *P, double floor_kld, double floor_tv, double floor_d) {
  bounds b;
  const double k1 = 1 + FEAT_ACCURACY_RATIO;
  if (has_floor(P)) {
    /* a tiny absolute part keeps a bitwise-equal floor (0) from failing bitwise-equal paths */
    b.kld = k1 * k1 * floor_kld + 1e-12;
    b.tv = k1 * floor_tv + 1e-12;
    b.eps = 2 * k1 * floor_d;
    snprintf(b.src, sizeof b.src, "floor %s on the same rows (k=%g): KLD %.3g, TV %.3g, top-2 error %.3g", P->o->floor->name,
             FEAT_ACCURACY_RATIO, floor_kld, floor_tv, floor_d);
  } else {
    b.kld = P->o->kld_tol;
    b.tv = sqrt(P->o->kld_tol / 2); /* Pinsker: TV <= sqrt(KLD / 2) */
    b.eps = P->o->margin_eps;
    snprintf(b.src, sizeof b.src, "no floor: --kld-tol %.3g, TV by Pinsker, --margin-eps %.3g", P->o->kld_tol,
             P->o->margin_eps);
  }
  return b;
}

/* Under forced routing, the experts of the n tokens at positions pos..pos+n-1 in P->fexp ([n_moe][n][K]):
 * a function of (seed, position) only, so every path, slot and step shape (one K+1-token verification
 * step or K+1 single steps) routes a position's token to the same experts. */
static const int32_t *forced_ids(pair *P, int pos, int n) {
  const vrouting *r = P->o->routing;
  if (!P->fexp) return NULL;
  assert(n <= STEP_MAX);
  for (int t = 0; t < n; t++) {
    vrouting_fill(r, P->o->seed, pos + t, 1, P->fone);
    for (int j = 0; j < r->n_moe; j++)
      memcpy(P->fexp + ((size_t)j * n + t) * r->K, P->fone + (size_t)j * r->K, (size_t)r->K * sizeof(int32_t));
  }
  return P->fexp;
}

/* One step of `n` tokens for slot `seq` at `pos` on path p (one of P's); logits rows into out. */
static vstatus step(pair *P, vpath *p, int seq, int pos, const int32_t *tok, int n, bool all, float *out) {
  int nt = n;
  vstep s = {.n_seq = 1, .seq = &seq, .n_tokens = &nt, .start_pos = &pos, .tokens = tok, .all_logits = all,
             .forced_experts = forced_ids(P, pos, n)};
  if (p->ops->supports) VTRY(p->ops->supports(p->state, &s));
  return p->ops->forward(p->state, &s, out);
}

/* The same step on the reference and the floor (errors: they must run), and on the test path
 * (its status in *ts, first failure kept). Rows at `row` of each scratch. */
static vstatus step3(pair *P, int seq, int pos, const int32_t *tok, int n, bool all, int row, vstatus *ts) {
  const size_t off = (size_t)row * P->V;
  VTRY(step(P, &P->ref, seq, pos, tok, n, all, P->lr + off));
  if (has_floor(P)) VTRY(step(P, &P->flr, seq, pos, tok, n, all, P->lf + off));
  if (*ts == V_OK) *ts = step(P, &P->test, seq, pos, tok, n, all, P->lt + off);
  return V_OK;
}

void feat_set(feat_check *c, const char *name, feat_status st, double value, double bound, const char *src,
              const char *fmt, ...) {
  snprintf(c->name, sizeof c->name, "%s", name);
  c->status = st;
  c->value = value;
  c->bound = bound;
  snprintf(c->bound_source, sizeof c->bound_source, "%s", src ? src : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->detail, sizeof c->detail, fmt, ap);
  va_end(ap);
}

/* The test path's failure is not_supported (V_UNSUPPORTED) or a fail (an error). */
static void path_failed(feat_check *c, const char *name, vstatus s) {
  feat_set(c, name, s == V_UNSUPPORTED ? FEAT_NOT_SUPPORTED : FEAT_FAIL, NAN, NAN, NULL, "%s", verr_msg());
}

static int32_t rnd_tok(uint64_t key, uint64_t i, int V) { return (int32_t)((int)(philox_unit(key, i) * V) % V); }


static double tv_of(const float *a, const float *b, int V, const vsampling *sp, double *pa, double *pb) {
  vsample_distribution(a, V, sp, pa);
  vsample_distribution(b, V, sp, pb);
  double tv = 0;
  for (int i = 0; i < V; i++) tv += fabs(pa[i] - pb[i]);
  return tv / 2;
}

static vstatus reset_all(pair *P, int seq) {
  if (P->ref.ops->reset) VTRY(P->ref.ops->reset(P->ref.state, seq));
  if (P->test.ops->reset) VTRY(P->test.ops->reset(P->test.state, seq));
  if (has_floor(P) && P->flr.ops->reset) VTRY(P->flr.ops->reset(P->flr.state, seq));
  return V_OK;
}

static void max_into(double *m, double v) { if (!(v <= *m)) *m = v; }

/* Decodes into row 8 of the scratch: rows 0..7 hold the sampling rows, which the sampling check
 * after it reads. */
static vstatus check_full(pair *P, const feat_opts *o, feat_check *c) {
  const int V = P->V, T = 4;
  int ctx = (o->full_ctx > 0 ? o->full_ctx : P->m->cfg.max_position_embeddings) - T;
  float *lr = P->lr + (size_t)8 * V, *lt = P->lt + (size_t)8 * V;
  char src[200];
  snprintf(src, sizeof src, "KLD: --kld-tol (no floor reaches this context); margin rule: %s", P->eps_src);
  if (!P->ref.ops->fill_cache || !P->test.ops->fill_cache) {
    feat_set(c, "full_context", FEAT_NOT_SUPPORTED, NAN, o->kld_tol, src, "fill_cache missing in %s",
        !P->test.ops->fill_cache ? P->test.ops->name : P->ref.ops->name);
    return V_OK;
  }
  vstatus s = P->ref.ops->fill_cache(P->ref.state, 0, ctx, o->seed);
  if (s) { feat_set(c, "full_context", FEAT_FAIL, NAN, o->kld_tol, src, "reference fill_cache: %s", verr_msg()); return V_OK; }
  if ((s = P->test.ops->fill_cache(P->test.state, 0, ctx, o->seed))) { path_failed(c, "full_context", s); return V_OK; }
  uint64_t key = philox_key(o->seed, "features.full");
  double mk = 0;
  int same = 0, decided = 0;
  for (int t = 0; t < T; t++) {
    int32_t tok = rnd_tok(key, (uint64_t)t, V);
    if ((s = step(P, &P->ref, 0, ctx + t, &tok, 1, false, lr))) {
      feat_set(c, "full_context", FEAT_FAIL, NAN, o->kld_tol, src, "reference at position %d: %s", ctx + t, verr_msg());
      return V_OK;
    }
    if ((s = step(P, &P->test, 0, ctx + t, &tok, 1, false, lt))) { path_failed(c, "full_context", s); return V_OK; }
    max_into(&mk, stat_kld(lr, lt, V, P->scratch));
    if (stat_top2_margin(lr, V, NULL, NULL) > P->eps_rows) {
      decided++;
      same += vsample_argmax(lr, V) == vsample_argmax(lt, V);
    }
  }
  bool ok = mk <= o->kld_tol && same == decided;
  feat_set(c, "full_context", ok ? FEAT_PASS : FEAT_FAIL, mk, o->kld_tol, src,
      "positions %d..%d after fill_cache: max KLD %.3g nats (bound %.3g), same top token %d/%d rows whose reference "
      "margin > eps %.3g (%d rows near a tie)",
      ctx, ctx + T - 1, mk, o->kld_tol, same, decided, P->eps_rows, T - decided);
  return V_OK;
}

/* Decodes 8 rows (random tokens, slot 1) on every path into rows 0..7. */
static vstatus rows8(pair *P, uint64_t seed, vstatus *test_st) {
  const int V = P->V;
  VTRY(reset_all(P, 1));
  uint64_t key = philox_key(seed, "features.rows");
  *test_st = V_OK;
  for (int t = 0; t < 8; t++) {
    int32_t tok = rnd_tok(key, (uint64_t)t, V);
    VTRY(step3(P, 1, t, &tok, 1, false, t, test_st));
  }
  return V_OK;
}

/* The sampling rows (rows8) on every path, and from the floor's top-2 error on them the margin
 * rule's epsilon for the checks that have no floor of their own (full_context). Run before
 * full_context and sampling whenever either runs. */
static vstatus sampling_rows(pair *P, const feat_opts *o) {
  const int V = P->V;
  VTRY(rows8(P, o->seed, &P->rows_st));
  double fd = 0;
  for (int r = 0; r < 8 && has_floor(P); r++) max_into(&fd, stat_top2_error(P->lr + (size_t)r * V, P->lf + (size_t)r * V, V));
  const bounds b0 = derive(P, 0, 0, fd);
  P->fd_rows = fd;
  P->eps_rows = b0.eps;
  snprintf(P->eps_src, sizeof P->eps_src, "eps %.3g from %s", b0.eps,
           has_floor(P) ? "the floor's top-2 error on the sampling rows" : "--margin-eps");
  return V_OK;
}

/* Reads the sampling rows (rows 0..7, sampling_rows). */
static vstatus check_sampling(pair *P, const feat_opts *o, feat_check *c) {
  const int V = P->V;
  const double fd = P->fd_rows;
  if (P->rows_st) { path_failed(c, "sampling", P->rows_st); return V_OK; }
  vsampling sp = {.temperature = 1.0f, .top_k = 40, .top_p = 0.95f, .seed = o->seed};
  void *work = malloc(VSAMPLE_WORK_BYTES(V) + 64);
  double *pa = malloc((size_t)V * sizeof *pa), *pb = malloc((size_t)V * sizeof *pb);
  long *cnt = calloc((size_t)V, sizeof *cnt);
  if (!work || !pa || !pb || !cnt) {
    free(work); free(pa); free(pb); free(cnt);
    return VERR("features: out of memory");
  }
  long same = 0, draws = 0;
  double tv = 0, ftv = 0;
  for (int r = 0; r < 8; r++) {
    const float *a = P->lr + (size_t)r * V, *t = P->lt + (size_t)r * V;
    for (int k = 0; k < 256; k++, draws++) same += vsample(a, V, &sp, r, k, work) == vsample(t, V, &sp, r, k, work);
    max_into(&tv, tv_of(a, t, V, &sp, pa, pb));
    if (has_floor(P)) max_into(&ftv, tv_of(a, P->lf + (size_t)r * V, V, &sp, pa, pb));
  }
  /* the path's draws against its own distribution, reported: the sampler is shared code (no path
   * samples), so a misfit is vouch's own bug, gated at fixed seeds in tests/cpu/test_sampling.c;
   * gated here at p >= 0.001 it failed correct code by chance (seed 3223 on an H100, p 0.00062) */
  const long N = 20000;
  for (long k = 0; k < N; k++) cnt[vsample(P->lt, V, &sp, 1000, k, work)]++;
  vsample_distribution(P->lt, V, &sp, pa);
  double chi2, p;
  int dof;
  stat_chi2_gof(cnt, pa, V, &chi2, &dof, &p);
  const bounds b = derive(P, 0, ftv, fd);
  bool ok = tv <= b.tv;
  feat_set(c, "sampling", ok ? FEAT_PASS : FEAT_FAIL, tv, b.tv, b.src,
      "total variation between the reference's and the path's sampled distributions (T=1, top-k 40, top-p 0.95), "
      "max over 8 rows %.3g (bound %.3g); %ld draws of the path vs its own distribution: chi2 %.1f, dof %d, p %.3g "
      "(reported); same seed -> same token %.2f%% of %ld draws (reported)",
      tv, b.tv, N, chi2, dof, p, 100.0 * same / draws, draws);
  free(work);
  free(pa);
  free(pb);
  free(cnt);
  return V_OK;
}

/* DFA: state 0 admits class 0 (-> 1); state 1 admits class 1 (-> 1) or class 2 (-> 0). */
static int dfa_next(int state, int tok) {
  int cls = tok % 3;
  if (state == 0) return cls == 0 ? 1 : -1;
  return cls == 1 ? 1 : cls == 2 ? 0 : -1;
}

/* KL over the tokens the DFA admits in `state` (the rest have probability 0 in both). */
static double masked_kld(const float *a, const float *b, int V, int state, float *ma, float *mb, double *lp) {
  int n = 0;
  for (int i = 0; i < V; i++)
    if (dfa_next(state, i) >= 0) { ma[n] = a[i]; mb[n] = b[i]; n++; }
  return stat_kld(ma, mb, n, lp);
}

static vstatus check_structured(pair *P, const feat_opts *o, feat_check *c) {
  const int V = P->V, T = 32;
  VTRY(reset_all(P, 1));
  float *mr = malloc((size_t)V * sizeof *mr), *mt = malloc((size_t)V * sizeof *mt);
  double *lp = malloc((size_t)2 * V * sizeof *lp);
  if (!mr || !mt || !lp) { free(mr); free(mt); free(lp); return VERR("features: out of memory"); }
  vsampling sp = {.temperature = 1.0f, .top_p = 1.0f, .seed = o->seed};
  int state = 0, accepted = 0;
  int32_t tok = 0; /* class 0: a legal first token */
  double mk = 0, fk = 0;
  vstatus ts = V_OK, s = V_OK;
  for (int t = 0; t < T; t++) {
    state = dfa_next(state, tok);
    if ((s = step3(P, 1, t, &tok, 1, false, 0, &ts)) || ts) break;
    max_into(&mk, masked_kld(P->lr, P->lt, V, state, mr, mt, lp));
    if (has_floor(P)) max_into(&fk, masked_kld(P->lr, P->lf, V, state, mr, mt, lp));
    for (int i = 0; i < V; i++) mt[i] = dfa_next(state, i) >= 0 ? P->lt[i] : -INFINITY;
    tok = (int32_t)vsample(mt, V, &sp, 1, t, NULL);
    accepted += dfa_next(state, tok) >= 0;
  }
  free(mr);
  free(mt);
  free(lp);
  if (s) return s;
  if (ts) { path_failed(c, "structured", ts); return V_OK; }
  const bounds b = derive(P, fk, 0, 0);
  bool ok = accepted == T && mk <= b.kld;
  feat_set(c, "structured", ok ? FEAT_PASS : FEAT_FAIL, mk, b.kld, b.src,
      "%d/%d sampled tokens accepted by the DFA; masked-distribution max KLD %.3g nats (bound %.3g)", accepted, T, mk,
      b.kld);
  return V_OK;
}

static vstatus check_spec(pair *P, const feat_opts *o, feat_check *c) {
  const int V = P->V, K1 = 5, PL = 6;
  uint64_t key = philox_key(o->seed, "features.spec");
  int32_t tok[16];
  for (int i = 0; i < PL + K1; i++) tok[i] = rnd_tok(key, (uint64_t)i, V);
  VTRY(reset_all(P, 0));
  VTRY(reset_all(P, 1));
  float *single = P->lt + (size_t)8 * V; /* the path's single steps: rows 8..12 */
  /* the reference and the floor as single steps in slot 1 (rows 0..4), the floor's distance the bound */
  vstatus ts = V_OK;
  VTRY(step3(P, 1, 0, tok, PL, false, 8, &ts));
  for (int i = 0; i < K1; i++) VTRY(step3(P, 1, PL + i, tok + PL + i, 1, false, 8 + i, &ts));
  if (!ts) ts = step(P, &P->test, 0, 0, tok, PL, false, P->lt);
  if (!ts) ts = step(P, &P->test, 0, PL, tok + PL, K1, true, P->lt); /* K+1 rows 0..4 */
  if (ts) { path_failed(c, "speculative", ts); return V_OK; }
  double fk = 0, fd = 0;
  for (int i = 0; i < K1 && has_floor(P); i++) {
    const float *r = P->lr + (size_t)(8 + i) * V, *f = P->lf + (size_t)(8 + i) * V;
    max_into(&fk, stat_kld(r, f, V, P->scratch));
    max_into(&fd, stat_top2_error(r, f, V));
  }
  const bounds b = derive(P, fk, 0, fd);
  double mk = 0, mdl = 0;
  int same = 0, decided = 0;
  for (int i = 0; i < K1; i++) {
    const float *a = single + (size_t)i * V, *t = P->lt + (size_t)i * V;
    max_into(&mk, stat_kld(a, t, V, P->scratch));
    for (int j = 0; j < V; j++) max_into(&mdl, fabs((double)a[j] - t[j]));
    if (stat_top2_margin(a, V, NULL, NULL) > b.eps) {
      decided++;
      same += vsample_argmax(a, V) == vsample_argmax(t, V);
    }
  }
  bool ok = mk <= b.kld && same == decided;
  feat_set(c, "speculative", ok ? FEAT_PASS : FEAT_FAIL, mk, b.kld, b.src,
      "%d tokens in one verification step vs %d single steps (path %s): max KLD %.3g nats (bound %.3g), max |dlogit| "
      "%.3g, same argmax %d/%d rows whose margin > eps %.3g",
      K1, K1, P->test.ops->name, mk, b.kld, mdl, same, decided, b.eps);
  return V_OK;
}

/* Greedy decode of up to n tokens from `first` in slot 1, stopping at `stop` (-1: none); the
 * logits of step t in rows[t] when rows is not NULL. */
static vstatus greedy(pair *P, vpath *p, int V, int32_t first, int n, int stop, int32_t *out, int *stopped_at, float *rows,
                      float *lg) {
  if (p->ops->reset) VTRY(p->ops->reset(p->state, 1));
  int32_t tok = first;
  *stopped_at = -1;
  for (int t = 0; t < n; t++) {
    float *l = rows ? rows + (size_t)t * V : lg;
    VTRY(step(P, p, 1, t, &tok, 1, false, l));
    tok = (int32_t)vsample_argmax(l, V);
    out[t] = tok;
    if (tok == stop) { *stopped_at = t; return V_OK; }
  }
  return V_OK;
}

/* Start tokens screened by the reference alone, and of those the ones whose sequence the floor then
 * measures: the reference's greedy steps are cheap (the GPU engine), the floor's are not (fp32 on the
 * host), so many starts are screened and the floor runs along the few most decided ones. */
#define STOP_SCREEN 64
#define STOP_MEASURE 4

static vstatus check_stop(pair *P, const feat_opts *o, feat_check *c) {
  const int V = P->V, N = 16;
  int32_t a[16], b[16], best_a[16], seqs[STOP_SCREEN][16], first[STOP_SCREEN];
  double pmin[STOP_SCREEN][16]; /* prefix minimum of the reference's top-2 margin along each start's sequence */
  int sa, sb, best_u = -1;
  int32_t best_first = 0;
  double best_eps = 0;
  bounds bb = derive(P, 0, 0, 0);
  const uint64_t key = philox_key(o->seed, "features.stop");
  /* screen: the reference's greedy sequence from each start token, and how long it stays decided */
  for (int cand = 0; cand < STOP_SCREEN; cand++) {
    first[cand] = rnd_tok(key, (uint64_t)cand, V);
    VTRY(greedy(P, &P->ref, V, first[cand], N, -1, seqs[cand], &sa, P->lr, NULL));
    for (int t = 0; t < N; t++) {
      const double m = stat_top2_margin(P->lr + (size_t)t * V, V, NULL, NULL);
      pmin[cand][t] = t ? fmin(pmin[cand][t - 1], m) : m;
    }
  }
  /* the STOP_MEASURE starts whose 4th step is decided by the widest margin (then the 8th): the floor
   * measures its error along each, which sets eps, and the one decided longest is kept */
  bool used[STOP_SCREEN] = {false};
  for (int k = 0; k < STOP_MEASURE; k++) {
    int cand = -1;
    for (int i = 0; i < STOP_SCREEN; i++)
      if (!used[i] && (cand < 0 || pmin[i][3] > pmin[cand][3] ||
                       (pmin[i][3] == pmin[cand][3] && pmin[i][7] > pmin[cand][7])))
        cand = i;
    used[cand] = true;
    double fd = 0;
    if (has_floor(P)) { /* the floor teacher-forced along the reference's sequence */
      if (P->flr.ops->reset) VTRY(P->flr.ops->reset(P->flr.state, 1));
      VTRY(greedy(P, &P->ref, V, first[cand], N, -1, a, &sa, P->lr, NULL)); /* the reference's rows again */
      for (int t = 0; t < N; t++) {
        int32_t tk = t ? seqs[cand][t - 1] : first[cand];
        VTRY(step(P, &P->flr, 1, t, &tk, 1, false, P->lf));
        max_into(&fd, stat_top2_error(P->lr + (size_t)t * V, P->lf, V));
      }
    }
    const bounds bc = derive(P, 0, 0, fd);
    int u = 0;
    while (u < N && pmin[cand][u] > bc.eps) u++;
    if (u > best_u) {
      best_u = u;
      best_first = first[cand];
      best_eps = bc.eps;
      bb = bc;
      memcpy(best_a, seqs[cand], sizeof best_a);
    }
  }
  if (best_u < 2) {
    feat_set(c, "stop_tokens", FEAT_UNDECIDED, NAN, NAN, bb.src,
        "undecided: of %d start tokens (the %d most decided measured against the floor) none keeps the reference's "
        "greedy sequence decided (margin > eps %.3g) for 2 steps, so no stop step can be compared",
        STOP_SCREEN, STOP_MEASURE, best_eps);
    return V_OK;
  }
  const int sidx = best_u > 8 ? 8 : best_u - 1;
  const int stop = best_a[sidx];
  int expect = 0;
  while (best_a[expect] != stop) expect++;
  /* the reference is deterministic: its run to the stop is best_a up to `expect` */
  memcpy(a, best_a, sizeof a);
  sa = expect;
  vstatus ts = greedy(P, &P->test, V, best_first, N, stop, b, &sb, NULL, P->lt);
  if (ts) { path_failed(c, "stop_tokens", ts); return V_OK; }
  const int L = expect + 1; /* tokens compared: the stop lies inside the decided prefix (sidx < best_u) */
  bool same = sa == expect && sb == expect;
  for (int i = 0; same && i < L; i++) same = a[i] == b[i];
  feat_set(c, "stop_tokens", same ? FEAT_PASS : FEAT_FAIL, sb, sa, bb.src,
      "stop token %d: reference stops after %d tokens, path after %d; %d tokens compared (the reference's sequence is "
      "decided, margin > eps %.3g, for %d steps)%s",
      stop, sa + 1, sb + 1, L, best_eps, best_u, same ? ", same tokens" : ", tokens or stop step differ");
  return V_OK;
}

/* The checks in the order they run, print and are stored. */
static const struct {
  const char *name;
  vstatus (*run)(pair *P, const feat_opts *o, feat_check *c); /* V_ERR: the reference or floor broke */
} CHECKS[FEAT_N_CHECKS] = {{"full_context", check_full}, {"sampling", check_sampling}, {"structured", check_structured},
                           {"speculative", check_spec}, {"stop_tokens", check_stop}};

const char *features_check_name(int i) { return i >= 0 && i < FEAT_N_CHECKS ? CHECKS[i].name : NULL; }

struct feat_session {
  pair P;             /* the paths (open once `opened`) and their logit rows */
  feat_opts o;        /* the options (a copy) */
  int full;           /* the full-context check's context (o.full_ctx, or max_position_embeddings) */
  bool opened;        /* the first check opened the paths */
  vstatus test_st;    /* the path under test failed to open with this (V_OK: it opened) */
  char test_msg[512]; /* ... and this message: every check reports it */
  bool rows_done;     /* the sampling rows are decoded (sampling_rows) */
  bool broken;        /* a check returned an error: no further check runs */
};

vstatus features_begin(const ds_model *m, const feat_opts *o, feat_session **out) {
  *out = NULL;
  int full = o->full_ctx > 0 ? o->full_ctx : m->cfg.max_position_embeddings;
  if (full > m->cfg.max_position_embeddings || full < 16)
    return VERR("features: option 'full_ctx' %d outside [16, max_position_embeddings %d]", full,
                m->cfg.max_position_embeddings);
  if (o->floor && !strcmp(o->floor->name, o->ref->name))
    return VERR("features: option 'floor' must be another computation than the reference '%s'", o->ref->name);
  feat_session *f = calloc(1, sizeof *f);
  if (!f) return VERR("features: out of memory");
  f->o = *o;
  f->full = full;
  f->P.m = m;
  f->P.V = m->cfg.vocab_size;
  f->P.o = &f->o;
  *out = f;
  return V_OK;
}

/* Opens the reference, the floor and the path under test, and the logit rows. Error: the reference
 * or the floor does not open, or out of memory; the path under test failing to open is kept in
 * f->test_st (its checks report it). */
static vstatus open_paths(feat_session *f) {
  pair *P = &f->P;
  f->opened = true;
  vpath_opts po = {.max_seq = 2, .max_ctx = f->full, .n_threads = f->o.n_threads, .expect_fallback = f->o.expect_fallback};
  VTRY(vpath_open(&P->ref, f->o.ref, P->m, &po));
  if (f->o.floor) {
    vpath_opts fo = {.max_seq = 2, .max_ctx = 64, .n_threads = f->o.n_threads, .expect_fallback = f->o.expect_fallback};
    vstatus fs = vpath_open(&P->flr, f->o.floor, P->m, &fo);
    if (fs) { verr_prefix("features: floor path"); return fs; }
  }
  f->test_st = vpath_open(&P->test, f->o.path, P->m, &po);
  if (f->test_st) {
    snprintf(f->test_msg, sizeof f->test_msg, "%s", verr_msg());
    return V_OK;
  }
  P->lr = malloc((size_t)ROWS * P->V * sizeof(float));
  P->lt = malloc((size_t)ROWS * P->V * sizeof(float));
  P->lf = malloc((size_t)ROWS * P->V * sizeof(float));
  P->scratch = malloc((size_t)2 * P->V * sizeof(double));
  if (!P->lr || !P->lt || !P->lf || !P->scratch) return VERR("features: out of memory");
  const vrouting *r = f->o.routing;
  if (r && r->kind != ROUTE_NATURAL && r->n_moe > 0) {
    P->fexp = malloc((size_t)r->n_moe * STEP_MAX * r->K * sizeof(int32_t));
    P->fone = malloc((size_t)r->n_moe * r->K * sizeof(int32_t));
    if (!P->fexp || !P->fone) return VERR("features: out of memory");
  }
  return V_OK;
}

vstatus features_check(feat_session *f, int i, feat_check *out) {
  if (i < 0 || i >= FEAT_N_CHECKS) return VERR("features: check %d outside [0, %d)", i, FEAT_N_CHECKS);
  if (f->broken) return VERR("features: check %s not run: an earlier check broke the reference or the floor", CHECKS[i].name);
  memset(out, 0, sizeof *out);
  vstatus s = f->opened ? V_OK : open_paths(f);
  /* each check's record names what ran in that check (features_rec_ran) */
  if (!s) {
    vpath_ran_clear(&f->P.ref);
    vpath_ran_clear(&f->P.test);
    vpath_ran_clear(&f->P.flr);
  }
  if (!s && f->test_st) { /* every check reports the failed open */
    feat_set(out, CHECKS[i].name, f->test_st == V_UNSUPPORTED ? FEAT_NOT_SUPPORTED : FEAT_FAIL, NAN, NAN, NULL, "%s", f->test_msg);
    return V_OK;
  }
  /* the sampling rows before the first of full_context (its margin epsilon) and sampling that runs */
  if (!s && i <= 1 && !f->rows_done) {
    s = sampling_rows(&f->P, &f->o);
    f->rows_done = s == V_OK;
  }
  if (!s) s = CHECKS[i].run(&f->P, &f->o, out);
  f->broken = s != V_OK;
  return s;
}

vstatus features_rec_ran(const feat_session *f, vrecord *rec) {
  if (!f->opened) return V_OK;
  VTRY(rec_ran(rec, f->o.ref->name, vpath_ran(&f->P.ref)));
  if (f->o.floor) VTRY(rec_ran(rec, f->o.floor->name, vpath_ran(&f->P.flr)));
  return rec_ran(rec, f->o.path->name, vpath_ran(&f->P.test));
}

void features_end(feat_session *f) {
  if (!f) return;
  pair *P = &f->P;
  free(P->lr);
  free(P->lt);
  free(P->lf);
  free(P->scratch);
  free(P->fexp);
  free(P->fone);
  if (P->test.ops) vpath_close(&P->test);
  if (P->flr.ops) vpath_close(&P->flr);
  if (P->ref.ops) vpath_close(&P->ref);
  free(f);
}
