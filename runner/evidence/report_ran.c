/* The report's "What ran" section: from each record's `ran` and `fallbacks` (issue 37: the trace
 * of every compared path, per case), which (op, variant) pairs each path ran, in how many records
 * and which suites, and every hand-over to another path. A reviewer reads here that the optimized
 * kernels were the ones compared (e.g. latency's mla_decode/v3_mma in 25 records) and not a
 * fallback; a variant the kernels suite tests that no decode step ran does not show up here, which
 * is the gap to read against `vouch kernels --list`. */
#include "runner/evidence/report_ran.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#define RAN_ROWS 40 /* rows of the table in the comment; the rest are counted */

typedef struct {
  char path[128];     /* the path whose trace it is (the `ran` object's key) */
  char what[160];     /* "OP/VARIANT" (or "OTHER:OP/VARIANT" for an event another path recorded) */
  long records;       /* records that name it */
  double count;       /* its count summed over those records (a case's records may repeat a path) */
  unsigned suites;    /* bit i: suite i of g_suites named it */
} ran_row;

static const char *const g_suites[] = {"diverge", "features", "evals", "kernels", "sweep", "generate"};
enum { N_SUITES = sizeof g_suites / sizeof *g_suites };

static unsigned suite_bit(const char *s) {
  for (int i = 0; i < N_SUITES; i++)
    if (!strcmp(s, g_suites[i])) return 1u << i;
  return 0;
}

static int by_path_then_what(const void *a, const void *b) {
  const ran_row *x = a, *y = b;
  const int c = strcmp(x->path, y->path);
  return c ? c : strcmp(x->what, y->what);
}

/* The row of (path, what) in rows[0..*n), added when new; NULL when rows is full (cap). */
static ran_row *row_of(ran_row *rows, int *n, int cap, const char *path, const char *what) {
  for (int i = 0; i < *n; i++)
    if (!strcmp(rows[i].path, path) && !strcmp(rows[i].what, what)) return &rows[i];
  if (*n >= cap) return NULL;
  ran_row *r = &rows[(*n)++];
  memset(r, 0, sizeof *r);
  snprintf(r->path, sizeof r->path, "%s", path);
  snprintf(r->what, sizeof r->what, "%s", what);
  return r;
}

/* Adds record x's `ran` to rows; *dropped counts pairs past cap. */
static void add_record(ran_row *rows, int *n, int cap, long *dropped, const vrecord *x) {
  const cJSON *path;
  cJSON_ArrayForEach(path, x->ran) {
    if (!cJSON_IsObject(path) || !path->string) continue;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, path) {
      if (!ev->string || !cJSON_IsNumber(ev)) continue;
      ran_row *r = row_of(rows, n, cap, path->string, ev->string);
      if (!r) { (*dropped)++; continue; }
      r->records++;
      r->count += ev->valuedouble;
      r->suites |= suite_bit(x->suite);
    }
  }
}

static void fallbacks_md(sbuf *b, const vresults *r) {
  long n = 0;
  const vrecord *first = NULL;
  const cJSON *f0 = NULL;
  for (int i = 0; i < r->n; i++) {
    const int k = cJSON_GetArraySize(r->recs[i]->fallbacks);
    if (k > 0 && !first) first = r->recs[i], f0 = cJSON_GetArrayItem(first->fallbacks, 0);
    n += k;
  }
  if (!n) {
    sb_add(b, "\nNo path handed a case to another path (no fallback in any record's trace).\n");
    return;
  }
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(f0, "path"), *to = cJSON_GetObjectItemCaseSensitive(f0, "to"),
              *why = cJSON_GetObjectItemCaseSensitive(f0, "reason");
  sb_add(b, "\n**%ld hand-overs to another path** (declared with `--expect-fallback`), e.g. `%.40s` in %s/`%.80s`: ", n,
         cJSON_IsString(p) ? p->valuestring : "?", first->suite, first->case_id);
  sb_md_cell(b, cJSON_IsString(to) ? to->valuestring : "?");
  sb_add(b, " (");
  sb_md_cell(b, cJSON_IsString(why) ? why->valuestring : "no reason given");
  sb_add(b, ").\n");
}

void ran_md(sbuf *b, const vresults *r) {
  int with = 0;
  for (int i = 0; i < r->n; i++) with += r->recs[i]->ran != NULL;
  if (!with) return; /* a run made before records named what ran, or of suites that do not */
  enum { CAP = 512 };
  ran_row *rows = calloc(CAP, sizeof *rows);
  if (!rows) { b->oom = 1; return; }
  int n = 0;
  long dropped = 0;
  for (int i = 0; i < r->n; i++)
    if (r->recs[i]->ran) add_record(rows, &n, CAP, &dropped, r->recs[i]);
  qsort(rows, (size_t)n, sizeof *rows, by_path_then_what);
  sb_add(b, "\n### What ran (%d records name it, from the paths' traces)\n\n| path | op/variant | records | calls (summed over the records) | suites |\n"
            "|---|---|---:|---:|---|\n", with);
  const int shown = n < RAN_ROWS ? n : RAN_ROWS;
  for (int i = 0; i < shown; i++) {
    sb_add(b, "| ");
    sb_md_cell(b, rows[i].path);
    sb_add(b, " | `");
    sb_md_cell(b, rows[i].what);
    sb_add(b, "` | %ld | %.0f | ", rows[i].records, rows[i].count);
    const char *sep = "";
    for (int s = 0; s < N_SUITES; s++)
      if (rows[i].suites & (1u << s)) sb_add(b, "%s%s", sep, g_suites[s]), sep = ", ";
    sb_add(b, " |\n");
  }
  if (n > shown || dropped)
    sb_add(b, "\n…%d more (path, op/variant) pairs%s in the full report.\n", n - shown,
           dropped ? " (and pairs past the table's capacity)" : "");
  fallbacks_md(b, r);
  free(rows);
}
