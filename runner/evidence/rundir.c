#define _GNU_SOURCE
/* A result directory (runner/evidence/rundir.h): manifest.json, plan.json, replay.sh, results.sqlite
 * (written as each case finishes), results.json (regenerated from SQLite), traces/, logs/. */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic_file.h"
#include "common/redact.h"
#include "runner/evidence/history.h"
#include "runner/evidence/manifest.h"
#include "runner/evidence/rundir.h"
#include "suites/engine/record.h"
#include "runner/evidence/store.h"
#include "vouch_build_options.h"
#include "vouch_git_commit.h" /* VOUCH_GIT_COMMIT (build dir, cmake/git_commit.cmake) */

struct vrundir {
  char dir[PATH_MAX];   /* the result directory */
  vstore st;            /* results.sqlite, open read-write */
  cJSON *manifest;      /* the manifest as written at open */
  int n;                /* records added */
  int n_bad;            /* of those, failed or errored (and kept failed ones a resumed suite reported) */
  int next_trace;       /* number of the next traces/NNNN.json */
  bool resumed;         /* opened by rec_resume_dir: a case already stored is not stored again */
  vrec_sink sink;       /* this directory as the suites' run sink (vrundir_sink; ctx: this vrundir) */
};

static vstatus mkdir_p(const char *path) {
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return VERR("%s: cannot create directory: %s", tmp, strerror(errno));
    *p = '/';
  }
  if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return VERR("%s: cannot create directory: %s", tmp, strerror(errno));
  return V_OK;
}

/* Writes text (and a final newline when `newline`) to dir/name whole or not at all
 * (common/atomic_file.h), with anything that looks like a credential redacted (common/redact.h). */
static vstatus write_file(const char *dir, const char *name, const char *raw, bool newline, mode_t mode) {
  char path[PATH_MAX + 64];
  char *text = redact_dup(raw);
  if (!text) return VERR("%s/%s: out of memory", dir, name);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  vstatus s = vfile_write_text(path, text, newline, mode);
  free(text);
  return s;
}

static vstatus write_json(const char *dir, const char *name, const cJSON *j) {
  char *txt = cJSON_Print(j);
  if (!txt) return VERR("%s/%s: out of memory serializing", dir, name);
  vstatus s = write_file(dir, name, txt, true, 0644);
  free(txt);
  return s;
}

/* Regenerates results.json from the store; *verdict_out gets the run verdict. */
static vstatus write_results(const char *dir, vstore *st, bool complete, char verdict_out[16], cJSON **results_out) {
  cJSON *recs = NULL;
  VTRY(store_records_json(st, &recs));
  int counts[REC_STATUS_N] = {0};
  const cJSON *e;
  cJSON_ArrayForEach(e, recs) {
    int s = rec_status_parse(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "status")));
    if (s >= 0) counts[s]++;
  }
  const char *verdict = !complete ? "incomplete" : (counts[REC_FAIL] || counts[REC_ERROR]) ? "fail" : "pass";
  snprintf(verdict_out, 16, "%s", verdict);
  cJSON *r = cJSON_CreateObject();
  cJSON_AddNumberToObject(r, "schema_version", REC_SCHEMA_VERSION);
  cJSON_AddBoolToObject(r, "complete", complete);
  cJSON_AddStringToObject(r, "verdict", verdict);
  cJSON *c = cJSON_AddObjectToObject(r, "counts");
  for (int i = 0; i < REC_STATUS_N; i++) cJSON_AddNumberToObject(c, rec_status_name((rec_status)i), counts[i]);
  cJSON_AddItemToObject(r, "records", recs);
  vstatus s = write_json(dir, "results.json", r);
  if (s == V_OK && results_out) *results_out = r;
  else cJSON_Delete(r);
  return s;
}

static vstatus save_manifest(vrundir *rd) {
  VTRY(write_json(rd->dir, "manifest.json", rd->manifest));
  char *txt = cJSON_PrintUnformatted(rd->manifest);
  if (!txt) return VERR("%s/manifest.json: out of memory", rd->dir);
  vstatus s = store_meta_set(&rd->st, "manifest", txt);
  free(txt);
  return s;
}

