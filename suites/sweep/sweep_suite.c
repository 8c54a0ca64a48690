/* vouch sweep in process (--server: cmd_sweep_server.c) as a suite on the driver (suites/engine/suite.h):
 * a case is one (context, TP) pair of one round, every path and batch of it, so the speedups over
 * the first path are complete when it is stored; the driver owns --model, --paths, --path-lib,
 * --seed (default 0), --threads, --layers and --json (the sweep's own format below). Runs
 * suites/sweep over the grid, turns points into records (suite "sweep", every raw step time kept),
 * merges peer records (--peer, e.g. scripts/peers/hf_decode.py), adds each path's speedup over the
 * first path, prints a table per workload and writes the records as JSON (--json). Records of the
 * same grid point share case_id "<workload>/tp<T>/b<B>/ctx<C>/spec<K>-<AL>/<routing>"; peers must
 * use the same ids.
 * --repeat N runs the whole grid N times (rounds, each interleaved as one sweep); the records of
 * round r then get case_id "<...>/r<r>" (bundles key records by case_id and path) and params
 * round/repeat, speedups compare paths within a round (peers, which have no round, with round 1),
 * and an agreement table compares the rounds' medians point by point (spread of the medians as %
 * of the lowest, worst within-round CV) against --agree-pct / --max-cv. */
#include "suites/sweep/sweep_suite.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/atomic_file.h"
#include "common/clock.h"
#include "model/model.h"
#include "common/read_file.h"
#include "suites/engine/cli.h"
#include "suites/engine/engine.h"
#include "suites/engine/estimate_cost.h"
#include "suites/engine/record.h"
#include "suites/engine/suite.h"
#include "suites/paths/paths.h"
#include "suites/sweep/sweep.h"
#include "vouch_git_commit.h" /* VOUCH_GIT_COMMIT (build dir, cmake/git_commit.cmake) */

static const char USAGE[] =
    "usage: vouch sweep [--model DIR|synth:PRESET] [--paths A,B,..] [--batch 1,2,4] [--context 1k,8k]\n"
    "                   [--tp 1,8] [--spec K=7,AL=6] [--workload decode|prefill+decode]\n"
    "                   [--routing natural|uniform[@fixed]|zipf:S[@fixed]|trace:FILE] [--steps N] [--warmup N]\n"
    "                   [--json FILE] [--peer FILE].. [--seed S] [--layers N] [--threads N] [--device N]\n"
    "                   [--membw-bytes SIZE] [--path-lib FILE] [--expect-fallback] [--no-progress]\n"
    "                   [--repeat N] [--agree-pct P] [--max-cv P] [--require-agreement] [--time-budget S]\n"
    "  Times decode steps of every path over the batch x context grid, the paths interleaved step\n"
    "  by step; the first path is the baseline of the speedup column. Pure decode fills the KV cache\n"
    "  synthetically; prefill+decode runs a real prefill (timed apart). --spec verifies K+1 tokens\n"
    "  per sequence per step and keeps AL (throughput counts kept tokens). Points that cannot run\n"
    "  (memory, TP larger than the GPUs or not dividing the model, unsupported) are listed as not run\n"
    "  with the reason. --tp N opens every path sharded over N ranks (a name's :tpN wins).\n"
    "  Routing trace format: see suites/sweep/sweep.h (JSON lines of per-MoE-layer expert id arrays).\n"
    "  @fixed: one routing draw per point, reused by every step (step times vary only by noise).\n"
    "  --peer FILE merges records written by scripts/peers/hf_decode.py (same JSON format as --json).\n"
    "  --repeat N runs the whole grid N times and prints, after the tables, how far apart the rounds'\n"
    "  medians are per point: PASS when every point's spread <= --agree-pct (default 2) % of the\n"
    "  lowest median and its worst CV <= --max-cv (default 1) %. The exit status is 1 on FAIL only\n"
    "  with --require-agreement (which needs --repeat >= 2).\n"
    "  % roof counts the experts each step selected (forced ids, or the path's own count under\n"
    "  natural routing); a '*' marks points where the path cannot tell and the expected number\n"
    "  under uniform choice is used.\n"
    "  --time-budget S: no grid point starts later than S seconds after the command started; the\n"
    "  points left are listed as not run (time budget spent), so a time limit keeps what finished.\n"
    VSUITE_EXPECT_FALLBACK_HELP
    "  defaults: --model synth:tiny --paths cpu-ref --batch 1 --context 1k --steps 20 --warmup 3\n"
    "  vouch sweep --server URL ... measures an OpenAI-compatible server instead (vouch sweep --server x --help);\n"
    "  with --ref-server URL two servers for speed, interleaved and gated as vouch ab (--server x --ref-server y --help).\n";

