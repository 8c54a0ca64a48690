/* vouch diverge: teacher-forced divergence (suites/diverge/diverge.h) as a suite on the driver
 * (suites/engine/suite.h). A case is one (batch, context) point: all paths run it together, and it makes
 * one record per compared path ("b<B>_c<C>_t<T><shape>_vs_<reference>"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites/engine/cli.h"
#include "suites/engine/record.h"
#include "suites/diverge/diverge_served.h"
#include "suites/served/served_pair.h"
#include "suites/engine/bounds.h"
#include "suites/diverge/diverge.h"
#include "suites/diverge/diverge_suite.h"
#include "suites/diverge/diverge_text.h"
#include "suites/engine/stats_tests.h"

static const char DIVERGE_USAGE[] =
    "usage: vouch diverge --paths REF,P1[,P2..] [--model DIR|synth:PRESET] [--batch 1,8,64] [--context 0,4k]\n"
    "                     [--tokens T] [--seed S] [--layers N] [--threads N] [--max-kld K] [--min-same-top PCT]\n"
    "                     [--margin-eps E] [--baseline PATH] [--ragged|--skew] [--spec K] [--routing natural|zipf:S|..]\n"
    "                     [--alternate-natural] [--server URL [--server-model NAME] [--server-logprobs K]]\n"
    "                     [--path-lib FILE] [--expect-fallback] [--json FILE]\n"
    "  Teacher-forced divergence of each path against the first on one token stream: the\n"
    "  first path's temperature-1 samples are fed to every path. For each batch x context:\n"
    "  the context is filled by fill_cache (the shared synthetic-cache rule, same seed on every\n"
    "  path), then T decode steps run. Prints mean KLD +/- standard error, KLD percentiles\n"
    "  (99.9, 99, 95, median), same-top-token %, RMS dp (next token), max |dlogit| and NaN/Inf.\n"
    "  --ragged: sequence b's context is C x (batch - b) / batch (mixed cached lengths in one step);\n"
    "  --skew: sequence 0 holds the context C, the others none (one long row among empty ones);\n"
    "  --spec K: K+1 tokens per sequence per step (a verification step), every row compared;\n"
    "  --routing zipf:S forces skewed experts (one expert takes most tokens; `vouch sweep --help`);\n"
    "  --alternate-natural: with forced routing, every odd step uses the router's experts (one path\n"
    "  instance switches between forced and natural routing at the same row count).\n"
    "  Verdict with --baseline B (the unoptimized bf16 engine next to an fp32 reference): B's own\n"
    "  distance from the reference is the noise floor; a path passes when mean KLD <= k^2 x (B's mean\n"
    "  + 3 se), and on the rows whose top-2 margin exceeds 2k x B's largest top-2 logit error (k = 2)\n"
    "  its argmax leaves the reference's no more often than B's beyond chance (McNemar p < 0.01 over\n"
    "  the rows only one of the two missed; docs/verdicts.md). Without --baseline: mean KLD <=\n"
    "  --max-kld (default 0.01 nats) and same-top >= --min-same-top (default 90) over the rows whose\n"
    "  margin exceeds --margin-eps (default 0). No logit may be NaN/Inf.\n"
    "  Path names take suffixes: NAME:tpN (TP N; cpu-ref as simulated ranks), NAME:tpN:dcp (plus\n"
    "  decode context parallelism) and NAME:tpN:ep (routed experts expert-parallel, cpu-ref only),\n"
    "  e.g. --paths cpu-ref,cpu-ref:tp4,cpu-ref:tp4:dcp,cpu-ref:tp4:ep.\n"
    "  --server URL: an OpenAI-compatible server of the same checkpoint as one more compared path\n"
    "  (server:MODEL; --paths may then name the reference alone), teacher-forced on the reference's\n"
    "  stream, one completion per row (prompt = the row's inputs, 1 greedy token, --server-logprobs top\n"
    "  logprobs, default 20): its token against the reference's argmax, its top-k logprobs against the\n"
    "  reference's log-softmax (KLD over the top-k tokens and the rest: a lower bound of the KLD);\n"
    "  context 0 only, no --spec or forced routing (docs/serving.md).\n"
    "  --server URL --ref-server URL --prompts FILE: no model; the server against the reference build of\n"
    "  the same model on real text (vouch diverge --ref-server X --help).\n"
    VSUITE_EXPECT_FALLBACK_HELP
    "  defaults: --model synth:tiny --batch 1 --context 0 --tokens 32\n";

/* The verdict of one compared path at the point just run (diverge_record), for its table row. */
typedef struct {
  const char *status; /* "pass", "FAIL", "base" (supported paths) */
  bool is_base;       /* the path is the --baseline: evidence, not a subject */
  bool same_ok;       /* the argmax rule held */
  int decided, flips; /* rows whose reference margin exceeds eps; of those, argmax flips */
  long dec_b;         /* decided rows the baseline's argmax flipped */
  long only_p, only_b; /* rows only the path missed, only the baseline missed */
  double mcn_p;       /* McNemar p of only_p vs only_b */
  double eps;         /* the margin epsilon of the argmax rule */
  double kld_bound;   /* the KLD bound it was judged by */
  double bulk, bulk_se; /* with a baseline: trimmed mean of KLD - k^2 x the baseline's, row by row, and its se */
  bool bulk_ok;       /* the bulk arm held: bulk <= 3 bulk_se (true without a baseline) */
  bool lp_ok;         /* a server: it gave at least the top logprobs asked on every row (else true) */
} path_verdict;

