/* The "cuda-ref" variants of the numerics suite's ops: each one runs the cuda-ref path's
 * own launchers (reference/cuda/cuda_ref_kernels.h) and cuBLAS configuration
 * (curef_linear: cublasGemmEx, bf16 in, fp32 compute) on the suite's device buffers.
 *
 * The suite's buffers hold float32 activations; cuda-ref keeps activations in bf16. So
 * each variant converts its f32 inputs to bf16 on the device (round to nearest even) where
 * the cuda-ref kernel takes bf16, and widens the kernel's bf16 outputs back to f32 (exact):
 * that conversion is part of the variant, and its rounding is what the bf16 bounds
 * (act_dtype DT_BF16) allow for. Attention inputs are also re-laid out into cuda-ref's
 * expanded cache ([slot][pos][head][dim]). Temporaries are poisoned (0xFF: bf16 NaN, so an
 * element the kernel never wrote widens to NaN and fails the case) and guarded (a write
 * past either end is an error of the run).
 *
 * What cuda-ref really does, op by op:
 *   embed        curef_embed                      ("ref")
 *   rmsnorm      curef_rmsnorm_f32 (f32 residual stream in, bf16 out)      ("ref")
 *                curef_rmsnorm_bf16 (bf16 latent in: q_a / kv_a norms)     ("ref_bf16in")
 *   add_rmsnorm  not fused in cuda-ref (curef_add_bf16, then the norm; the added operand is
 *                bf16): registered as "ref_unfused", always not supported, with that reason
 *   linear       curef_linear, bf16 out (projections) ("ref_cublas"), f32 out (lm_head)
 *                ("ref_cublas_f32")
 *   rope         curef_rope in place on bf16       ("ref")
 *   mla_decode   curef_attention on an expanded bf16 cache   ("ref")
 *   router       curef_router (gate GEMV + sigmoid + groups + top-k in one kernel): the op's
 *                f32 logits are fed exactly, see router_run   ("ref")
 *   swiglu       curef_linear gate, curef_linear up, curef_silu_mul, curef_linear down
 *                (cuda-ref's swiglu() composition)  ("ref_cublas")
 *   moe_combine  curef_scatter_add per expert slot into the f32 residual, then
 *                curef_add_bf16 of the shared expert (cuda-ref's moe_block order) ("ref_scatter")
 * Not registered: mla_absorbed, attn_partial, lse_combine (cuda-ref has no such kernels),
 * sample (host-side in common/sampling.c), allreduce (no multi-GPU in cuda-ref). */
#define PATH "cuda-ref"
#include "reference/cuda/variant_kit.h"
#include "reference/cuda/cuda_ref_kernels.h"


/* ---------------- device glue (conversions and layouts, not cuda-ref kernels) ---------------- */


/* dst [B][L][H][d] bf16 (cuda-ref's expanded cache, slot = b) from src [B][H][L][d] f32. */
static __global__ void to_cache_kernel(uint16_t *dst, const float *src, int B, int H, int L, int d) {
  const int64_t n = (int64_t)B * L * H * d;
  GRID_STRIDE(i, n) {
    const int64_t e = i % d, t = i / d, h = t % H, t2 = t / H, j = t2 % L, b = t2 / L;
    dst[i] = f2bf(src[((b * H + h) * L + j) * d + e]);
  }
}
/* dst [k][B][D] bf16 from src [B][k][D] f32 (expert slot j's rows contiguous, as scatter_add wants). */
static __global__ void slots_bf16_kernel(uint16_t *dst, const float *src, int B, int k, int D) {
  const int64_t n = (int64_t)B * k * D;
  GRID_STRIDE(i, n) {
    const int64_t e = i % D, t = i / D, b = t % B, j = t / B;
    dst[i] = f2bf(src[(b * k + j) * D + e]);
  }
}
/* dst [k][B] from src [B][k] (exact copy). */
static __global__ void slots_f32_kernel(float *dst, const float *src, int B, int k) {
  const int64_t n = (int64_t)B * k;
  GRID_STRIDE(i, n) dst[i] = src[(i % B) * k + i / B];
}
static __global__ void iota_kernel(int32_t *dst, int n) {
  GRID_STRIDE(i, n) dst[i] = (int32_t)i;
}
/* Router input: each f32 logit v becomes three bf16 parts hi, mid, lo (truncations), which
 * hold disjoint bits of v's significand with v's sign, so any partial sum of them (in any
 * order, plus exact zeros) is exact in f32 and the sum is v. x [rows][3E], w [E][3E] with
 * w[e][3e+p] = 1, else 0. bad is set when a part could not hold its bits (subnormals, Inf/NaN). */
