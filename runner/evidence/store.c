#define _GNU_SOURCE
#include "runner/evidence/store.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char store_ddl[] =
    "-- results.sqlite: one run's records, written as each case finishes.\n"
    "-- The same text is compiled into runner/evidence/store.c (a test checks they are identical).\n"
    "PRAGMA user_version = 1;\n"
    "CREATE TABLE IF NOT EXISTS meta (\n"
    "  key   TEXT PRIMARY KEY,  -- 'schema_version', 'state' (running|complete|incomplete), 'manifest' (JSON)\n"
    "  value TEXT NOT NULL\n"
    ");\n"
    "CREATE TABLE IF NOT EXISTS records (\n"
    "  id      INTEGER PRIMARY KEY,  -- order in which cases finished, from 1\n"
    "  suite   TEXT NOT NULL,\n"
    "  case_id TEXT NOT NULL,\n"
    "  path    TEXT NOT NULL,\n"
    "  status  TEXT NOT NULL CHECK (status IN ('pass','fail','not_supported','error','not_run','undecided')),\n"
    "  reason  TEXT NOT NULL,\n"
    "  json    TEXT NOT NULL,        -- the whole record, as it appears in results.json (compact)\n"
    "  UNIQUE (suite, case_id, path)\n"
    ");\n"
    "CREATE TABLE IF NOT EXISTS metrics (\n"
    "  record_id INTEGER NOT NULL REFERENCES records(id),\n"
    "  name      TEXT NOT NULL,\n"
    "  unit      TEXT NOT NULL,\n"
    "  value     REAL,               -- NULL when not finite\n"
    "  derive    TEXT NOT NULL,\n"
    "  better    TEXT NOT NULL,\n"
    "  n_samples INTEGER NOT NULL,\n"
    "  PRIMARY KEY (record_id, name)\n"
    ");\n";

#define SQLERR(s, what) VERR("%s: sqlite: %s: %s", (s)->path, what, sqlite3_errmsg((s)->db))

/* Puts a writer's connection in WAL mode with synchronous=NORMAL (store.h says why it is safe for
 * resume). A file system without the shared memory WAL needs (a network mount) keeps the rollback
 * journal and synchronous=FULL: an fsync per commit, slower, as safe. */
static vstatus use_wal(vstore *s) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(s->db, "PRAGMA journal_mode=WAL", -1, &st, NULL) != SQLITE_OK) return SQLERR(s, "journal_mode");
  const int rc = sqlite3_step(st);
  const char *mode = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
  s->wal = mode && !sqlite3_stricmp(mode, "wal");
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW) return SQLERR(s, "journal_mode");
  if (s->wal && sqlite3_exec(s->db, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL) != SQLITE_OK)
    return SQLERR(s, "synchronous");
  return V_OK;
}

/* Ends the transaction a BEGIN IMMEDIATE opened: COMMIT when e is V_OK, else ROLLBACK. A COMMIT
 * that fails (disk full, an I/O error) is an error naming `what`: the caller must not report the
 * row stored. */
static vstatus end_txn(vstore *s, vstatus e, const char *what) {
  if (e == V_OK && sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
    e = VERR("%s: sqlite: %s: commit: %s", s->path, what, sqlite3_errmsg(s->db));
  if (e != V_OK && !sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  return e;
}

/* *slot, prepared from sql on first use and kept until store_close (a prepare per record was a
 * parse of the SQL per case), reset with its bindings cleared; NULL on a prepare error (the caller
 * names it with SQLERR). Callers reset it after use, so no finished SELECT holds a read lock. */
static sqlite3_stmt *cached(vstore *s, sqlite3_stmt **slot, const char *sql) {
  if (!*slot && sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, slot, NULL) != SQLITE_OK) {
    *slot = NULL;
    return NULL;
  }
  sqlite3_reset(*slot);
  sqlite3_clear_bindings(*slot);
  return *slot;
}

vstatus store_create(vstore *s, const char *path) {
  memset(s, 0, sizeof *s);
  snprintf(s->path, sizeof s->path, "%s", path);
  if (access(path, F_OK) == 0) return VERR("%s: already exists (a result directory holds one run)", path);
  if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
    vstatus e = VERR("%s: cannot create: %s", path, s->db ? sqlite3_errmsg(s->db) : "out of memory");
    store_close(s);
    return e;
  }
  /* a reader (vouch history, a user's sqlite3) may hold a lock while a record is committed */
  sqlite3_busy_timeout(s->db, 5000);
  char *msg = NULL;
  if (sqlite3_exec(s->db, store_ddl, NULL, NULL, &msg) != SQLITE_OK) {
    vstatus e = VERR("%s: schema: %s", path, msg ? msg : "?");
    sqlite3_free(msg);
    store_close(s);
    return e;
  }
  vstatus e = use_wal(s);
  if (e) store_close(s);
  return e;
}