/* The suite's state: its options, and the point in flight. */
typedef struct {
  const char *batch_s, *ctx_s;   /* --batch, --context as given */
  long tokens;                   /* --tokens: teacher-forced steps per sequence */
  double max_kld, min_same;      /* --max-kld, --min-same-top: the bounds without --baseline */
  double margin_eps;             /* --margin-eps: rows counted by --min-same-top */
  const char *baseline;          /* --baseline: a compared path whose distance to the reference calibrates the bounds */
  const char *routing_s;         /* --routing as given */
  long spec_k;                   /* --spec: draft tokens per step */
  diverge_ctx ragged;            /* --ragged or --skew (DIVERGE_CTX_UNIFORM: neither) */
  bool alternate;                /* --alternate-natural */
  long *batches, *ctxs;          /* [nb], [nc]: the points are batches x contexts (options_done) */
  int nb, nc;
  vrouting routing;         /* --routing parsed and prepared for the model (check) */
  diverge_result *res;           /* [n_res] the point's results, paths 1.. (prepare) */
  int n_res;                     /* n_paths - 1 */
  path_verdict *v;               /* [n_res] their verdicts (record) */
  bool ran;                      /* res holds the point just run (diverge_run did not fail) */
  const char *server, *server_model; /* --server URL, --server-model (NULL: none / the server's first) */
  long server_lp;                /* --server-logprobs: top logprobs asked per served row */
  served_target srv;             /* the server (prepare), the last compared path res[n_res - 1] */
  int col_w;                     /* width of the table's path column: the longest compared path, at least 10 */
  served_div sd;                 /* its figures at the point just run */
  int32_t *stream;               /* [batch * (tokens + 1)] the reference's stream of the point (run) */
  vtrace ref_ran;                /* what the reference ran at the point just run (diverge_run; owned) */
  bool ref_opened;               /* the reference ran at that point: ref_ran is its */
  float *ref_rows;               /* [tokens * batch * vocab] the reference's logits of the point (run) */
} diverge_state;

static void diverge_init(void *st) {
  diverge_state *s = st;
  s->batch_s = "1";
  s->ctx_s = "0";
  s->tokens = 32;
  s->max_kld = 0.01;
  s->min_same = 90;
  s->routing_s = "natural";
  s->server_lp = 20;
}

static bool diverge_option(void *st, int argc, char **argv, int *i, vstatus *err) {
  diverge_state *s = st;
  const char *a = argv[*i], *v;
  if (cli_opt(argc, argv, i, "--batch", &v, err)) { if (v) s->batch_s = v; }
  else if (cli_opt(argc, argv, i, "--context", &v, err)) { if (v) s->ctx_s = v; }
  else if (cli_opt(argc, argv, i, "--tokens", &v, err)) { if (v) *err = cli_int("--tokens", v, 1, 1 << 20, &s->tokens); }
  else if (cli_opt(argc, argv, i, "--baseline", &v, err)) { if (v) s->baseline = v; }
  else if (cli_opt(argc, argv, i, "--max-kld", &v, err)) { if (v) *err = cli_double("--max-kld", v, &s->max_kld); }
  else if (cli_opt(argc, argv, i, "--min-same-top", &v, err)) { if (v) *err = cli_double("--min-same-top", v, &s->min_same); }
  else if (cli_opt(argc, argv, i, "--margin-eps", &v, err)) { if (v) *err = cli_double("--margin-eps", v, &s->margin_eps); }
  else if (cli_opt(argc, argv, i, "--spec", &v, err)) { if (v) *err = cli_int("--spec", v, 0, 15, &s->spec_k); }
  else if (cli_opt(argc, argv, i, "--routing", &v, err)) { if (v) s->routing_s = v; }
  else if (cli_opt(argc, argv, i, "--server", &v, err)) { if (v) s->server = v; }
  else if (cli_opt(argc, argv, i, "--server-model", &v, err)) { if (v) s->server_model = v; }
  else if (cli_opt(argc, argv, i, "--server-logprobs", &v, err)) {
    if (v) *err = cli_int("--server-logprobs", v, 1, SERVED_TOP_MAX - 1, &s->server_lp);
  }
  else if (!strcmp(a, "--ragged") || !strcmp(a, "--skew")) {
    const diverge_ctx want = a[2] == 'r' ? DIVERGE_CTX_RAGGED : DIVERGE_CTX_SKEW;
    if (s->ragged != DIVERGE_CTX_UNIFORM && s->ragged != want) *err = VERR("option %s: --ragged and --skew exclude each other", a);
    s->ragged = want;
  }
  else if (!strcmp(a, "--alternate-natural")) s->alternate = true;
  else return false;
  return true;
}

