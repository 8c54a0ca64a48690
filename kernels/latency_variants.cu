/* The "latency" variants of the numerics suite's ops: each one runs the latency path's own
 * launchers (kernels/latency_kernels.h) on the suite's device buffers, called the way
 * kernels/latency_step.cu calls them (same argument order, layouts, 32 MiB split-K scratch, SM
 * count, per-bucket GEMM table), on the default stream.
 *
 * The suite's buffers hold float32 activations; the path keeps activations in bf16 (the
 * residual stream in fp32). So a variant converts f32 inputs to bf16 on the device where the
 * kernel takes bf16 (exact: the suite hands bf16 variants their inputs on the bf16 grid) and
 * widens bf16 outputs back to f32 (exact); the bf16 rounding of outputs and intermediates is
 * what the bf16 bounds (act_dtype DT_BF16) allow for. Temporaries are poisoned
 * (0xFF: bf16/f32 NaN, so an element a kernel never wrote fails the case) and guarded (a write
 * past either end of a temporary is an error of the run). Batch 1..64 (the path's envelope).
 *
 * What each variant maps to:
 *   linear       v1_mma_n8 .. v4_mma_n64, v5_cublas, v6_cp_n8 .. v10_cp_w8: lat_gemm with that
 *                variant, bf16(x), fp32 epilogue (LAT_EP_F32) straight into y; a variant whose
 *                token tile is smaller than the batch is "not supported" (lat_gemm would run
 *                another one). in_features not a multiple of 8 (the kernels' 16-byte loads):
 *                x and W are copied with zero columns up to the next multiple of 8 (exact),
 *                so the edge shapes still test the N / T tails.
 *                table: the variant the path's per-bucket table picks for this batch and shape
 *                (latency_table_gemm: the path's own rule, shape included).
 *   add_rmsnorm  v1: lat_add_rmsnorm with the residual (fp32, in/out) = res copied into h and
 *                the added sublayer output y = bf16(x) (exact, on the grid): h = res + x in fp32,
 *                xn = bf16 norm, widened to out.
 *   rmsnorm      v1_add_rmsnorm: the path has no stand-alone norm of the fp32 stream (it is
 *                fused into embed / add / combine): lat_add_rmsnorm with a zero addend on a copy
 *                of x (x + 0 is exact), bf16 out widened. (q_a / kv_a norms run in lat_mla_prep,
 *                which also stores the cache: no op matches it.)
 *   embed        v1_embed_norm: lat_embed_norm; its fp32 output x is the op's out, written
 *                directly; the fused norm (weight 1) goes to a temporary nobody checks.
 *   router       v1: lat_router_topk on the op's f32 logits and bias directly (no forced ids).
 *   moe_combine  v1: lat_moe_combine_norm: out = copy of resid, += sum_k w * bf16(y) +
 *                bf16(shared) (its layout [B][k][D] is the kernel's Y); the fused next norm
 *                (weight 1) goes to a temporary.
 *   swiglu       table: gate/up interleaved in blocks of 8 rows (as load_interleaved), lat_gemm
 *                with the SwiGLU epilogue -> bf16 act, down lat_gemm -> bf16 -> widened; variants
 *                from the path's table (dense_mlp's sequence).
 *                grouped: the MoE sequence of latency_step.cu's moe() with top-1 over 4 pseudo
 *                experts: tokens alternate between experts 1 and 3 (both the op's weights);
 *                experts 0 and 2 point at NaN weights, so a wrong expert pointer shows as NaN;
 *                lat_moe_bucket, grouped gate/up (xmap = perm_tok, SwiGLU), grouped down
 *                (omap = perm_pair), table's grouped variant.
 *   mla_absorbed v1_split: attention()'s sequence: lat_transpose_wuk, q = bf16[q_nope | q_pe]
 *                per head, latent cache [slot b][pos][ckv | kpe] bf16, absorbed-q batched
 *                lat_gemm (fp32 q_lat), lat_mla_attn with lat_mla_splits' count, lat_mla_combine,
 *                W_UV batched lat_gemm (bf16), widened. q_pe and kpe are the op's (already
 *                rotated) values: RoPE (curef_rope / lat_mla_prep) is not part of this op.
 *                v3_mma: the same with lat_mla_attn_mma. v2_gemm: lat_mla_attn_gemm (no combine)
 *                over the bucket lat_mla_gemm_ncap picks for the longest row, each slot's cache
 *                as long as the ctx's bucket (rows past the ctx zero, as the path's before a store).
 *   mla_absorbed_dcp v1_split / v3_mma: decode context parallelism with N ranks simulated in turn on
 *                this GPU (tests/gpu/test_latency_dcp.c's sequence): the latent cache of each rank in
 *                lat_mla_prep_dcp's owned-position layout; per rank W_UK of its heads, lat_dcp_pack_q
 *                into its block of the gathered queries (the all-gather), lat_dcp_place_q, lat_dcp_lpos,
 *                the split-KV attention of all heads over its positions, lat_dcp_merge_local into its
 *                block of the gathered partials; per rank lat_dcp_combine of its heads and W_UV.
 *   lse_combine  v1: lat_mla_combine with pm = lse, pl = 1, pacc = o_part (its [B][H][S][vd]
 *                layout), which is exactly the normalized log-sum-exp merge; bf16 out widened.
 * Not registered: mla_decode / attn_partial (expanded per-head K/V; the latency kernels only
 * attend over the latent cache, and lat_mla_attn splits keys by ceil(len/S), not the op's
 * floor(s*len/S)), rope (the path runs cuda-ref's curef_rope), sample (host), allreduce
 * (kernels/latency_tp_variants.cu). */
#include <limits.h>

#include "kernels/latency.h"
#include "kernels/latency_kernels.h"
#define PATH "latency"
#include "reference/cuda/variant_kit.h"

#define WS_BYTES ((size_t)32 << 20) /* split-K scratch, as latency_state.h's */
#define MAX_B 64                    /* the path's envelope: token rows of one step */
#define NORM_EPS 1e-6f              /* eps of the fused norms whose output no op checks */

/* ---------------- device glue (conversions and layouts, not latency kernels) ---------------- */


