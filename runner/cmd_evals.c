/* vouch diverge | features (see cmd_evals.h). */
#include "runner/cmd_evals.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/interrupt.h"
#include "model/model.h"
#include "runner/cli.h"
#include "runner/engine.h"
#include "runner/record.h"
#include "runner/suite.h"
#include "suites/bounds.h"
#include "suites/diverge.h"
#include "suites/features.h"
#include "suites/paths.h"
#include "suites/stats_tests.h"

/* ---- vouch features ---- */

static const char FEATURES_USAGE[] =
    "usage: vouch features --path NAME [--ref cpu-ref] [--floor PATH] [--model DIR|synth:PRESET] [--full-ctx N]\n"
    "                      [--kld-tol K] [--margin-eps E] [--seed S] [--layers N] [--threads N] [--path-lib FILE]\n"
    "                      [--json FILE]\n"
    "  Production features of a path against a reference path: full context (decode at the\n"
    "  last positions before --full-ctx, default max_position_embeddings, after fill_cache),\n"
    "  seeded sampling (the sampled distribution matches the reference's; 20000 draws fit it),\n"
    "  structured output (a token DFA masks logits), speculative verification (K+1 tokens per\n"
    "  step == K+1 single steps) and stop tokens. Each check is pass, fail or not_supported,\n"
    "  with its numbers and where its bound comes from.\n"
    "  --floor PATH (e.g. cpu-ref next to bf16 paths) computes the same short-context rows in fp32:\n"
    "  bounds become multiples of its distance from the reference (docs/verdicts.md); without it\n"
    "  --kld-tol (nats) and --margin-eps (logits; argmax compared only where the reference's top-2\n"
    "  margin exceeds it) apply.\n"
    "  defaults: --model synth:tiny --ref cpu-ref --kld-tol 0.01 --margin-eps 0.001\n";

/* What feature_done needs to make a check's record. */
typedef struct {
  veng *recs;          /* the records made so far */
  const char *model;   /* the model's source, a parameter of every record */
  const feat_opts *o;  /* the run's options: path, reference, floor, seed */
  bool failed;         /* a check failed */
} feat_ctx;

/* feat_opts.on_check: the check's record, in the run's store before the next check starts, then
 * its line of the table (a printed check is stored, as with kernels). */
static vstatus feature_done(void *ctx, const feat_check *c) {
  feat_ctx *f = ctx;
  vrecord *rec = eng_new(f->recs, "features", c->name, f->o->path);
  if (!rec) return V_ERR;
  rec_param_str(rec, "model", f->model);
  rec_param_str(rec, "reference", f->o->ref);
  rec_param_str(rec, "detail", c->detail);
  if (f->o->floor) rec_param_str(rec, "floor", f->o->floor);
  if (c->bound_source[0]) rec_param_str(rec, "bound_source", c->bound_source);
  if (isfinite(c->bound)) rec_param_num(rec, "bound", c->bound);
  rec_param_int(rec, "seed", (int64_t)f->o->seed);
  if (c->status == FEAT_NOT_SUPPORTED) rec_set_status(rec, REC_NOT_SUPPORTED, c->detail);
  else {
    if (isfinite(c->value)) rec_metric_value(rec, "value", "", RB_NONE, c->value);
    rec_check_add(rec, "feature_ok", c->status == FEAT_PASS);
  }
  rec_finalize(rec); /* its status from its checks: inside vouch run and in --json alike */
  VTRY(eng_flush(f->recs));
  printf("  %-13s %-13s %s\n", c->name, feat_status_name(c->status), c->detail);
  f->failed |= c->status == FEAT_FAIL;
  return V_OK;
}

/* feat_opts.skip: a resumed run holds this check's record already. */
static bool feature_kept(void *ctx, const char *name) {
  const feat_ctx *f = ctx;
  return rec_stored("features", name, f->o->path);
}