static vstatus diverge_options_done(void *st) {
  diverge_state *s = st;
  VTRY(cli_size_list("--batch", s->batch_s, &s->batches, &s->nb));
  VTRY(cli_size_list("--context", s->ctx_s, &s->ctxs, &s->nc));
  if ((s->server_model || s->server_lp != 20) && !s->server)
    return VERR("option %s needs --server URL", s->server_model ? "--server-model" : "--server-logprobs");
  vstatus e = vrouting_parse(s->routing_s, &s->routing); /* against the model in check */
  if (e) {
    verr_prefix("option --routing");
    return e;
  }
  return served_url_check("--server", s->server);
}

static vstatus diverge_paths_done(void *st, const vpath_spec *paths, int n) {
  const diverge_state *s = st;
  if (n < (s->server ? 1 : 2))
    return VERR("option --paths: give at least two paths (the first is the reference), or the reference and --server");
  /* a baseline that is not compared would leave the bounds uncalibrated without a word: the
   * reference (distance 0) and the server (the subject) cannot be one either */
  if (s->baseline) {
    char list[512] = "";
    for (int i = 1; i < n; i++) {
      if (!strcmp(paths[i].name, s->baseline)) return V_OK;
      size_t l = strlen(list);
      snprintf(list + l, sizeof list - l, "%s%s", i > 1 ? "," : "", paths[i].name);
    }
    return VERR("option --baseline: '%s' is not one of the compared paths (--paths after the reference: %s)", s->baseline,
                n > 1 ? list : "none");
  }
  return V_OK;
}

/* The dry run: per batch x context every path open at once, max_seq = the batch, max_ctx = the
 * context + the tokens (x (K+1) under --spec); each path opens, fills the sequences' contexts (all
 * of them at C uniform, about half under --ragged, one under --skew) and runs the tokens (a server
 * costs nothing here). */
static vstatus diverge_estimate(const void *st, const vsuite_est_ctx *x, vest *X) {
  const diverge_state *s = st;
  const long T = s->tokens * (s->spec_k + 1);
  vest_name_paths(X, x->paths, x->n_paths, true);
  for (int bi = 0; bi < s->nb; bi++)
    for (int ci = 0; ci < s->nc; ci++) {
      const long b = s->batches[bi], ctx = s->ctxs[ci];
      const diverge_opts shape = {.batch = (int)b, .context = (int)ctx, .ragged = s->ragged};
      double filled = 0; /* sequences' worth of the context filled */
      for (int q = 0; q < b && ctx > 0; q++) filled += (double)diverge_context_of(&shape, q) / (double)ctx;
      vest_open_set(X, x->paths, x->n_paths, (int)b, (int)(ctx + T), true);
      for (int p = 0; p < x->n_paths; p++)
        X->out->seconds += vest_open_s(X, x->paths[p], X->wbytes[p]) + vest_fill_s(X, x->paths[p], filled, ctx) +
                           T * vest_step_s(X, x->paths[p], (int)b, ctx + T / 2.0);
    }
  return V_OK;
}

/* The compared path of result p: --paths after the reference, then the server. */
static const char *compared_name(const diverge_state *s, const vsuite_ctx *x, int p) {
  return p < x->n_paths - 1 ? x->paths[p + 1].name : s->srv.path;
}

/* Whether result p is the server's. */
static bool is_server(const diverge_state *s, const vsuite_ctx *x, int p) { return s->server && p == x->n_paths - 1; }

