/* vouch sweep: runs suites/sweep over the grid, turns points into records (suite "sweep",
 * every raw step time kept), merges peer records (--peer, e.g. scripts/peers/hf_decode.py),
 * adds each path's speedup over the first path, prints a table per workload and writes the
 * records as JSON (--json). Records of the same grid point share case_id
 * "<workload>/tp<T>/b<B>/ctx<C>/spec<K>-<AL>/<routing>"; peers must use the same ids. */
#include "runner/cmd_sweep.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "model/model.h"
#include "runner/cli.h"
#include "runner/record.h"
#include "suites/paths.h"
#include "suites/sweep.h"

static const char USAGE[] =
    "usage: vouch sweep [--model DIR|synth:PRESET] [--paths A,B,..] [--batch 1,2,4] [--context 1k,8k]\n"
    "                   [--tp 1,8] [--spec K=7,AL=6] [--workload decode|prefill+decode]\n"
    "                   [--routing natural|uniform|zipf:S|trace:FILE] [--steps N] [--warmup N]\n"
    "                   [--json FILE] [--peer FILE].. [--seed S] [--layers N] [--threads N] [--device N]\n"
    "                   [--membw-bytes SIZE] [--path-lib FILE] [--no-progress]\n"
    "  Times decode steps of every path over the batch x context grid, the paths interleaved step\n"
    "  by step; the first path is the baseline of the speedup column. Pure decode fills the KV cache\n"
    "  synthetically; prefill+decode runs a real prefill (timed apart). --spec verifies K+1 tokens\n"
    "  per sequence per step and keeps AL (throughput counts kept tokens). Points that cannot run\n"
    "  (memory, TP > 1, unsupported) are listed as not run with the reason.\n"
    "  Routing trace format: see suites/sweep.h (JSON lines of per-MoE-layer expert id arrays).\n"
    "  --peer FILE merges records written by scripts/peers/hf_decode.py (same JSON format as --json).\n"
    "  defaults: --model synth:tiny --paths cpu-ref --batch 1 --context 1k --steps 20 --warmup 3\n";

static vstatus parse_spec(const char *s, int *k, int *al) {
  int kk = -1, aa = -1;
  char extra;
  if (sscanf(s, "K=%d,AL=%d%c", &kk, &aa, &extra) != 2 && sscanf(s, "k=%d,al=%d%c", &kk, &aa, &extra) != 2)
    return VERR("--spec '%s': expected K=<drafts>,AL=<kept> (e.g. K=7,AL=6)", s);
  if (kk < 0 || kk > 64 || aa < 1 || aa > kk + 1) return VERR("--spec '%s': need 0 <= K <= 64 and 1 <= AL <= K+1", s);
  *k = kk;
  *al = aa;
  return V_OK;
}

static vstatus int_list(const char *opt, const char *s, int **out, int *n) {
  long *v = NULL;
  VTRY(cli_size_list(opt, s, &v, n));
  *out = malloc((size_t)(*n > 0 ? *n : 1) * sizeof(int));
  if (!*out) {
    free(v);
    return VERR("%s: out of memory", opt);
  }
  for (int i = 0; i < *n; i++) {
    if (v[i] < 0 || v[i] > (1L << 30)) {
      free(v);
      return VERR("%s: value %ld out of range", opt, v[i]);
    }
    (*out)[i] = (int)v[i];
  }
  free(v);
  return V_OK;
}

static void case_id(char *buf, size_t n, const char *workload, int tp, int b, int ctx, int k, int al,
                    const char *routing) {
  snprintf(buf, n, "%.20s/tp%d/b%d/ctx%d/spec%d-%d/%.60s", workload, tp, b, ctx, k, al, routing);
}

