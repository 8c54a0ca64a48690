/* vouch sweep --server URL --ref-server URL: two servers for speed, the way `vouch ab` compares two
 * builds (runner/cli/cmd_ab.c), with the served sweep's measurement (suites/sweep/sweep_suite.h).
 *
 * 1. Opens both servers (suites/served/served_pair.h: a 'launch:CMD {port}' side is started here, its
 *    output kept in DIR/logs/server.log or ref-server.log, and stopped at the end); the two must serve
 *    the same model (served_pair_check) before any request.
 * 2. Opens a result directory per side and round, DIR/base-K and DIR/head-K (ref-server = base,
 *    server = head), each a run of its own (manifest with the server's identity, results.sqlite/json).
 * 3. Per concurrency level, runs the level once per side and round in the order base, head, head, base,
 *    base, head, ... (as vouch ab orders its runs), so a drift of the machine during a level lands on
 *    both sides alike; each run's record (suite serve, one per level) goes to its round's directory.
 * 4. Closes and bundles every directory (DIR/<side>-K.vouch.tar.gz), loads them back and compares the
 *    sides over all rounds with compare_rounds_family (runner/evidence/compare.h), as vouch ab's step 5
 *    with the intervals family-wise (Bonferroni over the gated figures of all levels: an A/A pair of two
 *    processes read 2 false regressions in 38 runs at 95 % per figure over ~28 figures a level):
 *    per figure the ratio head / base, an interval covering the bootstrap of rounds and requests and
 *    the Student-t interval of the per-round ratios, a regression only when the whole interval is past
 *    the threshold, "not enough samples" and "too noisy" said as such, never passed off as a pass.
 * 5. Writes compare.json (compare's JSON plus "sweep_ab": servers, rounds, runs, per level the spec-decode
 *    acceptance of each side) and compare.md, prints the key figures per level.
 * As a step of `vouch run` (a sink): DIR is the run's sweep-ab/ (step_dir), the rounds are not bundled on
 * their own (the run's bundle holds them), launched servers log to the run's logs/ and are noted in its
 * manifest, and the comparison becomes the run's records (sweep_ab_records.h).
 * Exit code: 0 no regression, 1 regression or a problem of the head (compare_failed), 2 usage error or a
 * side that could not be measured (a server unreachable, a warm-up request failed, a store error),
 * 130 interrupted. */
#define _GNU_SOURCE
#include "runner/cli/cmd_sweep_ab.h"
#include "runner/cli/sweep_ab_records.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/atomic_file.h"
#include "common/interrupt.h"
#include "common/redact.h"
#include "runner/evidence/bundle.h"
#include "runner/evidence/compare.h"
#include "runner/evidence/manifest.h"
#include "runner/evidence/rundir.h"
#include "suites/engine/cli.h"
#include "suites/engine/record.h"
#include "suites/served/served_pair.h"
#include "suites/sweep/sweep_suite.h"

#define SAB_MAX_ROUNDS 50

/* The A/B's own options; the rest of argv goes to each side's served sweep. */
typedef struct {
  const char *server, *ref;  /* --server (head) and --ref-server (base): URL or 'launch:CMD' */
  const char *model;         /* --server-model (NULL: each server's first) */
  const char *out;           /* --out DIR (NULL: vouch-sweep-ab/<UTC time>) */
  int rounds;                /* --rounds: runs per side and level */
  bool relaunch;             /* --relaunch: a launched side is started afresh for every run */
  double threshold;          /* --threshold: fraction */
  double timeout;            /* --timeout: per request and for a launched server to answer */
  uint64_t seed;             /* --seed (the manifests' seed) */
  char **args;               /* [n_args] argv without --ref-server, --rounds, --threshold, --out */
  int n_args;
} sab_opts;

/* Parses argv into *o (o->args malloc'ed, freed by the caller, also on error). *help: --help given. Error:
 * a usage error naming the option. */