vstatus sweep_spec_parse(const char *s, int *k, int *al) {
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
      const vstatus e = VERR("%s: value %ld out of range", opt, v[i]); /* before v is freed */
      free(v);
      return e;
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

static const char *experts_from_text(sweep_experts_from f) {
  switch (f) {
    case EXPERTS_FORCED: return "forced expert ids of the timed steps";
    case EXPERTS_REPORTED: return "experts the path's router selected in the timed steps (last_experts)";
    default: return "expected under uniform choice (the path does not report the experts it selected)";
  }
}

/* In recs, the record of the point of path `path` at (tp, b, ctx) in round `round` of `repeat`
 * (case_id gets "/r<round>" when repeat > 1) with the parameters known before it runs; NULL on
 * out of memory (*err set). */
static vrecord *point_head(veng *recs, const char *path, int tp, int b, int ctx, const sweep_opts *o, const char *model,
                           int round, int repeat, vstatus *err) {
  char id[176];
  const char *wl = sweep_workload_name(o->workload);
  case_id(id, sizeof id, wl, tp, b, ctx, o->spec_k, o->spec_al, o->routing->spec);
  if (repeat > 1) snprintf(id + strlen(id), sizeof id - strlen(id), "/r%d", round);
  vrecord *r = eng_new(recs, "sweep", id, path);
  vstatus s = r ? V_OK : V_ERR;
  s = s ? s : rec_param_str(r, "workload", wl);
  s = s ? s : rec_param_int(r, "tp", tp);
  s = s ? s : rec_param_int(r, "batch", b);
  s = s ? s : rec_param_int(r, "context", ctx);
  s = s ? s : rec_param_int(r, "spec_k", o->spec_k);
  s = s ? s : rec_param_int(r, "spec_al", o->spec_al);
  s = s ? s : rec_param_str(r, "routing", o->routing->spec);
  s = s ? s : rec_param_str(r, "model", model);
  s = s ? s : rec_param_int(r, "seed", (int64_t)o->seed);
  s = s ? s : rec_param_int(r, "round", round);
  s = s ? s : rec_param_int(r, "repeat", repeat);
  *err = s;
  return s ? NULL : r;
}

/* The record of point p in round `round` of `repeat`, in recs (point_head, then its figures). */
static vstatus point_record(veng *recs, const sweep_point *p, const sweep_opts *o, const char *model, int round,
                            int repeat) {
  vstatus s;
  vrecord *r = point_head(recs, p->path, p->tp, p->batch, p->ctx, o, model, round, repeat, &s);
  if (!r) return s;
  if (!p->ran) {
    if (s == V_OK) rec_set_status(r, p->unsupported ? REC_NOT_SUPPORTED : REC_NOT_RUN, p->reason);
  } else {
    const int n = p->n_warmup + p->n_steps;
    const double *timed = p->ms + p->n_warmup;
    double *tps = malloc((size_t)p->n_steps * sizeof(double));
    if (!tps) s = VERR("sweep: out of memory");
    for (int i = 0; s == V_OK && i < p->n_steps; i++) tps[i] = p->tokens_kept / (timed[i] * 1e-3);
    s = s ? s : rec_ran(r, p->path, &p->what_ran);
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
    s = s ? s : rec_param_str(r, "experts_touched_from", experts_from_text(p->experts_from));
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
  return s ? s : rec_finalize(r);
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

/* Round of a record: its "round" param; 1 for peers (no round), and for a value no round can have
 * (a --peer file is untrusted: (int) of a double outside int's range is undefined). */
static int rec_round(const vrecord *r) {
  double v = param_num(r, "round");
  return v >= 1 && v <= 1e6 ? (int)v : 1;
}
/* The grid point of a record without its round: case_id less the "/r<round>" that --repeat adds. */
static void base_case(const vrecord *r, char *buf, size_t n) {
  snprintf(buf, n, "%s", r->case_id);
  const double rep = param_num(r, "repeat");
  if (isnan(rep) || rep <= 1) return;
  char suf[24];
  snprintf(suf, sizeof suf, "/r%d", rec_round(r));
  size_t lb = strlen(buf), ls = strlen(suf);
  if (lb > ls && !strcmp(buf + lb - ls, suf)) buf[lb - ls] = 0;
}
static bool same_point(const vrecord *a, const vrecord *b) {
  char x[256], y[256];
  base_case(a, x, sizeof x);
  base_case(b, y, sizeof y);
  return !strcmp(x, y);
}
/* The same point but for the TP degree (the "/tpN/" segment of the case id): a path that fixes
 * its degree (cpu-ref:tp2) against a baseline run at another one. */
static void drop_tp(char *s) {
  char *p = strstr(s, "/tp");
  if (!p) return;
  char *e = strchr(p + 1, '/');
  if (e) memmove(p, e, strlen(e) + 1);
}
static bool same_point_any_tp(const vrecord *a, const vrecord *b) {
  char x[256], y[256];
  base_case(a, x, sizeof x);
  base_case(b, y, sizeof y);
  drop_tp(x);
  drop_tp(y);
  return !strcmp(x, y);
}

/* The baseline path's record of r's grid point and round: the same point, else the same
 * point at another TP degree. */
static const vrecord *base_record(vrecord **recs, int n, const char *base, const vrecord *r) {
  for (int pass = 0; pass < 2; pass++)
    for (int j = 0; j < n; j++) {
      const vrecord *b = recs[j];
      if (strcmp(b->path, base) || rec_round(b) != rec_round(r)) continue;
      if (pass == 0 ? same_point(b, r) : same_point_any_tp(b, r)) return b;
    }
  return NULL;
}

/* Speedup of every run record over the baseline path's record of the same grid point and round. */
static vstatus add_speedups(vrecord **recs, int n, const char *base) {
  for (int i = 0; i < n; i++) {
    vrecord *r = recs[i];
    const rec_metric *mc = rec_metric_find(r, "step_ms");
    if (!mc || mc->n_samples < 1 || rec_metric_find(r, "speedup")) continue;
    const vrecord *b = base_record(recs, n, base, r);
    const rec_metric *mb = b ? rec_metric_find(b, "step_ms") : NULL;
    if (!mb || mb->n_samples < 1) continue;
    double lo = NAN, hi = NAN;
    /* median(base) / median(cand), with a bootstrap CI (ratio of medians) */
    double sp = rec_bootstrap_ratio(mc->samples, mc->n_samples, mb->samples, mb->n_samples, 2000, 12345, &lo, &hi);
    VTRY(rec_metric_value(r, "speedup", "x", RB_HIGHER, sp));
    VTRY(rec_metric_value(r, "speedup_ci95_lo", "x", RB_HIGHER, lo));
    VTRY(rec_metric_value(r, "speedup_ci95_hi", "x", RB_HIGHER, hi));
    VTRY(rec_finalize(r));
  }
  return V_OK;
}

static void fmt_ctx(char *b, size_t n, double c) {
  /* a peer record may lack params.context (NaN) or hold any number: no cast out of range */
  if (!(c >= 0 && c <= 1e15)) { snprintf(b, n, "-"); return; }
  long v = (long)c;
  if (v >= 1024 && v % 1024 == 0) snprintf(b, n, "%ldk", v / 1024);
  else snprintf(b, n, "%ld", v);
}

/* True when the record's roofline uses the expected (not the selected) number of experts. */
static bool roof_expected(const vrecord *r) {
  return !strncmp(param_str(r, "experts_touched_from", ""), "expected", 8);
}

static void print_row(FILE *f, const vrecord *r, bool prefill) {
  char cb[24];
  fmt_ctx(cb, sizeof cb, param_num(r, "context"));
  fprintf(f, "%-14s %3.0f %6.0f %7s ", r->path, param_num(r, "tp"), param_num(r, "batch"), cb);
  if (r->status != REC_PASS) {
    fprintf(f, " %s: %s\n", r->status == REC_NOT_SUPPORTED ? "not supported" : "not run", r->reason);
    return;
  }
  fprintf(f, "%11.1f %9.3f %9.3f %9.3f %9.3f %6.2f", metric(r, "tokens_per_s"), metric(r, "step_ms"),
          metric(r, "step_ms_p90"), metric(r, "step_ms_p99"), metric(r, "step_ms_stable"), metric(r, "step_ms_cv_pct"));
  const double roof = metric(r, "roofline_pct");
  if (isnan(roof)) fprintf(f, " %6s ", "-"); /* peers: no byte count */
  else fprintf(f, " %6.1f%c", roof, roof_expected(r) ? '*' : ' ');
  double sp = metric(r, "speedup");
  if (isnan(sp)) fprintf(f, " %8s", "-");
  else fprintf(f, " %7.3fx", sp);
  if (prefill) fprintf(f, " %11.1f", metric(r, "prefill_ms"));
  fprintf(f, "%s\n", strcmp(param_str(r, "interleaved", "true"), "false") ? "" : "  (not interleaved)");
}

static void print_tables(FILE *f, vrecord **recs, int n, const sweep_opts *o, const sweep_result *res, int repeat) {
  const char *wls[] = {"decode", "prefill+decode"};
  bool starred = false;
  for (int round = 1; round <= repeat; round++)
    for (int w = 0; w < 2; w++) {
      bool any = false;
      for (int i = 0; i < n; i++) any |= !strcmp(param_str(recs[i], "workload", ""), wls[w]) && rec_round(recs[i]) == round;
      if (!any) continue;
      const bool pf = w == 1;
      char rs[40] = "";
      if (repeat > 1) snprintf(rs, sizeof rs, "round %d of %d, ", round, repeat);
      fprintf(f, "\n%s: %sspec K=%d AL=%d, routing %s, %d timed steps after %d warm-up, first path = baseline\n", wls[w],
              rs, o->spec_k, o->spec_al, o->routing->spec, o->steps, o->warmup);
      fprintf(f, "%-14s %3s %6s %7s %11s %9s %9s %9s %9s %6s %7s %8s%s\n", "path", "TP", "batch", "ctx", "tok/s",
              "p50 ms", "p90 ms", "p99 ms", "stable ms", "CV %", "% roof", "speedup", pf ? "  prefill ms" : "");
      /* rows grouped by case, in the order the cases first appear */
      bool *done = calloc((size_t)n, sizeof(bool));
      if (!done) return;
      for (int i = 0; i < n; i++) {
        if (done[i] || strcmp(param_str(recs[i], "workload", ""), wls[w]) || rec_round(recs[i]) != round) continue;
        for (int j = i; j < n; j++)
          if (!done[j] && rec_round(recs[j]) == round && !strcmp(param_str(recs[j], "workload", ""), wls[w]) &&
              same_point(recs[j], recs[i])) {
            print_row(f, recs[j], pf);
            starred |= recs[j]->status == REC_PASS && roof_expected(recs[j]);
            done[j] = true;
          }
      }
      free(done);
    }
  if (starred)
    fprintf(f, "* %% roof from the expected number of distinct experts under uniform choice: the path does not\n"
               "  report the experts its router selected (other rows count the experts selected in each step)\n");
  fprintf(f, "\nbandwidth (copy, read+write):");
  for (int round = 0; round < repeat; round++) {
    if (repeat > 1) fprintf(f, "%s round %d:", round ? ";" : "", round + 1);
    if (!isnan(res[round].membw_gpu_gbs)) fprintf(f, " GPU %.1f GB/s", res[round].membw_gpu_gbs);
    if (!isnan(res[round].membw_host_gbs)) fprintf(f, " host %.1f GB/s", res[round].membw_host_gbs);
  }
  fprintf(f, "\n");
}

/* ---- repeat-run agreement ---- */

typedef struct {
  int first;          /* index of the point's round-1 (or first) record */
  double *median;     /* [repeat] p50 step time of each round (NaN: not run in that round) */
  double spread_pct;  /* 100 * (max - min) / min over the rounds' medians */
  double worst_cv;    /* largest within-round CV % */
  int verdict;        /* 0 pass, 1 fail, -1 not run in any round (not judged) */
  char why[80];       /* what failed */
} agree_point;

typedef struct {
  agree_point *pt;    /* [n] one per (grid point, path) of the rounds */
  int n;
  int judged, failed, unrun;
  double agree_pct, max_cv;
  int worst_spread, worst_cv_at; /* indices into pt (-1: none) */
} agreement;

static void agreement_free(agreement *ag) {
  for (int i = 0; i < ag->n; i++) free(ag->pt[i].median);
  free(ag->pt);
  memset(ag, 0, sizeof *ag);
}

/* Groups the records that have rounds (not peers) by (grid point, path) and judges each group. */
static vstatus agreement_compute(vrecord **recs, int n, int repeat, double agree_pct, double max_cv, agreement *ag) {
  memset(ag, 0, sizeof *ag);
  ag->agree_pct = agree_pct;
  ag->max_cv = max_cv;
  ag->worst_spread = ag->worst_cv_at = -1;
  ag->pt = calloc((size_t)(n > 0 ? n : 1), sizeof *ag->pt);
  bool *used = calloc((size_t)(n > 0 ? n : 1), sizeof(bool));
  if (!ag->pt || !used) {
    free(used);
    return VERR("sweep: out of memory for the agreement table");
  }
  for (int i = 0; i < n; i++) {
    if (used[i] || isnan(param_num(recs[i], "round"))) continue;
    agree_point *a = &ag->pt[ag->n++];
    a->first = i;
    a->median = malloc((size_t)repeat * sizeof(double));
    if (!a->median) {
      free(used);
      return VERR("sweep: out of memory for the agreement table");
    }
    for (int k = 0; k < repeat; k++) a->median[k] = NAN;
    a->worst_cv = NAN;
    a->spread_pct = NAN;
    bool cv_nan = false; /* a round without a CV (one step): the point cannot pass the CV goal */
    int ran = 0;
    for (int j = i; j < n; j++) {
      if (used[j] || isnan(param_num(recs[j], "round")) || strcmp(recs[j]->path, recs[i]->path) ||
          !same_point(recs[j], recs[i]))
        continue;
      used[j] = true;
      const int k = rec_round(recs[j]) - 1;
      if (k < 0 || k >= repeat || recs[j]->status != REC_PASS) continue;
      a->median[k] = metric(recs[j], "step_ms");
      const double cv = metric(recs[j], "step_ms_cv_pct");
      if (isnan(cv)) cv_nan = true;
      else if (isnan(a->worst_cv) || cv > a->worst_cv) a->worst_cv = cv;
      ran++;
    }
    if (ran == 0) {
      a->verdict = -1;
      ag->unrun++;
      continue;
    }
    ag->judged++;
    if (ran < repeat) {
      a->verdict = 1;
      snprintf(a->why, sizeof a->why, "ran in %d of %d rounds", ran, repeat);
      ag->failed++;
      continue;
    }
    double lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < repeat; k++) lo = fmin(lo, a->median[k]), hi = fmax(hi, a->median[k]);
    a->spread_pct = lo > 0 ? 100.0 * (hi - lo) / lo : NAN;
    const bool bad_spread = !(a->spread_pct <= agree_pct), bad_cv = cv_nan || !(a->worst_cv <= max_cv);
    a->verdict = bad_spread || bad_cv;
    if (a->verdict) {
      ag->failed++;
      snprintf(a->why, sizeof a->why, "%s%s%s", bad_spread ? "spread" : "", bad_spread && bad_cv ? ", " : "",
               bad_cv ? "CV" : "");
    }
    const int ai = (int)(a - ag->pt);
    if (!isnan(a->spread_pct) && (ag->worst_spread < 0 || a->spread_pct > ag->pt[ag->worst_spread].spread_pct))
      ag->worst_spread = ai;
    if (!isnan(a->worst_cv) && (ag->worst_cv_at < 0 || a->worst_cv > ag->pt[ag->worst_cv_at].worst_cv))
      ag->worst_cv_at = ai;
  }
  free(used);
  return V_OK;
}

static void point_name(const vrecord *r, char *buf, size_t n) {
  char cb[24];
  fmt_ctx(cb, sizeof cb, param_num(r, "context"));
  snprintf(buf, n, "%s tp%.0f b%.0f ctx %s", r->path, param_num(r, "tp"), param_num(r, "batch"), cb);
}

static void print_agreement(FILE *f, vrecord **recs, const agreement *ag, int repeat) {
  fprintf(f, "\nrepeat-run agreement over %d rounds (pass: medians within %g %% of the lowest, every round's CV <= %g %%)\n",
          repeat, ag->agree_pct, ag->max_cv);
  fprintf(f, "%-14s %3s %6s %7s %-9s", "path", "TP", "batch", "ctx", "workload");
  for (int k = 0; k < repeat; k++) {
    char h[24];
    snprintf(h, sizeof h, "r%d p50 ms", k + 1 < 1000 ? k + 1 : 999);
    fprintf(f, " %10s", h);
  }
  fprintf(f, " %9s %10s  verdict\n", "spread %", "worst CV%");
  for (int i = 0; i < ag->n; i++) {
    const agree_point *a = &ag->pt[i];
    const vrecord *r = recs[a->first];
    char cb[24];
    fmt_ctx(cb, sizeof cb, param_num(r, "context"));
    fprintf(f, "%-14s %3.0f %6.0f %7s %-9.9s", r->path, param_num(r, "tp"), param_num(r, "batch"), cb,
            param_str(r, "workload", "?"));
    for (int k = 0; k < repeat; k++) {
      if (isnan(a->median[k])) fprintf(f, " %10s", "-");
      else fprintf(f, " %10.3f", a->median[k]);
    }
    if (a->verdict < 0) {
      fprintf(f, " %9s %10s  not run\n", "-", "-");
      continue;
    }
    if (isnan(a->spread_pct)) fprintf(f, " %9s", "-");
    else fprintf(f, " %9.2f", a->spread_pct);
    fprintf(f, " %10.2f  %s%s%s%s\n", a->worst_cv, a->verdict ? "FAIL" : "pass", a->verdict ? " (" : "", a->why,
            a->verdict ? ")" : "");
  }
  char ws[240] = "-", wc[240] = "-";
  if (ag->worst_spread >= 0) {
    char nm[200];
    point_name(recs[ag->pt[ag->worst_spread].first], nm, sizeof nm);
    snprintf(ws, sizeof ws, "%.2f %% (%s)", ag->pt[ag->worst_spread].spread_pct, nm);
  }
  if (ag->worst_cv_at >= 0) {
    char nm[200];
    point_name(recs[ag->pt[ag->worst_cv_at].first], nm, sizeof nm);
    snprintf(wc, sizeof wc, "%.2f %% (%s)", ag->pt[ag->worst_cv_at].worst_cv, nm);
  }
  fprintf(f, "agreement: %s: %d of %d points fail (spread > %g %% or CV > %g %%); worst spread %s, worst CV %s",
          ag->failed || ag->judged == 0 ? "FAIL" : "PASS", ag->failed, ag->judged, ag->agree_pct, ag->max_cv, ws, wc);
  if (ag->unrun) fprintf(f, "; %d points not run in any round (not judged)", ag->unrun);
  fprintf(f, "\n");
}

static cJSON *agreement_json(vrecord **recs, const agreement *ag, int repeat) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "rounds", repeat);
  cJSON_AddNumberToObject(o, "agree_pct", ag->agree_pct);
  cJSON_AddNumberToObject(o, "max_cv_pct", ag->max_cv);
  cJSON_AddStringToObject(o, "verdict", ag->failed || ag->judged == 0 ? "fail" : "pass");
  cJSON_AddNumberToObject(o, "judged", ag->judged);
  cJSON_AddNumberToObject(o, "failed", ag->failed);
  cJSON_AddNumberToObject(o, "not_run", ag->unrun);
  cJSON *arr = cJSON_AddArrayToObject(o, "points");
  for (int i = 0; i < ag->n; i++) {
    const agree_point *a = &ag->pt[i];
    cJSON *p = cJSON_CreateObject();
    char bc[256];
    base_case(recs[a->first], bc, sizeof bc);
    cJSON_AddStringToObject(p, "case_id", bc);
    cJSON_AddStringToObject(p, "path", recs[a->first]->path);
    cJSON *md = cJSON_AddArrayToObject(p, "median_ms");
    for (int k = 0; k < repeat; k++)
      cJSON_AddItemToArray(md, isnan(a->median[k]) ? cJSON_CreateNull() : cJSON_CreateNumber(a->median[k]));
    if (a->verdict >= 0 && !isnan(a->spread_pct)) cJSON_AddNumberToObject(p, "spread_pct", a->spread_pct);
    if (a->verdict >= 0 && !isnan(a->worst_cv)) cJSON_AddNumberToObject(p, "worst_cv_pct", a->worst_cv);
    cJSON_AddStringToObject(p, "verdict", a->verdict < 0 ? "not_run" : a->verdict ? "fail" : "pass");
    if (a->why[0]) cJSON_AddStringToObject(p, "why", a->why);
    cJSON_AddItemToArray(arr, p);
  }
  return o;
}

