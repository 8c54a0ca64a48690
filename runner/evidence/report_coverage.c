/* The report's coverage table (issue 37): the (op, variant) pairs each path's own rules can pick (the
 * records of `vouch coverage`, suites/coverage/) joined with what the decode steps of the run say ran
 * (every other record's `ran`, runner/evidence/report_ran.c). A pair no step ran is a gap: the plan
 * never exercised that choice of the path, whatever its other cases say. The kernels suite tests
 * variants in isolation, not as the path chose them in a step, so its records do not cover a pair. */
#include "runner/evidence/report_coverage.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#define COV_MD_ROWS 60 /* rows of the table in the comment, gaps first; the rest are counted */
#define COV_STEPS 6    /* steps named per row; more are counted */

/* One plan step that ran a pair: the suite and the model of its records (records carry no step index). */
typedef struct {
  char what[160]; /* "diverge synth:small" */
  long records;   /* records of that step naming the pair */
} cov_step;

typedef struct {
  const vrecord *sel;       /* the coverage record: path, params.choice "OP/VARIANT" (older: its case_id), params.when */
  cov_step steps[COV_STEPS];
  int n_steps;
  int more_steps;           /* distinct steps past COV_STEPS */
  long records;             /* records naming the pair */
} cov_row;

/* True when a `ran` path name q is the coverage path p or a spelling of the same registered path
 * ("latency@attn_gemm" runs latency's kernels; "cpu-ref:tp2" is cpu-ref's): the base names agree. */
static bool same_base(const char *q, const char *p) {
  const size_t a = strcspn(q, ":@"), b = strcspn(p, ":@");
  return a == b && !strncmp(q, p, a);
}

static bool is_choice(const vrecord *x) { return !strcmp(x->suite, "coverage") && x->status == REC_PASS; }
static bool is_decode_record(const vrecord *x) {
  return x->ran && strcmp(x->suite, "coverage") && strcmp(x->suite, "kernels");
}

static bool same_model(const char *a, const char *b) {
  const int n = rec_model_spec_len(a);
  return n == rec_model_spec_len(b) && !strncmp(a, b, (size_t)n);
}

static void step_label(const vrecord *x, char *out, size_t cap) {
  const char *model = rt_str(x->params, "model", NULL);
  const int n = rec_model_spec_len(model);
  snprintf(out, cap, "%s%s%.*s", x->suite, n ? " " : "", n < 120 ? n : 120, model);
}

/* "PATH on MODEL" of a coverage record (PATH alone without a model). */
static void path_model(const vrecord *x, char *out, size_t cap) {
  const char *model = rt_str(x->params, "model", NULL);
  const int n = rec_model_spec_len(model);
  snprintf(out, cap, "%.100s%s%.*s", x->path, n ? " on " : "", n < 90 ? n : 90, model);
}

/* The `ran` key of a coverage record: its "choice" parameter; bundles before the case id named the
 * model too had the key as the case id. */
static const char *choice_of(const vrecord *sel) {
  const char *c = rt_str(sel->params, "choice", NULL);
  return c[0] ? c : sel->case_id;
}

/* Joins row w with every decode record of r on the same model (a choice is the path's on that model's
 * shapes; a coverage record without a model matches any). */
static void join(cov_row *w, const vresults *r) {
  const char *model = rt_str(w->sel->params, "model", NULL);
  for (int i = 0; i < r->n; i++) {
    const vrecord *x = r->recs[i];
    if (!is_decode_record(x) || (model[0] && !same_model(rt_str(x->params, "model", NULL), model))) continue;
    bool hit = false;
    const cJSON *path;
    cJSON_ArrayForEach(path, x->ran) {
      if (!path->string || !same_base(path->string, w->sel->path)) continue;
      if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(path, choice_of(w->sel)))) hit = true;
    }
    if (!hit) continue;
    w->records++;
    char lab[160];
    step_label(x, lab, sizeof lab);
    int s;
    for (s = 0; s < w->n_steps; s++)
      if (!strcmp(w->steps[s].what, lab)) break;
    if (s < w->n_steps) w->steps[s].records++;
    else if (w->n_steps < COV_STEPS) {
      snprintf(w->steps[w->n_steps].what, sizeof w->steps[0].what, "%s", lab);
      w->steps[w->n_steps++].records = 1;
    } else w->more_steps++; /* counts records past the named steps: a bound on the steps left out */
  }
}

