/* The kernels of the "latency" decode path and their C-callable launchers (device
 * pointers, asynchronous on `stream`, V_ERR when a launch failed). bf16 tensors are raw
 * bf16 bits (uint16_t), accumulation is fp32, row-major everywhere. The numerics suite
 * can register each family's variants through these launchers.
 *
 * Families (variants are numbered; lat_gemm_variant_name() spells them):
 *   lat_gemm        skinny GEMM / GEMV y[T,N] = x[T,K] . W[N,K]^T for decode token counts:
 *                     v1_mma_n8   mma.sync m16n8k16, 16 weight rows per CTA, tokens 1..8
 *                     v2_mma_n16  32 rows per CTA, tokens 1..16
 *                     v3_mma_n32  32 rows per CTA, tokens 1..32
 *                     v4_mma_n64  32 rows per CTA, tokens 1..64
 *                     v5_cublas   cublasGemmEx / strided batched (dense only)
 *                     v6_cp_n8 .. v9_cp_n64  as v1..v4 (tokens 1..8/16/32/64), weights through a
 *                                 4-stage cp.async shared-memory ring per warp (more bytes in flight)
 *                     v10_cp_w8   v6's ring with 8 row groups per CTA (a warp per 16 rows, all of k)
 *                     v11_cp_m2   v6 with 32 rows per CTA and 3 ring stages
 *                   weights streamed once per step with 16-byte loads for all tokens, split-K
 *                   inside the CTA (8 warps) and across CTAs (deterministic reduce kernel),
 *                   batched over z (heads) or grouped over routed experts (MoE mode).
 *   lat_embed_norm, lat_add_rmsnorm, lat_moe_combine_norm: fused residual add + RMSNorm.
 *   lat_mla_prep    q_a_layernorm, kv_a_layernorm and RoPE(k_rot) -> latent cache store.
 *   lat_mla_attn    absorbed MLA decode over the latent cache, flash-decoding split-KV,
 *                   then lat_mla_combine (log-sum-exp merge of the splits); for long
 *                   contexts lat_mla_attn_gemm (tensor cores via cuBLAS, latency_mla_gemm.cu).
 *   lat_router_topk sigmoid + bias + group-limited top-k (HF 0.0 masking) + normalize + scale.
 *   lat_moe_bucket  token->expert buckets on the device (no host sync); lat_router_fused: the
 *                   router logits, top-k and buckets in one grid at T <= 4. */
#ifndef VOUCH_KERNELS_LATENCY_KERNELS_H
#define VOUCH_KERNELS_LATENCY_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "common/vstatus.h"

/* The GEMM variants, one row each: X(number, enum, name, family, most token rows per CTA, what it
 * is). family MMA: mma.sync kernels with a tile shape V<number>_SHAPE in latency_gemm.cu; CUBLAS:
 * cuBLAS. The enum, names, token limits, dispatch, shared-memory setup and the numerics suite's
 * registration (latency_variants.cu) are all made from this list: a new variant is one row here
 * and its V<number>_SHAPE. Numbers are stable (variant words and records name them). */
#define LAT_GEMM_VARIANTS(X)                                                                                  \
  X(1, LAT_V1_MMA_N8, v1_mma_n8, MMA, 8, "mma.sync, 16 rows/CTA, tokens 1..8")                               \
  X(2, LAT_V2_MMA_N16, v2_mma_n16, MMA, 16, "mma.sync, 32 rows/CTA, tokens 1..16")                           \
  X(3, LAT_V3_MMA_N32, v3_mma_n32, MMA, 32, "mma.sync, 32 rows/CTA, tokens 1..32")                           \
  X(4, LAT_V4_MMA_N64, v4_mma_n64, MMA, 64, "mma.sync, 32 rows/CTA, tokens 1..64")                           \
  X(5, LAT_V5_CUBLAS, v5_cublas, CUBLAS, 1 << 30, "cublasGemmStridedBatchedEx")                              \
  X(6, LAT_V6_CP_N8, v6_cp_n8, MMA, 8, "cp.async weight ring, tokens 1..8")                                  \
  X(7, LAT_V7_CP_N16, v7_cp_n16, MMA, 16, "cp.async weight ring, tokens 1..16")                              \
  X(8, LAT_V8_CP_N32, v8_cp_n32, MMA, 32, "cp.async weight ring, tokens 1..32")                              \
  X(9, LAT_V9_CP_N64, v9_cp_n64, MMA, 64, "cp.async weight ring, tokens 1..64")                              \
  X(10, LAT_V10_CP_W8, v10_cp_w8, MMA, 8, "cp.async weight ring, a warp per 16 rows over all of k, tokens 1..8") \
  X(11, LAT_V11_CP_M2, v11_cp_m2, MMA, 8, "cp.async weight ring, 32 rows per CTA, 3 stages, tokens 1..8")

