/* What one plan step will need before it runs (`vouch run --dry-run`, and the check `vouch run`
 * makes first): the paths it opens and how (all at once or one at a time), the peak memory per GPU
 * and on the host, and an expected time. Each suite estimates itself, beside its options, from its
 * own parsed options (vsuite.estimate, suites/engine/suite.h; the cost model and the dry_env /
 * dry_step types are suites/engine/estimate.h); the dry run finds the step's suite through the plan
 * steps the command table hands `vouch run` (vplan_steps.estimate). */
#ifndef VOUCH_RUNNER_PLAN_DRYRUN_H
#define VOUCH_RUNNER_PLAN_DRYRUN_H

#include "common/vstatus.h"
#include "runner/plan/cmd_run.h"
#include "suites/engine/estimate.h"

/* The plan steps dry_estimate finds a step's suite in: the command table's, handed to cmd_run
 * (which installs them before its first estimate). */
void dry_use_steps(const vplan_steps *steps);

/* Estimates the step `argv` (argv[0] the suite, "eval" then "mrcr"/"chain"; variables expanded) on
 * env into out (zeroed first). V_ERR when its options cannot be read the way the suite reads them
 * (the suite would reject them too), naming the option, or its model's config cannot be read;
 * unsupported when the suite has no estimate. dry_use_steps first. */
vstatus dry_estimate(int argc, char **argv, const dry_env *env, dry_step *out);

#endif
