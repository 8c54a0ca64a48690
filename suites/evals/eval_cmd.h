/* vouch diverge | eval mrcr|chain | features: model-level correctness commands
 * (suites/diverge/diverge.h, suites/evals/evals.h, suites/features/features.h), each a suite on the driver (suites/engine/suite.h):
 * diverge in suites/diverge/diverge_suite.c, features in suites/features/features_suite.c, and `vouch eval WORD`
 * (suites/evals/eval_cmd.c) picks one of the evals (suites/evals/evals_suite.h). */
#ifndef VOUCH_SUITES_EVALS_EVAL_CMD_H
#define VOUCH_SUITES_EVALS_EVAL_CMD_H

#include "suites/engine/suite.h"

/* `vouch diverge` and `vouch features` (runner/cli/commands.c points at them). */
extern const vsuite vsuite_diverge, vsuite_features;

/* `vouch eval SUITE ...`: returns the exit code. */
int cmd_eval(int argc, char **argv);
/* vouch eval's plan-step check (runner/cli/commands.h vcommand.check): the eval named by argv[1]. */
vstatus eval_check_args(int argc, char **argv);

#endif
