#include "runner/report.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/manifest.h"

typedef struct {
  char *p;      /* text, NUL-terminated */
  size_t n;     /* length */
  size_t cap;   /* allocated */
  int oom;      /* an allocation failed */
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(sbuf *b, const char *fmt, ...) {
  if (b->oom) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (k < 0) return;
  if (b->n + (size_t)k + 1 > b->cap) {
    size_t cap = (b->cap ? b->cap : 4096);
    while (cap < b->n + (size_t)k + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) { b->oom = 1; return; }
    b->p = p;
    b->cap = cap;
  }
  va_start(ap, fmt);
  vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
  va_end(ap);
  b->n += (size_t)k;
}

static const char *js(const cJSON *o, const char *path1, const char *path2) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, path1);
  if (path2) v = cJSON_GetObjectItemCaseSensitive(v, path2);
  return cJSON_IsString(v) ? v->valuestring : "";
}

/* Markdown table cells: no pipes or newlines. */
static void md_cell(sbuf *b, const char *s) {
  for (; *s; s++) {
    if (*s == '|') sb_add(b, "\\|");
    else if (*s == '\n' || *s == '\r') sb_add(b, " ");
    else if (*s == '<') sb_add(b, "&lt;");
    else sb_add(b, "%c", *s);
  }
}

static void html_text(sbuf *b, const char *s) {
  for (; *s; s++) {
    switch (*s) {
    case '<': sb_add(b, "&lt;"); break;
    case '>': sb_add(b, "&gt;"); break;
    case '&': sb_add(b, "&amp;"); break;
    case '"': sb_add(b, "&quot;"); break;
    default: sb_add(b, "%c", *s);
    }
  }
}

static void params_text(const vrecord *r, char *out, size_t cap) {
  size_t n = 0;
  out[0] = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, r->params) {
    char v[64];
    if (cJSON_IsNumber(e)) snprintf(v, sizeof v, "%.10g", e->valuedouble);
    else if (cJSON_IsString(e)) snprintf(v, sizeof v, "%s", e->valuestring);
    else if (cJSON_IsBool(e)) snprintf(v, sizeof v, "%s", cJSON_IsTrue(e) ? "true" : "false");
    else continue;
    int k = snprintf(out + n, cap - n, "%s%s=%s", n ? " " : "", e->string, v);
    if (k < 0 || (size_t)k >= cap - n) break;
    n += (size_t)k;
  }
}

static void metrics_text(const vrecord *r, char *out, size_t cap) {
  size_t n = 0;
  out[0] = 0;
  for (int i = 0; i < r->n_metrics; i++) {
    const rec_metric *m = &r->metrics[i];
    int k = snprintf(out + n, cap - n, "%s%s=%.4g%s%s", n ? ", " : "", m->name, m->value, m->unit[0] ? " " : "", m->unit);
    if (k < 0 || (size_t)k >= cap - n) break;
    n += (size_t)k;
  }
}

static const char *verdict_badge(const char *v) {
  if (!strcmp(v, "pass")) return "PASS ✅";
  if (!strcmp(v, "fail")) return "FAIL ❌";
  return "INCOMPLETE ⚠️";
}

/* Distinct suites in first-seen order. */
static int suites_of(const vresults *r, const char **out, int cap) {
  int n = 0;
  for (int i = 0; i < r->n; i++) {
    int k;
    for (k = 0; k < n; k++)
      if (!strcmp(out[k], r->recs[i]->suite)) break;
    if (k == n && n < cap) out[n++] = r->recs[i]->suite;
  }
  return n;
}