static vstatus sab_parse(int argc, char **argv, sab_opts *o, bool *help) {
  *o = (sab_opts){.rounds = COMPARE_MIN_TIMING_RUNS, .threshold = 0.05, .timeout = 600};
  *help = false;
  o->args = calloc((size_t)argc + 1, sizeof *o->args);
  if (!o->args) return VERR("out of memory");
  o->args[o->n_args++] = argv[0];
  vstatus err = V_OK;
  const char *v;
  long rounds = o->rounds;
  for (int i = 1; i < argc && !err; i++) {
    const char *a = argv[i];
    const int at = i;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { *help = true; return V_OK; }
    if (cli_opt(argc, argv, &i, "--ref-server", &v, &err)) { if (v) o->ref = v; continue; }
    if (cli_opt(argc, argv, &i, "--rounds", &v, &err)) { if (v) err = cli_int("--rounds", v, 1, SAB_MAX_ROUNDS, &rounds); continue; }
    if (cli_opt(argc, argv, &i, "--out", &v, &err)) { if (v) o->out = v; continue; }
    if (!strcmp(a, "--relaunch")) { o->relaunch = true; continue; }
    if (cli_opt(argc, argv, &i, "--threshold", &v, &err)) {
      if (v && (cli_double("--threshold", v, &o->threshold) || !(o->threshold >= 0 && o->threshold < 1)))
        err = VERR("--threshold %s: must be in [0, 1)", v);
      continue;
    }
    if (!strcmp(a, "--json") || !strncmp(a, "--json=", 7) || !strcmp(a, "--send-times") || !strncmp(a, "--send-times=", 13)) {
      err = VERR("%s: not taken with --ref-server (each round's records are in --out DIR, the comparison in "
                 "DIR/compare.json)", a);
      continue;
    }
    /* the options both sides need to know of here; passed on as given */
    if (cli_opt(argc, argv, &i, "--server", &v, &err)) { if (v) o->server = v; }
    else if (cli_opt(argc, argv, &i, "--server-model", &v, &err)) { if (v) o->model = v; }
    else if (cli_opt(argc, argv, &i, "--timeout", &v, &err)) { if (v) err = cli_double("--timeout", v, &o->timeout); }
    else if (cli_opt(argc, argv, &i, "--seed", &v, &err)) { if (v) err = cli_u64("--seed", v, &o->seed); }
    for (int k = at; k <= i && k < argc; k++) o->args[o->n_args++] = argv[k];
  }
  o->rounds = (int)rounds;
  if (err) return err;
  if (!o->server) return VERR("--server URL is required");
  if (!o->ref) return VERR("--ref-server URL is required");
  VTRY(served_spec_check("--server", o->server));
  VTRY(served_spec_check("--ref-server", o->ref));
  if (!(o->timeout >= 0)) return VERR("--timeout must be >= 0");
  if (o->relaunch && !served_launch_wanted(o->server) && !served_launch_wanted(o->ref))
    return VERR("--relaunch: neither --server nor --ref-server is a 'launch:CMD'");
  /* every other option as the one-server sweep checks it (a launched side's URL is not known yet) */
  return sweep_srv_check(o->n_args, o->args, served_launch_wanted(o->server) ? "http://127.0.0.1:1" : NULL);
}

static const char USAGE[] =
    "usage: vouch sweep --server URL|launch:CMD --ref-server URL|launch:CMD [--rounds N] [--threshold T]\n"
    "                   [--relaunch] [--out DIR] [the options of vouch sweep --server, but --json, --send-times]\n"
    "  Two servers for speed: per --concurrency level, --rounds runs of the level on each server in the\n"
    "  order base, head, head, base, base, head, ... (--ref-server is the base, --server the head), so a\n"
    "  drift of the machine lands on both alike; then per level the ratio head / base of output tok/s,\n"
    "  tok/s per user, TTFT / TPOT / ITL / E2E (p50, p90, p99, mean) with an interval, gated as vouch ab\n"
    "  gates but family-wise (each interval at 1 - 0.05 / the number of gated figures, so an A/A pair is\n"
    "  called a regression at most 5% of the time; the interval covers the bootstrap of rounds and\n"
    "  requests and the t interval of the per-round ratios; a regression only when the whole interval is\n"
    "  beyond --threshold, default 0.05; a figure with too few samples or too noisy to judge says so).\n"
    "  Timings need 3 rounds a side, figures measured once\n"
    "  per run (output tok/s, req/s, acceptance) 8. Speculative decoding: each side's acceptance length\n"
    "  (mean, per position) from /metrics next to its draft length, when the server counts them.\n"
    "  DIR (default vouch-sweep-ab/<UTC time>): base-K/ head-K/ (a result directory per side and round, each\n"
    "  bundled to <name>.vouch.tar.gz), compare.json, compare.md, logs/ (launched servers' output).\n"
    "  As a step of vouch run (suites/plans/served.json): DIR is the run's sweep-ab/ (bundled with the run,\n"
    "  no --out), and per level and gated figure a record (ratio, interval, pass / fail / undecided).\n"
    "  Exit 0 no regression, 1 regression or a problem of the head (failed requests, missing levels),\n"
    "  2 usage error or a side that could not be measured. defaults: --rounds 3 --threshold 0.05\n"
    "  --relaunch: a 'launch:' side is stopped and started afresh before each of its runs (warm-up\n"
    "  requests first), so a difference of one server process from another (where it runs, its memory)\n"
    "  is noise between rounds, which the interval covers, not a difference of the sides.\n"
    SERVED_LAUNCH_HELP;