/* Single-quotes a string for sh. */
static void sh_quote(const char *s, char *out, size_t cap) {
  size_t k = 0;
  if (cap < 3) { if (cap) out[0] = 0; return; }
  out[k++] = '\'';
  for (; *s && k + 6 < cap; s++) {
    if (*s == '\'') { memcpy(out + k, "'\\''", 4); k += 4; }
    else out[k++] = *s;
  }
  out[k++] = '\'';
  out[k] = 0;
}

static vstatus write_replay(vrundir *rd, const manifest_opts *o) {
  char text[12288], line[1024];
  int n = snprintf(text, sizeof text,
      "#!/bin/sh\n"
      "# Replays this run: rebuilds vouch at the commit that made it with the same cmake options,\n"
      "# reruns the same plan, variables and seeds, and compares the new results with these.\n"
      "# Usage: sh replay.sh [OUT_DIR]\n"
      "#   VOUCH_SRC=DIR  a git checkout of vouch holding that commit (default: the current directory)\n"
      "#   VOUCH=BINARY   skip the rebuild and use this vouch\n"
      "# Original command line:");
  for (int i = 0; i < o->argc && n < (int)sizeof text - 512; i++) {
    sh_quote(cJSON_GetStringValue(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(rd->manifest, "command_line"), i)),
             line, sizeof line);
    n += snprintf(text + n, sizeof text - (size_t)n, " %s", line);
  }
  char opts_q[1024];
  sh_quote(VOUCH_CMAKE_OPTIONS, opts_q, sizeof opts_q);
  n += snprintf(text + n, sizeof text - (size_t)n,
      "\nset -eu\n"
      "here=$(cd \"$(dirname \"$0\")\" && pwd)\n"
      "out=${1:-replay-$(date +%%Y%%m%%d-%%H%%M%%S)}\n"
      "commit=%s\n"
      "cmake_options=%s\n"
      "if [ -z \"${VOUCH:-}\" ]; then\n"
      "  src=${VOUCH_SRC:-.}\n"
      "  wt=\"${TMPDIR:-/tmp}/vouch-replay-$commit\"\n"
      "  [ -d \"$wt\" ] || git -C \"$src\" worktree add --detach \"$wt\" \"$commit\"\n"
      "  eval cmake -S \"\\$wt\" -B \"\\$wt/build\" $cmake_options\n"
      "  cmake --build \"$wt/build\" -j\"$(nproc)\"\n"
      "  VOUCH=$wt/build/vouch\n"
      "fi\n"
      "run_rc=0\n"
      "\"$VOUCH\" run --plan \"$here/plan.json\" --out \"$out\"%s%s || run_rc=$?\n"
      "# compared also when the rerun failed: that is when the comparison says what changed\n"
      "\"$VOUCH\" compare \"$here\" \"$out\" || exit $?\n"
      "exit $run_rc\n",
      VOUCH_GIT_COMMIT, opts_q, o->replay_args ? " " : "", o->replay_args ? o->replay_args : "");
  if (n >= (int)sizeof text) return VERR("%s/replay.sh: command line too long", rd->dir);
  return write_file(rd->dir, "replay.sh", text, false, 0755);
}

vstatus rec_open_dir(vrundir **out, const char *dir, const struct manifest_opts *mo) {
  *out = NULL;
  char probe[PATH_MAX + 32];
  snprintf(probe, sizeof probe, "%s/manifest.json", dir);
  if (access(probe, F_OK) == 0) return VERR("%s: already holds a run (manifest.json exists); pick a new --out", dir);
  VTRY(mkdir_p(dir));
  vrundir *rd = vcalloc(1, sizeof *rd, "result directory");
  if (!rd) return V_ERR;
  if (!realpath(dir, rd->dir)) snprintf(rd->dir, sizeof rd->dir, "%s", dir);
  char sub[PATH_MAX + 16];
  vstatus s;
  snprintf(sub, sizeof sub, "%s/traces", rd->dir);
  if ((s = mkdir_p(sub))) goto fail;
  snprintf(sub, sizeof sub, "%s/logs", rd->dir);
  if ((s = mkdir_p(sub))) goto fail;
  if ((s = manifest_build(mo, &rd->manifest))) goto fail;
  snprintf(sub, sizeof sub, "%s/results.sqlite", rd->dir);
  if ((s = store_create(&rd->st, sub))) goto fail;
  if ((s = store_meta_set(&rd->st, "schema_version", "1")) || (s = store_meta_set(&rd->st, "state", "running")))
    goto fail;
  if ((s = save_manifest(rd))) goto fail;
  if ((s = write_file(rd->dir, "plan.json", mo->plan_text ? mo->plan_text : "", false, 0644))) goto fail;
  if ((s = write_replay(rd, mo))) goto fail;
  char verdict[16];
  if ((s = write_results(rd->dir, &rd->st, false, verdict, NULL))) goto fail;
  *out = rd;
  return V_OK;
fail:
  store_close(&rd->st);
  cJSON_Delete(rd->manifest);
  free(rd);
  return s;
}