enum {
#define LAT_GEMM_ENUM(num, id, name, family, max_tokens, what) id = num,
  LAT_GEMM_VARIANTS(LAT_GEMM_ENUM)
#undef LAT_GEMM_ENUM
};
/* Epilogues. SWIGLU: W rows come in blocks of 16 = 8 gate rows then the 8 matching up rows;
 * output column 8*i + g (i = block, g < 8) = bf16(silu(bf16(gate)) * bf16(up)), N/2 columns. */
enum { LAT_EP_BF16 = 0, LAT_EP_F32 = 1, LAT_EP_SWIGLU = 2 };

const char *lat_gemm_variant_name(int variant);
/* The variant number of a name ("v6_cp_n8" -> LAT_V6_CP_N8), 0 when unknown. */
int lat_gemm_variant_from_name(const char *name);
/* The most tokens variant v handles in one CTA (8, 16, 32, 64; cuBLAS: any; 0: no such variant). */
int lat_gemm_variant_max_tokens(int variant);

typedef struct {
  /* weights: dense mode W[z] = W + z * w_bstride ([N, K] row-major, row stride K);
   * MoE mode (wptr != NULL): W = wptr[act_e[z]] for z < *n_act, other z do nothing. */
  const uint16_t *W;             /* [Z][N, K] */
  long long w_bstride;           /* elements between z slices of W */
  const uint16_t *const *wptr;   /* MoE: device array [E] of expert weight pointers, or NULL */
  /* activations: row j of slice z is x + z*x_bstride + row(j)*ldx, row(j) = xmap ? xmap[off+j] : off+j
   * (off = act_off[z] in MoE mode, 0 otherwise) */
  const uint16_t *x;             /* bf16 */
  int ldx;                       /* elements between rows */
  long long x_bstride;           /* elements between z slices */
  const int32_t *xmap;           /* row map or NULL */
  /* output: row orow(j) = omap ? omap[off+j] : off+j of out + z*o_bstride, row stride ldo */
  void *out;                     /* bf16 (BF16/SWIGLU) or float32 (F32) */
  int ldo;                       /* elements between rows */
  long long o_bstride;           /* elements between z slices */
  const int32_t *omap;           /* row map or NULL */
  int N, K;                      /* weight rows / reduction length (K % 8 == 0) */
  int T;                         /* token rows (dense); MoE: the most tokens any expert can get */
  int Z;                         /* z slices (dense), or the most active experts (MoE) */
  int ep;                        /* LAT_EP_* */
  /* MoE mode (device arrays from lat_moe_bucket) */
  const int32_t *n_act;          /* [1] active experts */
  const int32_t *act_e;          /* [Z] expert id of active slot z */
  const int32_t *act_off;        /* [Z] first bucket row of slot z */
  const int32_t *act_cnt;        /* [Z] tokens of slot z */
  /* scratch for split-K partials / cuBLAS temporaries */
  float *ws;                     /* device scratch */
  size_t ws_bytes;               /* its size */
  /* grid of the cp.async variants (v6..v11), which are persistent (each CTA takes work items in
   * turn): 0 as many CTAs as the GPU holds at once, > 0 at most that many (tests), < 0 one CTA
   * per item with the older split-K rule (variant word no_persist) */
  int max_ctas;
} lat_gemm_args;

