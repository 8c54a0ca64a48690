/* vouch run: a plan's steps into a result directory (runner/plan/cmd_run.c). */
#ifndef VOUCH_RUNNER_PLAN_CMD_RUN_H
#define VOUCH_RUNNER_PLAN_CMD_RUN_H

#include "runner/plan/plan.h"

/* `vouch run ARGS` (argv[0] "run"): the process exit code. */
int cmd_run(int argc, char **argv, const vplan_steps *steps);

#endif