/* The text of dir/name (malloc'd, NUL-terminated), or NULL with the error set. */
static char *read_text(const char *dir, const char *name) {
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (!f) { VERR("%s: cannot read: %s", path, strerror(errno)); return NULL; }
  char *t = NULL;
  long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  if (n >= 0 && n < (1L << 26) && fseek(f, 0, SEEK_SET) == 0 && (t = malloc((size_t)n + 1)) &&
      fread(t, 1, (size_t)n, f) == (size_t)n)
    t[n] = 0;
  else {
    free(t);
    t = NULL;
    VERR("%s: cannot read", path);
  }
  fclose(f);
  return t;
}

/* Error (naming store `where` and the field) unless manifest m was made by this build: the same
 * commit and CMake options. A run's records, its manifest and replay.sh describe one build; records
 * of another added by a resume would be passed off as the first one's. */
static vstatus same_build(const cJSON *m, const char *where) {
  const cJSON *tool = cJSON_GetObjectItem(m, "tool"), *build = cJSON_GetObjectItem(m, "build");
  const cJSON *commit = cJSON_GetObjectItem(tool, "commit"), *opts = cJSON_GetObjectItem(build, "cmake_options");
  if (!strcmp(VOUCH_GIT_COMMIT, "unknown")) /* built outside git: nothing tells two such builds apart */
    return VERR("%s: this vouch was built outside a git checkout (commit unknown): it cannot show that it is the "
                "build that started the run", where);
  if (!cJSON_IsString(commit) || strcmp(commit->valuestring, VOUCH_GIT_COMMIT))
    return VERR("%s: meta 'manifest' tool.commit: the run was started by vouch %.12s, this is %.12s: a run's records "
                "come from one build (resume it with that build, or start a new run)",
                where, cJSON_IsString(commit) ? commit->valuestring : "(missing)", VOUCH_GIT_COMMIT);
  if (!cJSON_IsString(opts) || strcmp(opts->valuestring, VOUCH_CMAKE_OPTIONS))
    return VERR("%s: meta 'manifest' build.cmake_options: the run was started by a build with '%.200s', this one has "
                "'%.200s': a run's records come from one build",
                where, cJSON_IsString(opts) ? opts->valuestring : "(missing)", VOUCH_CMAKE_OPTIONS);
  return V_OK;
}

vstatus rec_resume_dir(vrundir **out, const char *dir) {
  *out = NULL;
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/results.sqlite", dir);
  if (access(path, F_OK) != 0) return VERR("%s: not a result directory (results.sqlite missing)", dir);
  vrundir *rd = vcalloc(1, sizeof *rd, "result directory");
  if (!rd) return V_ERR;
  if (!realpath(dir, rd->dir)) snprintf(rd->dir, sizeof rd->dir, "%s", dir);
  char *state = NULL, *mtxt = NULL;
  vstatus s = store_open(&rd->st, path, false);
  if (s) { free(rd); return s; }
  if ((s = store_meta_get(&rd->st, "state", &state)) || (s = store_meta_get(&rd->st, "manifest", &mtxt))) goto fail;
  if (!state || (strcmp(state, "running") && strcmp(state, "incomplete"))) {
    s = VERR("%s: meta 'state' is '%s': only a running or incomplete run can be resumed", path,
             state ? state : "(missing)");
    goto fail;
  }
  rd->manifest = mtxt ? cJSON_Parse(mtxt) : NULL;
  if (!cJSON_IsObject(rd->manifest)) { s = VERR("%s: meta 'manifest': not a JSON object", path); goto fail; }
  if ((s = same_build(rd->manifest, path))) goto fail;
  if ((s = store_count(&rd->st, &rd->n, &rd->n_bad))) goto fail;
  /* traces are numbered on: the first free traces/NNNN.json */
  for (;; rd->next_trace++) {
    snprintf(path, sizeof path, "%s/traces/%04d.json", rd->dir, rd->next_trace);
    if (access(path, F_OK) != 0) break;
  }
  if ((s = store_meta_set(&rd->st, "state", "running"))) goto fail;
  rd->resumed = true;
  free(state);
  free(mtxt);
  *out = rd;
  return V_OK;
fail:
  free(state);
  free(mtxt);
  cJSON_Delete(rd->manifest);
  store_close(&rd->st);
  free(rd);
  return s;
}