/* Dense-mode arguments (one slice, no maps, no scratch): W [N, K], x rows of ldx, out rows of ldo. */
static inline lat_gemm_args lat_dense_args(const uint16_t *W, const uint16_t *x, int ldx, void *out, int ldo, int N,
                                           int K, int T, int ep) {
  lat_gemm_args a;
  memset(&a, 0, sizeof a);
  a.W = W;
  a.x = x;
  a.ldx = ldx;
  a.out = out;
  a.ldo = ldo;
  a.N = N;
  a.K = K;
  a.T = T;
  a.Z = 1;
  a.ep = ep;
  return a;
}

/* MoE-mode arguments: the experts' weights wptr [E] (each [N, K]), the buckets of lat_moe_bucket
 * (n_act, act_e, act_off, act_cnt) over at most zmax active experts, no scratch; the caller sets
 * the row map (xmap for gathered inputs, omap for scattered outputs). */
static inline lat_gemm_args lat_grouped_args(const uint16_t *const *wptr, const uint16_t *x, int ldx, void *out,
                                             int ldo, int N, int K, int T, int ep, int zmax, const int32_t *n_act,
                                             const int32_t *act_e, const int32_t *act_off, const int32_t *act_cnt) {
  lat_gemm_args a = lat_dense_args(NULL, x, ldx, out, ldo, N, K, T, ep);
  a.wptr = wptr;
  a.Z = zmax;
  a.n_act = n_act;
  a.act_e = act_e;
  a.act_off = act_off;
  a.act_cnt = act_cnt;
  return a;
}

/* Runs the GEMM with `variant`; *splits_out and *ran_out (may be NULL) get the split-K factor
 * and the variant that ran (a variant too small for T, or cuBLAS in MoE mode, is replaced by
 * the mma variant for T; in MoE mode the cp.async variants v6..v11 take any T up to 64: an expert
 * with more tokens than the variant's tile is computed in passes over its weights).
 * Dense with xmap or a SWIGLU epilogue works for cuBLAS through the scratch buffer;
 * MoE mode never uses cuBLAS (the launcher picks the mma variant for T instead). */
vstatus lat_gemm(const lat_gemm_args *a, int variant, int num_sms, cublasHandle_t blas, cudaStream_t stream,
                 int *splits_out, int *ran_out);
/* Raises the dynamic shared-memory limits of the kernels (once per device, before capture). */
vstatus lat_kernels_init(void);

/* x[t] = float(emb[tok[t]]); xn[t] = bf16(w * x * rsqrt(mean x^2 + eps)), t < T, D columns. */
/* Longest row (hidden size) of the row kernels: lat_embed_norm, lat_add_rmsnorm, lat_moe_combine_*. */
#define LAT_ROW_MAX 16384
vstatus lat_embed_norm(float *x, uint16_t *xn, const int32_t *tok, const uint16_t *emb, const uint16_t *w, int T,
                       int D, float eps, cudaStream_t stream);
/* x[t] += float(y[t]); xn[t] = rmsnorm(x[t]) * w. */
vstatus lat_add_rmsnorm(float *x, uint16_t *xn, const uint16_t *y, const uint16_t *w, int T, int D, float eps,
                        cudaStream_t stream);
/* x[t] += sum_k wt[t*K+k] * float(Y[t*K+k]) + float(ysh[t]) (ysh may be NULL); xn[t] = rmsnorm(x[t]) * w. */
vstatus lat_moe_combine_norm(float *x, uint16_t *xn, const uint16_t *Y, const float *wt, const uint16_t *ysh,
                             const uint16_t *w, int T, int K, int D, float eps, cudaStream_t stream);
/* TP: out[T, D] fp32 = sum_k wt[t,k] Y[t*K+k] + ysh[t] (no residual, no norm): a rank's partial. */
vstatus lat_moe_combine_partial(float *out, const uint16_t *Y, const float *wt, const uint16_t *ysh, int T, int K,
                                int D, cudaStream_t stream);

/* Per token row t of src (row stride src_ld):
 *   if q_off >= 0: qan[t] = rmsnorm(src[t][q_off .. q_off+ql)) * qnw               ([T, ql] bf16)
 *   cache[slot[t]][pos[t]][0..kl)     = rmsnorm(src[t][kv_off .. +kl)) * kvnw       (latent)
 *   cache[slot[t]][pos[t]][kl..kl+r)  = RoPE(src[t][kv_off+kl .. +r)) at pos[t]    (k_rot, de-interleaved)
 * cache is [max_seq, max_ctx, kl + r] bf16. RoPE as curef_rope (angle float32(pos * inv_freq)). */
