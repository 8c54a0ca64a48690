#define _GNU_SOURCE
#include "runner/evidence/verify.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/read_file.h"
#include "runner/evidence/bundle.h"
#include "runner/evidence/manifest.h"
#include "suites/engine/record.h"
#include "runner/evidence/sha256.h"
#include "runner/evidence/store.h"

static void problem(vverify_report *rep, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(vverify_report *rep, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  cJSON_AddItemToArray(rep->problems, cJSON_CreateString(line));
}

static void on_mismatch(void *ctx, const char *line) { problem(ctx, "%s", line); }

/* ---- SHA256SUMS ---- */
static void check_sums(const vbundle *b, vverify_report *rep) {
  char path[PATH_MAX + 600];
  snprintf(path, sizeof path, "%s/SHA256SUMS", b->dir);
  char **files = NULL;
  int n = 0;
  if (bundle_list_files(b->dir, &files, &n)) { problem(rep, "%s", verr_msg()); return; }
  char *text = NULL;
  if (access(path, F_OK) != 0) {
    if (b->is_bundle) problem(rep, "SHA256SUMS: missing from the bundle");
    goto out;
  }
  if (vfile_read(path, &text, NULL)) { problem(rep, "%s", verr_msg()); goto out; }
  rep->hashed = true;
  char *seen = calloc((size_t)(n ? n : 1), 1);
  int lineno = 0;
  for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
    lineno++;
    if (strlen(l) < 67 || l[64] != ' ' || l[65] != ' ') { problem(rep, "SHA256SUMS: line %d: not 'HASH  path'", lineno); continue; }
    l[64] = 0;
    const char *name = l + 66;
    int k = -1;
    for (int i = 0; i < n; i++)
      if (!strcmp(files[i], name)) { k = i; break; }
    if (k < 0) { problem(rep, "%s: listed in SHA256SUMS but missing", name); continue; }
    seen[k] = 1;
    char fp[PATH_MAX * 2], hex[65];
    snprintf(fp, sizeof fp, "%s/%s", b->dir, name);
    if (sha256_file_hex(fp, hex)) { problem(rep, "%s", verr_msg()); continue; }
    rep->n_files++;
    if (strcmp(hex, l)) problem(rep, "%s: SHA-256 %s does not match SHA256SUMS (%s): the file was changed", name, hex, l);
  }
  for (int i = 0; i < n; i++)
    if (!seen[i]) problem(rep, "%s: present but not listed in SHA256SUMS (added after bundling)", files[i]);
  free(seen);
out:
  free(text);
  for (int i = 0; i < n; i++) free(files[i]);
  free(files);
}

/* ---- schema-level checks ---- */
typedef enum { T_STR, T_NUM, T_INT, T_BOOL, T_OBJ, T_ARR, T_STR_NULL, T_BOOL_NULL, T_INT_NULL } jtype;

static bool type_ok(const cJSON *v, jtype t) {
  switch (t) {
  case T_STR: return cJSON_IsString(v);
  case T_NUM: return cJSON_IsNumber(v);
  /* range first: (long long) of a double outside its range is undefined; 2^53 keeps it exact */
  case T_INT: return cJSON_IsNumber(v) && fabs(v->valuedouble) <= 9007199254740992.0 && v->valuedouble == floor(v->valuedouble);
  case T_BOOL: return cJSON_IsBool(v);
  case T_OBJ: return cJSON_IsObject(v);
  case T_ARR: return cJSON_IsArray(v);
  case T_STR_NULL: return cJSON_IsString(v) || cJSON_IsNull(v);
  case T_BOOL_NULL: return cJSON_IsBool(v) || cJSON_IsNull(v);
  case T_INT_NULL: return cJSON_IsNull(v) || type_ok(v, T_INT);
  }
  return false;
}

static const cJSON *need(vverify_report *rep, const char *file, const cJSON *o, const char *prefix, const char *key, jtype t) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  static const char *tn[] = {"string", "number", "integer", "boolean", "object", "array", "string or null",
                             "boolean or null", "integer or null"};
  if (!v) { problem(rep, "%s: field '%s%s': missing", file, prefix, key); return NULL; }
  if (!type_ok(v, t)) { problem(rep, "%s: field '%s%s': not a %s", file, prefix, key, tn[t]); return NULL; }
  return v;
}