vstatus rec_dir_meta_set(vrundir *rd, const char *key, const char *value) { return store_meta_set(&rd->st, key, value); }

vstatus rec_dir_step_done(vrundir *rd, int step) {
  assert(step >= 0);
  char v[16];
  snprintf(v, sizeof v, "%d", step + 1);
  return store_meta_set(&rd->st, "steps_done", v);
}

/* Parses meta 'steps_done' of store st (0 when absent); errors name the store and the field. */
static vstatus steps_done_of(vstore *st, int *out) {
  *out = 0;
  char *v = NULL;
  VTRY(store_meta_get(st, "steps_done", &v));
  if (!v) return V_OK;
  char *end = NULL;
  const long n = strtol(v, &end, 10);
  const bool bad = end == v || *end || n < 0 || n > 100000;
  vstatus s = bad ? VERR("%s: meta 'steps_done' is '%.32s', expected a step count", st->path, v) : V_OK;
  free(v);
  *out = bad ? 0 : (int)n;
  return s;
}

vstatus rec_resume_check(const char *dir, int *steps_done, char **run_args) {
  *steps_done = 0;
  *run_args = NULL;
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/results.sqlite", dir);
  if (access(path, F_OK) != 0) return VERR("%s: not a result directory (results.sqlite missing)", dir);
  vstore st;
  VTRY(store_open(&st, path, true));
  char *mtxt = NULL;
  vstatus s = store_meta_get(&st, "manifest", &mtxt);
  cJSON *m = s ? NULL : cJSON_Parse(mtxt ? mtxt : "");
  if (!s && !cJSON_IsObject(m)) s = VERR("%s: meta 'manifest': not a JSON object", path);
  if (!s) s = same_build(m, path);
  if (!s) s = steps_done_of(&st, steps_done);
  if (!s) s = store_meta_get(&st, "run_args", run_args);
  if (!s && !*run_args) s = VERR("%s: meta 'run_args' missing (not made by vouch run, or by one without --resume)", path);
  cJSON_Delete(m);
  free(mtxt);
  store_close(&st);
  return s;
}

vstatus rec_dir_forget_not_run(vrundir *rd, const char *suite, const char *case_id, const char *path) {
  char status[16];
  VTRY(store_find_record(&rd->st, suite, case_id, path, status));
  if (strcmp(status, "not_run")) return V_OK;
  VTRY(store_delete_record(&rd->st, suite, case_id, path));
  rd->n--;
  return V_OK;
}

/* For each plan step the crashed run did not finish (plan.json's steps from meta 'steps_done'
 * on), a not_run record "stepN-SUITE" unless one is stored. V_ERR only for an unreadable
 * plan.json or a store error. */
static vstatus not_run_unfinished(const char *dir, vstore *st) {
  int done = 0;
  VTRY(steps_done_of(st, &done));
  char ppath[PATH_MAX + 16];
  snprintf(ppath, sizeof ppath, "%s/plan.json", dir);
  if (access(ppath, F_OK) != 0) return V_OK; /* no plan: no steps to account for */
  char *text = read_text(dir, "plan.json");
  if (!text) return V_ERR;
  cJSON *plan = cJSON_Parse(text);
  free(text);
  /* best effort: a plan.json that is not a plan (edited, or written by a test) names no steps, and
   * the directory is still repaired and bundled */
  const cJSON *steps = cJSON_GetObjectItemCaseSensitive(plan, "steps");
  vstatus s = V_OK;
  for (int i = done; cJSON_IsArray(steps) && s == V_OK && i < cJSON_GetArraySize(steps); i++) {
    const char *suite = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(steps, i), "suite"));
    if (!suite || strlen(suite) > 64) continue;
    vrecord *r = rec_new("run", "", "");
    if (!r) { s = V_ERR; break; }
    snprintf(r->case_id, sizeof r->case_id, "step%d-%s", i, suite);
    char have[16];
    s = store_find_record(st, r->suite, r->case_id, r->path, have);
    if (s == V_OK && !have[0]) {
      rec_set_status(r, REC_NOT_RUN, "the run stopped before this step finished (vouch run --resume continues it)");
      s = rec_finalize(r);
      if (s == V_OK) s = store_add_record(st, r, NULL);
    }
    rec_free(r);
  }
  cJSON_Delete(plan);
  return s;
}

