/* The comparison of `vouch sweep --server --ref-server` as records of the run it is a step of
 * (sweep_ab_records.c), so a plan (suites/plans/served.json) carries its speed verdict like any suite's. */
#ifndef VOUCH_RUNNER_CLI_SWEEP_AB_RECORDS_H
#define VOUCH_RUNNER_CLI_SWEEP_AB_RECORDS_H

#include <cjson/cJSON.h>

#include "common/vstatus.h"
#include "suites/engine/sink.h"

/* Stores into `sink` (not NULL) the comparison `cmp` (compare_rounds_family's JSON with the A/B's
 * "sweep_ab" member, as cmd_sweep_ab.c writes it to compare.json), all of suite "sweep" and path
 * `head_path` (the head's records' path), case ids under `sub` (the step's folder in the run directory,
 * so two A/B steps of one plan do not collide):
 *   SUB/LEVEL/FIGURE  per level and gated figure: base, head, ratio head / base and its interval
 *                     (ci_low, ci_high); the gate as a threshold on the interval's far end (fail: a
 *                     regression beyond the threshold, as compare gates it); undecided with the reason
 *                     when the figure is too noisy to judge or has too few samples;
 *   SUB/LEVEL/spec_decode  per level where a side counted drafts: each side's acceptance length, rate,
 *                     per-position acceptance and draft length (evidence, pass);
 *   SUB               the whole comparison: fail when compare_failed (a regression or a problem of the
 *                     head), its headline and problems in the reason.
 * Error: the sink's, naming the store and the record. */
vstatus sab_emit_records(const vrec_sink *sink, const cJSON *cmp, const char *head_path, const char *sub);

#endif
