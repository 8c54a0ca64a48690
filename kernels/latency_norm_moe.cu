/* Latency-path kernels around the GEMMs: fused embedding + RMSNorm, fused residual add +
 * RMSNorm, the fused MoE combine (weighted routed experts + shared expert + residual +
 * next RMSNorm), the one-kernel router (sigmoid, bias, group-limited top-k with HF's 0.0
 * masking, normalize, scale; forced experts) and the device-side token->expert bucketing.
 * One variant each ("v1"). Semantics as the cuda-ref kernels (cuda_ref_kernels.h). */
#include "kernels/latency_kernels.h"
#include "reference/cuda/cuda_common.h"
#include "reference/cuda/cuda_device.h"

#define FULL_MASK 0xffffffffu
#define NORM_THREADS 256



/* xn[i] = bf16(w[i] * (x[i] * inv)) over the fp32 row x (already updated by this thread). */
static __device__ void norm_row(uint16_t *xn, const float *x, const uint16_t *w, int D, float ss, float eps,
                                float *red) {
  ss = block_sum(ss, red);
  const float inv = 1.0f / sqrtf(ss / (float)D + eps);
  for (int i = threadIdx.x; i < D; i += blockDim.x) xn[i] = f2bf(bf2f(w[i]) * (x[i] * inv));
}

static __global__ void embed_norm_kernel(float *x, uint16_t *xn, const int32_t *tok, const uint16_t *emb,
                                         const uint16_t *w, int D, float eps) {
  __shared__ float red[32];
  const long long t = blockIdx.x;
  const uint16_t *e = emb + (long long)tok[t] * D;
  float *xr = x + t * D;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    const float v = bf2f(e[i]);
    xr[i] = v;
    ss += v * v;
  }
  norm_row(xn + t * D, xr, w, D, ss, eps, red);
}

extern "C" vstatus lat_embed_norm(float *x, uint16_t *xn, const int32_t *tok, const uint16_t *emb, const uint16_t *w,
                                  int T, int D, float eps, cudaStream_t stream) {
  if (T <= 0) return V_OK;
  embed_norm_kernel<<<T, NORM_THREADS, 0, stream>>>(x, xn, tok, emb, w, D, eps);
  CUDA_CHECK_LAUNCH();
  return V_OK;
}

static __global__ void add_rmsnorm_kernel(float *x, uint16_t *xn, const uint16_t *y, const uint16_t *w, int D,
                                          float eps) {
  __shared__ float red[32];
  const long long t = blockIdx.x;
  float *xr = x + t * D;
  const uint16_t *yr = y + t * D;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    const float v = xr[i] + bf2f(yr[i]);
    xr[i] = v;
    ss += v * v;
  }
  norm_row(xn + t * D, xr, w, D, ss, eps, red);
}

extern "C" vstatus lat_add_rmsnorm(float *x, uint16_t *xn, const uint16_t *y, const uint16_t *w, int T, int D,
                                   float eps, cudaStream_t stream) {
  if (T <= 0) return V_OK;
  add_rmsnorm_kernel<<<T, NORM_THREADS, 0, stream>>>(x, xn, y, w, D, eps);
  CUDA_CHECK_LAUNCH();
  return V_OK;
}

static __global__ void moe_combine_norm_kernel(float *x, uint16_t *xn, const uint16_t *Y, const float *wt,
                                               const uint16_t *ysh, const uint16_t *w, int K, int D, float eps) {
  __shared__ float red[32];
  __shared__ float wk[64];
  const long long t = blockIdx.x;
  for (int k = threadIdx.x; k < K; k += blockDim.x) wk[k] = wt[t * K + k];
  __syncthreads();
  float *xr = x + t * D;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    float v = xr[i];
    for (int k = 0; k < K; k++) v += wk[k] * bf2f(Y[(t * K + k) * D + i]);
    if (ysh) v += bf2f(ysh[t * D + i]);
    xr[i] = v;
    ss += v * v;
  }
  norm_row(xn + t * D, xr, w, D, ss, eps, red);
}

extern "C" vstatus lat_moe_combine_norm(float *x, uint16_t *xn, const uint16_t *Y, const float *wt, const uint16_t *ysh,
                                        const uint16_t *w, int T, int K, int D, float eps, cudaStream_t stream) {
  if (T <= 0) return V_OK;
  if (K > 64) return VERR("lat_moe_combine_norm: top-k %d > 64", K);
  moe_combine_norm_kernel<<<T, NORM_THREADS, 0, stream>>>(x, xn, Y, wt, ysh, w, K, D, eps);
  CUDA_CHECK_LAUNCH();
  return V_OK;
}