/* --routing against the model (forced experts need its MoE layout). */
static vstatus diverge_check(void *st, const vsuite_ctx *x) {
  diverge_state *s = st;
  vstatus e = vrouting_prepare(&s->routing, &x->model->cfg, x->seed); /* parsed in options_done */
  if (!e && s->alternate && s->routing.kind == ROUTE_NATURAL)
    e = VERR("--alternate-natural needs forced experts (uniform, zipf:S or a trace)");
  if (e) verr_prefix("option --routing");
  return e;
}

/* The table's header. */
static vstatus diverge_prepare(void *st, const vsuite_ctx *x, bool *done) {
  diverge_state *s = st;
  (void)done;
  if (s->server) { /* error: the server cannot be reached, does not serve the model or its vocabulary */
    VTRY(served_target_open(&s->srv, s->server, s->server_model, 600, x->model->cfg.vocab_size, x->model));
    VTRY(served_conn_note(x->sink, &s->srv.conn, s->srv.model, "server")); /* its identity in the manifest */
  }
  s->n_res = x->n_paths - 1 + (s->server ? 1 : 0);
  s->res = calloc((size_t)s->n_res, sizeof *s->res);
  s->v = calloc((size_t)s->n_res, sizeof *s->v);
  if (!s->res || !s->v) return VERR("diverge: out of memory for %d paths", x->n_paths);
  s->col_w = 10;
  for (int p = 0; p < s->n_res; p++) {
    int l = (int)strlen(compared_name(s, x, p));
    if (l > s->col_w) s->col_w = l;
  }
  if (s->server) printf("diverge: server %s, model %s (max_model_len %d): %ld top logprobs asked per row\n",
                        s->srv.conn.shown, s->srv.model, s->srv.max_len, s->server_lp);
  printf("diverge: model %s, reference %s, %ld teacher-forced steps per sequence x %ld token%s%s, routing %s%s\n",
         x->model->source, x->paths[0].name, s->tokens, s->spec_k + 1, s->spec_k ? "s (verification steps)" : "",
         s->ragged == DIVERGE_CTX_RAGGED ? ", ragged contexts" : s->ragged == DIVERGE_CTX_SKEW ? ", skewed contexts (sequence 0 holds the context)" : "", s->routing_s, s->alternate ? " on even steps, natural on odd" : "");
  printf("%-*s %5s %7s %20s %10s %10s %10s %10s %8s %9s %10s %6s %7s\n", s->col_w, "path", "batch", "context", "mean KLD +/- se",
         "p99.9", "p99", "p95", "median", "same%", "RMS dp", "max|dl|", "nan", "status");
  return V_OK;
}

static int diverge_n_cases(const void *st, const vsuite_ctx *x) {
  const diverge_state *s = st;
  (void)x;
  return s->nb * s->nc;
}

/* Point c's options: batches[c / nc] x ctxs[c % nc]. */
static diverge_opts point_opts(const diverge_state *s, const vsuite_ctx *x, int c) {
  return (diverge_opts){.paths = x->paths, .n_paths = x->n_paths, .batch = (int)s->batches[c / s->nc],
                        .context = (int)s->ctxs[c % s->nc], .tokens = (int)s->tokens, .seed = x->seed,
                        .n_threads = x->n_threads, .expect_fallback = x->expect_fallback, .ragged = s->ragged, .spec_k = (int)s->spec_k,
                        .routing = &s->routing, .alternate_natural = s->alternate};
}

/* Point c's case id (its records', one per compared path). */
static void point_id(const diverge_state *s, const vsuite_ctx *x, int c, char *id, size_t cap) {
  const diverge_opts o = point_opts(s, x, c);
  char shape[48] = "";
  if (s->ragged) snprintf(shape, sizeof shape, s->ragged == DIVERGE_CTX_SKEW ? "_skew" : "_ragged");
  if (s->spec_k) snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "_k%ld", s->spec_k);
  if (s->routing.kind != ROUTE_NATURAL)
    snprintf(shape + strlen(shape), sizeof shape - strlen(shape), s->alternate ? "_forced_alt" : "_forced");
  char full[sizeof x->paths[0].name + sizeof shape + 64];
  snprintf(full, sizeof full, "b%d_c%d_t%ld%s_vs_%s", o.batch, o.context, s->tokens, shape, x->paths[0].name);
  size_t len = strlen(full); /* cut at cap as ever (a reference name too long for the id) */
  if (len >= cap) len = cap - 1;
  memcpy(id, full, len);
  id[len] = 0;
}

/* The record of compared path p at point c with the parameters known before it runs; NULL on out
 * of memory (error set). */
static vrecord *point_record(const diverge_state *s, const vsuite_ctx *x, int c, int p, veng *recs) {
  const diverge_opts o = point_opts(s, x, c);
  char id[96];
  point_id(s, x, c, id, sizeof id);
  vrecord *rec = eng_new(recs, "diverge", id, compared_name(s, x, p));
  if (!rec) return NULL;
  if (is_server(s, x, p)) {
    rec_param_str(rec, "server", s->srv.conn.shown);
    rec_param_str(rec, "server_model", s->srv.model);
    rec_param_int(rec, "server_logprobs", s->server_lp);
  }
  rec_param_str(rec, "model", x->model->source);
  rec_param_str(rec, "reference", x->paths[0].name);
  rec_param_int(rec, "batch", o.batch);
  rec_param_int(rec, "context", o.context);
  rec_param_int(rec, "tokens", o.tokens);
  rec_param_int(rec, "seed", (int64_t)x->seed);
  rec_param_int(rec, "spec_k", s->spec_k);
  rec_param_int(rec, "ragged", s->ragged == DIVERGE_CTX_RAGGED);
  rec_param_int(rec, "skew", s->ragged == DIVERGE_CTX_SKEW);
  rec_param_str(rec, "routing", s->routing_s);
  rec_param_int(rec, "alternate_natural", s->alternate);
  return rec;
}

static vstatus diverge_plan(void *st, const vsuite_ctx *x, int c, veng *recs) {
  const diverge_state *s = st;
  for (int p = 0; p < s->n_res; p++)
    if (!point_record(s, x, c, p, recs)) return V_ERR;
  return V_OK;
}

static void diverge_kept(void *st, const vsuite_ctx *x, int c) {
  const diverge_state *s = st;
  const diverge_opts o = point_opts(st, x, c);
  printf("%-*s %5d %7d  kept from the interrupted run\n", s->col_w, "", o.batch, o.context);
}

/* Runs point c on every path. A point that cannot run (the reference broke, options the model
 * cannot take) is reported here and makes no records: the next point runs. */
static vstatus diverge_run_case(void *st, const vsuite_ctx *x, int c) {
  diverge_state *s = st;
  for (int p = 0; p < s->n_res; p++) diverge_result_free(&s->res[p]); /* the point before */
  diverge_opts o = point_opts(s, x, c);
  o.ref_ran_out = &s->ref_ran;
  s->ref_opened = false;
  if (!s->server) {
    s->ran = s->ref_opened = diverge_run(x->model, &o, s->res) == V_OK;
    if (!s->ran) cli_print_error("diverge");
    return V_OK;
  }
  /* with the server: the reference's stream and rows kept, the server's rows asked after them */
  const int V = x->model->cfg.vocab_size, sp = x->n_paths - 1;
  diverge_result *r = &s->res[sp];
  const char *why = o.context ? "a context filled by fill_cache cannot be sent to a server (context 0 only)"
                    : s->spec_k ? "verification steps (--spec) cannot be asked of a server"
                    : s->routing.kind != ROUTE_NATURAL ? "forced routing cannot be asked of a server" : NULL;
  free(s->stream);
  free(s->ref_rows);
  s->stream = why ? NULL : malloc((size_t)o.batch * (o.tokens + 1) * sizeof *s->stream);
  s->ref_rows = why ? NULL : malloc((size_t)o.tokens * o.batch * V * sizeof *s->ref_rows);
  if (!why && (!s->stream || !s->ref_rows)) return VERR("diverge: out of memory for the reference's rows");
  o.stream_out = s->stream;
  o.ref_rows_out = s->ref_rows;
  /* a point the server cannot take runs the in-process paths alone (none: nothing to run) */
  s->ran = why && x->n_paths == 1 ? true : (s->ref_opened = diverge_run(x->model, &o, s->res) == V_OK);
  if (!s->ran) { cli_print_error("diverge"); return V_OK; }
  memset(r, 0, sizeof *r);
  snprintf(r->path, sizeof r->path, "%.120s", s->srv.path);
  if (why) {
    r->supported = false;
    snprintf(r->reason, sizeof r->reason, "%s", why);
    return V_OK;
  }
  const int conc = o.batch * o.tokens < 8 ? o.batch * o.tokens : 8;
  VTRY(diverge_run_served(&s->srv, (int)s->server_lp, o.batch, o.tokens, V, s->stream, s->ref_rows, conc, r, &s->sd));
  if (r->errored) fprintf(stderr, "vouch diverge: error: %s\n", r->reason);
  return V_OK;
}

