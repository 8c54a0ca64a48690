/* `vouch verify`: every hash, the schema-level shape of manifest.json and results.json,
 * results.json against results.sqlite, and every derived figure and status recomputed
 * from the raw samples, thresholds and checks. */
#ifndef VOUCH_RUNNER_EVIDENCE_VERIFY_H
#define VOUCH_RUNNER_EVIDENCE_VERIFY_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "common/vstatus.h"

typedef struct {
  cJSON *problems;   /* array of strings, one per mismatch found */
  int n_records;     /* records checked */
  int n_files;       /* files whose hash was checked */
  bool hashed;       /* a SHA256SUMS was present and checked */
} vverify_report;

/* Verifies a bundle or a result directory. V_OK when it could be read at all (problems
 * then lists what is wrong, maybe nothing); V_ERR when the input cannot be opened. */
vstatus verify_path(const char *path, vverify_report *rep);
void verify_report_free(vverify_report *rep);

#endif