/* A sink that keeps only logs, in DIR/logs (the launched servers' output, redacted): served_pair_open's.
 * The servers' identities go to each round's manifest instead (sweep_srv_note). */
static FILE *logs_open(void *ctx, const char *name) {
  char path[PATH_MAX + 128];
  snprintf(path, sizeof path, "%s/logs/%s.log", (const char *)ctx, name);
  FILE *f = fopen(path, "a");
  if (!f) { VERR("%s: cannot open log: %s", path, strerror(errno)); return NULL; }
  return redact_stream(f);
}
static bool logs_stored(void *ctx, const char *suite, const char *case_id, const char *path) {
  (void)ctx, (void)suite, (void)case_id, (void)path;
  return false;
}
static vstatus logs_plan(void *ctx, vrecord *const *r, int n) { (void)ctx, (void)r, (void)n; return V_OK; }
static vstatus logs_emit(void *ctx, vrecord *r, const char *trace_json) { (void)ctx, (void)trace_json; return rec_finalize(r); }
static vstatus logs_note(void *ctx, const cJSON *entry) { (void)ctx, (void)entry; return V_OK; }

/* One run directory: side s (0 base, 1 head) of round k (0-based). */
typedef struct {
  char dir[PATH_MAX + 32]; /* DIR/<side>-<k+1> */
  vrundir *rd;         /* open while the levels run; NULL once closed */
  int rc;              /* the levels' exit code on that side (EXIT_CHECK_FAILED: a request failed) */
} sab_run;

static const char *const SIDE[2] = {"base", "head"};

/* The plan text of one side's round directories: the served sweep it ran (manifest and plan.json). */
static char *side_plan(const sab_opts *o, int side, const char *url) {
  cJSON *p = cJSON_CreateObject(), *args = NULL;
  cJSON_AddStringToObject(p, "name", side ? "sweep-ab-head" : "sweep-ab-base");
  cJSON_AddStringToObject(p, "description", side ? "vouch sweep --server --ref-server: a round of the head (--server)"
                                                 : "vouch sweep --server --ref-server: a round of the base (--ref-server)");
  cJSON_AddObjectToObject(p, "vars");
  cJSON *step = cJSON_CreateObject();
  cJSON_AddStringToObject(step, "suite", "sweep");
  args = cJSON_AddArrayToObject(step, "args");
  for (int i = 1; i < o->n_args; i++) {
    const bool is_url = i > 1 && !strcmp(o->args[i - 1], "--server");
    cJSON_AddItemToArray(args, cJSON_CreateString(is_url ? url : !strncmp(o->args[i], "--server=", 9) ? "--server" : o->args[i]));
    if (!strncmp(o->args[i], "--server=", 9)) cJSON_AddItemToArray(args, cJSON_CreateString(url));
  }
  cJSON *steps = cJSON_AddArrayToObject(p, "steps");
  cJSON_AddItemToArray(steps, step);
  char *t = cJSON_Print(p);
  cJSON_Delete(p);
  return t;
}

/* The median over the rounds of `side` of metric `name` of case `case_id` (NaN: no round has it). */
static double rounds_median(const vresults *side, int n, const char *case_id, const char *name) {
  double v[SAB_MAX_ROUNDS];
  int k = 0;
  for (int r = 0; r < n; r++)
    for (int i = 0; i < side[r].n; i++) {
      const vrecord *x = side[r].recs[i];
      const rec_metric *m = strcmp(x->case_id, case_id) ? NULL : rec_metric_find(x, name);
      if (m && isfinite(m->value)) v[k++] = m->value;
    }
  return k ? rec_stat_percentile(v, k, 50) : NAN;
}

