/* What the eval suites (runner/suite_mrcr.c, runner/suite_chain.c) share on top of the driver
 * (runner/suite.h): their common options, the score and pairwise comparison of a path with the
 * first, the record of one (path, subset of queries), and the prompts' export file. */
#ifndef VOUCH_RUNNER_SUITE_EVALS_H
#define VOUCH_RUNNER_SUITE_EVALS_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "runner/engine.h"
#include "runner/suite.h"
#include "suites/evals.h"

/* `vouch eval mrcr` and `vouch eval chain` (runner/cmd_eval.c lists them). */
extern const vsuite vsuite_mrcr, vsuite_chain;

/* The options both evals take (defaults set by each suite's init). */
typedef struct {
  long samples;           /* --samples: prompts per cell (mrcr) / chains (chain) */
  long batch;             /* --batch: prompts run side by side */
  double min_score;       /* --min-score: a case passes at a score >= this */
  double alpha;           /* --alpha: ... and when not worse than the first path at McNemar p < alpha */
  const char *export_f;   /* --export-prompts FILE (NULL: none) */
} eval_opts;

/* If argv[*i] is one of eval_opts' options, stores it and returns true (cli_opt). */
bool eval_option(eval_opts *o, int argc, char **argv, int *i, vstatus *err);

/* The score of one path over the queries with mask[i] set (mask NULL: all n); *count (may be
 * NULL) gets how many. NaN over none. */
double eval_score(const eval_path_result *pr, const unsigned char *mask, int n, int *count);
/* Makes the record (suite, id, pr->path) of one (path, subset) in recs, params copied from
 * `params`: the score (threshold >= min_score) and answer margins as raw samples, and for a path
 * other than the reference (is_ref false) the paired comparison with `ref` (McNemar at alpha).
 * Returns true when the subset passes (a path that is not supported passes, an errored one not). */
bool eval_record(veng *recs, const char *suite, const char *id, const eval_path_result *ref, const eval_path_result *pr,
                 bool is_ref, const unsigned char *mask, int n, double min_score, double alpha, const cJSON *params);
/* Prints one line comparing pr with ref over the mask (nothing unless both ran). */
void eval_print_pairwise(const char *label, const eval_path_result *ref, const eval_path_result *pr,
                         const unsigned char *mask, int n, double alpha);

/* The export file's root: {"kind": kind, "model": ..., "layout": {...}} of the constructed model. */
cJSON *eval_export_root(const char *kind, const vsuite_ctx *x);
/* [n] ints as a JSON array. */
cJSON *eval_ints_json(const int32_t *v, int n);
/* Writes root (unformatted) to file, whole or not at all (common/atomic_file.h). Error names the file. */
vstatus eval_export_write(const char *file, const cJSON *root);

#endif
