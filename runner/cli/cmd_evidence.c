/* vouch bundle | verify | compare | report | publish | history */
#define _GNU_SOURCE
#include "runner/cli/cmd_evidence.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "common/atomic_file.h"
#include "runner/evidence/bundle.h"
#include "suites/engine/cli.h"
#include "runner/evidence/compare.h"
#include "runner/evidence/history.h"
#include "runner/evidence/publish.h"
#include "runner/evidence/report.h"
#include "runner/evidence/verify.h"

static bool is_help(const char *a) { return !strcmp(a, "--help") || !strcmp(a, "-h"); }

static int usage_err(const char *cmd, const char *usage) {
  cli_print_error(cmd);
  fprintf(stderr, "usage: %s\n", usage);
  return EXIT_USAGE;
}

static void print_json(cJSON *j) {
  char *t = cJSON_Print(j);
  if (t) puts(t);
  free(t);
}

/* ---------------- bundle ---------------- */
static const char *BUNDLE_USAGE = "vouch bundle DIR [--out FILE] [--json]";

int cmd_bundle(int argc, char **argv) {
  const char *dir = NULL, *out = NULL;
  bool json = false;
  vstatus err = V_OK;
  for (int i = 1; i < argc; i++) {
    if (is_help(argv[i])) {
      printf("usage: %s\n\nPacks a result directory into NAME.vouch.tar.gz (next to DIR unless --out),\n"
             "byte-identical when made twice: sorted members, SHA256SUMS first, mtime 0, owner 0.\n"
             "A run that did not finish is marked incomplete first.\n", BUNDLE_USAGE);
      return EXIT_OK;
    }
    if (cli_opt(argc, argv, &i, "--out", &out, &err)) { if (err) return usage_err("bundle", BUNDLE_USAGE); continue; }
    if (!strcmp(argv[i], "--json")) { json = true; continue; }
    if (argv[i][0] == '-' || dir) { VERR("unexpected argument '%s'", argv[i]); return usage_err("bundle", BUNDLE_USAGE); }
    dir = argv[i];
  }
  if (!dir) { VERR("missing DIR"); return usage_err("bundle", BUNDLE_USAGE); }
  char used[PATH_MAX + 400], hex[65];
  if (bundle_pack(dir, out, used, sizeof used, hex)) { cli_print_error("bundle"); return EXIT_USAGE; }
  if (json) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "bundle", used);
    cJSON_AddStringToObject(j, "sha256", hex);
    print_json(j);
    cJSON_Delete(j);
  } else {
    printf("%s\nsha256 %s\n", used, hex);
  }
  return EXIT_OK;
}

/* ---------------- verify ---------------- */
static const char *VERIFY_USAGE = "vouch verify FILE|DIR [--json] [--quiet]";

int cmd_verify(int argc, char **argv) {
  const char *path = NULL;
  bool json = false, quiet = false;
  for (int i = 1; i < argc; i++) {
    if (is_help(argv[i])) {
      printf("usage: %s\n\nChecks a bundle or result directory: SHA256SUMS against every file, the shape of\n"
             "manifest.json and results.json, results.json against results.sqlite, and every derived\n"
             "figure (median, p90, stable mean, ratios), status and verdict recomputed from the raw\n"
             "samples, thresholds and checks. Prints each mismatch. Exit 0 when all hold, 1 on any\n"
             "mismatch, 2 when the input cannot be read.\n", VERIFY_USAGE);
      return EXIT_OK;
    }
    if (!strcmp(argv[i], "--json")) { json = true; continue; }
    if (!strcmp(argv[i], "--quiet") || !strcmp(argv[i], "-q")) { quiet = true; continue; }
    if (argv[i][0] == '-' || path) { VERR("unexpected argument '%s'", argv[i]); return usage_err("verify", VERIFY_USAGE); }
    path = argv[i];
  }
  if (!path) { VERR("missing FILE or DIR"); return usage_err("verify", VERIFY_USAGE); }
  vverify_report rep;
  if (verify_path(path, &rep)) { cli_print_error("verify"); return EXIT_USAGE; }
  int np = cJSON_GetArraySize(rep.problems);
  if (json) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "path", path);
    cJSON_AddBoolToObject(j, "ok", np == 0);
    cJSON_AddNumberToObject(j, "records", rep.n_records);
    cJSON_AddNumberToObject(j, "files_hashed", rep.n_files);
    cJSON_AddItemToObject(j, "problems", cJSON_Duplicate(rep.problems, 1));
    print_json(j);
    cJSON_Delete(j);
  } else {
    const cJSON *e;
    cJSON_ArrayForEach(e, rep.problems) printf("MISMATCH %s\n", e->valuestring);
    if (!quiet || np) {
      if (np) printf("FAILED: %s: %d problem(s)\n", path, np);
      else printf("OK: %s: %d records re-derived, %d files hashed%s\n", path, rep.n_records, rep.n_files,
                  rep.hashed ? "" : " (no SHA256SUMS: an unbundled directory)");
    }
  }
  verify_report_free(&rep);
  return np ? EXIT_CHECK_FAILED : EXIT_OK;
}

