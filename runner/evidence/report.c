/* The Markdown report: what a reviewer reads in 30 seconds, at any plan size. Every section
 * has a fixed number of rows at most, so the comment stays under the limit whether the run
 * has 40 records or 40,000; the rest is in the HTML report and the bundle, linked at the top. */
#include "runner/evidence/report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/evidence/manifest.h"
#include "runner/evidence/report_aime.h"
#include "runner/evidence/report_coverage.h"
#include "runner/evidence/report_ran.h"
#include "runner/evidence/report_speed.h"
#include "runner/evidence/report_text.h"

#define MD_FAIL_ROWS 25    /* failing checks listed */
#define MD_SPEED_TABLES 4  /* speed-up tables (candidate path x workload) */
#define MD_AXIS 12         /* batches (rows) and contexts (columns) per table */
#define MD_EVAL_ROWS 12    /* eval (kind, path) rows */
#define MD_SKIP_ROWS 10    /* distinct reasons of what did not run */

static const char *verdict_badge(const char *v) {
  if (!strcmp(v, "pass")) return "PASS ✅";
  if (!strcmp(v, "fail")) return "FAIL ❌";
  return "INCOMPLETE ⚠️";
}

static void header_md(sbuf *b, const vresults *r, const report_links *l) {
  const cJSON *m = r->manifest;
  const char *verdict = rt_str(r->results, "verdict", NULL);
  sb_add(b, "%s\n## vouch: %s\n\n", REPORT_MARKER, verdict_badge(verdict));
  const cJSON *subj = cJSON_GetObjectItemCaseSensitive(m, "subject");
  const cJSON *pr = cJSON_GetObjectItemCaseSensitive(subj, "pr");
  const cJSON *dirty = cJSON_GetObjectItemCaseSensitive(subj, "dirty");
  sb_add(b, "**Subject:** ");
  sb_md_cell(b, rt_str(subj, "repo", NULL)[0] ? rt_str(subj, "repo", NULL) : "(no repository)");
  if (cJSON_IsNumber(pr)) sb_add(b, " PR #%d", pr->valueint);
  if (rt_str(subj, "head_sha", NULL)[0]) sb_add(b, " head `%.12s`", rt_str(subj, "head_sha", NULL));
  if (rt_str(subj, "base_sha", NULL)[0]) sb_add(b, " base `%.12s`", rt_str(subj, "base_sha", NULL));
  if (cJSON_IsTrue(dirty)) sb_add(b, " (uncommitted changes, diff sha256 `%.12s`)", rt_str(subj, "diff_sha256", NULL));
  sb_add(b, "  \n**Hardware:** ");
  sb_md_cell(b, manifest_hardware_key(m));
  sb_add(b, "  \n**Plan:** `");
  sb_md_cell(b, rt_str(m, "plan", "name"));
  sb_add(b, "` (sha256 `%.12s`) · **vouch** %s (`%.12s`) · %s → %s\n", rt_str(m, "plan", "sha256"),
         rt_str(m, "tool", "version"), rt_str(m, "tool", "commit"), rt_str(m, "started_at", NULL),
         rt_str(m, "ended_at", NULL)[0] ? rt_str(m, "ended_at", NULL) : "(not finished)");
  if (l && l->html_url && *l->html_url) sb_add(b, "\n**Full report (charts, every record):** %s\n", l->html_url);
  if (l && l->bundle_url && *l->bundle_url) sb_add(b, "\n**Bundle:** %s — check it with `vouch verify`\n", l->bundle_url);
  sb_add(b, "\n");
}

static void counts_md(sbuf *b, const vresults *r) {
  const char *suites[64];
  int ns = rt_suites(r, suites, 64);
  sb_add(b, "| suite | pass | fail | undecided | not supported | error | not run |\n|---|---:|---:|---:|---:|---:|---:|\n");
  for (int s = 0; s < ns; s++) {
    int c[REC_STATUS_N] = {0};
    for (int i = 0; i < r->n; i++)
      if (!strcmp(r->recs[i]->suite, suites[s])) c[r->recs[i]->status]++;
    sb_add(b, "| ");
    sb_md_cell(b, suites[s]);
    sb_add(b, " | %d | %d | %d | %d | %d | %d |\n", c[REC_PASS], c[REC_FAIL], c[REC_UNDECIDED], c[REC_NOT_SUPPORTED],
           c[REC_ERROR], c[REC_NOT_RUN]);
  }
}