static __global__ void fill_u16_kernel(uint16_t *dst, uint16_t v, int64_t n) {
  GRID_STRIDE(i, n) dst[i] = v;
}
static __global__ void fill_f32_kernel(float *dst, float v, int64_t n) {
  GRID_STRIDE(i, n) dst[i] = v;
}
/* dst [rows][Kp] bf16 from f32 src [rows][K], zero columns K..Kp. */
static __global__ void pad_f32_kernel(uint16_t *dst, const float *src, int64_t rows, int K, int Kp) {
  const int64_t n = rows * Kp;
  GRID_STRIDE(i, n) {
    const int64_t k = i % Kp, r = i / Kp;
    dst[i] = k < K ? f2bf(src[r * K + k]) : (uint16_t)0;
  }
}
/* dst [rows][Kp] from bf16 src [rows][K], zero columns K..Kp. */
static __global__ void pad_bf16_kernel(uint16_t *dst, const uint16_t *src, int64_t rows, int K, int Kp) {
  const int64_t n = rows * Kp;
  GRID_STRIDE(i, n) {
    const int64_t k = i % Kp, r = i / Kp;
    dst[i] = k < K ? src[r * K + k] : (uint16_t)0;
  }
}
/* q [B][H][n + r] bf16 = [bf16(q_nope[b][h]) | bf16(q_pe[b][h])]. */
static __global__ void mla_q_kernel(uint16_t *q, const float *qn, const float *qp, int64_t BH, int n, int r) {
  const int dk = n + r;
  const int64_t total = BH * dk;
  GRID_STRIDE(i, total) {
    const int64_t e = i % dk, bh = i / dk;
    q[i] = f2bf(e < n ? qn[bh * n + e] : qp[bh * r + (e - n)]);
  }
}
/* cache [B][L][kl + r] bf16 = [bf16(ckv[b][j]) | bf16(kpe[b][j])] (slot b, position j). */
static __global__ void mla_cache_kernel(uint16_t *cache, const float *ckv, const float *kpe, int64_t BL, int kl,
                                        int r) {
  const int W = kl + r;
  const int64_t total = BL * W;
  GRID_STRIDE(i, total) {
    const int64_t e = i % W, bj = i / W;
    cache[i] = f2bf(e < kl ? ckv[bj * kl + e] : kpe[bj * r + (e - kl)]);
  }
}

/* ---------------- shared pieces ---------------- */

static int g_sms = 0;         /* SM count of the current device (launch sizes, as the path's) */
static bool g_init = false;   /* lat_kernels_init done */
static cublasHandle_t g_blas; /* created on first use */

/* Device, SM count, the GEMMs' shared-memory limits and cuBLAS, once. */
static vstatus ready(void) {
  VTRY(have_device());
  if (!g_init) {
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, dev));
    VTRY(lat_kernels_init());
    g_init = true;
  }
  if (!g_blas) CUBLAS_CHECK(cublasCreate(&g_blas));
  return V_OK;
}

static vstatus batch_ok(const vop_case *c) {
  VTRY(have_device());
  if (c->batch < 1 || c->batch > MAX_B)
    return VUNSUPPORTED(PATH ": batch %d outside the path's envelope 1..%d (larger batches run in chunks)", c->batch,
                        MAX_B);
  return V_OK;
}

/* The row kernels (embed, add + norm, MoE combine) read 16-byte vectors: rows of a multiple of 8 up
 * to LAT_ROW_MAX, which the path's envelope requires of the hidden size (other configs run cuda-ref). */
static vstatus row_ok(const vop_case *c, int D, const char *op) {
  VTRY(batch_ok(c));
  if (D < 8 || D % 8 || D > LAT_ROW_MAX)
    return VUNSUPPORTED("%s: row of %d: the latency row kernels take multiples of 8 up to %d (the path's envelope)", op,
                        D, LAT_ROW_MAX);
  return V_OK;
}
static vstatus add_rmsnorm_supports(const vop_case *c) { return row_ok(c, c->d[0], "add_rmsnorm"); }
static vstatus rmsnorm_supports(const vop_case *c) { return row_ok(c, c->d[0], "rmsnorm"); }
static vstatus embed_supports(const vop_case *c) { return row_ok(c, c->d[1], "embed"); }

/* A bf16 temporary filled with v (0x3F80: 1.0, 0: zero, 0xFFFF: NaN). */
static vstatus const_bf16(arena *A, uint16_t **dst, int64_t n, uint16_t v, const char *name) {
  VTRY(tmp_alloc(A, (void **)dst, (size_t)n * 2, name));
  if (n > 0) LAUNCH(fill_u16_kernel, n, *dst, v, n);
  return V_OK;
}

static vstatus upload_ints(arena *A, int32_t **dst, const int32_t *src, int n, const char *name) {
  VTRY(tmp_alloc(A, (void **)dst, (size_t)n * sizeof(int32_t), name));
  CUDA_CHECK(cudaMemcpy(*dst, src, (size_t)n * sizeof(int32_t), cudaMemcpyHostToDevice));
  return V_OK;
}

static lat_gemm_args dense_args(const uint16_t *W, const uint16_t *x, int ldx, void *out, int ldo, int N, int K, int T,
                                int ep, float *ws) {
  lat_gemm_args a = lat_dense_args(W, x, ldx, out, ldo, N, K, T, ep);
  a.ws = ws;
  a.ws_bytes = WS_BYTES;
  return a;
}

/* Runs lat_gemm with `variant` and insists that this variant ran (lat_gemm replaces a variant
 * whose token tile is too small: the suite must not record a variant that did not run). */
static vstatus gemm(const lat_gemm_args *a, int variant, int *splits, const char *what) {
  int ran = 0, s = 1;
  VTRY(lat_gemm(a, variant, g_sms, g_blas, 0, &s, &ran));
  if (ran != variant)
    return VERR("latency_variants.cu: %s: lat_gemm ran %s instead of %s", what, lat_gemm_variant_name(ran),
                lat_gemm_variant_name(variant));
  if (splits) *splits = s;
  return V_OK;
}

/* Before every body: the envelope (the bodies size host arrays by MAX_B), then one-time setup. */
static vstatus pre_body(const vop_case *c) {
  VTRY(batch_ok(c));
  return ready();
}

#define VARIANT(fn, vname)                                                                        \
  static vstatus fn##_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) { \
    return run_body(c, l, b, t, vname, fn, pre_body, 16); /* 16: the GEMMs' 16-byte loads */                                                      \
  }

/* ---------------- linear: x, w -> y (f32) ---------------- */

static vstatus linear_shape_ok(const vop_case *c) {
  VTRY(batch_ok(c));
  if (c->d[0] < 1 || c->d[1] < 1) return VUNSUPPORTED("linear: %d x %d weights", c->d[0], c->d[1]);
  return V_OK;
}

static vstatus linear_common(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what, int v) {
  (void)l;
  const int O = c->d[0], I = c->d[1], B = c->batch;
  const int Ip = (I + 7) / 8 * 8;
  const uint16_t *w = (const uint16_t *)b[1];
  uint16_t *x;
  VTRY(tmp_alloc(A, (void **)&x, (size_t)B * Ip * 2, "x_bf16"));
  LAUNCH(pad_f32_kernel, (int64_t)B * Ip, x, (const float *)b[0], (int64_t)B, I, Ip);
  if (Ip != I) { /* zero columns: exact, and lat_gemm needs K % 8 == 0 */
    uint16_t *wp;
    VTRY(tmp_alloc(A, (void **)&wp, (size_t)O * Ip * 2, "w_padded"));
    LAUNCH(pad_bf16_kernel, (int64_t)O * Ip, wp, w, (int64_t)O, I, Ip);
    w = wp;
  }
  float *ws;
  VTRY(tmp_alloc(A, (void **)&ws, WS_BYTES, "splitk_scratch"));
  const lat_gemm_args a = dense_args(w, x, Ip, b[2], O, O, Ip, B, LAT_EP_F32, ws);
  int splits = 1;
  VTRY(gemm(&a, v, &splits, "linear"));
  snprintf(what, 96, "bf16(x); lat_gemm %s [%d x %d%s] fp32 epilogue splits=%d", lat_gemm_variant_name(v), O, I,
           Ip != I ? " K zero-padded" : "", splits);
  return V_OK;
}