int cmd_features(int argc, char **argv) {
  const char *model = "synth:tiny", *path = NULL, *ref = "cpu-ref", *floor_p = NULL, *json = NULL, *v;
  long layers = 0, threads = 0, full = 0;
  double tol = 0.01, eps = 0.001;
  uint64_t seed = 1;
  vstatus err = V_OK;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(FEATURES_USAGE, stdout); return EXIT_OK; }
    if (cli_opt(argc, argv, &i, "--model", &v, &err)) { if (v) model = v; }
    else if (cli_opt(argc, argv, &i, "--path", &v, &err)) { if (v) path = v; }
    else if (cli_opt(argc, argv, &i, "--ref", &v, &err)) { if (v) ref = v; }
    else if (cli_opt(argc, argv, &i, "--full-ctx", &v, &err)) { if (v) err = cli_size("--full-ctx", v, &full); }
    else if (cli_opt(argc, argv, &i, "--floor", &v, &err)) { if (v) floor_p = v; }
    else if (cli_opt(argc, argv, &i, "--kld-tol", &v, &err)) { if (v) err = cli_double("--kld-tol", v, &tol); }
    else if (cli_opt(argc, argv, &i, "--margin-eps", &v, &err)) { if (v) err = cli_double("--margin-eps", v, &eps); }
    else if (cli_opt(argc, argv, &i, "--layers", &v, &err)) { if (v) err = cli_int("--layers", v, 1, 1000, &layers); }
    else if (cli_opt(argc, argv, &i, "--threads", &v, &err)) { if (v) err = cli_int("--threads", v, 0, 4096, &threads); }
    else if (cli_opt(argc, argv, &i, "--seed", &v, &err)) { if (v) err = cli_u64("--seed", v, &seed); }
    else if (cli_opt(argc, argv, &i, "--path-lib", &v, &err)) { if (v) err = vpaths_load_lib(v); }
    else if (cli_opt(argc, argv, &i, "--json", &v, &err)) { if (v) json = v; }
    else err = VERR("unknown option '%s' (see vouch features --help)", a);
    if (err) { cli_print_error("features"); return EXIT_USAGE; }
  }
  if (!path) { fputs(FEATURES_USAGE, stderr); return EXIT_USAGE; }
  const char *all[3] = {ref, path, floor_p};
  const int n_all = floor_p ? 3 : 2;
  if (vsuite_check_paths(all, n_all)) { cli_print_error("features"); return EXIT_USAGE; }
  if (!(tol > 0) || !(eps >= 0)) {
    VERR("--kld-tol must be > 0 and --margin-eps >= 0");
    cli_print_error("features");
    return EXIT_USAGE;
  }
  ds_model m;
  if (vsuite_open_model(&m, model, seed, (int)layers, vsuite_any_host(all, n_all), NULL, NULL, false)) {
    cli_print_error("features");
    return EXIT_CHECK_FAILED;
  }
  veng recs = {0};
  feat_opts o = {.path = path, .ref = ref, .floor = floor_p, .full_ctx = (int)full, .kld_tol = tol, .margin_eps = eps,
                 .seed = seed, .n_threads = (int)threads, .on_check = feature_done, .skip = feature_kept};
  feat_ctx fc = {.recs = &recs, .model = m.source, .o = &o};
  o.ctx = &fc;
  feat_check ch[FEAT_N_CHECKS] = {0}; /* read below even when features_run stops at an option error */
  printf("features: path %s vs %s on %s\n", path, ref, m.source);
  /* each check is stored as it finishes (feature_done): an error keeps the ones before it */
  int rc = EXIT_OK;
  if (features_run(&m, &o, ch)) {
    cli_print_error("features");
    rc = EXIT_CHECK_FAILED;
  } else {
    int n_kept = 0;
    for (int i = 0; i < FEAT_N_CHECKS; i++) n_kept += ch[i].kept;
    if (n_kept) {
      printf("features: %d checks kept from the interrupted run (not run again):", n_kept);
      for (int i = 0; i < FEAT_N_CHECKS; i++)
        if (ch[i].kept) printf(" %s", ch[i].name);
      printf("\n");
    }
  }
  if (fc.failed) rc = EXIT_CHECK_FAILED;
  int n_stopped = 0;
  for (int i = 0; vinterrupted() && i < FEAT_N_CHECKS; i++) n_stopped += ch[i].interrupted;
  if (n_stopped) { /* the finished checks are stored; no --json: it would pass for the whole */
    fprintf(stderr, "features: interrupted: %d checks not run\n", n_stopped);
    rc = EXIT_INTERRUPTED;
  } else if (vsuite_emit_records(json, &recs)) { cli_print_error("features"); rc = EXIT_CHECK_FAILED; }
  eng_free(&recs);
  ds_model_close(&m);
  return rc;
}