static __global__ void router_split_kernel(uint16_t *x, const float *logits, int64_t n, int *bad) {
  GRID_STRIDE(i, n) {
    const float v = logits[i];
    const uint16_t hi = (uint16_t)(__float_as_uint(v) >> 16);
    const float r1 = v - bf2f(hi);
    const uint16_t mid = (uint16_t)(__float_as_uint(r1) >> 16);
    const float r2 = r1 - bf2f(mid);
    const uint16_t lo = (uint16_t)(__float_as_uint(r2) >> 16);
    if (!isfinite(v) || (__float_as_uint(r2) & 0xFFFFu) != 0 || bf2f(hi) + bf2f(mid) + bf2f(lo) != v) *bad = 1;
    x[3 * i] = hi;
    x[3 * i + 1] = mid;
    x[3 * i + 2] = lo;
  }
}
static __global__ void router_eye3_kernel(uint16_t *w, int E) {
  const int64_t n = (int64_t)E * 3 * E;
  GRID_STRIDE(i, n) w[i] = (i % (3 * E)) / 3 == i / (3 * E) ? (uint16_t)0x3F80 : (uint16_t)0; /* bf16 1.0 */
}

/* ---------------- shared pieces ---------------- */

static cublasHandle_t g_blas; /* created on first use, default stream, as cuda-ref's (cublasCreate) */

static vstatus blas(cublasHandle_t *h) {
  if (!g_blas) CUBLAS_CHECK(cublasCreate(&g_blas));
  *h = g_blas;
  return V_OK;
}

static vstatus any_case(const vop_case *c) {
  (void)c;
  return have_device();
}

#define VARIANT(fn, vname)                                                                        \
  static vstatus fn##_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) { \
    return run_body(c, l, b, t, vname, fn, any_case, 1);                                                      \
  }

/* ---------------- embed: tok, table -> out (f32) ---------------- */

static vstatus embed_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what) {
  (void)l;
  (void)A;
  const int B = c->batch, V = c->d[0], D = c->d[1];
  int32_t *tok = (int32_t *)malloc((size_t)B * sizeof(int32_t));
  if (!tok) return VERR("cuda_variants.cu: embed: out of memory for %d tokens", B);
  vstatus s = host_ints(tok, b[0], B);
  for (int i = 0; i < B && s == V_OK; i++)
    if (tok[i] < 0 || tok[i] >= V) s = VERR("cuda_variants.cu: embed: field 'tok[%d]': %d outside [0, %d)", i, tok[i], V);
  free(tok);
  VTRY(s);
  VTRY(curef_embed((float *)b[2], (const int32_t *)b[0], (const uint16_t *)b[1], B, D, 0));
  snprintf(what, 64, "curef_embed");
  return V_OK;
}
VARIANT(embed_body, "ref")

/* ---------------- rmsnorm: x, w -> out ---------------- */

static vstatus rmsnorm_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what) {
  const int B = c->batch, n = c->d[0];
  uint16_t *o;
  VTRY(tmp_alloc(A, (void **)&o, (size_t)l->b[2].n * 2, "out_bf16"));
  VTRY(curef_rmsnorm_f32(o, (const float *)b[0], n, (const uint16_t *)b[1], B, n, (float)c->f[0], 0));
  VTRY(to_f32(b[2], o, l->b[2].n));
  snprintf(what, 64, "curef_rmsnorm_f32 -> bf16");
  return V_OK;
}
VARIANT(rmsnorm_body, "ref")