#define LINEAR_VARIANT(num, vname)                                                                            \
  static vstatus linear_v##num##_supports(const vop_case *c) {                                                \
    VTRY(linear_shape_ok(c));                                                                                 \
    if (lat_gemm_variant_max_tokens(num) < c->batch)                                                          \
      return VUNSUPPORTED(vname ": batch %d > its %d-token tile", c->batch, lat_gemm_variant_max_tokens(num)); \
    return V_OK;                                                                                              \
  }                                                                                                           \
  static vstatus linear_v##num##_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A,       \
                                      char *what) {                                                           \
    return linear_common(c, l, b, A, what, num);                                                              \
  }                                                                                                           \
  VARIANT(linear_v##num##_body, vname)

#define LINEAR_ONE(num, id, name, family, max_tokens, what) LINEAR_VARIANT(num, #name)
LAT_GEMM_VARIANTS(LINEAR_ONE)
#undef LINEAR_ONE

static vstatus linear_table_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what) {
  const int Ip = (c->d[1] + 7) / 8 * 8;
  return linear_common(c, l, b, A, what, latency_table_gemm(c->batch, c->d[0], Ip, LAT_EP_F32, false));
}
VARIANT(linear_table_body, "table")

/* ---------------- add_rmsnorm: x, res, w -> h, out ---------------- */

static vstatus add_rmsnorm_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what) {
  const int B = c->batch, n = c->d[0];
  const int64_t N = l->b[0].n;
  uint16_t *y, *xn;
  VTRY(to_bf16(A, &y, b[0], N, "x_bf16"));
  VTRY(tmp_alloc(A, (void **)&xn, (size_t)N * 2, "xn_bf16"));
  CUDA_CHECK(cudaMemcpy(b[3], b[1], (size_t)N * sizeof(float), cudaMemcpyDeviceToDevice)); /* h = res */
  VTRY(lat_add_rmsnorm((float *)b[3], xn, y, (const uint16_t *)b[2], B, n, (float)c->f[0], 0));
  VTRY(to_f32(b[4], xn, N));
  snprintf(what, 96, "h=res; lat_add_rmsnorm(h += bf16(x)) -> bf16 norm");
  return V_OK;
}
VARIANT(add_rmsnorm_body, "v1")

/* ---------------- rmsnorm: x, w -> out ---------------- */

static vstatus rmsnorm_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what) {
  const int B = c->batch, n = c->d[0];
  const int64_t N = l->b[0].n;
  float *h;
  uint16_t *zero, *xn;
  VTRY(tmp_alloc(A, (void **)&h, (size_t)N * sizeof(float), "x_copy"));
  CUDA_CHECK(cudaMemcpy(h, b[0], (size_t)N * sizeof(float), cudaMemcpyDeviceToDevice));
  VTRY(const_bf16(A, &zero, N, 0, "zero_addend"));
  VTRY(tmp_alloc(A, (void **)&xn, (size_t)N * 2, "xn_bf16"));
  VTRY(lat_add_rmsnorm(h, xn, zero, (const uint16_t *)b[1], B, n, (float)c->f[0], 0));
  VTRY(to_f32(b[2], xn, N));
  snprintf(what, 96, "lat_add_rmsnorm(copy of x += 0) -> bf16 norm");
  return V_OK;
}
VARIANT(rmsnorm_body, "v1_add_rmsnorm")

/* ---------------- embed: tok, table -> out (f32) ---------------- */

static vstatus embed_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what) {
  (void)l;
  const int B = c->batch, V = c->d[0], D = c->d[1];
  int32_t tok[MAX_B];
  VTRY(host_ints(tok, b[0], B)); /* the path checks tokens on the host before upload */
  for (int i = 0; i < B; i++)
    if (tok[i] < 0 || tok[i] >= V) return VERR("latency_variants.cu: embed: field 'tok[%d]': %d outside [0, %d)", i, tok[i], V);
  uint16_t *w, *xn;
  VTRY(const_bf16(A, &w, D, 0x3F80, "norm_weight_ones"));
  VTRY(tmp_alloc(A, (void **)&xn, (size_t)B * D * 2, "xn_bf16"));
  VTRY(lat_embed_norm((float *)b[2], xn, (const int32_t *)b[0], (const uint16_t *)b[1], w, B, D, NORM_EPS, 0));
  snprintf(what, 96, "lat_embed_norm: x -> out (the fused norm to a temporary)");
  return V_OK;
}
VARIANT(embed_body, "v1_embed_norm")

/* ---------------- router: logits, bias -> idx, wt ---------------- */

static vstatus router_supports(const vop_case *c) {
  VTRY(batch_ok(c));
  const int E = c->d[0], K = c->d[1], G = c->d[2], TG = c->d[3];
  if (E < 1 || K < 1 || K > E) return VUNSUPPORTED("router: top-k %d of %d experts", K, E);
  if (K > 64) return VUNSUPPORTED("router: top-k %d > 64 (the path's combine kernel)", K);
  if (G < 1 || G > E || E % G) return VUNSUPPORTED("router: %d experts in %d groups", E, G);
  if (G > 32) return VUNSUPPORTED("router: %d groups > 32 (lat_router_topk's warp argmax)", G);
  if (G > 1 && (TG < 1 || TG > G)) return VUNSUPPORTED("router: topk_group %d outside 1..%d", TG, G);
  if ((size_t)4 * 2 * E * sizeof(float) > 48 * 1024)
    return VUNSUPPORTED("router: %d experts: lat_router_topk's shared memory > 48 KiB", E);
  return V_OK;
}
static vstatus router_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what) {
  (void)l, (void)A;
  const int E = c->d[0], K = c->d[1];
  VTRY(lat_router_topk((int32_t *)b[2], (float *)b[3], (const float *)b[0], (const float *)b[1], NULL, c->batch, E, K,
                       c->d[2], c->d[3], c->d[4] ? 1 : 0, (float)c->f[0], 0));
  snprintf(what, 96, "lat_router_topk E=%d k=%d groups %d/%d", E, K, c->d[3], c->d[2]);
  return V_OK;
}
VARIANT(router_body, "v1")

/* ---------------- moe_combine: y, w, shared, resid -> out ---------------- */

static vstatus moe_combine_supports(const vop_case *c) {
  VTRY(row_ok(c, c->d[0], "moe_combine"));
  if (c->d[1] < 1 || c->d[1] > 64) return VUNSUPPORTED("moe_combine: top-k %d outside 1..64", c->d[1]);
  return V_OK;
}
static vstatus moe_combine_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what) {
  const int B = c->batch, D = c->d[0], k = c->d[1];
  uint16_t *Y, *sh, *w, *xn;
  VTRY(to_bf16(A, &Y, b[0], l->b[0].n, "y_bf16"));
  VTRY(to_bf16(A, &sh, b[2], l->b[2].n, "shared_bf16"));
  VTRY(const_bf16(A, &w, D, 0x3F80, "norm_weight_ones"));
  VTRY(tmp_alloc(A, (void **)&xn, (size_t)B * D * 2, "xn_bf16"));
  CUDA_CHECK(cudaMemcpy(b[4], b[3], (size_t)l->b[3].n * sizeof(float), cudaMemcpyDeviceToDevice)); /* out = resid */
  VTRY(lat_moe_combine_norm((float *)b[4], xn, Y, (const float *)b[1], sh, w, B, k, D, NORM_EPS, 0));
  snprintf(what, 96, "out=resid; lat_moe_combine_norm(bf16 y, bf16 shared) k=%d", k);
  return V_OK;
}
VARIANT(moe_combine_body, "v1")

