/* The registry of decode paths built into this binary, plus paths loaded from a user's
 * shared library (--path-lib FILE exporting `const vpath_ops vouch_path_ops`). */
#ifndef VOUCH_SUITES_PATHS_PATHS_H
#define VOUCH_SUITES_PATHS_PATHS_H

#include "common/path.h"
#include "model/mem_estimate.h"
#include "model/model.h"

/* A path as the user names it, parsed once where its name enters (suites/paths/spec.h
 * vpath_spec_parse) and handed down typed. */
typedef struct {
  char name[128];       /* the text as given ("latency:tp4:dcp@tp_rsag"): records and messages print it */
  char base[64];        /* the registered path NAME ("latency") */
  int tp;               /* N of ":tpN" (1..4096); 0: the name fixes none (the caller's --tp applies) */
  bool dcp;             /* ":dcp": decode context parallelism over the TP ranks */
  bool ep;              /* ":ep": expert parallelism over the TP ranks */
  char variant[64];     /* the words after '@' ("tp_nccl,tp_split_in"); "": none (the caller's --variant) */
  const vpath_ops *ops; /* the path's declaration in the registry; NULL in a spec of vpath_spec_split or of
                         * vpath_spec_lookup for a path this build lacks (the dry run's prices) */
  vpath_caps caps;      /* ops->caps (zero without ops): host_weights, tp kind, dcp, ep, ... */
  bool splits_inputs;   /* caps.tp_splits_inputs(variant): under TP each rank reads only its share of the input
                         * projections and the router (the sweep's byte model) */
} vpath_spec;

/* The registered path NAME (built-in or loaded; no suffixes: a user's text goes through vpath_spec_parse,
 * suites/paths/spec.h), NULL when there is none. */
const vpath_ops *vpaths_find(const char *name);
/* What the dry run knows of a built-in path, by its registered name, also where this build lacks it. */
typedef vstatus (*vpath_mem_fn)(const ds_config *c, const ds_mem_opts *o, ds_mem_estimate *out);
typedef struct {
  const char *name;        /* the registered NAME */
  vpath_mem_fn mem;        /* its memory model (model/mem_estimate.h): what its open refuses on */
  bool kv_latent;          /* its KV cache is the latent one (bf16 compressed KV + rope keys): a decode step's bytes */
  bool reference_kernels;  /* its op variants are the reference's few (the kernels suite's time) */
} vpath_builtin;
/* The built-in path `base` (a spec's base name), NULL for any other (a --path-lib path: no model). */
const vpath_builtin *vpaths_builtin(const char *base);
/* Space-separated names of the built-in paths. */
const char *vpaths_names(void);
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
/* Opens the path `spec` (vpath_spec_parse) with options o on model m.
 * Tensor parallelism (docs/tensor-parallel.md): o->tp >= 1, or spec->tp (a name's ":tpN", which wins),
 * opens the TP wrapper (reference/cpu/cpu_tp.h) of the path at degree N on m's shards, with the
 * communicators its caps.tp declares (cpu-ref: threads; cuda-ref and latency: NCCL). tp 1 runs the
 * wrapper and its communication calls with one rank (the cost of the TP code path); tp 0 opens the plain
 * path. spec->dcp (or o->dcp) adds decode context parallelism, spec->ep (or o->ep) makes the routed
 * experts expert-parallel over the TP ranks; a path that does not declare them (caps.dcp, caps.ep) is
 * V_UNSUPPORTED with the reason before any rank opens, and either without a TP degree is V_ERR.
 * spec->variant (when not "") sets o->variant for this path only, so one sweep can compare variants of a
 * path ("latency:tp4@tp_rsag", "latency@v5_cublas"). Errors are prefixed "path NAME" (spec->name); a spec
 * without ops (not parsed: a name only) is V_ERR "unknown path".
 * Proof that the path ran (issue 37, suites/paths/ran.h): the opened path records into a tally of its own
 * (vpath_ran; teed to o->trace), and p->ops wrap the path's so that a hand-over to another path (a
 * fallback event) that o->expect_fallback does not declare is V_ERR naming the path, where it fell back to
 * and why, and --expect-fallback: at open (the path is closed), and in any step (that forward fails). */
vstatus vpath_open(vpath *p, const vpath_spec *spec, const ds_model *m, const vpath_opts *o);
void vpath_close(vpath *p);
/* What the path opened by vpath_open recorded since its open or the last vpath_ran_clear: one event per
 * distinct (kind, path, op, variant) with its count (common/trace.h tally). NULL for a vpath not
 * opened by vpath_open. */
const vtrace *vpath_ran(const vpath *p);
/* Starts p's tally afresh (a case's records name what ran in that case). */
void vpath_ran_clear(vpath *p);
/* Closes p (opened by vpath_open) after copying its tally into *ran (zeroed, or an earlier one: freed
 * first), for the records made after the path closed. V_ERR on out of memory (p closed, *ran empty). */
vstatus vpath_close_keep(vpath *p, vtrace *ran);
/* The memory the path `spec` needs when opened with o (spec's tp, dcp, ep win over o's, as in vpath_open)
 * on a model of config `full` (the unsharded config): the same arithmetic the path refuses an open with
 * (model/mem_estimate.h), per GPU and on each rank's shard under TP; a path with simulated ranks
 * (caps.tp threads) holds every rank's shard in host memory. sms: the GPU's SMs (0: an H200's); rows,
 * logit_rows: token rows and logit rows of the largest forward that will run (ds_mem_opts; 0: none beyond
 * what open allocates). The memory models are the registry's, one per built-in path, known also for the
 * built-in paths this build lacks (spec->ops NULL: a vpath_spec_split spec). V_UNSUPPORTED for a path
 * with no memory model (one loaded with --path-lib); V_ERR when the model cannot be split tp ways. */
vstatus vpath_estimate(const vpath_spec *spec, const ds_config *full, const vpath_opts *o, int sms, int rows,
                       int logit_rows, ds_mem_estimate *out);

#endif
