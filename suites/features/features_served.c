/* The server's production-feature checks (`vouch features --server`; suites/features/features_served.h): each
 * feature phrased as requests to /v1/completions and judged from what comes back. The reference path
 * on the same checkpoint only chooses the prompt: of up to 16 start tokens the one whose greedy
 * sequence the reference decides longest (top-2 margin > eps at every step), so the server's greedy
 * tokens are compared with the reference's only where a correct computation cannot differ.
 *
 *  max_tokens       16 greedy tokens with ignore_eos: exactly 16, finish_reason "length", the
 *                   reference's tokens over its decided prefix (exact rule + margin rule).
 *  stop_tokens      the same with stop_token_ids = [the reference's token at step <= 8 of its decided
 *                   prefix]: the reference's tokens up to the stop's first occurrence, then the end,
 *                   finish_reason "stop" (the stop token itself may be returned or not).
 *  min_tokens       the same stop with min_tokens = its step + 3: at least that many tokens, the stop
 *                   id not among the first min_tokens ones (the tokens before the stop compared).
 *  seeded_sampling  T = 1, top-k 10, top-p 0.9, seed S, 24 tokens, 20 logprobs; twice with seed S and
 *                   once with S + 1. Same seed: the same tokens (exact). Every sampled token among the
 *                   10 most likely and with less than top_p of the mass above it (the definitions of
 *                   top-k and top-p; whichever order a server applies them in). Seed S + 1 must give
 *                   other tokens unless the chance that it repeats them, at most the product over the
 *                   steps of p(token) / (mass of it and the tokens above it), is >= 0.001.
 *  logprobs         8 greedy tokens with 5 logprobs: at least 5 alternatives at every position, all
 *                   named by a token id of the vocabulary, each <= 0, their mass <= 1 + 1e-4, the
 *                   chosen token the most likely with the same logprob (1e-5); how many the server
 *                   gave is reported.
 *  structured       structured_outputs.choice = 3 token-id lists whose first tokens differ from the
 *                   reference's greedy first token: the output is exactly one of them, finish "stop".
 *                   An HTTP 4xx is not_supported (the server says no); output outside the choices
 *                   fails (it ignored the constraint: the unconstrained greedy output is none of them).
 *  max_model_len    /v1/models' max_model_len L (none: not_supported; above the checkpoint's
 *                   max_position_embeddings: fail): L - 1 prompt tokens and 1 generated are served;
 *                   L prompt tokens and 1 generated (L + 1) are refused with an HTTP 4xx.
 * A request that breaks (connection, HTTP 5xx, a stream that is not JSON, text without token ids) is
 * an error naming the check: the session runs no further check. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/interrupt.h"
#include "common/sampling.h"
#include "common/philox.h"
#include "suites/features/features_served.h"
#include "suites/paths/paths.h"
#include "suites/engine/stats_tests.h"

#define SEQ 16        /* greedy tokens asked */
#define CANDIDATES 16 /* start tokens tried for the longest decided reference sequence */
#define SAMPLED 24    /* tokens of a seeded sampling request */

static const char *const NAMES[FEAT_SRV_N_CHECKS] = {"max_tokens", "stop_tokens",   "min_tokens",   "seeded_sampling",
                                                     "logprobs",   "structured",    "max_model_len"};

const char *features_served_check_name(int i) { return i >= 0 && i < FEAT_SRV_N_CHECKS ? NAMES[i] : NULL; }

struct feat_served {
  feat_served_opts o;     /* the options (a copy) */
  bool ready;             /* the reference's sequences are decoded */
  bool broken;            /* a check returned an error: no further check runs */
  int32_t first;          /* the start token: the prompt of the greedy checks */
  int32_t seq[SEQ];       /* the reference's greedy tokens after it */
  int decided;            /* steps of seq whose reference margin exceeds eps (the decided prefix) */
};

vstatus features_served_begin(const feat_served_opts *o, feat_served **out) {
  *out = calloc(1, sizeof **out);
  if (!*out) return VERR("features: out of memory");
  (*out)->o = *o;
  return V_OK;
}

