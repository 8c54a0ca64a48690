/* Plain CUDA kernels of the cuda-ref path (what an unoptimized engine runs): embedding,
 * RMSNorm, cuBLAS linear, RoPE, expanded KV-cache store, causal attention (one block per
 * (token, head), two passes over the keys), residual add, SiLU*mul, MoE router (one block
 * per token), MoE gather / weighted scatter-add. One variant each ("ref"); no fusion.
 * Launchers are C-callable (cuda_ref_kernels.h) so the numerics suite can call them. */
#include "reference/cuda/cuda_common.h"
#include "reference/cuda/cuda_ref_kernels.h"
#include "reference/cuda/cuda_device.h"
#include "reference/cuda/cuda_pdl.h"
#include "model/router_rule.h"

#define FULL_MASK 0xffffffffu


static __device__ float block_max(float v, float *red) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
  __syncthreads();
  if (l == 0) red[w] = v;
  __syncthreads();
  if (w == 0) {
    float s = l < nw ? red[l] : -INFINITY;
    for (int o = 16; o > 0; o >>= 1) s = fmaxf(s, __shfl_xor_sync(FULL_MASK, s, o));
    if (l == 0) red[0] = s;
  }
  __syncthreads();
  return red[0];
}

/* Grid size for a grid-stride loop over n elements with 256-thread blocks. */
static unsigned grid_for(size_t n) {
  size_t b = (n + 255) / 256;
  if (b < 1) b = 1;
  if (b > 65536) b = 65536;
  return (unsigned)b;
}

/* ---- embedding ---- */

static __global__ void embed_kernel(float *x, const int32_t *tok, const uint16_t *emb, int D) {
  const size_t r = blockIdx.x;
  const uint16_t *e = emb + (size_t)tok[r] * (size_t)D;
  for (int i = threadIdx.x; i < D; i += blockDim.x) x[r * D + i] = bf2f(e[i]);
}

extern "C" vstatus curef_embed(float *x, const int32_t *tok, const uint16_t *emb, int rows, int D,
                               cudaStream_t stream) {
  if (rows <= 0) return V_OK;
  embed_kernel<<<rows, 256, 0, stream>>>(x, tok, emb, D);
  CUDA_CHECK_LAUNCH();
  return V_OK;
}

/* ---- RMSNorm ---- */

static __device__ __forceinline__ float load_act(const float *p, size_t i) { return p[i]; }
static __device__ __forceinline__ float load_act(const uint16_t *p, size_t i) { return bf2f(p[i]); }

template <typename T>
static __global__ void rmsnorm_kernel(uint16_t *out, const T *x, int x_stride, const uint16_t *w, int n,
                                      float eps) {
  __shared__ float red[32];
  const T *xr = x + (size_t)blockIdx.x * (size_t)x_stride;
  uint16_t *o = out + (size_t)blockIdx.x * (size_t)n;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    float v = load_act(xr, i);
    ss += v * v;
  }
  ss = block_sum(ss, red);
  const float inv = 1.0f / sqrtf(ss / (float)n + eps);
  for (int i = threadIdx.x; i < n; i += blockDim.x) o[i] = f2bf(bf2f(w[i]) * (load_act(xr, i) * inv));
}

extern "C" vstatus curef_rmsnorm_f32(uint16_t *out, const float *x, int x_stride, const uint16_t *w, int rows,
                                     int n, float eps, cudaStream_t stream) {
  if (rows <= 0) return V_OK;
  rmsnorm_kernel<float><<<rows, 256, 0, stream>>>(out, x, x_stride, w, n, eps);
  CUDA_CHECK_LAUNCH();
  return V_OK;
}

extern "C" vstatus curef_rmsnorm_bf16(uint16_t *out, const uint16_t *x, int x_stride, const uint16_t *w,
                                      int rows, int n, float eps, cudaStream_t stream) {
  if (rows <= 0) return V_OK;
  rmsnorm_kernel<uint16_t><<<rows, 256, 0, stream>>>(out, x, x_stride, w, n, eps);
  CUDA_CHECK_LAUNCH();
  return V_OK;
}

