/* The local history store: one SQLite file (VOUCH_HISTORY_DB, default
 * ~/.local/share/vouch/history.sqlite) with a row per finished run and its headline
 * metrics, so that `vouch history` can list past runs and find a baseline
 * (history_baseline: a base-branch run of the same plan content and hardware at the base
 * commit or its nearest ancestor) for `vouch compare`.
 * VOUCH_HISTORY_DB=off disables it. */
#ifndef VOUCH_RUNNER_EVIDENCE_HISTORY_H
#define VOUCH_RUNNER_EVIDENCE_HISTORY_H

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

/* What a baseline must match (runner/evidence/history_baseline.c). */
typedef struct {
  const char *plan;      /* built-in plan name, plan file, or the plan text's 64-digit sha256 */
  const char *hardware;  /* manifest hardware.key */
  const char *base;      /* the pull request's base commit (a revision of repo); NULL: any commit */
  const char *repo;      /* git repository that knows the commits (ancestry); NULL: "." */
} history_query;
/* The plan's identity: sha256 of its text (what manifests record) and a name for display. */
vstatus history_plan_identity(const char *plan, char hash[65], char *name, size_t cap);
/* The baseline for q: a finished, non-pull-request run of the same plan content and
 * hardware whose head is the base commit or its nearest ancestor with a run (newest run
 * first). *out: {found, why, skipped{...}, plan_sha256} plus, when found, run_id, path
 * (bundle, else run_dir), run_dir, bundle, verdict, head_sha, ended_at, plan,
 * commits_before_base. */
vstatus history_baseline(const char *db, const history_query *q, cJSON **out);

#endif
