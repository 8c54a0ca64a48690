/* A plan, typed: what `vouch run` runs, checks, estimates and resumes (runner/plan/plan.c).
 *
 * A plan is JSON: {"name", "description", "vars": {...}, "required": {...},
 *                  "steps": [{"suite", "args": [...], "when", "needs": [...]}]}.
 * build_plan is the one place that JSON is parsed: it reads the text (a plan built into the binary,
 * suites/plans/plans.h, or a file), checks its shape, settles the variables (the plan's, those
 * derived from the device, then --model/--paths/--set) and expands every step's arguments once.
 * Every consumer (the options check, the dry run, the run, --resume) takes the vplan.
 * Variables: ${var} from the plan's "vars", overridden by --model/--paths/--set; a var X_gpu or
 * X_cpu defines ${X} for the GPU (or CPU) variant; ${device} is "gpu"/"cpu"; ${paths} defaults
 * to "cpu-ref". "required" maps a variable to what it holds: the plan does not build unless --set
 * gives it a non-empty value (a served plan has no server to default to). A step's "needs" lists
 * variables it uses that may stay empty (an optional dataset): empty, the step is not run and its
 * record says which --set would run it. */
#ifndef VOUCH_RUNNER_PLAN_PLAN_H
#define VOUCH_RUNNER_PLAN_PLAN_H

#include <stdbool.h>

#include "common/vstatus.h"
#include "suites/engine/estimate.h"
#include "suites/engine/sink.h"

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

#define VPLAN_MAX_VARS 64  /* the plan's own (at most 60, with the derived ones), then the overrides */
#define VPLAN_MAX_ARGV 128 /* argv slots per step: the suite, at most 126 args (later ones are dropped), NULL */
#define VPLAN_ARG_CAP 600  /* bytes of one expanded argument, its NUL included */

/* Where a step runs: "when" absent, "gpu" or "cpu". */
typedef enum { VPLAN_ANY = 0, VPLAN_GPU, VPLAN_CPU } vplan_when;

typedef struct {
  char key[48];  /* variable name, cut at 47 bytes */
  char val[512]; /* its value, cut at 511 bytes */
} vplan_var;

typedef struct {
  char *suite;     /* "suite": a plan step of this build (vplan_steps.known) */
  char **args;     /* [n_args] "args" as the plan writes them (${var} not expanded) */
  int n_args;
  vplan_when when; /* "when": the machine the step is for */
  char **needs;    /* [n_needs] "needs": variables that must be non-empty for the step to run */
  int n_needs;
  /* when is VPLAN_ANY or the plan's variant (vplan.gpu), and every variable in needs is non-empty */
  bool runs_here;
  char skip_why[160]; /* why the step does not run here (runs_here false), else "" */
  /* [argc + 1], NULL-terminated: suite, then args with the variables expanded; only when runs_here
   * (a step for the other machine may use variables only that machine defines), else NULL, 0 */
  char **argv;
  int argc;
} vplan_step;

typedef struct {
  char name[128];      /* the plan's own "name" when it is a plain file name, else the built-in name or
                        * the file's name without its extension (a run directory's default name) */
  char *description;   /* "description", or "" */
  char *text;          /* the JSON text as read: written to plan.json and hashed by the manifest */
  bool gpu;            /* the GPU variant: ${device} "gpu", vars X_gpu */
  vplan_var vars[VPLAN_MAX_VARS]; /* [n_vars] later entries win (plan, derived, overrides) */
  int n_vars;
  vplan_step *steps;   /* [n_steps] in the plan's order, n_steps >= 1 */
  int n_steps;
} vplan;

/* What a plan is built with besides its text. */
typedef struct {
  const vplan_steps *steps; /* the suites this build knows */
  const char *const *sets;  /* [n_sets] "VAR=VALUE" from --model, --paths, --set, in order */
  int n_sets;
  bool gpu;                 /* plan for a GPU (one is visible, or --gpu-mem names one) */
} vplan_opts;

/* Builds the plan `source` (a built-in plan's name, else a file's path) into *out. On failure *out
 * is NULL and the error, one line, names the plan and the field ("plan NAME: steps[3].suite must be
 * a string", "plan NAME: steps[1]: unknown variable ${x}"), or the file that cannot be read. */
vstatus build_plan(const char *source, const vplan_opts *o, vplan **out);
/* As build_plan, from the JSON `text` of the plan called `name` (errors name it). */
vstatus build_plan_text(const char *text, const char *name, const vplan_opts *o, vplan **out);
void free_plan(vplan *p);
/* The value of variable `key` (the last definition), or NULL. */
const char *plan_var(const vplan *p, const char *key);
/* "gpu" or "cpu": the machine a `when` names (NULL for VPLAN_ANY). */
const char *plan_when_name(vplan_when w);

#endif
