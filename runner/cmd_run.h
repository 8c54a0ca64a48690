/* vouch run and the suites it can call. */
#ifndef VOUCH_RUNNER_CMD_RUN_H
#define VOUCH_RUNNER_CMD_RUN_H

#include <cjson/cJSON.h>

#include "common/vstatus.h"
#include "runner/cmd_evals.h"
#include "runner/cmd_evidence.h"
#include "runner/cmd_kernels.h"
#include "runner/cmd_sweep.h"

int cmd_run(int argc, char **argv);
/* Parses a plan's JSON text and checks its shape (steps, suites of this build, vars, when);
 * every problem names the plan `pname` and the field. */
vstatus run_plan_parse(const char *text, const char *pname, cJSON **out);

/* Suites beyond generate, added as their commands land (name, entry point). */
#define VOUCH_RUN_EXTRA_SUITES                                                            \
  {"kernels", cmd_kernels}, {"sweep", cmd_sweep}, {"diverge", cmd_diverge}, {"eval", cmd_eval}, \
      {"features", cmd_features},

#endif
