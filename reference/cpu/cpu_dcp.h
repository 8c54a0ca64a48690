/* Decode context parallelism (DCP) for cpu-ref (docs/tensor-parallel.md, "Decode context
 * parallelism"): on top of TP N, the N ranks split the KV cache by position instead of by
 * head. Rank r caches the positions p with p % N == r (interleaved, so short and long
 * sequences spread evenly) for ALL heads; local index j of a slot holds position j*N + r.
 * A slot holds at most ceil(max_ctx / N) positions per rank, grown on demand like cpu-ref's
 * own cache and bounded by the same byte limit.
 *
 * Per layer and step (cpu_dcp_attention):
 *   1. the caller computed q (post-RoPE) and k_nope / v of its own H/N heads for the new
 *      tokens (kv_b_proj is sharded by head) and k_rot (replicated: kv_a_proj_with_mqa is
 *      replicated and its input is identical on every rank, so k_rot is not exchanged);
 *   2. one all-gather of [T, H/N, qk + nope + v] per rank: every rank has q, k, v of all heads;
 *   3. the owner of each new position (p % N == rank) stores its K/V for all heads;
 *   4. each rank attends every (token, head) over its own cached positions p <= the token's
 *      position (causal): o_r normalized by its own softmax sum and lse_r = log sum exp(s)
 *      (-inf, o_r = 0 when it holds no visible key);
 *   5. one all-gather of (o_r, lse_r) [T, H, v + 1]; each rank combines its own heads with
 *      cpu_dcp_combine; o_proj and its all-reduce follow in cpu_ref.c as under plain TP.
 * fill_cache (cpu_dcp_fill) runs steps 2-3 without q. */
#ifndef VOUCH_REFERENCE_CPU_CPU_DCP_H
#define VOUCH_REFERENCE_CPU_CPU_DCP_H

#include <stddef.h>
#include <stdint.h>

#include "common/comm.h"
#include "common/trace.h"
#include "common/vstatus.h"

typedef struct cpu_dcp cpu_dcp;

/* Shapes of one rank's DCP state. */
typedef struct {
  int max_seq;      /* cache slots */
  int max_ctx;      /* positions per slot over all ranks (each rank holds ceil(max_ctx / N)) */
  int layers;       /* num_hidden_layers */
  int local_heads;  /* heads of this rank's TP shard, H / N */
  int nope, rope;   /* qk_nope_head_dim, qk_rope_head_dim */
  int vd;           /* v_head_dim */
  float scale;      /* softmax scale */
  int n_threads;    /* threads for the partial attention (>= 1) */
  size_t kv_limit;  /* bytes this rank's cache may use */
} cpu_dcp_dims;

/* Opens the state of rank comm->rank of comm->size. */
vstatus cpu_dcp_open(cpu_dcp **d, const vcomm *comm, const cpu_dcp_dims *dims);
void cpu_dcp_close(cpu_dcp *d);

/* Positions [0, n_pos) of a slot owned by rank `rank` of `size`: ceil((n_pos - rank) / size), >= 0. */
static inline int cpu_dcp_owned(int n_pos, int rank, int size) {
  return n_pos > rank ? (n_pos - 1 - rank) / size + 1 : 0;
}

/* Makes slot `seq` hold this rank's share of positions [0, n_pos). */
vstatus cpu_dcp_reserve(cpu_dcp *d, int seq, int n_pos);

/* The attention of layer l for T new tokens (slot[t], pos[t]); every rank calls it with the
 * same T. q [T, H/N, nope+rope] post-RoPE queries of this rank's heads; kv [T, H/N, nope+v]
 * kv_b_proj output of this rank's heads; k_rot of token t at krot + t*krot_stride (post-RoPE,
 * identical on every rank). Stores the owned new positions, then writes att [T, H/N, v]: the
 * attention output of this rank's heads over the whole context (all ranks' keys). */
vstatus cpu_dcp_attention(cpu_dcp *d, int l, int T, const int *slot, const int *pos, const float *q,
                          const float *kv, const float *krot, int64_t krot_stride, float *att);

/* The cache write of fill_cache for layer l: T positions, the same arguments as
 * cpu_dcp_attention without q; every rank calls it with the same T. */
vstatus cpu_dcp_fill(cpu_dcp *d, int l, int T, const int *slot, const int *pos, const float *kv, const float *krot,
                     int64_t krot_stride);

/* The log-sum-exp combine of n partial attention outputs of one (token, head):
 *   out[i] = sum_r w_r * o_r[i] / sum_r w_r,  w_r = exp(lse_r - M),  M = max_r lse_r,
 * where o_r = o + r*stride ([vd] floats, normalized by its own softmax sum) and
 * lse_r = lse[r*stride] (log of that sum of exp(scores)). A part with lse_r = -inf (no
 * visible key) has weight 0 and its o_r is not read; when every part is -inf, out = 0. A NaN
 * lse gives NaN outputs. Weights are computed in double. */
void cpu_dcp_combine(float *out, const float *o, const float *lse, int n, int64_t stride, int vd);

/* Records a "dcp" event for a step of T tokens (NULL trace: nothing). */
void cpu_dcp_trace(const cpu_dcp *d, vtrace *tr, const char *path, int T);

#endif
