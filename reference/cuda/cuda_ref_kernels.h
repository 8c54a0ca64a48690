/* The plain kernels of the cuda-ref path and their launchers (C-callable, device pointers,
 * asynchronous on `stream`; each returns V_ERR when the launch failed). bf16 tensors are
 * passed as uint16_t pointers (raw bf16 bits). All math is fp32; results stored as bf16
 * are rounded to nearest even once. Row-major everywhere; "rows" are token rows.
 * The numerics suite registers these as the "cuda-ref" variants of its ops. */
#ifndef VOUCH_REFERENCE_CUDA_CUDA_REF_KERNELS_H
#define VOUCH_REFERENCE_CUDA_CUDA_REF_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "common/vstatus.h"

/* x[r][i] = float(emb[tok[r]][i]), r < rows, i < D (tokens checked by the caller). */
vstatus curef_embed(float *x, const int32_t *tok, const uint16_t *emb, int rows, int D, cudaStream_t stream);

/* out[r][i] = bf16(w[i] * x[r][i] / sqrt(mean_i x[r][i]^2 + eps)), i < n; x rows are
 * x_stride elements apart (fp32 input: the residual stream). out is [rows, n] contiguous. */
vstatus curef_rmsnorm_f32(uint16_t *out, const float *x, int x_stride, const uint16_t *w, int rows, int n,
                          float eps, cudaStream_t stream);
/* Same with a bf16 input (q_a / kv latent activations). */
vstatus curef_rmsnorm_bf16(uint16_t *out, const uint16_t *x, int x_stride, const uint16_t *w, int rows, int n,
                           float eps, cudaStream_t stream);

/* y[rows, out] = x[rows, in] . W[out, in]^T with cublasGemmEx: bf16 inputs, fp32 compute
 * (CUBLAS_COMPUTE_32F); y is bf16 (y_f32 = 0) or float32 (y_f32 = 1). rows = 0 is a no-op. */
vstatus curef_linear(cublasHandle_t h, void *y, int y_f32, const uint16_t *x, const uint16_t *w, int rows,
                     int in, int out);

/* RoPE in place on x[r*row_stride + h*head_stride + offset + d], d < dim, h < heads, at
 * position pos[r]: de-interleave pairs first if interleave (new[i] = old[2i],
 * new[dim/2+i] = old[2i+1]), then x*cos + rotate_half(x)*sin with
 * angle = float32(float32(pos) * inv_freq[i]), cos/sin scaled by attn_factor. */
vstatus curef_rope(uint16_t *x, int rows, int heads, int row_stride, int head_stride, int offset, int dim,
                   const int32_t *pos, const float *inv_freq, float attn_factor, int interleave,
                   cudaStream_t stream);

/* Expanded KV cache store for rows r < rows at (slot[r], pos[r]):
 *   K[slot][pos][h] = [ kv[r][h*(n+v) + 0..n) | ckv[r][kv_lora + 0..rope) ]    ([H, n+rope] per position)
 *   V[slot][pos][h] =   kv[r][h*(n+v) + n..n+v)                                ([H, v] per position)
 * kcache is [max_seq, max_ctx, H, n+rope], vcache [max_seq, max_ctx, H, v]. */
vstatus curef_kv_store(uint16_t *kcache, uint16_t *vcache, const uint16_t *kv, const uint16_t *ckv,
                       const int32_t *slot, const int32_t *pos, int rows, int H, int nope, int rope, int v,
                       int kv_lora, int max_ctx, cudaStream_t stream);

/* Causal attention from the cache, one block per (row, head): row r attends to positions
 * [0, pos[r]] of slot[r]; s_j = scale * q.K_j (fp32), softmax in fp32 (max pass, then a
 * sum/accumulate pass over the keys; no limit on the context length), out = sum_j p_j V_j.
 * q is [rows, H, dk] (dk = nope+rope, layout [nope | rope]), out [rows, H, dv] bf16. */
vstatus curef_attention(uint16_t *out, const uint16_t *q, const uint16_t *kcache, const uint16_t *vcache,
                        const int32_t *slot, const int32_t *pos, int rows, int H, int dk, int dv, int max_ctx,
                        float scale, cudaStream_t stream);

/* x[i] += float(y[i]), i < n (residual add into the fp32 stream). */
vstatus curef_add_bf16(float *x, const uint16_t *y, size_t n, cudaStream_t stream);

/* a[i] = bf16(silu(g[i]) * u[i]), i < n. */
vstatus curef_silu_mul(uint16_t *a, const uint16_t *g, const uint16_t *u, size_t n, cudaStream_t stream);

/* MoE router, one block per token (HF DeepseekV3TopkRouter + get_topk_indices):
 * logits[e] = sum_i float(x[r][i]) * float(w[e][i]) in fp32; scores = sigmoid(logits);
 * choice = scores + bias; group score = sum of the top-2 choices of each of n_group groups;
 * the topk_group best groups are kept, the other experts' choice set to 0.0 (HF);
 * idx[r][k] = top_k experts by choice (descending, ties: lower index first);
 * wt[r][k] = scores[idx] / (sum + 1e-20) if norm_topk_prob, times routed_scaling_factor. */
vstatus curef_router(int32_t *idx, float *wt, const uint16_t *x, const uint16_t *w, const float *bias, int rows,
                     int D, int E, int top_k, int n_group, int topk_group, int norm_topk_prob,
                     float routed_scaling_factor, cudaStream_t stream);

/* dst[j] = src[rows[j]] for j < n rows of D bf16 elements. */
vstatus curef_gather_rows(uint16_t *dst, const uint16_t *src, const int32_t *rows, int n, int D,
                          cudaStream_t stream);
/* x[rows[j]][i] += w[j] * float(y[j][i]) for j < n (rows distinct within one call). */
vstatus curef_scatter_add(float *x, const uint16_t *y, const int32_t *rows, const float *w, int n, int D,
                          cudaStream_t stream);

/* out[i] = synth_value(kind, scale, key, index0 + i) rounded to out_dtype (DT_BF16, DT_F16,
 * DT_F32 as in common/tensor.h), i < n. Bit-identical to the CPU generator. */
vstatus curef_synth_fill(void *out, int out_dtype, uint64_t n, int kind, float scale, uint64_t key,
                         uint64_t index0, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