void features_served_end(feat_served *f) { free(f); }

/* Opens the reference and keeps, of CANDIDATES start tokens, the one whose greedy sequence it decides
 * longest. Error: the reference does not open or run. */
static vstatus reference_sequence(feat_served *f) {
  const ds_model *m = f->o.m;
  const int V = m->cfg.vocab_size;
  vpath ref = {0};
  vpath_opts po = {.max_seq = 1, .max_ctx = SEQ + 1, .n_threads = f->o.n_threads, .expect_fallback = f->o.expect_fallback};
  vstatus st = vpath_open(&ref, f->o.ref, m, &po);
  if (st) { verr_prefix("features: reference path"); return st; }
  float *lg = malloc((size_t)V * sizeof *lg);
  if (!lg) st = VERR("features: out of memory");
  const uint64_t key = philox_key(f->o.seed, "features.server");
  f->decided = -1;
  for (int c = 0; c < CANDIDATES && !st && f->decided < SEQ; c++) {
    int32_t tok = (int32_t)(philox_unit(key, (uint64_t)c) * V) % V, first = tok, seq[SEQ];
    int u = 0;
    bool on = true;
    if (ref.ops->reset && (st = ref.ops->reset(ref.state, 0))) break;
    for (int t = 0; t < SEQ && !st; t++) {
      int n1 = 1, seq0 = 0, pos = t;
      vstep s = {.n_seq = 1, .seq = &seq0, .n_tokens = &n1, .start_pos = &pos, .tokens = &tok};
      if ((st = ref.ops->forward(ref.state, &s, lg))) break;
      on = on && stat_top2_margin(lg, V, NULL, NULL) > f->o.margin_eps;
      u += on;
      seq[t] = tok = (int32_t)vsample_argmax(lg, V);
    }
    if (!st && u > f->decided) {
      f->decided = u;
      f->first = first;
      memcpy(f->seq, seq, sizeof seq);
    }
  }
  if (st) verr_prefix("features: reference path %s", f->o.ref->name);
  free(lg);
  vpath_close(&ref);
  return st;
}

/* Sends q alone. Error: the client fails; a request that broke (not an HTTP 4xx answer: the feature's
 * refusal, which the check judges) is an error naming check `name`. */
static vstatus send(const feat_served *f, const char *name, served_req *q) {
  q->keep_ids = true;
  VTRY(served_run(&f->o.t->conn, f->o.t->model, q, 1, 1, vinterrupted));
  if (q->ok || (q->http >= 400 && q->http < 500)) return V_OK;
  return VERR("server %s: check %s: %s", f->o.t->conn.shown, name, q->t_send == 0 ? "not sent (interrupted)" : q->error);
}

/* Where tokens a[0..n) first differ from the reference's over its decided prefix (-1: they agree). */
static int first_diff(const feat_served *f, const int32_t *a, int n) {
  for (int i = 0; i < n && i < f->decided; i++)
    if (a[i] != f->seq[i]) return i;
  return -1;
}

/* The step of the stop token, its id in *stop: the reference's token at the latest step <= 8 of the
 * decided prefix whose first occurrence is after step 0 (a server may leave the stop token out, and
 * one stopping at step 0 would then return no token at all), else step 0's (the prefix is one
 * token repeated). */
static int stop_step(const feat_served *f, int32_t *stop) {
  for (int s = f->decided > 8 ? 8 : f->decided - 1; s > 0; s--) {
    int e = 0;
    while (f->seq[e] != f->seq[s]) e++;
    if (e >= 1) {
      *stop = f->seq[s];
      return e;
    }
  }
  *stop = f->seq[0];
  return 0;
}

/* A greedy request after the start token. */
static served_req greedy_req(const feat_served *f, int max_tokens, const char *extra) {
  return (served_req){.prompt = &f->first, .n_prompt = 1, .max_tokens = max_tokens, .extra = extra};
}

