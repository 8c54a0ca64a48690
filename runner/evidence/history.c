#define _GNU_SOURCE
#include "runner/evidence/history.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "runner/evidence/manifest.h"

static const char k_ddl[] =
    "CREATE TABLE IF NOT EXISTS runs (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  run_dir TEXT NOT NULL, bundle TEXT,\n"
    "  plan TEXT NOT NULL, plan_sha256 TEXT NOT NULL, hardware TEXT NOT NULL,\n"
    "  head_sha TEXT, base_sha TEXT, started_at TEXT, ended_at TEXT,\n"
    "  verdict TEXT NOT NULL, n_records INTEGER NOT NULL, pr INTEGER, ref TEXT);\n"
    "CREATE TABLE IF NOT EXISTS run_metrics (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id),\n"
    "  suite TEXT NOT NULL, case_id TEXT NOT NULL, path TEXT NOT NULL,\n"
    "  metric TEXT NOT NULL, unit TEXT NOT NULL, value REAL);\n"
    "CREATE INDEX IF NOT EXISTS run_metrics_by_metric ON run_metrics(metric);\n";

void history_db_path(char *out, size_t cap) {
  const char *e = getenv("VOUCH_HISTORY_DB");
  if (e && !strcmp(e, "off")) { out[0] = 0; return; }
  if (e && *e) { snprintf(out, cap, "%s", e); return; }
  const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
  if (xdg && *xdg) snprintf(out, cap, "%s/vouch/history.sqlite", xdg);
  else if (home && *home) snprintf(out, cap, "%s/.local/share/vouch/history.sqlite", home);
  else out[0] = 0;
}

static void mkparents(const char *path) {
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char *p = tmp + 1; *p; p++)
    if (*p == '/') { *p = 0; mkdir(tmp, 0755); *p = '/'; }
}

vstatus history_open(const char *db, bool create, void **out) {
  *out = NULL;
  char path[PATH_MAX];
  if (db) snprintf(path, sizeof path, "%s", db);
  else history_db_path(path, sizeof path);
  if (!path[0]) return VERR("history: disabled (VOUCH_HISTORY_DB=off or no HOME)");
  if (!create && access(path, R_OK) != 0) return VERR("%s: no history store yet (runs add to it when they finish)", path);
  if (create) mkparents(path);
  sqlite3 *h = NULL;
  if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0), NULL) != SQLITE_OK) {
    vstatus e = VERR("%s: cannot open history store: %s", path, h ? sqlite3_errmsg(h) : "out of memory");
    sqlite3_close(h);
    return e;
  }
  sqlite3_busy_timeout(h, 5000);
  char *msg = NULL;
  if (sqlite3_exec(h, k_ddl, NULL, NULL, &msg) != SQLITE_OK) {
    vstatus e = VERR("%s: history schema: %s", path, msg ? msg : "?");
    sqlite3_free(msg);
    sqlite3_close(h);
    return e;
  }
  /* stores made before the pr/ref columns: add them (NULL: not known to be a PR run) */
  sqlite3_exec(h, "ALTER TABLE runs ADD COLUMN pr INTEGER", NULL, NULL, NULL);
  sqlite3_exec(h, "ALTER TABLE runs ADD COLUMN ref TEXT", NULL, NULL, NULL);
  *out = h;
  return V_OK;
}

static const char *jstr(const cJSON *o, const char *a, const char *b) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);
  if (b) v = cJSON_GetObjectItemCaseSensitive(v, b);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

