/* vouch diverge | eval mrcr|chain | features: model-level correctness commands
 * (suites/diverge.h, suites/evals.h, suites/features.h). Each returns the exit code. diverge and
 * features are in cmd_evals.c, eval in cmd_eval.c (the eval suites on runner/suite.h). */
#ifndef VOUCH_RUNNER_CMD_EVALS_H
#define VOUCH_RUNNER_CMD_EVALS_H

int cmd_diverge(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_features(int argc, char **argv);

#endif