static vstatus check_max_tokens(feat_served *f, feat_check *c) {
  served_req q = greedy_req(f, SEQ, NULL);
  vstatus st = send(f, NAMES[0], &q);
  if (!st) {
    const int d = q.ok ? first_diff(f, q.ids, q.n_tokens) : -1;
    const bool ok = q.ok && q.n_tokens == SEQ && !strcmp(q.finish, "length") && d < 0;
    feat_set(c, NAMES[0], ok ? FEAT_PASS : FEAT_FAIL, q.n_tokens, SEQ, "exact: max_tokens with ignore_eos; margin rule (--margin-eps)",
        "%d tokens asked with ignore_eos: %d returned, finish_reason '%s'; %s over the reference's decided prefix of %d "
        "(margin > eps %.3g)%s%s",
        SEQ, q.n_tokens, q.finish, d < 0 ? "the reference's greedy tokens" : "tokens differ", f->decided,
        f->o.margin_eps, q.ok ? "" : ": refused: ", q.ok ? "" : q.error);
    if (d >= 0) snprintf(c->detail + strlen(c->detail), sizeof c->detail - strlen(c->detail),
                         " (first at step %d: %d, reference %d)", d, q.ids[d], f->seq[d]);
  }
  served_req_free(&q);
  return st;
}

static vstatus check_stop(feat_served *f, feat_check *c) {
  int32_t stop;
  const int e = stop_step(f, &stop);
  char extra[64];
  snprintf(extra, sizeof extra, "{\"stop_token_ids\": [%d]}", stop);
  served_req q = greedy_req(f, SEQ, extra);
  vstatus st = send(f, NAMES[1], &q);
  if (!st) {
    /* the stop's step returned (e + 1 tokens) or left out (e tokens), nothing after it */
    const bool len_ok = q.ok && (q.n_tokens == e + 1 || q.n_tokens == e);
    const bool ok = len_ok && first_diff(f, q.ids, q.n_tokens) < 0 && !strcmp(q.finish, "stop");
    feat_set(c, NAMES[1], ok ? FEAT_PASS : FEAT_FAIL, q.n_tokens, e + 1, "exact: stop_token_ids; margin rule (--margin-eps)",
        "stop_token_ids [%d] (the reference's token at step %d): the reference stops after %d tokens, the server "
        "returned %d, finish_reason '%s'%s%s%s",
        stop, e, e + 1, q.n_tokens, q.finish, ok ? (q.n_tokens == e ? ", the stop token left out" : ", same tokens")
                                                 : len_ok ? ", tokens or finish_reason differ" : ": it did not stop there",
        q.ok ? "" : ": refused: ", q.ok ? "" : q.error);
  }
  served_req_free(&q);
  return st;
}

static vstatus check_min_tokens(feat_served *f, feat_check *c) {
  int32_t stop;
  const int e = stop_step(f, &stop), mt = e + 3;
  char extra[96];
  snprintf(extra, sizeof extra, "{\"stop_token_ids\": [%d], \"min_tokens\": %d}", stop, mt);
  served_req q = greedy_req(f, SEQ, extra);
  vstatus st = send(f, NAMES[2], &q);
  if (!st) {
    int at = -1; /* the stop id among the first min_tokens tokens */
    for (int i = 0; q.ok && i < q.n_tokens && i < mt && at < 0; i++)
      if (q.ids[i] == stop) at = i;
    const bool same = !q.ok || first_diff(f, q.ids, e) < 0;
    const bool ok = q.ok && q.n_tokens >= mt && at < 0 && same;
    feat_set(c, NAMES[2], ok ? FEAT_PASS : FEAT_FAIL, q.n_tokens, mt, "exact: min_tokens masks the stop ids; margin rule (--margin-eps)",
        "stop_token_ids [%d] (the reference's token at step %d) with min_tokens %d: %d tokens returned%s%s%s%s",
        stop, e, mt, q.n_tokens, at >= 0 ? ", the stop id at a step before min_tokens" : q.ok && q.n_tokens < mt ?
        ": it stopped before min_tokens" : "", same ? "" : ", the tokens before the stop differ from the reference's",
        q.ok ? "" : ": refused: ", q.ok ? "" : q.error);
  }
  served_req_free(&q);
  return st;
}

