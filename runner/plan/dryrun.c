/* Per-step memory and time estimates of a plan (runner/plan/dryrun.h): the step's suite, found as
 * `vouch run` finds it, estimates itself (its estimate function sits beside its options). */
#include "runner/plan/dryrun.h"

#include <assert.h>

static const vplan_steps *g_steps; /* the command table's plan steps (dry_use_steps) */

void dry_use_steps(const vplan_steps *steps) { g_steps = steps; }

vstatus dry_estimate(int argc, char **argv, const dry_env *env, dry_step *out) {
  assert(g_steps && argc >= 1);
  vest_clear(out);
  if (!g_steps->known(argv[0])) return VUNSUPPORTED("%s: no estimate for this suite", argv[0]);
  return g_steps->estimate(argv[0], argc, argv, env, out);
}