/* TP: out[t] = sum_k wt[t,k] Y[t,k] + ysh[t] in fp32, no residual (this rank's partial sum). */
static __global__ void moe_combine_partial_kernel(float *out, const uint16_t *Y, const float *wt, const uint16_t *ysh,
                                                  int K, int D) {
  __shared__ float wk[64];
  const long long t = blockIdx.x;
  for (int k = threadIdx.x; k < K; k += blockDim.x) wk[k] = wt[t * K + k];
  __syncthreads();
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    float v = 0.0f;
    for (int k = 0; k < K; k++) v += wk[k] * bf2f(Y[(t * K + k) * D + i]);
    if (ysh) v += bf2f(ysh[t * D + i]);
    out[t * D + i] = v;
  }
}

extern "C" vstatus lat_moe_combine_partial(float *out, const uint16_t *Y, const float *wt, const uint16_t *ysh, int T,
                                           int K, int D, cudaStream_t stream) {
  if (T <= 0) return V_OK;
  if (K > 64) return VERR("lat_moe_combine_partial: top-k %d > 64", K);
  moe_combine_partial_kernel<<<T, NORM_THREADS, 0, stream>>>(out, Y, wt, ysh, K, D);
  CUDA_CHECK_LAUNCH();
  return V_OK;
}

/* ---- router ---- */

#define RT_WARPS 4

/* One warp per token. Shared: scores [RT_WARPS][E], choice [RT_WARPS][E]. */
static __global__ void router_topk_kernel(int32_t *idx, float *wt, const float *logits, const float *bias,
                                          const int32_t *forced, int T, int E, int K, int G, int TG, int norm,
                                          float rsf) {
  extern __shared__ float rsm[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int t = blockIdx.x * RT_WARPS + warp;
  if (t >= T) return;
  float *sc = rsm + warp * 2 * E, *ch = sc + E;
  const float *lr = logits + (long long)t * E;
  for (int e = lane; e < E; e += 32) {
    const float s = 1.0f / (1.0f + expf(-lr[e]));
    sc[e] = s;
    ch[e] = s + (bias ? bias[e] : 0.0f);
  }
  __syncwarp();
  int32_t *ir = idx + (long long)t * K;
  float *wr = wt + (long long)t * K;
  if (forced) {
    if (lane == 0) {
      float sum = 0.0f;
      for (int k = 0; k < K; k++) {
        int e = forced[(long long)t * K + k];
        e = e < 0 ? 0 : e >= E ? E - 1 : e; /* the host validated the ids */
        ir[k] = e;
        wr[k] = sc[e];
        sum += wr[k];
      }
      if (norm) {
        const float den = sum + 1e-20f;
        for (int k = 0; k < K; k++) wr[k] /= den;
      }
      for (int k = 0; k < K; k++) wr[k] *= rsf;
    }
    return;
  }
  if (TG < G) {
    const int gs = E / G;
    float gsc = -INFINITY;
    if (lane < G) {
      const float *cg = ch + lane * gs;
      int b1 = 0;
      for (int i = 1; i < gs; i++)
        if (cg[i] > cg[b1]) b1 = i;
      int b2 = -1;
      for (int i = 0; i < gs; i++)
        if (i != b1 && (b2 < 0 || cg[i] > cg[b2])) b2 = i;
      gsc = b2 >= 0 ? cg[b1] + cg[b2] : cg[b1];
    }
    unsigned keep = 0;
    /* TG rounds of warp argmax over the group scores (ties: lower group first) */
    bool taken = false;
    for (int k = 0; k < TG; k++) {
      float bv = (lane < G && !taken) ? gsc : -INFINITY;
      int bi = (lane < G && !taken) ? lane : 1 << 30;
      for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(FULL_MASK, bv, o);
        const int oi = __shfl_xor_sync(FULL_MASK, bi, o);
        if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;
      }
      if (lane == bi) taken = true;
      keep |= 1u << bi;
    }
    for (int e = lane; e < G * gs; e += 32)
      if (!((keep >> (e / gs)) & 1u)) ch[e] = 0.0f; /* HF masked_fill(..., 0.0) */
    __syncwarp();
  }
  float sum = 0.0f;
  for (int k = 0; k < K; k++) {
    float bv = -INFINITY;
    int bi = 1 << 30;
    for (int e = lane; e < E; e += 32) {
      const float v = ch[e];
      if (v > bv || (v == bv && e < bi)) bv = v, bi = e;
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(FULL_MASK, bv, o);
      const int oi = __shfl_xor_sync(FULL_MASK, bi, o);
      if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;
    }
    if (bi >= E) bi = 0; /* only with NaN scores */
    const float s = sc[bi];
    sum += s;
    __syncwarp();
    if (lane == 0) {
      ir[k] = bi;
      wr[k] = s;
      ch[bi] = -INFINITY; /* taken */
    }
    __syncwarp();
  }
  if (lane == 0) {
    if (norm) {
      const float den = sum + 1e-20f;
      for (int k = 0; k < K; k++) wr[k] /= den;
    }
    for (int k = 0; k < K; k++) wr[k] *= rsf;
  }
}