/* ---------------- compare ---------------- */
static const char *COMPARE_USAGE = "vouch compare BASE CAND [--threshold 0.05] [--json] [--md OUT]";

int cmd_compare(int argc, char **argv) {
  const char *p[2] = {NULL, NULL}, *th = NULL, *md = NULL;
  int np = 0;
  bool json = false;
  vstatus err = V_OK;
  for (int i = 1; i < argc; i++) {
    if (is_help(argv[i])) {
      printf("usage: %s\n\nPairs the cases of two runs (bundles or directories) by suite, case and path.\n"
             "The first line is the verdict. Lists status changes first, then per metric: both values,\n"
             "ratio CAND/BASE, a 95%% bootstrap interval of that figure's ratio (a p90's ratio for a p90;\n"
             "%d resamples, fixed seed) and a verdict (faster/slower, better/worse, same-within-noise,\n"
             "not enough samples: medians and means need %d samples a side, p90 %d, p99 %d). --md OUT\n"
             "writes the same as Markdown (verdict first). Exit 1 when a case newly fails or errors, a\n"
             "metric got worse with its whole interval beyond 1 +- threshold, or CAND is incomplete, has\n"
             "errored cases or lacks cases BASE has.\n",
             COMPARE_USAGE, COMPARE_BOOT_ITERS, compare_min_samples(RD_MEDIAN), compare_min_samples(RD_P90),
             compare_min_samples(RD_P99));
      return EXIT_OK;
    }
    if (cli_opt(argc, argv, &i, "--threshold", &th, &err) || cli_opt(argc, argv, &i, "--md", &md, &err)) {
      if (err) return usage_err("compare", COMPARE_USAGE);
      continue;
    }
    if (!strcmp(argv[i], "--json")) { json = true; continue; }
    if (argv[i][0] == '-' || np == 2) { VERR("unexpected argument '%s'", argv[i]); return usage_err("compare", COMPARE_USAGE); }
    p[np++] = argv[i];
  }
  double thr = 0.05;
  if (th && (cli_double("--threshold", th, &thr) || thr < 0 || thr >= 1)) {
    if (thr < 0 || thr >= 1) VERR("option --threshold: %s is outside [0, 1)", th);
    return usage_err("compare", COMPARE_USAGE);
  }
  if (np != 2) { VERR("need BASE and CAND"); return usage_err("compare", COMPARE_USAGE); }
  vresults a, b;
  if (bundle_load(p[0], &a)) { cli_print_error("compare"); return EXIT_USAGE; }
  if (bundle_load(p[1], &b)) { cli_print_error("compare"); bundle_unload(&a); return EXIT_USAGE; }
  cJSON *cmp = compare_results(&a, &b, thr);
  int rc = compare_failed(cmp) ? EXIT_CHECK_FAILED : EXIT_OK;
  if (json) print_json(cmp);
  else compare_print(cmp, stdout);
  if (md) {
    FILE *f = fopen(md, "wb");
    if (f) compare_markdown(cmp, f, COMPARE_MD_LIMIT);
    if (!f || fclose(f) != 0) { VERR("--md %s: cannot write", md); cli_print_error("compare"); rc = EXIT_USAGE; }
  }
  cJSON_Delete(cmp);
  bundle_unload(&a);
  bundle_unload(&b);
  return rc;
}

/* ---------------- report ---------------- */
static const char *REPORT_USAGE = "vouch report FILE|DIR [--html OUT] [--md OUT] [--bundle-url URL] [--report-url URL]";

static int write_text(const char *path, const char *text) {
  return vfile_write_atomic(path, text, strlen(text), 0644) != V_OK;
}