/* ---------------- swiglu: x, gate, up, down -> out ---------------- */

static vstatus swiglu_supports(const vop_case *c) {
  VTRY(batch_ok(c));
  const int D = c->d[0], I = c->d[1];
  if (D < 8 || D % 8 || I < 8 || I % 8)
    return VUNSUPPORTED("swiglu: hidden %d / intermediate %d not multiples of 8 (interleave blocks, 16-byte loads; "
                        "the path delegates such configs to cuda-ref)", D, I);
  return V_OK;
}

/* gu [2I, D]: blocks of 16 rows = 8 gate rows then the matching 8 up rows (latency_open.cu load_interleaved). */
static vstatus interleave(arena *A, uint16_t **gu, const void *gate, const void *up, int I, int D) {
  VTRY(tmp_alloc(A, (void **)gu, (size_t)2 * I * D * 2, "gate_up_interleaved"));
  const size_t rb = (size_t)D * 2;
  CUDA_CHECK(cudaMemcpy2D(*gu, 16 * rb, gate, 8 * rb, 8 * rb, (size_t)I / 8, cudaMemcpyDeviceToDevice));
  CUDA_CHECK(cudaMemcpy2D(*gu + 8 * (size_t)D, 16 * rb, up, 8 * rb, 8 * rb, (size_t)I / 8, cudaMemcpyDeviceToDevice));
  return V_OK;
}

static vstatus swiglu_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what) {
  const int B = c->batch, D = c->d[0], I = c->d[1];
  uint16_t *x, *gu, *act, *y;
  float *ws;
  VTRY(to_bf16(A, &x, b[0], l->b[0].n, "x_bf16"));
  VTRY(interleave(A, &gu, b[1], b[2], I, D));
  VTRY(tmp_alloc(A, (void **)&act, (size_t)B * I * 2, "act_bf16"));
  VTRY(tmp_alloc(A, (void **)&y, (size_t)B * D * 2, "y_bf16"));
  VTRY(tmp_alloc(A, (void **)&ws, WS_BYTES, "splitk_scratch"));
  lat_gemm_args a = dense_args(gu, x, D, act, I, 2 * I, D, B, LAT_EP_SWIGLU, ws);
  const int v1 = latency_table_gemm(B, 2 * I, D, LAT_EP_SWIGLU, false);
  VTRY(gemm(&a, v1, NULL, "swiglu gate|up"));
  a = dense_args((const uint16_t *)b[3], act, I, y, D, D, I, B, LAT_EP_BF16, ws);
  const int v2 = latency_table_gemm(B, D, I, LAT_EP_BF16, false);
  VTRY(gemm(&a, v2, NULL, "swiglu down"));
  VTRY(to_f32(b[4], y, l->b[4].n));
  snprintf(what, 96, "lat_gemm %s gate|up+silu, %s down -> bf16", lat_gemm_variant_name(v1), lat_gemm_variant_name(v2));
  return V_OK;
}
VARIANT(swiglu_body, "table")

#define GR_E 4 /* pseudo experts of the grouped variant: 1 and 3 real, 0 and 2 NaN weights */

static vstatus swiglu_grouped_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what) {
  const int B = c->batch, D = c->d[0], I = c->d[1];
  uint16_t *x, *gu, *nan_w, *hbuf, *y;
  VTRY(to_bf16(A, &x, b[0], l->b[0].n, "x_bf16"));
  VTRY(interleave(A, &gu, b[1], b[2], I, D));
  VTRY(const_bf16(A, &nan_w, (int64_t)2 * I * D, 0xFFFF, "nan_expert")); /* [2I, D] covers [D, I] too */
  const uint16_t *h_gu[GR_E] = {nan_w, gu, nan_w, gu};
  const uint16_t *h_dn[GR_E] = {nan_w, (const uint16_t *)b[3], nan_w, (const uint16_t *)b[3]};
  const uint16_t **d_gu, **d_dn;
  VTRY(tmp_alloc(A, (void **)&d_gu, sizeof h_gu, "expert_gu_ptrs"));
  VTRY(tmp_alloc(A, (void **)&d_dn, sizeof h_dn, "expert_down_ptrs"));
  CUDA_CHECK(cudaMemcpy(d_gu, h_gu, sizeof h_gu, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_dn, h_dn, sizeof h_dn, cudaMemcpyHostToDevice));
  int32_t h_idx[MAX_B];
  for (int t = 0; t < B; t++) h_idx[t] = t % 2 ? 3 : 1;
  int32_t *idx, *meta, *perm;
  VTRY(upload_ints(A, &idx, h_idx, B, "idx"));
  VTRY(tmp_alloc(A, (void **)&meta, (size_t)(1 + 3 * GR_E) * sizeof(int32_t), "n_act+act_e/off/cnt"));
  VTRY(tmp_alloc(A, (void **)&perm, (size_t)2 * B * sizeof(int32_t), "perm_tok+perm_pair"));
  int32_t *n_act = meta, *act_e = meta + 1, *act_off = act_e + GR_E, *act_cnt = act_off + GR_E;
  int32_t *perm_tok = perm, *perm_pair = perm + B;
  VTRY(lat_moe_bucket(idx, B, 1, GR_E, n_act, act_e, act_off, act_cnt, perm_tok, perm_pair, 0));
  VTRY(tmp_alloc(A, (void **)&hbuf, (size_t)B * I * 2, "hbuf"));
  VTRY(tmp_alloc(A, (void **)&y, (size_t)B * D * 2, "y_bf16"));
  const int zmax = GR_E < B ? GR_E : B;
  const int v = latency_table_gemm(B, 2 * I, D, LAT_EP_SWIGLU, true);
  lat_gemm_args a =
      lat_grouped_args(d_gu, x, D, hbuf, I, 2 * I, D, B, LAT_EP_SWIGLU, zmax, n_act, act_e, act_off, act_cnt);
  a.xmap = perm_tok;
  VTRY(gemm(&a, v, NULL, "swiglu grouped gate|up"));
  a = lat_grouped_args(d_dn, hbuf, I, y, D, D, I, B, LAT_EP_BF16, zmax, n_act, act_e, act_off, act_cnt);
  a.omap = perm_pair;
  VTRY(gemm(&a, v, NULL, "swiglu grouped down"));
  VTRY(to_f32(b[4], y, l->b[4].n));
  snprintf(what, 96, "lat_moe_bucket (experts 1,3 of 4); grouped lat_gemm %s gate|up+silu, down", lat_gemm_variant_name(v));
  return V_OK;
}
VARIANT(swiglu_grouped_body, "grouped")