/* Redacts the free-text fields of a record before it is stored: its case id, reason, check
 * names and string parameters. */
static void redact_record(vrecord *r) {
  redact_text(r->case_id);
  redact_text(r->reason);
  for (int i = 0; i < r->n_checks; i++) redact_text(r->checks[i].name);
  cJSON *p;
  cJSON_ArrayForEach(p, r->params) {
    if (cJSON_IsString(p) && redact_has_credential(p->valuestring)) {
      char *v = redact_dup(p->valuestring);
      if (v) cJSON_SetValuestring(p, v);
      free(v);
    }
  }
}

vstatus rec_add(vrundir *rd, vrecord *r) {
  VTRY(rec_finalize(r));
  redact_record(r);
  bool replaced; /* r took the place of its not_run copy (rec_plan) */
  VTRY(store_add_record(&rd->st, r, &replaced));
  rd->n += !replaced;
  rd->n_bad += r->status == REC_FAIL || r->status == REC_ERROR;
  return V_OK;
}

vstatus rec_attach_trace(vrundir *rd, vrecord *r, const char *json_text) {
  cJSON *j = cJSON_Parse(json_text ? json_text : "");
  if (!j) return VERR("record %s/%s: trace: not valid JSON", r->suite, r->case_id);
  cJSON_Delete(j);
  char name[64];
  snprintf(name, sizeof name, "traces/%04d.json", rd->next_trace++);
  VTRY(write_file(rd->dir, name, json_text, false, 0644));
  snprintf(r->trace_ref, sizeof r->trace_ref, "%s", name);
  return V_OK;
}

FILE *rec_log_open(vrundir *rd, const char *name) {
  char path[PATH_MAX + 128];
  for (const char *p = name; *p; p++)
    if (*p == '/' || *p == '\\') { VERR("log name '%s': must not contain '/'", name); return NULL; }
  snprintf(path, sizeof path, "%s/logs/%s.log", rd->dir, name);
  FILE *f = fopen(path, "a");
  if (!f) { VERR("%s: cannot open log: %s", path, strerror(errno)); return NULL; }
  return redact_stream(f); /* lines are redacted as they are written */
}

int rec_dir_count(const vrundir *rd) { return rd->n; }
int rec_dir_count_bad(const vrundir *rd) { return rd->n_bad; }
const char *rec_dir_path(const vrundir *rd) { return rd->dir; }

static vstatus finish(vrundir *rd, bool complete) {
  char verdict[16];
  cJSON *results = NULL;
  vstatus s = write_results(rd->dir, &rd->st, complete, verdict, &results);
  if (s == V_OK) s = manifest_finish(rd->manifest, verdict);
  if (s == V_OK) s = save_manifest(rd);
  if (s == V_OK) s = store_meta_set(&rd->st, "state", complete ? "complete" : "incomplete");
  if (s == V_OK && complete) {
    s = history_append(NULL, rd->dir, rd->manifest, results);
    if (s) {
      /* the run itself is fine; a broken history store is reported, not fatal */
      fprintf(stderr, "vouch: warning: history not updated: %s\n", verr_msg());
      s = V_OK;
    }
  }
  cJSON_Delete(results);
  store_close(&rd->st);
  cJSON_Delete(rd->manifest);
  free(rd);
  return s;
}

vstatus rec_close(vrundir *rd) { return finish(rd, true); }
vstatus rec_abandon(vrundir *rd) { return finish(rd, false); }