/* Per level and side, the spec-decode acceptance (median over rounds): mean acceptance length, per
 * position, and the draft length the server counts (its per-position counters: K). NULL per side when
 * the server counted no drafts. */
static cJSON *spec_json(const vresults *sides[2], int n, const char *case_id) {
  cJSON *o = cJSON_CreateObject();
  for (int s = 0; s < 2; s++) {
    const double al = rounds_median(sides[s], n, case_id, "spec_mean_acceptance_length");
    if (!isfinite(al)) { cJSON_AddNullToObject(o, SIDE[s]); continue; }
    cJSON *e = cJSON_AddObjectToObject(o, SIDE[s]);
    cJSON_AddNumberToObject(e, "mean_acceptance_length", al);
    const double rate = rounds_median(sides[s], n, case_id, "spec_acceptance_rate");
    if (isfinite(rate)) cJSON_AddNumberToObject(e, "acceptance_rate", rate);
    cJSON *pos = cJSON_AddArrayToObject(e, "per_position");
    for (int p = 0; p < 64; p++) {
      char nm[48];
      snprintf(nm, sizeof nm, "spec_acceptance_pos%d", p);
      const double v = rounds_median(sides[s], n, case_id, nm);
      if (!isfinite(v)) break;
      cJSON_AddItemToArray(pos, cJSON_CreateNumber(v));
    }
    cJSON_AddNumberToObject(e, "draft_length", cJSON_GetArraySize(pos));
  }
  return o;
}

static void print_spec(FILE *f, const cJSON *spec, const char *pre) {
  bool any = false;
  for (int s = 0; s < 2; s++) any |= cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(spec, SIDE[s]));
  if (!any) return;
  fprintf(f, "%sspec decode:", pre);
  for (int s = 0; s < 2; s++) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(spec, SIDE[s]), *p;
    if (!cJSON_IsObject(e)) { fprintf(f, "%s %s no drafts counted", s ? ";" : "", SIDE[s]); continue; }
    fprintf(f, "%s %s acceptance length %.3f (draft length %d; per position", s ? ";" : "", SIDE[s],
            cJSON_GetObjectItemCaseSensitive(e, "mean_acceptance_length")->valuedouble,
            cJSON_GetObjectItemCaseSensitive(e, "draft_length")->valueint);
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(e, "per_position")) fprintf(f, " %.3f", p->valuedouble);
    fprintf(f, ")");
  }
  fprintf(f, "\n");
}

/* The figures shown per level (every other is in compare.json and compare.md's details). */
static const char *const KEY[][2] = {
    {"tokens_per_s", "output tok/s"}, {"tokens_per_s_per_user", "tok/s per user p50"},
    {"ttft_ms", "TTFT p50"}, {"ttft_ms_p90", "TTFT p90"}, {"ttft_ms_p99", "TTFT p99"},
    {"tpot_ms", "TPOT p50"}, {"tpot_ms_p90", "TPOT p90"}, {"tpot_ms_p99", "TPOT p99"},
    {"itl_ms", "ITL p50"}, {"itl_ms_p90", "ITL p90"}, {"itl_ms_p99", "ITL p99"},
    {"e2e_ms", "E2E p50"}, {"e2e_ms_p90", "E2E p90"}, {"e2e_ms_p99", "E2E p99"},
};