static vstatus rmsnorm_bf16in_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what) {
  const int B = c->batch, n = c->d[0];
  uint16_t *x, *o;
  VTRY(to_bf16(A, &x, b[0], l->b[0].n, "x_bf16"));
  VTRY(tmp_alloc(A, (void **)&o, (size_t)l->b[2].n * 2, "out_bf16"));
  VTRY(curef_rmsnorm_bf16(o, x, n, (const uint16_t *)b[1], B, n, (float)c->f[0], 0));
  VTRY(to_f32(b[2], o, l->b[2].n));
  snprintf(what, 64, "bf16(x); curef_rmsnorm_bf16 -> bf16");
  return V_OK;
}
VARIANT(rmsnorm_bf16in_body, "ref_bf16in")

/* ---------------- add_rmsnorm: not a form cuda-ref has ---------------- */

static vstatus add_rmsnorm_supports(const vop_case *c) {
  (void)c;
  return VUNSUPPORTED(PATH " has no fused residual-add + RMSNorm: it runs curef_add_bf16 (f32 stream += bf16 "
                           "sublayer output) then curef_rmsnorm_f32; see the rmsnorm 'ref' variant");
}
static vstatus add_rmsnorm_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what) {
  (void)l, (void)b, (void)A, (void)what;
  return add_rmsnorm_supports(c);
}
VARIANT(add_rmsnorm_body, "ref_unfused")

/* ---------------- linear: x, w -> y ---------------- */

static vstatus linear_common(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what,
                             int y_f32) {
  const int O = c->d[0], I = c->d[1], B = c->batch;
  cublasHandle_t h = NULL;
  VTRY(blas(&h));
  uint16_t *x;
  VTRY(to_bf16(A, &x, b[0], l->b[0].n, "x_bf16"));
  if (y_f32) {
    VTRY(curef_linear(h, b[2], 1, x, (const uint16_t *)b[1], B, I, O));
  } else {
    uint16_t *y;
    VTRY(tmp_alloc(A, (void **)&y, (size_t)l->b[2].n * 2, "y_bf16"));
    VTRY(curef_linear(h, y, 0, x, (const uint16_t *)b[1], B, I, O));
    VTRY(to_f32(b[2], y, l->b[2].n));
  }
  snprintf(what, 64, "bf16(x); curef_linear cublasGemmEx fp32-acc -> %s", y_f32 ? "f32" : "bf16");
  return V_OK;
}
static vstatus linear_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what) {
  return linear_common(c, l, b, A, what, 0);
}
static vstatus linear_f32_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what) {
  return linear_common(c, l, b, A, what, 1);
}
VARIANT(linear_body, "ref_cublas")
VARIANT(linear_f32_body, "ref_cublas_f32")

/* ---------------- rope: x, pos -> out ---------------- */

static vstatus rope_supports(const vop_case *c) {
  VTRY(have_device());
  const int r = c->d[1];
  if (r % 2 || r <= 0) return VUNSUPPORTED("rope dim %d: curef_rope needs an even dim", r);
  if (r != c->cfg.qk_rope_head_dim)
    return VUNSUPPORTED("rope dim %d differs from the config's qk_rope_head_dim %d (cuda-ref's inv_freq table)", r,
                        c->cfg.qk_rope_head_dim);
  if ((size_t)r * sizeof(float) > 48 * 1024) return VUNSUPPORTED("rope dim %d: curef_rope's shared row > 48 KiB", r);
  if ((int64_t)c->batch * c->d[0] > 0x7fffffff) return VUNSUPPORTED("rope: %d x %d blocks > 2^31-1", c->batch, c->d[0]);
  return V_OK;
}
static vstatus rope_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what) {
  const int H = c->d[0], r = c->d[1];
  float *inv_h = (float *)malloc((size_t)(r / 2) * sizeof(float));
  if (!inv_h) return VERR("cuda_variants.cu: rope: out of memory for inv_freq[%d]", r / 2);
  const float attn = (float)ds_rope_inv_freq(&c->cfg, inv_h); /* as cuda-ref's open() does */
  float *inv = NULL;
  vstatus s = tmp_alloc(A, (void **)&inv, (size_t)(r / 2) * sizeof(float), "inv_freq");
  cudaError_t e = cudaSuccess;
  if (s == V_OK) e = cudaMemcpy(inv, inv_h, (size_t)(r / 2) * sizeof(float), cudaMemcpyHostToDevice);
  if (e != cudaSuccess) s = VERR("cuda_variants.cu: rope: field 'inv_freq': upload failed: %s", cudaGetErrorString(e));
  free(inv_h);
  VTRY(s);
  uint16_t *x;
  VTRY(to_bf16(A, &x, b[0], l->b[0].n, "x_bf16"));
  VTRY(curef_rope(x, c->batch, H, H * r, r, 0, r, (const int32_t *)b[1], inv, attn, c->d[2] ? 1 : 0, 0));
  VTRY(to_f32(b[2], x, l->b[2].n));
  snprintf(what, 64, "bf16(x); curef_rope interleave=%d", c->d[2] ? 1 : 0);
  return V_OK;
}
VARIANT(rope_body, "ref")