/* ---- linear (cuBLAS) ---- */

extern "C" vstatus curef_linear(cublasHandle_t h, void *y, int y_f32, const uint16_t *x, const uint16_t *w,
                                int rows, int in, int out) {
  if (rows <= 0) return V_OK;
  const float alpha = 1.0f, beta = 0.0f;
  /* Row-major y[rows,out] = x[rows,in] W^T is column-major y^T[out,rows] = op(W)[out,in] x^T[in,rows]
   * with W seen column-major as [in,out] (lda = in) and op = transpose. */
  CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &alpha, w, CUDA_R_16BF, in, x,
                            CUDA_R_16BF, in, &beta, y, y_f32 ? CUDA_R_32F : CUDA_R_16BF, out, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
  return V_OK;
}

/* ---- RoPE ---- */

static __global__ void rope_kernel(uint16_t *x, int heads, int row_stride, int head_stride, int offset, int dim,
                                   const int32_t *pos, const float *inv_freq, float attn_factor, int interleave) {
  extern __shared__ float rope_sm[]; /* [dim] de-interleaved input */
  pdl_wait();                        /* the latency path launches it with PDL (reference/cuda/cuda_pdl.h) */
  pdl_trigger();
  const int r = blockIdx.x / heads, h = blockIdx.x % heads, hd = dim / 2;
  uint16_t *v = x + (size_t)r * (size_t)row_stride + (size_t)h * (size_t)head_stride + offset;
  for (int i = threadIdx.x; i < hd; i += blockDim.x) {
    if (interleave) {
      rope_sm[i] = bf2f(v[2 * i]);
      rope_sm[hd + i] = bf2f(v[2 * i + 1]);
    } else {
      rope_sm[i] = bf2f(v[i]);
      rope_sm[hd + i] = bf2f(v[hd + i]);
    }
  }
  __syncthreads();
  const float p = (float)pos[r];
  for (int i = threadIdx.x; i < hd; i += blockDim.x) {
    float o1, o2;
    rope_pair(rope_sm[i], rope_sm[hd + i], p, inv_freq[i], attn_factor, &o1, &o2);
    v[i] = f2bf(o1);
    v[hd + i] = f2bf(o2);
  }
}

extern "C" vstatus curef_rope(uint16_t *x, int rows, int heads, int row_stride, int head_stride, int offset,
                              int dim, const int32_t *pos, const float *inv_freq, float attn_factor, int interleave,
                              cudaStream_t stream) {
  if (rows <= 0 || heads <= 0 || dim <= 0) return V_OK;
  if (dim % 2) return VERR("curef_rope: dim %d must be even", dim);
  CUDA_CHECK(pdl_launch(rope_kernel, (unsigned)rows * (unsigned)heads, 64, (size_t)dim * sizeof(float), stream, x,
                        heads, row_stride, head_stride, offset, dim, pos, inv_freq, attn_factor, interleave));
  return V_OK;
}

/* ---- KV cache store ---- */

static __global__ void kv_store_kernel(uint16_t *kc, uint16_t *vc, const uint16_t *kv, const uint16_t *ckv,
                                       const int32_t *slot, const int32_t *pos, int H, int nope, int rope, int v,
                                       int kv_lora, int max_ctx) {
  const int r = blockIdx.x / H, h = blockIdx.x % H;
  const int dk = nope + rope;
  const size_t cell = ((size_t)slot[r] * (size_t)max_ctx + (size_t)pos[r]) * (size_t)H + (size_t)h;
  uint16_t *k = kc + cell * (size_t)dk;
  uint16_t *vv = vc + cell * (size_t)v;
  const uint16_t *src = kv + (size_t)r * (size_t)H * (size_t)(nope + v) + (size_t)h * (size_t)(nope + v);
  const uint16_t *krot = ckv + (size_t)r * (size_t)(kv_lora + rope) + kv_lora;
  for (int i = threadIdx.x; i < nope; i += blockDim.x) k[i] = src[i];
  for (int i = threadIdx.x; i < rope; i += blockDim.x) k[nope + i] = krot[i];
  for (int i = threadIdx.x; i < v; i += blockDim.x) vv[i] = src[nope + i];
}

