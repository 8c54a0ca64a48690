/* MRCR rows from a local JSONL file (suites/evals/mrcr/mrcr_rows.h). */
#define _GNU_SOURCE
#include "suites/evals/mrcr/mrcr_rows.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites/evals/served_eval.h"

/* Byte offset of the first invalid UTF-8 sequence in s[n] (what Python's strict decoder refuses:
 * stray or missing continuation bytes, overlong forms, surrogates, past U+10FFFF), or -1. */
static long utf8_bad(const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    int k;
    uint32_t cp, min;
    if (c < 0x80) { i++; continue; }
    if ((c & 0xE0) == 0xC0) k = 1, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0) k = 2, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0) k = 3, cp = c & 0x07, min = 0x10000;
    else return (long)i;
    for (int j = 1; j <= k; j++) {
      if (i + (size_t)j >= n || (s[i + j] & 0xC0) != 0x80) return (long)i;
      cp = cp << 6 | (s[i + j] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return (long)i;
    i += (size_t)k + 1;
  }
  return -1;
}

/* The string member `key` of o, checked (UTF-8), or NULL with the error set. */
static const char *str_field(const cJSON *o, const char *key, const char *file, long line) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!v) { VERR("%s:%ld: field '%s': missing", file, line, key); return NULL; }
  if (!cJSON_IsString(v)) { VERR("%s:%ld: field '%s': not a string", file, line, key); return NULL; }
  const long bad = utf8_bad((const unsigned char *)v->valuestring, strlen(v->valuestring));
  if (bad >= 0) { VERR("%s:%ld: field '%s': invalid UTF-8 at byte %ld", file, line, key, bad); return NULL; }
  return v->valuestring;
}

/* The integer member `key` of o in [lo, hi] into *out; error names the file, line and field. */
static vstatus int_field(const cJSON *o, const char *key, long lo, long hi, const char *file, long line, long *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!v) return VERR("%s:%ld: field '%s': missing", file, line, key);
  if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < (double)lo ||
      v->valuedouble > (double)hi)
    return VERR("%s:%ld: field '%s': not an integer in [%ld, %ld]", file, line, key, lo, hi);
  *out = (long)v->valuedouble;
  return V_OK;
}

static char *dup_str(const char *s) {
  const size_t n = strlen(s);
  char *d = malloc(n + 1);
  if (d) memcpy(d, s, n + 1);
  return d;
}

vstatus mrcr_row_parse(const char *text, const char *file, long line, mrcr_row *row, cJSON **messages) {
  if (messages) *messages = NULL;
  cJSON *j = cJSON_Parse(text);
  if (!cJSON_IsObject(j)) {
    cJSON_Delete(j);
    return VERR("%s:%ld: not a JSON object (one row per line: prompt, answer, random_string_to_prepend, n_needles, ...)",
                file, line);
  }
  vstatus s = V_OK;
  const char *prompt = NULL, *answer = NULL, *prefix = NULL;
  long nn = 0, dmi = 0, tm = 0, nc = 0;
  cJSON *msgs = NULL;
  if (!(prompt = str_field(j, "prompt", file, line)) || !(answer = str_field(j, "answer", file, line)) ||
      !(prefix = str_field(j, "random_string_to_prepend", file, line)))
    s = V_ERR;
  if (!s) s = int_field(j, "n_needles", 1, 1000000, file, line, &nn);
  if (!s) s = int_field(j, "desired_msg_index", 0, 100000000, file, line, &dmi);
  if (!s) s = int_field(j, "total_messages", 1, 100000000, file, line, &tm);
  if (!s) s = int_field(j, "n_chars", 0, 1000000000000L, file, line, &nc);
  if (!s) {
    msgs = cJSON_Parse(prompt);
    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0)
      s = VERR("%s:%ld: field 'prompt': not a JSON-encoded non-empty list of chat messages", file, line);
    const cJSON *m;
    int k = 0;
    if (!s) cJSON_ArrayForEach(m, msgs) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role"), *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!cJSON_IsObject(m) || !cJSON_IsString(role) || !cJSON_IsString(content)) {
          s = VERR("%s:%ld: field 'prompt': message %d is not a {\"role\": string, \"content\": string} object", file, line, k);
          break;
        }
        const long bad = utf8_bad((const unsigned char *)content->valuestring, strlen(content->valuestring));
        if (bad >= 0) { s = VERR("%s:%ld: field 'prompt': message %d: invalid UTF-8 at byte %ld", file, line, k, bad); break; }
        k++;
      }
    if (!s && row) {
      row->answer = dup_str(answer);
      row->prefix = dup_str(prefix);
      if (!row->answer || !row->prefix) s = VERR("%s:%ld: out of memory", file, line);
      row->line = line;
      row->n_needles = (int)nn;
      row->desired_msg_index = (int)dmi;
      row->total_messages = (int)tm;
      row->n_chars = nc;
      row->n_messages = k;
    }
  }
  if (!s && messages) *messages = msgs, msgs = NULL;
  cJSON_Delete(msgs);
  cJSON_Delete(j);
  return s;
}

