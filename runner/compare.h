/* `vouch compare BASE CAND`: pairs records by (suite, case_id, path); lists status
 * changes first (correctness), then per metric both values, the ratio cand/base, a 95%
 * bootstrap CI of the ratio of medians over the raw samples (fixed seed: the output is
 * the same every time) and a verdict. */
#ifndef VOUCH_RUNNER_COMPARE_H
#define VOUCH_RUNNER_COMPARE_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "runner/bundle.h"

#define COMPARE_BOOT_ITERS 2000
#define COMPARE_SEED 0x766f756368ULL /* "vouch" */

/* Builds the comparison as JSON: {threshold, correctness[], missing[], added[],
 * metrics[], regressions, correctness_regressions, perf_regressions}. A perf regression:
 * a metric with >= 2 samples on both sides that got worse with its whole CI beyond
 * 1 +- threshold. A correctness regression: a case that now fails or errors. */
cJSON *compare_results(const vresults *base, const vresults *cand, double threshold);
/* Human-readable rendering of compare_results' JSON. */
void compare_print(const cJSON *cmp, FILE *out);

#endif
