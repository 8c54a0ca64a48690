/* The HTML report: one chart per question a reviewer asks, each line one series, axes with
 * units, then every record in a table per suite. Self-contained (inline CSS, SVG, script). */
#include "runner/evidence/report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/evidence/report_aime.h"
#include "runner/evidence/report_coverage.h"
#include "runner/evidence/report_speed.h"
#include "runner/evidence/report_text.h"

#define MAX_SERIES 10

static const char *const k_colors[MAX_SERIES] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                                 "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

typedef struct {
  double x, y;   /* the point */
  double lo, hi; /* its interval (NaN: none) */
  int series;    /* index into the chart's names */
} pt;

typedef struct {
  pt *p;                         /* [n] points (owned) */
  int n, cap;
  char names[MAX_SERIES][200];   /* [nn] series names */
  int nn;
  int dropped;                   /* points of series beyond MAX_SERIES */
} chart;

static int series_of(chart *c, const char *name) {
  for (int i = 0; i < c->nn; i++)
    if (!strcmp(c->names[i], name)) return i;
  if (c->nn == MAX_SERIES) return -1;
  snprintf(c->names[c->nn], sizeof c->names[0], "%.199s", name);
  return c->nn++;
}

static void add_pt(chart *c, const char *series, double x, double y, double lo, double hi) {
  if (!isfinite(x) || !isfinite(y)) return;
  int s = series_of(c, series);
  if (s < 0) { c->dropped++; return; }
  if (c->n == c->cap) {
    int cap = c->cap ? 2 * c->cap : 64;
    pt *p = realloc(c->p, (size_t)cap * sizeof *p);
    if (!p) return;
    c->p = p;
    c->cap = cap;
  }
  c->p[c->n++] = (pt){x, y, lo, hi, s};
}

static int cmp_pt(const void *a, const void *b) {
  const pt *p = a, *q = b;
  if (p->series != q->series) return p->series - q->series;
  return (p->x > q->x) - (p->x < q->x);
}

static double map_lin(double v, double lo, double hi, double a, double b) {
  return hi > lo ? a + (v - lo) / (hi - lo) * (b - a) : 0.5 * (a + b);
}

/* A line chart: x on a log2 axis when it spans >= 8x, y from 0 (or below); a dashed line at
 * y = ref when ref is finite; whiskers where points carry intervals. */