/* seval_rows_each's row hook: one more row of the mrcr_rows in ctx. */
static vstatus add_row(void *ctx, const char *text, size_t len, long line, off_t offset) {
  mrcr_rows *out = ctx;
  if (out->n == 0 || (out->n >= 64 && (out->n & (out->n - 1)) == 0)) { /* room for 64, 128, 256, ... rows */
    const int cap_rows = out->n ? out->n * 2 : 64;
    mrcr_row *nr = realloc(out->rows, (size_t)cap_rows * sizeof *nr);
    if (!nr) return VERR("%s: out of memory for %d rows", out->file, cap_rows);
    out->rows = nr;
  }
  mrcr_row *r = &out->rows[out->n];
  memset(r, 0, sizeof *r);
  vstatus s = mrcr_row_parse(text, out->file, line, r, NULL);
  if (s) { free(r->answer); free(r->prefix); return s; }
  r->offset = offset;
  r->len = len;
  out->n++;
  return V_OK;
}

vstatus mrcr_rows_read(const char *file, long limit, mrcr_rows *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->file, sizeof out->file, "%s", file);
  int n;
  vstatus s = seval_rows_each(file, limit, add_row, out, &n);
  if (s) mrcr_rows_free(out);
  return s;
}

vstatus mrcr_rows_messages(const mrcr_rows *d, int i, cJSON **messages) {
  *messages = NULL;
  const mrcr_row *r = &d->rows[i];
  FILE *f = fopen(d->file, "rb");
  if (!f) return VERR("%s: cannot read: %s", d->file, strerror(errno));
  char *t = malloc(r->len + 1);
  vstatus s = V_OK;
  if (!t) s = VERR("%s:%ld: out of memory", d->file, r->line);
  else if (fseeko(f, r->offset, SEEK_SET) || fread(t, 1, r->len, f) != r->len)
    s = VERR("%s:%ld: cannot read the row again (the file changed?)", d->file, r->line);
  fclose(f);
  if (!s) {
    t[r->len] = 0;
    mrcr_row again = {0};
    s = mrcr_row_parse(t, d->file, r->line, &again, messages);
    if (!s && (strcmp(again.answer, r->answer) || strcmp(again.prefix, r->prefix)))
      s = VERR("%s:%ld: the row changed since the file was read", d->file, r->line);
    free(again.answer);
    free(again.prefix);
    if (s) { cJSON_Delete(*messages); *messages = NULL; }
  }
  free(t);
  return s;
}

void mrcr_rows_free(mrcr_rows *d) {
  for (int i = 0; i < d->n; i++) {
    free(d->rows[i].answer);
    free(d->rows[i].prefix);
  }
  free(d->rows);
  d->rows = NULL;
  d->n = 0;
}
