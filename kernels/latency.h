/* The optimized decode path "latency": DeepSeek-V3 / Kimi K2 decode specialized for
 * batch 1..64 (1..8 tokens per sequence: decode and speculative verification) on one
 * Hopper GPU. Inside its envelope every step runs as a CUDA graph (one per step shape)
 * of the kernels in kernels/latency_kernels.h: mma.sync skinny GEMMs chosen per batch
 * bucket, absorbed MLA over a latent cache (kv_lora + rope per token) with split-KV,
 * a one-kernel router, device-side expert buckets, grouped expert GEMMs, the shared
 * expert on a second stream, fused residual add + RMSNorm.
 * Outside the envelope forward() still answers:
 *   prefill or mixed prefill+decode (some sequence brings > 8 tokens), batch > 64 tokens:
 *     the step runs on these kernels eagerly in chunks of <= 64 tokens, traced as `ran` of
 *     decode_step with variant "prefill-chunked" / "chunked" and the reason (exact: a chunk's
 *     tokens see earlier chunks through the cache); the next decode step is back on the graphs;
 *   a config the kernels cannot run (odd sizes): the whole path delegates to cuda-ref
 *     (opened inside, no weights of its own are loaded then), traced as a fallback to cuda-ref at
 *     open and at every step: vpath_open refuses it unless the caller expects it
 *     (vpath_opts.expect_fallback, --expect-fallback; suites/paths/ran.h).
 * opts->variant: comma-separated words: "eager" (no CUDA graphs), or a GEMM variant name
 * (v1_mma_n8 .. v4_mma_n64, v5_cublas, v6_cp_n8 .. v9_cp_n64) forced for every GEMM (grouped
 * expert GEMMs keep the table's choice when cuBLAS is forced), or "table". */
#ifndef VOUCH_KERNELS_LATENCY_H
#define VOUCH_KERNELS_LATENCY_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "common/path.h"

extern const vpath_ops latency_ops;

/* Phases of a step for latency_profile_step. */
enum { LAT_PH_ATTN = 0, LAT_PH_DENSE = 1, LAT_PH_MOE = 2, LAT_PH_LMHEAD = 3, LAT_NPHASE = 4 };

/* Turns CUDA graphs on or off for later steps (tests compare graph replay with eager). */
void latency_set_graphs(void *state, bool on);
/* Runs one in-envelope step eagerly with events between phases: phase_ms[LAT_NPHASE]
 * (attention incl. embedding and norms, dense MLP, MoE, final norm + lm_head), and the
 * mean number of distinct routed experts per MoE layer in *experts (0 without MoE). */
vstatus latency_profile_step(void *state, const vstep *s, float *logits, double *phase_ms, double *experts);
/* After latency_profile_step: the time of each traced launch of that step on the main stream
 * (labels[i] = op and what, valid until the next profile step; ms[i] since the previous launch).
 * Returns the count (<= max). */
int latency_profile_ops(void *state, const char **labels, double *ms, int max);
/* Re-chooses the GEMM variants (as opts->variant: "table" or a variant name; "eager" turns graphs
 * off) and drops the captured graphs. For A/B timing in one process. */
vstatus latency_set_variant(void *state, const char *variant);
/* The variant name the per-bucket table picks for T token rows: the narrow dense GEMMs (q_a, q_b,
 * absorption, router, ...) or, grouped, the expert GEMMs. */
const char *latency_table_variant(int T, bool grouped);
/* The GEMM variant number (LAT_V*) the table picks for T rows of an [N, K] GEMM with epilogue ep
 * (LAT_EP_*), grouped (MoE experts) or dense: the path's own rule, for the kernel suite. */
int latency_table_gemm(int T, int N, int K, int ep, bool grouped);
/* The MLA decode variant the table picks for T token rows of similar lengths, at most max_keys keys,
 * H (local) heads, latent kl and rope r: "v3_mma" where lat_mla_attn_mma supports the dimensions
 * (below 8 rows, or up to 64k keys), else "v1_split" or "v2_gemm" (with very uneven lengths the path
 * keeps v1_split). */
const char *latency_table_attention(int T, int max_keys, int H, int kl, int r);

/* The latency path's kernels as kernel-suite variants (reference/opreg.h; latency_variants.cu) and
 * its TP reduce over N GPUs (latency_tp_variants.cu; none without NCCL). The numerics suite calls
 * them once (suites/kernels/kernels.h kernels_register_ops); a registration that fails prints its
 * error and the rest go on. */
void latency_register_variants(void);
void latency_tp_register_variants(void);

#ifdef __cplusplus
}
#endif

#endif
