/* Result directories, bundles and verify, on records made by a test-only generator.
 *   test_bundle                      runs the checks
 *   test_bundle --write DIR VARIANT  writes a fixture result directory (for the CLI tests):
 *                                    VARIANT base | slower | broken | big */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/read_file.h"
#include "common/trace.h"
#include "runner/evidence/bundle.h"
#include "runner/evidence/compare.h"
#include "runner/evidence/manifest.h"
#include "suites/engine/record.h"
#include "runner/evidence/report.h"
#include "runner/evidence/rundir.h"
#include "runner/evidence/store.h"
#include "runner/evidence/verify.h"
#include "tests/harness.h"

/* a valid plan (vouch run --dry-run accepts it) of the three suites the fixture's records come from,
 * so the fixture's replay.sh runs */
static const char *PLAN =
    "{\"name\":\"test\",\"steps\":["
    "{\"suite\":\"kernels\",\"args\":[\"--path\",\"latency\",\"--seeds\",\"1\",\"--seed\",\"10\"]},"
    "{\"suite\":\"sweep\",\"args\":[\"--model\",\"synth:tiny\",\"--paths\",\"cuda-ref,latency\","
    "\"--batch\",\"1,2,4,8\",\"--context\",\"256\",\"--steps\",\"4\"]},"
    "{\"suite\":\"eval\",\"args\":[\"mrcr\",\"--model\",\"synth:recall-mrcr\",\"--paths\",\"latency\","
    "\"--bins\",\"4k\",\"--needles\",\"2\",\"--samples\",\"1\"]}"
    "]}\n";

/* n samples around mean with +-5% deterministic jitter and one 10x outlier at index 3 */
static void samples(double *x, int n, double mean, uint64_t seed) {
  for (int i = 0; i < n; i++) {
    double u = (double)(rec_rng_next(&seed) >> 11) / 9007199254740992.0;
    x[i] = mean * (0.95 + 0.1 * u);
  }
  if (n > 8) x[3] = mean * 10;
}

/* Writes a small but complete run: kernels (threshold checks, one not_supported),
 * sweep (step time, tokens/s, speedup over batch per path), evals (score by context). */
