/* The AIME table of the report: see report_aime.h. */
#include "runner/evidence/report_aime.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* One server's AIME figures, read from its aime_all record. */
typedef struct {
  const vrecord *x;     /* the record (path = "server:MODEL" or "ref-server:MODEL") */
  double pass, lo, hi;  /* pass@1 over every repeat and its 95 % bootstrap interval */
  double answers;       /* answers graded (items x repeats) */
  double truncated;     /* answers cut by max_tokens (finish_reason "length") */
  double diff, worse_p; /* candidate only: paired difference against the reference, one-sided p; NaN otherwise */
} aime_row;

/* The i-th record as a row; false when it is not an aime_all record with a pass@1. */
static bool row_of(const vrecord *x, aime_row *o) {
  if (strcmp(x->suite, "evals") || strcmp(x->case_id, "aime_all")) return false;
  o->x = x;
  o->pass = rt_metric(x, "pass_at_1");
  if (!isfinite(o->pass)) return false;
  o->lo = rt_metric(x, "pass_at_1_lo95");
  o->hi = rt_metric(x, "pass_at_1_hi95");
  o->answers = rt_metric(x, "answers");
  o->truncated = rt_metric(x, "truncated");
  o->diff = rt_metric(x, "paired_diff");
  o->worse_p = rt_metric(x, "worse_p");
  return true;
}

static bool failed(const vrecord *x) { return x->status == REC_FAIL || x->status == REC_ERROR; }

void aime_md(sbuf *b, const vresults *r) {
  int n = 0;
  aime_row w;
  for (int i = 0; i < r->n; i++) {
    if (!row_of(r->recs[i], &w)) continue;
    if (n++ == 0)
      sb_add(b, "\n### AIME (pass@1 over every repeat; paired against the reference)\n\n"
                "| path | pass@1 | 95%% interval | answers | truncated | paired difference | p (worse) |\n"
                "|---|---:|---|---:|---:|---:|---:|\n");
    sb_add(b, "| ");
    sb_md_cell(b, w.x->path);
    sb_add(b, " | %.3f%s | [%.3f, %.3f] | %.0f | %.0f |", w.pass, failed(w.x) ? " ❌" : "", w.lo, w.hi, w.answers,
           w.truncated);
    if (isfinite(w.diff)) sb_add(b, " %+.3f | %.3g |\n", w.diff, w.worse_p);
    else sb_add(b, " | |\n");
  }
}

void aime_html(sbuf *b, const vresults *r) {
  int n = 0;
  aime_row w;
  for (int i = 0; i < r->n; i++) {
    if (!row_of(r->recs[i], &w)) continue;
    if (n++ == 0)
      sb_add(b, "<h2>AIME</h2>\n<p>pass@1 over every repeat, with its 95%% bootstrap interval; on the candidate's row "
                "the paired difference against the reference and its one-sided p (worse).</p>\n"
                "<table><tr><th>path</th><th>status</th><th>pass@1</th><th>95%% interval</th><th>answers</th>"
                "<th>truncated</th><th>paired difference</th><th>p (worse)</th></tr>\n");
    sb_add(b, "<tr><td>");
    sb_html(b, w.x->path);
    sb_add(b, "</td><td class=\"%s\">%s</td><td>%.3f</td><td>[%.3f, %.3f]</td><td>%.0f</td><td>%.0f</td>",
           rec_status_name(w.x->status), rec_status_name(w.x->status), w.pass, w.lo, w.hi, w.answers, w.truncated);
    if (isfinite(w.diff)) sb_add(b, "<td>%+.3f</td><td>%.3g</td></tr>\n", w.diff, w.worse_p);
    else sb_add(b, "<td></td><td></td></tr>\n");
  }
  if (n) sb_add(b, "</table>\n");
}