/* The failing check with its numbers: the threshold (value vs bound) and the reason. */
static void failure_md(sbuf *b, const vrecord *x) {
  sb_add(b, "| ");
  sb_md_cell(b, x->suite);
  sb_add(b, " | `%.100s%s` | ", x->case_id, strlen(x->case_id) > 100 ? "…" : "");
  sb_md_cell(b, x->path);
  sb_add(b, " | %s | ", rec_status_name(x->status));
  if (x->has_threshold) {
    const rec_metric *m = rec_metric_find(x, x->th_metric);
    sb_add(b, "%s = %.4g (bound %s %.4g)%s", x->th_metric, m ? m->value : NAN, x->th_op, x->th_bound, x->reason[0] ? "; " : "");
  }
  char why[200];
  snprintf(why, sizeof why, "%.180s%s", x->reason, strlen(x->reason) > 180 ? "…" : "");
  sb_md_cell(b, why);
  sb_add(b, " |\n");
}

static void failures_md(sbuf *b, const vresults *r, const report_links *l) {
  int nf = 0, shown = 0;
  for (int i = 0; i < r->n; i++) nf += r->recs[i]->status == REC_FAIL || r->recs[i]->status == REC_ERROR;
  if (!nf) return;
  sb_add(b, "\n### What failed (%d)\n\n| suite | case | path | status | check |\n|---|---|---|---|---|\n", nf);
  for (int i = 0; i < r->n && shown < MD_FAIL_ROWS; i++) {
    const vrecord *x = r->recs[i];
    if (x->status != REC_FAIL && x->status != REC_ERROR) continue;
    failure_md(b, x);
    shown++;
  }
  if (shown < nf) sb_add(b, "\n…and %d more failing cases in the %s.\n", nf - shown, l && l->html_url ? "full report" : "bundle");
}

typedef struct {
  const char *path;     /* candidate path */
  const char *workload; /* "decode", "prefill", ... */
} speed_key;

static bool speed_rec(const vrecord *x, const void *ctx) {
  const speed_key *k = ctx;
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(x->params, "workload");
  return !strcmp(x->suite, "sweep") && !strcmp(x->path, k->path) && isfinite(rt_metric(x, "speedup")) &&
         (!k->workload || (cJSON_IsString(w) && !strcmp(w->valuestring, k->workload)));
}

/* One table: rows batch, columns context; a cell "1.23x [1.10, 1.35] · 45% roofline"
 * (the first record of that point: round 1). */
static void speed_table(sbuf *b, const vresults *r, const speed_key *k, const char *base) {
  double bs[MD_AXIS], cs[MD_AXIS];
  int nb = rt_distinct(r, "batch", speed_rec, k, bs, MD_AXIS), nc = rt_distinct(r, "context", speed_rec, k, cs, MD_AXIS);
  if (!nb) return;
  if (!nc) cs[nc++] = NAN;
  sb_add(b, "\n**`");
  sb_md_cell(b, k->path);
  sb_add(b, "` over `");
  sb_md_cell(b, base);
  sb_add(b, "`%s%s** (speed-up, 95%% interval, %% of roofline)\n\n| batch |", k->workload ? ", " : "", k->workload ? k->workload : "");
  for (int c = 0; c < nc; c++) {
    char t[24];
    rt_ctx_text(cs[c], t, sizeof t);
    sb_add(b, " ctx %s |", isfinite(cs[c]) ? t : "-");
  }
  sb_add(b, "\n|---:|");
  for (int c = 0; c < nc; c++) sb_add(b, "---|");
  sb_add(b, "\n");
  for (int i = 0; i < nb; i++) {
    sb_add(b, "| %g |", bs[i]);
    for (int c = 0; c < nc; c++) {
      const vrecord *hit = NULL;
      for (int j = 0; j < r->n && !hit; j++) {
        double bv, cv;
        const vrecord *x = r->recs[j];
        if (speed_rec(x, k) && rt_param(x, "batch", &bv) && bv == bs[i] &&
            (!isfinite(cs[c]) || (rt_param(x, "context", &cv) && cv == cs[c])))
          hit = x;
      }
      if (!hit) { sb_add(b, " |"); continue; }
      double rf = rt_metric(hit, "roofline_pct");
      sb_add(b, " %.2fx [%.2f, %.2f]", rt_metric(hit, "speedup"), rt_metric(hit, "speedup_ci95_lo"), rt_metric(hit, "speedup_ci95_hi"));
      if (isfinite(rf)) sb_add(b, " · %.0f%%", rf);
      sb_add(b, " |");
    }
    sb_add(b, "\n");
  }
}