static vstatus gen_run(const char *dir, const char *variant, bool close) {
  uint64_t seeds[2] = {1234, 99};
  char *argv[] = {"vouch", "run", "--plan", "test", "--api-token=abc", "--out", (char *)dir};
  manifest_opts mo = {.plan_name = "test", .plan_text = PLAN, .argc = 7, .argv = argv, .seeds = seeds, .n_seeds = 2,
                      .repo_dir = NULL, .base_sha = "0123456789abcdef0123456789abcdef01234567"};
  vrundir *rd;
  VTRY(rec_open_dir(&rd, dir, &mo));
  bool slower = !strcmp(variant, "slower"), broken = !strcmp(variant, "broken");
  int copies = !strcmp(variant, "big") ? 40 : 1;
  double x[64];
  for (int c = 0; c < copies; c++)
    for (int op = 0; op < 3; op++) {
      char id[64];
      snprintf(id, sizeof id, "%s/bf16/seed1%s%d", op == 0 ? "rmsnorm" : op == 1 ? "mla_decode" : "moe_gate", copies > 1 ? "/copy" : "", c);
      vrecord *r = rec_new("kernels", id, "latency");
      if (!r) return V_ERR;
      rec_param_int(r, "batch", 4);
      rec_param_str(r, "dtype", "bf16");
      if (op == 2) {
        rec_set_status(r, REC_NOT_SUPPORTED, "moe_gate: no variant for 7 experts");
      } else {
        double err = op == 0 ? 3e-4 : (broken ? 5e-2 : 1e-3);
        rec_metric_value(r, "max_rel_err", "", RB_LOWER, err);
        rec_set_threshold(r, "max_rel_err", "<=", 1e-2);
        rec_check_add(r, "variant_ran:latency", true);
        char trace[128];
        snprintf(trace, sizeof trace, "[{\"step\":0,\"op\":\"%s\",\"variant\":\"v1\"}]", op == 0 ? "rmsnorm" : "mla_decode");
        VTRY(rec_attach_trace(rd, r, trace));
      }
      VTRY(rec_add(rd, r));
      rec_free(r);
    }
  const char *paths[2] = {"cuda-ref", "latency"};
  for (int p = 0; p < 2; p++)
    for (int b = 1; b <= 8; b *= 2) {
      char id[64];
      snprintf(id, sizeof id, "decode/b%d", b);
      vrecord *r = rec_new("sweep", id, paths[p]);
      rec_param_int(r, "batch", b);
      rec_param_int(r, "context", 4096);
      double us = (p ? 400.0 : 700.0) * (1 + 0.1 * b) * (slower && p ? 1.25 : 1.0);
      samples(x, 40, us, (uint64_t)(p * 100 + b));
      VTRY(rec_metric_samples(r, "step_us", "us", RD_MEDIAN, RB_LOWER, x, 40, 0));
      VTRY(rec_metric_samples(r, "step_us_p90", "us", RD_P90, RB_LOWER, x, 40, 0));
      VTRY(rec_metric_samples(r, "step_us_stable", "us", RD_STABLE_MEAN, RB_LOWER, x, 40, 5));
      double tps[40];
      for (int i = 0; i < 40; i++) tps[i] = b * 1e6 / x[i];
      VTRY(rec_metric_samples(r, "tokens_per_s", "tok/s", RD_MEDIAN, RB_HIGHER, tps, 40, 0));
      VTRY(rec_metric_value(r, "roofline_pct", "%", RB_HIGHER, p ? 60.0 + b : 35.0 + b));
      VTRY(rec_add(rd, r));
      rec_free(r);
    }
  for (int ctx = 4096; ctx <= 32768; ctx *= 2) {
    char id[64];
    snprintf(id, sizeof id, "mrcr/%dk", ctx / 1024);
    vrecord *r = rec_new("evals", id, "latency");
    rec_param_int(r, "context", ctx);
    VTRY(rec_metric_value(r, "score", "", RB_HIGHER, 1.0 - ctx / 1e6));
    VTRY(rec_metric_value(r, "score_ref", "", RB_HIGHER, 1.0 - ctx / 1e6));
    VTRY(rec_metric_ratio(r, "score_vs_ref", "", RB_HIGHER, "score", "score_ref"));
    rec_set_threshold(r, "score_vs_ref", ">=", 0.99);
    /* what ran, from a tally as a suite keeps one: latency's attention variant changes past 8k keys,
     * and the 32k case hands one step to cuda-ref (declared: the report lists it) */
    vtrace t;
    vtrace_init_tally(&t);
    for (int s = 0; s < 3; s++) {
      vtrace_ran(&t, "latency", "mla_decode", ctx > 8192 ? "v2_gemm" : "v3_mma", "fixture");
      vtrace_next_step(&t);
    }
    if (ctx == 32768) vtrace_fallback(&t, "latency", "decode_step", "cuda-ref", "fixture: unsupported step");
    vstatus s = rec_ran(r, "latency", &t);
    vtrace_free(&t);
    VTRY(s);
    VTRY(rec_add(rd, r));
    rec_free(r);
  }
  FILE *lf = rec_log_open(rd, "run");
  if (lf) { fprintf(lf, "generated fixture %s\n", variant); fclose(lf); }
  if (close) return rec_close(rd);
  /* a crash: the process ends without closing (the caller runs this in a child that _exits) */
  return V_OK;
}

static int count_problems(const char *path, const char *needle) {
  vverify_report rep;
  if (verify_path(path, &rep)) return -1;
  int n = cJSON_GetArraySize(rep.problems), hit = needle ? 0 : n;
  const cJSON *e;
  cJSON_ArrayForEach(e, rep.problems) {
    if (getenv("VERBOSE")) fprintf(stderr, "  problem: %s\n", e->valuestring);
    if (needle && strstr(e->valuestring, needle)) hit++;
  }
  verify_report_free(&rep);
  return needle ? (hit ? hit : (n ? -100 - n : 0)) : n;
}

