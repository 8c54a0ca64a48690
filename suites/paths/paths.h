/* The registry of decode paths built into this binary, plus paths loaded from a user's
 * shared library (--path-lib FILE exporting `const vpath_ops vouch_path_ops`). */
#ifndef VOUCH_SUITES_PATHS_PATHS_H
#define VOUCH_SUITES_PATHS_PATHS_H

#include "common/path.h"
#include "model/mem_estimate.h"
#include "model/model.h"

/* NULL when unknown ("NAME:tpN", "NAME:tpN:dcp", "NAME:tpN:ep", "NAME@VARIANT" find NAME). */
const vpath_ops *vpaths_find(const char *name);
/* Space-separated names of the built-in paths. */
const char *vpaths_names(void);
/* The TP degree a name fixes ("latency:tp4@x" -> 4), 0 when it fixes none or is malformed. */
int vpaths_name_tp(const char *name);
/* True when the name asks for decode context parallelism ("NAME:tpN:dcp[@VARIANT]"). */
bool vpaths_name_dcp(const char *name);
/* True when the name asks for expert parallelism ("NAME:tpN:ep[:dcp][@VARIANT]"). */
bool vpaths_name_ep(const char *name);
/* True when the path `name` declares host weights (vpath_caps.host_weights): its model must be opened
 * with a host copy. False for an unknown name. */
bool vpaths_host_weights(const char *name);
/* True when, under TP, the path `name` with the variant words after its '@' reads only its share of the
 * input projections and the router (vpath_caps.tp_splits_inputs; the sweep's byte model). False for an
 * unknown name or a path that does not declare it. */
bool vpaths_tp_splits_inputs(const char *name);
/* Adds a path to the registry; it is then found by ops->name. The declaration is checked as untrusted
 * input: V_ERR naming `origin` (a file, for messages) and the field when the name is empty, too long
 * or holds ':', '@', ',' or blanks, is already a path, open/forward/close is NULL, a bool is not 0/1,
 * caps.tp is not a vpath_tp_kind, or dcp/ep is declared without tp; or when 8 paths are loaded.
 * `ops` must live as long as the process (it is not copied). */
vstatus vpaths_register(const vpath_ops *ops, const char *origin);
/* Loads a path from a shared library (docs/plugins.md) and registers it (vpaths_register); loading the
 * same library again does nothing. V_ERR naming the file when it cannot be loaded (dlopen's reason),
 * lacks vouch_path_abi or has another ABI (suites/paths/plugin.h), carries its own copy of vouch's code,
 * lacks vouch_path_ops, or declares it badly. */
vstatus vpaths_load_lib(const char *file);
/* The paths loaded or registered so far (vpaths_register), in order. */
int vpaths_n_loaded(void);
/* Loaded path i (0 <= i < vpaths_n_loaded()); *file (when file is not NULL) is its --path-lib file as
 * given, NULL for a path registered in code. */
const vpath_ops *vpaths_loaded(int i, const char **file);
/* Finds and opens a path; unknown names are an error listing the known ones.
 * Tensor parallelism (docs/tensor-parallel.md): o->tp >= 1, or a name "NAME:tpN", opens the
 * TP wrapper (reference/cpu/cpu_tp.h) of NAME at degree N on m's shards: cpu-ref with thread
 * communicators, cuda-ref and latency with NCCL. tp 1 runs the wrapper and its communication
 * calls with one rank (the cost of the TP code path); tp 0 opens the plain path. ":dcp" adds
 * decode context parallelism (cpu-ref, latency). ":ep" (or o->ep) makes the routed experts
 * expert-parallel over the TP ranks (cpu-ref only: other paths are V_UNSUPPORTED with the reason,
 * before any rank opens); ":ep:dcp" combines both. "@VARIANT" sets o->variant for this path only, so one
 * sweep can compare variants of a path ("latency:tp4@tp_rsag", "latency@v5_cublas"). */
vstatus vpath_open(vpath *p, const char *name, const ds_model *m, const vpath_opts *o);
void vpath_close(vpath *p);
/* The memory path `name` (with its :tpN/:dcp/:ep/@VARIANT suffixes) needs when opened with o on a
 * model of config `full` (the unsharded config): the same arithmetic the path refuses an open with
 * (model/mem_estimate.h), per GPU and on each rank's shard under TP. sms: the GPU's SMs (0: an
 * H200's); rows, logit_rows: token rows and logit rows of the largest forward that will run
 * (ds_mem_opts; 0: none beyond what open allocates). V_UNSUPPORTED for a path with no memory model
 * (one loaded with --path-lib). */
vstatus vpath_estimate(const char *name, const ds_config *full, const vpath_opts *o, int sms, int rows,
                       int logit_rows, ds_mem_estimate *out);

#endif