static vrecord *point_record(const sweep_point *p, const sweep_opts *o, const char *model, vstatus *err) {
  char id[160];
  const char *wl = sweep_workload_name(o->workload);
  case_id(id, sizeof id, wl, p->tp, p->batch, p->ctx, o->spec_k, o->spec_al, o->routing->spec);
  vrecord *r = rec_new("sweep", id, p->path);
  if (!r) {
    *err = V_ERR;
    return NULL;
  }
  vstatus s = V_OK;
  s = s ? s : rec_param_str(r, "workload", wl);
  s = s ? s : rec_param_int(r, "tp", p->tp);
  s = s ? s : rec_param_int(r, "batch", p->batch);
  s = s ? s : rec_param_int(r, "context", p->ctx);
  s = s ? s : rec_param_int(r, "spec_k", o->spec_k);
  s = s ? s : rec_param_int(r, "spec_al", o->spec_al);
  s = s ? s : rec_param_str(r, "routing", o->routing->spec);
  s = s ? s : rec_param_str(r, "model", model);
  s = s ? s : rec_param_int(r, "seed", (int64_t)o->seed);
  if (!p->ran) {
    if (s == V_OK) rec_set_status(r, p->unsupported ? REC_NOT_SUPPORTED : REC_NOT_RUN, p->reason);
  } else {
    const int n = p->n_warmup + p->n_steps;
    const double *timed = p->ms + p->n_warmup;
    double *tps = malloc((size_t)p->n_steps * sizeof(double));
    if (!tps) s = VERR("sweep: out of memory");
    for (int i = 0; s == V_OK && i < p->n_steps; i++) tps[i] = p->tokens_kept / (timed[i] * 1e-3);
    s = s ? s : rec_param_int(r, "steps", p->n_steps);
    s = s ? s : rec_param_int(r, "warmup", p->n_warmup);
    s = s ? s : rec_param_int(r, "fill_len", p->fill_len);
    s = s ? s : rec_param_num(r, "mean_context", p->mean_ctx);
    s = s ? s : rec_param_int(r, "tokens_kept_per_step", p->tokens_kept);
    s = s ? s : rec_param_int(r, "tokens_verified_per_step", p->tokens_verified);
    s = s ? s : rec_param_str(r, "interleaved", o->n_paths == 1 ? "one path" : p->interleaved ? "true" : "false");
    s = s ? s : rec_param_str(r, "timer", p->device_timer ? "device events" : "wall clock");
    s = s ? s : rec_param_str(r, "kv_layout", p->latent_kv ? "latent" : "expanded");
    s = s ? s : rec_param_num(r, "experts_touched", p->experts_touched);
    s = s ? s : rec_param_str(r, "experts_touched_from",
                              p->experts_measured ? "forced expert ids of the timed steps"
                                                  : "expected under uniform choice (natural routing ids not visible)");
    s = s ? s : rec_param_str(r, "membw_method", p->membw_how);
    s = s ? s : rec_metric_samples(r, "step_ms", "ms", RD_MEDIAN, RB_LOWER, timed, p->n_steps, 0);
    s = s ? s : rec_metric_samples(r, "step_ms_p90", "ms", RD_P90, RB_LOWER, timed, p->n_steps, 0);
    s = s ? s : rec_metric_samples(r, "step_ms_p99", "ms", RD_P99, RB_LOWER, timed, p->n_steps, 0);
    s = s ? s : rec_metric_samples(r, "step_ms_stable", "ms", RD_STABLE_MEAN, RB_LOWER, p->ms, n, p->n_warmup);
    s = s ? s : rec_metric_samples(r, "tokens_per_s", "tok/s", RD_MEDIAN, RB_HIGHER, tps, p->n_steps, 0);
    s = s ? s : rec_metric_value(r, "step_ms_cv_pct", "%", RB_LOWER, p->st.cv_pct);
    s = s ? s : rec_metric_value(r, "bytes_per_step", "B", RB_NONE, p->bytes_per_step);
    s = s ? s : rec_metric_value(r, "membw_gbs", "GB/s", RB_NONE, p->membw_gbs);
    s = s ? s : rec_metric_value(r, "roofline_pct", "%", RB_HIGHER, p->roofline_pct);
    if (!isnan(p->prefill_ms)) {
      s = s ? s : rec_metric_value(r, "prefill_ms", "ms", RB_LOWER, p->prefill_ms);
      s = s ? s : rec_metric_value(r, "prefill_tokens_per_s", "tok/s", RB_HIGHER,
                                   (double)p->fill_len * p->batch / (p->prefill_ms * 1e-3));
    }
    free(tps);
  }
  if (s == V_OK) s = rec_finalize(r);
  if (s != V_OK) {
    rec_free(r);
    *err = s;
    return NULL;
  }
  return r;
}

