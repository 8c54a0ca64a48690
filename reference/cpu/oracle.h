/* The float64 oracles of the kernel numerics suite and the op descriptors built on them.
 * oracle_register_ops() registers every op (reference/opreg.h); the helpers below are the
 * math itself, exported so tests can check that two forms of one computation agree
 * (e.g. MLA expanded vs absorbed) and so the op descriptors share input generation.
 *
 * Op d[] conventions (B = case batch):
 *   embed        d0 vocab, d1 hidden
 *   rmsnorm      d0 n                               f0 eps
 *   add_rmsnorm  d0 n                               f0 eps
 *   linear       d0 out_features, d1 in_features
 *   rope         d0 heads, d1 rope dim, d2 interleave (0/1), d3 max position
 *   mla_decode   d0 heads, d1 qk dim (nope+rope), d2 v dim, d3 max ctx     f0 softmax scale
 *   mla_absorbed d0 heads, d1 nope, d2 rope, d3 v dim, d4 kv_lora, d5 max ctx   f0 softmax scale
 *   mla_absorbed_dcp  as mla_absorbed, d6 ranks N (heads a multiple of N); input slot [B] after out
 *   attn_partial d0 heads, d1 qk dim, d2 v dim, d3 max ctx, d4 splits        f0 softmax scale
 *   lse_combine  d0 heads, d1 v dim, d2 splits
 *   router       d0 experts, d1 top-k, d2 n_group, d3 topk_group, d4 norm_topk_prob  f0 routed scaling
 *   swiglu       d0 hidden, d1 intermediate
 *   moe_combine  d0 hidden, d1 top-k
 *   sample       d0 vocab, d1 top_k (0 off)          f0 temperature (<= 0 greedy), f1 top_p
 *   allreduce    d0 ranks, d1 elements per rank
 *   allreduce_add_rmsnorm  d0 ranks, d1 n (hidden)   f0 eps; per-rank outputs x, xn
 */
#ifndef VOUCH_REFERENCE_CPU_ORACLE_H
#define VOUCH_REFERENCE_CPU_ORACLE_H

#include <stdint.h>

#include "reference/opreg.h"

/* Registers every op descriptor (the numerics suite calls it once: suites/kernels/kernels.h
 * kernels_register_ops); a registration that fails prints its error and the rest go on. */
void oracle_register_ops(void);

/* Split s of a sequence of length len into S splits covers [s*len/S, (s+1)*len/S) (floor);
 * every split is non-empty when len >= S. */
static inline int oracle_split_begin(int s, int len, int S) { return (int)((int64_t)s * len / S); }

/* Attention of one head: out[vd] = softmax(scale * q.k_j) v_j over j < n (double). */
void oracle_attention_f64(double *out, const double *q, const double *k, int64_t k_stride, const double *v,
                          int64_t v_stride, int n, int qk, int vd, double scale, double *lse);

/* MLA decode for one sequence in absorbed form, all math in double:
 * q_nope [H][n], q_pe [H][r], ckv [len][kvl], kpe [len][r], wkv_b [H*(n+v)][kvl] (bf16 bits),
 * out [H][v]. Equal (in exact arithmetic) to expanding k_nope = W_UK ckv, value = W_UV ckv
 * per head and running oracle_attention_f64 on [k_nope, kpe]. */
void oracle_mla_absorbed_f64(double *out, const float *q_nope, const float *q_pe, const float *ckv,
                             const float *kpe, const uint16_t *wkv_b, int H, int n, int r, int v, int kvl,
                             int len, double scale);

/* Router for one token in double (HF semantics: sigmoid, bias for selection only, group score
 * = sum of the top-2 biased scores in the group, masked groups score 0.0, top-k, weights =
 * sigmoid scores normalized (+1e-20) if norm, times scaling). sel[E] receives the selection
 * scores after group masking; idx/wt [k] in descending selection order (ties: lower index). */
void oracle_router_f64(const float *logits, const float *bias, int E, int k, int G, int TG, int norm,
                       double scaling, int32_t *idx, double *wt, double *sel);

/* Bulk generators shared with tests: counter-based, so any element is independent. */
void oracle_fill_f32(float *x, int64_t n, int dist, uint64_t key, double scale, int channels);
void oracle_fill_bf16(uint16_t *w, int64_t n, uint64_t key, double scale);

#endif
