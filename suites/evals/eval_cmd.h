/* `vouch eval WORD` (suites/evals/eval_cmd.c): picks one of the ground-truth evals
 * (suites/evals/evals.h, suites/evals/evals_suite.h), each a suite on the driver (suites/engine/suite.h).
 * The other model-level correctness commands are suites of their own folders: `vouch diverge`
 * (suites/diverge/diverge_suite.h) and `vouch features` (suites/features/features_suite.h). */
#ifndef VOUCH_SUITES_EVALS_EVAL_CMD_H
#define VOUCH_SUITES_EVALS_EVAL_CMD_H

#include "suites/engine/suite.h"

/* `vouch eval SUITE ...`: the eval's records go to `sink` (NULL: an eval on its own); returns the exit code. */
int cmd_eval(int argc, char **argv, const vrec_sink *sink);
/* vouch eval's plan-step check (runner/cli/commands.h vcommand.check): the eval named by argv[1]. */
vstatus eval_check_args(int argc, char **argv);
/* vouch eval's plan-step estimate (runner/cli/commands.h vcommand.estimate): the eval named by
 * argv[1] (vsuite_estimate; the text evals of --dataset have none: unsupported). Error as
 * eval_check_args. */
vstatus eval_estimate_args(int argc, char **argv, const dry_env *env, dry_step *out);

#endif