static const char *param_str(const vrecord *r, const char *k, const char *dflt) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(r->params, k);
  return cJSON_IsString(j) ? j->valuestring : dflt;
}
static double param_num(const vrecord *r, const char *k) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(r->params, k);
  return cJSON_IsNumber(j) ? j->valuedouble : NAN;
}
static double metric(const vrecord *r, const char *name) {
  const rec_metric *m = rec_metric_find(r, name);
  return m ? m->value : NAN;
}

/* Speedup of every run record over the baseline path's record of the same case_id. */
static vstatus add_speedups(vrecord **recs, int n, const char *base) {
  for (int i = 0; i < n; i++) {
    vrecord *r = recs[i];
    const rec_metric *mc = rec_metric_find(r, "step_ms");
    if (!mc || mc->n_samples < 1 || rec_metric_find(r, "speedup")) continue;
    for (int j = 0; j < n; j++) {
      const vrecord *b = recs[j];
      if (strcmp(b->path, base) || strcmp(b->case_id, r->case_id)) continue;
      const rec_metric *mb = rec_metric_find(b, "step_ms");
      if (!mb || mb->n_samples < 1) break;
      double lo = NAN, hi = NAN;
      /* median(base) / median(cand), with a bootstrap CI (ratio of medians) */
      double sp = rec_bootstrap_ratio(mc->samples, mc->n_samples, mb->samples, mb->n_samples, 2000, 12345, &lo, &hi);
      VTRY(rec_metric_value(r, "speedup", "x", RB_HIGHER, sp));
      VTRY(rec_metric_value(r, "speedup_ci95_lo", "x", RB_HIGHER, lo));
      VTRY(rec_metric_value(r, "speedup_ci95_hi", "x", RB_HIGHER, hi));
      VTRY(rec_finalize(r));
      break;
    }
  }
  return V_OK;
}

static void fmt_ctx(char *b, size_t n, double c) {
  long v = (long)c;
  if (v >= 1024 && v % 1024 == 0) snprintf(b, n, "%ldk", v / 1024);
  else snprintf(b, n, "%ld", v);
}

static void print_row(FILE *f, const vrecord *r, bool prefill) {
  char cb[24];
  fmt_ctx(cb, sizeof cb, param_num(r, "context"));
  fprintf(f, "%-14s %3.0f %6.0f %7s ", r->path, param_num(r, "tp"), param_num(r, "batch"), cb);
  if (r->status != REC_PASS) {
    fprintf(f, " %s: %s\n", r->status == REC_NOT_SUPPORTED ? "not supported" : "not run", r->reason);
    return;
  }
  fprintf(f, "%11.1f %9.3f %9.3f %9.3f %9.3f %6.2f %7.1f", metric(r, "tokens_per_s"), metric(r, "step_ms"),
          metric(r, "step_ms_p90"), metric(r, "step_ms_p99"), metric(r, "step_ms_stable"), metric(r, "step_ms_cv_pct"),
          metric(r, "roofline_pct"));
  double sp = metric(r, "speedup");
  if (isnan(sp)) fprintf(f, " %8s", "-");
  else fprintf(f, " %7.3fx", sp);
  if (prefill) fprintf(f, " %11.1f", metric(r, "prefill_ms"));
  fprintf(f, "%s\n", strcmp(param_str(r, "interleaved", "true"), "false") ? "" : "  (not interleaved)");
}