/* The key figures of level `case_id` from the comparison: a text table (md false) or Markdown rows. */
static void print_level(FILE *f, const cJSON *cmp, const char *case_id, bool md) {
  const cJSON *mets = cJSON_GetObjectItemCaseSensitive(cmp, "metrics"), *e;
  for (size_t k = 0; k < sizeof KEY / sizeof KEY[0]; k++)
    cJSON_ArrayForEach(e, mets) {
      if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "case_id")), case_id) ||
          strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "metric")), KEY[k][0]))
        continue;
      const cJSON *ci = cJSON_GetObjectItemCaseSensitive(e, "ci95");
      const double lo = cJSON_GetArrayItem(ci, 0)->valuedouble, hi = cJSON_GetArrayItem(ci, 1)->valuedouble;
      const bool has_ci = cJSON_IsNumber(cJSON_GetArrayItem(ci, 0));
      char iv[64] = "no interval";
      if (has_ci) snprintf(iv, sizeof iv, "[%.3f, %.3f]", lo, hi);
      const cJSON *b = cJSON_GetObjectItemCaseSensitive(e, "base"), *c = cJSON_GetObjectItemCaseSensitive(e, "cand"),
                  *r = cJSON_GetObjectItemCaseSensitive(e, "ratio");
      const char *verdict = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "verdict"));
      const bool reg = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "regression"));
      const bool noisy = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "too_noisy"));
      const char *unit = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "unit"));
      if (md)
        fprintf(f, "| %s | %.4g | %.4g | %s | x%.3f | %s | %s%s%s |\n", KEY[k][1], cJSON_IsNumber(b) ? b->valuedouble : NAN,
                cJSON_IsNumber(c) ? c->valuedouble : NAN, unit, cJSON_IsNumber(r) ? r->valuedouble : NAN, iv, verdict,
                noisy ? ", too noisy to judge" : "", reg ? ", **REGRESSION**" : "");
      else
        fprintf(f, "  %-20s %10.4g -> %-10.4g %-6s x%.3f %-16s %s%s%s\n", KEY[k][1], cJSON_IsNumber(b) ? b->valuedouble : NAN,
                cJSON_IsNumber(c) ? c->valuedouble : NAN, unit, cJSON_IsNumber(r) ? r->valuedouble : NAN, iv, verdict,
                noisy ? " (too noisy to judge)" : "", reg ? "  REGRESSION" : "");
    }
}

/* compare.md: compare's Markdown (its first line is the verdict), then per level the key figures and the
 * spec-decode acceptance. Error names the file. */
static vstatus write_md(const char *dir, const sab_opts *o, const cJSON *cmp, const cJSON *levels, const char *base_shown,
                        const char *head_shown) {
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/compare.md", dir);
  FILE *f = fopen(path, "wb");
  if (!f) return VERR("%s: cannot write: %s", path, strerror(errno));
  compare_markdown(cmp, f, COMPARE_MD_LIMIT - 12000); /* room for the levels below */
  fprintf(f, "\n## vouch sweep: `%s` (head) vs `%s` (base)\n\n", head_shown, base_shown);
  const cJSON *conf = cJSON_GetObjectItemCaseSensitive(cmp, "interval_confidence");
  fprintf(f, "%d round%s per level in the order base, head, head, base, ...; ratio = head / base; a timing's interval "
          "covers the bootstrap of rounds and requests and the t interval of the per-round ratios; each interval at "
          "%.4g %% (family-wise 95 %% over %d gated figures).\n",
          o->rounds, o->rounds == 1 ? "" : "s", cJSON_IsNumber(conf) ? 100 * conf->valuedouble : 95,
          (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(cmp, "gated_family")));
  const cJSON *L;
  cJSON_ArrayForEach(L, levels) {
    const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(L, "case_id"));
    fprintf(f, "\n### `%s`\n\n| figure | base | head | unit | head / base | interval | verdict |\n|---|---|---|---|---|---|---|\n", id);
    print_level(f, cmp, id, true);
    print_spec(f, cJSON_GetObjectItemCaseSensitive(L, "spec"), "\n");
  }
  return fclose(f) != 0 ? VERR("%s: write failed", path) : V_OK;
}

/* Bundles the closed runs (not under `vouch run`: there they are bundled with the run), loads them back,
 * compares base against head over all rounds, writes compare.json and compare.md and prints the levels;
 * under `vouch run` (sink not NULL) stores the comparison as the run's records (sab_emit_records: path
 * head_path, case ids under `sub`). *failed: compare_failed. Error: a run could not be bundled or
 * loaded, a file written or a record stored. */
