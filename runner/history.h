/* The local history store: one SQLite file (VOUCH_HISTORY_DB, default
 * ~/.local/share/vouch/history.sqlite) with a row per finished run and its headline
 * metrics, so that `vouch history` can list past runs and find a baseline
 * (latest run of the same plan, hardware and base commit) for `vouch compare`.
 * VOUCH_HISTORY_DB=off disables it. */
#ifndef VOUCH_RUNNER_HISTORY_H
#define VOUCH_RUNNER_HISTORY_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "common/vstatus.h"

/* The store's path into out; "" when disabled. */
void history_db_path(char *out, size_t cap);
/* Appends one run: the directory (absolute), its manifest and results.json contents.
 * db NULL: the default path. */
vstatus history_append(const char *db, const char *run_dir, const cJSON *manifest, const cJSON *results);

/* Records the bundle made from run_dir (the most recent run with that directory). */
vstatus history_note_bundle(const char *db, const char *run_dir, const char *bundle_path);
/* Opens the store (creating it and its tables when create). *out is a sqlite3*. */
vstatus history_open(const char *db, bool create, void **out);

#endif