/* What a killed writer leaves beside the file, made whole by one read-write open of `path`:
 * - a hot rollback journal (killed inside a commit without WAL), which only a writer can roll back:
 *   a read-only open fails with SQLITE_READONLY_ROLLBACK; the half-written record disappears;
 * - results.sqlite-wal (killed in WAL mode), holding committed records a bundle would lose (it
 *   packs no -wal file): the open recovers it and journal_mode=DELETE checkpoints it into the file
 *   and removes it.
 * No busy timeout: a live writer keeps its WAL, and the caller reads through it. False when the
 * open fails (a read-only directory, a live writer). */
static bool settle(const char *path) {
  sqlite3 *db = NULL;
  bool ok = access(path, W_OK) == 0 && sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
            sqlite3_exec(db, "SELECT count(*) FROM records", NULL, NULL, NULL) == SQLITE_OK &&
            sqlite3_exec(db, "PRAGMA journal_mode=DELETE", NULL, NULL, NULL) == SQLITE_OK;
  sqlite3_close(db);
  return ok;
}

vstatus store_open(vstore *s, const char *path, bool readonly) {
  memset(s, 0, sizeof *s);
  snprintf(s->path, sizeof s->path, "%s", path);
  if (access(path, R_OK) != 0) return VERR("%s: cannot read: no such file", path);
  char wal[sizeof s->path + 8];
  snprintf(wal, sizeof wal, "%s-wal", path);
  if (readonly && access(wal, F_OK) == 0) (void)settle(path); /* when it cannot, the WAL is read as it is */
  int flags = readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
  if (sqlite3_open_v2(path, &s->db, flags, NULL) != SQLITE_OK) {
    vstatus e = VERR("%s: cannot open: %s", path, s->db ? sqlite3_errmsg(s->db) : "out of memory");
    store_close(s);
    return e;
  }
  sqlite3_busy_timeout(s->db, 2000);
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(s->db, "SELECT count(*) FROM records", -1, &st, NULL);
  if (rc != SQLITE_OK && readonly && sqlite3_extended_errcode(s->db) == SQLITE_READONLY_ROLLBACK &&
      settle(path)) {
    sqlite3_close(s->db);
    if (sqlite3_open_v2(path, &s->db, flags, NULL) == SQLITE_OK)
      rc = sqlite3_prepare_v2(s->db, "SELECT count(*) FROM records", -1, &st, NULL);
  }
  if (rc != SQLITE_OK) {
    vstatus e = VERR("%s: not a vouch results store: %s", path, sqlite3_errmsg(s->db));
    store_close(s);
    return e;
  }
  sqlite3_finalize(st);
  vstatus e = readonly ? V_OK : use_wal(s);
  if (e) store_close(s);
  return e;
}

void store_close(vstore *s) {
  sqlite3_finalize(s->ins_record);
  sqlite3_finalize(s->ins_metric);
  sqlite3_finalize(s->find_record);
  sqlite3_finalize(s->ins_planned);
  s->ins_record = s->ins_metric = s->find_record = s->ins_planned = NULL;
  for (int i = 0; i < 4; i++) {
    sqlite3_finalize(s->del[i / 2][i % 2]);
    s->del[i / 2][i % 2] = NULL;
  }
  /* the WAL back into the file; when this fails (another connection is open), the last connection to
   * close checkpoints it, and store_open settles what is left */
  if (s->db && s->wal) sqlite3_exec(s->db, "PRAGMA journal_mode=DELETE", NULL, NULL, NULL);
  if (s->db) sqlite3_close(s->db);
  s->db = NULL;
  s->wal = false;
}

vstatus store_meta_set(vstore *s, const char *key, const char *value) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", -1, &st, NULL) != SQLITE_OK)
    return SQLERR(s, "meta");
  sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return VERR("%s: sqlite: meta '%s': %s", s->path, key, sqlite3_errmsg(s->db));
  return V_OK;
}