static int gaps_first(const void *a, const void *b) {
  const cov_row *x = a, *y = b;
  if ((x->records == 0) != (y->records == 0)) return x->records == 0 ? -1 : 1;
  int c = strcmp(x->sel->path, y->sel->path);
  if (!c) c = strcmp(rt_str(x->sel->params, "model", NULL), rt_str(y->sel->params, "model", NULL));
  return c ? c : strcmp(choice_of(x->sel), choice_of(y->sel));
}

/* The table of r: its rows joined and sorted (gaps first), the gaps counted. */
typedef struct {
  cov_row *rows; /* [n]; NULL when r has no choices */
  int n;         /* choices (coverage records that passed) */
  int gaps;      /* rows no decode record ran */
} cov_table;

/* Builds t from r. False on out of memory (t empty). */
static bool build_table(const vresults *r, cov_table *t) {
  memset(t, 0, sizeof *t);
  int k = 0;
  for (int i = 0; i < r->n; i++) k += is_choice(r->recs[i]);
  if (!k) return true;
  t->rows = calloc((size_t)k, sizeof *t->rows);
  if (!t->rows) return false;
  for (int i = 0; i < r->n; i++)
    if (is_choice(r->recs[i])) t->rows[t->n++].sel = r->recs[i];
  for (int i = 0; i < t->n; i++) {
    join(&t->rows[i], r);
    t->gaps += t->rows[i].records == 0;
  }
  qsort(t->rows, (size_t)t->n, sizeof *t->rows, gaps_first);
  return true;
}

int coverage_gaps(const vresults *r) {
  cov_table t;
  if (!build_table(r, &t)) return -1;
  free(t.rows);
  return t.n ? t.gaps : -1;
}

/* The coverage records that are not choices: a path that does not enumerate, or could not. */
static int not_enumerated(const vresults *r) {
  int k = 0;
  for (int i = 0; i < r->n; i++) k += !strcmp(r->recs[i]->suite, "coverage") && r->recs[i]->status != REC_PASS;
  return k;
}

static bool has_coverage(const vresults *r) {
  for (int i = 0; i < r->n; i++)
    if (!strcmp(r->recs[i]->suite, "coverage")) return true;
  return false;
}

/* Why a run has no coverage records (the summary and the HTML say it). */
#define NO_COVERAGE "this run has no coverage records (no `vouch coverage` step, or a run made before it): which of " \
                    "the paths' choices never ran is not known"

void coverage_summary_md(sbuf *b, const vresults *r) {
  if (!has_coverage(r)) {
    sb_add(b, "\n**Coverage:** %s.\n", NO_COVERAGE);
    return;
  }
  cov_table t;
  if (!build_table(r, &t)) { b->oom = 1; return; }
  free(t.rows);
  const int ne = not_enumerated(r);
  sb_add(b, "\n**Coverage:** %d (path, op, variant) choices the paths' rules can pick; ", t.n);
  if (t.gaps) sb_add(b, "**%d never ran (GAP)**", t.gaps);
  else sb_add(b, "every one ran in some step");
  if (ne) sb_add(b, "; %d path%s without an enumeration (not covered)", ne, ne == 1 ? "" : "s");
  sb_add(b, ".\n");
}

static void ran_by_md(sbuf *b, const cov_row *w) {
  if (!w->records) {
    sb_add(b, "**GAP: never ran**");
    return;
  }
  for (int s = 0; s < w->n_steps; s++) {
    sb_add(b, "%s", s ? ", " : "");
    sb_md_cell(b, w->steps[s].what);
    sb_add(b, " ×%ld", w->steps[s].records);
  }
  if (w->more_steps) sb_add(b, ", +%d records of other steps", w->more_steps);
}

