/* vouch run and the suites it can call. */
#ifndef VOUCH_RUNNER_CMD_RUN_H
#define VOUCH_RUNNER_CMD_RUN_H

#include "runner/cmd_evals.h"
#include "runner/cmd_evidence.h"
#include "runner/cmd_kernels.h"
#include "runner/cmd_sweep.h"

int cmd_run(int argc, char **argv);

/* Suites beyond generate, added as their commands land (name, entry point). */
#define VOUCH_RUN_EXTRA_SUITES                                                            \
  {"kernels", cmd_kernels}, {"sweep", cmd_sweep}, {"diverge", cmd_diverge}, {"eval", cmd_eval}, \
      {"features", cmd_features},

#endif