extern "C" vstatus curef_kv_store(uint16_t *kcache, uint16_t *vcache, const uint16_t *kv, const uint16_t *ckv,
                                  const int32_t *slot, const int32_t *pos, int rows, int H, int nope, int rope,
                                  int v, int kv_lora, int max_ctx, cudaStream_t stream) {
  if (rows <= 0) return V_OK;
  kv_store_kernel<<<(unsigned)rows * (unsigned)H, 128, 0, stream>>>(kcache, vcache, kv, ckv, slot, pos, H, nope,
                                                                    rope, v, kv_lora, max_ctx);
  CUDA_CHECK_LAUNCH();
  return V_OK;
}

/* ---- attention ---- */

#define ATT_THREADS 128

/* Shared memory: q [dk] fp32, p [ATT_THREADS] (one chunk of probabilities),
 * acc [dv] fp32, red [32]. Nothing scales with the context length. */
static __global__ void attention_kernel(uint16_t *out, const uint16_t *q, const uint16_t *kc, const uint16_t *vc,
                                        const int32_t *slot, const int32_t *pos, int H, int dk, int dv,
                                        int max_ctx, float scale) {
  extern __shared__ float att_sm[];
  float *qs = att_sm, *ps = qs + dk, *acc = ps + ATT_THREADS, *red = acc + dv;
  const int r = blockIdx.x / H, h = blockIdx.x % H;
  const int n_keys = pos[r] + 1;
  const size_t kstride = (size_t)H * (size_t)dk, vstride = (size_t)H * (size_t)dv;
  const uint16_t *kb = kc + (size_t)slot[r] * (size_t)max_ctx * kstride + (size_t)h * (size_t)dk;
  const uint16_t *vb = vc + (size_t)slot[r] * (size_t)max_ctx * vstride + (size_t)h * (size_t)dv;
  const uint16_t *qr = q + ((size_t)r * (size_t)H + (size_t)h) * (size_t)dk;
  for (int i = threadIdx.x; i < dk; i += blockDim.x) qs[i] = bf2f(qr[i]);
  for (int i = threadIdx.x; i < dv; i += blockDim.x) acc[i] = 0.0f;
  __syncthreads();

  /* pass 1: max score */
  float m = -INFINITY;
  for (int j = threadIdx.x; j < n_keys; j += blockDim.x) {
    const uint16_t *kj = kb + (size_t)j * kstride;
    float s = 0.0f;
    for (int i = 0; i < dk; i++) s += qs[i] * bf2f(kj[i]);
    m = fmaxf(m, s * scale);
  }
  m = block_max(m, red);

  /* pass 2: chunks of ATT_THREADS keys: p_j = exp(s_j - m), sum, acc += p_j V_j */
  float lsum = 0.0f;
  for (int j0 = 0; j0 < n_keys; j0 += ATT_THREADS) {
    const int j = j0 + threadIdx.x;
    float p = 0.0f;
    if (j < n_keys) {
      const uint16_t *kj = kb + (size_t)j * kstride;
      float s = 0.0f;
      for (int i = 0; i < dk; i++) s += qs[i] * bf2f(kj[i]);
      p = expf(s * scale - m);
    }
    lsum += p;
    ps[threadIdx.x] = p;
    __syncthreads();
    const int cnt = min(ATT_THREADS, n_keys - j0);
    for (int d = threadIdx.x; d < dv; d += blockDim.x) {
      float a = acc[d];
      for (int jj = 0; jj < cnt; jj++) a += ps[jj] * bf2f(vb[(size_t)(j0 + jj) * vstride + d]);
      acc[d] = a;
    }
    __syncthreads();
  }
  const float total = block_sum(lsum, red);
  uint16_t *o = out + ((size_t)r * (size_t)H + (size_t)h) * (size_t)dv;
  for (int d = threadIdx.x; d < dv; d += blockDim.x) o[d] = f2bf(acc[d] / total);
}

