/* vouch run and the suites it can call. */
#ifndef VOUCH_RUNNER_PLAN_CMD_RUN_H
#define VOUCH_RUNNER_PLAN_CMD_RUN_H

#include <cjson/cJSON.h>

#include <stdbool.h>

#include "common/vstatus.h"
#include "suites/engine/sink.h"
#include "suites/engine/estimate.h"

/* The steps a plan may name, as `vouch run` reaches them. The command table (runner/cli/commands.c
 * vcommands_plan_steps) hands them in, so plan/ knows no command. `suite` is a step's "suite";
 * argv[0] is that name. */
typedef struct {
  bool (*known)(const char *suite);                          /* a plan step of this build */
  /* Checks argv as the step would before it opens anything, running nothing: V_OK, or the usage
   * error naming the option. Only for a known suite. */
  vstatus (*check)(const char *suite, int argc, char **argv);
  /* Runs a known step, its records into `sink` (the run's, runner/evidence/rundir.h vrundir_sink):
   * its exit code. */
  int (*run)(const char *suite, int argc, char **argv, const vrec_sink *sink);
  /* What a known step will need on env (the suite's own estimate, beside its options:
   * suites/engine/estimate.h), into out; unsupported when the suite has none. */
  vstatus (*estimate)(const char *suite, int argc, char **argv, const dry_env *env, dry_step *out);
} vplan_steps;

/* `vouch run ARGS` (argv[0] "run"): the process exit code. */
int cmd_run(int argc, char **argv, const vplan_steps *steps);
/* Parses a plan's JSON text and checks its shape (steps, suites of this build, vars, when);
 * every problem names the plan `pname` and the field. */
vstatus run_plan_parse(const char *text, const char *pname, const vplan_steps *steps, cJSON **out);

#endif