static vstatus compare_sides(const char *dir, const sab_opts *o, sab_run *runs, const char *shown[2], const vrec_sink *sink,
                             const char *sub, const char *head_path, bool *failed) {
  const int n = o->rounds;
  vresults *rs[2] = {calloc((size_t)n, sizeof(vresults)), calloc((size_t)n, sizeof(vresults))};
  int loaded[2] = {0, 0};
  vstatus s = rs[0] && rs[1] ? V_OK : VERR("out of memory");
  cJSON *list = cJSON_CreateArray();
  for (int k = 0; s == V_OK && k < n; k++)
    for (int side = 0; s == V_OK && side < 2; side++) {
      sab_run *r = &runs[2 * k + side];
      char used[PATH_MAX + 64] = "/", hex[65] = "";
      if (!sink) s = bundle_pack(r->dir, NULL, used, sizeof used, hex);
      if (s == V_OK && (s = bundle_load(r->dir, &rs[side][k])) == V_OK) loaded[side]++;
      cJSON *e = cJSON_CreateObject();
      cJSON_AddStringToObject(e, "side", SIDE[side]);
      cJSON_AddNumberToObject(e, "round", k + 1);
      cJSON_AddStringToObject(e, "dir", strrchr(r->dir, '/') + 1);
      cJSON_AddStringToObject(e, "bundle", s == V_OK ? strrchr(used, '/') + 1 : "");
      cJSON_AddStringToObject(e, "bundle_sha256", s == V_OK ? hex : "");
      cJSON_AddNumberToObject(e, "exit_code", r->rc);
      cJSON_AddItemToArray(list, e);
    }
  if (s == V_OK) {
    cJSON *cmp = compare_rounds_family(rs[0], n, rs[1], n, o->threshold);
    cJSON *meta = cJSON_AddObjectToObject(cmp, "sweep_ab");
    cJSON_AddStringToObject(meta, "base_server", shown[0]);
    cJSON_AddStringToObject(meta, "head_server", shown[1]);
    cJSON_AddNumberToObject(meta, "rounds", n);
    cJSON_AddStringToObject(meta, "order", "base, head, head, base, ... per level");
    cJSON_AddStringToObject(meta, "hardware", manifest_hardware_key(rs[0][0].manifest));
    cJSON_AddItemToObject(meta, "runs", list);
    list = NULL;
    cJSON *levels = cJSON_AddArrayToObject(meta, "levels");
    const vresults *sides[2] = {rs[0], rs[1]};
    for (int i = 0; i < rs[0][0].n; i++) {
      const vrecord *x = rs[0][0].recs[i];
      cJSON *L = cJSON_CreateObject();
      cJSON_AddStringToObject(L, "case_id", x->case_id);
      cJSON_AddItemToObject(L, "spec", spec_json(sides, n, x->case_id));
      cJSON_AddItemToArray(levels, L);
    }
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/compare.json", dir);
    s = vfile_write_json(path, cmp, true);
    if (s == V_OK) s = write_md(dir, o, cmp, levels, shown[0], shown[1]);
    if (s == V_OK && sink) s = sab_emit_records(sink, cmp, head_path, sub);
    if (s == V_OK) {
      printf("\nhead (%s) / base (%s), %d round%s a side, threshold %.1f%%:\n", shown[1], shown[0], n, n == 1 ? "" : "s",
             100 * o->threshold);
      const cJSON *L;
      cJSON_ArrayForEach(L, levels) {
        const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(L, "case_id"));
        printf("%s\n", id);
        print_level(stdout, cmp, id, false);
        print_spec(stdout, cJSON_GetObjectItemCaseSensitive(L, "spec"), "  ");
      }
      printf("%s\n", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cmp, "headline")));
      const cJSON *e;
      cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(cmp, "problems")) printf("  problem: %s\n", e->valuestring);
      cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(cmp, "notes")) printf("  note: %s\n", e->valuestring);
      cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(cmp, "metrics"))
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "regression")))
          printf("  regression: %s %s x%.4f [%.4f, %.4f]\n", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "case_id")),
                 cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "metric")),
                 cJSON_GetObjectItemCaseSensitive(e, "ratio")->valuedouble,
                 cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(e, "ci95"), 0)->valuedouble,
                 cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(e, "ci95"), 1)->valuedouble);
      printf("results in %s (compare.md, compare.json, base-K/ head-K/)%s\n", dir, sink ? ", and as the run's records" : "");
    }
    *failed = compare_failed(cmp);
    cJSON_Delete(cmp);
  }
  cJSON_Delete(list);
  for (int side = 0; side < 2; side++) {
    for (int k = 0; k < loaded[side]; k++) bundle_unload(&rs[side][k]);
    free(rs[side]);
  }
  return s;
}