/* The records of point c, one per compared path, and their verdicts (s->v) for the table.
 * With --baseline B (the unoptimized bf16 engine; the reference an fp32 path), B's distance from the
 * reference is the noise floor of this very point, and another path passes when it is at most k
 * (VOUCH_ACCURACY_RATIO) times as far from fp32: mean KLD <= k^2 x B's mean + 3 standard errors
 * of the paired difference, the trimmed mean of that difference <= 3 of its standard errors (a loss
 * on most rows hidden by a few huge ones; both arms: diverge_floor_judge), and the same
 * argmax on every row whose reference margin exceeds 2k x B's largest top-2 error (a path within
 * k x that error cannot flip such a row). B itself is evidence, not a subject: it only has to
 * produce finite logits. */
static vstatus diverge_record(void *st, const vsuite_ctx *x, int c, veng *recs) {
  diverge_state *s = st;
  if (!s->ran) return V_OK;
  const diverge_result *rb = NULL;
  for (int p = 0; s->baseline && p < s->n_res; p++)
    if (s->res[p].supported && !strcmp(s->res[p].path, s->baseline)) rb = &s->res[p];
  const double kr = VOUCH_ACCURACY_RATIO;
  double b_top = 0;
  for (int i = 0; rb && i < rb->rows; i++)
    if (rb->top_err[i] > b_top) b_top = rb->top_err[i];
  const double eps = rb ? 2 * kr * b_top : s->margin_eps;
  for (int p = 0; p < s->n_res; p++) {
    const diverge_result *r = &s->res[p];
    path_verdict *v = &s->v[p];
    /* the floor's figures (NaN unless judged); out of memory: NaN, so the path fails with the error
     * printed, and the other paths keep their records */
    diverge_floor fl = {.base_mean = NAN, .diff_se = NAN, .bound = NAN, .bulk = NAN, .bulk_se = NAN};
    if (rb && r != rb && r->supported && diverge_floor_judge(r, rb, kr, &fl)) cli_print_error("diverge");
    /* a server that gives fewer top logprobs than asked compared less than the verdict says */
    *v = (path_verdict){.is_base = rb && r == rb, .eps = eps, .kld_bound = rb ? fl.bound : s->max_kld, .bulk = fl.bulk,
                        .bulk_se = fl.bulk_se, .lp_ok = !is_server(s, x, p) || s->sd.given_min >= s->sd.asked};
    v->bulk_ok = !(v->bulk > 3 * v->bulk_se); /* not judged: the NaN kld_bound fails the path */
    for (int i = 0; r->supported && i < r->rows; i++)
      if (r->margin[i] > eps) { v->decided++; v->flips += !r->same[i]; }
    /* rows where only the path's argmax left the reference's, and where only the baseline's did */
    for (int i = 0; rb && !v->is_base && r->supported && i < r->rows && i < rb->rows; i++) {
      v->only_p += !r->same[i] && rb->same[i];
      v->only_b += r->same[i] && !rb->same[i];
    }
    v->mcn_p = stat_mcnemar_p(v->only_p, v->only_b);
    const double same_dec = v->decided ? 100.0 * (v->decided - v->flips) / v->decided : 100.0;
    char bound_src[512];
    if (rb)
      snprintf(bound_src, sizeof bound_src, "floor: baseline %s at this point (k=%g): mean KLD %.3g, k^2 x that + 3 "
               "se of the paired difference (se %.2g); that difference's %g%%-trimmed mean <= 3 of its se (%.2g); "
               "top-2 error %.3g", s->baseline, kr, fl.base_mean, fl.diff_se, 100 * DIVERGE_BULK_TRIM, fl.bulk_se, b_top);
    else
      snprintf(bound_src, sizeof bound_src, "options: --max-kld %.3g, --min-same-top %.3g over rows with margin > "
               "--margin-eps %.3g", s->max_kld, s->min_same, s->margin_eps);
    vrecord *rec = point_record(s, x, c, p, recs);
    /* the proof that the compared code ran: the reference's and this path's tallies at this point */
    if (rec && s->ref_opened) VTRY(rec_ran(rec, x->paths[0].name, &s->ref_ran));
    if (rec && r->opened) VTRY(rec_ran(rec, r->path, &r->ran));
    if (!r->supported) {
      if (rec) rec_set_status(rec, r->errored ? REC_ERROR : REC_NOT_SUPPORTED, r->reason);
    } else {
      bool finite = r->nonfinite == 0 && r->ref_nonfinite == 0;
      /* with a baseline: the path's argmax leaves the reference's on decided rows no more often than
       * the baseline's does there, beyond chance (McNemar, alpha 0.01): a router near-tie can flip one
       * row of either bf16 engine, a defect flips many */
      for (int i = 0; rb && !v->is_base && i < r->rows && i < rb->rows; i++) v->dec_b += r->margin[i] > eps && !rb->same[i];
      v->same_ok = rb ? !(v->flips > v->dec_b && v->only_p > v->only_b && v->mcn_p < 0.01) : same_dec >= s->min_same;
      bool ok = v->is_base ? finite : r->kld_mean <= v->kld_bound && v->bulk_ok && v->same_ok && finite && v->lp_ok;
      v->status = ok ? (v->is_base ? "base" : "pass") : "FAIL";
      if (rec) {
        int n = 0;
        double *k = malloc((size_t)r->rows * sizeof *k), *dp = malloc((size_t)r->rows * sizeof *dp);
        int ndp = 0; /* a served row knows dp only where the next token is among its top-k */
        for (int i = 0; k && dp && i < r->rows; i++)
          if (!isnan(r->kld[i])) {
            k[n++] = r->kld[i];
            if (!isnan(r->dp[i])) dp[ndp++] = r->dp[i] * r->dp[i];
          }
        rec_metric_samples(rec, "kld", "nats", RD_MEAN, RB_LOWER, k, n, 0);
        rec_metric_samples(rec, "kld_p99", "nats", RD_P99, RB_LOWER, k, n, 0);
        rec_metric_samples(rec, "dp_squared", "", RD_MEAN, RB_LOWER, dp, ndp, 0);
        free(k);
        free(dp);
        rec_metric_value(rec, "kld_se", "nats", RB_LOWER, r->kld_se);
        rec_metric_value(rec, "kld_p999", "nats", RB_LOWER, r->kld_p999);
        rec_metric_value(rec, "kld_p95", "nats", RB_LOWER, r->kld_p95);
        rec_metric_value(rec, "kld_median", "nats", RB_LOWER, r->kld_median);
        rec_metric_value(rec, "same_top_pct", "%", RB_HIGHER, r->same_top_pct);
        if (isfinite(r->rms_dp)) rec_metric_value(rec, "rms_dp", "", RB_LOWER, r->rms_dp);
        if (is_server(s, x, p)) { /* logprobs, not logits: what the server gave and how far they are */
          const served_div *d = &s->sd;
          rec_metric_value(rec, "logprobs_given_min", "", RB_HIGHER, d->given_min);
          rec_metric_value(rec, "logprobs_given_max", "", RB_NONE, d->given_max);
          rec_metric_value(rec, "max_dlogprob_topk", "", RB_LOWER, d->max_dlogprob);
          rec_metric_value(rec, "tail_mass_ref_max", "", RB_NONE, d->tail_ref_max);
          rec_metric_value(rec, "tail_mass_server_max", "", RB_NONE, d->tail_srv_max);
          rec_check_add(rec, "server_logprobs_given", v->lp_ok);
        } else {
          rec_metric_value(rec, "max_dlogit", "", RB_LOWER, isfinite(r->max_dlogit) ? r->max_dlogit : 1e300);
        }
        rec_metric_value(rec, "nonfinite_logits", "", RB_LOWER, (double)r->nonfinite);
        rec_metric_value(rec, "wall_s", "s", RB_LOWER, r->wall_s);
        if (rb) rec_param_str(rec, "baseline", s->baseline);
        rec_metric_value(rec, "decided_rows", "", RB_NONE, v->decided);
        rec_metric_value(rec, "decided_flips", "", RB_LOWER, v->flips);
        if (rb && !v->is_base) {
          rec_metric_value(rec, "rows_only_path_missed", "", RB_LOWER, (double)v->only_p);
          rec_metric_value(rec, "rows_only_baseline_missed", "", RB_NONE, (double)v->only_b);
          rec_metric_value(rec, "same_top_mcnemar_p", "", RB_HIGHER, v->mcn_p);
          /* signed (negative on correct code), so no better direction: compare's ratios would read it backwards */
          rec_metric_value(rec, "kld_excess_trimmed", "nats", RB_NONE, v->bulk);
          rec_metric_value(rec, "kld_excess_trimmed_se", "nats", RB_NONE, v->bulk_se);
          rec_check_add(rec, "kld_bulk_within_floor", v->bulk_ok);
        }
        if (!v->is_base) {
          if (is_server(s, x, p))
            snprintf(bound_src + strlen(bound_src), sizeof bound_src - strlen(bound_src),
                     "; the server's KLD is over its top-%ld tokens and the rest, a lower bound of its KLD", s->server_lp);
          rec_param_str(rec, "bound_source", bound_src);
          rec_param_num(rec, "margin_eps", eps);
          rec_set_threshold(rec, "kld", "<=", v->kld_bound);
          rec_check_add(rec, rb ? "same_top_on_decided_rows" : "same_top_pct_ok", v->same_ok);
        }
        rec_check_add(rec, "no_nonfinite", finite);
      }
    }
    if (rec) rec_finalize(rec);
  }
  return V_OK;
}