vstatus sweep_read_peer(const char *file, vrecord ***recs, int *n, int *cap) {
  char *txt;
  if (vfile_read(file, &txt, NULL)) {
    verr_prefix("peer records");
    return V_ERR;
  }
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

/* A percentage threshold option: a number in [0, 1000]. */
static vstatus pct_opt(const char *opt, const char *s, double *out) {
  char *end = NULL;
  double d = strtod(s, &end);
  if (end == s || *end || !(d >= 0 && d <= 1000)) return VERR("%s '%s': expected a percentage in [0, 1000]", opt, s);
  *out = d;
  return V_OK;
}

static vstatus write_json(const char *file, vrecord **recs, int n, const sweep_opts *o, const sweep_result *res,
                          int repeat, const agreement *ag, double open_s, double wall_s, const char *model) {
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
  cJSON_AddNumberToObject(op, "repeat", repeat);
  cJSON *ps = cJSON_AddArrayToObject(op, "paths");
  for (int i = 0; i < o->n_paths; i++) cJSON_AddItemToArray(ps, cJSON_CreateString(o->paths[i].name));
  if (!isnan(res[0].membw_gpu_gbs)) cJSON_AddNumberToObject(root, "membw_gpu_gbs", res[0].membw_gpu_gbs);
  if (!isnan(res[0].membw_host_gbs)) cJSON_AddNumberToObject(root, "membw_host_gbs", res[0].membw_host_gbs);
  cJSON_AddNumberToObject(root, "wall_s", wall_s);
  cJSON_AddNumberToObject(root, "model_open_s", open_s);
  cJSON *rounds = cJSON_AddArrayToObject(root, "rounds");
  for (int k = 0; k < repeat; k++) {
    cJSON *rd = cJSON_CreateObject();
    cJSON_AddNumberToObject(rd, "round", k + 1);
    cJSON_AddNumberToObject(rd, "wall_s", res[k].wall_s);
    if (!isnan(res[k].membw_gpu_gbs)) cJSON_AddNumberToObject(rd, "membw_gpu_gbs", res[k].membw_gpu_gbs);
    if (!isnan(res[k].membw_host_gbs)) cJSON_AddNumberToObject(rd, "membw_host_gbs", res[k].membw_host_gbs);
    cJSON_AddItemToArray(rounds, rd);
  }
  if (ag) cJSON_AddItemToObject(root, "agreement", agreement_json(recs, ag, repeat));
  cJSON *arr = cJSON_AddArrayToObject(root, "records");
  for (int i = 0; i < n; i++) cJSON_AddItemToArray(arr, rec_to_json(recs[i]));
  vstatus s = vfile_write_json(file, root, true);
  cJSON_Delete(root);
  return s;
}

/* The suite's state: its options, the rounds' results and the agreement. */
typedef struct {
  const char *batch_s, *ctx_s, *tp_s; /* --batch, --context, --tp as given */
  const char *routing_s;     /* --routing as given */
  const char *peers[8];      /* [n_peers] --peer files */
  int n_peers;
  long steps, warmup, device, membw, repeat; /* --steps, --warmup, --device, --membw-bytes, --repeat */
  double agree_pct, max_cv;  /* --agree-pct, --max-cv: the bounds of the rounds' agreement */
  double budget;             /* --time-budget seconds (0: none) */
  int spec_k, spec_al;       /* --spec */
  sweep_workload wl;         /* --workload */
  bool no_progress, require_agreement; /* --no-progress, --require-agreement */
  double t_cmd;              /* when the command started (init): --time-budget counts from it */
  int *batches, *ctxs, *tps; /* [nb], [nc], [nt] the lists (options_done) */
  int nb, nc, nt;
  int *bs, n_bs;             /* [n_bs] the batches ascending and distinct: a pair's points (check) */
  vrouting routing;     /* --routing parsed (options_done) */
  sweep_opts o;              /* the sweep (check) */
  sweep_result *res;         /* [repeat] each round's points (prepare) */
  sweep_round *w;            /* the round in flight (NULL: none) */
  int first;                 /* the pair just run: its points are res[round].p[first ..] */
  double wall_s;             /* the rounds' wall time, summed */
  agreement ag;              /* the rounds' agreement (repeat > 1; finish) */
} sweep_state;

static void sweep_init(void *st) {
  sweep_state *s = st;
  s->batch_s = "1";
  s->ctx_s = "1k";
  s->tp_s = "1";
  s->routing_s = "natural";
  s->steps = 20;
  s->warmup = 3;
  s->repeat = 1;
  s->agree_pct = 2.0;
  s->max_cv = 1.0;
  s->spec_al = 1;
  s->wl = SWEEP_DECODE;
  s->t_cmd = vclock_now();
}

static bool sweep_option(void *st, int argc, char **argv, int *i, vstatus *err) {
  sweep_state *s = st;
  const char *a = argv[*i], *v;
  if (!strcmp(a, "--no-progress")) s->no_progress = true;
  else if (!strcmp(a, "--require-agreement")) s->require_agreement = true;
  else if (cli_opt(argc, argv, i, "--batch", &v, err)) { if (v) s->batch_s = v; }
  else if (cli_opt(argc, argv, i, "--context", &v, err)) { if (v) s->ctx_s = v; }
  else if (cli_opt(argc, argv, i, "--tp", &v, err)) { if (v) s->tp_s = v; }
  else if (cli_opt(argc, argv, i, "--routing", &v, err)) { if (v) s->routing_s = v; }
  else if (cli_opt(argc, argv, i, "--peer", &v, err)) {
    if (v && s->n_peers == 8) *err = VERR("--peer: at most 8 files");
    else if (v) s->peers[s->n_peers++] = v;
  }
  else if (cli_opt(argc, argv, i, "--spec", &v, err)) { if (v) *err = sweep_spec_parse(v, &s->spec_k, &s->spec_al); }
  else if (cli_opt(argc, argv, i, "--workload", &v, err)) {
    if (v && !strcmp(v, "decode")) s->wl = SWEEP_DECODE;
    else if (v && !strcmp(v, "prefill+decode")) s->wl = SWEEP_PREFILL_DECODE;
    else if (v) *err = VERR("--workload '%s': expected decode or prefill+decode", v);
  }
  else if (cli_opt(argc, argv, i, "--steps", &v, err)) { if (v) *err = cli_int("--steps", v, 1, 1000000, &s->steps); }
  else if (cli_opt(argc, argv, i, "--warmup", &v, err)) { if (v) *err = cli_int("--warmup", v, 0, 1000000, &s->warmup); }
  else if (cli_opt(argc, argv, i, "--device", &v, err)) { if (v) *err = cli_int("--device", v, 0, 1024, &s->device); }
  else if (cli_opt(argc, argv, i, "--membw-bytes", &v, err)) { if (v) *err = cli_size("--membw-bytes", v, &s->membw); }
  else if (cli_opt(argc, argv, i, "--repeat", &v, err)) { if (v) *err = cli_int("--repeat", v, 1, 100, &s->repeat); }
  else if (cli_opt(argc, argv, i, "--agree-pct", &v, err)) { if (v) *err = pct_opt("--agree-pct", v, &s->agree_pct); }
  else if (cli_opt(argc, argv, i, "--max-cv", &v, err)) { if (v) *err = pct_opt("--max-cv", v, &s->max_cv); }
  else if (cli_opt(argc, argv, i, "--time-budget", &v, err)) {
    char *end = NULL;
    if (v) s->budget = strtod(v, &end);
    if (v && (end == v || *end || !(s->budget > 0 && s->budget <= 1e7)))
      *err = VERR("--time-budget '%s': expected seconds > 0", v);
  }
  else return false;
  return true;
}

/* --require-agreement's --repeat, the lists, --routing. */
static vstatus sweep_options_done(void *st) {
  sweep_state *s = st;
  if (s->require_agreement && s->repeat < 2)
    return VERR("--require-agreement needs --repeat N with N >= 2 (agreement compares rounds)");
  VTRY(int_list("--batch", s->batch_s, &s->batches, &s->nb));
  VTRY(int_list("--context", s->ctx_s, &s->ctxs, &s->nc));
  VTRY(int_list("--tp", s->tp_s, &s->tps, &s->nt));
  for (int i = 0; i < s->nb; i++)
    if (s->batches[i] < 1 || s->batches[i] > 4096) return VERR("--batch: %d outside [1, 4096]", s->batches[i]);
  for (int i = 0; i < s->nt; i++)
    if (s->tps[i] < 1) return VERR("--tp: %d must be >= 1", s->tps[i]);
  return vrouting_parse(s->routing_s, &s->routing);
}

/* At most 64 paths; a path that fixes its TP degree only with one --tp value. */
static vstatus sweep_paths_done(void *st, const vpath_spec *paths, int n) {
  const sweep_state *s = st;
  if (n > 64) return VERR("--paths: at most 64 paths");
  for (int i = 0; i < n && s->nt > 1; i++)
    if (paths[i].tp)
      return VERR("--paths: '%s' fixes its TP degree, so it would run once per --tp value: give one --tp value or "
                  "drop :tpN", paths[i].name);
  /* sweep_begin's own rules (paths listed twice, --spec bounds), here so that they hold before any
   * model opens (vsuite_check_args) */
  const sweep_opts o = {.paths = paths, .n_paths = n, .batches = s->batches, .n_batches = s->nb, .contexts = s->ctxs,
                        .n_contexts = s->nc, .spec_k = s->spec_k, .spec_al = s->spec_al, .steps = (int)s->steps,
                        .warmup = (int)s->warmup};
  return sweep_check(&o);
}

/* The largest forward of a sweep point at batch b and context ctx (sweep.c), into X->rows and
 * X->logit_rows: a prefill chunk of b x min(ctx, 8192 / b) rows (at least b) with one logit row
 * each, and a decode step of b x (K+1) rows, every position's logits under --spec. */
static void sweep_rows(vest *X, bool prefill, int spec_k, long b, long ctx) {
  long chunk = sweep_prefill_chunk(b);
  if (chunk > ctx) chunk = ctx > 0 ? ctx : 1;
  const double pre = prefill ? (double)b * chunk : 0, dec = (double)b * (spec_k + 1);
  X->rows = vest_rows(pre > dec ? pre : dec);
  X->logit_rows = vest_rows(spec_k > 0 ? dec : b);
}

/* The dry run: per context every path open at once, max_seq = the largest batch, max_ctx = the
 * context + the steps' span (at most max_position_embeddings); what does not fit is retried with
 * the smallest batch and one path at a time (the step degrades), and a point that does not fit
 * alone is not run. Each point fills (or prefills) its context and runs warm-up + timed steps,
 * --repeat times; the bandwidth measurements once. */
static vstatus sweep_estimate(const void *st, const vsuite_est_ctx *x, vest *X) {
  const sweep_state *s = st;
  const char *const *names = x->paths;
  const int n = x->n_paths, spec_k = s->spec_k;
  const bool prefill = s->wl == SWEEP_PREFILL_DECODE;
  const int span = (int)((s->warmup + s->steps - 1) * s->spec_al + spec_k + 1), maxpos = X->cfg->max_position_embeddings;
  X->out->degrades = true;
  bool any_cpu = false, any_gpu = false;
  for (int p = 0; p < n; p++) {
    if (vest_on_gpu(names[p])) any_gpu = true;
    else any_cpu = true;
  }
  X->out->seconds = (any_cpu ? COST_SWEEP_MEMBW_S : 0) + (any_gpu ? COST_SWEEP_GPU_MEMBW_S : 0);
  vest_name_paths(X, names, n, true);
  long bmax = s->batches[0], bmin = s->batches[0];
  for (int i = 1; i < s->nb; i++) {
    bmax = s->batches[i] > bmax ? s->batches[i] : bmax;
    bmin = s->batches[i] < bmin ? s->batches[i] : bmin;
  }
  for (int ci = 0; ci < s->nc; ci++) {
    const long ctx = s->ctxs[ci];
    const int max_ctx = ctx + span <= maxpos ? (int)ctx + span : maxpos;
    sweep_rows(X, prefill, spec_k, bmax, ctx);
    if (!vest_open_set(X, names, n, (int)bmax, max_ctx, false)) {
      /* the sweep retries smaller batches, then each path alone: refused only when nothing fits */
      bool any = false;
      sweep_rows(X, prefill, spec_k, bmin, ctx);
      for (int p = 0; p < n; p++) any |= vest_open_set(X, &names[p], 1, (int)bmin, max_ctx, false);
      if (!any) vest_open_set(X, names, 1, (int)bmin, max_ctx, true);
    }
    for (int p = 0; p < n; p++) {
      X->out->seconds += vest_open_s(X, names[p], X->wbytes[p]);
      for (int bi = 0; bi < s->nb; bi++) {
        const long b = s->batches[bi];
        sweep_rows(X, prefill, spec_k, b, ctx);
        if (!vest_fits_alone(X, names[p], (int)b, max_ctx)) continue; /* not run: does not fit */
        const int rows = (int)b * (spec_k + 1);
        X->out->seconds += s->repeat * ((s->warmup + s->steps) * vest_step_s(X, names[p], rows, ctx + span / 2.0) +
                                        (prefill ? vest_prefill_s(X, names[p], (double)b * ctx, ctx)
                                                 : vest_fill_s(X, names[p], b, ctx)));
      }
    }
  }
  return V_OK;
}

/* The sweep's options from the suite's and the driver's. */
static vstatus sweep_check_opts(void *st, const vsuite_ctx *x) {
  sweep_state *s = st;
  s->o = (sweep_opts){.paths = x->paths, .n_paths = x->n_paths, .batches = s->batches, .n_batches = s->nb,
                      .contexts = s->ctxs, .n_contexts = s->nc, .tps = s->tps, .n_tps = s->nt, .spec_k = s->spec_k,
                      .spec_al = s->spec_al, .workload = s->wl, .routing = &s->routing, .steps = (int)s->steps,
                      .warmup = (int)s->warmup, .seed = x->seed, .device = (int)s->device, .n_threads = x->n_threads, .expect_fallback = x->expect_fallback,
                      .membw_bytes = (size_t)s->membw, .progress = !s->no_progress && cli_is_tty(2),
                      .deadline = s->budget > 0 ? s->t_cmd + s->budget : 0};
  s->bs = malloc((size_t)(s->nb > 0 ? s->nb : 1) * sizeof(int));
  if (!s->bs) return VERR("sweep: out of memory");
  s->n_bs = sweep_batches(&s->o, s->bs);
  return V_OK;
}

/* Round k (0-based) starts: its share of what is left of --time-budget, then sweep_begin. */
static vstatus round_begin(sweep_state *s, const vsuite_ctx *x, int k) {
  const int repeat = (int)s->repeat;
  if (repeat > 1 && s->o.progress) fprintf(stderr, "round %d of %d\n", k + 1, repeat);
  /* --time-budget is shared by the rounds: round k may run until its share of what is left ends */
  if (s->budget > 0 && repeat > 1) s->o.deadline = vclock_now() + (s->t_cmd + s->budget - vclock_now()) / (double)(repeat - k);
  return sweep_begin(&s->o, x->model, &s->res[k], &s->w);
}

/* The rounds' results, and round 1 begun (a bad option of the sweep ends it here). */
static vstatus sweep_prepare(void *st, const vsuite_ctx *x, bool *done) {
  sweep_state *s = st;
  (void)done;
  s->res = calloc((size_t)s->repeat, sizeof *s->res);
  if (!s->res) return VERR("sweep: out of memory");
  return round_begin(s, x, 0);
}

/* A case is one (context, TP) pair of one round: every path and batch of it, so the speedups over
 * the baseline are complete when it is stored. */
static int sweep_n_cases(const void *st, const vsuite_ctx *x) {
  const sweep_state *s = st;
  (void)x;
  return (int)s->repeat * sweep_n_pairs(&s->o);
}

static vstatus sweep_plan(void *st, const vsuite_ctx *x, int c, veng *recs) {
  const sweep_state *s = st;
  const int np = sweep_n_pairs(&s->o), pair = c % np, nt = s->nt > 0 ? s->nt : 1;
  const int ctx = s->ctxs[pair / nt], tp = s->nt > 0 ? s->tps[pair % nt] : 1;
  vstatus e = V_OK;
  for (int bi = 0; bi < s->n_bs && !e; bi++)
    for (int pi = 0; pi < x->n_paths && !e; pi++) {
      const int named = x->paths[pi].tp; /* a name's ":tpN" wins over the grid's --tp */
      point_head(recs, x->paths[pi].name, named ? named : tp, s->bs[bi], ctx, &s->o, x->model->source, c / np + 1,
                 (int)s->repeat, &e);
    }
  return e;
}

static vstatus sweep_run_case(void *st, const vsuite_ctx *x, int c) {
  sweep_state *s = st;
  const int np = sweep_n_pairs(&s->o), k = c / np;
  if (c % np == 0 && k > 0) VTRY(round_begin(s, x, k));
  VTRY(sweep_pair(s->w, c % np, &s->first));
  if (c % np == np - 1) { /* the round's last pair */
    sweep_end(s->w);
    s->w = NULL;
    s->wall_s += s->res[k].wall_s;
  }
  return V_OK;
}

/* The pair's records, with their speedups over the baseline path (the same pair holds its points). */
static vstatus sweep_record(void *st, const vsuite_ctx *x, int c, veng *recs) {
  const sweep_state *s = st;
  const int k = c / sweep_n_pairs(&s->o);
  const sweep_result *res = &s->res[k];
  for (int i = s->first; i < res->n; i++)
    VTRY(point_record(recs, &res->p[i], &s->o, x->model->source, k + 1, (int)s->repeat));
  return add_speedups(recs->v, recs->n, x->paths[0].name);
}

/* The peers' records, their speedups, the rounds' agreement. */
static vstatus sweep_finish(void *st, const vsuite_ctx *x, veng *recs) {
  sweep_state *s = st;
  for (int i = 0; i < s->n_peers; i++) {
    vrecord **pr = NULL;
    int n = 0, cap = 0;
    vstatus e = sweep_read_peer(s->peers[i], &pr, &n, &cap);
    for (int k = 0; k < n; k++)
      if (e == V_OK) e = eng_add(recs, pr[k]);
      else rec_free(pr[k]);
    free(pr);
    VTRY(e);
  }
  VTRY(add_speedups(recs->v, recs->n, x->paths[0].name));
  if (s->repeat > 1) VTRY(agreement_compute(recs->v, recs->n, (int)s->repeat, s->agree_pct, s->max_cv, &s->ag));
  return V_OK;
}

static void sweep_print(const void *st, const vsuite_ctx *x, const veng *recs) {
  const sweep_state *s = st;
  const int repeat = (int)s->repeat;
  print_tables(stdout, recs->v, recs->n, &s->o, s->res, repeat);
  if (repeat > 1) print_agreement(stdout, recs->v, &s->ag, repeat);
  printf("\nsweep wall time %.1f s", s->wall_s);
  if (repeat > 1) {
    printf(" (rounds:");
    for (int k = 0; k < repeat; k++) printf(" %.1f", s->res[k].wall_s);
    printf(" s)");
  }
  printf(", model open %.1f s\n", x->open_s);
}

/* --require-agreement: every point's rounds agree, and some point was judged. */
static bool sweep_passed(const void *st, const vsuite_ctx *x) {
  const sweep_state *s = st;
  (void)x;
  if (!s->require_agreement || (!s->ag.failed && s->ag.judged > 0)) return true;
  fprintf(stderr, "vouch sweep: repeat-run agreement failed (%d of %d points)\n", s->ag.failed, s->ag.judged);
  return false;
}

static vstatus sweep_json(const void *st, const vsuite_ctx *x, const veng *recs, const char *file) {
  const sweep_state *s = st;
  const int repeat = (int)s->repeat;
  return write_json(file, recs->v, recs->n, &s->o, s->res, repeat, repeat > 1 ? &s->ag : NULL, x->open_s, s->wall_s,
                    x->model->source);
}

static void sweep_free(void *st) {
  sweep_state *s = st;
  sweep_end(s->w); /* a round a failed pair left open */
  for (int k = 0; s->res && k < s->repeat; k++) sweep_result_free(&s->res[k]);
  free(s->res);
  agreement_free(&s->ag);
  vrouting_free(&s->routing);
  free(s->batches);
  free(s->ctxs);
  free(s->tps);
  free(s->bs);
}

static const vsuite vsuite_sweep = {
    .name = "sweep",
    .usage = USAGE,
    .default_model = "synth:tiny",
    .default_paths = "cpu-ref",
    .state_size = sizeof(sweep_state),
    .init = sweep_init,
    .option = sweep_option,
    .options_done = sweep_options_done,
    .check = sweep_check_opts,
    .prepare = sweep_prepare,
    .n_cases = sweep_n_cases,
    .run = sweep_run_case,
    .record = sweep_record,
    .print = sweep_print,
    .free = sweep_free,
    .layers = true,
    .quiet_verdict = true,
    .case_noun = "(context, TP) pairs",
    .paths_done = sweep_paths_done,
    .plan = sweep_plan,
    .seed_zero = true,
    .finish = sweep_finish,
    .passed = sweep_passed,
    .write_json = sweep_json,
    .estimate = sweep_estimate,
};

/* True when argv names a server (--server): the sweep is cmd_sweep_server's. */
static bool server_sweep(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--server") || !strncmp(argv[i], "--server=", 9)) return true;
  return false;
}

vstatus sweep_check_args(int argc, char **argv) {
  return server_sweep(argc, argv) ? sweep_server_check_args(argc, argv) : vsuite_check_args(&vsuite_sweep, argc, argv);
}

vstatus sweep_estimate_args(int argc, char **argv, const dry_env *env, dry_step *out) {
  if (!server_sweep(argc, argv)) return vsuite_estimate(&vsuite_sweep, argc, argv, env, out);
  vest_clear(out);
  return VUNSUPPORTED("sweep --server: the server's paths are not this machine's: nothing to estimate");
}

int cmd_sweep(int argc, char **argv, const vrec_sink *sink) {
  return server_sweep(argc, argv) ? cmd_sweep_server(argc, argv, sink) : vsuite_main(&vsuite_sweep, argc, argv, sink);
}