/* Under `vouch run`: the step's folder in the run directory, DIR/sweep-ab, else the first of
 * sweep-ab-2, sweep-ab-3, ... that does not exist (a plan with two A/B steps, a resumed run), into
 * sub[cap] (its name) and out[cap] (its path). Error: the run keeps no directory, or 100 are taken. */
static vstatus step_dir(const vrec_sink *sink, char *sub, size_t cap, char *out, size_t out_cap) {
  const char *run = rec_sink_dir(sink);
  if (!run) return VERR("--ref-server: the run keeps no directory for the rounds");
  for (int k = 1; k <= 100; k++) {
    snprintf(sub, cap, k == 1 ? "sweep-ab" : "sweep-ab-%d", k);
    snprintf(out, out_cap, "%s/%s", run, sub);
    if (access(out, F_OK) != 0) return V_OK;
  }
  return VERR("%s/sweep-ab-100: already exists", run);
}

/* The A/B itself, once the options are parsed: see the top of the file. With a sink (a step of `vouch
 * run`) the rounds go to the run's directory (step_dir), launched servers' output to the run's logs/,
 * their identities to its manifest, and the comparison to its records. Returns the exit code. */
static int sweep_ab(int argc, char **argv, sab_opts *o, const vrec_sink *sink) {
  char dir[PATH_MAX], outdir[PATH_MAX], sub[32] = "";
  vstatus s = V_OK;
  if (sink) s = step_dir(sink, sub, sizeof sub, outdir, sizeof outdir);
  else if (o->out) snprintf(outdir, sizeof outdir, "%s", o->out);
  else {
    char ts[32];
    time_t t = time(NULL);
    strftime(ts, sizeof ts, "%Y%m%d-%H%M%S", gmtime(&t));
    snprintf(outdir, sizeof outdir, "vouch-sweep-ab/%s", ts);
  }
  char path[PATH_MAX + 64];
  if (s == V_OK) s = cli_mkdirs(outdir);
  if (s == V_OK && !realpath(outdir, dir)) s = VERR("%s: cannot resolve: %s", outdir, strerror(errno));
  if (s == V_OK) {
    snprintf(path, sizeof path, "%s/base-1", dir);
    if (access(path, F_OK) == 0) s = VERR("%s: already exists: pick a new --out", path);
  }
  if (s == V_OK && !sink) { /* in a plan step the launched servers' output goes to the run's logs/ */
    snprintf(path, sizeof path, "%s/logs", dir);
    s = cli_mkdirs(path);
  }
  if (s) { cli_print_error("sweep"); return EXIT_USAGE; }

  vinterrupt_install();
  const vrec_sink own = {.ctx = dir, .stored = logs_stored, .plan = logs_plan, .emit = logs_emit, .note_server = logs_note,
                         .log_open = logs_open};
  const vrec_sink *const logs = sink ? sink : &own;
  served_side sv[2];
  int n_sv = 0, rc = EXIT_USAGE;
  sweep_srv *w[2] = {NULL, NULL};
  sab_run *runs = calloc((size_t)o->rounds * 2, sizeof *runs);
  const int n_runs = o->rounds * 2;
  if (!runs) { s = VERR("out of memory"); goto out; }
  /* sv[0] the candidate (--server, head), sv[1] the reference (--ref-server, base) */
  if ((s = served_pair_open(logs, o->server, o->ref, o->model, o->timeout, sv, &n_sv))) goto out;
  for (int side = 0; side < 2; side++) {
    int code;
    if ((s = sweep_srv_open(o->n_args, o->args, sv[1 - side].conn.base, NULL, &w[side], &code))) goto out;
  }
  for (int k = 0; k < o->rounds; k++)
    for (int side = 0; side < 2; side++) {
      sab_run *r = &runs[2 * k + side];
      snprintf(r->dir, sizeof r->dir, "%s/%s-%d", dir, SIDE[side], k + 1);
      char *plan = side_plan(o, side, sweep_srv_shown(w[side]));
      manifest_opts mo = {.plan_name = side ? "sweep-ab-head" : "sweep-ab-base", .plan_text = plan ? plan : "{}",
                          .argc = argc, .argv = argv, .seeds = &o->seed, .n_seeds = 1};
      s = rec_open_dir(&r->rd, r->dir, &mo);
      free(plan);
      if (s == V_OK) s = sweep_srv_note(w[side], vrundir_sink(r->rd));
      if (s) goto out;
    }
  printf("served sweep A/B: head %s, base %s, %d round%s a side per level (base, head, head, base, ...)\n",
         sweep_srv_shown(w[1]), sweep_srv_shown(w[0]), o->rounds, o->rounds == 1 ? "" : "s");
  sweep_srv_print_intro(w[1]);
  sweep_srv_print_columns("        ");
  for (int li = 0; li < sweep_srv_levels(w[1]) && !vinterrupted(); li++)
    for (int k = 0; k < o->rounds && !vinterrupted(); k++)
      for (int i = 0; i < 2 && !vinterrupted(); i++) {
        const int side = k % 2 == 0 ? i : 1 - i; /* round 1: base, head; round 2: head, base; ... */
        sab_run *r = &runs[2 * k + side];
        char lead[32];
        snprintf(lead, sizeof lead, "%s-%-3d", SIDE[side], k + 1);
        served_side *sd = &sv[1 - side]; /* sv[0] the head, sv[1] the base */
        const bool fresh = o->relaunch && sd->launch.live && (li > 0 || k > 0);
        if (fresh) { /* stop the side's server and start its command again, on a new port */
          const char *spec = side ? o->server : o->ref, *opt = side ? "--server" : "--ref-server";
          served_launch_stop(&sd->launch);
          if ((s = served_launch_start(&sd->launch, opt, spec, logs, side ? "server" : "ref-server", SERVED_LAUNCH_WAIT_S)) ||
              (s = sweep_srv_set_url(w[side], sd->launch.url)))
            goto out;
        }
        vrecord *rec = NULL;
        s = sweep_srv_level(w[side], li, li == 0 || fresh, vrundir_sink(r->rd), lead, &rec, &r->rc);
        rec_free(rec);
        if (s) goto out;
      }
  if (vinterrupted()) goto out;
  for (int i = 0; i < n_runs && s == V_OK; i++) {
    s = rec_close(runs[i].rd);
    runs[i].rd = NULL;
  }
  if (s) goto out;
  bool failed = false;
  const char *shown[2] = {sweep_srv_shown(w[0]), sweep_srv_shown(w[1])};
  if ((s = compare_sides(dir, o, runs, shown, sink, sub, sv[0].path, &failed))) goto out;
  rc = failed ? EXIT_CHECK_FAILED : EXIT_OK;
out:
  if (s) cli_print_error("sweep");
  if (vinterrupted() && rc == EXIT_USAGE && !s) rc = EXIT_INTERRUPTED;
  for (int i = 0; runs && i < n_runs; i++)
    if (runs[i].rd) rec_abandon(runs[i].rd);
  free(runs);
  sweep_srv_close(w[0]);
  sweep_srv_close(w[1]);
  if (n_sv) served_pair_close(sv, n_sv);
  return rc;
}