/* ---------------- mla_absorbed: q_nope, q_pe, ckv, kpe, wkv_b, lens -> out ---------------- */

static vstatus mla_absorbed_supports(const vop_case *c) {
  VTRY(batch_ok(c));
  const int H = c->d[0], n = c->d[1], r = c->d[2], v = c->d[3], kl = c->d[4], L = c->d[5];
  if (H < 1 || v < 1 || L < 1) return VUNSUPPORTED("mla_absorbed: heads %d, v dim %d, ctx %d", H, v, L);
  if (n < 8 || n % 8 || r % 8)
    return VUNSUPPORTED("mla_absorbed: nope %d / rope %d not multiples of 8 (16-byte loads of q; the path "
                        "delegates such configs to cuda-ref)", n, r);
  if (!lat_mla_supported(kl, r))
    return VUNSUPPORTED("mla_absorbed: latent %d + rope %d outside lat_mla_attn (kv_lora <= 512, +rope <= 768, "
                        "multiples of 8)", kl, r);
  return V_OK;
}

static vstatus mla_absorbed_mma_supports(const vop_case *c) {
  VTRY(mla_absorbed_supports(c));
  if (!lat_mla_mma_supported(c->d[0], c->d[4], c->d[2]))
    return VUNSUPPORTED("mla_absorbed: %d heads, latent %d + rope %d outside lat_mla_attn_mma (kv_lora a multiple of "
                        "64, kv_lora + rope a multiple of 16)", c->d[0], c->d[4], c->d[2]);
  return V_OK;
}

/* Which attention kernel mla_absorbed_seq runs: the three the path's rules pick between. */
typedef enum { ATT_SPLIT, ATT_MMA, ATT_GEMM } att_kind;

/* The path's attention sequence with one attention kernel: ATT_SPLIT v1_split (lat_mla_attn), ATT_MMA v3_mma
 * (lat_mla_attn_mma), ATT_GEMM v2_gemm (lat_mla_attn_gemm over the bucket lat_mla_gemm_ncap picks). For v2_gemm
 * each slot's cache holds the bucket of the ctx (rows past the ctx zero, as the path's cache before a store):
 * the bucket arithmetic and the mask past each row's position are what this variant tests, so a ctx past 4096
 * that is not a multiple of it and rows shorter than the bucket (the generator's 1-key row) matter. */
static vstatus mla_absorbed_seq(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what,
                                att_kind kind) {
  const bool mma = kind == ATT_MMA;
  const int B = c->batch, H = c->d[0], n = c->d[1], r = c->d[2], v = c->d[3], kl = c->d[4], L = c->d[5];
  const int dk = n + r, W = kl + r;
  int32_t h_sp[2 * MAX_B];
  VTRY(host_ints(h_sp + B, b[5], B));
  int max_keys = 1;
  for (int i = 0; i < B; i++) { /* slot b, position lens[b]-1: keys [0, pos] of slot b, as a decode step */
    const int len = h_sp[B + i];
    if (len < 1 || len > L) return VERR("latency_variants.cu: mla_absorbed: field 'lens[%d]': %d outside [1, %d]", i, len, L);
    h_sp[i] = i;
    h_sp[B + i] = len - 1;
    if (len > max_keys) max_keys = len;
  }
  int32_t *sp;
  VTRY(upload_ints(A, &sp, h_sp, 2 * B, "slot_pos"));
  const int hb = mma ? lat_mla_mma_heads(B, H, max_keys, g_sms) : 32;
  const int S = mma ? lat_mla_mma_splits(B, H, max_keys, g_sms, hb) : lat_mla_splits(B, H, max_keys, g_sms);
  uint16_t *wukt, *q, *cache, *olat, *attn;
  float *qlat, *pm, *pl, *pacc, *ws;
  VTRY(tmp_alloc(A, (void **)&wukt, (size_t)H * kl * n * 2, "wukt"));
  VTRY(lat_transpose_wuk(wukt, (const uint16_t *)b[4], H, n, v, kl, 0));
  VTRY(tmp_alloc(A, (void **)&q, (size_t)B * H * dk * 2, "q_bf16"));
  LAUNCH(mla_q_kernel, (int64_t)B * H * dk, q, (const float *)b[0], (const float *)b[1], (int64_t)B * H, n, r);
  /* rows per slot: the ctx, or for v2_gemm the ctx's bucket (its cuBLAS GEMMs read every key of the bucket);
   * never fewer than the ctx, whatever lat_mla_gemm_ncap (under test) answers */
  int Lc = kind == ATT_GEMM ? lat_mla_gemm_ncap(L, INT_MAX) : L;
  if (Lc < L) Lc = L;
  VTRY(tmp_alloc(A, (void **)&cache, (size_t)B * Lc * W * 2, "latent_cache"));
  if (Lc == L) {
    LAUNCH(mla_cache_kernel, (int64_t)B * L * W, cache, (const float *)b[2], (const float *)b[3], (int64_t)B * L, kl,
           r);
  } else {
    CUDA_CHECK(cudaMemset(cache, 0, (size_t)B * Lc * W * 2));
    for (int s = 0; s < B; s++)
      LAUNCH(mla_cache_kernel, (int64_t)L * W, cache + (size_t)s * Lc * W, (const float *)b[2] + (size_t)s * L * kl,
             (const float *)b[3] + (size_t)s * L * r, (int64_t)L, kl, r);
  }
  VTRY(tmp_alloc(A, (void **)&qlat, (size_t)B * H * kl * sizeof(float), "q_lat"));
  VTRY(tmp_alloc(A, (void **)&pm, (size_t)B * H * S * sizeof(float), "pm"));
  VTRY(tmp_alloc(A, (void **)&pl, (size_t)B * H * S * sizeof(float), "pl"));
  VTRY(tmp_alloc(A, (void **)&pacc, (size_t)B * H * S * kl * sizeof(float), "pacc"));
  VTRY(tmp_alloc(A, (void **)&olat, (size_t)B * H * kl * 2, "o_lat"));
  VTRY(tmp_alloc(A, (void **)&attn, (size_t)B * H * v * 2, "attn_bf16"));
  VTRY(tmp_alloc(A, (void **)&ws, WS_BYTES, "splitk_scratch"));
  /* q_lat[t][h] = W_UK_h^T q_nope[t][h] (fp32), batched over heads */
  lat_gemm_args a = dense_args(wukt, q, H * dk, qlat, H * kl, kl, n, B, LAT_EP_F32, ws);
  a.Z = H;
  a.w_bstride = (long long)kl * n;
  a.x_bstride = dk;
  a.o_bstride = kl;
  const int va = latency_table_gemm(B, kl, n, LAT_EP_F32, false);
  VTRY(gemm(&a, va, NULL, "mla_absorbed W_UK"));
  int ncap = 0; /* v2_gemm: keys of the step's bucket */
  if (kind == ATT_GEMM) {
    ncap = lat_mla_gemm_ncap(max_keys, Lc);
    lat_mla_gemm_ws w; /* the path's workspace (lt_alloc_gemm_attention) sized for B rows at this bucket */
    memset(&w, 0, sizeof w);
    w.rows = B;
    w.score_elems = (size_t)B * 2 * H * ncap;
    VTRY(tmp_alloc(A, (void **)&w.qb, (size_t)B * 2 * H * W * 2, "v2_gemm queries"));
    VTRY(tmp_alloc(A, (void **)&w.scores, w.score_elems * sizeof(float), "v2_gemm scores"));
    VTRY(tmp_alloc(A, (void **)&w.P, w.score_elems / 2 * 2, "v2_gemm probabilities"));
    VTRY(tmp_alloc(A, (void **)&w.kp, (size_t)B * sizeof(void *), "v2_gemm key pointers"));
    VTRY(tmp_alloc(A, (void **)&w.qp, (size_t)B * sizeof(void *), "v2_gemm query pointers"));
    VTRY(tmp_alloc(A, (void **)&w.pp, (size_t)B * sizeof(void *), "v2_gemm P pointers"));
    VTRY(tmp_alloc(A, (void **)&w.sp, (size_t)B * sizeof(void *), "v2_gemm score pointers"));
    VTRY(tmp_alloc(A, (void **)&w.op, (size_t)B * sizeof(void *), "v2_gemm output pointers"));
    VTRY(lat_mla_attn_gemm(&w, olat, qlat, q, H * dk, dk, n, cache, sp, sp + B, B, H, kl, r, Lc, ncap,
                           (float)c->f[0], g_blas, 0));
  } else if (mma) {
    VTRY(lat_mla_mma_init(H, kl, r));
    VTRY(lat_mla_attn_mma(pm, pl, pacc, qlat, q, H * dk, dk, n, cache, sp, sp + B, B, H, kl, r, L, S, hb,
                          (float)c->f[0], NULL, 0));
  } else {
    VTRY(lat_mla_init(kl, r));
    VTRY(lat_mla_attn(pm, pl, pacc, qlat, q, H * dk, dk, n, cache, sp, sp + B, B, H, kl, r, L, S, (float)c->f[0], 0));
  }
  if (kind != ATT_GEMM) VTRY(lat_mla_combine(olat, pm, pl, pacc, B, H, kl, S, 0));
  /* out[t][h] = W_UV_h o_lat[t][h], batched over heads (bf16, as the path) */
  a = dense_args((const uint16_t *)b[4] + (size_t)n * kl, olat, H * kl, attn, H * v, v, kl, B, LAT_EP_BF16, ws);
  a.Z = H;
  a.w_bstride = (long long)(n + v) * kl;
  a.x_bstride = kl;
  a.o_bstride = v;
  const int vb = latency_table_gemm(B, v, kl, LAT_EP_BF16, false);
  VTRY(gemm(&a, vb, NULL, "mla_absorbed W_UV"));
  VTRY(to_f32(b[6], attn, l->b[6].n));
  if (kind == ATT_GEMM)
    snprintf(what, 96, "lat_gemm %s W_UK; lat_mla_attn_gemm keys=%d of %d rows; %s W_UV", lat_gemm_variant_name(va),
             ncap, Lc, lat_gemm_variant_name(vb));
  else if (mma)
    snprintf(what, 96, "lat_gemm %s W_UK; lat_mla_attn_mma splits=%d; lat_mla_combine; %s W_UV",
             lat_gemm_variant_name(va), S, lat_gemm_variant_name(vb));
  else
    snprintf(what, 96, "lat_gemm %s W_UK; lat_mla_attn splits=%d hg=%d; lat_mla_combine; %s W_UV",
             lat_gemm_variant_name(va), S, lat_mla_head_group(H), lat_gemm_variant_name(vb));
  return V_OK;
}
static vstatus mla_absorbed_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what) {
  return mla_absorbed_seq(c, l, b, A, what, ATT_SPLIT);
}
static vstatus mla_absorbed_mma_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what) {
  return mla_absorbed_seq(c, l, b, A, what, ATT_MMA);
}
static vstatus mla_absorbed_gemm_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what) {
  return mla_absorbed_seq(c, l, b, A, what, ATT_GEMM);
}
VARIANT(mla_absorbed_body, "v1_split")
VARIANT(mla_absorbed_mma_body, "v3_mma")
VARIANT(mla_absorbed_gemm_body, "v2_gemm")