/* ---------------- mla_decode: q, k, v, lens -> out ---------------- */

static vstatus mla_decode_supports(const vop_case *c) {
  VTRY(have_device());
  const int dk = c->d[1], dv = c->d[2];
  if ((size_t)(dk + 128 + dv + 32) * sizeof(float) > 48 * 1024)
    return VUNSUPPORTED("head dims dk %d + dv %d: curef_attention's shared memory > 48 KiB", dk, dv);
  if ((int64_t)c->batch * c->d[0] > 0x7fffffff) return VUNSUPPORTED("attention: %d x %d blocks > 2^31-1", c->batch, c->d[0]);
  return V_OK;
}
static vstatus mla_decode_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what) {
  const int B = c->batch, H = c->d[0], qk = c->d[1], vd = c->d[2], L = c->d[3];
  /* slot b, position lens[b]-1: the kernel attends to [0, pos] of slot b, as a decode step does */
  int32_t *hv = (int32_t *)malloc((size_t)B * 2 * sizeof(int32_t));
  if (!hv) return VERR("cuda_variants.cu: mla_decode: out of memory for %d rows", B);
  vstatus s = host_ints(hv + B, b[3], B);
  for (int i = 0; i < B && s == V_OK; i++) {
    const int len = hv[B + i];
    if (len < 1 || len > L) s = VERR("cuda_variants.cu: mla_decode: field 'lens[%d]': %d outside [1, %d]", i, len, L);
    hv[i] = i;
    hv[B + i] = len - 1;
  }
  int32_t *sp = NULL;
  if (s == V_OK) s = tmp_alloc(A, (void **)&sp, (size_t)B * 2 * sizeof(int32_t), "slot_pos");
  cudaError_t e = cudaSuccess;
  if (s == V_OK) e = cudaMemcpy(sp, hv, (size_t)B * 2 * sizeof(int32_t), cudaMemcpyHostToDevice);
  if (e != cudaSuccess) s = VERR("cuda_variants.cu: mla_decode: field 'slot/pos': upload failed: %s", cudaGetErrorString(e));
  free(hv);
  VTRY(s);
  uint16_t *q, *kc, *vc, *o;
  VTRY(to_bf16(A, &q, b[0], l->b[0].n, "q_bf16"));
  VTRY(tmp_alloc(A, (void **)&kc, (size_t)l->b[1].n * 2, "kcache"));
  VTRY(tmp_alloc(A, (void **)&vc, (size_t)l->b[2].n * 2, "vcache"));
  LAUNCH(to_cache_kernel, l->b[1].n, kc, (const float *)b[1], B, H, L, qk);
  LAUNCH(to_cache_kernel, l->b[2].n, vc, (const float *)b[2], B, H, L, vd);
  VTRY(tmp_alloc(A, (void **)&o, (size_t)l->b[4].n * 2, "out_bf16"));
  VTRY(curef_attention(o, q, kc, vc, sp, sp + B, B, H, qk, vd, L, (float)c->f[0], 0));
  VTRY(to_f32(b[4], o, l->b[4].n));
  snprintf(what, 64, "bf16 expanded cache; curef_attention");
  return V_OK;
}
VARIANT(mla_decode_body, "ref")

/* ---------------- router: logits, bias -> idx, wt ----------------
 * curef_router computes the logits itself (x . w_gate in fp32 from bf16). The op gives f32
 * logits, so the variant feeds x = the logits split exactly into three bf16 parts per expert
 * and w = the matching 0/1 selector [E][3E]: the kernel's own fp32 dot then reproduces each
 * logit bit for bit, and everything after it (sigmoid, bias, groups, top-k, normalization,
 * scaling) is cuda-ref's kernel unchanged. */

