/* The one table of vouch commands. `vouch CMD` (runner/cli/main.c) and a plan step's "suite"
 * (runner/plan/cmd_run.c, through vcommands_plan_steps) find their entry point here, so a suite
 * added to the table is a command and a plan step at once; a suite on the driver
 * (suites/engine/suite.h) is one line naming its vsuite. Entry points take argv[0] = the command
 * name and return the process exit code (suites/engine/cli.h). */
#ifndef VOUCH_RUNNER_CLI_COMMANDS_H
#define VOUCH_RUNNER_CLI_COMMANDS_H

#include <stdbool.h>

#include "runner/plan/cmd_run.h"
#include "suites/engine/suite.h"

typedef struct {
  const char *name;                  /* "kernels", "eval", ... (what follows `vouch`) */
  int (*fn)(int argc, char **argv);  /* entry point (NULL: the command is `suite`) */
  const char *help;                  /* one line for `vouch --help` */
  bool plan_step;                    /* a plan may name it: a suite whose cases emit records */
  const vsuite *suite;               /* a suite on the driver, run by vsuite_main (fn NULL), else NULL */
  /* For a plan step with its own entry point (fn): parses and checks argv as fn would before it
   * opens anything, running nothing (vsuite_check_args for a suite on the driver). NULL: none. */
  vstatus (*check)(int argc, char **argv);
  /* For a plan step with its own entry point (fn): what it will need (vsuite_estimate for a suite on
   * the driver; suites/engine/estimate.h). NULL: not estimated. */
  vstatus (*estimate)(int argc, char **argv, const dry_env *env, dry_step *out);
} vcommand;

/* [vcommands_n] every command, in `vouch --help` order. */
extern const vcommand vcommands[];
extern const int vcommands_n;
/* The command named `name`, NULL when there is none. */
const vcommand *vcommand_find(const char *name);
/* Runs command c (argv[0]: its name); returns the process exit code. */
int vcommand_run(const vcommand *c, int argc, char **argv);
/* The table's plan steps (the commands marked plan_step) as `vouch run` takes them. */
extern const vplan_steps vcommands_plan_steps;

/* Checks the options of command c (argv[0]: its name) as `vouch run` does for every plan step
 * before the first runs: V_OK when c has no check. Error: the usage error c would give, naming the
 * option. */
vstatus vcommand_check(const vcommand *c, int argc, char **argv);
/* Estimates the invocation of command c (argv[0]: its name) on env into out, as the dry run does for
 * every plan step: unsupported (out zeroed) when c has no estimate. Error: the estimate's. */
vstatus vcommand_estimate(const vcommand *c, int argc, char **argv, const dry_env *env, dry_step *out);

#endif
