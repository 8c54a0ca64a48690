/* manifest.json: what was run, on what, from which code, by whom's command line.
 * Subject (the code under test) comes from libgit2 and from GitHub Actions variables
 * (GITHUB_REPOSITORY, GITHUB_REF, GITHUB_SHA, GITHUB_BASE_REF, GITHUB_EVENT_PATH).
 * Field list: results-schema/manifest.schema.json. */
#ifndef VOUCH_RUNNER_EVIDENCE_MANIFEST_H
#define VOUCH_RUNNER_EVIDENCE_MANIFEST_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "common/vstatus.h"

#define MANIFEST_SCHEMA_VERSION 1

typedef struct manifest_opts {
  const char *plan_name;    /* "smoke", "h200" or the plan file's name */
  const char *plan_text;    /* the plan's JSON text: embedded, hashed, and written to plan.json */
  int argc;                 /* command line, recorded as given */
  char *const *argv;        /* [argc] */
  const uint64_t *seeds;    /* [n_seeds] the seeds the run used */
  int n_seeds;
  const char *repo_dir;     /* git work tree of the subject (NULL: current directory) */
  const char *base_sha;     /* base commit of the comparison (NULL: from CI variables, if any) */
  const char *replay_args;  /* extra `vouch run` options for replay.sh (NULL: none) */
} manifest_opts;

/* GPU facts as a JSON array text, one object per GPU (name, memory_bytes, sm_count,
 * clocks, driver, cuda_runtime, nccl...). The CUDA code calls this before rec_open_dir;
 * the text is copied. NULL clears. */
void manifest_set_gpu_info(const char *json);

/* Builds the manifest at the start of a run (verdict "incomplete", ended_at null). The
 * environment holds only the variables of redact_env_allowed; values, the command line and the
 * plan text are redacted (common/redact.h). */
vstatus manifest_build(const manifest_opts *o, cJSON **out);
/* Both record the --path-lib libraries loaded so far as "path_libs" (file, path name, sha256 of the file
 * when called), absent when none was loaded. */
/* Sets ended_at (now) and the verdict. */
vstatus manifest_finish(cJSON *m, const char *verdict);
/* True when an environment variable's name suggests a secret (case-insensitive
 * substrings TOKEN, SECRET, KEY, PASSWORD, PASS, CREDENTIAL, AUTH, COOKIE, SESSION). */
bool manifest_name_is_secret(const char *name);
/* Copies a URL with any "user:password@" removed into out. */
void manifest_strip_userinfo(const char *url, char *out, size_t cap);
/* The subject object (git + CI variables). */
vstatus manifest_subject(const char *repo_dir, const char *base_sha, cJSON **out);
/* A short string identifying the hardware ("NVIDIA H200 x8" or the CPU model) for history. */
const char *manifest_hardware_key(const cJSON *m);
/* UTC time as "YYYY-MM-DDTHH:MM:SSZ". */
void manifest_time_iso(char out[32]);

#endif