vstatus history_append(const char *db, const char *run_dir, const cJSON *m, const cJSON *results) {
  char path[PATH_MAX];
  if (!db) {
    history_db_path(path, sizeof path);
    if (!path[0]) return V_OK; /* disabled */
    db = path;
  }
  void *hv;
  VTRY(history_open(db, true, &hv));
  sqlite3 *h = hv;
  vstatus e = V_OK;
  sqlite3_stmt *st = NULL;
  const cJSON *recs = cJSON_GetObjectItemCaseSensitive(results, "records");
  sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  if (sqlite3_prepare_v2(h, "INSERT INTO runs(run_dir, plan, plan_sha256, hardware, head_sha, base_sha, started_at, "
                         "ended_at, verdict, n_records, pr, ref) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK) {
    e = VERR("%s: history: %s", db, sqlite3_errmsg(h));
    goto out;
  }
  const char *vals[] = {run_dir, jstr(m, "plan", "name"), jstr(m, "plan", "sha256"), manifest_hardware_key(m),
                        jstr(m, "subject", "head_sha"), jstr(m, "subject", "base_sha"), jstr(m, "started_at", NULL),
                        jstr(m, "ended_at", NULL), jstr(results, "verdict", NULL)};
  for (int i = 0; i < 9; i++) {
    const char *v = vals[i] ? vals[i] : (i < 4 || i == 8 ? "" : NULL);
    if (v) sqlite3_bind_text(st, i + 1, v, -1, SQLITE_TRANSIENT);
    else sqlite3_bind_null(st, i + 1);
  }
  sqlite3_bind_int(st, 10, cJSON_GetArraySize(recs));
  const cJSON *pr = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "subject"), "pr");
  if (cJSON_IsNumber(pr)) sqlite3_bind_int(st, 11, pr->valueint);
  else sqlite3_bind_null(st, 11);
  const char *ref = jstr(cJSON_GetObjectItemCaseSensitive(m, "subject"), "ci", "github_ref");
  if (ref) sqlite3_bind_text(st, 12, ref, -1, SQLITE_TRANSIENT);
  else sqlite3_bind_null(st, 12);
  if (sqlite3_step(st) != SQLITE_DONE) { e = VERR("%s: history: %s", db, sqlite3_errmsg(h)); goto out; }
  sqlite3_int64 id = sqlite3_last_insert_rowid(h);
  sqlite3_finalize(st);
  st = NULL;
  if (sqlite3_prepare_v2(h, "INSERT INTO run_metrics(run_id, suite, case_id, path, metric, unit, value) VALUES (?,?,?,?,?,?,?)",
                         -1, &st, NULL) != SQLITE_OK) { e = VERR("%s: history: %s", db, sqlite3_errmsg(h)); goto out; }
  const cJSON *r;
  cJSON_ArrayForEach(r, recs) {
    const cJSON *mm;
    cJSON_ArrayForEach(mm, cJSON_GetObjectItemCaseSensitive(r, "metrics")) {
      sqlite3_reset(st);
      sqlite3_bind_int64(st, 1, id);
      sqlite3_bind_text(st, 2, jstr(r, "suite", NULL) ? jstr(r, "suite", NULL) : "", -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(st, 3, jstr(r, "case_id", NULL) ? jstr(r, "case_id", NULL) : "", -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(st, 4, jstr(r, "path", NULL) ? jstr(r, "path", NULL) : "", -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(st, 5, jstr(mm, "name", NULL) ? jstr(mm, "name", NULL) : "", -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(st, 6, jstr(mm, "unit", NULL) ? jstr(mm, "unit", NULL) : "", -1, SQLITE_TRANSIENT);
      const cJSON *v = cJSON_GetObjectItemCaseSensitive(mm, "value");
      if (cJSON_IsNumber(v)) sqlite3_bind_double(st, 7, v->valuedouble);
      else sqlite3_bind_null(st, 7);
      if (sqlite3_step(st) != SQLITE_DONE) { e = VERR("%s: history: %s", db, sqlite3_errmsg(h)); goto out; }
    }
  }
out:
  sqlite3_finalize(st);
  sqlite3_exec(h, e == V_OK ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL);
  sqlite3_close(h);
  return e;
}

vstatus history_note_bundle(const char *db, const char *run_dir, const char *bundle_path) {
  char path[PATH_MAX];
  if (!db) {
    history_db_path(path, sizeof path);
    if (!path[0] || access(path, R_OK) != 0) return V_OK;
    db = path;
  }
  void *hv;
  VTRY(history_open(db, false, &hv));
  sqlite3 *h = hv;
  sqlite3_stmt *st = NULL;
  vstatus e = V_OK;
  if (sqlite3_prepare_v2(h, "UPDATE runs SET bundle = ? WHERE id = (SELECT max(id) FROM runs WHERE run_dir = ?)", -1, &st, NULL) != SQLITE_OK ||
      (sqlite3_bind_text(st, 1, bundle_path, -1, SQLITE_STATIC), sqlite3_bind_text(st, 2, run_dir, -1, SQLITE_STATIC),
       sqlite3_step(st) != SQLITE_DONE))
    e = VERR("%s: history: %s", db, sqlite3_errmsg(h));
  sqlite3_finalize(st);
  sqlite3_close(h);
  return e;
}
