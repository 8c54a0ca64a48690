/* Tensor parallelism for the latency path: how a block's partial output (each rank's heads
 * through o_proj, or its slice of the MLP / experts) becomes the next sub-layer's input on every
 * rank. The sum over ranks, the residual add and the RMSNorm that follows happen together:
 *
 *   LAT_TP_ONESHOT  one kernel, no NCCL: every rank reads every rank's fp32 partial over NVLink
 *                   (CUDA peer access), sums them in rank order, adds the residual and writes the
 *                   normed row. A per-block flag barrier in device memory replaces the collective
 *                   (no multicast objects). Needs every rank in this process and peer access
 *                   between all GPUs; the sum is the same float operations on every rank, so all
 *                   ranks hold bitwise the same residual and the replicated router agrees.
 *   LAT_TP_NCCL     ncclAllReduce of the fp32 partial, then one residual + RMSNorm kernel.
 *   LAT_TP_RSAG     two-stage: ncclReduceScatter by rows (rows padded to a multiple of the rank
 *                   count), residual + RMSNorm of this rank's rows only, ncclAllGather of the
 *                   residual (fp32) and the normed rows (bf16): the norm runs once per row instead
 *                   of once per rank, and each rank receives 1/N of the reduced bytes.
 *
 * The replicated input projections ([q_a | kv_a_proj_with_mqa] and the router) are split by rows
 * instead: rank r multiplies its block (lat_tp_row_block), the blocks are all-gathered through the
 * communicator and lat_tp_place_blocks puts them back into full rows.
 *
 * Safety of the oneshot buffers: a rank writes its partial for the attention block into part[0]
 * and for the MLP block into part[1]. Before rank r rewrites part[i], it has passed the barrier
 * of the other block's reduce, which every rank enters only after its previous kernel (the one
 * reading part[i]) finished. Any collective (NCCL included) between the two uses works the same. */
#ifndef VOUCH_KERNELS_LATENCY_TP_H
#define VOUCH_KERNELS_LATENCY_TP_H

#include <cuda_runtime.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "common/comm.h"
#include "common/vstatus.h"

#define LAT_TP_MAX 16    /* most ranks */
#define LAT_TP_BLOCKS 64 /* most blocks of the oneshot kernel (its barrier has one flag per block) */

enum { LAT_TP_AUTO = 0, LAT_TP_ONESHOT = 1, LAT_TP_NCCL = 2, LAT_TP_RSAG = 3, LAT_TP_NMODES = 4 };

typedef struct {
  const vcomm *comm;                     /* this rank's communicator */
  int rank, size;                        /* comm->rank, comm->size */
  int D;                                 /* hidden size (row length) */
  int rows;                              /* most rows of one reduce (the caller's x / xn hold rows_alloc) */
  int rows_alloc;                        /* rows the caller must allocate in x and xn: rows rounded up to size */
  float *part[2];                        /* [rows_alloc, D] fp32 partial outputs: 0 attention, 1 MLP */
  float *rs;                             /* [rows_alloc / size, D] reduce-scatter output */
  bool p2p;                              /* the oneshot kernel can run */
  char no_p2p[160];                      /* why not, when !p2p */
  const float *peer_part[2][LAT_TP_MAX]; /* every rank's part[i] (device pointers, this process) */
  uint32_t *peer_sig[LAT_TP_MAX];        /* every rank's flag array */
  uint32_t *sig;                         /* [LAT_TP_MAX][LAT_TP_BLOCKS] flags peers write here */
  uint32_t *epoch;                       /* [LAT_TP_BLOCKS] calls seen by each oneshot block */
} lat_tp;

const char *lat_tp_mode_name(int mode); /* "p2p_oneshot", "nccl", "nccl_rs_ag" */
/* "oneshot" / "nccl" / "rsag" (as in --variant tp_oneshot) -> mode; -1 when unknown. */
int lat_tp_mode_from_name(const char *s);

/* Allocates the buffers on the current device and exchanges pointers with the other ranks
 * (a collective: every rank calls it). device is this rank's GPU. p2p is false (with the reason
 * in no_p2p) when the ranks are in different processes or a pair of GPUs lacks peer access.
 * On failure everything allocated is freed. */
vstatus lat_tp_open(lat_tp *t, const vcomm *c, int device, int D, int rows, cudaStream_t st);
void lat_tp_close(lat_tp *t);
/* The allocation half of lat_tp_open, without a communicator (comm NULL, p2p false): tests wire
 * several ranks of one process by hand (peer_part / peer_sig / p2p), e.g. R ranks on one GPU. */
vstatus lat_tp_alloc(lat_tp *t, int rank, int size, int D, int rows, cudaStream_t st);

/* The mode AUTO picks for T rows (the oneshot while it is available, else NCCL). */
int lat_tp_auto_mode(const lat_tp *t, int T);

/* x[t] += sum over ranks of part[which][t]; xn[t] = bf16(rmsnorm(x[t]) * w), for t < T, with
 * `mode` (not AUTO). x is [rows_alloc, D] fp32, xn [rows_alloc, D] bf16; rows >= T of x / xn may
 * be overwritten (zeroed) by RSAG. V_UNSUPPORTED when the mode cannot run here (oneshot without
 * peer access), V_ERR on a CUDA / NCCL failure. Every rank must call it with the same T, which
 * and mode. */
vstatus lat_tp_reduce_add_norm(lat_tp *t, int mode, int which, float *x, uint16_t *xn, const uint16_t *w, int T,
                               float eps, cudaStream_t st);

/* Split input projections (the replicated q_a | kv_a_proj_with_mqa rows and the router): rank r
 * of `size` multiplies only rows [*r0, *r0 + *n) of an n_total-row weight, blocks of
 * ceil(n_total / size) rows (the returned block size); the last blocks are short or empty, their
 * missing rows count as zero padding that is never computed. */
static inline int lat_tp_row_block(int n_total, int size, int rank, int *r0, int *n) {
  const int blk = (n_total + size - 1) / size;
  int a = rank * blk, b = a + blk;
  if (a > n_total) a = n_total;
  if (b > n_total) b = n_total;
  *r0 = a;
  *n = b - a;
  return blk;
}

/* out[t * ldo + c] = gathered[(r * T + t) * blk + j] for c = r * blk + j < ncols, t < T: the
 * rank-major all-gather ([N][T][blk], each rank's [T, blk] output block) placed as the columns
 * of [T, ncols] rows with stride ldo. Columns a short last block lacks (r * blk + j >= ncols)
 * are dropped; out columns >= ncols are not written. esz: 2 (bf16) or 4 (fp32); a copy, exact.
 * V_ERR unless 1 <= N <= LAT_TP_MAX, T >= 1, N * blk >= ncols >= 1 and ldo >= ncols. */
vstatus lat_tp_place_blocks(void *out, int ldo, const void *gathered, int N, int T, int blk, int ncols, int esz,
                            cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif
