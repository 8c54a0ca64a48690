/* vouch features: production-feature checks (suites/features/features.h) as a suite on the driver
 * (suites/engine/suite.h). A case is one check; it makes one record ("features", check name, path). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites/engine/cli.h"
#include "suites/engine/estimate_cost.h"
#include "suites/engine/record.h"
#include "suites/features/features_served.h"
#include "suites/served/served_pair.h"
#include "suites/features/features.h"
#include "suites/engine/routing.h"
#include "suites/features/features_suite.h"
#include "suites/features/features_text.h"

static const char FEATURES_USAGE[] =
    "usage: vouch features --path NAME [--ref cpu-ref] [--floor PATH] [--model DIR|synth:PRESET] [--full-ctx N]\n"
    "                      [--kld-tol K] [--margin-eps E] [--routing uniform|natural|zipf:S] [--seed S] [--layers N]\n"
    "                      [--threads N] [--path-lib FILE] [--expect-fallback] [--json FILE]\n"
    "       vouch features --server URL [--server-model NAME] [--ref cpu-ref] [--model ...] [--margin-eps E] [--seed S]\n"
    "  Production features of a path against a reference path: full context (decode at the\n"
    "  last positions before --full-ctx, default max_position_embeddings, after fill_cache),\n"
    "  seeded sampling (the sampled distribution matches the reference's; 20000 draws fit it),\n"
    "  structured output (a token DFA masks logits), speculative verification (K+1 tokens per\n"
    "  step == K+1 single steps) and stop tokens. Each check is pass, fail, undecided (it could\n"
    "  decide nothing: not a pass) or not_supported, with its numbers and where its bound comes from.\n"
    "  --routing (default uniform): the experts every path runs, forced per position (the combine\n"
    "  weights stay the router's), so a router near-tie that one bf16 engine breaks the other way\n"
    "  cannot move a row: these checks are about the features, the router is judged by diverge and\n"
    "  kernels; natural lets each path's router decide.\n"
    "  --floor PATH (e.g. cpu-ref next to bf16 paths) computes the same short-context rows in fp32:\n"
    "  bounds become multiples of its distance from the reference (docs/verdicts.md); without it\n"
    "  --kld-tol (nats) and --margin-eps (logits; argmax compared only where the reference's top-2\n"
    "  margin exceeds it) apply.\n"
    "  --server URL (instead of --path): an OpenAI-compatible server of the same checkpoint, its\n"
    "  features as requests (path server:MODEL): max_tokens, stop_tokens, min_tokens, seeded_sampling,\n"
    "  logprobs, structured (structured_outputs.choice over token ids) and max_model_len; the reference\n"
    "  picks the prompt whose greedy tokens it decides (margin > --margin-eps; docs/serving.md).\n"
    VSUITE_EXPECT_FALLBACK_HELP
    "  defaults: --model synth:tiny --ref cpu-ref --kld-tol 0.01 --margin-eps 0.001\n";

/* The most checks of an invocation: the in-process ones or the server's. */
#define MAX_CHECKS (FEAT_N_CHECKS > FEAT_SRV_N_CHECKS ? FEAT_N_CHECKS : FEAT_SRV_N_CHECKS)

/* The suite's state: its options and the checks run. */
typedef struct {
  const char *path, *ref, *floor;   /* --path (required), --ref, --floor (NULL: none) */
  long full;                        /* --full-ctx (0: max_position_embeddings) */
  double tol, eps;                  /* --kld-tol, --margin-eps: the bounds without a floor */
  const char *all[3];               /* [n_all] the paths opened: reference, path under test, floor */
  int n_all;
  feat_opts o;                      /* what features_begin reads (prepare) */
  feat_session *fs;                 /* the checks' paths (prepare) */
  bool broken;                      /* features_begin or a check failed (reported): later checks do not
                                       run, their planned records stay not_run */
  feat_check ch[MAX_CHECKS];        /* the checks' results (run) */
  bool ran[MAX_CHECKS];             /* ch[i] holds check i's result */
  bool kept[MAX_CHECKS];            /* check i left out: a resumed run holds its record */
  const char *server, *server_model; /* --server URL (NULL: the in-process checks), --server-model */
  const char *routing_s;            /* --routing as given (default "uniform") */
  bool routing_given;               /* --routing was on the command line */
  vrouting routing;            /* --routing parsed (options_done) and prepared for the model (check) */
  served_target srv;                /* the server (prepare) */
  feat_served *fsv;                 /* the server checks' session (prepare) */
} features_state;

static void features_init(void *st) {
  features_state *s = st;
  s->ref = "cpu-ref";
  s->routing_s = "uniform";
  s->tol = 0.01;
  s->eps = 0.001;
}

static bool features_option(void *st, int argc, char **argv, int *i, vstatus *err) {
  features_state *s = st;
  const char *v;
  if (cli_opt(argc, argv, i, "--path", &v, err)) { if (v) s->path = v; }
  else if (cli_opt(argc, argv, i, "--ref", &v, err)) { if (v) s->ref = v; }
  else if (cli_opt(argc, argv, i, "--full-ctx", &v, err)) { if (v) *err = cli_size("--full-ctx", v, &s->full); }
  else if (cli_opt(argc, argv, i, "--floor", &v, err)) { if (v) s->floor = v; }
  else if (cli_opt(argc, argv, i, "--kld-tol", &v, err)) { if (v) *err = cli_double("--kld-tol", v, &s->tol); }
  else if (cli_opt(argc, argv, i, "--margin-eps", &v, err)) { if (v) *err = cli_double("--margin-eps", v, &s->eps); }
  else if (cli_opt(argc, argv, i, "--server", &v, err)) { if (v) s->server = v; }
  else if (cli_opt(argc, argv, i, "--server-model", &v, err)) { if (v) s->server_model = v; }
  else if (cli_opt(argc, argv, i, "--routing", &v, err)) { if (v) s->routing_s = v, s->routing_given = true; }
  else return false;
  return true;
}

/* The paths: --ref, --path and --floor (none without --path: the usage); with --server the reference. */
static vstatus features_paths(void *st, const char *const **paths, int *n) {
  features_state *s = st;
  s->all[0] = s->ref;
  s->all[1] = s->path;
  s->all[2] = s->floor;
  s->n_all = s->server && !s->path ? 1 : !s->path ? 0 : s->floor ? 3 : 2;
  *paths = s->all;
  *n = s->n_all;
  return V_OK;
}

static vstatus features_options_done(void *st) {
  features_state *s = st;
  if (!(s->tol > 0) || !(s->eps >= 0)) return VERR("--kld-tol must be > 0 and --margin-eps >= 0");
  if (s->server_model && !s->server) return VERR("option --server-model needs --server URL");
  if (s->server && (s->path || s->floor || s->full))
    return VERR("option --server: the server is the subject: no --path, --floor or --full-ctx with it");
  if (s->server && s->routing_given)
    return VERR("option --routing: a server routes its own tokens (its reference runs the router too)");
  if (!s->server) {
    vstatus e = vrouting_parse(s->routing_s, &s->routing); /* prepared for the model in check */
    if (e) { verr_prefix("option --routing"); return e; }
  }
  return served_url_check("--server", s->server);
}

/* The dry run: the reference and the path open together, max_seq = 2, max_ctx = --full-ctx (the
 * model's max_position_embeddings); each fills the full context, the GPU paths at a measured rate
 * per position, the CPU ones as decode steps; --floor a third path beside them on the short-context
 * rows only (features.c: max_ctx 64). */
static vstatus features_estimate(const void *st, const vsuite_est_ctx *x, vest *X) {
  const features_state *s = st;
  if (!s->path) return VERR("features: --path is required");
  const char *names[2] = {s->ref, s->path};
  const long full = s->full > 0 ? s->full : X->cfg->max_position_embeddings;
  vest_open_set(X, names, 2, 2, (int)full, true);
  for (int p = 0; p < 2; p++) {
    X->out->seconds += vest_open_s(X, names[p], X->wbytes[p]) + vest_fill_s(X, names[p], 1, (double)full);
    X->out->seconds += vest_on_gpu(names[p]) ? COST_FEAT_GPU_S_PER_KPOS / 2 * full / 1024.0
                                             : COST_FEAT_STEPS * vest_step_s(X, names[p], 2, (double)full);
  }
  if (s->floor) { /* its memory adds to the pair's peak */
    const double g0 = X->out->gpu_bytes, h0 = X->out->host_bytes;
    X->out->gpu_bytes = X->out->host_bytes = 0;
    vest_open_set(X, &s->floor, 1, 2, 64, true);
    X->out->gpu_bytes += g0;
    X->out->host_bytes += h0;
    X->out->seconds += vest_open_s(X, s->floor, X->wbytes[0]) + COST_FEAT_STEPS * vest_step_s(X, s->floor, 2, 32);
  }
  const char *all[3] = {names[0], names[1], s->floor};
  vest_name_paths(X, all, s->floor ? 3 : 2, true);
  return V_OK;
}

