/* results.sqlite: the durable copy of a run's records (SQLite). Each record is committed
 * as its case finishes; results.json is regenerated from here. DDL: results-schema/store.sql
 * (identical to store_ddl, checked by a test).
 *
 * Durability: a writer (store_create, store_open read-write) runs in WAL mode with
 * synchronous=NORMAL. A commit then appends to results.sqlite-wal without an fsync: a committed
 * record survives the process being killed (kill -9, a crash, Ctrl-C), because the bytes are in the
 * OS's page cache and the next open recovers them from the WAL; only an OS crash or power loss can
 * take back the last commits (never corrupt the file). One fsync per case was most of what storing a
 * kernels case cost. store_close folds the WAL back into the file (journal_mode=DELETE), so a file
 * at rest, as bundled and verified, is one self-contained database that opens read-only anywhere. */
#ifndef VOUCH_RUNNER_EVIDENCE_STORE_H
#define VOUCH_RUNNER_EVIDENCE_STORE_H

#include <stdbool.h>

#include <cjson/cJSON.h>
#include <sqlite3.h>

#include "common/vstatus.h"
#include "suites/engine/record.h"

extern const char store_ddl[];

typedef struct {
  sqlite3 *db;                 /* open connection */
  char path[1024];             /* file name, for messages */
  bool wal;                    /* this connection put the file in WAL mode; store_close takes it out */
  sqlite3_stmt *ins_record;    /* INSERT INTO records, prepared on first use and reused (NULL before) */
  sqlite3_stmt *ins_metric;    /* INSERT INTO metrics, likewise */
  sqlite3_stmt *find_record;   /* SELECT status of one (suite, case_id, path), likewise */
  sqlite3_stmt *del[2][2];     /* DELETE the metrics [.][0], then the row [.][1], of one (suite, case_id, path):
                                  [0] any status, [1] only not_run; likewise */
  sqlite3_stmt *ins_planned;   /* INSERT OR IGNORE INTO records (store_add_planned), likewise */
} vstore;

/* Creates a new store file (fails if it exists) and runs the DDL. */
vstatus store_create(vstore *s, const char *path);
/* Opens an existing store; readonly selects SQLITE_OPEN_READONLY. What a killed writer left
 * beside the file (a hot rollback journal, a WAL) is folded into it first when the directory is
 * writable, so a reader sees every committed record and the file is whole for a bundle. */
vstatus store_open(vstore *s, const char *path, bool readonly);
/* Closes the connection; a writer's WAL is folded into the file first (best effort: when another
 * connection holds the file, SQLite folds it when the last one closes and store_open settles it). */
void store_close(vstore *s);
vstatus store_meta_set(vstore *s, const char *key, const char *value);
/* *out: malloc'd copy, or NULL when the key is absent. */
vstatus store_meta_get(vstore *s, const char *key, char **out);
/* Inserts the record (already finalized) and its metrics in one transaction, which first deletes a
 * record of the same (suite, case_id, path) stored with status not_run (a planned case that has now
 * finished: store_add_planned); *replaced (may be NULL) says whether one was. Any other record of
 * that key is a UNIQUE error naming the record. */
vstatus store_add_record(vstore *s, const vrecord *r, bool *replaced);
/* Inserts records r[0..n) (finalized, status not_run, no metrics: planned cases not run yet) in one
 * transaction, each unless a record of its (suite, case_id, path) is stored already; *added gets how
 * many were. Error names the record (a record with metrics is refused). */
vstatus store_add_planned(vstore *s, vrecord *const *r, int n, int *added);
/* The stored status of record (suite, case_id, path) in `status` ("pass", ...), "" when there is
 * none. V_ERR on a database error. */
vstatus store_find_record(vstore *s, const char *suite, const char *case_id, const char *path, char status[16]);
/* Deletes record (suite, case_id, path) and its metrics in one transaction (no-op when absent). */
vstatus store_delete_record(vstore *s, const char *suite, const char *case_id, const char *path);
/* *n: records stored; *n_bad: of those, failed or errored. */
vstatus store_count(vstore *s, int *n, int *n_bad);
/* A JSON array of every record (parsed from the json column), in id order. */
vstatus store_records_json(vstore *s, cJSON **out);
/* Checks the columns of records/metrics rows agree with the json column; calls fn for
 * each disagreement. Returns the number found (or -1 on a database error, error set). */
int store_check_columns(vstore *s, rec_mismatch_fn fn, void *ctx);

#endif