int cmd_report(int argc, char **argv) {
  const char *path = NULL, *html = NULL, *md = NULL, *url = NULL, *rurl = NULL;
  vstatus err = V_OK;
  for (int i = 1; i < argc; i++) {
    if (is_help(argv[i])) {
      printf("usage: %s\n\nWrites the Markdown report to stdout or --md OUT: one GitHub comment (under %d\n"
             "characters at any plan size) with the verdict, counts per suite, each failing check with its\n"
             "numbers, the speed-up per batch x context with its interval and %% of roofline, eval scores\n"
             "per bin, and what did not run and why; links to the bundle (--bundle-url) and the full\n"
             "report (--report-url). With --html OUT, that full report: a self-contained HTML page with a\n"
             "chart per question (speed-up vs batch, tokens/s and %% roofline vs batch, eval score vs bin,\n"
             "divergence per point) and every record.\n", REPORT_USAGE, REPORT_MD_LIMIT);
      return EXIT_OK;
    }
    if (cli_opt(argc, argv, &i, "--html", &html, &err) || cli_opt(argc, argv, &i, "--md", &md, &err) ||
        cli_opt(argc, argv, &i, "--bundle-url", &url, &err) || cli_opt(argc, argv, &i, "--report-url", &rurl, &err)) {
      if (err) return usage_err("report", REPORT_USAGE);
      continue;
    }
    if (argv[i][0] == '-' || path) { VERR("unexpected argument '%s'", argv[i]); return usage_err("report", REPORT_USAGE); }
    path = argv[i];
  }
  if (!path) { VERR("missing FILE or DIR"); return usage_err("report", REPORT_USAGE); }
  vresults r;
  if (bundle_load(path, &r)) { cli_print_error("report"); return EXIT_USAGE; }
  char *text = NULL, *page = NULL;
  int rc = EXIT_OK;
  report_links links = {.bundle_url = url, .html_url = rurl};
  if (report_markdown(&r, &links, REPORT_MD_LIMIT, &text)) rc = EXIT_USAGE;
  else if (md ? write_text(md, text) : fputs(text, stdout) < 0) rc = EXIT_USAGE;
  if (rc == EXIT_OK && html && (report_html(&r, &page) || write_text(html, page))) rc = EXIT_USAGE;
  if (rc) cli_print_error("report");
  free(text);
  free(page);
  bundle_unload(&r);
  return rc;
}

/* ---------------- publish ---------------- */
static const char *PUBLISH_USAGE =
    "vouch publish FILE|DIR --pr OWNER/REPO#N [--status] [--api-url URL] [--bundle-url URL] [--report-url URL]\n"
    "              [--dry-run]";

int cmd_publish(int argc, char **argv) {
  const char *path = NULL, *pr = NULL, *api = NULL, *url = NULL, *rurl = NULL;
  bool status = false, dry = false;
  vstatus err = V_OK;
  for (int i = 1; i < argc; i++) {
    if (is_help(argv[i])) {
      printf("usage: %s\n\nVerifies the bundle, then creates or updates one comment on the pull request\n"
             "(found again by the hidden marker %s) with the Markdown report (vouch report;\n"
             "--report-url links the HTML report, e.g. the job's artifact), and with\n"
             "--status sets the commit status 'vouch' on the manifest's head SHA (success when the\n"
             "verdict is pass). Token: GITHUB_TOKEN (never printed). --dry-run prints the requests.\n"
             "Retries 5xx and rate limits with backoff (total wait <= VOUCH_PUBLISH_MAX_WAIT s, default 120).\n",
             PUBLISH_USAGE, REPORT_MARKER);
      return EXIT_OK;
    }
    if (cli_opt(argc, argv, &i, "--pr", &pr, &err) || cli_opt(argc, argv, &i, "--api-url", &api, &err) ||
        cli_opt(argc, argv, &i, "--bundle-url", &url, &err) || cli_opt(argc, argv, &i, "--report-url", &rurl, &err)) {
      if (err) return usage_err("publish", PUBLISH_USAGE);
      continue;
    }
    if (!strcmp(argv[i], "--status")) { status = true; continue; }
    if (!strcmp(argv[i], "--dry-run")) { dry = true; continue; }
    if (argv[i][0] == '-' || path) { VERR("unexpected argument '%s'", argv[i]); return usage_err("publish", PUBLISH_USAGE); }
    path = argv[i];
  }
  if (!path || !pr) { VERR("need FILE|DIR and --pr OWNER/REPO#N"); return usage_err("publish", PUBLISH_USAGE); }
  publish_opts o = {0};
  char repo[256];
  if (publish_parse_pr(pr, repo, sizeof repo, &o.pr)) return usage_err("publish", PUBLISH_USAGE);
  vverify_report rep;
  if (verify_path(path, &rep)) { cli_print_error("publish"); return EXIT_USAGE; }
  int np = cJSON_GetArraySize(rep.problems);
  verify_report_free(&rep);
  if (np) {
    fprintf(stderr, "vouch publish: error: %s fails verify (%d problems; run `vouch verify %s`); not publishing\n", path, np, path);
    return EXIT_CHECK_FAILED;
  }
  vresults r;
  if (bundle_load(path, &r)) { cli_print_error("publish"); return EXIT_USAGE; }
  char *body = NULL;
  int rc = EXIT_OK;
  report_links links = {.bundle_url = url, .html_url = rurl};
  if (report_markdown(&r, &links, REPORT_MD_LIMIT, &body)) {
    cli_print_error("publish");
    bundle_unload(&r);
    return EXIT_USAGE;
  }
  o.api_url = api;
  o.repo = repo;
  o.body = body;
  o.status = status;
  o.head_sha = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r.manifest, "subject"), "head_sha"));
  o.verdict = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r.results, "verdict"));
  o.target_url = url;
  o.dry_run = dry;
  o.out = stdout;
  char html_url[1024];
  if (publish_run(&o, html_url, sizeof html_url)) {
    cli_print_error("publish");
    rc = EXIT_CHECK_FAILED;
  }
  free(body);
  bundle_unload(&r);
  return rc;
}