static void header_md(sbuf *b, const vresults *r, const char *bundle_url) {
  const cJSON *m = r->manifest;
  const char *verdict = js(r->results, "verdict", NULL);
  sb_add(b, "%s\n## vouch: %s\n\n", REPORT_MARKER, verdict_badge(verdict));
  const cJSON *subj = cJSON_GetObjectItemCaseSensitive(m, "subject");
  const cJSON *pr = cJSON_GetObjectItemCaseSensitive(subj, "pr");
  const cJSON *dirty = cJSON_GetObjectItemCaseSensitive(subj, "dirty");
  sb_add(b, "**Subject:** ");
  md_cell(b, js(subj, "repo", NULL)[0] ? js(subj, "repo", NULL) : "(no repository)");
  if (cJSON_IsNumber(pr)) sb_add(b, " PR #%d", pr->valueint);
  if (js(subj, "head_sha", NULL)[0]) sb_add(b, " head `%.12s`", js(subj, "head_sha", NULL));
  if (js(subj, "base_sha", NULL)[0]) sb_add(b, " base `%.12s`", js(subj, "base_sha", NULL));
  if (cJSON_IsTrue(dirty)) sb_add(b, " (uncommitted changes, diff sha256 `%.12s`)", js(subj, "diff_sha256", NULL));
  sb_add(b, "  \n**Hardware:** ");
  md_cell(b, manifest_hardware_key(m));
  sb_add(b, "  \n**Plan:** `");
  md_cell(b, js(m, "plan", "name"));
  sb_add(b, "` (sha256 `%.12s`) · **vouch** %s (`%.12s`) · %s → %s\n", js(m, "plan", "sha256"), js(m, "tool", "version"),
         js(m, "tool", "commit"), js(m, "started_at", NULL), js(m, "ended_at", NULL)[0] ? js(m, "ended_at", NULL) : "(not finished)");
  if (bundle_url && *bundle_url) sb_add(b, "\n**Bundle:** %s — check it with `vouch verify`\n", bundle_url);
  sb_add(b, "\n");
}

vstatus report_markdown(const vresults *r, const char *bundle_url, size_t limit, char **out) {
  *out = NULL;
  sbuf b = {0};
  header_md(&b, r, bundle_url);
  const char *suites[64];
  int ns = suites_of(r, suites, 64);
  sb_add(&b, "| suite | pass | fail | not supported | error | not run |\n|---|---:|---:|---:|---:|---:|\n");
  for (int s = 0; s < ns; s++) {
    int c[REC_STATUS_N] = {0};
    for (int i = 0; i < r->n; i++)
      if (!strcmp(r->recs[i]->suite, suites[s])) c[r->recs[i]->status]++;
    sb_add(&b, "| ");
    md_cell(&b, suites[s]);
    sb_add(&b, " | %d | %d | %d | %d | %d |\n", c[0], c[1], c[2], c[3], c[4]);
  }
  const char *foot = "\n<sub>Generated by vouch. Every figure is recomputed from raw samples by `vouch verify`.</sub>\n";
  size_t reserve = strlen(foot) + 200;
  /* failures first: what a reviewer must look at */
  int nf = 0;
  for (int i = 0; i < r->n; i++) nf += r->recs[i]->status == REC_FAIL || r->recs[i]->status == REC_ERROR;
  if (nf) {
    sb_add(&b, "\n### Failures (%d)\n\n| suite | case | path | status | reason |\n|---|---|---|---|---|\n", nf);
    int shown = 0;
    for (int i = 0; i < r->n; i++) {
      const vrecord *x = r->recs[i];
      if (x->status != REC_FAIL && x->status != REC_ERROR) continue;
      if (b.n + 600 + reserve > limit / 2) break;
      sb_add(&b, "| ");
      md_cell(&b, x->suite); sb_add(&b, " | `"); md_cell(&b, x->case_id); sb_add(&b, "` | ");
      md_cell(&b, x->path); sb_add(&b, " | %s | ", rec_status_name(x->status)); md_cell(&b, x->reason);
      sb_add(&b, " |\n");
      shown++;
    }
    if (shown < nf) sb_add(&b, "\n…and %d more failures (see the bundle).\n", nf - shown);
  }
  char ptxt[512], mtxt[1024];
  for (int s = 0; s < ns; s++) {
    int n = 0;
    for (int i = 0; i < r->n; i++) n += !strcmp(r->recs[i]->suite, suites[s]);
    sb_add(&b, "\n<details><summary>");
    html_text(&b, suites[s]);
    sb_add(&b, " (%d cases)</summary>\n\n| case | path | params | status | metrics |\n|---|---|---|---|---|\n", n);
    int shown = 0;
    for (int i = 0; i < r->n; i++) {
      const vrecord *x = r->recs[i];
      if (strcmp(x->suite, suites[s])) continue;
      params_text(x, ptxt, sizeof ptxt);
      metrics_text(x, mtxt, sizeof mtxt);
      if (b.n + strlen(ptxt) + strlen(mtxt) + strlen(x->case_id) + 200 + reserve + 40 * (ns - s) > limit) break;
      sb_add(&b, "| `"); md_cell(&b, x->case_id); sb_add(&b, "` | "); md_cell(&b, x->path); sb_add(&b, " | ");
      md_cell(&b, ptxt); sb_add(&b, " | %s | ", rec_status_name(x->status)); md_cell(&b, mtxt); sb_add(&b, " |\n");
      shown++;
    }
    if (shown < n) sb_add(&b, "\n…%d more rows of this suite are in the bundle (comment size limit).\n", n - shown);
    sb_add(&b, "\n</details>\n");
  }
  sb_add(&b, "%s", foot);
  if (b.oom) { free(b.p); return VERR("report: out of memory"); }
  if (b.n >= limit) { free(b.p); return VERR("report: markdown is %zu characters, over the %zu limit", b.n, limit); }
  *out = b.p;
  return V_OK;
}