/* Point c's table rows, one per compared path (after its records are stored). */
static void diverge_print_case(void *st, const vsuite_ctx *x, int c) {
  const diverge_state *s = st;
  if (!s->ran) return;
  const diverge_opts o = point_opts(s, x, c);
  for (int p = 0; p < s->n_res; p++) {
    const diverge_result *r = &s->res[p];
    const path_verdict *v = &s->v[p];
    if (!r->supported) {
      printf("%-*s %5d %7d  %s: %s\n", s->col_w, r->path, o.batch, o.context, r->errored ? "error" : "not supported", r->reason);
      continue;
    }
    printf("%-*s %5d %7d %10.3g +/- %-7.2g %10.3g %10.3g %10.3g %10.3g %8.2f %9.3g %10.3g %6ld %7s\n", s->col_w, r->path, o.batch,
           o.context, r->kld_mean, r->kld_se, r->kld_p999, r->kld_p99, r->kld_p95, r->kld_median, r->same_top_pct,
           r->rms_dp, is_server(s, x, p) ? s->sd.max_dlogprob : r->max_dlogit, r->nonfinite, v->status);
    if (is_server(s, x, p) && strcmp(v->status, "pass")) { /* one line: which rule it broke, with its numbers */
      printf("%-*s   %s FAIL:", s->col_w, "", r->path);
      if (r->kld_mean > v->kld_bound) printf(" mean KLD over its top-k %.3g > bound %.3g (kld);", r->kld_mean, v->kld_bound);
      if (!v->lp_ok) printf(" %d top logprobs given of %d asked (server_logprobs_given);", s->sd.given_min, s->sd.asked);
      if (!v->same_ok) printf(" its greedy token left the reference's argmax on %d of %d decided rows;", v->flips, v->decided);
      printf("\n");
    }
    if (is_server(s, x, p))
      printf("%-*s   %s: %d requests, %d-%d top logprobs given of %d asked; max|dl| is of logprobs over them; mass "
             "outside them up to %.3g (reference) / %.3g (server); KLD over them and the rest (a lower bound)\n", s->col_w, "",
             r->path, s->sd.n_req, s->sd.given_min, s->sd.given_max, s->sd.asked, s->sd.tail_ref_max, s->sd.tail_srv_max);
    if (!v->bulk_ok)
      printf("%-*s   trimmed mean of KLD - k^2 x the baseline's, row by row, %.3g > 3 se %.3g (kld_bulk_within_floor)\n",
             s->col_w, "", v->bulk, 3 * v->bulk_se);
    if (!v->is_base && !v->same_ok)
      printf("%-*s   argmax differs on %d of %d rows whose reference margin > eps %.3g (baseline %ld); rows only the "
             "path missed %ld, only the baseline %ld, McNemar p %.3g\n", s->col_w, "", v->flips, v->decided, v->eps, v->dec_b,
             v->only_p, v->only_b, v->mcn_p);
  }
}

