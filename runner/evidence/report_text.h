/* Text building for the reports (runner/evidence/report.c, runner/evidence/report_html.c): a growable
 * buffer, Markdown-cell and HTML escaping, and the record lookups both reports share. */
#ifndef VOUCH_RUNNER_EVIDENCE_REPORT_TEXT_H
#define VOUCH_RUNNER_EVIDENCE_REPORT_TEXT_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "runner/evidence/bundle.h"

typedef struct {
  char *p;    /* text, NUL-terminated */
  size_t n;   /* length */
  size_t cap; /* allocated */
  int oom;    /* an allocation failed */
} sbuf;

void sb_add(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Markdown table cell text: no pipes, newlines or '<'. */
void sb_md_cell(sbuf *b, const char *s);
void sb_html(sbuf *b, const char *s);
/* String at o.k1[.k2], "" when absent. */
const char *rt_str(const cJSON *o, const char *k1, const char *k2);
/* Numeric parameter k of r. */
bool rt_param(const vrecord *r, const char *k, double *v);
/* Value of metric `name` of r, NaN when absent. */
double rt_metric(const vrecord *r, const char *name);
/* "k=v k=v" of r's parameters, and "name=value unit, ..." of its metrics. */
void rt_params_text(const vrecord *r, char *out, size_t cap);
void rt_metrics_text(const vrecord *r, char *out, size_t cap);
/* The sweep's baseline path (its first path: the speed-up denominator), or NULL. */
const char *rt_sweep_base(const vresults *r);
/* Distinct suites in first-seen order. */
int rt_suites(const vresults *r, const char **out, int cap);
/* Sorted distinct values (at most cap) of parameter k over the records for which keep(r, ctx). */
int rt_distinct(const vresults *r, const char *k, bool (*keep)(const vrecord *, const void *), const void *ctx,
                double *out, int cap);
/* "64", "4k", "128k": a context length or bin. */
void rt_ctx_text(double v, char *out, size_t cap);

#endif
