/* The one table of vouch commands. `vouch CMD` (runner/cli/main.c) and a plan step's "suite"
 * (runner/plan/cmd_run.c, through vcommands_plan_steps) find their entry point here, so a suite
 * added to the table is a command and a plan step at once; a suite on the driver
 * (suites/engine/suite.h) is one line naming its vsuite. Entry points take argv[0] = the command
 * name and return the process exit code (suites/engine/cli.h).
 *
 * A plan step's entry point (step, or vsuite_main for a suite) also takes the run sink its records
 * go to (suites/engine/sink.h): `vouch run` hands the run's (vrundir_sink), `vouch CMD` NULL (a suite
 * on its own). The sink is one explicit `const vrec_sink *` argument rather than an environment
 * struct (a vcmd_env): it is the one thing a step takes from the run, its type says exactly what
 * flows, and a bag of "context" would invite back the hidden process state this replaced. Commands
 * that make no records (bundle, verify, ...) keep the plain fn(argc, argv) and get no argument to
 * ignore. */
#ifndef VOUCH_RUNNER_CLI_COMMANDS_H
#define VOUCH_RUNNER_CLI_COMMANDS_H

#include <stdbool.h>

#include "runner/plan/cmd_run.h"
#include "suites/engine/sink.h"
#include "suites/engine/suite.h"

typedef struct {
  const char *name;                  /* "kernels", "eval", ... (what follows `vouch`) */
  /* Exactly one of fn, step and suite is set. */
  int (*fn)(int argc, char **argv);  /* a command that is no plan step */
  /* A plan step with its own entry point (a plan may name it: its cases emit records to sink, NULL
   * when it runs on its own). */
  int (*step)(int argc, char **argv, const vrec_sink *sink);
  const vsuite *suite;               /* a plan step that is a suite on the driver, run by vsuite_main */
  const char *help;                  /* one line for `vouch --help` */
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
/* Runs command c (argv[0]: its name), a plan step's records into `sink` (NULL: none; a command that
 * is no plan step takes none); returns the process exit code. */
int vcommand_run(const vcommand *c, int argc, char **argv, const vrec_sink *sink);
/* The table's plan steps (the commands with a step entry point or a suite) as `vouch run` takes them. */
extern const vplan_steps vcommands_plan_steps;

/* Checks the options of command c (argv[0]: its name) as `vouch run` does for every plan step
 * before the first runs: V_OK when c has no check. Error: the usage error c would give, naming the
 * option. */
vstatus vcommand_check(const vcommand *c, int argc, char **argv);
/* Estimates the invocation of command c (argv[0]: its name) on env into out, as the dry run does for
 * every plan step: unsupported (out zeroed) when c has no estimate. Error: the estimate's. */
vstatus vcommand_estimate(const vcommand *c, int argc, char **argv, const dry_env *env, dry_step *out);

#endif