static void diverge_free(void *st) {
  diverge_state *s = st;
  for (int p = 0; s->res && p < s->n_res; p++) diverge_result_free(&s->res[p]);
  free(s->res);
  free(s->v);
  free(s->batches);
  free(s->ctxs);
  free(s->stream);
  free(s->ref_rows);
  vtrace_free(&s->ref_ran);
  vrouting_free(&s->routing);
}

const vsuite vsuite_diverge = {
    .name = "diverge",
    .usage = DIVERGE_USAGE,
    .default_model = "synth:tiny",
    .default_paths = NULL, /* --paths is required */
    .state_size = sizeof(diverge_state),
    .init = diverge_init,
    .option = diverge_option,
    .options_done = diverge_options_done,
    .check = diverge_check,
    .prepare = diverge_prepare,
    .n_cases = diverge_n_cases,
    .run = diverge_run_case,
    .record = diverge_record,
    .print = NULL,
    .free = diverge_free,
    .layers = true,
    .quiet_verdict = true,
    .skip_stored = true,
    .case_noun = "points",
    .paths_done = diverge_paths_done,
    .plan = diverge_plan,
    .kept = diverge_kept,
    .print_case = diverge_print_case,
    .mode = diverge_text_mode, /* --ref-server: server against server on text (diverge_text.c) */
    .estimate = diverge_estimate,
};