static void check_manifest(const vbundle *b, const cJSON *m, vverify_report *rep) {
  const char *F = "manifest.json";
  if (!cJSON_IsObject(m)) { problem(rep, "%s: not a JSON object", F); return; }
  const cJSON *sv = need(rep, F, m, "", "schema_version", T_INT);
  if (sv && sv->valueint != MANIFEST_SCHEMA_VERSION) problem(rep, "%s: field 'schema_version': %d, this vouch reads %d", F, sv->valueint, MANIFEST_SCHEMA_VERSION);
  const cJSON *tool = need(rep, F, m, "", "tool", T_OBJ);
  if (tool) {
    need(rep, F, tool, "tool.", "name", T_STR);
    need(rep, F, tool, "tool.", "version", T_STR);
    need(rep, F, tool, "tool.", "commit", T_STR);
  }
  const cJSON *s = need(rep, F, m, "", "subject", T_OBJ);
  if (s) {
    need(rep, F, s, "subject.", "repo", T_STR_NULL);
    need(rep, F, s, "subject.", "pr", T_INT_NULL);
    need(rep, F, s, "subject.", "head_sha", T_STR_NULL);
    need(rep, F, s, "subject.", "base_sha", T_STR_NULL);
    need(rep, F, s, "subject.", "dirty", T_BOOL_NULL);
    need(rep, F, s, "subject.", "diff_sha256", T_STR_NULL);
  }
  const cJSON *h = need(rep, F, m, "", "hardware", T_OBJ);
  if (h) {
    need(rep, F, h, "hardware.", "cpu_model", T_STR);
    need(rep, F, h, "hardware.", "ram_bytes", T_NUM);
    need(rep, F, h, "hardware.", "gpus", T_ARR);
    need(rep, F, h, "hardware.", "key", T_STR);
  }
  const cJSON *bd = need(rep, F, m, "", "build", T_OBJ);
  if (bd) {
    need(rep, F, bd, "build.", "compiler", T_STR);
    need(rep, F, bd, "build.", "flags", T_STR);
  }
  const cJSON *plan = need(rep, F, m, "", "plan", T_OBJ);
  if (plan) {
    need(rep, F, plan, "plan.", "name", T_STR);
    const cJSON *ph = need(rep, F, plan, "plan.", "sha256", T_STR);
    const cJSON *pt = need(rep, F, plan, "plan.", "text", T_STR);
    if (ph && pt) {
      char hex[65];
      sha256_hex(pt->valuestring, strlen(pt->valuestring), hex);
      if (strcmp(hex, ph->valuestring)) problem(rep, "%s: field 'plan.sha256': %s is not the hash of plan.text (%s)", F, ph->valuestring, hex);
      char path[PATH_MAX + 600], *txt = NULL;
      snprintf(path, sizeof path, "%s/plan.json", b->dir);
      if (access(path, F_OK) == 0 && vfile_read(path, &txt, NULL) == V_OK) {
        if (strcmp(txt, pt->valuestring)) problem(rep, "plan.json: differs from manifest.json plan.text");
        free(txt);
      }
    }
  }
  const cJSON *seeds = need(rep, F, m, "", "seeds", T_ARR);
  const cJSON *e;
  if (seeds) cJSON_ArrayForEach(e, seeds) if (!type_ok(e, T_INT) && !cJSON_IsString(e)) problem(rep, "%s: field 'seeds[]': not an integer", F);
  need(rep, F, m, "", "started_at", T_STR);
  need(rep, F, m, "", "ended_at", T_STR_NULL);
  const cJSON *cl = need(rep, F, m, "", "command_line", T_ARR);
  if (cl) cJSON_ArrayForEach(e, cl) if (!cJSON_IsString(e)) problem(rep, "%s: field 'command_line[]': not a string", F);
  const cJSON *env = need(rep, F, m, "", "environment", T_OBJ);
  if (env) cJSON_ArrayForEach(e, env) {
    if (!cJSON_IsString(e)) problem(rep, "%s: field 'environment.%s': not a string", F, e->string);
    else if (manifest_name_is_secret(e->string) && strcmp(e->valuestring, "***"))
      problem(rep, "%s: field 'environment.%s': a secret-looking variable is not redacted", F, e->string);
  }
  const cJSON *servers = cJSON_GetObjectItemCaseSensitive(m, "servers"); /* optional: runs that asked a server */
  if (servers && !cJSON_IsArray(servers)) problem(rep, "%s: field 'servers': not an array", F);
  else if (servers) cJSON_ArrayForEach(e, servers) {
      if (!cJSON_IsObject(e)) { problem(rep, "%s: field 'servers[]': not an object", F); continue; }
      need(rep, F, e, "servers[].", "role", T_STR);
      need(rep, F, e, "servers[].", "url", T_STR);
      need(rep, F, e, "servers[].", "model", T_STR);
      need(rep, F, e, "servers[].", "v1_models", T_STR);
    }
  const cJSON *v = need(rep, F, m, "", "verdict", T_STR);
  if (v && strcmp(v->valuestring, "pass") && strcmp(v->valuestring, "fail") && strcmp(v->valuestring, "incomplete"))
    problem(rep, "%s: field 'verdict': '%s' is not pass, fail or incomplete", F, v->valuestring);
}