static void print_tables(FILE *f, vrecord **recs, int n, const sweep_opts *o, const sweep_result *res) {
  const char *wls[] = {"decode", "prefill+decode"};
  for (int w = 0; w < 2; w++) {
    bool any = false;
    for (int i = 0; i < n; i++) any |= !strcmp(param_str(recs[i], "workload", ""), wls[w]);
    if (!any) continue;
    const bool pf = w == 1;
    fprintf(f, "\n%s: spec K=%d AL=%d, routing %s, %d timed steps after %d warm-up, first path = baseline\n", wls[w],
            o->spec_k, o->spec_al, o->routing->spec, o->steps, o->warmup);
    fprintf(f, "%-14s %3s %6s %7s %11s %9s %9s %9s %9s %6s %7s %8s%s\n", "path", "TP", "batch", "ctx", "tok/s",
            "p50 ms", "p90 ms", "p99 ms", "stable ms", "CV %", "% roof", "speedup", pf ? "  prefill ms" : "");
    /* rows grouped by case, in the order the cases first appear */
    bool *done = calloc((size_t)n, sizeof(bool));
    if (!done) return;
    for (int i = 0; i < n; i++) {
      if (done[i] || strcmp(param_str(recs[i], "workload", ""), wls[w])) continue;
      for (int j = i; j < n; j++)
        if (!done[j] && !strcmp(recs[j]->case_id, recs[i]->case_id)) {
          print_row(f, recs[j], pf);
          done[j] = true;
        }
    }
    free(done);
  }
  fprintf(f, "\nbandwidth (copy, read+write): ");
  if (!isnan(res->membw_gpu_gbs)) fprintf(f, "GPU %.1f GB/s ", res->membw_gpu_gbs);
  if (!isnan(res->membw_host_gbs)) fprintf(f, "host %.1f GB/s ", res->membw_host_gbs);
  fprintf(f, "\nsweep wall time %.1f s\n", res->wall_s);
}

static vstatus read_peer(const char *file, vrecord ***recs, int *n, int *cap) {
  FILE *f = fopen(file, "rb");
  if (!f) return VERR("%s: cannot open peer records", file);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *txt = len >= 0 ? malloc((size_t)len + 1) : NULL;
  if (!txt || fread(txt, 1, (size_t)len, f) != (size_t)len) {
    fclose(f);
    free(txt);
    return VERR("%s: cannot read peer records", file);
  }
  fclose(f);
  txt[len] = 0;
  cJSON *j = cJSON_Parse(txt);
  free(txt);
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "records");
  if (!cJSON_IsArray(arr)) {
    cJSON_Delete(j);
    return VERR("%s: field 'records': expected an array of sweep records", file);
  }
  vstatus s = V_OK;
  int i = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, arr) {
    char where[600];
    snprintf(where, sizeof where, "%s: records[%d]", file, i++);
    vrecord *r = NULL;
    if ((s = rec_from_json(it, where, &r)) != V_OK) break;
    if (*n == *cap) {
      *cap = *cap ? 2 * *cap : 64;
      vrecord **nr = realloc(*recs, (size_t)*cap * sizeof *nr);
      if (!nr) {
        rec_free(r);
        s = VERR("%s: out of memory", file);
        break;
      }
      *recs = nr;
    }
    (*recs)[(*n)++] = r;
  }
  cJSON_Delete(j);
  return s;
}

static vstatus write_json(const char *file, vrecord **recs, int n, const sweep_opts *o, const sweep_result *res,
                          const char *model) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "schema", "vouch-sweep/1");
  cJSON_AddStringToObject(root, "tool", "vouch " VOUCH_VERSION " " VOUCH_GIT_COMMIT);
  cJSON_AddStringToObject(root, "model", model);
  cJSON *op = cJSON_AddObjectToObject(root, "options");
  cJSON_AddStringToObject(op, "workload", sweep_workload_name(o->workload));
  cJSON_AddStringToObject(op, "routing", o->routing->spec);
  cJSON_AddNumberToObject(op, "spec_k", o->spec_k);
  cJSON_AddNumberToObject(op, "spec_al", o->spec_al);
  cJSON_AddNumberToObject(op, "steps", o->steps);
  cJSON_AddNumberToObject(op, "warmup", o->warmup);
  cJSON_AddNumberToObject(op, "seed", (double)o->seed);
  cJSON *ps = cJSON_AddArrayToObject(op, "paths");
  for (int i = 0; i < o->n_paths; i++) cJSON_AddItemToArray(ps, cJSON_CreateString(o->paths[i]));
  if (!isnan(res->membw_gpu_gbs)) cJSON_AddNumberToObject(root, "membw_gpu_gbs", res->membw_gpu_gbs);
  if (!isnan(res->membw_host_gbs)) cJSON_AddNumberToObject(root, "membw_host_gbs", res->membw_host_gbs);
  cJSON_AddNumberToObject(root, "wall_s", res->wall_s);
  cJSON *arr = cJSON_AddArrayToObject(root, "records");
  for (int i = 0; i < n; i++) cJSON_AddItemToArray(arr, rec_to_json(recs[i]));
  char *txt = cJSON_Print(root);
  cJSON_Delete(root);
  if (!txt) return VERR("%s: cannot serialize the records", file);
  FILE *f = fopen(file, "w");
  vstatus s = V_OK;
  if (!f || fputs(txt, f) < 0 || fputc('\n', f) < 0) s = VERR("%s: cannot write", file);
  if (f && fclose(f) != 0 && s == V_OK) s = VERR("%s: cannot write", file);
  free(txt);
  return s;
}