vstatus lat_mla_prep(const uint16_t *src, int src_ld, int q_off, int ql, const uint16_t *qnw, uint16_t *qan,
                     int kv_off, int kl, int r, const uint16_t *kvnw, uint16_t *cache, const int32_t *slot,
                     const int32_t *pos, int max_ctx, const float *inv_freq, float attn_factor, int interleave,
                     float eps, int T, cudaStream_t stream);

/* Head-group size the attention kernel uses for H heads (4, 2 or 1). */
int lat_mla_head_group(int H);
/* Split-KV count for T token rows, H heads and at most max_keys keys per row. */
int lat_mla_splits(int T, int H, int max_keys, int num_sms);
/* True when the attention kernel supports these latent / rope widths. */
int lat_mla_supported(int kl, int r);
/* Raises the attention kernel's dynamic shared-memory limit for latent kl + rope r (once, before capture). */
vstatus lat_mla_init(int kl, int r);
/* Absorbed MLA decode, split-KV: for token row t, head h, split s of the keys [0, pos[t]]:
 *   score_j = scale * (qlat[t][h] . cache_j[0..kl) + qrot[t][h] . cache_j[kl..kl+r))
 *   pm = max score, pl = sum exp(score - pm), pacc[kl] = sum exp(score - pm) cache_j[0..kl)
 * qlat [T, H, kl] float32; qrot at q[t*q_ld + h*q_hstride + q_rot_off + i] (bf16).
 * pm, pl [T, H, S]; pacc [T, H, S, kl]. */
vstatus lat_mla_attn(float *pm, float *pl, float *pacc, const float *qlat, const uint16_t *q, int q_ld,
                     int q_hstride, int q_rot_off, const uint16_t *cache, const int32_t *slot, const int32_t *pos,
                     int T, int H, int kl, int r, int max_ctx, int S, float scale, cudaStream_t stream);
/* MLA decode on tensor cores, hand-written (kernels/latency_mla_mma.cu, variant "v3_mma"): the same
 * partials as lat_mla_attn (same arguments), with the heads of a token as the M side of mma.sync
 * (16 or 32 heads per block), the query as bf16 hi + lo, P rounded to bf16 before P V. */
int lat_mla_mma_supported(int H, int kl, int r);
/* Split count: at most one wave of blocks (one per SM) over T rows and the head blocks of hb heads
 * (16 or 32; 32 means 16 when H <= 16), at least two key tiles per split, at most LAT_MLA_MAX_SPLITS. */
int lat_mla_mma_splits(int T, int H, int max_keys, int num_sms, int hb);
/* Heads per block for T rows over max_keys: 16 where 32-head blocks would leave more than half the
 * SMs idle (batch 1 at short contexts), else 32. */
int lat_mla_mma_heads(int T, int H, int max_keys, int num_sms);
/* Raises the kernel's dynamic shared-memory limit for these dimensions (once, before capture). */
vstatus lat_mla_mma_init(int H, int kl, int r);
/* RoPE of the query's rope part as v3_mma loads it (instead of curef_rope over q beforehand;
 * the same bf16 values): positions are the step's pos, angles inv_freq [r/2] * attn_factor. */
typedef struct {
  const float *inv_freq; /* [r/2] on the device */
  float attn_factor;
  int interleave; /* rope_interleave: pairs (2i, 2i+1) */
} lat_qrope;
/* hb: heads per block as given to lat_mla_mma_splits. rope_q NULL: the rope part of q is already rotated. */
vstatus lat_mla_attn_mma(float *pm, float *pl, float *pacc, const float *qlat, const uint16_t *q, int q_ld,
                         int q_hstride, int q_rot_off, const uint16_t *cache, const int32_t *slot, const int32_t *pos,
                         int T, int H, int kl, int r, int max_ctx, int S, int hb, float scale, const lat_qrope *rope_q,
                         cudaStream_t stream);