static void check_results(const vbundle *b, const cJSON *m, const cJSON *res, vverify_report *rep) {
  const char *F = "results.json";
  if (!cJSON_IsObject(res)) { problem(rep, "%s: not a JSON object", F); return; }
  const cJSON *sv = need(rep, F, res, "", "schema_version", T_INT);
  if (sv && sv->valueint != REC_SCHEMA_VERSION) problem(rep, "%s: field 'schema_version': %d, this vouch reads %d", F, sv->valueint, REC_SCHEMA_VERSION);
  const cJSON *complete = need(rep, F, res, "", "complete", T_BOOL);
  const cJSON *verdict = need(rep, F, res, "", "verdict", T_STR);
  const cJSON *counts = need(rep, F, res, "", "counts", T_OBJ);
  const cJSON *recs = need(rep, F, res, "", "records", T_ARR);
  if (!recs) return;
  int n = cJSON_GetArraySize(recs), got = 0;
  vrecord **rv = calloc((size_t)(n ? n : 1), sizeof *rv);
  int cnt[REC_STATUS_N] = {0};
  const cJSON *e;
  int i = 0;
  cJSON_ArrayForEach(e, recs) {
    char where[96];
    snprintf(where, sizeof where, "%s: records[%d]", F, i++);
    vrecord *r = NULL;
    if (rec_from_json(e, where, &r)) { problem(rep, "%s", verr_msg()); continue; }
    char w2[600];
    snprintf(w2, sizeof w2, "%s (%s/%s/%s)", where, r->suite, r->case_id, r->path);
    rec_rederive_check(r, w2, on_mismatch, rep);
    for (int k = 0; k < got; k++)
      if (!strcmp(rv[k]->suite, r->suite) && !strcmp(rv[k]->case_id, r->case_id) && !strcmp(rv[k]->path, r->path))
        problem(rep, "%s: duplicate case (suite, case_id, path)", w2);
    if (r->trace_ref[0]) {
      char tp[PATH_MAX + 800];
      char *txt = NULL;
      snprintf(tp, sizeof tp, "%s/%s", b->dir, r->trace_ref);
      if (strstr(r->trace_ref, "..") || r->trace_ref[0] == '/') problem(rep, "%s: field 'trace_ref': '%s' leaves the bundle", w2, r->trace_ref);
      else if (vfile_read(tp, &txt, NULL)) problem(rep, "%s: field 'trace_ref': %s missing", w2, r->trace_ref);
      else {
        cJSON *tj = cJSON_Parse(txt);
        if (!tj) problem(rep, "%s: not valid JSON", r->trace_ref);
        cJSON_Delete(tj);
      }
      free(txt);
    }
    cnt[r->status]++;
    rv[got++] = r;
  }
  rep->n_records = got;
  if (counts)
    for (int s = 0; s < REC_STATUS_N; s++) {
      const cJSON *c = cJSON_GetObjectItemCaseSensitive(counts, rec_status_name((rec_status)s));
      if (!c && s == REC_UNDECIDED && cnt[s] == 0) continue; /* bundles made before the status existed */
      if (!cJSON_IsNumber(c) || c->valueint != cnt[s])
        problem(rep, "%s: field 'counts.%s': stored %d, records say %d", F, rec_status_name((rec_status)s),
                cJSON_IsNumber(c) ? c->valueint : -1, cnt[s]);
    }
  if (complete && verdict && got == n) {
    const char *want = rec_verdict(rv, got, cJSON_IsTrue(complete));
    if (strcmp(want, verdict->valuestring)) problem(rep, "%s: field 'verdict': stored '%s', recomputed '%s'", F, verdict->valuestring, want);
    const cJSON *mv = cJSON_GetObjectItemCaseSensitive(m, "verdict");
    if (cJSON_IsString(mv) && strcmp(mv->valuestring, want))
      problem(rep, "manifest.json: field 'verdict': '%s', results recompute to '%s'", mv->valuestring, want);
  }
  for (int k = 0; k < got; k++) rec_free(rv[k]);
  free(rv);

  /* results.json must be exactly what results.sqlite holds */
  char sp[PATH_MAX + 600];
  snprintf(sp, sizeof sp, "%s/results.sqlite", b->dir);
  vstore st;
  if (store_open(&st, sp, true)) { problem(rep, "%s", verr_msg()); return; }
  cJSON *dbrecs = NULL;
  if (store_records_json(&st, &dbrecs)) {
    problem(rep, "%s", verr_msg());
  } else {
    int dn = cJSON_GetArraySize(dbrecs);
    if (dn != n) problem(rep, "results.json has %d records, results.sqlite %d", n, dn);
    for (int k = 0; k < n && k < dn; k++) {
      char *a = cJSON_PrintUnformatted(cJSON_GetArrayItem(recs, k));
      char *c = cJSON_PrintUnformatted(cJSON_GetArrayItem(dbrecs, k));
      if (!a || !c || strcmp(a, c)) problem(rep, "results.json: records[%d]: differs from results.sqlite row %d", k, k + 1);
      free(a);
      free(c);
    }
  }
  cJSON_Delete(dbrecs);
  store_check_columns(&st, on_mismatch, rep);
  char *state = NULL;
  if (store_meta_get(&st, "state", &state) == V_OK && complete) {
    bool db_complete = state && !strcmp(state, "complete");
    if (db_complete != cJSON_IsTrue(complete))
      problem(rep, "results.json: field 'complete': %s, results.sqlite state '%s'", cJSON_IsTrue(complete) ? "true" : "false", state ? state : "(none)");
  }
  free(state);
  store_close(&st);
}

