#include "common/trace.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

void vtrace_init(vtrace *t, bool enabled) {
  memset(t, 0, sizeof *t);
  t->enabled = enabled;
  t->max_events = 1 << 20;
}

void vtrace_init_tally(vtrace *t) {
  vtrace_init(t, true);
  t->tally = true;
  t->max_events = 4096;
}

void vtrace_clear(vtrace *t) {
  t->n = 0;
  t->dropped = 0;
}

bool vtrace_copy(vtrace *dst, const vtrace *src) {
  *dst = *src;
  dst->tee = NULL;
  dst->ev = NULL;
  dst->cap = 0;
  if (src->n == 0) return true;
  dst->ev = malloc((size_t)src->n * sizeof *dst->ev);
  if (!dst->ev) {
    dst->n = 0;
    return false;
  }
  memcpy(dst->ev, src->ev, (size_t)src->n * sizeof *dst->ev);
  dst->cap = src->n;
  return true;
}

int vtrace_n_fallbacks(const vtrace *t) {
  int k = 0;
  for (int i = 0; t && i < t->n; i++) k += t->ev[i].kind == TR_FALLBACK;
  return k;
}

void vtrace_free(vtrace *t) {
  free(t->ev);
  memset(t, 0, sizeof *t);
}

void vtrace_next_step(vtrace *t) {
  if (t) t->step++;
}

/* The event of t identical to (kind, path, op, variant, detail) that a new one merges into, NULL: none.
 * A step trace merges within the current step and compares the detail; a tally merges across steps and
 * keeps the first detail (a shape bucket or reason that varies per step must not grow it). */
static vtrace_event *same_event(vtrace *t, vtrace_kind kind, const char *path, const char *op, const char *variant,
                                const char *detail) {
  for (int i = t->n - 1; i >= 0 && (t->tally || t->ev[i].step == t->step); i--) {
    vtrace_event *e = &t->ev[i];
    if (e->kind == kind && !strcmp(e->path, path) && !strcmp(e->op, op) && !strcmp(e->variant, variant) &&
        (t->tally || !strcmp(e->detail, detail)))
      return e;
  }
  return NULL;
}

static void put(vtrace *t, vtrace_kind kind, const char *path, const char *op, const char *variant, const char *detail) {
  if (!t) return;
  if (t->tee && t->tee != t) put(t->tee, kind, path, op, variant, detail);
  if (!t->enabled) return;
  if (!detail) detail = "";
  vtrace_event *same = same_event(t, kind, path, op, variant, detail);
  if (same) {
    same->count++;
    return;
  }
  if (t->n >= t->max_events) { t->dropped++; return; }
  if (t->n == t->cap) {
    int cap = t->cap ? 2 * t->cap : 256;
    vtrace_event *nv = realloc(t->ev, (size_t)cap * sizeof *nv);
    if (!nv) { t->dropped++; return; }
    t->ev = nv;
    t->cap = cap;
  }
  vtrace_event *e = &t->ev[t->n++];
  memset(e, 0, sizeof *e);
  e->step = t->step;
  e->kind = kind;
  e->count = 1;
  snprintf(e->path, sizeof e->path, "%s", path);
  snprintf(e->op, sizeof e->op, "%s", op);
  snprintf(e->variant, sizeof e->variant, "%s", variant);
  snprintf(e->detail, sizeof e->detail, "%s", detail);
}

void vtrace_ran(vtrace *t, const char *path, const char *op, const char *variant, const char *detail) {
  put(t, TR_RAN, path, op, variant, detail);
}

void vtrace_fallback(vtrace *t, const char *path, const char *op, const char *to, const char *reason) {
  put(t, TR_FALLBACK, path, op, to, reason);
}

void vtrace_note(vtrace *t, const char *path, const char *what) { put(t, TR_NOTE, path, "-", "-", what); }

bool vtrace_has(const vtrace *t, const char *op, const char *variant, int64_t from_step) {
  if (!t) return false;
  for (int i = 0; i < t->n; i++) {
    const vtrace_event *e = &t->ev[i];
    if (e->kind == TR_RAN && e->step >= from_step && !strcmp(e->op, op) && !strcmp(e->variant, variant)) return true;
  }
  return false;
}

static const char *kind_name(vtrace_kind k) {
  return k == TR_RAN ? "ran" : k == TR_FALLBACK ? "FALLBACK" : "note";
}

void vtrace_print(const vtrace *t, FILE *f) {
  for (int i = 0; i < t->n; i++) {
    const vtrace_event *e = &t->ev[i];
    if (e->kind == TR_FALLBACK)
      fprintf(f, "step %-5lld %-9s %-10s %-18s -> %s: %s\n", (long long)e->step, kind_name(e->kind), e->path, e->op,
              e->variant, e->detail);
    else
      fprintf(f, "step %-5lld %-9s %-10s %-18s %-22s x%-4lld %s\n", (long long)e->step, kind_name(e->kind), e->path,
              e->op, e->variant, (long long)e->count, e->detail);
  }
  if (t->dropped) fprintf(f, "(%lld trace events dropped past the cap)\n", (long long)t->dropped);
}

char *vtrace_to_json(const vtrace *t) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; i < t->n; i++) {
    const vtrace_event *e = &t->ev[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "step", (double)e->step);
    cJSON_AddStringToObject(o, "kind", kind_name(e->kind));
    cJSON_AddStringToObject(o, "path", e->path);
    cJSON_AddStringToObject(o, "op", e->op);
    cJSON_AddStringToObject(o, e->kind == TR_FALLBACK ? "to" : "variant", e->variant);
    cJSON_AddStringToObject(o, e->kind == TR_FALLBACK ? "reason" : "detail", e->detail);
    cJSON_AddNumberToObject(o, "count", (double)e->count);
    cJSON_AddItemToArray(a, o);
  }
  char *s = cJSON_PrintUnformatted(a);
  cJSON_Delete(a);
  return s;
}