static void speedups_md(sbuf *b, const vresults *r) {
  const char *base = rt_sweep_base(r);
  if (!base) return;
  speed_key keys[MD_SPEED_TABLES];
  int nk = 0, more = 0;
  for (int i = 0; i < r->n; i++) {
    const vrecord *x = r->recs[i];
    if (strcmp(x->suite, "sweep") || !strcmp(x->path, base) || !isfinite(rt_metric(x, "speedup"))) continue;
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(x->params, "workload");
    speed_key k = {x->path, cJSON_IsString(w) ? w->valuestring : NULL};
    int j;
    for (j = 0; j < nk; j++)
      if (!strcmp(keys[j].path, k.path) && (keys[j].workload == k.workload ||
                                             (keys[j].workload && k.workload && !strcmp(keys[j].workload, k.workload))))
        break;
    if (j < nk) continue;
    if (nk < MD_SPEED_TABLES) keys[nk++] = k;
    else more++;
  }
  if (!nk) return;
  sb_add(b, "\n### Speed-up (interleaved in the same run)\n");
  for (int j = 0; j < nk; j++) speed_table(b, r, &keys[j], base);
  if (more) sb_add(b, "\n…%d more path/workload tables in the full report.\n", more);
}

/* Eval scores: rows (eval, path), columns the context bin (MRCR) or hop count (chain). */
typedef struct {
  char kind[32];    /* "mrcr", "chain": the case id up to its first '_' or '/' */
  const char *path;
  const char *axis; /* "bin", "hops", "context" or "bin_lo" (a served eval's bins) */
} eval_key;

static bool eval_rec(const vrecord *x, const void *ctx) {
  const eval_key *k = ctx;
  double v;
  size_t n = strlen(k->kind);
  return !strcmp(x->suite, "evals") && !strcmp(x->path, k->path) && !strncmp(x->case_id, k->kind, n) &&
         (x->case_id[n] == '_' || x->case_id[n] == '/') && rt_param(x, k->axis, &v) && isfinite(rt_metric(x, "score"));
}

static void evals_md(sbuf *b, const vresults *r) {
  eval_key keys[MD_EVAL_ROWS];
  int nk = 0, more = 0;
  for (int i = 0; i < r->n; i++) {
    const vrecord *x = r->recs[i];
    double v;
    if (strcmp(x->suite, "evals") || !isfinite(rt_metric(x, "score"))) continue;
    /* a served eval (eval mrcr --dataset --server, each side a path of its own) names its bins as text,
     * "2k", with the numeric lower edge bin_lo beside */
    const char *axis = rt_param(x, "bin", &v) ? "bin" : rt_param(x, "hops", &v) ? "hops"
                       : rt_param(x, "context", &v) ? "context" : rt_param(x, "bin_lo", &v) ? "bin_lo" : NULL;
    if (!axis) continue;
    eval_key k = {.path = x->path, .axis = axis};
    size_t u = strcspn(x->case_id, "_/");
    snprintf(k.kind, sizeof k.kind, "%.*s", (int)(u < sizeof k.kind ? u : sizeof k.kind - 1), x->case_id);
    int j;
    for (j = 0; j < nk; j++)
      if (!strcmp(keys[j].kind, k.kind) && !strcmp(keys[j].path, k.path)) break;
    if (j < nk) continue;
    if (nk < MD_EVAL_ROWS) keys[nk++] = k;
    else more++;
  }
  if (!nk) return;
  sb_add(b, "\n### Eval scores per bin (mean over needles/samples; worst status)\n");
  for (int j = 0; j < nk; j++) {
    if (j == 0 || strcmp(keys[j].kind, keys[j - 1].kind) || strcmp(keys[j].axis, keys[j - 1].axis)) {
      double xs[MD_AXIS];
      int nx = rt_distinct(r, keys[j].axis, eval_rec, &keys[j], xs, MD_AXIS);
      sb_add(b, "\n| %s | path |", keys[j].kind);
      for (int c = 0; c < nx; c++) {
        char t[24];
        rt_ctx_text(xs[c], t, sizeof t);
        sb_add(b, " %s %s |", strcmp(keys[j].axis, "bin_lo") ? keys[j].axis : "bin from", t);
      }
      sb_add(b, "\n|---|---|");
      for (int c = 0; c < nx; c++) sb_add(b, "---:|");
      sb_add(b, "\n");
    }
    double xs[MD_AXIS];
    int nx = rt_distinct(r, keys[j].axis, eval_rec, &keys[j], xs, MD_AXIS);
    sb_add(b, "| %s | ", keys[j].kind);
    sb_md_cell(b, keys[j].path);
    sb_add(b, " |");
    for (int c = 0; c < nx; c++) {
      double sum = 0, v;
      int n = 0, bad = 0;
      for (int i = 0; i < r->n; i++) {
        const vrecord *x = r->recs[i];
        if (!eval_rec(x, &keys[j]) || !rt_param(x, keys[j].axis, &v) || v != xs[c]) continue;
        sum += rt_metric(x, "score");
        n++;
        bad += x->status == REC_FAIL || x->status == REC_ERROR;
      }
      if (n) sb_add(b, " %.3f%s |", sum / n, bad ? " ❌" : "");
      else sb_add(b, " |");
    }
    sb_add(b, "\n");
  }
  if (more) sb_add(b, "\n…%d more eval rows in the full report.\n", more);
}

