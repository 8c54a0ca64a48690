/* vouch run and the suites it can call. */
#ifndef VOUCH_RUNNER_PLAN_CMD_RUN_H
#define VOUCH_RUNNER_PLAN_CMD_RUN_H

#include <cjson/cJSON.h>

#include "common/vstatus.h"

int cmd_run(int argc, char **argv);
/* Parses a plan's JSON text and checks its shape (steps, suites of this build, vars, when);
 * every problem names the plan `pname` and the field. */
vstatus run_plan_parse(const char *text, const char *pname, cJSON **out);

#endif