extern "C" vstatus curef_attention(uint16_t *out, const uint16_t *q, const uint16_t *kcache,
                                   const uint16_t *vcache, const int32_t *slot, const int32_t *pos, int rows, int H,
                                   int dk, int dv, int max_ctx, float scale, cudaStream_t stream) {
  if (rows <= 0) return V_OK;
  const size_t sm = (size_t)(dk + ATT_THREADS + dv + 32) * sizeof(float);
  if (sm > 48 * 1024) return VERR("curef_attention: head dims dk %d + dv %d too large for shared memory", dk, dv);
  attention_kernel<<<(unsigned)rows * (unsigned)H, ATT_THREADS, sm, stream>>>(out, q, kcache, vcache, slot, pos,
                                                                             H, dk, dv, max_ctx, scale);
  CUDA_CHECK_LAUNCH();
  return V_OK;
}

/* ---- elementwise ---- */

static __global__ void add_bf16_kernel(float *x, const uint16_t *y, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    x[i] += bf2f(y[i]);
}

extern "C" vstatus curef_add_bf16(float *x, const uint16_t *y, size_t n, cudaStream_t stream) {
  if (n == 0) return V_OK;
  add_bf16_kernel<<<grid_for(n), 256, 0, stream>>>(x, y, n);
  CUDA_CHECK_LAUNCH();
  return V_OK;
}

static __global__ void silu_mul_kernel(uint16_t *a, const uint16_t *g, const uint16_t *u, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const float z = bf2f(g[i]);
    a[i] = f2bf(z / (1.0f + expf(-z)) * bf2f(u[i]));
  }
}

extern "C" vstatus curef_silu_mul(uint16_t *a, const uint16_t *g, const uint16_t *u, size_t n,
                                  cudaStream_t stream) {
  if (n == 0) return V_OK;
  silu_mul_kernel<<<grid_for(n), 256, 0, stream>>>(a, g, u, n);
  CUDA_CHECK_LAUNCH();
  return V_OK;
}

/* ---- MoE router ---- */

/* Shared memory: scores [E], choice [E], group scores [G], flags [E + G] bytes. The
 * selection itself is serial in thread 0 (E is a few hundred): a reference, not a kernel
 * anyone should ship. Same order of operations as cpu_router_topk. */
