/* vouch diverge | eval mrcr | eval chain | features (see cmd_evals.h). */
#include "common/clock.h"
#include "runner/cmd_evals.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/construct.h"
#include "model/model.h"
#include "runner/cli.h"
#include "runner/engine.h"
#include "runner/record.h"
#include "suites/bounds.h"
#include "suites/diverge.h"
#include "suites/evals.h"
#include "suites/features.h"
#include "suites/paths.h"
#include "suites/stats_tests.h"

/* ---- shared helpers ---- */

/* Splits "a,b,c" into names (pointers into a malloc'ed copy held in *buf). */
static vstatus split_names(const char *opt, const char *s, char **buf, const char ***out, int *n) {
  *buf = strdup(s);
  int cap = 1;
  for (const char *p = s; *p; p++) cap += *p == ',';
  const char **v = calloc((size_t)cap, sizeof *v);
  if (!*buf || !v) { free(v); return VERR("out of memory"); }
  int k = 0;
  char *save = NULL;
  for (char *t = strtok_r(*buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) v[k++] = t;
  if (k == 0) { free(v); return VERR("option %s: empty list", opt); }
  *out = v;
  *n = k;
  return V_OK;
}

static vstatus check_paths(const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (!vpaths_find(names[i])) return VERR("option --paths: unknown path '%s' (known: %s)", names[i], vpaths_names());
  return V_OK;
}

/* Opens synth:recall-* through the constructor (with the knobs), anything else through
 * ds_model_open (host weights when a path runs on the CPU). */
static vstatus open_model(ds_model *m, const char *spec, uint64_t seed, int layers, bool host, const construct_opts *knobs,
                          construct_layout *L, bool need_layout) {
  if (!strncmp(spec, "synth:", 6) && construct_is_preset(spec + 6)) {
    construct_opts o;
    VTRY(construct_preset_opts(spec + 6, &o));
    if (knobs) {
      if (knobs->cos >= 0) o.cos = knobs->cos;
      if (knobs->gap > 0) o.gap = knobs->gap;
      if (knobs->answer_logit > 0) o.answer_logit = knobs->answer_logit;
    }
    if (layers > 0) o.layers = layers;
    construct_layout tmp;
    return construct_model_open(m, spec + 6, &o, seed, L ? L : &tmp);
  }
  VTRY(ds_model_open(m, spec, seed, layers, host));
  if (need_layout) {
    vstatus s = construct_layout_of(m, L);
    if (s) { ds_model_close(m); return s; }
  }
  return V_OK;
}

/* True when one of the paths reads host weights (vpath_caps.host_weights): open the model with a host copy. */
static bool any_host(const char *const *p, int n) {
  for (int i = 0; i < n; i++)
    if (vpaths_host_weights(p[i])) return true;
  return false;
}

/* The end of a suite: records not yet stored go to the run, every record to --json FILE. */
static vstatus emit_records(const char *file, veng *recs) {
  VTRY(eng_flush(recs));
  return eng_write_json(recs, file);
}

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
  if (split_names("--paths", paths_s, &pbuf, &paths, &np) || check_paths(paths, np) ||
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
  if (open_model(&m, model, seed, (int)layers, any_host(paths, np), NULL, NULL, false)) {
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
  for (int bi = 0; bi < nb && res; bi++)
    for (int ci = 0; ci < nc; ci++) {
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
  if (emit_records(json, &recs)) { cli_print_error("diverge"); rc = EXIT_CHECK_FAILED; }
  eng_free(&recs);
  free(res);
  sweep_routing_free(&routing);
  ds_model_close(&m);
  free(pbuf); free(paths); free(batches); free(ctxs);
  return rc;
}

/* ---- vouch eval mrcr | chain ---- */

/* Knob options shared by the evals (apply to synth:recall-* models only). */
static bool knob_opt(int argc, char **argv, int *i, construct_opts *k, vstatus *err) {
  const char *v;
  if (cli_opt(argc, argv, i, "--cos", &v, err)) { if (v) *err = cli_double("--cos", v, &k->cos); return true; }
  if (cli_opt(argc, argv, i, "--gap", &v, err)) { if (v) *err = cli_double("--gap", v, &k->gap); return true; }
  if (cli_opt(argc, argv, i, "--answer-logit", &v, err)) {
    if (v) *err = cli_double("--answer-logit", v, &k->answer_logit);
    return true;
  }
  return false;
}

static cJSON *ints_json(const int32_t *v, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
  return a;
}

static vstatus write_json_file(const char *file, cJSON *root) {
  char *txt = cJSON_PrintUnformatted(root);
  FILE *f = fopen(file, "w");
  vstatus s = V_OK;
  if (!f || !txt || fputs(txt, f) < 0) s = VERR("%s: cannot write", file);
  if (f && fclose(f) != 0 && !s) s = VERR("%s: cannot write", file);
  free(txt);
  return s;
}

static cJSON *layout_obj(const construct_layout *L) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "n_keys", L->o.n_keys);
  cJSON_AddNumberToObject(o, "family", L->o.family);
  cJSON_AddNumberToObject(o, "cos", L->o.cos);
  cJSON_AddNumberToObject(o, "gap", L->o.gap);
  cJSON_AddNumberToObject(o, "vocab", L->vocab);
  cJSON_AddNumberToObject(o, "pair0", L->pair0);
  cJSON_AddNumberToObject(o, "query0", L->query0);
  return o;
}

/* Scores one path over a subset of queries (mask NULL: all). */
static double score_of(const eval_path_result *pr, const unsigned char *mask, int n, int *count) {
  long ok = 0, c = 0;
  for (int i = 0; i < n; i++)
    if (!mask || mask[i]) { ok += pr->correct[i]; c++; }
  if (count) *count = (int)c;
  return c ? (double)ok / c : NAN;
}

/* Pairwise: discordant counts of path b vs reference a over the mask. */
static void discordant(const eval_path_result *a, const eval_path_result *b, const unsigned char *mask, int n, long *ab,
                       long *ba) {
  *ab = *ba = 0;
  for (int i = 0; i < n; i++) {
    if (mask && !mask[i]) continue;
    if (a->correct[i] && !b->correct[i]) (*ab)++;
    if (!a->correct[i] && b->correct[i]) (*ba)++;
  }
}

/* Adds the score, margin and pairwise figures of one (path, subset) to a record and prints
 * a line; returns true when it passes. */
static bool eval_record(veng *recs, const char *suite, const char *id, const eval_path_result *ref,
                        const eval_path_result *pr, bool is_ref, const unsigned char *mask, int n, double min_score,
                        double alpha, cJSON *params) {
  vrecord *rec = eng_new(recs, suite, id, pr->path);
  if (rec && params) {
    cJSON_Delete(rec->params);
    rec->params = cJSON_Duplicate(params, 1);
  }
  if (!pr->supported) {
    if (rec) rec_set_status(rec, pr->errored ? REC_ERROR : REC_NOT_SUPPORTED, pr->reason);
    if (rec) rec_finalize(rec);
    return !pr->errored;
  }
  int cnt = 0;
  double s = score_of(pr, mask, n, &cnt);
  double *bits = malloc((size_t)(cnt > 0 ? cnt : 1) * sizeof *bits), *mg = malloc((size_t)(cnt > 0 ? cnt : 1) * sizeof *mg);
  int k = 0;
  for (int i = 0; bits && mg && i < n; i++)
    if (!mask || mask[i]) { bits[k] = pr->correct[i]; mg[k] = isfinite(pr->margin[i]) ? pr->margin[i] : -1e30; k++; }
  bool pass = s >= min_score;
  if (rec) {
    rec_metric_samples(rec, "score", "", RD_MEAN, RB_HIGHER, bits, k, 0);
    rec_metric_samples(rec, "margin_min", "logit", RD_MIN, RB_HIGHER, mg, k, 0);
    rec_metric_samples(rec, "margin_median", "logit", RD_MEDIAN, RB_HIGHER, mg, k, 0);
    rec_set_threshold(rec, "score", ">=", min_score);
  }
  if (!is_ref && ref->supported) {
    long ab, ba;
    discordant(ref, pr, mask, n, &ab, &ba);
    double p = stat_mcnemar_p(ab, ba), rs = score_of(ref, mask, n, NULL);
    bool worse = ab > ba && p < alpha;
    if (worse) pass = false;
    if (rec) {
      rec_metric_value(rec, "reference_score", "", RB_HIGHER, rs);
      rec_metric_value(rec, "paired_diff", "", RB_HIGHER, s - rs);
      rec_metric_value(rec, "ref_only_right", "", RB_LOWER, (double)ab);
      rec_metric_value(rec, "path_only_right", "", RB_HIGHER, (double)ba);
      rec_metric_value(rec, "mcnemar_p", "", RB_HIGHER, p);
      rec_check_add(rec, "not_worse_than_reference", !worse);
    }
  }
  if (rec) rec_finalize(rec);
  free(bits);
  free(mg);
  return pass;
}

static void print_pairwise(const char *label, const eval_path_result *ref, const eval_path_result *pr,
                           const unsigned char *mask, int n, double alpha) {
  if (!pr->supported || !ref->supported) return;
  long ab, ba;
  discordant(ref, pr, mask, n, &ab, &ba);
  double rs = score_of(ref, mask, n, NULL), s = score_of(pr, mask, n, NULL), p = stat_mcnemar_p(ab, ba);
  printf("  %-22s %s %.4f vs %s %.4f  diff %+.4f  discordant %ld/%ld  McNemar p %.3g%s\n", label, ref->path, rs, pr->path,
         s, s - rs, ab, ba, p, ab > ba && p < alpha ? "  (significantly worse)" : "");
}

static const char MRCR_USAGE[] =
    "usage: vouch eval mrcr [--model DIR|synth:recall-mrcr] [--paths P1,P2..] [--bins 1k,4k] [--needles 2,4,8]\n"
    "                       [--samples N] [--batch B] [--chunk C] [--seed S] [--threads N] [--min-score F]\n"
    "                       [--alpha A] [--cos C --gap G --answer-logit L] [--export-prompts FILE]\n"
    "                       [--path-lib FILE] [--json FILE]\n"
    "  Multi-needle retrieval on a constructed checkpoint: per context bin (total tokens, the\n"
    "  last N are the queries) and needle count N, --samples prompts with N near-duplicate keys\n"
    "  (cosine --cos) at spread depths; each needle is queried once (greedy next token).\n"
    "  Prints scores per bin x needles, an AUC over log2(bin), a depth x context table and the\n"
    "  answer-logit margins; compares every path with the first (paired difference, McNemar).\n"
    "  A (path, bin, needles) case passes when its score >= --min-score (default 0.99) and it is\n"
    "  not significantly worse than the first path (McNemar p < --alpha, default 0.05).\n"
    "  --export-prompts FILE writes the prompts (for scripts/peers/hf_eval.py) and exits unless\n"
    "  --paths is given. --cos/--gap/--answer-logit rebuild synth:recall-* with other difficulty.\n"
    "  defaults: --model synth:recall-mrcr --paths cpu-ref --bins 1k,4k --needles 2,4,8 --samples 4\n"
    "            --batch 1 --chunk 2048\n";

static const char *mrcr_depth_label[5] = {"0-20%", "20-40%", "40-60%", "60-80%", "80-100%"};

/* What mrcr_path_done needs to make one path's records. */
typedef struct {
  veng *recs;                  /* where the records go */
  const mrcr_result *r;        /* the run (filled by mrcr_run) */
  const char *model;           /* model source, a parameter of every record */
  const construct_layout *L;   /* the constructed model's knobs */
  const long *bins, *needles;  /* [n_bins], [n_needles]: the cells */
  int n_bins, n_needles;
  long samples;                /* prompts per cell */
  uint64_t seed;               /* prompt seed */
  double min_score, alpha;     /* the verdict's bounds (eval_record) */
  unsigned char *ok;           /* [n_paths][n_bins][n_needles] out: the cell passed */
} mrcr_ctx;

/* mrcr_opts.path_done: path p's records, one per (bin, needles), stored before the next path runs. */
static vstatus mrcr_path_done(void *ctx, int p) {
  mrcr_ctx *c = ctx;
  const mrcr_result *r = c->r;
  unsigned char *mask = calloc((size_t)r->n_queries, 1);
  if (!mask) return VERR("eval mrcr: out of memory");
  for (int bi = 0; bi < c->n_bins; bi++)
    for (int ni = 0; ni < c->n_needles; ni++) {
      for (int i = 0; i < r->n_queries; i++) mask[i] = r->q[i].bin == c->bins[bi] && r->q[i].needles == c->needles[ni];
      char id[96];
      snprintf(id, sizeof id, "mrcr_bin%ld_n%ld", c->bins[bi], c->needles[ni]);
      cJSON *params = cJSON_CreateObject();
      cJSON_AddStringToObject(params, "model", c->model);
      cJSON_AddNumberToObject(params, "bin", (double)c->bins[bi]);
      cJSON_AddNumberToObject(params, "needles", (double)c->needles[ni]);
      cJSON_AddNumberToObject(params, "samples", (double)c->samples);
      cJSON_AddNumberToObject(params, "seed", (double)c->seed);
      cJSON_AddNumberToObject(params, "cos", c->L->o.cos);
      cJSON_AddNumberToObject(params, "gap", c->L->o.gap);
      cJSON_AddStringToObject(params, "reference", r->pr[0].path);
      c->ok[((size_t)p * c->n_bins + bi) * c->n_needles + ni] =
          eval_record(c->recs, "evals", id, &r->pr[0], &r->pr[p], p == 0, mask, r->n_queries, c->min_score, c->alpha,
                      params);
      cJSON_Delete(params);
    }
  free(mask);
  return eng_flush(c->recs);
}

static int eval_mrcr(int argc, char **argv) {
  const char *model = "synth:recall-mrcr", *paths_s = "cpu-ref", *bins_s = "1k,4k", *need_s = "2,4,8", *json = NULL,
             *export_f = NULL, *v;
  long samples = 4, batch = 1, chunk = 2048, threads = 0;
  double min_score = 0.99, alpha = 0.05;
  uint64_t seed = 1, mseed = 0;
  bool paths_given = false;
  construct_opts knobs = {.cos = -1, .gap = -1, .answer_logit = -1};
  vstatus err = V_OK;
  veng recs = {0};             /* stored as each path finishes */
  unsigned char *cell_ok = NULL; /* [np][nbins][nneed]: the cell passed */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(MRCR_USAGE, stdout); return EXIT_OK; }
    if (knob_opt(argc, argv, &i, &knobs, &err)) {}
    else if (cli_opt(argc, argv, &i, "--model", &v, &err)) { if (v) model = v; }
    else if (cli_opt(argc, argv, &i, "--paths", &v, &err)) { if (v) { paths_s = v; paths_given = true; } }
    else if (cli_opt(argc, argv, &i, "--bins", &v, &err)) { if (v) bins_s = v; }
    else if (cli_opt(argc, argv, &i, "--needles", &v, &err)) { if (v) need_s = v; }
    else if (cli_opt(argc, argv, &i, "--samples", &v, &err)) { if (v) err = cli_int("--samples", v, 1, 1 << 20, &samples); }
    else if (cli_opt(argc, argv, &i, "--batch", &v, &err)) { if (v) err = cli_int("--batch", v, 1, 4096, &batch); }
    else if (cli_opt(argc, argv, &i, "--chunk", &v, &err)) { if (v) err = cli_int("--chunk", v, 1, 1 << 20, &chunk); }
    else if (cli_opt(argc, argv, &i, "--threads", &v, &err)) { if (v) err = cli_int("--threads", v, 0, 4096, &threads); }
    else if (cli_opt(argc, argv, &i, "--seed", &v, &err)) { if (v) err = cli_u64("--seed", v, &seed); }
    else if (cli_opt(argc, argv, &i, "--model-seed", &v, &err)) { if (v) err = cli_u64("--model-seed", v, &mseed); }
    else if (cli_opt(argc, argv, &i, "--min-score", &v, &err)) { if (v) err = cli_double("--min-score", v, &min_score); }
    else if (cli_opt(argc, argv, &i, "--alpha", &v, &err)) { if (v) err = cli_double("--alpha", v, &alpha); }
    else if (cli_opt(argc, argv, &i, "--export-prompts", &v, &err)) { if (v) export_f = v; }
    else if (cli_opt(argc, argv, &i, "--path-lib", &v, &err)) { if (v) err = vpaths_load_lib(v); }
    else if (cli_opt(argc, argv, &i, "--json", &v, &err)) { if (v) json = v; }
    else err = VERR("unknown option '%s' (see vouch eval mrcr --help)", a);
    if (err) { cli_print_error("eval mrcr"); return EXIT_USAGE; }
  }
  char *pbuf = NULL;
  const char **paths = NULL;
  int np = 0, nbins = 0, nneed = 0;
  long *bins = NULL, *needles = NULL;
  int rc = EXIT_OK;
  if (split_names("--paths", paths_s, &pbuf, &paths, &np) || check_paths(paths, np) ||
      cli_size_list("--bins", bins_s, &bins, &nbins) || cli_size_list("--needles", need_s, &needles, &nneed)) {
    cli_print_error("eval mrcr");
    free(pbuf); free(paths); free(bins); free(needles);
    return EXIT_USAGE;
  }
  ds_model m;
  construct_layout L;
  if (open_model(&m, model, mseed, 0, any_host(paths, np), &knobs, &L, true)) {
    cli_print_error("eval mrcr");
    free(pbuf); free(paths); free(bins); free(needles);
    return EXIT_CHECK_FAILED;
  }
  for (int i = 0; i < nneed; i++)
    if (needles[i] < 1 || needles[i] > L.o.family) {
      VERR("option --needles: %ld outside [1, %d] (the model's near-duplicate family size)", needles[i], L.o.family);
      cli_print_error("eval mrcr");
      rc = EXIT_USAGE;
      goto done;
    }
  if (export_f) {
    cJSON *root = cJSON_CreateObject(), *cases = NULL;
    cJSON_AddStringToObject(root, "kind", "mrcr");
    cJSON_AddStringToObject(root, "model", m.source);
    cJSON_AddItemToObject(root, "layout", layout_obj(&L));
    cases = cJSON_AddArrayToObject(root, "cases");
    vstatus s = V_OK;
    for (int bi = 0; bi < nbins && !s; bi++)
      for (int ni = 0; ni < nneed && !s; ni++)
        for (int sm = 0; sm < samples && !s; sm++) {
          int bin = (int)bins[bi], N = (int)needles[ni];
          int32_t *tok = malloc((size_t)bin * sizeof *tok), q[128], an[128];
          double dp[128];
          s = tok ? mrcr_prompt(&L, bin, N, sm, seed, tok, q, an, dp) : VERR("out of memory");
          if (!s) {
            cJSON *c = cJSON_CreateObject();
            cJSON_AddNumberToObject(c, "bin", bin);
            cJSON_AddNumberToObject(c, "needles", N);
            cJSON_AddNumberToObject(c, "sample", sm);
            cJSON_AddItemToObject(c, "prompt", ints_json(tok, bin - N));
            cJSON_AddItemToObject(c, "queries", ints_json(q, N));
            cJSON_AddItemToObject(c, "answers", ints_json(an, N));
            cJSON *d = cJSON_AddArrayToObject(c, "depths");
            for (int i = 0; i < N; i++) cJSON_AddItemToArray(d, cJSON_CreateNumber(dp[i]));
            cJSON_AddItemToArray(cases, c);
          }
          free(tok);
        }
    if (!s) s = write_json_file(export_f, root);
    cJSON_Delete(root);
    if (s) { cli_print_error("eval mrcr"); rc = EXIT_CHECK_FAILED; goto done; }
    printf("wrote %s: %d bins x %d needle counts x %ld samples\n", export_f, nbins, nneed, samples);
    if (!paths_given) goto done;
  }
  mrcr_result r;
  mrcr_ctx mc = {.recs = &recs, .r = &r, .model = m.source, .L = &L, .bins = bins, .n_bins = nbins, .needles = needles,
                 .n_needles = nneed, .samples = samples, .seed = seed, .min_score = min_score, .alpha = alpha,
                 .ok = cell_ok = calloc((size_t)np * nbins * nneed, 1)};
  mrcr_opts o = {.paths = paths, .n_paths = np, .bins = bins, .n_bins = nbins, .needles = needles, .n_needles = nneed,
                 .samples = (int)samples, .batch = (int)batch, .chunk = (int)chunk, .seed = seed, .n_threads = (int)threads,
                 .path_done = mrcr_path_done, .ctx = &mc};
  double t0 = vclock_now();
  if (!mc.ok) { VERR("eval mrcr: out of memory"); cli_print_error("eval mrcr"); rc = EXIT_CHECK_FAILED; goto done; }
  if (mrcr_run(&m, &L, &o, &r)) { cli_print_error("eval mrcr"); rc = EXIT_CHECK_FAILED; goto done; }
  printf("eval mrcr: model %s\n  difficulty: near-duplicate cosine %.3f, score gap %.2f nats (alpha %.1f), nominal answer "
         "logit %.1f; %ld samples per cell, seed %llu; wall %.1f s\n",
         m.source, L.o.cos, L.o.gap, L.alpha, L.o.answer_logit, samples, (unsigned long long)seed, vclock_now() - t0);
  unsigned char *mask = calloc((size_t)r.n_queries, 1);
  for (int p = 0; p < np && mask; p++) {
    const eval_path_result *pr = &r.pr[p];
    if (!pr->supported) {
      printf("\npath %s: %s: %s\n", pr->path, pr->errored ? "error" : "not supported", pr->reason);
      if (pr->errored) rc = EXIT_CHECK_FAILED;
    } else {
      double s_all = score_of(pr, NULL, r.n_queries, NULL);
      double *mg = malloc((size_t)r.n_queries * sizeof *mg);
      for (int i = 0; mg && i < r.n_queries; i++) mg[i] = pr->margin[i];
      printf("\npath %s: score %.4f over %d queries, answer margin min %.2f median %.2f, forward time %.2f s\n", pr->path,
             s_all, r.n_queries, mg ? stat_percentile(mg, r.n_queries, 0) : NAN,
             mg ? stat_percentile(mg, r.n_queries, 50) : NAN, pr->wall_s);
      free(mg);
      printf("  %-8s", "needles");
      for (int bi = 0; bi < nbins; bi++) printf(" %8ld", bins[bi]);
      printf("  %8s\n", "AUC");
      for (int ni = 0; ni < nneed; ni++) {
        printf("  %-8ld", needles[ni]);
        double xs[64], ys[64];
        for (int bi = 0; bi < nbins; bi++) {
          for (int i = 0; i < r.n_queries; i++) mask[i] = r.q[i].bin == bins[bi] && r.q[i].needles == needles[ni];
          ys[bi < 64 ? bi : 63] = score_of(pr, mask, r.n_queries, NULL);
          xs[bi < 64 ? bi : 63] = log2((double)bins[bi]);
          printf(" %8.3f", ys[bi < 64 ? bi : 63]);
        }
        printf("  %8.3f\n", stat_auc_normalized(xs, ys, nbins < 64 ? nbins : 64));
      }
      printf("  depth x context (all needle counts):\n  %-8s", "depth");
      for (int bi = 0; bi < nbins; bi++) printf(" %8ld", bins[bi]);
      printf("\n");
      for (int d = 0; d < 5; d++) {
        printf("  %-8s", mrcr_depth_label[d]);
        for (int bi = 0; bi < nbins; bi++) {
          int c = 0;
          for (int i = 0; i < r.n_queries; i++)
            mask[i] = r.q[i].bin == bins[bi] && (int)(r.q[i].depth * 5) == d;
          double s = score_of(pr, mask, r.n_queries, &c);
          if (c) printf(" %8.3f", s); else printf(" %8s", "-");
        }
        printf("\n");
      }
    }
    if (p > 0) {
      printf("  vs %s:\n", r.pr[0].path);
      print_pairwise("all", &r.pr[0], pr, NULL, r.n_queries, alpha);
    }
    /* the records, one per (bin, needles), were stored as the path finished (mrcr_path_done) */
    for (int bi = 0; bi < nbins; bi++)
      for (int ni = 0; ni < nneed; ni++) {
        for (int i = 0; i < r.n_queries; i++) mask[i] = r.q[i].bin == bins[bi] && r.q[i].needles == needles[ni];
        if (!mc.ok[((size_t)p * nbins + bi) * nneed + ni]) {
          rc = EXIT_CHECK_FAILED;
          if (pr->supported) printf("  FAIL %s: bin %ld, %ld needles: score %.4f < %.2f or significantly worse than %s\n",
                                    pr->path, bins[bi], needles[ni], score_of(pr, mask, r.n_queries, NULL), min_score,
                                    r.pr[0].path);
        }
      }
  }
  printf("\nverdict: %s\n", rc == EXIT_OK ? "pass" : "FAIL");
  if (emit_records(json, &recs)) { cli_print_error("eval mrcr"); rc = EXIT_CHECK_FAILED; }
  free(mask);
  mrcr_result_free(&r);