int cmd_sweep(int argc, char **argv) {
  const char *model_spec = "synth:tiny", *paths_s = "cpu-ref", *batch_s = "1", *ctx_s = "1k", *tp_s = "1";
  const char *routing_s = "natural", *json_file = NULL, *v;
  const char *peers[8];
  int n_peers = 0;
  long steps = 20, warmup = 3, layers = 0, threads = 0, device = 0, membw = 0;
  uint64_t seed = 0;
  int spec_k = 0, spec_al = 1;
  sweep_workload wl = SWEEP_DECODE;
  bool no_progress = false;
  vstatus err = V_OK;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(USAGE, stdout);
      return EXIT_OK;
    }
    if (!strcmp(a, "--no-progress")) no_progress = true;
    else if (cli_opt(argc, argv, &i, "--model", &v, &err)) { if (v) model_spec = v; }
    else if (cli_opt(argc, argv, &i, "--paths", &v, &err)) { if (v) paths_s = v; }
    else if (cli_opt(argc, argv, &i, "--batch", &v, &err)) { if (v) batch_s = v; }
    else if (cli_opt(argc, argv, &i, "--context", &v, &err)) { if (v) ctx_s = v; }
    else if (cli_opt(argc, argv, &i, "--tp", &v, &err)) { if (v) tp_s = v; }
    else if (cli_opt(argc, argv, &i, "--routing", &v, &err)) { if (v) routing_s = v; }
    else if (cli_opt(argc, argv, &i, "--json", &v, &err)) { if (v) json_file = v; }
    else if (cli_opt(argc, argv, &i, "--path-lib", &v, &err)) { if (v) err = vpaths_load_lib(v); }
    else if (cli_opt(argc, argv, &i, "--peer", &v, &err)) {
      if (v && n_peers == 8) err = VERR("--peer: at most 8 files");
      else if (v) peers[n_peers++] = v;
    }
    else if (cli_opt(argc, argv, &i, "--spec", &v, &err)) { if (v) err = parse_spec(v, &spec_k, &spec_al); }
    else if (cli_opt(argc, argv, &i, "--workload", &v, &err)) {
      if (v && !strcmp(v, "decode")) wl = SWEEP_DECODE;
      else if (v && !strcmp(v, "prefill+decode")) wl = SWEEP_PREFILL_DECODE;
      else if (v) err = VERR("--workload '%s': expected decode or prefill+decode", v);
    }
    else if (cli_opt(argc, argv, &i, "--steps", &v, &err)) { if (v) err = cli_int("--steps", v, 1, 1000000, &steps); }
    else if (cli_opt(argc, argv, &i, "--warmup", &v, &err)) { if (v) err = cli_int("--warmup", v, 0, 1000000, &warmup); }
    else if (cli_opt(argc, argv, &i, "--layers", &v, &err)) { if (v) err = cli_int("--layers", v, 1, 1000, &layers); }
    else if (cli_opt(argc, argv, &i, "--threads", &v, &err)) { if (v) err = cli_int("--threads", v, 0, 4096, &threads); }
    else if (cli_opt(argc, argv, &i, "--device", &v, &err)) { if (v) err = cli_int("--device", v, 0, 1024, &device); }
    else if (cli_opt(argc, argv, &i, "--membw-bytes", &v, &err)) { if (v) err = cli_size("--membw-bytes", v, &membw); }
    else if (cli_opt(argc, argv, &i, "--seed", &v, &err)) { if (v) err = cli_u64("--seed", v, &seed); }
    else err = VERR("unknown option '%s' (see vouch sweep --help)", a);
    if (err) {
      cli_print_error("sweep");
      return EXIT_USAGE;
    }
  }
  /* lists */
  int *batches = NULL, *ctxs = NULL, *tps = NULL, nb = 0, nc = 0, nt = 0;
  char *paths_buf = strdup(paths_s);
  const char *paths[64];
  int np = 0;
  sweep_routing routing;
  memset(&routing, 0, sizeof routing);
  int rc = EXIT_USAGE;
  vrecord **recs = NULL;
  int n_recs = 0, cap_recs = 0;
  sweep_result res;
  memset(&res, 0, sizeof res);
  ds_model m;
  bool model_open = false;
  if (!paths_buf) { VERR("out of memory"); goto usage; }
  for (char *save = NULL, *t = strtok_r(paths_buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (np == 64) { VERR("--paths: at most 64 paths"); goto usage; }
    paths[np++] = t;
  }
  if (np == 0) { VERR("--paths: give at least one path"); goto usage; }
  for (int i = 0; i < np; i++)
    if (!vpaths_find(paths[i])) { VERR("--paths: unknown path '%s' (known: %s)", paths[i], vpaths_names()); goto usage; }
  if (int_list("--batch", batch_s, &batches, &nb) || int_list("--context", ctx_s, &ctxs, &nc) ||
      int_list("--tp", tp_s, &tps, &nt))
    goto usage;
  for (int i = 0; i < nb; i++)
    if (batches[i] < 1 || batches[i] > 4096) { VERR("--batch: %d outside [1, 4096]", batches[i]); goto usage; }
  for (int i = 0; i < nt; i++)
    if (tps[i] < 1) { VERR("--tp: %d must be >= 1", tps[i]); goto usage; }
  if (sweep_routing_parse(routing_s, &routing)) goto usage;

  rc = EXIT_CHECK_FAILED;
  bool host = false;
  for (int i = 0; i < np; i++) host |= vpaths_find(paths[i])->last_step_ms == NULL;
  if (ds_model_open(&m, model_spec, seed, (int)layers, host)) { cli_print_error("sweep"); goto end; }
  model_open = true;
  sweep_opts o = {.paths = paths, .n_paths = np, .batches = batches, .n_batches = nb, .contexts = ctxs,
                  .n_contexts = nc, .tps = tps, .n_tps = nt, .spec_k = spec_k, .spec_al = spec_al, .workload = wl,
                  .routing = &routing, .steps = (int)steps, .warmup = (int)warmup, .seed = seed,
                  .device = (int)device, .n_threads = (int)threads, .membw_bytes = (size_t)membw,
                  .progress = !no_progress && cli_is_tty(2)};
  if (sweep_run(&o, &m, &res)) { cli_print_error("sweep"); goto end; }
  vstatus s = V_OK;
  cap_recs = res.n + 16;
  recs = calloc((size_t)cap_recs, sizeof *recs);
  if (!recs) s = VERR("out of memory");
  for (int i = 0; s == V_OK && i < res.n; i++) {
    vrecord *r = point_record(&res.p[i], &o, m.source, &s);
    if (r) recs[n_recs++] = r;
  }
  for (int i = 0; s == V_OK && i < n_peers; i++) s = read_peer(peers[i], &recs, &n_recs, &cap_recs);
  if (s == V_OK) s = add_speedups(recs, n_recs, paths[0]);
  if (s == V_OK) print_tables(stdout, recs, n_recs, &o, &res);
  if (s == V_OK && json_file) s = write_json(json_file, recs, n_recs, &o, &res, m.source);
  for (int i = 0; s == V_OK && rec_current() && i < n_recs; i++) s = rec_emit(recs[i], NULL); /* under vouch run */
  if (s != V_OK) { cli_print_error("sweep"); goto end; }
  rc = EXIT_OK;
  goto end;
usage:
  cli_print_error("sweep");
end:
  for (int i = 0; i < n_recs; i++) rec_free(recs[i]);
  free(recs);
  sweep_result_free(&res);
  sweep_routing_free(&routing);
  if (model_open) ds_model_close(&m);
  free(batches);
  free(ctxs);
  free(tps);
  free(paths_buf);
  return rc;
}
