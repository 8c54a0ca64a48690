/* `vouch sweep --server URL --ref-server URL [--rounds N]`: served sweep of two servers for speed,
 * rounds interleaved per level and the two sides gated as `vouch ab` gates them (cmd_sweep_ab.c). */
#ifndef VOUCH_RUNNER_CLI_CMD_SWEEP_AB_H
#define VOUCH_RUNNER_CLI_CMD_SWEEP_AB_H

#include "common/vstatus.h"
#include "suites/engine/sink.h"

/* `vouch sweep ARGS` for the command table: with --ref-server the A/B of two servers, else cmd_sweep
 * (suites/sweep/sweep_suite.h). On its own (sink NULL) the A/B writes --out DIR (a bundle per round);
 * as a step of `vouch run` (sink: the run) its rounds go to the run's directory (RUN/sweep-ab/, bundled
 * with the run) and its comparison to the run's records (sweep_ab_records.h). Returns the exit code: the
 * A/B's are 0 no regression, 1 regression or a problem of the head (as vouch ab), 2 usage error or a
 * side that could not be measured. */
int cmd_sweep_any(int argc, char **argv, const vrec_sink *sink);
/* The plan-step check of `vouch sweep` (vcommand.check): with --ref-server the A/B's options (--out
 * refused: the run's directory holds the rounds), else sweep_check_args. */
vstatus sweep_any_check_args(int argc, char **argv);

#endif
