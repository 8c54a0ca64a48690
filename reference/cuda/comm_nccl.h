/* NCCL communicators (common/comm.h) for cuda-ref under tensor parallelism.
 *   One process driving N GPUs: comm_nccl_tp_group makes N communicators with
 *   ncclCommInitAll over devices o->device .. o->device + N - 1; the TP wrapper
 *   (reference/cpu/cpu_tp.h) drives each from its own thread.
 *   One process per GPU (srun, mpirun, torchrun-style launchers): comm_nccl_from_env joins the
 *   job's communicator with ncclCommInitRank; rank and size come from vcomm_env_launch
 *   (common/comm.h). The unique id travels through a file: VOUCH_NCCL_ID_FILE names it (rank 0
 *   writes it, the others wait for it), or NCCL's own bootstrap address NCCL_COMM_ID
 *   ("host:port"; MASTER_ADDR:MASTER_PORT is used when only those are set).
 * NVLink SHARP / multicast stays off: NCCL_NVLS_ENABLE=0 is set when unset, and nothing here
 * creates multicast objects. Collectives run on the path's stream (asynchronous). */
#ifndef VOUCH_REFERENCE_CUDA_COMM_NCCL_H
#define VOUCH_REFERENCE_CUDA_COMM_NCCL_H

#include "common/comm.h"
#include "common/path.h"

#ifdef __cplusplus
extern "C" {
#endif

/* N communicators of one process (ncclCommInitAll), for the TP wrapper. */
vstatus comm_nccl_tp_group(vcomm_group **g, int size, const vpath_opts *o);
/* This process's communicator in a launcher's job (ncclCommInitRank) on GPU `device`. */
vstatus comm_nccl_from_env(vcomm **c, int device);
void comm_nccl_free(vcomm *c);

#ifdef __cplusplus
}
#endif

#endif