static __global__ void router_kernel(int32_t *idx, float *wt, const uint16_t *x, const uint16_t *w,
                                     const float *bias, int D, int E, int K, int G, int TG, int norm,
                                     float rsf) {
  extern __shared__ float rt_sm[];
  float *scores = rt_sm, *choice = scores + E, *gsc = choice + E;
  unsigned char *taken = (unsigned char *)(gsc + G), *gkeep = taken + E;
  const int r = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  const uint16_t *xr = x + (size_t)r * (size_t)D;
  for (int e = warp; e < E; e += nw) {
    const uint16_t *we = w + (size_t)e * (size_t)D;
    float s = 0.0f;
    for (int i = lane; i < D; i += 32) s += bf2f(xr[i]) * bf2f(we[i]);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(FULL_MASK, s, o);
    if (lane == 0) {
      const float sc = 1.0f / (1.0f + expf(-s));
      scores[e] = sc;
      choice[e] = sc + (bias ? bias[e] : 0.0f);
    }
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  const int gs = E / G;
  if (TG < G) {
    for (int g = 0; g < G; g++) {
      gsc[g] = router_group_score(choice + g * gs, gs);
      gkeep[g] = 0;
      taken[g] = 0;
    }
    for (int k = 0; k < TG; k++) {
      int b = -1;
      for (int g = 0; g < G; g++)
        if (!taken[g] && (b < 0 || gsc[g] > gsc[b])) b = g;
      taken[b] = 1;
      gkeep[b] = 1;
    }
    for (int e = 0; e < G * gs; e++)
      if (!gkeep[e / gs]) choice[e] = 0.0f; /* HF masked_fill(..., 0.0) */
  }
  for (int e = 0; e < E; e++) taken[e] = 0;
  int32_t *ir = idx + (size_t)r * K;
  float *wr = wt + (size_t)r * K;
  float sum = 0.0f;
  for (int k = 0; k < K; k++) {
    int b = -1;
    for (int e = 0; e < E; e++)
      if (!taken[e] && (b < 0 || choice[e] > choice[b])) b = e;
    taken[b] = 1;
    ir[k] = b;
    wr[k] = scores[b];
    sum += wr[k];
  }
  if (norm) {
    const float den = sum + 1e-20f;
    for (int k = 0; k < K; k++) wr[k] /= den;
  }
  for (int k = 0; k < K; k++) wr[k] *= rsf;
}

extern "C" vstatus curef_router(int32_t *idx, float *wt, const uint16_t *x, const uint16_t *w, const float *bias,
                                int rows, int D, int E, int top_k, int n_group, int topk_group, int norm_topk_prob,
                                float routed_scaling_factor, cudaStream_t stream) {
  if (rows <= 0) return V_OK;
  if (E <= 0 || top_k <= 0 || top_k > E) return VERR("curef_router: top_k %d of %d experts", top_k, E);
  const int G = n_group > 0 && n_group <= E ? n_group : 1;
  const int TG = topk_group > 0 && topk_group <= G ? topk_group : G;
  if (E % G) return VERR("curef_router: %d experts not divisible into %d groups", E, G);
  const size_t sm = (size_t)(2 * E + G) * sizeof(float) + (size_t)(E + G);
  if (sm > 48 * 1024) return VERR("curef_router: %d experts need too much shared memory", E);
  router_kernel<<<rows, 256, sm, stream>>>(idx, wt, x, w, bias, D, E, top_k, G, TG, norm_topk_prob,
                                           routed_scaling_factor);
  CUDA_CHECK_LAUNCH();
  return V_OK;
}

/* ---- MoE gather / scatter ---- */

static __global__ void gather_kernel(uint16_t *dst, const uint16_t *src, const int32_t *rows, int D) {
  const size_t j = blockIdx.x;
  const uint16_t *s = src + (size_t)rows[j] * (size_t)D;
  for (int i = threadIdx.x; i < D; i += blockDim.x) dst[j * D + i] = s[i];
}

extern "C" vstatus curef_gather_rows(uint16_t *dst, const uint16_t *src, const int32_t *rows, int n, int D,
                                     cudaStream_t stream) {
  if (n <= 0) return V_OK;
  gather_kernel<<<n, 256, 0, stream>>>(dst, src, rows, D);
  CUDA_CHECK_LAUNCH();
  return V_OK;
}

static __global__ void scatter_add_kernel(float *x, const uint16_t *y, const int32_t *rows, const float *w,
                                          int D) {
  const size_t j = blockIdx.x;
  float *xr = x + (size_t)rows[j] * (size_t)D;
  const float wj = w[j];
  for (int i = threadIdx.x; i < D; i += blockDim.x) xr[i] += wj * bf2f(y[j * D + i]);
}

extern "C" vstatus curef_scatter_add(float *x, const uint16_t *y, const int32_t *rows, const float *w, int n,
                                     int D, cudaStream_t stream) {
  if (n <= 0) return V_OK;
  scatter_add_kernel<<<n, 256, 0, stream>>>(x, y, rows, w, D);
  CUDA_CHECK_LAUNCH();
  return V_OK;
}
