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

/* ---- vouch diverge ---- */

static const char DIVERGE_USAGE[] =
    "usage: vouch diverge --paths REF,P1[,P2..] [--model DIR|synth:PRESET] [--batch 1,8,64] [--context 0,4k]\n"
    "                     [--tokens T] [--seed S] [--layers N] [--threads N] [--max-kld K] [--min-same-top PCT]\n"
    "                     [--margin-eps E] [--baseline PATH] [--ragged] [--spec K] [--routing natural|zipf:S|..]\n"
    "                     [--alternate-natural] [--path-lib FILE] [--json FILE]\n"
    "  Teacher-forced divergence of each path against the first on one token stream: the\n"
    "  first path's temperature-1 samples are fed to every path. For each batch x context:\n"
    "  the context is filled by fill_cache (the shared synthetic-cache rule, same seed on every\n"
    "  path), then T decode steps run. Prints mean KLD +/- standard error, KLD percentiles\n"
    "  (99.9, 99, 95, median), same-top-token %, RMS dp (next token), max |dlogit| and NaN/Inf.\n"
    "  --ragged: sequence b's context is C x (batch - b) / batch (mixed cached lengths in one step);\n"
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
    "  defaults: --model synth:tiny --batch 1 --context 0 --tokens 32\n";

int cmd_diverge(int argc, char **argv) {
  const char *model = "synth:tiny", *paths_s = NULL, *batch_s = "1", *ctx_s = "0", *json = NULL, *v;
  long tokens = 32, layers = 0, threads = 0;
  double max_kld = 0.01, min_same = 90, margin_eps = 0;
  const char *baseline = NULL; /* a compared path whose distance to the reference calibrates the bounds */
  const char *routing_s = "natural";
  long spec_k = 0;
  bool ragged = false, alternate = false;
  uint64_t seed = 1;
  vstatus err = V_OK;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(DIVERGE_USAGE, stdout); return EXIT_OK; }
    if (cli_opt(argc, argv, &i, "--model", &v, &err)) { if (v) model = v; }
    else if (cli_opt(argc, argv, &i, "--paths", &v, &err)) { if (v) paths_s = v; }
    else if (cli_opt(argc, argv, &i, "--batch", &v, &err)) { if (v) batch_s = v; }
    else if (cli_opt(argc, argv, &i, "--context", &v, &err)) { if (v) ctx_s = v; }
    else if (cli_opt(argc, argv, &i, "--tokens", &v, &err)) { if (v) err = cli_int("--tokens", v, 1, 1 << 20, &tokens); }
    else if (cli_opt(argc, argv, &i, "--layers", &v, &err)) { if (v) err = cli_int("--layers", v, 1, 1000, &layers); }
    else if (cli_opt(argc, argv, &i, "--threads", &v, &err)) { if (v) err = cli_int("--threads", v, 0, 4096, &threads); }
    else if (cli_opt(argc, argv, &i, "--seed", &v, &err)) { if (v) err = cli_u64("--seed", v, &seed); }
    else if (cli_opt(argc, argv, &i, "--baseline", &v, &err)) { if (v) baseline = v; }
    else if (cli_opt(argc, argv, &i, "--max-kld", &v, &err)) { if (v) err = cli_double("--max-kld", v, &max_kld); }
    else if (cli_opt(argc, argv, &i, "--min-same-top", &v, &err)) { if (v) err = cli_double("--min-same-top", v, &min_same); }
    else if (cli_opt(argc, argv, &i, "--margin-eps", &v, &err)) { if (v) err = cli_double("--margin-eps", v, &margin_eps); }
    else if (cli_opt(argc, argv, &i, "--spec", &v, &err)) { if (v) err = cli_int("--spec", v, 0, 15, &spec_k); }
    else if (cli_opt(argc, argv, &i, "--routing", &v, &err)) { if (v) routing_s = v; }
    else if (!strcmp(a, "--ragged")) ragged = true;
    else if (!strcmp(a, "--alternate-natural")) alternate = true;
    else if (cli_opt(argc, argv, &i, "--path-lib", &v, &err)) { if (v) err = vpaths_load_lib(v); }
    else if (cli_opt(argc, argv, &i, "--json", &v, &err)) { if (v) json = v; }
    else err = VERR("unknown option '%s' (see vouch diverge --help)", a);
    if (err) { cli_print_error("diverge"); return EXIT_USAGE; }
  }
  if (!paths_s) { fputs(DIVERGE_USAGE, stderr); return EXIT_USAGE; }
  char *pbuf = NULL;
  const char **paths = NULL;
  int np = 0, nb = 0, nc = 0;
  long *batches = NULL, *ctxs = NULL;
  if (vsuite_split_names("--paths", paths_s, &pbuf, &paths, &np) || vsuite_check_paths(paths, np) ||
      cli_size_list("--batch", batch_s, &batches, &nb) || cli_size_list("--context", ctx_s, &ctxs, &nc)) {
    cli_print_error("diverge");
    free(pbuf); free(paths); free(batches); free(ctxs);
    return EXIT_USAGE;
  }
  if (np < 2) {
    VERR("option --paths: give at least two paths (the first is the reference)");
    cli_print_error("diverge");
    free(pbuf); free(paths); free(batches); free(ctxs);
    return EXIT_USAGE;
  }
  ds_model m;
  if (vsuite_open_model(&m, model, seed, (int)layers, vsuite_any_host(paths, np), NULL, NULL, false)) {
    cli_print_error("diverge");
    free(pbuf); free(paths); free(batches); free(ctxs);
    return EXIT_CHECK_FAILED;
  }
  sweep_routing routing;
  memset(&routing, 0, sizeof routing);
  if (sweep_routing_parse(routing_s, &routing) || sweep_routing_prepare(&routing, &m.cfg, seed) ||
      (alternate && routing.kind == ROUTE_NATURAL && VERR("--alternate-natural needs forced experts (uniform, zipf:S or a trace)"))) {
    verr_prefix("option --routing");
    cli_print_error("diverge");
    sweep_routing_free(&routing);
    ds_model_close(&m);
    free(pbuf); free(paths); free(batches); free(ctxs);
    return EXIT_USAGE;
  }
  printf("diverge: model %s, reference %s, %ld teacher-forced steps per sequence x %ld token%s%s, routing %s%s\n",
         m.source, paths[0], tokens, spec_k + 1, spec_k ? "s (verification steps)" : "", ragged ? ", ragged contexts" : "",
         routing_s, alternate ? " on even steps, natural on odd" : "");
  printf("%-10s %5s %7s %20s %10s %10s %10s %10s %8s %9s %10s %6s %7s\n", "path", "batch", "context", "mean KLD +/- se",
         "p99.9", "p99", "p95", "median", "same%", "RMS dp", "max|dl|", "nan", "status");
  veng recs = {0};
  int rc = EXIT_OK;
  diverge_result *res = calloc((size_t)np, sizeof *res);
  bool stopped = false; /* SIGINT / SIGTERM under `vouch run`: stop after the point in flight */
  for (int bi = 0; bi < nb && res && !stopped; bi++)
    for (int ci = 0; ci < nc; ci++) {
      if ((stopped = vinterrupted())) {
        fprintf(stderr, "diverge: interrupted after %d of %d points: the rest not run\n", bi * nc + ci, nb * nc);
        break;
      }
      diverge_opts o = {.paths = paths, .n_paths = np, .batch = (int)batches[bi], .context = (int)ctxs[ci],
                        .tokens = (int)tokens, .seed = seed, .n_threads = (int)threads, .ragged = ragged,
                        .spec_k = (int)spec_k, .routing = &routing, .alternate_natural = alternate};
      char id[96]; /* the point's records, one per compared path */
      char shape[48] = "";
      if (ragged) snprintf(shape, sizeof shape, "_ragged");
      if (spec_k) snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "_k%ld", spec_k);
      if (routing.kind != ROUTE_NATURAL)
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), alternate ? "_forced_alt" : "_forced");
      snprintf(id, sizeof id, "b%d_c%d_t%ld%s_vs_%s", o.batch, o.context, tokens, shape, paths[0]);
      bool kept = true; /* a resumed run holds every record of this point */
      for (int p = 1; p < np; p++) kept &= rec_stored("diverge", id, paths[p]);
      if (kept) {
        printf("%-10s %5d %7d  kept from the interrupted run\n", "", o.batch, o.context);
        continue;
      }
      if (diverge_run(&m, &o, res)) {
        cli_print_error("diverge");
        rc = EXIT_CHECK_FAILED;
        continue;
      }
      /* With --baseline B (the unoptimized bf16 engine; the reference an fp32 path), B's distance from
       * the reference is the noise floor of this very point, and another path passes when it is at
       * most k (VOUCH_ACCURACY_RATIO) times as far from fp32: mean KLD <= k^2 (B's mean + 3 se), and the
       * same argmax on every row whose reference margin exceeds 2k x B's largest top-2 error (a path
       * within k x that error cannot flip such a row). B itself is evidence, not a subject: it only
       * has to produce finite logits. */
      const diverge_result *rb = NULL;
      for (int p = 0; baseline && p < np - 1; p++)
        if (res[p].supported && !strcmp(res[p].path, baseline)) rb = &res[p];
      const double kr = VOUCH_ACCURACY_RATIO;
      double b_top = 0;
      for (int i = 0; rb && i < rb->rows; i++)
        if (rb->top_err[i] > b_top) b_top = rb->top_err[i];
      const double eps = rb ? 2 * kr * b_top : margin_eps;
      for (int p = 0; p < np - 1; p++) {
        diverge_result *r = &res[p];
        const bool is_base = rb && r == rb;
        const double kld_bound = rb ? kr * kr * (rb->kld_mean + 3 * rb->kld_se) : max_kld;
        int decided = 0, flips = 0;
        for (int i = 0; r->supported && i < r->rows; i++)
          if (r->margin[i] > eps) { decided++; flips += !r->same[i]; }
        /* rows where only the path's argmax left the reference's, and where only the baseline's did */
        long only_p = 0, only_b = 0;
        for (int i = 0; rb && !is_base && r->supported && i < r->rows && i < rb->rows; i++) {
          only_p += !r->same[i] && rb->same[i];
          only_b += r->same[i] && !rb->same[i];
        }
        const double mcn_p = stat_mcnemar_p(only_p, only_b);
        const double same_dec = decided ? 100.0 * (decided - flips) / decided : 100.0;
        char bound_src[200];
        if (rb)
          snprintf(bound_src, sizeof bound_src, "floor: baseline %s at this point (k=%g): mean KLD %.3g +/- %.2g, top-2 "
                   "error %.3g", baseline, kr, rb->kld_mean, rb->kld_se, b_top);
        else
          snprintf(bound_src, sizeof bound_src, "options: --max-kld %.3g, --min-same-top %.3g over rows with margin > "
                   "--margin-eps %.3g", max_kld, min_same, margin_eps);
        vrecord *rec = eng_new(&recs, "diverge", id, r->path);
        if (rec) {
          rec_param_str(rec, "model", m.source);
          rec_param_str(rec, "reference", paths[0]);
          rec_param_int(rec, "batch", o.batch);
          rec_param_int(rec, "context", o.context);
          rec_param_int(rec, "tokens", o.tokens);
          rec_param_int(rec, "seed", (int64_t)seed);
          rec_param_int(rec, "spec_k", spec_k);
          rec_param_int(rec, "ragged", ragged);
          rec_param_str(rec, "routing", routing_s);
          rec_param_int(rec, "alternate_natural", alternate);
        }
        const char *status;
        if (!r->supported) {
          status = r->errored ? "error" : "n/s";
          if (rec) rec_set_status(rec, r->errored ? REC_ERROR : REC_NOT_SUPPORTED, r->reason);
          printf("%-10s %5d %7d  %s: %s\n", r->path, o.batch, o.context, r->errored ? "error" : "not supported", r->reason);
          if (r->errored) rc = EXIT_CHECK_FAILED;
        } else {
          bool finite = r->nonfinite == 0 && r->ref_nonfinite == 0;
          /* with a baseline: the path's argmax leaves the reference's on decided rows no more often than
           * the baseline's does there, beyond chance (McNemar, alpha 0.01): a router near-tie can flip one
           * row of either bf16 engine, a defect flips many */
          long dec_b = 0;
          for (int i = 0; rb && !is_base && i < r->rows && i < rb->rows; i++) dec_b += r->margin[i] > eps && !rb->same[i];
          const bool same_ok = rb ? !(flips > dec_b && only_p > only_b && mcn_p < 0.01) : same_dec >= min_same;
          bool ok = is_base ? finite : r->kld_mean <= kld_bound && same_ok && finite;
          status = ok ? (is_base ? "base" : "pass") : "FAIL";
          if (!ok) rc = EXIT_CHECK_FAILED;
          printf("%-10s %5d %7d %10.3g +/- %-7.2g %10.3g %10.3g %10.3g %10.3g %8.2f %9.3g %10.3g %6ld %7s\n", r->path, o.batch,
                 o.context, r->kld_mean, r->kld_se, r->kld_p999, r->kld_p99, r->kld_p95, r->kld_median, r->same_top_pct,
                 r->rms_dp, r->max_dlogit, r->nonfinite, status);
          if (!is_base && !same_ok)
            printf("%-10s   argmax differs on %d of %d rows whose reference margin > eps %.3g (baseline %ld); rows only the "
                   "path missed %ld, only the baseline %ld, McNemar p %.3g\n", "", flips, decided, eps, dec_b, only_p, only_b,
                   mcn_p);
          if (rec) {
            int n = 0;
            double *k = malloc((size_t)r->rows * sizeof *k), *dp = malloc((size_t)r->rows * sizeof *dp);
            for (int i = 0; k && dp && i < r->rows; i++)
              if (!isnan(r->kld[i])) { k[n] = r->kld[i]; dp[n] = r->dp[i] * r->dp[i]; n++; }
            rec_metric_samples(rec, "kld", "nats", RD_MEAN, RB_LOWER, k, n, 0);
            rec_metric_samples(rec, "kld_p99", "nats", RD_P99, RB_LOWER, k, n, 0);
            rec_metric_samples(rec, "dp_squared", "", RD_MEAN, RB_LOWER, dp, n, 0);
            free(k);
            free(dp);
            rec_metric_value(rec, "kld_se", "nats", RB_LOWER, r->kld_se);
            rec_metric_value(rec, "kld_p999", "nats", RB_LOWER, r->kld_p999);
            rec_metric_value(rec, "kld_p95", "nats", RB_LOWER, r->kld_p95);
            rec_metric_value(rec, "kld_median", "nats", RB_LOWER, r->kld_median);
            rec_metric_value(rec, "same_top_pct", "%", RB_HIGHER, r->same_top_pct);
            rec_metric_value(rec, "rms_dp", "", RB_LOWER, r->rms_dp);
            rec_metric_value(rec, "max_dlogit", "", RB_LOWER, isfinite(r->max_dlogit) ? r->max_dlogit : 1e300);
            rec_metric_value(rec, "nonfinite_logits", "", RB_LOWER, (double)r->nonfinite);
            rec_metric_value(rec, "wall_s", "s", RB_LOWER, r->wall_s);
            if (rb) rec_param_str(rec, "baseline", baseline);
            rec_metric_value(rec, "decided_rows", "", RB_NONE, decided);
            rec_metric_value(rec, "decided_flips", "", RB_LOWER, flips);
            if (rb && !is_base) {
              rec_metric_value(rec, "rows_only_path_missed", "", RB_LOWER, (double)only_p);
              rec_metric_value(rec, "rows_only_baseline_missed", "", RB_NONE, (double)only_b);
              rec_metric_value(rec, "same_top_mcnemar_p", "", RB_HIGHER, mcn_p);
            }
            if (!is_base) {
              rec_param_str(rec, "bound_source", bound_src);
              rec_param_num(rec, "margin_eps", eps);
              rec_set_threshold(rec, "kld", "<=", kld_bound);
              rec_check_add(rec, rb ? "same_top_on_decided_rows" : "same_top_pct_ok", same_ok);
            }
            rec_check_add(rec, "no_nonfinite", finite);
          }
        }
        (void)status;
        if (rec) rec_finalize(rec);
      }
      /* after every path: the baseline's rows are read by the paths after it */
      for (int p = 0; p < np - 1; p++) diverge_result_free(&res[p]);
      /* this point is finished: its records are in the run before the next point starts */
      if (eng_flush(&recs)) { cli_print_error("diverge"); rc = EXIT_CHECK_FAILED; }
    }
  if (stopped) rc = EXIT_INTERRUPTED; /* the finished points are stored; no --json: it would pass for the whole */
  else if (vsuite_emit_records(json, &recs)) { cli_print_error("diverge"); rc = EXIT_CHECK_FAILED; }
  eng_free(&recs);
  free(res);
  sweep_routing_free(&routing);
  ds_model_close(&m);
  free(pbuf); free(paths); free(batches); free(ctxs);
  return rc;
}

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