static bool wants_ab(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--ref-server") || !strncmp(argv[i], "--ref-server=", 13)) return true;
  return false;
}

/* sab_parse for a plan step: --out is refused there (the rounds go under the run's directory). */
static vstatus sab_parse_step(int argc, char **argv, sab_opts *o, bool *help) {
  VTRY(sab_parse(argc, argv, o, help));
  if (o->out) return VERR("--out: not taken in a plan step (the rounds go to the run's directory, DIR/sweep-ab)");
  return V_OK;
}

vstatus sweep_any_check_args(int argc, char **argv) {
  if (!wants_ab(argc, argv)) return sweep_check_args(argc, argv);
  sab_opts o;
  bool help;
  vstatus s = sab_parse_step(argc, argv, &o, &help);
  free(o.args);
  return s;
}

int cmd_sweep_any(int argc, char **argv, const vrec_sink *sink) {
  if (!wants_ab(argc, argv)) return cmd_sweep(argc, argv, sink);
  sab_opts o;
  bool help;
  vstatus s = sink ? sab_parse_step(argc, argv, &o, &help) : sab_parse(argc, argv, &o, &help);
  int rc;
  if (help) { fputs(USAGE, stdout); rc = EXIT_OK; }
  else if (s) { cli_print_error("sweep"); rc = EXIT_USAGE; }
  else rc = sweep_ab(argc, argv, &o, sink);
  free(o.args);
  return rc;
}