/* ---------------- HTML + SVG ---------------- */

static const char *const k_colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};
static const char *const k_axes[] = {"batch", "context", "ctx", "context_len", "seq_len", "tp", "depth"};

static bool param_num(const vrecord *r, const char *k, double *v) {
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(r->params, k);
  if (!cJSON_IsNumber(p)) return false;
  *v = p->valuedouble;
  return true;
}

typedef struct {
  double x, y;   /* one point */
  int series;    /* index into names */
} pt;

static int cmp_pt(const void *a, const void *b) {
  const pt *p = a, *q = b;
  if (p->series != q->series) return p->series - q->series;
  return (p->x > q->x) - (p->x < q->x);
}

static double map_lin(double v, double lo, double hi, double a, double b) {
  return hi > lo ? a + (v - lo) / (hi - lo) * (b - a) : 0.5 * (a + b);
}

/* One line chart: y = metric, x = axis param, a series per path. */
static void svg_line(sbuf *b, const char *title, const char *xlab, const char *ylab, pt *p, int n,
                     const char **names, int nn) {
  const double W = 560, H = 300, L = 60, R = 130, T = 30, B = 40;
  double x0 = INFINITY, x1 = -INFINITY, y0 = 0, y1 = -INFINITY;
  bool logx = true;
  for (int i = 0; i < n; i++) {
    x0 = fmin(x0, p[i].x); x1 = fmax(x1, p[i].x);
    y0 = fmin(y0, p[i].y); y1 = fmax(y1, p[i].y);
    if (p[i].x <= 0) logx = false;
  }
  if (logx && x1 / x0 < 8) logx = false;
  if (y1 <= y0) y1 = y0 + 1;
  qsort(p, (size_t)n, sizeof *p, cmp_pt);
#define XP(v) map_lin(logx ? log2(v) : (v), logx ? log2(x0) : x0, logx ? log2(x1) : x1, L, W - R)
#define YP(v) map_lin((v), y0, y1, H - B, T)
  sb_add(b, "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\">",
         W, H, W, H);
  sb_add(b, "<text x=\"%.0f\" y=\"18\" class=\"t\">", L); html_text(b, title); sb_add(b, "</text>");
  sb_add(b, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" class=\"ax\"/>", L, H - B, W - R, H - B);
  sb_add(b, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" class=\"ax\"/>", L, T, L, H - B);
  for (int k = 0; k <= 4; k++) {
    double v = y0 + (y1 - y0) * k / 4;
    sb_add(b, "<text x=\"%.0f\" y=\"%.1f\" class=\"l\" text-anchor=\"end\">%.3g</text>", L - 4, YP(v) + 4, v);
    sb_add(b, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" class=\"g\"/>", L, YP(v), W - R, YP(v));
  }
  /* x ticks at the distinct x values (at most 12) */
  double seen[12];
  int ns = 0;
  for (int i = 0; i < n && ns < 12; i++) {
    int k;
    for (k = 0; k < ns; k++) if (seen[k] == p[i].x) break;
    if (k < ns) continue;
    seen[ns++] = p[i].x;
    sb_add(b, "<text x=\"%.1f\" y=\"%.0f\" class=\"l\" text-anchor=\"middle\">%.6g</text>", XP(p[i].x), H - B + 14, p[i].x);
  }
  sb_add(b, "<text x=\"%.0f\" y=\"%.0f\" class=\"l\" text-anchor=\"middle\">", (L + W - R) / 2, H - 6); html_text(b, xlab);
  sb_add(b, "</text><text x=\"12\" y=\"%.0f\" class=\"l\" transform=\"rotate(-90 12 %.0f)\" text-anchor=\"middle\">", (T + H - B) / 2, (T + H - B) / 2);
  html_text(b, ylab); sb_add(b, "</text>");
  for (int s = 0; s < nn; s++) {
    const char *col = k_colors[s % 8];
    sb_add(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col);
    for (int i = 0; i < n; i++) if (p[i].series == s) sb_add(b, "%.1f,%.1f ", XP(p[i].x), YP(p[i].y));
    sb_add(b, "\"/>");
    for (int i = 0; i < n; i++)
      if (p[i].series == s) {
        sb_add(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>", XP(p[i].x), YP(p[i].y), col);
        html_text(b, names[s]);
        sb_add(b, ": %.6g at %.6g</title></circle>", p[i].y, p[i].x);
      }
    sb_add(b, "<rect x=\"%.0f\" y=\"%.0f\" width=\"10\" height=\"10\" fill=\"%s\"/><text x=\"%.0f\" y=\"%.0f\" class=\"l\">",
           W - R + 10, T + 16.0 * s, col, W - R + 24, T + 16.0 * s + 9);
    html_text(b, names[s][0] ? names[s] : "(none)");
    sb_add(b, "</text>");
  }
  sb_add(b, "</svg></figure>\n");
#undef XP
#undef YP
}

/* Horizontal bars, one per record. */
static void svg_bars(sbuf *b, const char *title, const char *unit, const vrecord *const *rs, const double *v, int n) {
  const double W = 560, L = 220, R = 70, T = 30, BH = 16;
  double H = T + BH * n + 20, vmax = 0, vmin = 0;
  for (int i = 0; i < n; i++) { vmax = fmax(vmax, v[i]); vmin = fmin(vmin, v[i]); }
  if (vmax <= vmin) vmax = vmin + 1;
  sb_add(b, "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\">",
         W, H, W, H);
  sb_add(b, "<text x=\"10\" y=\"18\" class=\"t\">"); html_text(b, title); sb_add(b, "</text>");
  for (int i = 0; i < n; i++) {
    double x0 = map_lin(0, vmin, vmax, L, W - R), x1 = map_lin(v[i], vmin, vmax, L, W - R);
    double y = T + BH * i;
    sb_add(b, "<text x=\"%.0f\" y=\"%.1f\" class=\"l\" text-anchor=\"end\">", L - 4, y + 11);
    char lab[256];
    snprintf(lab, sizeof lab, "%.24s [%s]", rs[i]->case_id, rs[i]->path);
    html_text(b, lab);
    sb_add(b, "</text><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.0f\" fill=\"%s\"/>", fmin(x0, x1), y + 2,
           fabs(x1 - x0), BH - 4, k_colors[0]);
    sb_add(b, "<text x=\"%.1f\" y=\"%.1f\" class=\"l\">%.4g %s</text>", fmax(x0, x1) + 4, y + 11, v[i], unit);
  }
  sb_add(b, "</svg></figure>\n");
}

static bool headline_metric(const char *name) {
  static const char *const keys[] = {"tokens_per_s", "speedup", "roofline", "score", "kld", "same_top", "accuracy"};
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
    if (strstr(name, keys[i])) return true;
  return false;
}

static void charts(sbuf *b, const vresults *r) {
  int charts = 0;
  const char *suites[64];
  int ns = suites_of(r, suites, 64);
  for (int s = 0; s < ns && charts < 40; s++) {
    /* distinct metric names in this suite */
    const char *mn[64];
    int nm = 0;
    for (int i = 0; i < r->n; i++) {
      if (strcmp(r->recs[i]->suite, suites[s])) continue;
      for (int k = 0; k < r->recs[i]->n_metrics && nm < 64; k++) {
        int j;
        for (j = 0; j < nm; j++) if (!strcmp(mn[j], r->recs[i]->metrics[k].name)) break;
        if (j == nm) mn[nm++] = r->recs[i]->metrics[k].name;
      }
    }
    for (int j = 0; j < nm && charts < 40; j++) {
      const char *axis = NULL;
      for (size_t a = 0; a < sizeof k_axes / sizeof *k_axes && !axis; a++) {
        int cnt = 0;
        double dummy;
        for (int i = 0; i < r->n; i++)
          if (!strcmp(r->recs[i]->suite, suites[s]) && rec_metric_find(r->recs[i], mn[j]) && param_num(r->recs[i], k_axes[a], &dummy)) cnt++;
        if (cnt >= 2) axis = k_axes[a];
      }
      pt *p = malloc(sizeof *p * (size_t)(r->n ? r->n : 1));
      const vrecord **rs = malloc(sizeof *rs * (size_t)(r->n ? r->n : 1));
      double *vv = malloc(sizeof *vv * (size_t)(r->n ? r->n : 1));
      const char *names[8];
      int nn = 0, np = 0;
      const char *unit = "";
      if (!p || !rs || !vv) { free(p); free(rs); free(vv); return; }
      for (int i = 0; i < r->n; i++) {
        const vrecord *x = r->recs[i];
        const rec_metric *m = strcmp(x->suite, suites[s]) ? NULL : rec_metric_find(x, mn[j]);
        if (!m || !isfinite(m->value)) continue;
        unit = m->unit;
        double xv;
        if (axis) {
          if (!param_num(x, axis, &xv)) continue;
          int k;
          for (k = 0; k < nn; k++) if (!strcmp(names[k], x->path)) break;
          if (k == nn) { if (nn == 8) continue; names[nn++] = x->path; }
          p[np++] = (pt){xv, m->value, k};
        } else {
          rs[np] = x;
          vv[np++] = m->value;
        }
      }
      char title[200], ylab[100];
      snprintf(ylab, sizeof ylab, "%s%s%s%s", mn[j], unit[0] ? " (" : "", unit, unit[0] ? ")" : "");
      if (axis && np >= 2) {
        snprintf(title, sizeof title, "%s: %s vs %s", suites[s], ylab, axis);
        svg_line(b, title, axis, ylab, p, np, names, nn);
        charts++;
      } else if (!axis && np >= 2 && np <= 40 && headline_metric(mn[j])) {
        snprintf(title, sizeof title, "%s: %s", suites[s], ylab);
        svg_bars(b, title, unit, rs, vv, np);
        charts++;
      }
      free(p); free(rs); free(vv);
    }
  }
  if (!charts) sb_add(b, "<p>No chartable series in these records (charts need a metric over batch/context, or headline metrics).</p>\n");
}

vstatus report_html(const vresults *r, char **out) {
  *out = NULL;
  sbuf b = {0};
  const char *verdict = js(r->results, "verdict", NULL);
  sb_add(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>vouch report</title>\n<style>"
             "body{font:14px/1.4 system-ui,sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}th{background:#f4f4f4}"
             ".pass{color:#2a7d2a}.fail,.error{color:#b22}.not_supported,.not_run{color:#888}"
             "figure{display:inline-block;margin:0.5em}svg .t{font:bold 13px sans-serif}svg .l{font:11px sans-serif;fill:#333}"
             "svg .ax{stroke:#333}svg .g{stroke:#eee}</style></head><body>\n");
  sb_add(&b, "<h1>vouch: <span class=\"%s\">", !strcmp(verdict, "pass") ? "pass" : "fail");
  html_text(&b, verdict);
  sb_add(&b, "</span></h1>\n<table>");
  const cJSON *m = r->manifest;
  const char *rows[][3] = {{"repository", "subject", "repo"}, {"head", "subject", "head_sha"}, {"base", "subject", "base_sha"},
                           {"plan", "plan", "name"}, {"plan sha256", "plan", "sha256"}, {"vouch", "tool", "version"},
                           {"vouch commit", "tool", "commit"}, {"hardware", "hardware", "key"}, {"compiler", "build", "compiler"},
                           {"started", "started_at", NULL}, {"ended", "ended_at", NULL}};
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    sb_add(&b, "<tr><th>%s</th><td>", rows[i][0]);
    html_text(&b, js(m, rows[i][1], rows[i][2]));
    sb_add(&b, "</td></tr>");
  }
  sb_add(&b, "</table>\n<h2>Charts</h2>\n");
  charts(&b, r);
  const char *suites[64];
  int ns = suites_of(r, suites, 64);
  char ptxt[512], mtxt[1024];
  for (int s = 0; s < ns; s++) {
    sb_add(&b, "<h2>");
    html_text(&b, suites[s]);
    sb_add(&b, "</h2>\n<table><tr><th>case</th><th>path</th><th>params</th><th>status</th><th>reason</th><th>metrics</th></tr>\n");
    for (int i = 0; i < r->n; i++) {
      const vrecord *x = r->recs[i];
      if (strcmp(x->suite, suites[s])) continue;
      params_text(x, ptxt, sizeof ptxt);
      metrics_text(x, mtxt, sizeof mtxt);
      sb_add(&b, "<tr><td>"); html_text(&b, x->case_id); sb_add(&b, "</td><td>"); html_text(&b, x->path);
      sb_add(&b, "</td><td>"); html_text(&b, ptxt); sb_add(&b, "</td><td class=\"%s\">%s</td><td>", rec_status_name(x->status), rec_status_name(x->status));
      html_text(&b, x->reason); sb_add(&b, "</td><td>"); html_text(&b, mtxt); sb_add(&b, "</td></tr>\n");
    }
    sb_add(&b, "</table>\n");
  }
  sb_add(&b, "</body></html>\n");
  if (b.oom) { free(b.p); return VERR("report: out of memory"); }
  *out = b.p;
  return V_OK;
}
