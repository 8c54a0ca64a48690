/* vouch diverge | eval mrcr|chain | features: model-level correctness commands
 * (suites/diverge.h, suites/evals.h, suites/features.h), each a suite on the driver (runner/suite.h):
 * diverge in runner/suite_diverge.c, features in runner/suite_features.c, and `vouch eval WORD`
 * (runner/cmd_eval.c) picks one of the evals (runner/suite_evals.h). */
#ifndef VOUCH_RUNNER_CMD_EVALS_H
#define VOUCH_RUNNER_CMD_EVALS_H

#include "runner/suite.h"

/* `vouch diverge` and `vouch features` (runner/commands.c points at them). */
extern const vsuite vsuite_diverge, vsuite_features;

/* `vouch eval SUITE ...`: returns the exit code. */
int cmd_eval(int argc, char **argv);
/* vouch eval's plan-step check (runner/commands.h vcommand.check): the eval named by argv[1]. */
vstatus eval_check_args(int argc, char **argv);

#endif