/* --routing against the model (forced experts need its MoE layout). */
static vstatus features_check_opts(void *st, const vsuite_ctx *x) {
  features_state *s = st;
  if (s->server) return V_OK;
  vstatus e = vrouting_prepare(&s->routing, &x->model->cfg, x->seed);
  if (e) verr_prefix("option --routing");
  return e;
}

/* The header line, and the checks' session. Options the model cannot take (--full-ctx, a floor
 * that is the reference) are reported here and run no check: every check's record stays not_run,
 * the verdict is FAIL and --json holds no record. */
static vstatus features_prepare(void *st, const vsuite_ctx *x, bool *done) {
  features_state *s = st;
  (void)done;
  if (s->server) { /* error: the server cannot be reached, does not serve the model or its vocabulary */
    VTRY(served_target_open(&s->srv, s->server, s->server_model, 600, x->model->cfg.vocab_size, x->model));
    VTRY(served_conn_note(x->sink, &s->srv.conn, s->srv.model, "server")); /* its identity in the manifest */
    printf("features: server %s, model %s (max_model_len %d) vs %s on %s\n", s->srv.conn.shown, s->srv.model,
           s->srv.max_len, s->ref, x->model->source);
    const feat_served_opts fo = {.t = &s->srv, .m = x->model, .ref = &x->paths[0], .margin_eps = s->eps, .seed = x->seed,
                                 .n_threads = x->n_threads, .expect_fallback = x->expect_fallback};
    return features_served_begin(&fo, &s->fsv);
  }
  /* x->paths: --ref, --path, --floor parsed (features_paths) */
  s->o = (feat_opts){.path = &x->paths[1], .ref = &x->paths[0], .floor = s->floor ? &x->paths[2] : NULL, .full_ctx = (int)s->full, .kld_tol = s->tol,
                     .margin_eps = s->eps, .seed = x->seed, .n_threads = x->n_threads, .expect_fallback = x->expect_fallback,
                     .routing = &s->routing};
  printf("features: path %s vs %s on %s, routing %s\n", s->path, s->ref, x->model->source, s->routing_s);
  if (features_begin(x->model, &s->o, &s->fs)) {
    cli_print_error("features");
    s->broken = true;
  }
  return V_OK;
}

static int features_n_cases(const void *st, const vsuite_ctx *x) {
  const features_state *s = st;
  (void)x;
  return s->server ? FEAT_SRV_N_CHECKS : FEAT_N_CHECKS;
}

/* The name of check i of this invocation. */
static const char *check_name(const features_state *s, int i) {
  return s->server ? features_served_check_name(i) : features_check_name(i);
}

/* Check c's record with the parameters known before it runs; NULL on out of memory (error set). */
static vrecord *check_record(const features_state *s, const vsuite_ctx *x, int c, veng *recs) {
  vrecord *rec = eng_new(recs, "features", check_name(s, c), s->server ? s->srv.path : s->path);
  if (!rec) return NULL;
  rec_param_str(rec, "model", x->model->source);
  rec_param_str(rec, "reference", s->ref);
  if (!s->server) rec_param_str(rec, "routing", s->routing_s);
  if (s->server) {
    rec_param_str(rec, "server", s->srv.conn.shown);
    rec_param_str(rec, "server_model", s->srv.model);
  }
  return rec;
}

static vstatus features_plan(void *st, const vsuite_ctx *x, int c, veng *recs) {
  const features_state *s = st;
  vrecord *rec = check_record(s, x, c, recs);
  if (!rec) return V_ERR;
  if (s->floor) rec_param_str(rec, "floor", s->floor);
  rec_param_int(rec, "seed", (int64_t)x->seed);
  return V_OK;
}