/* ---------------- mla_absorbed_dcp: mla_absorbed's buffers + slot, N simulated ranks ---------------- */

/* Every rank's latent cache under DCP, lc [N][B][lctx][kl + r] bf16: row j of slot s on rank k is position
 * j*N + k of ckv/kpe (lat_mla_prep_dcp's owned-position layout); a row past the ctx (p >= L) is zero, as
 * the path's cache before a store. */
static __global__ void mla_cache_dcp_kernel(uint16_t *lc, const float *ckv, const float *kpe, int B, int L, int lctx,
                                            int N, int kl, int r) {
  const int W = kl + r;
  const int64_t total = (int64_t)N * B * lctx * W;
  GRID_STRIDE(i, total) {
    const int e = (int)(i % W);
    int64_t rest = i / W;
    const int j = (int)(rest % lctx);
    rest /= lctx;
    const int s = (int)(rest % B), k = (int)(rest / B), p = j * N + k;
    const int64_t sp = (int64_t)s * L + p;
    lc[i] = p >= L ? (uint16_t)0 : f2bf(e < kl ? ckv[sp * kl + e] : kpe[sp * r + (e - kl)]);
  }
}

static vstatus mla_dcp_ranks_ok(const vop_case *c) {
  const int N = c->d[6];
  if (N < 1 || N > LAT_DCP_MAX_RANKS || c->d[0] % N)
    return VUNSUPPORTED("mla_absorbed_dcp: %d ranks (1..%d) over %d heads (a multiple of the ranks: TP shards the "
                        "heads)", N, LAT_DCP_MAX_RANKS, c->d[0]);
  return V_OK;
}
static vstatus mla_dcp_supports(const vop_case *c) {
  VTRY(mla_absorbed_supports(c));
  return mla_dcp_ranks_ok(c);
}
static vstatus mla_dcp_mma_supports(const vop_case *c) {
  VTRY(mla_absorbed_mma_supports(c));
  return mla_dcp_ranks_ok(c);
}

/* The path's DCP attention (latency_step.cu dcp_attention) with N ranks simulated one after another
 * on this GPU, as tests/gpu/test_latency_dcp.c: each rank absorbs its H = Ha/N heads' queries (W_UK)
 * and packs them (lat_dcp_pack_q) into its block of the gathered buffer (the all-gather); place_q puts
 * all Ha heads in order; per rank lat_dcp_lpos, the split-KV attention of all heads over its own
 * positions (mma: v3_mma, else v1_split; split count over ceil(max_keys / N) keys, as lt_run_core) and
 * lat_dcp_merge_local into its block of the gathered partials; then per rank lat_dcp_combine of its
 * heads and W_UV of its heads into its columns of out. */
