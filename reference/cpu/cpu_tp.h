/* The tensor-parallel wrapper of a decode path (docs/tensor-parallel.md). It opens TP N as
 * N instances of an inner path ("cpu-ref", "cuda-ref"), each on its rank's shard of the model
 * (model/shard.h) with its rank's communicator (common/comm.h), and drives them from N
 * persistent worker threads, one per rank (a GPU path's rank keeps its device current on its
 * own thread). Every call (forward, reset, fill_cache) runs on all ranks at once and returns
 * when all finished; the caller sees rank 0's logits (every rank ends with the same, gathered
 * over the vocabulary). When one rank fails, the group is aborted so no rank waits forever,
 * and the first failing rank's message is returned.
 *
 * Trace: rank 0's events, plus one "tp" event per step naming the communicator and degree. */
#ifndef VOUCH_REFERENCE_CPU_CPU_TP_H
#define VOUCH_REFERENCE_CPU_CPU_TP_H

#include "common/comm.h"
#include "common/path.h"
#include "model/model.h"

/* Makes the communicator group of `size` ranks for a wrapper opened with options `o`. */
typedef vstatus (*tp_group_fn)(vcomm_group **g, int size, const vpath_opts *o);

/* Opens the wrapper: TP o->tp of `inner` on full model m. Rank r gets m's shard r, a copy of o
 * with tp 0, comm = rank r's communicator (o->ep: an expert-parallel shard, ds_shard_model_ep;
 * E must divide by N), device o->device + r, n_threads
 * max(1, threads / N) (threads: o->n_threads, or all cores when 0), trace only on rank 0.
 * The shards are built here (when m has no host data: lazy for GPU paths, which synthesize their
 * block on the device, generated on the host for host paths) and freed at close;
 * m must stay open while the wrapper is. Close with the close() of tp_path_make_ops. */
vstatus tp_path_open(void **state, const vpath_ops *inner, tp_group_fn group, const ds_model *m, const vpath_opts *o);

/* Fills `ops` with the wrapper's operations for `inner`: name, desc and latent_kv of the inner
 * path (the same path, sharded), fill_cache / last_step_ms only when the inner path has them,
 * open NULL (use tp_path_open). */
void tp_path_make_ops(vpath_ops *ops, const vpath_ops *inner);

/* One rank of a multi-process job (one process per GPU, started by srun/mpirun/torchrun):
 * opens `inner` on shard comm->rank of comm->size of m with communicator comm, which it owns
 * (freed with free_comm at close, or at once on failure). Ops from tp_path_make_rank_ops. */
vstatus tp_path_open_rank(void **state, const vpath_ops *inner, vcomm *comm, void (*free_comm)(vcomm *),
                          const ds_model *m, const vpath_opts *o);
void tp_path_make_rank_ops(vpath_ops *ops, const vpath_ops *inner);

/* The thread-communicator group factory (CPU simulation). */
vstatus tp_threads_group(vcomm_group **g, int size, const vpath_opts *o);

#endif
