/* The report's served A/B table (issue 38): the comparison `vouch sweep --server A --ref-server B`
 * stores as a plan step's records (runner/cli/sweep_ab_records.c: suite sweep; per gated figure
 * SUB/LEVEL/FIGURE with params sub-folder "sweep_ab", "level", "figure" and metrics ratio, ci_low,
 * ci_high, its status fail for a named regression and undecided for too noisy or no interval; per level
 * SUB/LEVEL/spec_decode with each side's acceptance; the whole A/B as SUB) shown as one row per
 * (A/B, level). The records' own reasons are in the failure and "did not decide" sections and in
 * the full report; this table is the reading a reviewer wants: how much faster or slower, how sure. */
#include "runner/evidence/report_speed.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define SAB_MD_ROWS 12 /* levels in the comment; the rest are counted */
#define SAB_ROWS 256   /* levels in the HTML (a sweep has a handful) */

/* The key figures, in column order: compare.json's metric names and their labels (cmd_sweep_ab.c's). */
static const char *const FIG[][2] = {
    {"tokens_per_s", "output tok/s"}, {"tokens_per_s_per_user", "tok/s per user p50"}, {"ttft_ms", "TTFT p50"},
    {"tpot_ms", "TPOT p50"},          {"itl_ms", "ITL p50"},                          {"e2e_ms", "E2E p50"},
};
#define N_FIG (int)(sizeof FIG / sizeof FIG[0])

/* A record of the A/B stored by a plan step: suite sweep with the "sweep_ab" parameter. */
static bool is_ab(const vrecord *x) {
  return !strcmp(x->suite, "sweep") && rt_str(x->params, "sweep_ab", NULL)[0];
}

/* The record of figure fig (or "spec_decode" with fig NULL) at level of A/B sub; NULL when absent. */
static const vrecord *find(const vresults *r, const char *sub, const char *level, const char *fig) {
  for (int i = 0; i < r->n; i++) {
    const vrecord *x = r->recs[i];
    if (!is_ab(x) || strcmp(rt_str(x->params, "sweep_ab", NULL), sub) || strcmp(rt_str(x->params, "level", NULL), level))
      continue;
    const size_t k = strlen(x->case_id);
    if (fig ? !strcmp(rt_str(x->params, "figure", NULL), fig) : k > 12 && !strcmp(x->case_id + k - 12, "/spec_decode"))
      return x;
  }
  return NULL;
}

/* One row: an A/B's folder and a level of it (both point into the records). */
typedef struct {
  const char *sub;   /* "sweep-ab", "sweep-ab-2", ... */
  const char *level; /* "served/c1/in16/out32/rate-inf" */
} sab_row;

/* The distinct (A/B, level) pairs in first-seen order, at most cap; *more counts the rest. */
static int rows_of(const vresults *r, sab_row *rows, int cap, int *more) {
  int n = 0;
  *more = 0;
  for (int i = 0; i < r->n; i++) {
    const vrecord *x = r->recs[i];
    const char *sub = rt_str(x->params, "sweep_ab", NULL), *level = rt_str(x->params, "level", NULL);
    if (!is_ab(x) || !level[0]) continue;
    int j;
    for (j = 0; j < n; j++)
      if (!strcmp(rows[j].sub, sub) && !strcmp(rows[j].level, level)) break;
    if (j < n) continue;
    if (n < cap) rows[n++] = (sab_row){sub, level};
    else (*more)++;
  }
  return n;
}

/* The cell of a figure's record: "x1.23 [1.05, 1.41]", "... too noisy", "x1.23 (no interval)"; a
 * named regression (the record fails) marked. */
static void cell_text(const vrecord *x, char *out, size_t cap) {
  if (!x) { snprintf(out, cap, "-"); return; }
  const double q = rt_metric(x, "ratio"), lo = rt_metric(x, "ci_low"), hi = rt_metric(x, "ci_high");
  const char *mark = x->status == REC_FAIL ? " ❌ regression" : x->status == REC_ERROR ? " (error)" : "";
  if (!isfinite(q)) snprintf(out, cap, "n/a%s", mark);
  else if (isfinite(lo) && isfinite(hi))
    snprintf(out, cap, "x%.2f [%.2f, %.2f]%s%s", q, lo, hi, x->status == REC_UNDECIDED ? " too noisy" : "", mark);
  else snprintf(out, cap, "x%.2f (no interval)%s", q, mark);
}

/* One side's acceptance of a spec_decode record: "2.00 of 3", or "-" when that side counted no drafts. */
static void side_accept(const vrecord *x, const char *side, char *out, size_t cap) {
  char k1[48], k2[48];
  snprintf(k1, sizeof k1, "%s_mean_acceptance_length", side);
  snprintf(k2, sizeof k2, "%s_draft_length", side);
  const double al = x ? rt_metric(x, k1) : NAN, dl = x ? rt_metric(x, k2) : NAN;
  if (!isfinite(al)) snprintf(out, cap, "-");
  else if (isfinite(dl)) snprintf(out, cap, "%.2f of %g", al, dl);
  else snprintf(out, cap, "%.2f", al);
}

/* A row's acceptance cell, both sides of its level's spec_decode record: "- / 2.00 of 3". */
static void accept_cell(const vresults *r, const sab_row *row, char *out, size_t cap) {
  const vrecord *s = find(r, row->sub, row->level, NULL);
  char a0[40], a1[40];
  side_accept(s, "base", a0, sizeof a0);
  side_accept(s, "head", a1, sizeof a1);
  snprintf(out, cap, "%s / %s", a0, a1);
}

/* The table's shape: which figure columns any row has, and whether any level has a spec record. */
typedef struct {
  bool fig[N_FIG];
  bool spec;
  bool many; /* more than one A/B: rows name theirs */
} sab_cols;