static vstatus router_supports(const vop_case *c) {
  VTRY(have_device());
  const int E = c->d[0], K = c->d[1], G = c->d[2];
  if (E <= 0 || K <= 0 || K > E) return VUNSUPPORTED("router: top-k %d of %d experts", K, E);
  if (G > 0 && G <= E && E % G) return VUNSUPPORTED("router: %d experts not divisible into %d groups", E, G);
  if ((size_t)(2 * E + G) * sizeof(float) + (size_t)(E + G) > 48 * 1024)
    return VUNSUPPORTED("router: %d experts: curef_router's shared memory > 48 KiB", E);
  if ((int64_t)E * 3 > 0x7fffffff / 4) return VUNSUPPORTED("router: %d experts too many for the exact logit feed", E);
  return V_OK;
}
static vstatus router_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what) {
  const int B = c->batch, E = c->d[0], K = c->d[1];
  uint16_t *x, *w;
  int *bad;
  VTRY(tmp_alloc(A, (void **)&x, (size_t)l->b[0].n * 3 * 2, "x_split"));
  VTRY(tmp_alloc(A, (void **)&w, (size_t)E * 3 * E * 2, "w_select"));
  VTRY(tmp_alloc(A, (void **)&bad, sizeof(int), "split_flag"));
  CUDA_CHECK(cudaMemset(bad, 0, sizeof(int)));
  LAUNCH(router_split_kernel, l->b[0].n, x, (const float *)b[0], (int64_t)l->b[0].n, bad);
  LAUNCH(router_eye3_kernel, (int64_t)E * 3 * E, w, E);
  int hbad = 0;
  CUDA_CHECK(cudaMemcpy(&hbad, bad, sizeof(int), cudaMemcpyDeviceToHost));
  if (hbad) return VUNSUPPORTED("router: some logits are not finite or too small to split exactly into bf16 parts");
  VTRY(curef_router((int32_t *)b[2], (float *)b[3], x, w, (const float *)b[1], B, 3 * E, E, K, c->d[2], c->d[3],
                    c->d[4] ? 1 : 0, (float)c->f[0], 0));
  snprintf(what, 64, "exact logit feed; curef_router");
  return V_OK;
}
VARIANT(router_body, "ref")

/* ---------------- swiglu: x, gate, up, down -> out ---------------- */

static vstatus swiglu_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what) {
  const int B = c->batch, D = c->d[0], I = c->d[1];
  cublasHandle_t h = NULL;
  VTRY(blas(&h));
  uint16_t *x, *g, *u, *a, *o;
  const size_t bi = (size_t)B * (size_t)I * 2;
  VTRY(to_bf16(A, &x, b[0], l->b[0].n, "x_bf16"));
  VTRY(tmp_alloc(A, (void **)&g, bi, "gate_out"));
  VTRY(tmp_alloc(A, (void **)&u, bi, "up_out"));
  VTRY(tmp_alloc(A, (void **)&a, bi, "act"));
  VTRY(tmp_alloc(A, (void **)&o, (size_t)l->b[4].n * 2, "out_bf16"));
  VTRY(curef_linear(h, g, 0, x, (const uint16_t *)b[1], B, D, I));
  VTRY(curef_linear(h, u, 0, x, (const uint16_t *)b[2], B, D, I));
  VTRY(curef_silu_mul(a, g, u, (size_t)B * (size_t)I, 0));
  VTRY(curef_linear(h, o, 0, a, (const uint16_t *)b[3], B, I, D));
  VTRY(to_f32(b[4], o, l->b[4].n));
  snprintf(what, 64, "bf16(x); 3x curef_linear + curef_silu_mul");
  return V_OK;
}
VARIANT(swiglu_body, "ref_cublas")

/* ---------------- moe_combine: y, w, shared, resid -> out ----------------
 * out starts as the residual (cuda-ref's f32 stream), each expert slot's bf16 output is
 * scatter-added with its router weight, then the bf16 shared-expert output is added. */