done:
  eng_free(&recs);
  free(cell_ok);
  ds_model_close(&m);
  free(pbuf); free(paths); free(bins); free(needles);
  return rc;
}

static const char CHAIN_USAGE[] =
    "usage: vouch eval chain [--model DIR|synth:recall-chain] [--paths P1,P2..] [--hops 64,256] [--samples N]\n"
    "                        [--batch B] [--temperature T] [--top-k K] [--top-p P] [--sample-seed S] [--seed S]\n"
    "                        [--threads N] [--min-score F] [--alpha A] [--cos C --gap G --answer-logit L]\n"
    "                        [--export-prompts FILE] [--path-lib FILE] [--json FILE]\n"
    "  Pointer chasing on a constructed checkpoint: the prompt lists a random cyclic permutation\n"
    "  of the keys as pairs, then a start key; each emitted token is the next query. One run to\n"
    "  the largest hop count; the token after each listed hop count is checked (exact match,\n"
    "  pass@1 = mean over --samples chains, each with its own permutation and sampling seed\n"
    "  stream), plus the first hop where the run left the true chain. Greedy by default;\n"
    "  --temperature > 0 samples through common/sampling.h with --sample-seed.\n"
    "  A (path, hops) case passes when pass@1 >= --min-score (default 0.99) and it is not\n"
    "  significantly worse than the first path (McNemar p < --alpha).\n"
    "  defaults: --model synth:recall-chain --paths cpu-ref --hops 64,256 --samples 8 --batch 1\n";

