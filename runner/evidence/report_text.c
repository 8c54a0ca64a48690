#include "runner/evidence/report_text.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sb_add(sbuf *b, const char *fmt, ...) {
  if (b->oom) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (k < 0) return;
  if (b->n + (size_t)k + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
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

void sb_md_cell(sbuf *b, const char *s) {
  for (; *s; s++) {
    if (*s == '|') sb_add(b, "\\|");
    else if (*s == '\n' || *s == '\r') sb_add(b, " ");
    else if (*s == '<') sb_add(b, "&lt;");
    else sb_add(b, "%c", *s);
  }
}

void sb_html(sbuf *b, const char *s) {
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

const char *rt_str(const cJSON *o, const char *k1, const char *k2) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k1);
  if (k2) v = cJSON_GetObjectItemCaseSensitive(v, k2);
  return cJSON_IsString(v) ? v->valuestring : "";
}

bool rt_param(const vrecord *r, const char *k, double *v) {
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(r->params, k);
  if (!cJSON_IsNumber(p)) return false;
  *v = p->valuedouble;
  return true;
}

double rt_metric(const vrecord *r, const char *name) {
  const rec_metric *m = rec_metric_find(r, name);
  return m ? m->value : NAN;
}

void rt_params_text(const vrecord *r, char *out, size_t cap) {
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

void rt_metrics_text(const vrecord *r, char *out, size_t cap) {
  size_t n = 0;
  out[0] = 0;
  for (int i = 0; i < r->n_metrics; i++) {
    const rec_metric *m = &r->metrics[i];
    int k = snprintf(out + n, cap - n, "%s%s=%.4g%s%s", n ? ", " : "", m->name, m->value, m->unit[0] ? " " : "", m->unit);
    if (k < 0 || (size_t)k >= cap - n) break;
    n += (size_t)k;
  }
}

const char *rt_sweep_base(const vresults *r) {
  for (int i = 0; i < r->n; i++)
    if (!strcmp(r->recs[i]->suite, "sweep") && rec_metric_find(r->recs[i], "speedup")) return r->recs[i]->path;
  return NULL;
}

int rt_suites(const vresults *r, const char **out, int cap) {
  int n = 0;
  for (int i = 0; i < r->n; i++) {
    int k;
    for (k = 0; k < n; k++)
      if (!strcmp(out[k], r->recs[i]->suite)) break;
    if (k == n && n < cap) out[n++] = r->recs[i]->suite;
  }
  return n;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int rt_distinct(const vresults *r, const char *k, bool (*keep)(const vrecord *, const void *), const void *ctx,
                double *out, int cap) {
  int n = 0;
  for (int i = 0; i < r->n; i++) {
    double v;
    if (!keep(r->recs[i], ctx) || !rt_param(r->recs[i], k, &v)) continue;
    int j;
    for (j = 0; j < n; j++)
      if (out[j] == v) break;
    if (j == n && n < cap) out[n++] = v;
  }
  qsort(out, (size_t)n, sizeof *out, cmp_d);
  return n;
}

void rt_ctx_text(double v, char *out, size_t cap) {
  long x = (long)v;
  if (x >= 1024 && x % 1024 == 0) snprintf(out, cap, "%ldk", x / 1024);
  else snprintf(out, cap, "%ld", x);
}