#define LAT_MLA_MAX_SPLITS 64 /* most splits lat_mla_combine merges */
/* o[t][h][c] = bf16(sum_s e^(pm_s - M) pacc_s[c] / sum_s e^(pm_s - M) pl_s), o [T, H, kl], S <= LAT_MLA_MAX_SPLITS. */
vstatus lat_mla_combine(uint16_t *o, const float *pm, const float *pl, const float *pacc, int T, int H, int kl,
                        int S, cudaStream_t stream);

/* MLA decode on tensor cores (kernels/latency_mla_gemm.cu, variant "v2_gemm"): per token row, scores
 * = Q K^T over Ncap keys (cuBLAS, batch of rows), softmax to bf16 P (0 past the row's position),
 * O = P V; writes o [T, H, kl] bf16 directly (no split combine). The workspace holds the
 * packed bf16 queries, the scores and P, and the batch pointer arrays. */
typedef struct {
  int rows;                      /* most token rows */
  size_t score_elems;            /* capacity of scores: rows x 2H x Ncap (P holds half) */
  uint16_t *qb;                  /* [rows, 2H, kl + r] packed queries (hi and lo halves) */
  float *scores;                 /* [score_elems] */
  uint16_t *P;                   /* [score_elems] */
  const void **kp, **qp, **pp;   /* [rows] device arrays: cache rows of the slot, queries, P */
  void **sp, **op;               /* [rows] device arrays: scores, outputs */
} lat_mla_gemm_ws;
/* Keys a step with max_keys keys computes over: the next power of two >= max(256, max_keys) up to
 * 4096, then the next multiple of 4096; at most max_ctx (one CUDA graph per bucket). */
int lat_mla_gemm_ncap(int max_keys, int max_ctx);
vstatus lat_mla_attn_gemm(const lat_mla_gemm_ws *ws, uint16_t *olat, const float *qlat, const uint16_t *q, int q_ld,
                          int q_hstride, int q_rot_off, const uint16_t *cache, const int32_t *slot,
                          const int32_t *pos, int T, int H, int kl, int r, int max_ctx, int ncap, float scale,
                          cublasHandle_t blas, cudaStream_t stream);
/* out[h][c][i] = kv_b[(h*(n+v) + i)*kl + c]: W_UK transposed per head ([H, kl, n]), at open. */
vstatus lat_transpose_wuk(uint16_t *out, const uint16_t *kv_b, int H, int n, int v, int kl, cudaStream_t stream);

/* Router for T tokens from float32 logits [T, E] (see curef_router for the exact rule).
 * forced (NULL or [T, K] expert ids) replaces the selection; weights are still the
 * scores of the chosen experts, normalized and scaled. idx/wt are [T, K]. */
vstatus lat_router_topk(int32_t *idx, float *wt, const float *logits, const float *bias, const int32_t *forced,
                        int T, int E, int K, int n_group, int topk_group, int norm_topk_prob, float rsf,
                        cudaStream_t stream);
/* Buckets the T*K (token, choice) pairs by expert: active experts in ascending id order
 * (n_act, act_e, act_off, act_cnt), and per bucket row p: perm_tok[p] = token, perm_pair[p]
 * = t*K + k, pairs of one expert in ascending pair order. One block; no host sync. */
vstatus lat_moe_bucket(const int32_t *idx, int T, int K, int E, int32_t *n_act, int32_t *act_e, int32_t *act_off,
                       int32_t *act_cnt, int32_t *perm_tok, int32_t *perm_pair, cudaStream_t stream);
/* The whole router in one grid for T <= 4 rows: logits [T, E] = x [T, D] (row stride ldx) .
 * W [E, D]^T in fp32 (written to logits), then lat_router_topk's top-k and lat_moe_bucket's buckets in the last
 * block to finish. counter: one device int, zero before the first call (the kernel leaves it
 * zero). lat_router_fused_ok says whether the shape fits (D % 8 == 0, D <= 8192, smem). */