/* The logprob of token id at position i of q (NaN: not among what the server gave). */
static double lp_of(const served_req *q, int i, int32_t id) {
  const served_top *t = &q->top[i];
  for (int k = 0; k < t->n; k++)
    if (t->id[k] == id) return t->lp[k];
  return NAN;
}

static vstatus check_seeded(feat_served *f, feat_check *c) {
  const int TOPK = 10, N = SAMPLED;
  const double TOPP = 0.9, CHANCE = 1e-3;
  vsampling a = {.temperature = 1.0f, .top_k = TOPK, .top_p = (float)TOPP, .seed = f->o.seed}, b = a;
  b.seed = f->o.seed + 1;
  served_req q[3];
  for (int i = 0; i < 3; i++)
    q[i] = (served_req){.prompt = &f->first, .n_prompt = 1, .max_tokens = N, .logprobs = 20, .sampling = i < 2 ? &a : &b};
  vstatus st = V_OK;
  for (int i = 0; i < 3 && !st; i++) st = send(f, NAMES[3], &q[i]);
  if (!st && !(q[0].ok && q[1].ok && q[2].ok)) {
    const served_req *r = !q[0].ok ? &q[0] : !q[1].ok ? &q[1] : &q[2];
    feat_set(c, NAMES[3], FEAT_FAIL, NAN, NAN, NULL, "T=1, top_k %d, top_p %.2g, seed: refused: %s", TOPK, TOPP, r->error);
  } else if (!st) {
    const bool same = q[0].n_tokens == q[1].n_tokens && !memcmp(q[0].ids, q[1].ids, (size_t)q[0].n_tokens * sizeof(int32_t));
    const bool other = q[0].n_tokens != q[2].n_tokens || memcmp(q[0].ids, q[2].ids, (size_t)q[0].n_tokens * sizeof(int32_t));
    int outside_k = -1, outside_p = -1, unknown = 0;
    double chance = 1;
    for (int i = 0; i < q[0].n_tokens; i++) {
      const served_top *t = &q[0].top[i];
      const double lc = lp_of(&q[0], i, q[0].ids[i]);
      if (t->n == 0 || isnan(lc)) { unknown++; continue; }
      double above = 0; /* the mass of the tokens more likely than the chosen one */
      int rank = 0;
      for (int k = 0; k < t->n; k++)
        if (t->lp[k] > lc) above += exp(t->lp[k]), rank++;
      if (rank >= TOPK && outside_k < 0) outside_k = i;
      if (above >= TOPP + 1e-4 && outside_p < 0) outside_p = i;
      chance *= exp(lc) / (above + exp(lc)); /* its renormalized probability is at most this */
    }
    const bool decides = chance < CHANCE; /* a repeat under another seed is evidence the seed is ignored */
    const bool ok = same && outside_k < 0 && outside_p < 0 && (other || !decides);
    feat_set(c, NAMES[3], ok ? FEAT_PASS : FEAT_FAIL, chance, CHANCE,
        "exact (same seed); the definitions of top-k/top-p; chance of a repeat bounded from the server's logprobs",
        "T=1, top_k %d, top_p %.2g, %d tokens: seed %llu twice %s; seed %llu %s (chance of a repeat <= %.2g, bound %.2g%s); "
        "sampled tokens outside the top %d: %s, with >= top_p of the mass above them: %s (%d positions unknown)",
        TOPK, TOPP, q[0].n_tokens, (unsigned long long)a.seed, same ? "gave the same tokens" : "gave DIFFERENT tokens",
        (unsigned long long)b.seed, other ? "gave other tokens" : "gave the SAME tokens", chance, CHANCE,
        decides ? "" : ": not decided", TOPK, outside_k < 0 ? "none" : "SOME", outside_p < 0 ? "none" : "SOME", unknown);
  }
  for (int i = 0; i < 3; i++) served_req_free(&q[i]);
  return st;
}

static vstatus check_logprobs(feat_served *f, feat_check *c) {
  const int K = 5, N = 8, V = f->o.m->cfg.vocab_size;
  served_req q = greedy_req(f, N, NULL);
  q.logprobs = K;
  vstatus st = send(f, NAMES[4], &q);
  if (!st && !q.ok) feat_set(c, NAMES[4], FEAT_FAIL, NAN, K, NULL, "%d greedy tokens with logprobs %d: refused: %s", N, K, q.error);
  else if (!st) {
    int gmin = 1 << 30, gmax = 0, unnamed = -1, bad_val = -1, not_top = -1;
    for (int i = 0; i < q.n_tokens; i++) {
      const served_top *t = &q.top[i];
      if (t->given < gmin) gmin = t->given;
      if (t->given > gmax) gmax = t->given;
      if (t->n == 0) { if (unnamed < 0) unnamed = i; continue; }
      char why[160];
      if (bad_val < 0 && served_top_problem(t, V, why, sizeof why)) bad_val = i;
      /* greedy: the chosen token is the most likely one, and its logprob is that one's */
      if ((t->id[0] != q.ids[i] || !(fabs(t->chosen_lp - t->lp[0]) <= 1e-5)) && not_top < 0) not_top = i;
    }
    const bool ok = gmin >= K && unnamed < 0 && bad_val < 0 && not_top < 0;
    feat_set(c, NAMES[4], ok ? FEAT_PASS : FEAT_FAIL, gmin, K, "exact: the logprobs asked; a distribution's logprobs",
        "%d greedy tokens with logprobs %d: the server gave %d-%d top logprobs per position%s%s%s", q.n_tokens, K, gmin,
        gmax, gmin < K ? ", FEWER than asked" : "", unnamed >= 0 ? ", some not named by token id" : "",
        bad_val >= 0 ? ", logprobs above 0, a mass above 1 or ids outside the vocabulary" : not_top >= 0 ? ", the greedy token not the most likely" : "");
  }
  served_req_free(&q);
  return st;
}

static vstatus check_structured(feat_served *f, feat_check *c) {
  const int V = f->o.m->cfg.vocab_size, LEN[3] = {2, 3, 4};
  int32_t ch[3][4];
  const uint64_t key = philox_key(f->o.seed, "features.server.choice");
  char extra[400] = "{\"structured_outputs\": {\"choice\": [";
  for (int i = 0, n = 0; i < 3; i++) {
    for (int k = 0; k < LEN[i]; k++) {
      int32_t t;
      do t = (int32_t)(philox_unit(key, (uint64_t)n++) * V) % V;
      while (k == 0 && t == f->seq[0]); /* unconstrained greedy output is none of the choices */
      ch[i][k] = t;
      snprintf(extra + strlen(extra), sizeof extra - strlen(extra), "%s%d", k ? ", " : i ? "], [" : "[", t);
    }
  }
  snprintf(extra + strlen(extra), sizeof extra - strlen(extra), "]]}}");
  served_req q = greedy_req(f, 8, extra);
  vstatus st = send(f, NAMES[5], &q);
  if (!st && !q.ok) {
    feat_set(c, NAMES[5], FEAT_NOT_SUPPORTED, NAN, NAN, NULL, "structured_outputs.choice over token ids refused: %s", q.error);
  } else if (!st) {
    int which = -1;
    for (int i = 0; i < 3 && which < 0; i++)
      if (q.n_tokens == LEN[i] && !memcmp(q.ids, ch[i], (size_t)LEN[i] * sizeof(int32_t))) which = i;
    const bool ok = which >= 0 && !strcmp(q.finish, "stop");
    char got[96] = "";
    for (int i = 0; i < q.n_tokens && i < 8; i++) snprintf(got + strlen(got), sizeof got - strlen(got), "%s%d", i ? "," : "", q.ids[i]);
    feat_set(c, NAMES[5], ok ? FEAT_PASS : FEAT_FAIL, which, NAN, "exact: the output is one of the choices",
        "structured_outputs.choice of 3 token-id lists (none starting with the unconstrained greedy token %d): the "
        "server returned [%s], finish_reason '%s': %s", f->seq[0], got, q.finish,
        which >= 0 ? "one of the choices" : "NOT one of the choices (the constraint was ignored)");
  }
  served_req_free(&q);
  return st;
}