static bool same_file(const char *a, const char *b) {
  char *x, *y;
  size_t nx, ny;
  if (vfile_read(a, &x, &nx)) return false;
  if (vfile_read(b, &y, &ny)) { free(x); return false; }
  bool same = nx == ny && !memcmp(x, y, nx);
  free(x);
  free(y);
  return same;
}

static int run_cmd(const char *fmt, const char *a, const char *b) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, fmt, a, b);
  return system(cmd);
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "--write")) {
    if (gen_run(argv[2], argv[3], true)) { fprintf(stderr, "error: %s\n", verr_msg()); return 2; }
    return 0;
  }
  const char *T = test_tmpdir();
  char hist[512], d1[512], d2[512], b1[600], b2[600], tmp[1200];
  snprintf(hist, sizeof hist, "%s/history.sqlite", T);
  setenv("VOUCH_HISTORY_DB", hist, 1);
  setenv("VOUCH_SOME_API_TOKEN", "hunter2-secret", 1); /* allow-listed name, secret-looking: "***" */
  snprintf(d1, sizeof d1, "%s/run1", T);
  CHECK_OK(gen_run(d1, "base", true));

  /* the manifest: redaction, plan hash, verdict */
  vresults r;
  CHECK_OK(bundle_load(d1, &r));
  const cJSON *env = cJSON_GetObjectItemCaseSensitive(r.manifest, "environment");
  CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(env, "VOUCH_SOME_API_TOKEN")), "***"), "token redacted");
  const cJSON *cl = cJSON_GetObjectItemCaseSensitive(r.manifest, "command_line");
  CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetArrayItem(cl, 4)), "--api-token=***"), "argv secret redacted: %s",
        cJSON_GetStringValue(cJSON_GetArrayItem(cl, 4)));
  CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r.manifest, "verdict")), "pass"), "verdict pass");
  CHECK(r.n == 3 + 8 + 4, "records: %d", r.n);
  int not_supported = 0;
  for (int i = 0; i < r.n; i++) not_supported += r.recs[i]->status == REC_NOT_SUPPORTED;
  CHECK(not_supported == 1, "one not_supported");
  bundle_unload(&r);
  char *txt;
  snprintf(tmp, sizeof tmp, "%s/manifest.json", d1);
  CHECK_OK(vfile_read(tmp, &txt, NULL));
  CHECK(!strstr(txt, "hunter2-secret"), "secret value absent from the manifest");
  free(txt);

  /* an unbundled directory verifies (no SHA256SUMS yet) */
  CHECK(count_problems(d1, NULL) == 0, "fresh dir verifies");

  /* bundle twice, a second apart: identical bytes */
  snprintf(b1, sizeof b1, "%s/a.vouch.tar.gz", T);
  snprintf(b2, sizeof b2, "%s/b.vouch.tar.gz", T);
  CHECK_OK(bundle_write(d1, b1, NULL, 0));
  sleep(1);
  CHECK_OK(bundle_write(d1, b2, NULL, 0));
  CHECK(same_file(b1, b2), "bundle is byte-identical when made twice");
  unsigned char hdr[10] = {0};
  FILE *f = fopen(b1, "rb");
  if (f) { CHECK(fread(hdr, 1, 10, f) == 10, "gzip header"); fclose(f); }
  CHECK(hdr[0] == 0x1f && hdr[1] == 0x8b && !hdr[4] && !hdr[5] && !hdr[6] && !hdr[7] && !(hdr[3] & 0x08),
        "gzip header without mtime or name");
  CHECK(count_problems(b1, NULL) == 0, "bundle verifies");
  /* member order: SHA256SUMS first */
  CHECK(run_cmd("tar tzf %s | head -1 | grep -q '/SHA256SUMS$'%s", b1, "") == 0, "SHA256SUMS is the first member");
  CHECK(run_cmd("tar tvzf %s | grep -v ' 0/0 ' | grep -q . && exit 1 || exit 0%s", b1, "") == 0, "owners are 0/0");

  /* tampering inside an extracted bundle */
  snprintf(tmp, sizeof tmp, "mkdir -p %s/x && tar xzf %s -C %s/x", T, b1, T);
  CHECK(system(tmp) == 0, "extract");
  snprintf(d2, sizeof d2, "%s/x/run1", T);
  CHECK(count_problems(d2, NULL) == 0, "extracted bundle verifies");
  /* 1. edit one raw sample in results.json: hash + sqlite + rederive all object */
  snprintf(tmp, sizeof tmp, "%s/results.json", d2);
  CHECK(run_cmd("sed -i '0,/\"value\":\t3[.0-9e-]*/s//\"value\":\t0.0002/' %s%s", tmp, "") == 0, "sed");
  CHECK(count_problems(d2, "recomputed from 1 samples") > 0, "edited value is caught (recomputed from samples)");
  CHECK(count_problems(d2, "SHA-256") > 0, "edited file is caught by SHA256SUMS");
  /* 2. removed file */
  snprintf(tmp, sizeof tmp, "%s/traces/0000.json", d2);
  CHECK(unlink(tmp) == 0, "rm trace");
  CHECK(count_problems(d2, "traces/0000.json") > 0, "removed file is caught");
  /* 3. added file */
  snprintf(tmp, sizeof tmp, "%s/logs/extra.log", d2);
  f = fopen(tmp, "w");
  if (f) { fputs("x\n", f); fclose(f); }
  CHECK(count_problems(d2, "not listed in SHA256SUMS") > 0, "added file is caught");

  /* a consistent forgery (results.json and results.sqlite both edited, hashes regenerated)
   * is still caught: the stored median does not follow from the raw samples */
  snprintf(d2, sizeof d2, "%s/run_forged", T);
  CHECK_OK(gen_run(d2, "base", true));
  snprintf(tmp, sizeof tmp, "%s/results.sqlite", d2);
  vstore st;
  CHECK_OK(store_open(&st, tmp, false));
  CHECK(sqlite3_exec(st.db, "UPDATE records SET json = replace(json, '\"name\":\"step_us\",\"unit\":\"us\",\"value\":', "
                            "'\"name\":\"step_us\",\"unit\":\"us\",\"value\":1') WHERE case_id = 'decode/b1' AND path = 'latency';"
                            "UPDATE metrics SET value = 1 WHERE name = 'step_us' AND record_id = "
                            "(SELECT id FROM records WHERE case_id = 'decode/b1' AND path = 'latency');",
                     NULL, NULL, NULL) == SQLITE_OK, "forge sqlite");
  store_close(&st);
  CHECK_OK(rec_repair_dir(d2)); /* no-op on a finished run */
  snprintf(tmp, sizeof tmp, "%s/results.json", d2);
  unlink(tmp);
  CHECK_OK(rec_repair_dir(d2)); /* regenerates results.json from the forged store */
  CHECK(count_problems(d2, "metric 'step_us'") > 0, "consistent forgery caught by re-derivation");

  /* an interrupted run (no rec_close): bundling marks it incomplete; verify passes */
  snprintf(d2, sizeof d2, "%s/run_crash", T);
  pid_t pid = fork();
  if (pid == 0) _exit(gen_run(d2, "base", false) == V_OK ? 0 : 1);
  int wst = -1;
  CHECK(pid > 0 && waitpid(pid, &wst, 0) == pid && WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "crashing child wrote records");
  snprintf(tmp, sizeof tmp, "%s/crash.vouch.tar.gz", T);
  CHECK_OK(bundle_write(d2, tmp, NULL, 0));
  CHECK_OK(bundle_load(tmp, &r));
  CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r.results, "verdict")), "incomplete"), "crash -> incomplete");
  CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r.results, "complete")), "complete false");
  /* the 15 it wrote, and a not_run "stepN-SUITE" for each of PLAN's 3 steps it never finished */
  CHECK(r.n == 15 + 3, "records kept after crash: %d", r.n);
  int step_not_run = 0;
  for (const cJSON *x = cJSON_GetObjectItemCaseSensitive(r.results, "records")->child; x; x = x->next)
    step_not_run += !strncmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(x, "case_id")), "step", 4) &&
                    !strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(x, "status")), "not_run");
  CHECK(step_not_run == 3, "one not_run per unfinished plan step: %d", step_not_run);
  bundle_unload(&r);
  CHECK(count_problems(tmp, NULL) == 0, "incomplete bundle verifies");

  /* planned cases (rec_plan): stored as not_run, replaced in place by their finished records (count
   * and order of finishing kept), never over a result; a resumed run treats them as not stored */
  snprintf(d2, sizeof d2, "%s/run_planned", T);
  {
    char *pargv[] = {"vouch", "run"};
    manifest_opts pmo = {.plan_name = "test", .plan_text = PLAN, .argc = 2, .argv = pargv};
    vrundir *rd = NULL;
    CHECK_OK(rec_open_dir(&rd, d2, &pmo));
    const vrec_sink *sink = vrundir_sink(rd);
    vrecord *done0 = rec_new("diverge", "p0", "a");
    CHECK_OK(rec_emit(sink, done0, NULL)); /* a result before the plan: the plan leaves it */
    vrecord *pl[3] = {rec_new("diverge", "p0", "a"), rec_new("diverge", "p1", "a"), rec_new("diverge", "p2", "a")};
    CHECK_OK(rec_plan(sink, pl, 3, "not run: planned"));
    CHECK(pl[1]->status == REC_NOT_RUN && rec_dir_count(rd) == 3, "two planned records added: %d", rec_dir_count(rd));
    vrecord *done2 = rec_new("diverge", "p2", "a");
    rec_metric_value(done2, "kld", "nats", RB_LOWER, 0.5);
    CHECK_OK(rec_emit(sink, done2, NULL));
    CHECK(rec_dir_count(rd) == 3, "a finished case replaces its not_run copy: %d records", rec_dir_count(rd));
    CHECK_OK(rec_plan(sink, pl, 3, "not run: planned")); /* again (a resumed step): nothing over a result or a copy */
    CHECK(rec_dir_count(rd) == 3, "planning again adds nothing: %d", rec_dir_count(rd));
    CHECK_OK(rec_abandon(rd));
    CHECK_OK(rec_resume_dir(&rd, d2));
    sink = vrundir_sink(rd);
    CHECK(rec_stored(sink, "diverge", "p2", "a") && !rec_stored(sink, "diverge", "p1", "a"), "resumed: not_run is not stored");
    vrecord *done1 = rec_new("diverge", "p1", "a");
    CHECK_OK(rec_emit(sink, done1, NULL));
    CHECK_OK(rec_close(rd));
    CHECK_OK(bundle_load(d2, &r));
    CHECK(r.n == 3 && !strcmp(r.recs[0]->case_id, "p0") && !strcmp(r.recs[1]->case_id, "p2") &&
              !strcmp(r.recs[2]->case_id, "p1") && r.recs[1]->n_metrics == 1,
          "records in the order they finished, the planned copies gone (%d records)", r.n);
    for (int i = 0; i < r.n; i++) CHECK(r.recs[i]->status == REC_PASS, "record %d: %s", i, rec_status_name(r.recs[i]->status));
    bundle_unload(&r);
    CHECK(count_problems(d2, NULL) == 0, "a run with replaced planned records verifies");
    for (int i = 0; i < 3; i++) rec_free(pl[i]);
    rec_free(done0);
    rec_free(done1);
    rec_free(done2);
  }

  /* a broken kernel: fail verdict; compare flags a correctness regression */
  snprintf(d2, sizeof d2, "%s/run_broken", T);
  CHECK_OK(gen_run(d2, "broken", true));
  vresults a, b;
  CHECK_OK(bundle_load(b1, &a));
  CHECK_OK(bundle_load(d2, &b));
  CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(b.results, "verdict")), "fail"), "broken -> fail");
  cJSON *cmp = compare_results(&a, &b, 0.05);
  CHECK(cJSON_GetObjectItemCaseSensitive(cmp, "correctness_regressions")->valueint == 1, "one correctness regression");
  CHECK(cJSON_GetObjectItemCaseSensitive(cmp, "perf_regressions")->valueint == 0, "no perf regression");
  cJSON_Delete(cmp);
  bundle_unload(&b);
  /* slower latency path: perf regressions, deterministic output */
  snprintf(d2, sizeof d2, "%s/run_slow", T);
  CHECK_OK(gen_run(d2, "slower", true));
  CHECK_OK(bundle_load(d2, &b));
  /* one run a side: timings are listed, never gated (the drift between two runs is unknown) */
  cmp = compare_results(&a, &b, 0.05);
  CHECK(cJSON_GetObjectItemCaseSensitive(cmp, "perf_regressions")->valueint == 0, "one run a side: no timing verdict");
  CHECK(cJSON_GetObjectItemCaseSensitive(cmp, "not_enough_samples")->valueint >= 4, "one run a side: not enough samples");
  CHECK(!compare_failed(cmp), "one run a side: not failed");
  cJSON_Delete(cmp);
  /* three rounds a side (the same fixture three times): the 25% slowdown is a regression */
  vresults a3[3] = {a, a, a}, b3[3] = {b, b, b};
  cmp = compare_rounds(a3, 3, b3, 3, 0.05);
  int perf = cJSON_GetObjectItemCaseSensitive(cmp, "perf_regressions")->valueint;
  CHECK(perf >= 4, "slower path gives perf regressions: %d", perf);
  CHECK(compare_failed(cmp) && !strncmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cmp, "headline")), "REGRESSION", 10),
        "headline says REGRESSION");
  cJSON *cmp2 = compare_rounds(a3, 3, b3, 3, 0.05);
  char *t1 = cJSON_PrintUnformatted(cmp), *t2 = cJSON_PrintUnformatted(cmp2);
  CHECK(!strcmp(t1, t2), "compare output is deterministic");
  free(t1); free(t2);
  cJSON_Delete(cmp2);
  cJSON_Delete(cmp);
  /* a 30% threshold tolerates the 25% slowdown */
  cmp = compare_rounds(a3, 3, b3, 3, 0.30);
  CHECK(cJSON_GetObjectItemCaseSensitive(cmp, "perf_regressions")->valueint == 0, "within a 30%% threshold");
  cJSON_Delete(cmp);

  /* reports */
  char *md = NULL, *html = NULL;
  CHECK_OK(report_markdown(&b, &(report_links){"https://example.com/b.tar.gz", NULL}, REPORT_MD_LIMIT, &md));
  CHECK(md && !strncmp(md, REPORT_MARKER, strlen(REPORT_MARKER)), "markdown starts with the marker");
  CHECK(md && strstr(md, "| sweep |") && strstr(md, "**Bundle:** https://example.com/b.tar.gz"), "markdown has counts and the link");
  CHECK_OK(report_html(&b, &html));
  CHECK(html && strstr(html, "<svg") && strstr(html, "Tokens/s vs batch"), "html has the tokens/s chart");
  CHECK(html && strstr(html, "Eval mrcr: score vs context"), "html has the eval chart");
  CHECK(md && strstr(md, "### What ran (4 records") && strstr(md, "| latency | `mla_decode/v3_mma` | 2 | 6 | evals |") &&
            strstr(md, "| latency | `mla_decode/v2_gemm` | 2 | 6 | evals |"),
        "markdown: what ran, per path and op/variant over the records");
  CHECK(md && strstr(md, "**1 hand-overs to another path**") && strstr(md, "cuda-ref (fixture: unsupported step)"),
        "markdown: the hand-over to another path, with its reason");
  free(md);
  free(html);
  bundle_unload(&b);
  bundle_unload(&a);
  /* a big run still fits one comment */
  snprintf(d2, sizeof d2, "%s/run_big", T);
  CHECK_OK(gen_run(d2, "big", true));
  CHECK_OK(bundle_load(d2, &b));
  CHECK_OK(report_markdown(&b, NULL, 8000, &md));
  CHECK(md && strlen(md) < 8000 && strstr(md, "| not_supported | 40 |"), "big run: what did not run, grouped: %zu",
        md ? strlen(md) : 0);
  free(md);
  bundle_unload(&b);
  /* 3000 records in memory (1000 failing with long reasons, 1000 not supported for 50 reasons,
   * a sweep of 1000 points): the comment still fits, and says what it leaves to the full report */
  {
    enum { NH = 3000 };
    vrecord **hr = calloc(NH, sizeof *hr);
    CHECK(hr != NULL, "alloc");
    for (int i = 0; hr && i < NH; i++) {
      char id[96], why[200];
      snprintf(id, sizeof id, "%s/case%05d", i % 3 == 2 ? "decode" : "op", i);
      hr[i] = rec_new(i % 3 == 2 ? "sweep" : "kernels", id, i % 2 ? "latency" : "latency:tp8@tp_rsag");
      if (i % 3 == 0) {
        rec_metric_value(hr[i], "max_rel_err", "", RB_LOWER, 0.5);
        rec_set_threshold(hr[i], "max_rel_err", "<=", 1e-2);
        snprintf(why, sizeof why, "max_rel_err %.3g above the bound for this op and dtype, measured over %d inputs of "
                 "every distribution the plan names (normal, heavy tails, large magnitude)", 0.5, i);
        rec_check_add(hr[i], why, false);
      } else if (i % 3 == 1) {
        snprintf(why, sizeof why, "no variant for %d experts on this path", 7 + i % 50);
        rec_set_status(hr[i], REC_NOT_SUPPORTED, why);
      } else {
        rec_param_int(hr[i], "batch", 1 + i % 64);
        rec_param_int(hr[i], "context", 1024 << (i % 8));
        rec_metric_value(hr[i], "speedup", "x", RB_HIGHER, 1.5);
        rec_metric_value(hr[i], "speedup_ci95_lo", "x", RB_HIGHER, 1.4);
        rec_metric_value(hr[i], "speedup_ci95_hi", "x", RB_HIGHER, 1.6);
      }
      rec_finalize(hr[i]);
    }
    cJSON *res = cJSON_Parse("{\"verdict\": \"fail\", \"complete\": true}");
    vresults H = {.recs = hr, .n = hr ? NH : 0, .results = res};
    CHECK_OK(report_markdown(&H, &(report_links){NULL, "https://example.com/report.html"}, REPORT_MD_LIMIT, &md));
    CHECK(md && strlen(md) < 30000 && strstr(md, "### What failed (1000)") && strstr(md, "975 more failing cases in the full report") &&
              strstr(md, "more cases with other reasons") && strstr(md, "### Speed-up"), "huge run: %zu characters",
          md ? strlen(md) : 0);
    printf("comment size of a %d-record run: %zu characters\n", H.n, md ? strlen(md) : 0);
    free(md);
    for (int i = 0; hr && i < NH; i++) rec_free(hr[i]);
    free(hr);
    cJSON_Delete(res);
  }

  /* unsafe archives are refused */
  snprintf(tmp, sizeof tmp, "cd %s && mkdir -p evil && echo x > evil/f && tar czf evil.tar.gz --absolute-names /etc/hostname evil/f 2>/dev/null", T);
  if (system(tmp) == 0) {
    vbundle vb;
    snprintf(tmp, sizeof tmp, "%s/evil.tar.gz", T);
    CHECK(bundle_materialize(tmp, &vb) != V_OK, "absolute member refused");
  }
  snprintf(tmp, sizeof tmp, "%s/nothing.tar.gz", T);
  f = fopen(tmp, "w");
  if (f) { fputs("not a tarball", f); fclose(f); }
  CHECK(count_problems(tmp, NULL) == -1, "garbage is an input error");

  /* history got a row per finished run */
  CHECK(access(hist, F_OK) == 0, "history store written");
  snprintf(tmp, sizeof tmp, "rm -rf %s", T);
  if (!getenv("KEEP")) CHECK(system(tmp) == 0, "cleanup");
  return test_finish();
}
