/* The CUDA reference decode path "cuda-ref": the DeepSeek-V3-family forward on one GPU
 * as an unoptimized engine runs it. bf16 weights and bf16 activations between ops, fp32
 * accumulation everywhere, a float32 residual stream, cuBLAS (cublasGemmEx, bf16 in,
 * fp32 compute) for every projection, plain kernels for everything else, no fusion, no
 * CUDA graphs. HF transformers' DeepseekV3 semantics (see reference/cpu/ops.h).
 * KV cache: HF's expanded per-head cache in bf16: per layer and slot, K [max_ctx, H,
 * nope+rope] (k_nope | roped shared k_rot) and V [max_ctx, H, v]; sized at open.
 *
 * fill_cache(seq, len, seed) fills the *latent* of each position, then runs the normal
 * cache-write ops on it, so any path (expanded or latent cache) can reproduce the same
 * cache from the same seed: for layer l, position p < len, i < kv_lora + rope,
 *   ckv[p][i] = bf16(philox_symmetric(philox_key(seed, "kvfill.L<l>"), p*(kv_lora+rope) + i))
 * is taken as kv_a_proj_with_mqa's output ([latent | k_rot]); then kv_a_layernorm,
 * kv_b_proj, RoPE at position p and the cache store run exactly as in prefill.
 *
 * vstep.forced_experts replaces the router's top-k in every MoE layer; a small kernel computes
 * the forced experts' sigmoid scores with the router kernel's arithmetic, then normalizes and
 * scales them as the router does. last_step_ms is the time between CUDA events recorded on the
 * path's stream at the start and the end (after the logits copy) of each forward(). */
#ifndef VOUCH_REFERENCE_CUDA_CUDA_REF_H
#define VOUCH_REFERENCE_CUDA_CUDA_REF_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
#include "common/philox.h"
#include "model/synth_rule.h"
extern "C" {
#endif

#include "common/path.h"
#include "model/model.h"

struct CUstream_st; /* cudaStream_t points to one (cuda_runtime_api.h) */

extern const vpath_ops cuda_ref_ops;

/* Visible CUDA devices; 0 when there is no driver or no device (never fails). */
int cuda_device_count(void);

/* Generates the whole synthetic tensor `spec` of the model with `seed` into device memory
 * `dev_out` (numel elements of out_dtype: DT_BF16, DT_F16 or DT_F32), element i =
 * round(synth_value(spec->kind, synth_linear_scale(spec->fan_in), philox_key(seed, spec->name), i)):
 * bit-identical to the CPU synthesizer (model/model.c). Synchronizes before returning. */
vstatus cuda_synth_tensor(void *dev_out, const ds_tensor_spec *spec, uint64_t seed, vdtype out_dtype);
/* Same, generated on the current GPU and copied to host memory `host_out` (for tests). */
vstatus cuda_synth_tensor_host(void *host_out, const ds_tensor_spec *spec, uint64_t seed, vdtype out_dtype);

/* Generates tensor t of model m, which has no host data (t->data NULL), into device memory
 * `dst` (numel(t) elements of dt: DT_BF16, DT_F16 or DT_F32) on stream `st` (a cudaStream_t;
 * asynchronous): t's rule m->lazy[i] (model.h ds_synth_slice) is a whole synthetic tensor or
 * a TP shard's block of rows (one contiguous run from `start`) or of columns (one strided
 * launch: out[i*cols + j] = element start + i*stride + j of the full tensor). Bit-identical to
 * ds_model_materialize on the host. An error when t has no rule (a model loaded from disk). */
vstatus cuda_synth_model_tensor(void *dst, vdtype dt, const ds_model *m, const vtensor *t, struct CUstream_st *st);
/* Rows [r0, r0 + n) of the same (t's rule has rows x cols elements; a 1-D tensor has cols 1)
 * into dst (n * cols elements of dt): one launch, contiguous or strided like the whole. */
vstatus cuda_synth_model_rows(void *dst, vdtype dt, const ds_model *m, const vtensor *t, int64_t r0, int64_t n,
                              struct CUstream_st *st);

#ifdef __cplusplus
}
#endif

#endif
