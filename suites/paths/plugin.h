/* The plugin SDK: the one header a --path-lib library includes (docs/plugins.md).
 *
 * A path library is a shared object that `vouch ... --path-lib FILE` loads into the vouch binary.
 * The binary exports its functions (CMake ENABLE_EXPORTS, the whole core linked in), so the library
 * calls them directly: errors (verr_*: one error state, so a message the library records arrives
 * with its text), traces (vtrace_*), the model it is handed (model/model.h) and the reference paths
 * it may wrap or fall back to (cpu_ref_ops; cuda_ref_ops in CUDA builds). It links against nothing
 * of vouch's: a library that carries its own copy of vouch's code is refused at load.
 *
 *   #include "suites/paths/plugin.h"
 *   VOUCH_PLUGIN_ABI;                          // once, at file scope
 *   const vpath_ops vouch_path_ops = {         // the path: name, open, forward, close, caps, ...
 *       .name = "my-path", ... .caps = {.host_weights = true}};
 *
 * vouch checks, before it reads vouch_path_ops, that the library defines vouch_path_abi equal to
 * its own VOUCH_PATH_ABI (a library built against other headers would be read with the wrong
 * layout), then checks the declaration field by field (suites/paths/paths.h, vpaths_register). */
#ifndef VOUCH_SUITES_PATHS_PLUGIN_H
#define VOUCH_SUITES_PATHS_PLUGIN_H

#ifdef __cplusplus
extern "C" {
#endif

#include "common/path.h"
#include "common/trace.h"
#include "common/vstatus.h"
#include "model/model.h"
#include "reference/cpu/cpu_ref.h"

#ifdef __cplusplus
}
#define VOUCH_PLUGIN_EXTERN_C extern "C"
#else
#define VOUCH_PLUGIN_EXTERN_C
#endif

/* Layout version of what a library and vouch share: vpath_ops, vpath_caps, vpath_opts, vstep,
 * ds_model and vtrace. Bumped whenever one of them changes layout. 2: vpath_ops grew `selectable` after
 * caps; vouch still loads a library of ABI 1 (its vpath_ops ends at caps: read that far, the rest NULL). */
#define VOUCH_PATH_ABI 2
#define VOUCH_PATH_ABI_OLDEST 1 /* the oldest ABI vouch still loads */

/* Defines `const int vouch_path_abi`, the symbol vouch checks first (write it once, at file scope,
 * followed by ';'). extern "C" in C++ and CUDA, where the ops need it too:
 * `extern "C" const vpath_ops vouch_path_ops = {...}` with positional initializers. */
#define VOUCH_PLUGIN_ABI VOUCH_PLUGIN_EXTERN_C const int vouch_path_abi = VOUCH_PATH_ABI

#endif