/* What chain_path_done needs to make one path's records. */
typedef struct {
  veng *recs;                /* where the records go */
  const chain_result *r;     /* the run (filled by chain_run) */
  const char *model;         /* model source, a parameter of every record */
  const long *hops;          /* [n_hops] hop counts scored */
  int n_hops;
  long samples;              /* chains */
  double temperature, top_p; /* sampling as given (0: greedy), for the ids and parameters */
  long top_k;
  uint64_t sample_seed;
  uint64_t seed;             /* permutation seed */
  double min_score, alpha;   /* the verdict's bounds (eval_record) */
  unsigned char *ok;         /* [n_paths][n_hops] out: the hop count passed */
} chain_ctx;

/* chain_opts.path_done: path p's records (one per hop count, and its first-wrong hops as raw
 * samples), stored before the next path runs. */
static vstatus chain_path_done(void *ctx, int p) {
  chain_ctx *c = ctx;
  const chain_result *r = c->r;
  const eval_path_result *pr = &r->pr[p];
  const int nh = c->n_hops, n = (int)c->samples * nh;
  const double temperature = c->temperature;
  unsigned char *mask = calloc((size_t)n, 1);
  if (!mask) return VERR("eval chain: out of memory");
  for (int hi = 0; hi < nh; hi++) {
    for (int i = 0; i < n; i++) mask[i] = i % nh == hi;
    char id[64];
    snprintf(id, sizeof id, "chain_hops%ld_t%g", c->hops[hi], temperature);
    cJSON *params = cJSON_CreateObject();
    cJSON_AddStringToObject(params, "model", c->model);
    cJSON_AddNumberToObject(params, "hops", (double)c->hops[hi]);
    cJSON_AddNumberToObject(params, "samples", (double)c->samples);
    cJSON_AddNumberToObject(params, "temperature", temperature);
    cJSON_AddNumberToObject(params, "top_k", (double)c->top_k);
    cJSON_AddNumberToObject(params, "top_p", c->top_p);
    cJSON_AddNumberToObject(params, "sample_seed", (double)c->sample_seed);
    cJSON_AddNumberToObject(params, "seed", (double)c->seed);
    cJSON_AddStringToObject(params, "reference", r->pr[0].path);
    c->ok[(size_t)p * nh + hi] = eval_record(c->recs, "evals", id, &r->pr[0], pr, p == 0, mask, n, c->min_score, c->alpha,
                                             params);
    cJSON_Delete(params);
  }
  free(mask);
  /* first-wrong hops as a record of raw samples */
  if (pr->supported) {
    char fid[48]; /* per temperature: a plan runs the greedy and the sampled chain side by side */
    snprintf(fid, sizeof fid, "chain_first_wrong_t%g", temperature);
    vrecord *rec = eng_new(c->recs, "evals", fid, pr->path);
    if (rec) {
      double *fw = malloc((size_t)c->samples * sizeof *fw);
      for (int s = 0; fw && s < c->samples; s++) fw[s] = r->first_wrong[p][s];
      rec_metric_samples(rec, "first_wrong_hop", "hop", RD_MEDIAN, RB_NONE, fw, (int)c->samples, 0);
      free(fw);
      rec_param_num(rec, "temperature", temperature);
      rec_finalize(rec);
    }
  }
  return eng_flush(c->recs);
}