static cJSON *read_json(const vbundle *b, const char *name, vverify_report *rep) {
  char path[PATH_MAX + 600], *txt = NULL;
  snprintf(path, sizeof path, "%s/%s", b->dir, name);
  if (vfile_read(path, &txt, NULL)) { problem(rep, "%s: missing or unreadable", name); return NULL; }
  cJSON *j = cJSON_Parse(txt);
  free(txt);
  if (!j) problem(rep, "%s: not valid JSON", name);
  return j;
}

vstatus verify_path(const char *path, vverify_report *rep) {
  memset(rep, 0, sizeof *rep);
  rep->problems = cJSON_CreateArray();
  if (!rep->problems) return VERR("verify: out of memory");
  vbundle b;
  vstatus s = bundle_materialize(path, &b);
  if (s) { verify_report_free(rep); return s; }
  check_sums(&b, rep);
  cJSON *m = read_json(&b, "manifest.json", rep);
  cJSON *res = read_json(&b, "results.json", rep);
  if (m) check_manifest(&b, m, rep);
  if (res) check_results(&b, m, res, rep);
  cJSON_Delete(m);
  cJSON_Delete(res);
  bundle_release(&b);
  return V_OK;
}

void verify_report_free(vverify_report *rep) {
  cJSON_Delete(rep->problems);
  rep->problems = NULL;
}