static sab_cols cols_of(const vresults *r, const sab_row *rows, int n) {
  sab_cols c = {0};
  for (int i = 0; i < n; i++) {
    for (int f = 0; f < N_FIG; f++) c.fig[f] |= find(r, rows[i].sub, rows[i].level, FIG[f][0]) != NULL;
    c.spec |= find(r, rows[i].sub, rows[i].level, NULL) != NULL;
    c.many |= strcmp(rows[i].sub, rows[0].sub) != 0;
  }
  return c;
}

/* The whole A/B's record of sub (its headline, the two servers, the rounds); NULL when absent. */
static const vrecord *whole(const vresults *r, const char *sub) {
  for (int i = 0; i < r->n; i++)
    if (is_ab(r->recs[i]) && !strcmp(r->recs[i]->case_id, sub)) return r->recs[i];
  return NULL;
}

/* The level without the "served/" every served sweep level starts with. */
static const char *short_level(const char *level) { return strncmp(level, "served/", 7) ? level : level + 7; }

/* The legend of the first A/B: the servers (each between quote marks q), rounds and interval confidence. */
static void legend(const vrecord *w, const char *q, char *out, size_t cap) {
  double conf = NAN, rounds = NAN;
  if (w) {
    rt_param(w, "interval_confidence", &conf);
    rt_param(w, "rounds", &rounds);
  }
  snprintf(out, cap, "head %s%.80s%s over base %s%.80s%s, %g rounds a side; each cell head / base (latency above 1 and "
           "tok/s below 1 are slower) with its %.4g%% interval",
           q, w ? rt_str(w->params, "head_server", NULL) : "?", q, q, w ? rt_str(w->params, "base_server", NULL) : "?", q, rounds,
           100 * conf);
}

void served_ab_md(sbuf *b, const vresults *r) {
  sab_row rows[SAB_MD_ROWS];
  int more;
  const int n = rows_of(r, rows, SAB_MD_ROWS, &more);
  if (!n) return;
  const sab_cols c = cols_of(r, rows, n);
  const vrecord *w = whole(r, rows[0].sub);
  char t[400];
  legend(w, "`", t, sizeof t);
  sb_add(b, "\n### Speed (served A/B)\n\n");
  sb_md_cell(b, t);
  if (w) {
    char h[220];
    snprintf(h, sizeof h, "%.200s", rt_str(w->params, "headline", NULL));
    sb_add(b, ".  \n**");
    sb_md_cell(b, h);
    sb_add(b, "**");
  }
  sb_add(b, "\n\n| level |");
  for (int f = 0; f < N_FIG; f++)
    if (c.fig[f]) sb_add(b, " %s |", FIG[f][1]);
  if (c.spec) sb_add(b, " acceptance length base / head (of draft) |");
  sb_add(b, "\n|---|");
  for (int f = 0; f < N_FIG; f++)
    if (c.fig[f]) sb_add(b, "---|");
  sb_add(b, c.spec ? "---|\n" : "\n");
  for (int i = 0; i < n; i++) {
    char lab[200], cell[120];
    snprintf(lab, sizeof lab, "%s%s%.150s", c.many ? rows[i].sub : "", c.many ? " " : "", short_level(rows[i].level));
    sb_add(b, "| ");
    sb_md_cell(b, lab);
    sb_add(b, " |");
    for (int f = 0; f < N_FIG; f++) {
      if (!c.fig[f]) continue;
      cell_text(find(r, rows[i].sub, rows[i].level, FIG[f][0]), cell, sizeof cell);
      sb_add(b, " %s |", cell);
    }
    if (c.spec) {
      char acc[100];
      accept_cell(r, &rows[i], acc, sizeof acc);
      sb_add(b, " %s |", acc);
    }
    sb_add(b, "\n");
  }
  if (more) sb_add(b, "\n…%d more levels in the full report.\n", more);
}

void served_ab_html(sbuf *b, const vresults *r) {
  sab_row rows[SAB_ROWS];
  int more;
  const int n = rows_of(r, rows, SAB_ROWS, &more);
  if (!n) return;
  const sab_cols c = cols_of(r, rows, n);
  char t[400];
  legend(whole(r, rows[0].sub), "", t, sizeof t);
  sb_add(b, "<h2>Speed (served A/B)</h2>\n<p>");
  sb_html(b, t);
  sb_add(b, ".</p>\n<table><tr><th>A/B</th><th>level</th>");
  for (int f = 0; f < N_FIG; f++)
    if (c.fig[f]) sb_add(b, "<th>%s</th>", FIG[f][1]);
  if (c.spec) sb_add(b, "<th>acceptance length base / head (of draft)</th>");
  sb_add(b, "</tr>\n");
  for (int i = 0; i < n; i++) {
    char cell[120];
    sb_add(b, "<tr><td>");
    sb_html(b, rows[i].sub);
    sb_add(b, "</td><td>");
    sb_html(b, short_level(rows[i].level));
    sb_add(b, "</td>");
    for (int f = 0; f < N_FIG; f++) {
      if (!c.fig[f]) continue;
      const vrecord *x = find(r, rows[i].sub, rows[i].level, FIG[f][0]);
      cell_text(x, cell, sizeof cell);
      sb_add(b, "<td class=\"%s\">", x ? rec_status_name(x->status) : "not_run");
      sb_html(b, cell);
      sb_add(b, "</td>");
    }
    if (c.spec) {
      char acc[100];
      accept_cell(r, &rows[i], acc, sizeof acc);
      sb_add(b, "<td>%s</td>", acc);
    }
    sb_add(b, "</tr>\n");
  }
  if (more) sb_add(b, "<tr><td colspan=\"2\">…%d more levels</td></tr>\n", more);
  sb_add(b, "</table>\n");
}