static int eval_chain(int argc, char **argv) {
  const char *model = "synth:recall-chain", *paths_s = "cpu-ref", *hops_s = "64,256", *json = NULL, *export_f = NULL, *v;
  long samples = 8, batch = 1, threads = 0, top_k = 0;
  double min_score = 0.99, alpha = 0.05, temperature = 0, top_p = 1;
  uint64_t seed = 1, sseed = 0, mseed = 0;
  bool paths_given = false;
  construct_opts knobs = {.cos = -1, .gap = -1, .answer_logit = -1};
  vstatus err = V_OK;
  veng recs = {0};             /* stored as each path finishes */
  unsigned char *hop_ok = NULL; /* [np][nh]: the hop count passed */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(CHAIN_USAGE, stdout); return EXIT_OK; }
    if (knob_opt(argc, argv, &i, &knobs, &err)) {}
    else if (cli_opt(argc, argv, &i, "--model", &v, &err)) { if (v) model = v; }
    else if (cli_opt(argc, argv, &i, "--paths", &v, &err)) { if (v) { paths_s = v; paths_given = true; } }
    else if (cli_opt(argc, argv, &i, "--hops", &v, &err)) { if (v) hops_s = v; }
    else if (cli_opt(argc, argv, &i, "--samples", &v, &err)) { if (v) err = cli_int("--samples", v, 1, 1 << 20, &samples); }
    else if (cli_opt(argc, argv, &i, "--batch", &v, &err)) { if (v) err = cli_int("--batch", v, 1, 4096, &batch); }
    else if (cli_opt(argc, argv, &i, "--threads", &v, &err)) { if (v) err = cli_int("--threads", v, 0, 4096, &threads); }
    else if (cli_opt(argc, argv, &i, "--top-k", &v, &err)) { if (v) err = cli_int("--top-k", v, 0, 1 << 30, &top_k); }
    else if (cli_opt(argc, argv, &i, "--temperature", &v, &err)) { if (v) err = cli_double("--temperature", v, &temperature); }
    else if (cli_opt(argc, argv, &i, "--top-p", &v, &err)) { if (v) err = cli_double("--top-p", v, &top_p); }
    else if (cli_opt(argc, argv, &i, "--sample-seed", &v, &err)) { if (v) err = cli_u64("--sample-seed", v, &sseed); }
    else if (cli_opt(argc, argv, &i, "--seed", &v, &err)) { if (v) err = cli_u64("--seed", v, &seed); }
    else if (cli_opt(argc, argv, &i, "--model-seed", &v, &err)) { if (v) err = cli_u64("--model-seed", v, &mseed); }
    else if (cli_opt(argc, argv, &i, "--min-score", &v, &err)) { if (v) err = cli_double("--min-score", v, &min_score); }
    else if (cli_opt(argc, argv, &i, "--alpha", &v, &err)) { if (v) err = cli_double("--alpha", v, &alpha); }
    else if (cli_opt(argc, argv, &i, "--export-prompts", &v, &err)) { if (v) export_f = v; }
    else if (cli_opt(argc, argv, &i, "--path-lib", &v, &err)) { if (v) err = vpaths_load_lib(v); }
    else if (cli_opt(argc, argv, &i, "--json", &v, &err)) { if (v) json = v; }
    else err = VERR("unknown option '%s' (see vouch eval chain --help)", a);
    if (!err && (temperature < 0 || top_p <= 0 || top_p > 1)) err = VERR("--temperature must be >= 0 and --top-p in (0, 1]");
    if (err) { cli_print_error("eval chain"); return EXIT_USAGE; }
  }
  char *pbuf = NULL;
  const char **paths = NULL;
  int np = 0, nh = 0, rc = EXIT_OK;
  long *hops = NULL;
  if (split_names("--paths", paths_s, &pbuf, &paths, &np) || check_paths(paths, np) ||
      cli_size_list("--hops", hops_s, &hops, &nh)) {
    cli_print_error("eval chain");
    free(pbuf); free(paths); free(hops);
    return EXIT_USAGE;
  }
  ds_model m;
  construct_layout L;
  if (open_model(&m, model, mseed, 0, any_host(paths, np), &knobs, &L, true)) {
    cli_print_error("eval chain");
    free(pbuf); free(paths); free(hops);
    return EXIT_CHECK_FAILED;
  }
  chain_opts o = {.paths = paths, .n_paths = np, .hops = hops, .n_hops = nh, .samples = (int)samples, .batch = (int)batch,
                  .sampling = {.temperature = (float)temperature, .top_k = (int)top_k, .top_p = (float)top_p, .seed = sseed},
                  .seed = seed, .n_threads = (int)threads};
  if (export_f) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "kind", "chain");
    cJSON_AddStringToObject(root, "model", m.source);
    cJSON_AddItemToObject(root, "layout", layout_obj(&L));
    cJSON *hj = cJSON_AddArrayToObject(root, "hops");
    for (int i = 0; i < nh; i++) cJSON_AddItemToArray(hj, cJSON_CreateNumber((double)hops[i]));
    cJSON *cases = cJSON_AddArrayToObject(root, "cases");
    const int H = (int)hops[nh - 1], plen = L.o.n_keys + 2;
    int32_t *tok = malloc((size_t)plen * sizeof *tok), *truth = malloc((size_t)(H + 1) * sizeof *truth);
    vstatus s = tok && truth ? V_OK : VERR("out of memory");
    for (int sm = 0; sm < samples && !s; sm++) {
      s = chain_prompt(&L, sm, seed, H, tok, truth);
      if (s) break;
      cJSON *c = cJSON_CreateObject();
      cJSON_AddNumberToObject(c, "sample", sm);
      cJSON_AddItemToObject(c, "prompt", ints_json(tok, plen));
      cJSON *ans = cJSON_AddArrayToObject(c, "answers");
      for (int i = 0; i < nh; i++) cJSON_AddItemToArray(ans, cJSON_CreateNumber(truth[hops[i]]));
      cJSON_AddItemToArray(cases, c);
    }
    free(tok);
    free(truth);
    if (!s) s = write_json_file(export_f, root);
    cJSON_Delete(root);
    if (s) { cli_print_error("eval chain"); rc = EXIT_CHECK_FAILED; goto done; }
    printf("wrote %s: %ld chains, hops up to %ld (greedy answers)\n", export_f, samples, hops[nh - 1]);
    if (!paths_given) goto done;
  }
  chain_result r;
  chain_ctx cc = {.recs = &recs, .r = &r, .model = m.source, .hops = hops, .n_hops = nh, .samples = samples,
                  .temperature = temperature, .top_p = top_p, .top_k = top_k, .sample_seed = sseed, .seed = seed, .min_score = min_score, .alpha = alpha,
                  .ok = hop_ok = calloc((size_t)np * nh, 1)};
  o.path_done = chain_path_done;
  o.ctx = &cc;
  double t0 = vclock_now();
  if (!hop_ok) { VERR("eval chain: out of memory"); cli_print_error("eval chain"); rc = EXIT_CHECK_FAILED; goto done; }
  if (chain_run(&m, &L, &o, &r)) { cli_print_error("eval chain"); rc = EXIT_CHECK_FAILED; goto done; }
  printf("eval chain: model %s\n  difficulty: %d keys in families of %d at cosine %.3f, score gap %.2f nats, nominal "
         "answer logit %.1f; %s; %ld chains, seed %llu; wall %.1f s\n",
         m.source, L.o.n_keys, L.o.family, L.o.cos, L.o.gap, L.o.answer_logit,
         temperature > 0 ? "sampled" : "greedy", samples, (unsigned long long)seed, vclock_now() - t0);
  if (temperature > 0)
    printf("  sampling: temperature %.3g top-k %ld top-p %.3g sample-seed %llu\n", temperature, top_k, top_p,
           (unsigned long long)sseed);
  const int n = (int)samples * nh;
  unsigned char *mask = calloc((size_t)n, 1);
  for (int p = 0; p < np && mask; p++) {
    const eval_path_result *pr = &r.pr[p];
    if (!pr->supported) {
      printf("\npath %s: %s: %s\n", pr->path, pr->errored ? "error" : "not supported", pr->reason);
      if (pr->errored) rc = EXIT_CHECK_FAILED;
    } else {
      int left = 0, first = 0;
      for (int s = 0; s < samples; s++)
        if (r.first_wrong[p][s]) { left++; if (!first || r.first_wrong[p][s] < first) first = r.first_wrong[p][s]; }
      printf("\npath %s: %d of %ld chains left the true chain%s", pr->path, left, samples, left ? " (earliest at hop " : "");
      if (left) printf("%d)", first);
      printf(", forward time %.2f s\n  first hop off the chain per sample:", pr->wall_s);
      for (int s = 0; s < samples && s < 32; s++) printf(" %d", r.first_wrong[p][s]);
      printf("%s\n", samples > 32 ? " ..." : "");
    }
    for (int hi = 0; hi < nh; hi++) {
      for (int i = 0; i < n; i++) mask[i] = i % nh == hi;
      if (pr->supported) {
        double mn = INFINITY;
        for (int s = 0; s < samples; s++) if (pr->margin[(size_t)s * nh + hi] < mn) mn = pr->margin[(size_t)s * nh + hi];
        printf("  hops %-8ld pass@1 %.4f   smallest true-next margin while on chain %.2f\n", hops[hi],
               score_of(pr, mask, n, NULL), mn);
        if (p > 0) {
          char lab[48];
          snprintf(lab, sizeof lab, "hops %ld vs first", hops[hi]);
          print_pairwise(lab, &r.pr[0], pr, mask, n, alpha);
        }
      }
      if (!hop_ok[(size_t)p * nh + hi]) { /* the record was stored as the path finished (chain_path_done) */
        rc = EXIT_CHECK_FAILED;
        if (pr->supported) printf("  FAIL %s: hops %ld: pass@1 %.4f < %.2f or significantly worse than %s\n", pr->path,
                                  hops[hi], score_of(pr, mask, n, NULL), min_score, r.pr[0].path);
      }
    }
  }
  printf("\nverdict: %s\n", rc == EXIT_OK ? "pass" : "FAIL");
  if (emit_records(json, &recs)) { cli_print_error("eval chain"); rc = EXIT_CHECK_FAILED; }
  free(mask);
  chain_result_free(&r);
