/* `vouch compare BASE CAND` and `vouch ab`'s comparison: pairs records by (suite, case_id,
 * path); lists status changes first (correctness), then per metric both values, the ratio
 * cand/base, a 95% bootstrap interval of that figure's ratio and a verdict.
 *
 * The interval is the interval of the figure itself: a median's ratio is bootstrapped as a
 * ratio of medians, a p90's as a ratio of p90s, a stable mean's as a ratio of stable means
 * (warm-up samples dropped first). When a side has several rounds (vouch ab), a resample
 * first draws rounds with replacement and then samples within each drawn round; and when
 * the rounds are paired (vouch ab: base and head of round k ran next to each other), a
 * timing's interval is widened to cover the Student-t interval of the per-round ratios too,
 * so drift between runs widens the interval instead of passing for a regression (3 rounds
 * resampled alone did not: an A/A under ASan read a 1.45x drift as one). A gated figure
 * whose interval reaches past both 1 - threshold and 1 + threshold is counted "too noisy"
 * in the notes: no change of the threshold's size could have been seen. A figure needs
 * enough samples per side for its statistic (compare_min_samples), and a timing needs
 * COMPARE_MIN_TIMING_RUNS rounds a side; below that its verdict is "not enough samples". A timing
 * read once per run (output tok/s) has one sample a round: with paired rounds its interval is
 * the paired t interval alone, from COMPARE_MIN_TIMING_RUNS rounds on
 * and it is never a regression (one bundle against another: timings are listed, not gated). Min/max figures, in-record ratios
 * and statistics of other metrics (a CI bound, a CV) are listed but never gated.
 *
 * Problems of the candidate as a whole (it is incomplete, has errored cases, or lacks cases
 * the baseline has) are listed in "problems": like a regression they make the comparison
 * fail (compare_failed), and the first line of the text and Markdown says so. */
#ifndef VOUCH_RUNNER_EVIDENCE_COMPARE_H
#define VOUCH_RUNNER_EVIDENCE_COMPARE_H

#include <stdbool.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "runner/evidence/bundle.h"

#define COMPARE_BOOT_ITERS 2000       /* resamples of a 95 % interval */
#define COMPARE_BOOT_ITERS_MAX 20000  /* at most, for a family-wise interval's far percentiles */
#define COMPARE_SEED 0x766f756368ULL /* "vouch" */
/* Rounds a side needs before its timings (units s, ms, us, ns, .../s) are tested: the
 * steps of one run say nothing about the drift between two runs on a shared machine. */
#define COMPARE_MIN_TIMING_RUNS 3

/* Builds the comparison as JSON: {threshold, rounds{base,cand}, headline, problems[],
 * correctness[], missing[], added[], metrics[], regressions, correctness_regressions,
 * perf_regressions, not_enough_samples, failed}. base[nb] and cand[nc] are rounds of one
 * build each (1 for a plain compare); records are those of base[0] and cand[0], and a
 * case's status is the worst of its rounds (missing from a round: error).
 * A perf regression: a gated metric with enough samples on both sides that got worse with
 * its whole interval beyond 1 +- threshold. A correctness regression: a case that now fails
 * or errors. */
cJSON *compare_rounds(const vresults *base, int nb, const vresults *cand, int nc, double threshold);
/* compare_rounds with every figure's interval at the family-wise level: 1 - 0.05 / m for the m gated
 * figures both sides hold (Bonferroni), so the chance that any figure of an A/A comparison is called a
 * regression stays <= 5 % however many figures there are (a served sweep gates ~28 per level).
 * The JSON adds interval_confidence and gated_family (plain compare_rounds: 0.95 and 0). */
cJSON *compare_rounds_family(const vresults *base, int nb, const vresults *cand, int nc, double threshold);
/* compare_rounds with one round per side. */
cJSON *compare_results(const vresults *base, const vresults *cand, double threshold);
/* True when the comparison must fail a CI job: a regression or a problem of the candidate. */
bool compare_failed(const cJSON *cmp);
/* Smallest number of samples per side for which the figure `d` is tested (0: never). */
int compare_min_samples(rec_derive d);
/* Human-readable rendering of compare_results' JSON; its first line is the headline. */
void compare_print(const cJSON *cmp, FILE *out);
/* A GitHub comment body holds at most 65536 characters. */
#define COMPARE_MD_LIMIT 65000
/* Markdown for a PR comment or a job summary: the headline as its first line (bold), the
 * problems, regressions and not-tested counts, and in <details> what changed (status changes,
 * missing and added cases, figures that are not equal on both sides; equal ones are counted).
 * At most `limit` characters (0: no limit): lines past it are cut with a line that says how many. */
void compare_markdown(const cJSON *cmp, FILE *out, size_t limit);

#endif