vstatus store_meta_get(vstore *s, const char *key, char **out) {
  *out = NULL;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key = ?", -1, &st, NULL) != SQLITE_OK)
    return SQLERR(s, "meta");
  sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    const char *v = (const char *)sqlite3_column_text(st, 0);
    *out = strdup(v ? v : "");
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return VERR("%s: sqlite: meta '%s': %s", s->path, key, sqlite3_errmsg(s->db));
  if (rc == SQLITE_ROW && !*out) return VERR("%s: meta '%s': out of memory", s->path, key);
  return V_OK;
}

/* Binds record r's columns (suite, case_id, path, status, reason, json text) to st's parameters 1..6. */
static void bind_record(sqlite3_stmt *st, const vrecord *r, const char *json) {
  sqlite3_bind_text(st, 1, r->suite, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, r->case_id, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, r->path, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 4, rec_status_name(r->status), -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 5, r->reason, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 6, json, -1, SQLITE_STATIC);
}

/* r as stored in the json column (malloc'd), NULL on out of memory. */
static char *record_text(const vrecord *r) {
  cJSON *j = rec_to_json(r);
  char *txt = j ? cJSON_PrintUnformatted(j) : NULL;
  cJSON_Delete(j);
  return txt;
}

/* Inside a transaction: deletes record (suite, case_id, path) and its metrics, with `not_run_only`
 * only when its status is not_run; *deleted says whether there was one. Error names the record. */
static vstatus delete_rows(vstore *s, const char *suite, const char *case_id, const char *path, bool not_run_only,
                           bool *deleted) {
  static const char *const sql[2][2] = {
      {"DELETE FROM metrics WHERE record_id IN (SELECT id FROM records WHERE suite = ? AND case_id = ? AND path = ?)",
       "DELETE FROM records WHERE suite = ? AND case_id = ? AND path = ?"},
      {"DELETE FROM metrics WHERE record_id IN (SELECT id FROM records WHERE suite = ? AND case_id = ? AND path = ? AND "
       "status = 'not_run')",
       "DELETE FROM records WHERE suite = ? AND case_id = ? AND path = ? AND status = 'not_run'"}};
  *deleted = false;
  for (int k = 0; k < 2; k++) {
    sqlite3_stmt *st = cached(s, &s->del[not_run_only][k], sql[not_run_only][k]);
    if (!st) return SQLERR(s, "delete record");
    sqlite3_bind_text(st, 1, suite, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, case_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, path, -1, SQLITE_STATIC);
    const int rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE)
      return VERR("%s: record %s/%s/%s: delete: %s", s->path, suite, case_id, path, sqlite3_errmsg(s->db));
    if (k == 1) *deleted = sqlite3_changes(s->db) > 0;
  }
  return V_OK;
}

vstatus store_add_planned(vstore *s, vrecord *const *r, int n, int *added) {
  *added = 0;
  if (n <= 0) return V_OK;
  if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) return SQLERR(s, "begin");
  vstatus e = V_OK;
  int k = 0;
  for (int i = 0; i < n && e == V_OK; i++) {
    if (r[i]->status != REC_NOT_RUN || r[i]->n_metrics) {
      e = VERR("%s: planned record %s/%s/%s: must be not_run and without metrics", s->path, r[i]->suite, r[i]->case_id,
               r[i]->path);
      break;
    }
    sqlite3_stmt *st = cached(s, &s->ins_planned, "INSERT OR IGNORE INTO records(suite, case_id, path, status, reason, "
                                                  "json) VALUES (?,?,?,?,?,?)");
    char *txt = st ? record_text(r[i]) : NULL;
    if (!st) e = SQLERR(s, "insert planned record");
    else if (!txt) e = VERR("%s: planned record %s/%s: out of memory serializing", s->path, r[i]->suite, r[i]->case_id);
    else {
      bind_record(st, r[i], txt);
      if (sqlite3_step(st) != SQLITE_DONE)
        e = VERR("%s: planned record %s/%s/%s: %s", s->path, r[i]->suite, r[i]->case_id, r[i]->path, sqlite3_errmsg(s->db));
      else k += sqlite3_changes(s->db) > 0;
      sqlite3_reset(st);
    }
    free(txt);
  }
  e = end_txn(s, e, "planned records");
  if (e == V_OK) *added = k;
  return e;
}

vstatus store_add_record(vstore *s, const vrecord *r, bool *replaced) {
  char *txt = record_text(r);
  if (!txt) return VERR("%s: record %s/%s: out of memory serializing", s->path, r->suite, r->case_id);
  vstatus e = V_OK;
  sqlite3_stmt *st = NULL, *mt = NULL;
  sqlite3_int64 id = 0;
  bool gone = false; /* a not_run copy of this record was deleted */
  if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) { free(txt); return SQLERR(s, "begin"); }
  if ((e = delete_rows(s, r->suite, r->case_id, r->path, true, &gone))) goto out;
  if (!(st = cached(s, &s->ins_record, "INSERT INTO records(suite, case_id, path, status, reason, json) VALUES (?,?,?,?,?,?)"))) {
    e = SQLERR(s, "insert record");
    goto out;
  }
  bind_record(st, r, txt);
  if (sqlite3_step(st) != SQLITE_DONE) {
    e = VERR("%s: record %s/%s/%s: %s", s->path, r->suite, r->case_id, r->path, sqlite3_errmsg(s->db));
    goto out;
  }
  id = sqlite3_last_insert_rowid(s->db);
  if (r->n_metrics && !(mt = cached(s, &s->ins_metric, "INSERT INTO metrics(record_id, name, unit, value, derive, better, "
                                                         "n_samples) VALUES (?,?,?,?,?,?,?)"))) {
    e = SQLERR(s, "insert metric");
    goto out;
  }
  for (int i = 0; i < r->n_metrics; i++) {
    const rec_metric *m = &r->metrics[i];
    sqlite3_reset(mt);
    sqlite3_bind_int64(mt, 1, id);
    sqlite3_bind_text(mt, 2, m->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(mt, 3, m->unit, -1, SQLITE_STATIC);
    if (isfinite(m->value)) sqlite3_bind_double(mt, 4, m->value);
    else sqlite3_bind_null(mt, 4);
    sqlite3_bind_text(mt, 5, rec_derive_name(m->derive), -1, SQLITE_STATIC);
    sqlite3_bind_text(mt, 6, rec_better_name(m->better), -1, SQLITE_STATIC);
    sqlite3_bind_int(mt, 7, m->n_samples);
    if (sqlite3_step(mt) != SQLITE_DONE) {
      e = VERR("%s: record %s/%s metric '%s': %s", s->path, r->suite, r->case_id, m->name, sqlite3_errmsg(s->db));
      goto out;
    }
  }
out:
  if (st) sqlite3_reset(st);
  if (mt) sqlite3_reset(mt);
  free(txt);
  char what[sizeof r->suite + sizeof r->case_id + sizeof r->path + 16];
  snprintf(what, sizeof what, "record %s/%s/%s", r->suite, r->case_id, r->path);
  e = end_txn(s, e, what);
  if (replaced) *replaced = e == V_OK && gone;
  return e;
}

vstatus store_find_record(vstore *s, const char *suite, const char *case_id, const char *path, char status[16]) {
  status[0] = 0;
  sqlite3_stmt *st = cached(s, &s->find_record, "SELECT status FROM records WHERE suite = ? AND case_id = ? AND path = ?");
  if (!st) return SQLERR(s, "find record");
  sqlite3_bind_text(st, 1, suite, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, case_id, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, path, -1, SQLITE_STATIC);
  const int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) snprintf(status, 16, "%s", (const char *)sqlite3_column_text(st, 0));
  vstatus e = rc == SQLITE_ROW || rc == SQLITE_DONE ? V_OK : SQLERR(s, "find record");
  sqlite3_reset(st);
  return e;
}

vstatus store_delete_record(vstore *s, const char *suite, const char *case_id, const char *path) {
  if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) return SQLERR(s, "begin");
  bool deleted;
  return end_txn(s, delete_rows(s, suite, case_id, path, false, &deleted), "delete record");
}

vstatus store_count(vstore *s, int *n, int *n_bad) {
  *n = *n_bad = 0;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(s->db, "SELECT count(*), total(status IN ('fail','error')) FROM records", -1, &st, NULL) !=
      SQLITE_OK)
    return SQLERR(s, "count records");
  const int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    *n = sqlite3_column_int(st, 0);
    *n_bad = (int)sqlite3_column_double(st, 1);
  }
  sqlite3_finalize(st);
  return rc == SQLITE_ROW ? V_OK : SQLERR(s, "count records");
}