static void svg_line(sbuf *b, const char *title, const char *xlab, const char *ylab, chart *c, double ref) {
  const double W = 630, H = 320, L = 74, R = 170, T = 30, B = 44;
  double x0 = INFINITY, x1 = -INFINITY, y0 = 0, y1 = isfinite(ref) ? ref : -INFINITY;
  bool logx = true;
  for (int i = 0; i < c->n; i++) {
    const pt *p = &c->p[i];
    x0 = fmin(x0, p->x);
    x1 = fmax(x1, p->x);
    y0 = fmin(y0, p->y);
    y1 = fmax(y1, p->y);
    if (p->x <= 0) logx = false;
  }
  /* intervals widen the axis up to twice the largest point; a longer whisker is cut at the edge */
  double ycap = y1 > 0 ? 2 * y1 : y1 + 1;
  for (int i = 0; i < c->n; i++)
    if (isfinite(c->p[i].hi)) y1 = fmax(y1, fmin(c->p[i].hi, ycap));

  if (logx && x1 / x0 < 8) logx = false;
  if (y1 <= y0) y1 = y0 + 1;
  y1 += 0.05 * (y1 - y0);
  qsort(c->p, (size_t)c->n, sizeof *c->p, cmp_pt);
#define XP(v) map_lin(logx ? log2(v) : (v), logx ? log2(x0) : x0, logx ? log2(x1) : x1, L + 10, W - R - 10)
#define YP(v) map_lin((v), y0, y1, H - B, T)
  sb_add(b, "<figure><svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" role=\"img\" data-title=\"", W, H, W, H);
  sb_html(b, title);
  sb_add(b, "\"><text x=\"%.0f\" y=\"18\" class=\"t\">", L);
  sb_html(b, title);
  sb_add(b, "</text><line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" class=\"ax\"/>", L, H - B, W - R, H - B);
  sb_add(b, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" class=\"ax\"/>", L, T, L, H - B);
  for (int k = 0; k <= 4; k++) {
    double v = y0 + (y1 - y0) * k / 4;
    sb_add(b, "<text x=\"%.0f\" y=\"%.1f\" class=\"l\" text-anchor=\"end\">%.3g</text>", L - 4, YP(v) + 4, v);
    sb_add(b, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" class=\"g\"/>", L, YP(v), W - R, YP(v));
  }
  if (isfinite(ref))
    sb_add(b, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" class=\"ref\"/>", L, YP(ref), W - R, YP(ref));
  double seen[16];
  int nseen = 0;
  for (int i = 0; i < c->n && nseen < 16; i++) {
    int k;
    for (k = 0; k < nseen; k++)
      if (seen[k] == c->p[i].x) break;
    if (k < nseen) continue;
    seen[nseen++] = c->p[i].x;
    char t[24];
    rt_ctx_text(c->p[i].x, t, sizeof t);
    sb_add(b, "<text x=\"%.1f\" y=\"%.0f\" class=\"l\" text-anchor=\"middle\">%s</text>", XP(c->p[i].x), H - B + 14,
           c->p[i].x == floor(c->p[i].x) ? t : "");
  }
  sb_add(b, "<text x=\"%.0f\" y=\"%.0f\" class=\"l\" text-anchor=\"middle\">", (L + W - R) / 2, H - 8);
  sb_html(b, xlab);
  sb_add(b, "</text><text x=\"12\" y=\"%.0f\" class=\"l\" transform=\"rotate(-90 12 %.0f)\" text-anchor=\"middle\">",
         (T + H - B) / 2, (T + H - B) / 2);
  sb_html(b, ylab);
  sb_add(b, "</text>");
  for (int s = 0; s < c->nn; s++) {
    const char *col = k_colors[s];
    sb_add(b, "<g class=\"series\" data-series=\"%d\"><polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", s, col);
    for (int i = 0; i < c->n; i++)
      if (c->p[i].series == s) sb_add(b, "%.1f,%.1f ", XP(c->p[i].x), YP(c->p[i].y));
    sb_add(b, "\"/>");
    for (int i = 0; i < c->n; i++) {
      const pt *p = &c->p[i];
      if (p->series != s) continue;
      if (isfinite(p->lo) && isfinite(p->hi))
        sb_add(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" class=\"ci\"/>", XP(p->x),
               YP(fmax(p->lo, y0)), XP(p->x), YP(fmin(p->hi, y1)), col);
      sb_add(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>", XP(p->x), YP(p->y), col);
      sb_html(b, c->names[s]);
      sb_add(b, ": %.4g at %.6g", p->y, p->x);
      if (isfinite(p->lo)) sb_add(b, " [%.4g, %.4g]", p->lo, p->hi);
      sb_add(b, "</title></circle>");
    }
    sb_add(b, "</g><g class=\"legend\" data-series=\"%d\"><rect x=\"%.0f\" y=\"%.0f\" width=\"10\" height=\"10\" fill=\"%s\"/>"
              "<text x=\"%.0f\" y=\"%.0f\" class=\"l\">", s, W - R + 10, T + 16.0 * s, col, W - R + 24, T + 16.0 * s + 9);
    sb_html(b, c->names[s]);
    sb_add(b, "</text></g>");
  }
  if (c->dropped)
    sb_add(b, "<text x=\"%.0f\" y=\"%.0f\" class=\"l\">+%d points of more series</text>", W - R + 10, T + 16.0 * c->nn + 9,
           c->dropped);
  sb_add(b, "</svg></figure>\n");
#undef XP
#undef YP
}

/* Horizontal bars, one per labelled value. */
static void svg_bars(sbuf *b, const char *title, const char *unit, char (*labels)[160], const double *v, int n) {
  const double W = 620, L = 240, R = 90, T = 30, BH = 16;
  double H = T + BH * n + 24, vmax = 0, vmin = 0;
  for (int i = 0; i < n; i++) { vmax = fmax(vmax, v[i]); vmin = fmin(vmin, v[i]); }
  if (vmax <= vmin) vmax = vmin + 1;
  sb_add(b, "<figure><svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" role=\"img\" data-title=\"", W, H, W, H);
  sb_html(b, title);
  sb_add(b, "\"><text x=\"10\" y=\"18\" class=\"t\">");
  sb_html(b, title);
  sb_add(b, "</text>");
  for (int i = 0; i < n; i++) {
    double x0 = map_lin(0, vmin, vmax, L, W - R), x1 = map_lin(v[i], vmin, vmax, L, W - R);
    double y = T + BH * i;
    sb_add(b, "<text x=\"%.0f\" y=\"%.1f\" class=\"l\" text-anchor=\"end\">", L - 4, y + 11);
    sb_html(b, labels[i]);
    /* a zero value still gets a visible 1-px mark */
    sb_add(b, "</text><rect class=\"bar\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.0f\" fill=\"%s\"/>", fmin(x0, x1),
           y + 2, fmax(fabs(x1 - x0), 1.0), BH - 4, k_colors[0]);
    sb_add(b, "<text x=\"%.1f\" y=\"%.1f\" class=\"l\">%.4g %s</text>", fmax(x0, x1) + 4, y + 11, v[i], unit);
  }
  sb_add(b, "</svg></figure>\n");
}

static void chart_free(chart *c) {
  free(c->p);
  memset(c, 0, sizeof *c);
}

static const char *workload_of(const vrecord *x) {
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(x->params, "workload");
  return cJSON_IsString(w) ? w->valuestring : "";
}

/* Distinct workloads of the sweep (at most 4). */
static int workloads(const vresults *r, const char **out) {
  int n = 0;
  for (int i = 0; i < r->n; i++) {
    if (strcmp(r->recs[i]->suite, "sweep")) continue;
    const char *w = workload_of(r->recs[i]);
    int j;
    for (j = 0; j < n; j++)
      if (!strcmp(out[j], w)) break;
    if (j == n && n < 4) out[n++] = w;
  }
  return n;
}

static void ctx_series(const vrecord *x, bool with_path, char *out, size_t cap) {
  double c;
  char t[24] = "-";
  if (rt_param(x, "context", &c)) rt_ctx_text(c, t, sizeof t);
  if (with_path) snprintf(out, cap, "%s ctx %s", x->path, t);
  else snprintf(out, cap, "ctx %s", t);
}

/* Speed-up vs batch, one line per context, a chart per candidate path and workload. */
static int speed_charts(sbuf *b, const vresults *r, const char *const *wl, int nw) {
  const char *base = rt_sweep_base(r);
  if (!base) return 0;
  const char *paths[8];
  int np = 0, charts = 0;
  for (int i = 0; i < r->n; i++) {
    const vrecord *x = r->recs[i];
    if (strcmp(x->suite, "sweep") || !strcmp(x->path, base) || !isfinite(rt_metric(x, "speedup"))) continue;
    int j;
    for (j = 0; j < np; j++)
      if (!strcmp(paths[j], x->path)) break;
    if (j == np && np < 8) paths[np++] = x->path;
  }
  for (int p = 0; p < np; p++)
    for (int w = 0; w < nw && charts < 8; w++) {
      chart c = {0};
      for (int i = 0; i < r->n; i++) {
        const vrecord *x = r->recs[i];
        double bv;
        if (strcmp(x->suite, "sweep") || strcmp(x->path, paths[p]) || strcmp(workload_of(x), wl[w]) ||
            !rt_param(x, "batch", &bv))
          continue;
        char s[200];
        ctx_series(x, false, s, sizeof s);
        add_pt(&c, s, bv, rt_metric(x, "speedup"), rt_metric(x, "speedup_ci95_lo"), rt_metric(x, "speedup_ci95_hi"));
      }
      if (c.n) {
        char title[256], ylab[160];
        snprintf(title, sizeof title, "Speed-up of %s over %s%s%s", paths[p], base, wl[w][0] ? ", " : "", wl[w]);
        snprintf(ylab, sizeof ylab, "speed-up over %s (x)", base);
        svg_line(b, title, "batch (sequences)", ylab, &c, 1.0);
        charts++;
      }
      chart_free(&c);
    }
  return charts;
}

/* metric vs batch, one line per path and context, a chart per workload. */
static int metric_charts(sbuf *b, const vresults *r, const char *const *wl, int nw, const char *metric, const char *what,
                         const char *ylab) {
  int charts = 0;
  for (int w = 0; w < nw; w++) {
    chart c = {0};
    for (int i = 0; i < r->n; i++) {
      const vrecord *x = r->recs[i];
      double bv;
      if (strcmp(x->suite, "sweep") || strcmp(workload_of(x), wl[w]) || !rt_param(x, "batch", &bv)) continue;
      char s[200];
      ctx_series(x, true, s, sizeof s);
      add_pt(&c, s, bv, rt_metric(x, metric), NAN, NAN);
    }
    if (c.n) {
      char title[200];
      snprintf(title, sizeof title, "%s vs batch%s%s", what, wl[w][0] ? ", " : "", wl[w]);
      svg_line(b, title, "batch (sequences)", ylab, &c, NAN);
      charts++;
    }
    chart_free(&c);
  }
  return charts;
}

/* Eval score vs context bin (MRCR: a line per path and needle count) or hops (chain). */
static int eval_charts(sbuf *b, const vresults *r) {
  static const char *const kinds[][3] = {{"mrcr", "bin", "context bin (tokens)"}, {"mrcr", "context", "context (tokens)"},
                                         {"chain", "hops", "hops (dependent steps)"}};
  int charts = 0;
  for (int k = 0; k < 3; k++) {
    chart c = {0};
    size_t kl = strlen(kinds[k][0]);
    for (int i = 0; i < r->n; i++) {
      const vrecord *x = r->recs[i];
      double xv, nd;
      if (strcmp(x->suite, "evals") || strncmp(x->case_id, kinds[k][0], kl) ||
          (x->case_id[kl] != '_' && x->case_id[kl] != '/') || !rt_param(x, kinds[k][1], &xv) ||
          (k == 1 && rt_param(x, "bin", &nd)))
        continue;
      char s[200];
      if (rt_param(x, "needles", &nd)) snprintf(s, sizeof s, "%s, %g needles", x->path, nd);
      else snprintf(s, sizeof s, "%s", x->path);
      add_pt(&c, s, xv, rt_metric(x, "score"), NAN, NAN);
    }
    if (c.n) {
      char title[96];
      snprintf(title, sizeof title, "Eval %s: score vs %s", kinds[k][0], kinds[k][1]);
      svg_line(b, title, kinds[k][2], "score (fraction answered right)", &c, NAN);
      charts++;
    }
    chart_free(&c);
  }
  return charts;
}

/* Divergence per point: mean KLD of each diverge record (batch, context, path). */
static int diverge_chart(sbuf *b, const vresults *r) {
  char (*labels)[160] = malloc(40 * sizeof *labels);
  double v[40];
  int n = 0, more = 0;
  if (!labels) return 0;
  for (int i = 0; i < r->n; i++) {
    const vrecord *x = r->recs[i];
    double k = rt_metric(x, "kld"), bv = NAN, cv = NAN;
    if (strcmp(x->suite, "diverge") || !isfinite(k)) continue;
    if (n == 40) { more++; continue; }
    rt_param(x, "batch", &bv);
    rt_param(x, "context", &cv);
    char t[24];
    rt_ctx_text(cv, t, sizeof t);
    snprintf(labels[n], sizeof labels[0], "b%g ctx %s %.60s", bv, isfinite(cv) ? t : "-", x->path);
    v[n++] = k;
  }
  if (n) {
    char title[96];
    snprintf(title, sizeof title, "Divergence per point: mean KLD vs the reference%s", more ? " (first 40)" : "");
    svg_bars(b, title, "nats", labels, v, n);
  }
  free(labels);
  return n > 0;
}

/* Marks every chart drew, checked in a browser: data-chart-check on <body>. */
static const char k_script[] =
    "<script>window.addEventListener('error',function(e){document.body.setAttribute('data-script-error',"
    "String(e.message||e));});</script>\n"
    "<script>(function(){var bad=[],n=0;document.querySelectorAll('svg.chart').forEach(function(s){n++;"
    "var marks=0;s.querySelectorAll('polyline,rect.bar,circle').forEach(function(m){var r=m.getBBox();"
    "if(m.tagName==='polyline'?m.points.numberOfItems>1&&(r.width>0||r.height>0):r.width>0&&r.height>0)marks++;});"
    "if(!marks)bad.push(s.getAttribute('data-title'));});"
    "document.body.setAttribute('data-chart-check',bad.length?'empty: '+bad.join('; '):'ok '+n);"
    "document.querySelectorAll('g.legend').forEach(function(g){g.style.cursor='pointer';"
    "g.addEventListener('click',function(){var s=g.ownerSVGElement.querySelector('g.series[data-series=\"'+"
    "g.getAttribute('data-series')+'\"]');if(s)s.style.display=s.style.display==='none'?'':'none';});});})();</script>\n";

vstatus report_html(const vresults *r, char **out) {
  *out = NULL;
  sbuf b = {0};
  const char *verdict = rt_str(r->results, "verdict", NULL);
  sb_add(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>vouch report</title>\n<style>"
             "body{font:14px/1.4 system-ui,sans-serif;margin:2em;max-width:1300px}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}th{background:#f4f4f4}"
             ".pass{color:#2a7d2a}.fail,.error{color:#b22}.not_supported,.not_run{color:#888}.undecided{color:#b60}"
             "figure{display:inline-block;margin:0.5em}svg .t{font:bold 13px sans-serif}svg .l{font:11px sans-serif;fill:#333}"
             "svg .ax{stroke:#333}svg .g{stroke:#eee}svg .ref{stroke:#999;stroke-dasharray:4 3}svg .ci{stroke-width:1.5}"
             "</style></head><body>\n");
  sb_add(&b, "<h1>vouch: <span class=\"%s\">", !strcmp(verdict, "pass") ? "pass" : "fail");
  sb_html(&b, verdict);
  sb_add(&b, "</span></h1>\n<table>");
  const cJSON *m = r->manifest;
  const char *rows[][3] = {{"repository", "subject", "repo"}, {"head", "subject", "head_sha"}, {"base", "subject", "base_sha"},
                           {"plan", "plan", "name"}, {"plan sha256", "plan", "sha256"}, {"vouch", "tool", "version"},
                           {"vouch commit", "tool", "commit"}, {"hardware", "hardware", "key"}, {"compiler", "build", "compiler"},
                           {"started", "started_at", NULL}, {"ended", "ended_at", NULL}};
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    sb_add(&b, "<tr><th>%s</th><td>", rows[i][0]);
    sb_html(&b, rt_str(m, rows[i][1], rows[i][2]));
    sb_add(&b, "</td></tr>");
  }
  sb_add(&b, "</table>\n<h2>Charts</h2>\n");
  const char *wl[4];
  int nw = workloads(r, wl), charts = 0;
  charts += speed_charts(&b, r, wl, nw);
  charts += metric_charts(&b, r, wl, nw, "tokens_per_s", "Tokens/s", "tokens/s (tok/s)");
  charts += metric_charts(&b, r, wl, nw, "roofline_pct", "% of roofline", "% of roofline (%)");
  charts += eval_charts(&b, r);
  charts += diverge_chart(&b, r);
  if (!charts) sb_add(&b, "<p>No sweep, eval or divergence records to chart in this run.</p>\n");
  served_ab_html(&b, r);
  aime_html(&b, r);
  coverage_html(&b, r);
  const char *suites[64];
  int ns = rt_suites(r, suites, 64);
  char ptxt[512], mtxt[1024];
  for (int s = 0; s < ns; s++) {
    sb_add(&b, "<h2>");
    sb_html(&b, suites[s]);
    sb_add(&b, "</h2>\n<table><tr><th>case</th><th>path</th><th>params</th><th>status</th><th>reason</th><th>metrics</th></tr>\n");
    for (int i = 0; i < r->n; i++) {
      const vrecord *x = r->recs[i];
      if (strcmp(x->suite, suites[s])) continue;
      rt_params_text(x, ptxt, sizeof ptxt);
      rt_metrics_text(x, mtxt, sizeof mtxt);
      sb_add(&b, "<tr><td>");
      sb_html(&b, x->case_id);
      sb_add(&b, "</td><td>");
      sb_html(&b, x->path);
      sb_add(&b, "</td><td>");
      sb_html(&b, ptxt);
      sb_add(&b, "</td><td class=\"%s\">%s</td><td>", rec_status_name(x->status), rec_status_name(x->status));
      sb_html(&b, x->reason);
      sb_add(&b, "</td><td>");
      sb_html(&b, mtxt);
      sb_add(&b, "</td></tr>\n");
    }
    sb_add(&b, "</table>\n");
  }
  sb_add(&b, "%s</body></html>\n", k_script);
  if (b.oom) { free(b.p); return VERR("report: out of memory"); }
  *out = b.p;
  return V_OK;
}