bool lat_router_fused_ok(int T, int E, int K, int D);
vstatus lat_router_fused(float *logits, const uint16_t *W, const uint16_t *x, int ldx, int D, int32_t *counter,
                         int32_t *idx, float *wt, const float *bias, const int32_t *forced, int T, int E, int K,
                         int n_group, int topk_group, int norm_topk_prob, float rsf, int32_t *n_act, int32_t *act_e,
                         int32_t *act_off, int32_t *act_cnt, int32_t *perm_tok, int32_t *perm_pair,
                         cudaStream_t stream);

/* ---- Decode context parallelism over the latent cache (kernels/latency_dcp.cu) ----
 * Rank r of N holds the positions p with p % N == r at local index p / N: a slot's cache rows are
 * [ceil(max_ctx / N), kl + r] per layer. Every rank attends ALL N*H heads over its own positions;
 * the partials are merged per rank, all-gathered and combined by log-sum-exp for the rank's heads. */
#define LAT_DCP_MAX_RANKS 16 /* most ranks lat_dcp_combine merges */
/* lat_mla_prep for DCP rank dcp_rank of dcp_n: the row of token t is stored only when
 * pos[t] % dcp_n == dcp_rank, at cache[slot[t]][pos[t] / dcp_n] (cache_ctx rows per slot); RoPE
 * still uses pos[t]. dcp_n 1, rank 0 is lat_mla_prep. */
vstatus lat_mla_prep_dcp(const uint16_t *src, int src_ld, int q_off, int ql, const uint16_t *qnw, uint16_t *qan,
                         int kv_off, int kl, int r, const uint16_t *kvnw, uint16_t *cache, const int32_t *slot,
                         const int32_t *pos, int cache_ctx, const float *inv_freq, float attn_factor, int interleave,
                         float eps, int T, int dcp_n, int dcp_rank, cudaStream_t stream);
/* lpos[t] = (number of positions p <= pos[t] with p % N == rank) - 1: the last visible local key
 * index for the attention kernels' pos argument (-1: the rank holds no visible key, an empty row). */
vstatus lat_dcp_lpos(int32_t *lpos, const int32_t *pos, int T, int N, int rank, cudaStream_t stream);
/* send[t][h] = [qlat[t][h][0..kl) | float(q[t*q_ld + h*q_hstride + q_rot_off + i]), i < r]: [T, H, kl + r]
 * fp32, this rank's H heads (the absorbed query and the rotated q_rot). */
vstatus lat_dcp_pack_q(float *send, const float *qlat, const uint16_t *q, int q_ld, int q_hstride, int q_rot_off,
                       int T, int H, int kl, int r, cudaStream_t stream);
/* gathered [N][T][H][kl + r] (every rank's send) -> qlat_all [T, N*H, kl] fp32 and qrot_all
 * [T, N*H, r] bf16 (exact), head rank*H + h: the unsharded model's head order. */
vstatus lat_dcp_place_q(float *qlat_all, uint16_t *qrot_all, const float *gathered, int N, int T, int H, int kl,
                        int r, cudaStream_t stream);
/* The S split partials of lat_mla_attn / lat_mla_attn_mma ([T, H, S] pm, pl; [T, H, S, kl] pacc) ->
 * part [T, H, kl + 1] fp32: o = sum_s e^(pm_s - M) pacc_s / L, L = sum_s e^(pm_s - M) pl_s, and
 * lse = M + log L in the last column; a row without keys gives o = 0, lse = -inf. S <= LAT_MLA_MAX_SPLITS. */
vstatus lat_dcp_merge_local(float *part, const float *pm, const float *pl, const float *pacc, int T, int H, int kl,
                            int S, cudaStream_t stream);
/* parts [N][T][Ha][kl + 1] (every rank's lat_dcp_merge_local) -> olat [T, H, kl] bf16 for the heads
 * [h0, h0 + H) of Ha: o = sum_r w_r o_r / sum_r w_r, w_r = e^(lse_r - max lse); a part with lse -inf
 * weighs 0 and is not read, all parts empty give 0, a NaN lse gives NaN. N <= LAT_DCP_MAX_RANKS. */
vstatus lat_dcp_combine(uint16_t *olat, const float *parts, int N, int T, int Ha, int H, int h0, int kl,
                        cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
