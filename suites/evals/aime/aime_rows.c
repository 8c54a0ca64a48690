/* AIME rows from a local JSONL file (suites/evals/aime/aime_rows.h). */
#define _GNU_SOURCE
#include "suites/evals/aime/aime_rows.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites/evals/served_eval.h"

static const char *const PROBLEM_KEYS[] = {"Problem", "Question", "problem", "question"};
static const char *const ANSWER_KEYS[] = {"Answer", "answer"};
#define AIME_MAX_ANSWER 1e15

/* The one member of o named by keys[n]: NULL with *which = -1 when none, -2 when two are given. */
static const cJSON *one_of(const cJSON *o, const char *const *keys, int n, int *which) {
  const cJSON *v = NULL;
  *which = -1;
  for (int k = 0; k < n; k++) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, keys[k]);
    if (!x) continue;
    if (v) { *which = -2; return NULL; }
    v = x, *which = k;
  }
  return v;
}

/* The integer answer of v (a JSON integer, or a string of one: optional sign, digits, spaces around). */
static bool int_answer(const cJSON *v, long long *out) {
  double x;
  if (cJSON_IsNumber(v)) {
    x = v->valuedouble;
  } else if (cJSON_IsString(v)) {
    const char *s = v->valuestring;
    char *end;
    while (*s == ' ') s++;
    if (!*s || strchr("+-0123456789", *s) == NULL) return false;
    errno = 0;
    const long long r = strtoll(s, &end, 10);
    while (*end == ' ') end++;
    if (errno || *end || end == s) return false;
    x = (double)r;
  } else {
    return false;
  }
  if (!(fabs(x) <= AIME_MAX_ANSWER) || x != floor(x)) return false;
  *out = (long long)x;
  return true;
}

vstatus aime_row_parse(const char *text, const char *file, long line, aime_row *row) {
  cJSON *j = cJSON_Parse(text);
  if (!cJSON_IsObject(j)) {
    cJSON_Delete(j);
    return VERR("%s:%ld: not a JSON object (one row per line: Problem or problem, Answer or answer)", file, line);
  }
  vstatus s = V_OK;
  int wp, wa;
  const cJSON *p = one_of(j, PROBLEM_KEYS, 4, &wp), *a = one_of(j, ANSWER_KEYS, 2, &wa);
  if (wp == -1) s = VERR("%s:%ld: field 'problem': missing (Problem, Question, problem or question)", file, line);
  else if (wp == -2) s = VERR("%s:%ld: field 'problem': given twice (more than one of Problem, Question, problem, question)", file, line);
  else if (!cJSON_IsString(p) || !p->valuestring[0])
    s = VERR("%s:%ld: field '%s': not a non-empty string", file, line, PROBLEM_KEYS[wp]);
  else if (wa == -1) s = VERR("%s:%ld: field 'answer': missing (Answer or answer)", file, line);
  else if (wa == -2) s = VERR("%s:%ld: field 'answer': given twice (Answer and answer)", file, line);
  else if (!int_answer(a, &row->answer))
    s = VERR("%s:%ld: field '%s': not an integer (or a string of one) within +-1e15", file, line, ANSWER_KEYS[wa]);
  if (!s) {
    row->line = line;
    row->problem = strdup(p->valuestring);
    if (!row->problem) s = VERR("%s:%ld: out of memory", file, line);
  }
  cJSON_Delete(j);
  return s;
}

/* The file being read and its rows (seval_rows_each's context). */
typedef struct {
  const char *file;
  aime_rows *out;
} reading;

/* seval_rows_each's row hook: one more row. */
static vstatus add_row(void *ctx, const char *text, size_t len, long line, off_t offset) {
  (void)len, (void)offset;
  reading *rd = ctx;
  aime_rows *out = rd->out;
  if (out->n == 0 || (out->n >= 64 && (out->n & (out->n - 1)) == 0)) { /* room for 64, 128, 256, ... rows */
    const int cap_rows = out->n ? out->n * 2 : 64;
    aime_row *nr = realloc(out->rows, (size_t)cap_rows * sizeof *nr);
    if (!nr) return VERR("%s: out of memory for %d rows", rd->file, cap_rows);
    out->rows = nr;
  }
  aime_row *r = &out->rows[out->n];
  memset(r, 0, sizeof *r);
  VTRY(aime_row_parse(text, rd->file, line, r));
  out->n++;
  return V_OK;
}

vstatus aime_rows_read(const char *file, long limit, aime_rows *out) {
  memset(out, 0, sizeof *out);
  reading rd = {file, out};
  int n;
  vstatus s = seval_rows_each(file, limit, add_row, &rd, &n);
  if (s) aime_rows_free(out);
  return s;
}

void aime_rows_free(aime_rows *d) {
  for (int i = 0; i < d->n; i++) free(d->rows[i].problem);
  free(d->rows);
  d->rows = NULL;
  d->n = 0;
}