void coverage_md(sbuf *b, const vresults *r) {
  if (!has_coverage(r)) return; /* the summary says so */
  cov_table t;
  if (!build_table(r, &t)) { b->oom = 1; return; }
  const cov_row *rows = t.rows;
  const int n = t.n;
  sb_add(b, "\n### Coverage: each choice of the paths' rules, and the steps that ran it\n\n"
            "| path | op/variant | first selected at | ran in (suite model ×records) |\n|---|---|---|---|\n");
  const int shown = n < COV_MD_ROWS ? n : COV_MD_ROWS;
  for (int i = 0; i < shown; i++) {
    const cov_row *w = &rows[i];
    char when[120];
    snprintf(when, sizeof when, "%.110s", rt_str(w->sel->params, "when", NULL));
    char who[200];
    path_model(w->sel, who, sizeof who);
    sb_add(b, "| ");
    sb_md_cell(b, who);
    sb_add(b, " | `");
    sb_md_cell(b, choice_of(w->sel));
    sb_add(b, "` | ");
    sb_md_cell(b, when);
    sb_add(b, " | ");
    ran_by_md(b, w);
    sb_add(b, " |\n");
  }
  for (int i = 0; i < r->n; i++) { /* paths without an enumeration, at most a few */
    const vrecord *x = r->recs[i];
    if (strcmp(x->suite, "coverage") || x->status == REC_PASS) continue;
    char why[200];
    snprintf(why, sizeof why, "%.180s", x->reason);
    char who[200];
    path_model(x, who, sizeof who);
    sb_add(b, "| ");
    sb_md_cell(b, who);
    sb_add(b, " | (none) | | ");
    sb_md_cell(b, why);
    sb_add(b, " |\n");
  }
  if (n > shown) sb_add(b, "\n…%d more choices (all ran) in the full report.\n", n - shown);
  free(t.rows);
}

void coverage_html(sbuf *b, const vresults *r) {
  sb_add(b, "<h2>Coverage</h2>\n");
  if (!has_coverage(r)) {
    sb_add(b, "<p>");
    sb_html(b, NO_COVERAGE);
    sb_add(b, ".</p>\n");
    return;
  }
  cov_table t;
  if (!build_table(r, &t)) { b->oom = 1; return; }
  const cov_row *rows = t.rows;
  const int n = t.n;
  sb_add(b, "<p>%d choices the paths' rules can pick, %d never ran (GAP). A choice is covered by a record of a "
            "decode step (not the kernels suite) of the same path on the same model whose trace names it.</p>\n", n,
         t.gaps);
  sb_add(b, "<table><tr><th>path</th><th>op/variant</th><th>first selected at</th><th>ran in (suite model "
            "&times;records)</th></tr>\n");
  for (int i = 0; i < n; i++) {
    const cov_row *w = &rows[i];
    char who[200];
    path_model(w->sel, who, sizeof who);
    sb_add(b, "<tr><td>");
    sb_html(b, who);
    sb_add(b, "</td><td>");
    sb_html(b, choice_of(w->sel));
    sb_add(b, "</td><td>");
    sb_html(b, rt_str(w->sel->params, "when", NULL));
    sb_add(b, "</td><td%s>", w->records ? "" : " class=\"fail\"");
    if (!w->records) sb_add(b, "GAP: never ran");
    for (int s = 0; s < w->n_steps; s++) {
      sb_add(b, "%s", s ? ", " : "");
      sb_html(b, w->steps[s].what);
      sb_add(b, " &times;%ld", w->steps[s].records);
    }
    if (w->more_steps) sb_add(b, ", +%d records of other steps", w->more_steps);
    sb_add(b, "</td></tr>\n");
  }
  for (int i = 0; i < r->n; i++) {
    const vrecord *x = r->recs[i];
    if (strcmp(x->suite, "coverage") || x->status == REC_PASS) continue;
    char who[200];
    path_model(x, who, sizeof who);
    sb_add(b, "<tr><td>");
    sb_html(b, who);
    sb_add(b, "</td><td>(none)</td><td></td><td class=\"not_supported\">");
    sb_html(b, x->reason);
    sb_add(b, "</td></tr>\n");
  }
  sb_add(b, "</table>\n");
  free(t.rows);
}