done:
  eng_free(&recs);
  free(hop_ok);
  ds_model_close(&m);
  free(pbuf); free(paths); free(hops);
  return rc;
}

int cmd_eval(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    fputs("usage: vouch eval mrcr|chain ...   (vouch eval mrcr --help)\n"
          "  Ground-truth evals on constructed checkpoints (vouch model synth --preset recall-mrcr|recall-chain).\n",
          argc < 2 ? stderr : stdout);
    return argc < 2 ? EXIT_USAGE : EXIT_OK;
  }
  if (!strcmp(argv[1], "mrcr")) return eval_mrcr(argc - 1, argv + 1);
  if (!strcmp(argv[1], "chain")) return eval_chain(argc - 1, argv + 1);
  VERR("unknown subcommand 'eval %s' (mrcr, chain)", argv[1]);
  cli_print_error(NULL);
  return EXIT_USAGE;
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
  if (check_paths(all, n_all)) { cli_print_error("features"); return EXIT_USAGE; }
  if (!(tol > 0) || !(eps >= 0)) {
    VERR("--kld-tol must be > 0 and --margin-eps >= 0");
    cli_print_error("features");
    return EXIT_USAGE;
  }
  ds_model m;
  if (open_model(&m, model, seed, (int)layers, any_host(all, n_all), NULL, NULL, false)) {
    cli_print_error("features");
    return EXIT_CHECK_FAILED;
  }
  feat_opts o = {.path = path, .ref = ref, .floor = floor_p, .full_ctx = (int)full, .kld_tol = tol, .margin_eps = eps,
                 .seed = seed, .n_threads = (int)threads};
  feat_check ch[FEAT_N_CHECKS];
  int rc = EXIT_OK;
  if (features_run(&m, &o, ch)) {
    cli_print_error("features");
    ds_model_close(&m);
    return EXIT_CHECK_FAILED;
  }
  printf("features: path %s vs %s on %s\n", path, ref, m.source);
  veng recs = {0};
  for (int i = 0; i < FEAT_N_CHECKS; i++) {
    printf("  %-13s %-13s %s\n", ch[i].name, feat_status_name(ch[i].status), ch[i].detail);
    if (ch[i].status == FEAT_FAIL) rc = EXIT_CHECK_FAILED;
    vrecord *rec = eng_new(&recs, "features", ch[i].name, path);
    if (!rec) continue;
    rec_param_str(rec, "model", m.source);
    rec_param_str(rec, "reference", ref);
    rec_param_str(rec, "detail", ch[i].detail);
    if (floor_p) rec_param_str(rec, "floor", floor_p);
    if (ch[i].bound_source[0]) rec_param_str(rec, "bound_source", ch[i].bound_source);
    if (isfinite(ch[i].bound)) rec_param_num(rec, "bound", ch[i].bound);
    rec_param_int(rec, "seed", (int64_t)seed);
    if (ch[i].status == FEAT_NOT_SUPPORTED) rec_set_status(rec, REC_NOT_SUPPORTED, ch[i].detail);
    else {
      if (isfinite(ch[i].value)) rec_metric_value(rec, "value", "", RB_NONE, ch[i].value);
      rec_check_add(rec, "feature_ok", ch[i].status == FEAT_PASS);
    }
    rec_finalize(rec);
  }
  if (emit_records(json, &recs)) { cli_print_error("features"); rc = EXIT_CHECK_FAILED; }
  eng_free(&recs);
  ds_model_close(&m);
  return rc;
}