/* What did not run or decide, and why: undecided / not supported / not run / error, grouped by reason. */
static void skipped_md(sbuf *b, const vresults *r) {
  const vrecord *first[MD_SKIP_ROWS];
  int count[MD_SKIP_ROWS], nk = 0, total = 0, other = 0;
  for (int i = 0; i < r->n; i++) {
    const vrecord *x = r->recs[i];
    if (x->status != REC_NOT_SUPPORTED && x->status != REC_NOT_RUN && x->status != REC_ERROR &&
        x->status != REC_UNDECIDED)
      continue;
    total++;
    int j;
    for (j = 0; j < nk; j++)
      if (first[j]->status == x->status && !strcmp(first[j]->reason, x->reason)) break;
    if (j < nk) count[j]++;
    else if (nk < MD_SKIP_ROWS) { first[nk] = x; count[nk++] = 1; }
    else other++;
  }
  if (!total) return;
  sb_add(b, "\n### Did not run or decide (%d)\n\n| status | cases | e.g. | reason |\n|---|---:|---|---|\n", total);
  for (int j = 0; j < nk; j++) {
    char why[200];
    snprintf(why, sizeof why, "%.180s%s", first[j]->reason, strlen(first[j]->reason) > 180 ? "…" : "");
    sb_add(b, "| %s | %d | `%.80s` ", rec_status_name(first[j]->status), count[j], first[j]->case_id);
    sb_md_cell(b, first[j]->path);
    sb_add(b, " | ");
    sb_md_cell(b, why[0] ? why : "(no reason given)");
    sb_add(b, " |\n");
  }
  if (other) sb_add(b, "\n…%d more cases with other reasons in the full report.\n", other);
}

vstatus report_markdown(const vresults *r, const report_links *links, size_t limit, char **out) {
  *out = NULL;
  sbuf b = {0};
  header_md(&b, r, links);
  if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r->results, "complete")))
    sb_add(&b, "> **The run did not finish**: the cases below are what it reached; a missing case is not a pass.\n\n");
  counts_md(&b, r);
  coverage_summary_md(&b, r);
  failures_md(&b, r, links);
  speedups_md(&b, r);
  served_ab_md(&b, r);
  evals_md(&b, r);
  aime_md(&b, r);
  ran_md(&b, r);
  coverage_md(&b, r);
  skipped_md(&b, r);
  sb_add(&b, "\n<sub>Generated by vouch from %d records%s. Every figure is recomputed from raw samples by `vouch "
         "verify`.</sub>\n", r->n, links && links->html_url ? "; every record and chart is in the full report" : "");
  if (b.oom) { free(b.p); return VERR("report: out of memory"); }
  if (b.n >= limit) { /* each section has a fixed row cap: only a tiny limit gets here */
    free(b.p);
    return VERR("report: markdown is %zu characters, over the %zu limit", b.n, limit);
  }
  *out = b.p;
  return V_OK;
}
