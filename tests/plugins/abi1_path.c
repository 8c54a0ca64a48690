/* A --path-lib library of ABI 1 (built before vpath_ops.selectable, suites/paths/plugin.h): vouch must
 * read its vouch_path_ops only up to caps, so this library's `selectable` (bytes an ABI 1 library does
 * not have; here a function that aborts) is never called and the path counts as one that does not
 * enumerate its choices (tests/cli/test_coverage.sh). "abi1-ref" is cpu-ref otherwise. SLOW_PCT unused. */
#include <stdlib.h>

#include "suites/paths/plugin.h"

const int vouch_path_abi = 1; /* not VOUCH_PLUGIN_ABI: the stamp of a library built against ABI 1 */

static vstatus never(void *state, const vpath_envelope *env, vtrace *out) {
  (void)state, (void)env, (void)out;
  abort(); /* vouch read past an ABI 1 library's vpath_ops */
}

/* cpu-ref's declaration under another name; filled when vouch loads the library */
vpath_ops vouch_path_ops;

__attribute__((constructor)) static void abi1_init(void) {
  vouch_path_ops = cpu_ref_ops;
  vouch_path_ops.name = "abi1-ref";
  vouch_path_ops.desc = "cpu-ref declared by a library of ABI 1 (a test's)";
  vouch_path_ops.selectable = never;
}