static vstatus mla_dcp_seq(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what, bool mma) {
  const int B = c->batch, Ha = c->d[0], n = c->d[1], r = c->d[2], v = c->d[3], kl = c->d[4], L = c->d[5];
  const int N = c->d[6], H = Ha / N, dk = n + r, W = kl + r, lctx = (L + N - 1) / N;
  int32_t h_sp[2 * MAX_B];
  VTRY(host_ints(h_sp, b[7], B));
  VTRY(host_ints(h_sp + B, b[5], B));
  int max_keys = 1;
  for (int i = 0; i < B; i++) { /* row i: slot[i], position lens[i]-1 (keys [0, pos] of its slot) */
    const int len = h_sp[B + i];
    if (h_sp[i] < 0 || h_sp[i] >= B)
      return VERR("latency_variants.cu: mla_absorbed_dcp: field 'slot[%d]': %d outside [0, %d)", i, h_sp[i], B);
    if (len < 1 || len > L)
      return VERR("latency_variants.cu: mla_absorbed_dcp: field 'lens[%d]': %d outside [1, %d]", i, len, L);
    h_sp[B + i] = len - 1;
    if (len > max_keys) max_keys = len;
  }
  int32_t *sp, *lp;
  VTRY(upload_ints(A, &sp, h_sp, 2 * B, "slot_pos"));
  const int keys = (max_keys + N - 1) / N;
  const int hb = mma ? lat_mla_mma_heads(B, Ha, keys, g_sms) : 32;
  const int S = mma ? lat_mla_mma_splits(B, Ha, keys, g_sms, hb) : lat_mla_splits(B, Ha, keys, g_sms);
  const size_t qw = (size_t)B * H * W, pw = (size_t)B * Ha * (kl + 1), lw = (size_t)B * lctx * W;
  uint16_t *wukt, *q, *lc, *qrot_all, *olat, *attn;
  float *qlat, *gath, *qlat_all, *pm, *pl, *pacc, *parts, *ws;
  VTRY(tmp_alloc(A, (void **)&wukt, (size_t)Ha * kl * n * 2, "wukt"));
  VTRY(lat_transpose_wuk(wukt, (const uint16_t *)b[4], Ha, n, v, kl, 0));
  VTRY(tmp_alloc(A, (void **)&q, (size_t)B * Ha * dk * 2, "q_bf16"));
  LAUNCH(mla_q_kernel, (int64_t)B * Ha * dk, q, (const float *)b[0], (const float *)b[1], (int64_t)B * Ha, n, r);
  VTRY(tmp_alloc(A, (void **)&lc, lw * N * 2, "latent_cache_ranks"));
  LAUNCH(mla_cache_dcp_kernel, (int64_t)lw * N, lc, (const float *)b[2], (const float *)b[3], B, L, lctx, N, kl, r);
  VTRY(tmp_alloc(A, (void **)&qlat, (size_t)B * H * kl * sizeof(float), "q_lat_rank"));
  VTRY(tmp_alloc(A, (void **)&gath, qw * N * sizeof(float), "q_gathered"));
  VTRY(tmp_alloc(A, (void **)&qlat_all, (size_t)B * Ha * kl * sizeof(float), "q_lat_all"));
  VTRY(tmp_alloc(A, (void **)&qrot_all, (size_t)B * Ha * r * 2, "q_rot_all"));
  VTRY(tmp_alloc(A, (void **)&lp, (size_t)N * B * sizeof(int32_t), "lpos"));
  VTRY(tmp_alloc(A, (void **)&pm, (size_t)B * Ha * S * sizeof(float), "pm"));
  VTRY(tmp_alloc(A, (void **)&pl, (size_t)B * Ha * S * sizeof(float), "pl"));
  VTRY(tmp_alloc(A, (void **)&pacc, (size_t)B * Ha * S * kl * sizeof(float), "pacc"));
  VTRY(tmp_alloc(A, (void **)&parts, pw * N * sizeof(float), "parts_gathered"));
  VTRY(tmp_alloc(A, (void **)&olat, (size_t)B * H * kl * 2, "o_lat_rank"));
  VTRY(tmp_alloc(A, (void **)&attn, (size_t)B * Ha * v * 2, "attn_bf16"));
  VTRY(tmp_alloc(A, (void **)&ws, WS_BYTES, "splitk_scratch"));
  const int va = latency_table_gemm(B, kl, n, LAT_EP_F32, false), vb = latency_table_gemm(B, v, kl, LAT_EP_BF16, false);
  for (int k = 0; k < N; k++) { /* rank k: q_lat of its heads = W_UK_h^T q_nope (fp32), packed with q_rot */
    lat_gemm_args a = dense_args(wukt + (size_t)k * H * kl * n, q + (size_t)k * H * dk, Ha * dk, qlat, H * kl, kl, n,
                                 B, LAT_EP_F32, ws);
    a.Z = H;
    a.w_bstride = (long long)kl * n;
    a.x_bstride = dk;
    a.o_bstride = kl;
    VTRY(gemm(&a, va, NULL, "mla_absorbed_dcp W_UK"));
    VTRY(lat_dcp_pack_q(gath + qw * k, qlat, q + (size_t)k * H * dk, Ha * dk, dk, n, B, H, kl, r, 0));
  }
  VTRY(lat_dcp_place_q(qlat_all, qrot_all, gath, N, B, H, kl, r, 0));
  if (mma) VTRY(lat_mla_mma_init(Ha, kl, r));
  else VTRY(lat_mla_init(kl, r));
  for (int k = 0; k < N; k++) { /* rank k: all heads over its own positions, merged to o | lse */
    VTRY(lat_dcp_lpos(lp + (size_t)k * B, sp + B, B, N, k, 0));
    const uint16_t *lck = lc + lw * k;
    if (mma)
      VTRY(lat_mla_attn_mma(pm, pl, pacc, qlat_all, qrot_all, Ha * r, r, 0, lck, sp, lp + (size_t)k * B, B, Ha, kl, r,
                            lctx, S, hb, (float)c->f[0], NULL, 0));
    else
      VTRY(lat_mla_attn(pm, pl, pacc, qlat_all, qrot_all, Ha * r, r, 0, lck, sp, lp + (size_t)k * B, B, Ha, kl, r, lctx,
                        S, (float)c->f[0], 0));
    VTRY(lat_dcp_merge_local(parts + pw * k, pm, pl, pacc, B, Ha, kl, S, 0));
  }
  for (int k = 0; k < N; k++) { /* rank k: its heads over the N parts, then W_UV of its heads (bf16, as the path) */
    VTRY(lat_dcp_combine(olat, parts, N, B, Ha, H, k * H, kl, 0));
    lat_gemm_args a = dense_args((const uint16_t *)b[4] + ((size_t)k * H * (n + v) + n) * kl, olat, H * kl,
                                 attn + (size_t)k * H * v, Ha * v, v, kl, B, LAT_EP_BF16, ws);
    a.Z = H;
    a.w_bstride = (long long)(n + v) * kl;
    a.x_bstride = kl;
    a.o_bstride = v;
    VTRY(gemm(&a, vb, NULL, "mla_absorbed_dcp W_UV"));
  }
  VTRY(to_f32(b[6], attn, l->b[6].n));
  snprintf(what, 96, "dcp=%d: %s W_UK; pack/place_q; lpos; %s splits=%d; merge; combine; %s W_UV", N,
           lat_gemm_variant_name(va), mma ? "attn_mma" : "attn", S, lat_gemm_variant_name(vb));
  return V_OK;
}
static vstatus mla_dcp_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what) {
  return mla_dcp_seq(c, l, b, A, what, false);
}
static vstatus mla_dcp_mma_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what) {
  return mla_dcp_seq(c, l, b, A, what, true);
}
VARIANT(mla_dcp_body, "v1_split")
VARIANT(mla_dcp_mma_body, "v3_mma")

