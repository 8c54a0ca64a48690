/* The record sink of one suite invocation (suites/engine/engine.h). */
#include "suites/engine/engine.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic_file.h"

vstatus eng_add(veng *e, vrecord *r) {
  assert(e && r);
  if (e->n == e->cap) {
    const int cap = e->cap ? 2 * e->cap : 32;
    vrecord **nv = realloc(e->v, (size_t)cap * sizeof *nv);
    if (!nv) {
      vstatus s = VERR("%s/%s: out of memory for %d records", r->suite, r->case_id, cap);
      rec_free(r);
      return s;
    }
    e->v = nv;
    if (e->traces) { /* a trace was attached before: its slots grow with v */
      char **nt = realloc(e->traces, (size_t)cap * sizeof *nt);
      if (!nt) {
        vstatus s = VERR("%s/%s: out of memory for %d traces", r->suite, r->case_id, cap);
        rec_free(r);
        return s;
      }
      memset(nt + e->cap, 0, (size_t)(cap - e->cap) * sizeof *nt);
      e->traces = nt;
    }
    e->cap = cap;
  }
  e->v[e->n++] = r;
  return V_OK;
}

vrecord *eng_new(veng *e, const char *suite, const char *case_id, const char *path) {
  assert(e && suite && case_id && path);
  vrecord *r = rec_new(suite, case_id, path);
  return r && eng_add(e, r) == V_OK ? r : NULL;
}

vstatus eng_trace(veng *e, const char *json_text) {
  assert(e && json_text);
  if (e->n == 0) return VERR("eng_trace: no record to attach a trace to");
  if (!e->traces && !(e->traces = calloc((size_t)e->cap, sizeof *e->traces)))
    return VERR("%s/%s: out of memory for its trace", e->v[e->n - 1]->suite, e->v[e->n - 1]->case_id);
  char *t = strdup(json_text);
  if (!t) return VERR("%s/%s: out of memory for its trace", e->v[e->n - 1]->suite, e->v[e->n - 1]->case_id);
  free(e->traces[e->n - 1]);
  e->traces[e->n - 1] = t;
  return V_OK;
}

vstatus eng_flush(veng *e, const vrec_sink *sink) {
  assert(e && e->stored <= e->n);
  if (!sink) { e->stored = e->n; return V_OK; } /* a suite on its own: --json only */
  for (; e->stored < e->n; e->stored++) VTRY(rec_emit(sink, e->v[e->stored], e->traces ? e->traces[e->stored] : NULL));
  return V_OK;
}

vstatus eng_write_json(const veng *e, const char *file) {
  if (!file) return V_OK;
  cJSON *root = cJSON_CreateObject(), *arr = root ? cJSON_AddArrayToObject(root, "records") : NULL;
  for (int i = 0; arr && i < e->n; i++) cJSON_AddItemToArray(arr, rec_to_json(e->v[i]));
  vstatus s = arr ? vfile_write_json(file, root, true) : VERR("%s: out of memory building the records", file);
  cJSON_Delete(root);
  return s;
}

void eng_free(veng *e) {
  for (int i = 0; i < e->n; i++) rec_free(e->v[i]);
  for (int i = 0; e->traces && i < e->n; i++) free(e->traces[i]);
  free(e->traces);
  free(e->v);
  *e = (veng){0};
}