static vstatus check_max_model_len(feat_served *f, feat_check *c) {
  const int L = f->o.t->max_len, maxpos = f->o.m->cfg.max_position_embeddings, V = f->o.m->cfg.vocab_size;
  const char *src = "the server's declared max_model_len";
  if (!L) {
    feat_set(c, NAMES[6], FEAT_NOT_SUPPORTED, NAN, NAN, src, "the server declares no max_model_len in /v1/models");
    return V_OK;
  }
  if (L > maxpos) {
    feat_set(c, NAMES[6], FEAT_FAIL, L, maxpos, src, "max_model_len %d exceeds the checkpoint's max_position_embeddings %d", L, maxpos);
    return V_OK;
  }
  int32_t *p = malloc((size_t)L * sizeof *p);
  if (!p) return VERR("features: out of memory for a %d-token prompt", L);
  const uint64_t key = philox_key(f->o.seed, "features.server.context");
  for (int i = 0; i < L; i++) p[i] = (int32_t)(philox_unit(key, (uint64_t)i) * V) % V;
  served_req in = {.prompt = p, .n_prompt = L - 1, .max_tokens = 1}, past = {.prompt = p, .n_prompt = L, .max_tokens = 1};
  vstatus st = send(f, NAMES[6], &in);
  if (!st) st = send(f, NAMES[6], &past);
  if (!st) {
    const bool fits = in.ok && in.n_tokens == 1, refused = !past.ok && past.http >= 400 && past.http < 500;
    feat_set(c, NAMES[6], fits && refused ? FEAT_PASS : FEAT_FAIL, L, L, src,
        "max_model_len %d: %d prompt tokens + 1 %s; %d + 1 %s", L, L - 1,
        fits ? "served" : in.ok ? "gave no token" : "REFUSED", L,
        refused ? "refused (HTTP 4xx)" : "SERVED past the declared length (it truncates or declares wrongly)");
    if (!in.ok) snprintf(c->detail + strlen(c->detail), sizeof c->detail - strlen(c->detail), ": %.200s", in.error);
  }
  served_req_free(&in);
  served_req_free(&past);
  free(p);
  return st;
}

static vstatus (*const RUN[FEAT_SRV_N_CHECKS])(feat_served *, feat_check *) = {
    check_max_tokens, check_stop, check_min_tokens, check_seeded, check_logprobs, check_structured, check_max_model_len};

vstatus features_served_check(feat_served *f, int i, feat_check *out) {
  if (i < 0 || i >= FEAT_SRV_N_CHECKS) return VERR("features: server check %d outside [0, %d)", i, FEAT_SRV_N_CHECKS);
  if (f->broken) return VERR("features: check %s not run: an earlier check broke", NAMES[i]);
  memset(out, 0, sizeof *out);
  vstatus s = V_OK;
  if (!f->ready) {
    s = reference_sequence(f);
    f->ready = s == V_OK;
  }
  if (!s && i <= 2 && f->decided < 2) { /* the greedy checks need a decided sequence */
    feat_set(out, NAMES[i], FEAT_NOT_SUPPORTED, NAN, NAN, "margin rule (--margin-eps)",
        "every one of %d start tokens reaches a near-tie (reference margin <= eps %.3g) within 2 greedy steps", CANDIDATES,
        f->o.margin_eps);
    return V_OK;
  }
  if (!s) s = RUN[i](f, out);
  f->broken = s != V_OK;
  return s;
}
