/* Communicators for tensor parallelism: a struct of function pointers a decode path calls
 * at its three collective points (docs/tensor-parallel.md):
 *   allreduce_sum  on the attention output after o_proj, before the residual add
 *   allreduce_sum  on the MLP / MoE output, before the residual add
 *   allgather      of the lm_head logits over the vocabulary blocks
 * An optimized path may instead reduce-scatter a block output, finish its own rows (residual
 * add + RMSNorm) and all-gather them (the two-stage reduce of kernels/latency_tp.h).
 * A path gets its communicator through vpath_opts.comm; NULL means "not sharded".
 * Implementations:
 *   common/comm_threads.c        N ranks as N threads of one process (CPU simulation; the sum
 *                                is taken in rank order, so it is deterministic and
 *                                bitwise identical on every rank)
 *   reference/cuda/comm_nccl.cu  NCCL, one process driving N GPUs or one process per GPU
 * Buffers are host memory for host paths and device memory for GPU paths; `stream` is the
 * path's cudaStream_t (NULL for host paths). Every rank must call the same collectives in
 * the same order with the same counts. */
#ifndef VOUCH_COMMON_COMM_H
#define VOUCH_COMMON_COMM_H

#include <stdbool.h>
#include <stdint.h>

#include "common/vstatus.h"
#include "common/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vcomm vcomm;
struct vcomm {
  const char *name;  /* "threads", "nccl" */
  int rank;          /* this rank, 0 <= rank < size */
  int size;          /* ranks in the communicator */
  void *ctx;         /* implementation state */
  /* In place: buf[i] = sum over ranks of buf[i], count elements of dt. */
  vstatus (*allreduce_sum)(const vcomm *c, void *buf, int64_t count, vdtype dt, void *stream);
  /* recv[r * count_per_rank + i] = send of rank r [i]; recv holds size * count_per_rank elements. */
  vstatus (*allgather)(const vcomm *c, const void *send, void *recv, int64_t count_per_rank, vdtype dt,
                       void *stream);
  /* recv[i] = sum over ranks of send[rank * count_per_rank + i]: send holds size * count_per_rank
   * elements, recv count_per_rank (this rank's chunk of the sum). The first stage of a two-stage
   * all-reduce (reduce-scatter, local work on the chunk, all-gather). */
  vstatus (*reduce_scatter_sum)(const vcomm *c, const void *send, void *recv, int64_t count_per_rank, vdtype dt,
                                void *stream);
};

/* The N communicators of one process (the TP wrapper drives one rank per thread). */
typedef struct vcomm_group vcomm_group;
struct vcomm_group {
  const char *name;  /* "threads", "nccl" */
  int size;          /* ranks */
  void *ctx;         /* implementation state */
  /* Rank r's communicator (valid until destroy). */
  const vcomm *(*rank)(vcomm_group *g, int r);
  /* A rank failed: every rank blocked in (or later entering) a collective returns an error
   * instead of waiting forever. */
  void (*abort)(vcomm_group *g);
  /* After an abort, once no rank is inside a collective: makes the group usable again.
   * V_ERR when it cannot (NCCL communicators are not reusable after an abort). */
  vstatus (*recover)(vcomm_group *g);
  void (*destroy)(vcomm_group *g);
};

/* A group of `size` thread ranks (common/comm_threads.c). */
vstatus vcomm_threads_group(vcomm_group **g, int size);

/* The launcher's view of this process (one process per GPU): rank, world size and local rank
 * from RANK/WORLD_SIZE/LOCAL_RANK (torchrun-style), SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID
 * (srun) or OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK (mpirun), first found wins. Returns false
 * (rank 0 of 1, local 0) when no launcher variables are set; malformed values are an error
 * reported through *err (V_ERR with the message), else *err = V_OK. */
bool vcomm_env_launch(int *rank, int *size, int *local_rank, vstatus *err);

/* Helper for paths: places gathered logit blocks into full rows. gathered is [size][R][blk]
 * (the allgather of each rank's [R, blk] block, blk = ceil(vocab/size)); out is [R, vocab]:
 * out[i][r*blk + j] = gathered[r][i][j] for r*blk + j < vocab. Host memory. */
void vcomm_place_vocab_blocks(float *out, const float *gathered, int R, int vocab, int size);

#ifdef __cplusplus
}
#endif

#endif