/* ---------------- history ---------------- */
static const char *HISTORY_USAGE =
    "vouch history [--db PATH] [--plan P] [--metric M] [--limit N] [--json]\n"
    "       vouch history baseline --plan P --hardware H [--base REV] [--repo DIR] [--db PATH] [--json]";

static const char *col(sqlite3_stmt *st, int i) {
  const char *v = (const char *)sqlite3_column_text(st, i);
  return v ? v : "";
}

int cmd_history(int argc, char **argv) {
  const char *db = NULL, *plan = NULL, *metric = NULL, *hw = NULL, *base = NULL, *lim = NULL, *repo = NULL;
  bool json = false, baseline = false;
  vstatus err = V_OK;
  for (int i = 1; i < argc; i++) {
    if (is_help(argv[i])) {
      printf("usage: %s\n\nLists past runs from the local history store (VOUCH_HISTORY_DB, default\n"
             "~/.local/share/vouch/history.sqlite; every finished run adds a row). --metric M lists\n"
             "that metric across runs. `baseline` prints the BASE for `vouch compare` (the run's bundle if\n"
             "one was made, else its directory): a finished run that was not a pull request's, of the same\n"
             "plan content (P: a built-in plan, a plan file or its sha256; runs are matched by the hash of\n"
             "the plan text) and hardware, whose head is the base commit REV or, failing that, its nearest\n"
             "ancestor in the repository at --repo (default .); the newest such run first. Says on stderr\n"
             "(--json: \"why\") why it picked that run and what it skipped. Exit 1 when no run matches.\n",
             HISTORY_USAGE);
      return EXIT_OK;
    }
    if (cli_opt(argc, argv, &i, "--db", &db, &err) || cli_opt(argc, argv, &i, "--plan", &plan, &err) ||
        cli_opt(argc, argv, &i, "--metric", &metric, &err) || cli_opt(argc, argv, &i, "--hardware", &hw, &err) ||
        cli_opt(argc, argv, &i, "--base", &base, &err) || cli_opt(argc, argv, &i, "--limit", &lim, &err) ||
        cli_opt(argc, argv, &i, "--repo", &repo, &err)) {
      if (err) return usage_err("history", HISTORY_USAGE);
      continue;
    }
    if (!strcmp(argv[i], "--json")) { json = true; continue; }
    if (!strcmp(argv[i], "baseline") && !baseline) { baseline = true; continue; }
    VERR("unexpected argument '%s'", argv[i]);
    return usage_err("history", HISTORY_USAGE);
  }
  long limit = 50;
  if (lim && cli_int("--limit", lim, 1, 1000000, &limit)) return usage_err("history", HISTORY_USAGE);
  if (baseline && (!plan || !hw)) { VERR("baseline needs --plan and --hardware"); return usage_err("history", HISTORY_USAGE); }
  if (baseline) {
    history_query q = {.plan = plan, .hardware = hw, .base = base, .repo = repo};
    cJSON *b = NULL;
    if (history_baseline(db, &q, &b)) { cli_print_error("history"); return EXIT_USAGE; }
    bool found = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "found"));
    if (json) print_json(b);
    else {
      if (found) printf("%s\n", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(b, "path")));
      fprintf(stderr, "vouch history: %s\n", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(b, "why")));
    }
    cJSON_Delete(b);
    return found ? EXIT_OK : EXIT_CHECK_FAILED;
  }
  void *hv;
  if (history_open(db, false, &hv)) { cli_print_error("history"); return EXIT_USAGE; }
  sqlite3 *h = hv;
  sqlite3_stmt *st = NULL;
  const char *sql;
  if (metric)
    sql = "SELECT r.id, r.ended_at, r.plan, m.suite, m.case_id, m.path, m.value, m.unit, coalesce(r.head_sha,'') FROM run_metrics m "
          "JOIN runs r ON r.id = m.run_id WHERE m.metric = ?4 AND (?1 IS NULL OR r.plan = ?1) ORDER BY r.id DESC, m.rowid LIMIT ?5";
  else
    sql = "SELECT id, ended_at, plan, hardware, coalesce(head_sha,''), verdict, n_records, run_dir, coalesce(bundle,'') FROM runs "
          "WHERE (?1 IS NULL OR plan = ?1) ORDER BY id DESC LIMIT ?5";
  if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK) {
    VERR("history: %s", sqlite3_errmsg(h));
    cli_print_error("history");
    sqlite3_close(h);
    return EXIT_USAGE;
  }
  if (plan) sqlite3_bind_text(st, 1, plan, -1, SQLITE_STATIC);
  if (metric) sqlite3_bind_text(st, 4, metric, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 5, limit);
  cJSON *arr = cJSON_CreateArray();
  while (sqlite3_step(st) == SQLITE_ROW) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "run_id", (double)sqlite3_column_int64(st, 0));
    if (metric) {
      cJSON_AddStringToObject(o, "ended_at", col(st, 1));
      cJSON_AddStringToObject(o, "plan", col(st, 2));
      cJSON_AddStringToObject(o, "suite", col(st, 3));
      cJSON_AddStringToObject(o, "case_id", col(st, 4));
      cJSON_AddStringToObject(o, "path", col(st, 5));
      if (sqlite3_column_type(st, 6) == SQLITE_NULL) cJSON_AddNullToObject(o, "value");
      else cJSON_AddNumberToObject(o, "value", sqlite3_column_double(st, 6));
      cJSON_AddStringToObject(o, "unit", col(st, 7));
      if (!json)
        printf("%-5lld %-20s %-10s %s/%s [%s] %s = %.6g %s\n", (long long)sqlite3_column_int64(st, 0), col(st, 1),
               col(st, 8)[0] ? col(st, 8) : "-", col(st, 3), col(st, 4), col(st, 5), metric, sqlite3_column_double(st, 6), col(st, 7));
    } else {
      cJSON_AddStringToObject(o, "ended_at", col(st, 1));
      cJSON_AddStringToObject(o, "plan", col(st, 2));
      cJSON_AddStringToObject(o, "hardware", col(st, 3));
      cJSON_AddStringToObject(o, "head_sha", col(st, 4));
      cJSON_AddStringToObject(o, "verdict", col(st, 5));
      cJSON_AddNumberToObject(o, "records", sqlite3_column_int(st, 6));
      cJSON_AddStringToObject(o, "run_dir", col(st, 7));
      cJSON_AddStringToObject(o, "bundle", col(st, 8));
      if (!json)
        printf("%-5lld %-20s %-10s %-10s %.12s %-40s %-4d %s\n", (long long)sqlite3_column_int64(st, 0), col(st, 1), col(st, 2),
               col(st, 5), col(st, 4)[0] ? col(st, 4) : "-", col(st, 3), sqlite3_column_int(st, 6),
               col(st, 8)[0] ? col(st, 8) : col(st, 7));
    }
    cJSON_AddItemToArray(arr, o);
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  if (json) print_json(arr);
  cJSON_Delete(arr);
  return EXIT_OK;
}