vstatus rec_repair_dir(const char *dir) {
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/results.sqlite", dir);
  vstore st;
  VTRY(store_open(&st, path, false));
  char *state = NULL, *mtxt = NULL;
  vstatus s = store_meta_get(&st, "state", &state);
  if (s == V_OK) s = store_meta_get(&st, "manifest", &mtxt);
  snprintf(path, sizeof path, "%s/results.json", dir);
  bool running = state && !strcmp(state, "running");
  if (s == V_OK && running) s = not_run_unfinished(dir, &st);
  if (s == V_OK && (running || access(path, F_OK) != 0)) {
    bool complete = state && !strcmp(state, "complete");
    char verdict[16];
    s = write_results(dir, &st, complete, verdict, NULL);
    cJSON *m = mtxt ? cJSON_Parse(mtxt) : NULL;
    if (s == V_OK && m) {
      cJSON_ReplaceItemInObjectCaseSensitive(m, "verdict", cJSON_CreateString(verdict));
      s = write_json(dir, "manifest.json", m);
      char *t = s == V_OK ? cJSON_PrintUnformatted(m) : NULL;
      if (t) s = store_meta_set(&st, "manifest", t);
      free(t);
    }
    cJSON_Delete(m);
    if (s == V_OK && running) s = store_meta_set(&st, "state", "incomplete");
  }
  free(state);
  free(mtxt);
  store_close(&st);
  return s;
}

/* ---- the directory as a run sink (suites/engine/sink.h, vrundir_sink) ---- */

/* A stored status that is a result: not "" (none) and not not_run (a planned case still to run). */
static bool is_result(const char *status) { return status[0] && strcmp(status, "not_run"); }

static bool sink_stored(void *ctx, const char *suite, const char *case_id, const char *path) {
  vrundir *rd = ctx;
  char status[16] = "";
  if (!rd->resumed) return false;
  /* a lookup that fails is "not stored": the case runs again and its insert reports the error */
  return store_find_record(&rd->st, suite, case_id, path, status) == V_OK && is_result(status);
}

static vstatus sink_plan(void *ctx, vrecord *const *r, int n) {
  vrundir *rd = ctx;
  for (int i = 0; i < n; i++) {
    VTRY(rec_finalize(r[i]));
    redact_record(r[i]);
  }
  int added = 0;
  VTRY(store_add_planned(&rd->st, r, n, &added));
  rd->n += added;
  return V_OK;
}

static vstatus sink_emit(void *ctx, vrecord *r, const char *trace_json) {
  vrundir *rd = ctx;
  char kept[16] = "";
  if (rd->resumed) VTRY(store_find_record(&rd->st, r->suite, r->case_id, r->path, kept));
  if (is_result(kept)) { /* resumed: the interrupted run stored this case, and that copy stays */
    rd->n_bad += !strcmp(kept, "fail") || !strcmp(kept, "error"); /* the step still reports it */
    return rec_finalize(r);
  }
  if (trace_json) VTRY(rec_attach_trace(rd, r, trace_json));
  return rec_add(rd, r);
}

/* The sink's note_server: entry under the manifest's "servers" (suites/engine/sink.h). */
static vstatus sink_note_server(void *ctx, const cJSON *entry) {
  vrundir *rd = ctx;
  if (!cJSON_IsObject(entry)) return V_OK;
  cJSON *list = cJSON_GetObjectItemCaseSensitive(rd->manifest, "servers"), *e;
  if (!cJSON_IsArray(list)) {
    cJSON_DeleteItemFromObjectCaseSensitive(rd->manifest, "servers");
    list = cJSON_AddArrayToObject(rd->manifest, "servers");
    if (!list) return VERR("%s/manifest.json: out of memory", rd->dir);
  }
  static const char *const key[] = {"role", "url", "model"};
  cJSON_ArrayForEach(e, list) {
    int same = 0;
    for (int k = 0; k < 3; k++) {
      const char *a = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, key[k]));
      const char *b = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(entry, key[k]));
      same += a && b && !strcmp(a, b);
    }
    if (same == 3) return V_OK;
  }
  cJSON *copy = cJSON_Duplicate(entry, true);
  if (!copy) return VERR("%s/manifest.json: out of memory", rd->dir);
  cJSON_AddItemToArray(list, copy);
  return save_manifest(rd);
}

static FILE *sink_log_open(void *ctx, const char *name) { return rec_log_open(ctx, name); }
static const char *sink_dir(void *ctx) { return rec_dir_path(ctx); }

const vrec_sink *vrundir_sink(vrundir *rd) {
  assert(rd);
  rd->sink = (vrec_sink){.ctx = rd, .stored = sink_stored, .plan = sink_plan, .emit = sink_emit,
                         .note_server = sink_note_server, .log_open = sink_log_open,
                         .dir = sink_dir};
  return &rd->sink;
}
