/* The CPU reference ops: plain C, float32 math, float32 activations, weights read in
 * their stored dtype (bf16/f16/f32) and widened on the fly. Each op is what HF
 * transformers' DeepseekV3 does for one token row, so the cpu-ref path composes them
 * and the numerics suite (suites/kernels) registers them as the "cpu" variants.
 * All ops are pure functions of their arguments; threaded ops use OpenMP. */
#ifndef VOUCH_REFERENCE_CPU_OPS_H
#define VOUCH_REFERENCE_CPU_OPS_H

#include <stdint.h>

#include "model/config.h"
#include "common/tensor.h"

/* out[r][i] = w[i] * x[r][i] / sqrt(mean_i(x[r][i]^2) + eps), rows r < n_rows, i < n. */
void cpu_rmsnorm(float *out, const float *x, const vtensor *w, int n_rows, int n, float eps);
/* x[r] += res[r] (residual add), then out[r] = rmsnorm(x[r]). */
void cpu_add_rmsnorm(float *out, float *x, const float *res, const vtensor *w, int n_rows, int n, float eps);
/* y[r][o] = sum_i W[o][i] * x[r][i] for rows r < n_rows; W = w [out, in]. Threaded over o. */
void cpu_linear(float *y, const float *x, const vtensor *w, int n_rows);
/* Same over a row range of W: rows [o0, o0+n_out) (used for slices of kv_b_proj, TP shards). */
void cpu_linear_rows(float *y, const float *x, const vtensor *w, int64_t o0, int64_t n_out, int n_rows);
/* out[r] = embedding row tok[r] (widened to f32). */
void cpu_embed(float *out, const int32_t *tok, const vtensor *emb, int n_rows);
/* Applies RoPE in place to vec[dim] (dim = qk_rope_head_dim) at position pos:
 * if interleave, first de-interleaves pairs (HF apply_rotary_pos_emb_interleave), then
 * rotate-half with cos/sin = cos/sin(float32(pos) * inv_freq[i]) * attn_factor. */
void cpu_rope(float *vec, int dim, int pos, const float *inv_freq, float attn_factor, int interleave);
/* Router for one token: scores = sigmoid(logits); selection by scores + bias with
 * group-limited top-k (HF: masked groups score 0.0); weights = scores of the chosen,
 * normalized if norm_topk_prob (+1e-20), times routed_scaling_factor.
 * idx[k], wt[k] in descending order of selection score (ties: lower index first). */
void cpu_router_topk(const float *router_logits, const float *bias, const ds_config *c, int32_t *idx, float *wt);
/* out[r] = down(silu(gate(x[r])) * up(x[r])) for one expert / MLP. tmp holds 2*inter floats per row. */
void cpu_swiglu_mlp(float *out, const float *x, const vtensor *gate, const vtensor *up, const vtensor *down,
                    int n_rows, float *tmp);
/* Softmax over n in place (max-subtracted, float accumulation in double). */
void cpu_softmax(float *x, int n);

/* Added for the cpu-ref path. */
/* Threads the threaded ops use (0: all cores, as OpenMP's default). Process-wide. */
void cpu_ops_set_threads(int n);
/* silu(z) = z / (1 + exp(-z)), float32 as torch computes it. */
float cpu_silu(float z);
/* Attention of one query head over n_ctx positions (the causal window is the caller's):
 * s[j] = scale * dot(q, k_j), k_j = k + j*k_stride ([qk_dim] floats); p = softmax(s);
 * out[v_dim] = sum_j p[j] * v_j, v_j = v + j*v_stride. scores: scratch of n_ctx floats. */
void cpu_attend(float *out, const float *q, const float *k, int64_t k_stride, const float *v,
                int64_t v_stride, int n_ctx, int qk_dim, int v_dim, float scale, float *scores);

#endif