extern "C" vstatus lat_router_topk(int32_t *idx, float *wt, const float *logits, const float *bias,
                                   const int32_t *forced, int T, int E, int K, int n_group, int topk_group,
                                   int norm_topk_prob, float rsf, cudaStream_t stream) {
  if (T <= 0) return V_OK;
  if (E <= 0 || K <= 0 || K > E) return VERR("lat_router_topk: top-k %d of %d experts", K, E);
  const int G = n_group > 0 && n_group <= E ? n_group : 1;
  const int TG = topk_group > 0 && topk_group <= G ? topk_group : G;
  if (E % G) return VERR("lat_router_topk: %d experts not divisible into %d groups", E, G);
  if (G > 32) return VERR("lat_router_topk: %d expert groups (at most 32)", G);
  const size_t sm = (size_t)RT_WARPS * 2 * E * sizeof(float);
  if (sm > 48 * 1024) return VERR("lat_router_topk: %d experts need too much shared memory", E);
  router_topk_kernel<<<(T + RT_WARPS - 1) / RT_WARPS, RT_WARPS * 32, sm, stream>>>(
      idx, wt, logits, bias, forced, T, E, K, G, TG, norm_topk_prob, rsf);
  CUDA_CHECK_LAUNCH();
  return V_OK;
}

/* ---- token -> expert buckets ---- */

#define BK_THREADS 1024

/* Shared: sidx [P], cnt [E], off [E]. P = T*K <= 4096, E <= 4096. */
static __global__ void moe_bucket_kernel(const int32_t *idx, int P, int K, int E, int32_t *n_act, int32_t *act_e,
                                         int32_t *act_off, int32_t *act_cnt, int32_t *perm_tok,
                                         int32_t *perm_pair) {
  extern __shared__ int bsm[];
  int *sidx = bsm, *cnt = sidx + P, *off = cnt + E;
  for (int p = threadIdx.x; p < P; p += blockDim.x) sidx[p] = idx[p];
  for (int e = threadIdx.x; e < E; e += blockDim.x) cnt[e] = 0;
  __syncthreads();
  for (int p = threadIdx.x; p < P; p += blockDim.x) atomicAdd(&cnt[sidx[p]], 1);
  __syncthreads();
  /* warp 0: exclusive scans of the counts (bucket offsets) and of the active flags */
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    int carry_rows = 0, carry_act = 0;
    for (int e0 = 0; e0 < E; e0 += 32) {
      const int e = e0 + lane;
      const int c = e < E ? cnt[e] : 0;
      const int f = c > 0 ? 1 : 0;
      int sc = c, sf = f;
      for (int o = 1; o < 32; o <<= 1) {
        const int a = __shfl_up_sync(FULL_MASK, sc, o), b = __shfl_up_sync(FULL_MASK, sf, o);
        if (lane >= o) sc += a, sf += b;
      }
      if (e < E) {
        off[e] = carry_rows + sc - c;
        if (f) {
          const int a = carry_act + sf - 1;
          act_e[a] = e;
          act_off[a] = carry_rows + sc - c;
          act_cnt[a] = c;
        }
      }
      carry_rows += __shfl_sync(FULL_MASK, sc, 31);
      carry_act += __shfl_sync(FULL_MASK, sf, 31);
    }
    if (lane == 0) *n_act = carry_act;
  }
  __syncthreads();
  for (int p = threadIdx.x; p < P; p += blockDim.x) {
    const int e = sidx[p];
    int rank = 0;
    for (int q = 0; q < p; q++) rank += sidx[q] == e;
    const int row = off[e] + rank;
    perm_tok[row] = p / K;
    perm_pair[row] = p;
  }
}

extern "C" vstatus lat_moe_bucket(const int32_t *idx, int T, int K, int E, int32_t *n_act, int32_t *act_e,
                                  int32_t *act_off, int32_t *act_cnt, int32_t *perm_tok, int32_t *perm_pair,
                                  cudaStream_t stream) {
  const int P = T * K;
  if (P <= 0) return V_OK;
  const size_t sm = (size_t)(P + 2 * E) * sizeof(int);
  if (sm > 48 * 1024) return VERR("lat_moe_bucket: %d pairs and %d experts need too much shared memory", P, E);
  moe_bucket_kernel<<<1, BK_THREADS, sm, stream>>>(idx, P, K, E, n_act, act_e, act_off, act_cnt, perm_tok,
                                                   perm_pair);
  CUDA_CHECK_LAUNCH();
  return V_OK;
}