static vstatus moe_combine_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what) {
  const int B = c->batch, D = c->d[0], k = c->d[1];
  uint16_t *y, *sh;
  float *w;
  int32_t *rows;
  VTRY(tmp_alloc(A, (void **)&y, (size_t)l->b[0].n * 2, "y_slots_bf16"));
  VTRY(tmp_alloc(A, (void **)&w, (size_t)l->b[1].n * sizeof(float), "w_slots"));
  VTRY(tmp_alloc(A, (void **)&rows, (size_t)B * sizeof(int32_t), "rows"));
  VTRY(to_bf16(A, &sh, b[2], l->b[2].n, "shared_bf16"));
  LAUNCH(slots_bf16_kernel, l->b[0].n, y, (const float *)b[0], B, k, D);
  LAUNCH(slots_f32_kernel, l->b[1].n, w, (const float *)b[1], B, k);
  LAUNCH(iota_kernel, B, rows, B);
  CUDA_CHECK(cudaMemcpyAsync(b[4], b[3], (size_t)l->b[3].n * sizeof(float), cudaMemcpyDeviceToDevice, 0));
  for (int j = 0; j < k; j++)
    VTRY(curef_scatter_add((float *)b[4], y + (size_t)j * B * D, rows, w + (size_t)j * B, B, D, 0));
  VTRY(curef_add_bf16((float *)b[4], sh, (size_t)l->b[2].n, 0));
  snprintf(what, 64, "bf16(y, shared); %dx curef_scatter_add + curef_add_bf16", k);
  return V_OK;
}
VARIANT(moe_combine_body, "ref_scatter")

/* ---------------- registration ---------------- */

/* Every cuda-ref kernel promises bitwise reruns (nondeterministic NULL): plain per-element or
 * per-row kernels without atomics (scatter_add runs one slot per launch, its rows distinct), and
 * cuBLAS, which is run-to-run reproducible on one GPU and stream. */
static const entry k_entries[] = {
    {"embed", "ref", "curef_embed (bf16 table -> f32 stream)", any_case, embed_body_run},
    {"rmsnorm", "ref", "curef_rmsnorm_f32: f32 residual in, bf16 out", any_case, rmsnorm_body_run},
    {"rmsnorm", "ref_bf16in", "curef_rmsnorm_bf16: bf16 latent in (q_a/kv_a norms), bf16 out", any_case,
     rmsnorm_bf16in_body_run},
    {"add_rmsnorm", "ref_unfused", "not fused in cuda-ref (add, then norm): not supported", add_rmsnorm_supports,
     add_rmsnorm_body_run},
    {"linear", "ref_cublas", "curef_linear: cublasGemmEx bf16, fp32 compute, bf16 out (projections)", any_case,
     linear_body_run},
    /* y (buffer 2) is cuBLAS's fp32 output, never rounded: the fp32 bound (cuBLAS: bitwise reruns on
     * one GPU and stream) */
    {"linear", "ref_cublas_f32", "curef_linear: cublasGemmEx bf16, fp32 compute, f32 out (lm_head)", any_case,
     linear_f32_body_run, false, 0, 1u << 2},
    {"rope", "ref", "curef_rope in place on bf16", rope_supports, rope_body_run},
    {"mla_decode", "ref", "curef_attention over an expanded bf16 cache", mla_decode_supports, mla_decode_body_run},
    /* wt (buffer 3): curef_router's fp32 sigmoid, sum, division and scaling, never rounded: the fp32
     * bound, as the latency router's */
    {"router", "ref", "curef_router (logits fed exactly through a 0/1 gate)", router_supports, router_body_run, false,
     0, 1u << 3},
    {"swiglu", "ref_cublas", "curef_linear x3 + curef_silu_mul (bf16 intermediates)", any_case, swiglu_body_run},
    /* out (buffer 4): the fp32 residual plus fp32 products and adds, never rounded: the fp32 bound */
    {"moe_combine", "ref_scatter", "curef_scatter_add per slot + curef_add_bf16 (shared)", any_case,
     moe_combine_body_run, false, 0, 1u << 4},
};

#define N_ENTRIES (sizeof k_entries / sizeof k_entries[0])

extern "C" void cuda_ref_register_variants(void) {
  static vop_variant vars[N_ENTRIES];
  vopreg_set_cuda_backend(vop_backend_cuda());
  register_entries(k_entries, N_ENTRIES, vars);
}