/* ---------------- lse_combine: o_part, lse -> out ---------------- */

static vstatus lse_combine_supports(const vop_case *c) {
  VTRY(batch_ok(c));
  if (c->d[0] < 1 || c->d[1] < 1) return VUNSUPPORTED("lse_combine: heads %d, v dim %d", c->d[0], c->d[1]);
  if (c->d[2] < 1 || c->d[2] > LAT_MLA_MAX_SPLITS)
    return VUNSUPPORTED("lse_combine: %d splits outside lat_mla_combine's 1..%d", c->d[2], LAT_MLA_MAX_SPLITS);
  if (c->d[1] % 8)
    return VUNSUPPORTED(
        "lse_combine: v dim %d: lat_mla_combine reads 8 columns per thread (the path's latent width "
        "is a multiple of 8)",
        c->d[1]);
  return V_OK;
}
static vstatus lse_combine_body(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what) {
  const int B = c->batch, H = c->d[0], vd = c->d[1], S = c->d[2];
  float *ones;
  uint16_t *o;
  VTRY(tmp_alloc(A, (void **)&ones, (size_t)l->b[1].n * sizeof(float), "pl_ones"));
  LAUNCH(fill_f32_kernel, l->b[1].n, ones, 1.0f, (int64_t)l->b[1].n);
  VTRY(tmp_alloc(A, (void **)&o, (size_t)l->b[2].n * 2, "out_bf16"));
  VTRY(lat_mla_combine(o, (const float *)b[1], ones, (const float *)b[0], B, H, vd, S, 0));
  VTRY(to_f32(b[2], o, l->b[2].n));
  snprintf(what, 96, "lat_mla_combine(pm = lse, pl = 1, pacc = o_part) S=%d -> bf16", S);
  return V_OK;
}
VARIANT(lse_combine_body, "v1")

/* ---------------- registration ---------------- */

/* Declared per entry after supports/run: f32_act, bf16_inputs, f32_outputs, nondeterministic. Every
 * latency kernel promises bitwise reruns (NULL): split-K partials are summed in split order by a
 * second kernel, the router's and buckets' atomics count integers (order-free), attention splits are
 * merged in split order; none uses float atomics. f32_outputs: linear's y (buffer 2, the fp32
 * epilogue LAT_EP_F32) and add_rmsnorm's h (buffer 3, the fp32 residual stream) are never rounded to
 * bf16, so they are judged at the fp32 bound on their bf16-grid inputs. */
#define LINEAR_Y_F32 (1u << 2)
#define LINEAR_ENTRY(num, vname, what)                                                                       \
  {"linear", vname, "lat_gemm " vname ": " what ", bf16(x), fp32 epilogue", linear_v##num##_supports, \
   linear_v##num##_body_run, false, 0, LINEAR_Y_F32}

static const entry k_entries[] = {
#define LINEAR_ROW(num, id, name, family, max_tokens, what) LINEAR_ENTRY(num, #name, what),
    LAT_GEMM_VARIANTS(LINEAR_ROW)
#undef LINEAR_ROW
    {"linear", "table", "lat_gemm with the variant the path's per-bucket table picks for this batch and shape",
     linear_shape_ok, linear_table_body_run, false, 0, LINEAR_Y_F32},
    {"add_rmsnorm", "v1", "lat_add_rmsnorm: fp32 residual (= res) += bf16(x), bf16 norm", add_rmsnorm_supports,
     add_rmsnorm_body_run, false, 0, 1u << 3 /* h */},
    {"rmsnorm", "v1_add_rmsnorm", "lat_add_rmsnorm with a zero addend: norm of the fp32 stream, bf16 out",
     rmsnorm_supports, rmsnorm_body_run},
    {"embed", "v1_embed_norm", "lat_embed_norm: fp32 embedding rows (its fused norm to a temporary)", embed_supports,
     embed_body_run},
    /* fp32 in the path: the router GEMM's fp32 logits; the fp32 residual and weights of the combine
     * (its bf16 expert outputs y = 0 and shared row = 2 on the bf16 grid) */
    {"router", "v1", "lat_router_topk on fp32 logits: sigmoid, bias, group-limited top-k, normalize, scale",
     router_supports, router_body_run, true, 0},
    {"moe_combine", "v1", "lat_moe_combine_norm: resid + sum w*bf16(y) + bf16(shared) (norm to a temporary)",
     moe_combine_supports, moe_combine_body_run, true, 1u << 0 | 1u << 2},
    {"swiglu", "table", "lat_gemm SwiGLU epilogue on interleaved gate/up, then down (the table's variants)",
     swiglu_supports, swiglu_body_run},
    {"swiglu", "grouped", "lat_moe_bucket + grouped lat_gemm gate/up (SwiGLU) and down, as moe() (top-1, 4 experts)",
     swiglu_supports, swiglu_grouped_body_run},
    {"mla_absorbed", "v1_split", "W_UK lat_gemm, lat_mla_attn split-KV over a latent cache, lat_mla_combine, W_UV",
     mla_absorbed_supports, mla_absorbed_body_run},
    {"mla_absorbed", "v3_mma",
     "W_UK lat_gemm, lat_mla_attn_mma (heads as the M side of mma.sync, hi/lo query), lat_mla_combine, W_UV",
     mla_absorbed_mma_supports, mla_absorbed_mma_body_run},
    {"mla_absorbed", "v2_gemm",
     "W_UK lat_gemm, lat_mla_attn_gemm (cuBLAS QK^T over the key bucket, masked softmax, PV; hi/lo query), W_UV",
     mla_absorbed_supports, mla_absorbed_gemm_body_run},
    {"mla_absorbed_dcp", "v1_split",
     "DCP over N simulated ranks: per rank W_UK, lat_dcp_pack_q, lat_mla_attn over its positions, lat_dcp_merge_local; "
     "lat_dcp_place_q, lat_dcp_combine, W_UV",
     mla_dcp_supports, mla_dcp_body_run},
    {"mla_absorbed_dcp", "v3_mma", "as v1_split with lat_mla_attn_mma over each rank's positions",
     mla_dcp_mma_supports, mla_dcp_mma_body_run},
    {"lse_combine", "v1", "lat_mla_combine with pm = lse, pl = 1 (log-sum-exp merge), bf16 out", lse_combine_supports,
     lse_combine_body_run},
};

#define N_ENTRIES (sizeof k_entries / sizeof k_entries[0])

extern "C" void latency_register_variants(void) {
  static vop_variant vars[N_ENTRIES];
  register_entries(k_entries, N_ENTRIES, vars);
}
