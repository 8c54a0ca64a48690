/* Memory a decode path needs when it opens: pure arithmetic on the config, the same numbers the
 * GPU paths use to refuse an open that cannot fit (reference/cuda/cuda_ref.cu, kernels/latency.cu)
 * and `vouch run --dry-run` prints per plan step (runner/plan/cmd_run.c, suites/paths/paths.h vpath_estimate).
 *
 * The config is the one the path is opened on: under tensor parallelism a rank's local config
 * (model/shard.h ds_shard_config), whose lm_head holds `lm_rows` rows of the vocabulary. Every
 * figure is per rank (one GPU). Nothing here knows about CUDA. */
#ifndef VOUCH_MODEL_MEM_ESTIMATE_H
#define VOUCH_MODEL_MEM_ESTIMATE_H

#include <stdbool.h>
#include <stddef.h>

#include "common/vstatus.h"
#include "model/config.h"

typedef struct {
  double weight_bytes;   /* bytes: weights resident while the path is open (device for GPU paths) */
  double kv_bytes;       /* bytes: the KV cache (max_seq x max_ctx positions per layer) */
  double work_bytes;     /* bytes: workspace, logits, library scratch allocated at open */
  double optional_bytes; /* bytes: allocated only when it still fits after the rest (latency's v2_gemm
                          * attention workspace); not part of the total and never a reason to refuse */
  double host_bytes;     /* bytes of host memory the path holds (cpu-ref: everything; GPU paths: the
                          * checkpoint's host copy is not counted, synthetic weights are made on the GPU) */
  bool on_gpu;           /* weight/kv/work bytes live on a GPU (else in host memory) */
  int ranks;             /* GPUs the path spans (its TP degree; 1 unsharded): the bytes above are per
                          * GPU. Host paths: 1, their bytes already summed over simulated ranks */
  char kv_layout[48];    /* "bf16 expanded per head", "bf16 latent", "fp32 latent" */
} ds_mem_estimate;

/* What the path is opened with (a subset of vpath_opts, common/path.h). */
typedef struct {
  int max_seq;  /* KV cache slots */
  int max_ctx;  /* positions per slot */
  int lm_rows;  /* rows of lm_head this rank holds (0: vocab_size, or none when tied) */
  int tp;       /* ranks of the communicator (0 or 1: unsharded); sizes the TP buffers */
  bool dcp;     /* latency: the latent cache split by position over the tp ranks */
  int sms;      /* latency: SMs of the GPU (0: 132, an H100/H200) for the split-KV partials */
  int rows;     /* cuda-ref: token rows of the largest forward the caller will run, all sequences
                 * together (its workspace grows to them, reference/cuda/cuda_ref.cu ensure_ws and,
                 * under TP, ensure_tpo; a sweep's prefill chunk is up to 8192); 0: what open
                 * allocates. latency runs any count in chunks of its 64-row workspace and ignores it */
  int logit_rows; /* cuda-ref: rows of logits of the largest forward (ensure_logits; every position's
                   * under speculative decoding); 0 or 1: what open allocates */
} ds_mem_opts;

/* cuda-ref (reference/cuda/cuda_ref.cu): each weight it binds as bf16 (the router bias fp32), every
 * tensor 256-byte aligned in one arena; the expanded K and V caches (layers x max_seq x max_ctx x
 * H x (n+r) and x v, bf16); a fixed working space (DS_MEM_CUDA_REF_RESERVE) for the workspace,
 * logits and cuBLAS, and on top of it the buffers that grow with a forward: for o->rows > 0,
 * ws_layout's workspace of that many rows (rounded up to 64, as ensure_ws does) and under TP the
 * partial sums (ensure_tpo); for o->logit_rows > 1, the logits (and under TP the gathered blocks).
 * An upper bound: the open's small buffers these replace are inside the reserve. */
vstatus ds_mem_cuda_ref(const ds_config *c, const ds_mem_opts *o, ds_mem_estimate *out);
/* cuda-ref's widest FFN row (its g/u/a workspace columns): the routed and shared experts', and the
 * dense FFN's when some layer is dense; at least 1. */
static inline int ds_mem_cuda_ref_imax(const ds_config *c) {
  const int F = c->moe_intermediate_size, Fs = c->moe_intermediate_size * c->n_shared_experts;
  int m = F > Fs ? F : Fs;
  if ((c->first_k_dense_replace > 0 || c->n_routed_experts == 0) && c->intermediate_size > m) m = c->intermediate_size;
  return m > 0 ? m : 1;
}
/* latency (kernels/latency.cu): the same weights plus W_UK^T per layer and the gate/up staging
 * buffer, the latent cache (layers x max_seq x ceil(max_ctx / dcp ranks) x (kv_lora + r), bf16) and
 * the workspace of alloc_workspace for 64 token rows (split-KV partials bounded by 2 x SMs + 64
 * rows); v2_gemm's attention workspace is optional_bytes. An upper bound by at most a few MiB. */
vstatus ds_mem_latency(const ds_config *c, const ds_mem_opts *o, ds_mem_estimate *out);
/* cpu-ref (reference/cpu/cpu_ref.c): fp32 weights and fp32 latent cache in host memory. */
vstatus ds_mem_cpu_ref(const ds_config *c, const ds_mem_opts *o, ds_mem_estimate *out);

#define DS_MEM_CUDA_REF_RESERVE ((double)(512u << 20)) /* cuda-ref's working space at open */

/* weight + kv + work bytes (what must fit at once). */
static inline double ds_mem_total(const ds_mem_estimate *e) { return e->weight_bytes + e->kv_bytes + e->work_bytes; }

/* V_OK when e fits in free_b bytes; else V_ERR with one line: "PATH: needs X GiB of weights + Y GiB
 * of KV cache (L layers x max_seq S x max_ctx C, LAYOUT) + Z GiB working space, but DEVICE has F GiB
 * free of T GiB: lower max_seq/max_ctx or use fewer layers". */
vstatus ds_mem_check(const char *path, const ds_mem_estimate *e, const ds_config *c, const ds_mem_opts *o,
                     double free_b, double total_b, const char *device);

#endif
