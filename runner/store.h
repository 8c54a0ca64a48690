/* results.sqlite: the durable copy of a run's records (SQLite). Each record is committed
 * as its case finishes; results.json is regenerated from here. DDL: results-schema/store.sql
 * (identical to store_ddl, checked by a test). */
#ifndef VOUCH_RUNNER_STORE_H
#define VOUCH_RUNNER_STORE_H

#include <stdbool.h>

#include <cjson/cJSON.h>
#include <sqlite3.h>

#include "common/vstatus.h"
#include "runner/record.h"

extern const char store_ddl[];

typedef struct {
  sqlite3 *db;        /* open connection */
  char path[1024];    /* file name, for messages */
} vstore;

/* Creates a new store file (fails if it exists) and runs the DDL. */
vstatus store_create(vstore *s, const char *path);
/* Opens an existing store; readonly selects SQLITE_OPEN_READONLY. */
vstatus store_open(vstore *s, const char *path, bool readonly);
void store_close(vstore *s);
vstatus store_meta_set(vstore *s, const char *key, const char *value);
/* *out: malloc'd copy, or NULL when the key is absent. */
vstatus store_meta_get(vstore *s, const char *key, char **out);
/* Inserts the record (already finalized) and its metrics in one transaction. */
vstatus store_add_record(vstore *s, const vrecord *r);
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