vstatus store_records_json(vstore *s, cJSON **out) {
  *out = NULL;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(s->db, "SELECT id, json FROM records ORDER BY id", -1, &st, NULL) != SQLITE_OK)
    return SQLERR(s, "select records");
  cJSON *arr = cJSON_CreateArray();
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *txt = (const char *)sqlite3_column_text(st, 1);
    cJSON *j = txt ? cJSON_Parse(txt) : NULL;
    if (!j) {
      vstatus e = VERR("%s: records row id %lld: field 'json': not valid JSON", s->path, (long long)sqlite3_column_int64(st, 0));
      sqlite3_finalize(st);
      cJSON_Delete(arr);
      return e;
    }
    cJSON_AddItemToArray(arr, j);
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) { cJSON_Delete(arr); return SQLERR(s, "select records"); }
  *out = arr;
  return V_OK;
}

static bool col_eq(sqlite3_stmt *st, int col, const char *want) {
  const char *v = (const char *)sqlite3_column_text(st, col);
  return v && !strcmp(v, want);
}

int store_check_columns(vstore *s, rec_mismatch_fn fn, void *ctx) {
  sqlite3_stmt *st = NULL, *mt = NULL;
  char line[600];
  int bad = 0;
  if (sqlite3_prepare_v2(s->db, "SELECT id, suite, case_id, path, status, reason, json FROM records ORDER BY id", -1, &st, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(s->db, "SELECT name, unit, value, derive, better, n_samples FROM metrics WHERE record_id = ? ORDER BY name", -1, &mt, NULL) != SQLITE_OK) {
    SQLERR(s, "check");
    sqlite3_finalize(st);
    return -1;
  }
  while (sqlite3_step(st) == SQLITE_ROW) {
    long long id = sqlite3_column_int64(st, 0);
    const char *txt = (const char *)sqlite3_column_text(st, 6);
    cJSON *j = txt ? cJSON_Parse(txt) : NULL;
    vrecord *r = NULL;
    char where[128];
    snprintf(where, sizeof where, "results.sqlite: records row %lld", id);
    if (!j || rec_from_json(j, where, &r)) {
      snprintf(line, sizeof line, "%s", j ? verr_msg() : "results.sqlite: records row: json column is not JSON");
      fn(ctx, line);
      bad++;
      cJSON_Delete(j);
      continue;
    }
    cJSON_Delete(j);
    if (!col_eq(st, 1, r->suite) || !col_eq(st, 2, r->case_id) || !col_eq(st, 3, r->path) ||
        !col_eq(st, 4, rec_status_name(r->status)) || !col_eq(st, 5, r->reason)) {
      snprintf(line, sizeof line, "%s: columns suite/case_id/path/status/reason differ from its json", where);
      fn(ctx, line);
      bad++;
    }
    sqlite3_reset(mt);
    sqlite3_bind_int64(mt, 1, id);
    int seen = 0;
    while (sqlite3_step(mt) == SQLITE_ROW) {
      seen++;
      const char *name = (const char *)sqlite3_column_text(mt, 0);
      const rec_metric *m = name ? rec_metric_find(r, name) : NULL;
      double v = sqlite3_column_type(mt, 2) == SQLITE_NULL ? NAN : sqlite3_column_double(mt, 2);
      bool same = m && col_eq(mt, 1, m->unit) && col_eq(mt, 3, rec_derive_name(m->derive)) &&
                  col_eq(mt, 4, rec_better_name(m->better)) && sqlite3_column_int(mt, 5) == m->n_samples &&
                  ((isnan(v) && !isfinite(m->value)) || fabs(v - m->value) <= 1e-12 * fmax(fabs(v), fabs(m->value)));
      if (!same) {
        snprintf(line, sizeof line, "%s: metrics row '%s' differs from the record's json", where, name ? name : "?");
        fn(ctx, line);
        bad++;
      }
    }
    if (seen != r->n_metrics) {
      snprintf(line, sizeof line, "%s: %d metrics rows, the record's json has %d", where, seen, r->n_metrics);
      fn(ctx, line);
      bad++;
    }
    rec_free(r);
  }
  sqlite3_finalize(st);
  sqlite3_finalize(mt);
  return bad;
}