static void features_kept(void *st, const vsuite_ctx *x, int c) {
  features_state *s = st;
  (void)x;
  s->kept[c] = true;
}

/* Runs check c. A check that breaks (the reference or the floor cannot run) is reported here; it
 * and the checks after it make no records. */
static vstatus features_run_case(void *st, const vsuite_ctx *x, int c) {
  features_state *s = st;
  (void)x;
  if (s->broken) return V_OK;
  if (s->server ? features_served_check(s->fsv, c, &s->ch[c]) : features_check(s->fs, c, &s->ch[c])) {
    cli_print_error("features");
    s->broken = true;
    return V_OK;
  }
  s->ran[c] = true;
  return V_OK;
}

/* Check c's record: its figure, bound and where the bound comes from; pass or fail is the
 * feature_ok check (rec_finalize), not_supported with the reason. */
static vstatus features_record(void *st, const vsuite_ctx *x, int c, veng *recs) {
  const features_state *s = st;
  const feat_check *k = &s->ch[c];
  if (!s->ran[c]) return V_OK;
  vrecord *rec = check_record(s, x, c, recs);
  if (!rec) return V_ERR;
  if (!s->server) VTRY(features_rec_ran(s->fs, rec));
  rec_param_str(rec, "detail", k->detail);
  if (s->floor) rec_param_str(rec, "floor", s->floor);
  if (k->bound_source[0]) rec_param_str(rec, "bound_source", k->bound_source);
  if (isfinite(k->bound)) rec_param_num(rec, "bound", k->bound);
  rec_param_int(rec, "seed", (int64_t)x->seed);
  if (k->status == FEAT_NOT_SUPPORTED) rec_set_status(rec, REC_NOT_SUPPORTED, k->detail);
  else if (k->status == FEAT_UNDECIDED) rec_set_status(rec, REC_UNDECIDED, k->detail);
  else {
    if (isfinite(k->value)) rec_metric_value(rec, "value", "", RB_NONE, k->value);
    rec_check_add(rec, "feature_ok", k->status == FEAT_PASS);
  }
  return rec_finalize(rec); /* its status from its checks: inside vouch run and in --json alike */
}

/* Check c's line (after its record is stored: a printed check is in the run). */
static void features_print_case(void *st, const vsuite_ctx *x, int c) {
  const features_state *s = st;
  (void)x;
  if (s->ran[c]) printf("  %-15s %-13s %s\n", s->ch[c].name, feat_status_name(s->ch[c].status), s->ch[c].detail);
}

/* The checks a resumed run kept (none printed when a check broke). */
static void features_print(const void *st, const vsuite_ctx *x, const veng *recs) {
  (void)recs; /* the report is made of the suite's own results */
  const features_state *s = st;
  (void)x;
  int n_kept = 0;
  for (int i = 0; i < MAX_CHECKS; i++) n_kept += s->kept[i];
  if (s->broken || !n_kept) return;
  printf("features: %d checks kept from the interrupted run (not run again):", n_kept);
  for (int i = 0; i < MAX_CHECKS; i++)
    if (s->kept[i]) printf(" %s", check_name(s, i));
  printf("\n");
}

static void features_free(void *st) {
  features_state *s = st;
  features_end(s->fs);
  features_served_end(s->fsv);
  vrouting_free(&s->routing);
}

const vsuite vsuite_features = {
    .name = "features",
    .usage = FEATURES_USAGE,
    .default_model = "synth:tiny",
    .default_paths = NULL, /* unused: the paths are --ref, --path, --floor */
    .state_size = sizeof(features_state),
    .init = features_init,
    .option = features_option,
    .options_done = features_options_done,
    .check = features_check_opts,
    .prepare = features_prepare,
    .n_cases = features_n_cases,
    .run = features_run_case,
    .record = features_record,
    .print = features_print,
    .free = features_free,
    .layers = true,
    .quiet_verdict = true,
    .skip_stored = true,
    .case_noun = "checks",
    .paths = features_paths,
    .plan = features_plan,
    .kept = features_kept,
    .print_case = features_print_case,
    .estimate = features_estimate,
    .mode = features_text_mode, /* --ref-server: server against server on text (features_text.c) */
};
