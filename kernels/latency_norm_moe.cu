/* Latency-path kernels around the GEMMs: fused embedding + RMSNorm, fused residual add +
 * RMSNorm, the fused MoE combine (weighted routed experts + shared expert + residual +
 * next RMSNorm), the one-kernel router (sigmoid, bias, group-limited top-k with HF's 0.0
 * masking, normalize, scale; forced experts) and the device-side token->expert bucketing.
 * One variant each ("v1"). Semantics as the cuda-ref kernels (cuda_ref_kernels.h). */
#include "kernels/latency_kernels.h"
#include "reference/cuda/cuda_common.h"
#include "reference/cuda/cuda_device.h"
#include "kernels/latency_device.h"
#include "reference/cuda/cuda_pdl.h"
#include "model/router_rule.h"

#define FULL_MASK 0xffffffffu

/* ---- row kernels: one block per token row of D (D % 8 == 0) ----
 * Thread i owns the 8-element vectors i, i + blockDim.x, ... (at most NV of them) and issues every
 * load of its vectors before it stores anything: a decode row is a few KB, so these kernels are
 * bound by memory latency, not bandwidth, and a loop that loads, stores, and loads again pays one
 * DRAM round trip per iteration (the first version: 25 us for one row of 7168 at batch 1, now one
 * or two round trips). The norm weights are constant, so they are read before the PDL wait. */
#define RV_MAX_THREADS 512 /* __launch_bounds__: 128 registers per thread */
#define RV_MAXV 4          /* vectors per thread: D up to 16384 (LAT_ROW_MAX) */

/* Vectors per thread and threads for a row of D: the fewest vectors per thread that fit in
 * RV_MAX_THREADS threads, then as few threads as cover the row (a multiple of 32). */
static int rv_vectors(int D) { return (D / 8 + RV_MAX_THREADS - 1) / RV_MAX_THREADS; }
static int rv_threads(int D) {
  const int nv = rv_vectors(D), per = (D / 8 + nv - 1) / nv;
  return ((per + 31) / 32) * 32;
}

/* The norm weights of this thread's vectors (constant: may be read before pdl_wait). */
template <int NV>
static __device__ __forceinline__ void rv_load_w(float (&wv)[NV][8], const uint16_t *w, int nvec) {
#pragma unroll
  for (int j = 0; j < NV; j++) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i < nvec) ld_bf16x8(wv[j], w + 8 * i);
  }
}

/* The row a (fp32, this thread's vectors) to x, and xn = bf16(w * (a * inv)) with inv the row's
 * reciprocal RMS; ss is this thread's sum of squares. */
template <int NV>
static __device__ __forceinline__ void rv_store_norm(float *x, uint16_t *xn, const float (&a)[NV][8],
                                                     const float (&wv)[NV][8], float ss, int D, float eps, float *red) {
  const int nvec = D / 8;
  ss = block_sum(ss, red);
  const float inv = 1.0f / sqrtf(ss / (float)D + eps);
#pragma unroll
  for (int j = 0; j < NV; j++) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i >= nvec) continue;
    float o[8];
#pragma unroll
    for (int e = 0; e < 8; e++) o[e] = wv[j][e] * (a[j][e] * inv);
    st_f32x8(x + 8 * i, a[j]);
    st_bf16x8(xn + 8 * i, o);
  }
}

template <int NV>
static __device__ __forceinline__ float rv_sumsq(const float (&a)[NV][8], int nvec) {
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < NV; j++)
    if (threadIdx.x + j * blockDim.x < nvec)
#pragma unroll
      for (int e = 0; e < 8; e++) ss += a[j][e] * a[j][e];
  return ss;
}

/* x[t] = emb[tok[t]] (fp32), xn[t] = rmsnorm(x[t]) * w. */
template <int NV>
static __global__ void __launch_bounds__(RV_MAX_THREADS)
    embed_norm_kernel(float *x, uint16_t *xn, const int32_t *tok, const uint16_t *emb, const uint16_t *w, int D,
                      float eps) {
  __shared__ float red[32];
  const int nvec = D / 8;
  float wv[NV][8], a[NV][8];
  rv_load_w<NV>(wv, w, nvec);
  pdl_wait();
  pdl_trigger();
  const long long t = blockIdx.x;
  const uint16_t *e = emb + (long long)tok[t] * D;
#pragma unroll
  for (int j = 0; j < NV; j++) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i < nvec) ld_bf16x8(a[j], e + 8 * i);
  }
  rv_store_norm<NV>(x + t * D, xn + t * D, a, wv, rv_sumsq<NV>(a, nvec), D, eps, red);
}

/* x[t] += y[t] (bf16), xn[t] = rmsnorm(x[t]) * w. */
template <int NV>
static __global__ void __launch_bounds__(RV_MAX_THREADS)
    add_rmsnorm_kernel(float *x, uint16_t *xn, const uint16_t *y, const uint16_t *w, int D, float eps) {
  __shared__ float red[32];
  const int nvec = D / 8;
  float wv[NV][8], a[NV][8], b[NV][8];
  rv_load_w<NV>(wv, w, nvec);
  pdl_wait();
  pdl_trigger();
  const long long t = blockIdx.x;
#pragma unroll
  for (int j = 0; j < NV; j++) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i < nvec) {
      ld_f32x8(a[j], x + t * D + 8 * i);
      ld_bf16x8(b[j], y + t * D + 8 * i);
    }
  }
#pragma unroll
  for (int j = 0; j < NV; j++)
#pragma unroll
    for (int e = 0; e < 8; e++) a[j][e] += b[j][e];
  rv_store_norm<NV>(x + t * D, xn + t * D, a, wv, rv_sumsq<NV>(a, nvec), D, eps, red);
}

/* a[e] += w * (element e of the 8 bf16 in u); w = 1 adds exactly. */
static __device__ __forceinline__ void add_scaled_bf16x8(float (&a)[8], float w, const uint4 u) {
  float y[8];
  unpack_bf16x8(y, u);
#pragma unroll
  for (int e = 0; e < 8; e++) a[e] += w * y[e];
}

/* a = x (fp32) or 0, then a += sum_k wk[k] Y[t*K+k] (bf16, k in order), then a += ysh[t] when given.
 * Every vector's x, shared-expert row and first 8 expert rows are loaded (raw 16-byte words)
 * before any of them is used: one memory round trip for K <= 8. (Loading per vector, the shared
 * row after the expert sum, took four round trips: 14 us for one K2 row at batch 1.) */
template <int NV>
static __device__ __forceinline__ void rv_combine(float (&a)[NV][8], const float *xr, const uint16_t *Y,
                                                  const uint16_t *ysh, int K, int D, int nvec, const float *wk) {
  const long long t = blockIdx.x;
  uint4 yr[NV][8], sr[NV];
#pragma unroll
  for (int j = 0; j < NV; j++) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i >= nvec) continue;
    if (xr) {
      ld_f32x8(a[j], xr + 8 * i);
    } else {
#pragma unroll
      for (int e = 0; e < 8; e++) a[j][e] = 0.0f;
    }
    if (ysh) sr[j] = *(const uint4 *)(ysh + t * D + 8 * i);
#pragma unroll
    for (int k = 0; k < 8; k++)
      if (k < K) yr[j][k] = *(const uint4 *)(Y + (t * K + k) * D + 8 * i);
  }
#pragma unroll
  for (int j = 0; j < NV; j++) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i >= nvec) continue;
#pragma unroll
    for (int k = 0; k < 8; k++)
      if (k < K) add_scaled_bf16x8(a[j], wk[k], yr[j][k]);
    /* top-k above 8 (not K2's): the rest in batches of 8, loads of a batch in flight together */
    for (int k0 = 8; k0 < K; k0 += 8) {
      uint4 yk[8];
#pragma unroll
      for (int k = 0; k < 8; k++)
        if (k0 + k < K) yk[k] = *(const uint4 *)(Y + (t * K + k0 + k) * D + 8 * i);
#pragma unroll
      for (int k = 0; k < 8; k++)
        if (k0 + k < K) add_scaled_bf16x8(a[j], wk[k0 + k], yk[k]);
    }
    if (ysh) add_scaled_bf16x8(a[j], 1.0f, sr[j]);
  }
}

/* x[t] += sum_k wt[t,k] Y[t*K+k] + ysh[t]; xn[t] = rmsnorm(x[t]) * w. */
template <int NV>
static __global__ void __launch_bounds__(RV_MAX_THREADS)
    moe_combine_norm_kernel(float *x, uint16_t *xn, const uint16_t *Y, const float *wt, const uint16_t *ysh,
                            const uint16_t *w, int K, int D, float eps) {
  __shared__ float red[32];
  __shared__ float wk[64];
  const int nvec = D / 8;
  float wv[NV][8], a[NV][8];
  rv_load_w<NV>(wv, w, nvec);
  pdl_wait();
  pdl_trigger();
  const long long t = blockIdx.x;
  for (int k = threadIdx.x; k < K; k += blockDim.x) wk[k] = wt[t * K + k];
  __syncthreads();
  rv_combine<NV>(a, x + t * D, Y, ysh, K, D, nvec, wk);
  rv_store_norm<NV>(x + t * D, xn + t * D, a, wv, rv_sumsq<NV>(a, nvec), D, eps, red);
}

/* TP: out[t] = sum_k wt[t,k] Y[t,k] + ysh[t] in fp32, no residual (this rank's partial sum). */
template <int NV>
static __global__ void __launch_bounds__(RV_MAX_THREADS)
    moe_combine_partial_kernel(float *out, const uint16_t *Y, const float *wt, const uint16_t *ysh, int K, int D) {
  __shared__ float wk[64];
  const int nvec = D / 8;
  float a[NV][8];
  pdl_wait();
  pdl_trigger();
  const long long t = blockIdx.x;
  for (int k = threadIdx.x; k < K; k += blockDim.x) wk[k] = wt[t * K + k];
  __syncthreads();
  rv_combine<NV>(a, NULL, Y, ysh, K, D, nvec, wk);
#pragma unroll
  for (int j = 0; j < NV; j++) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i < nvec) st_f32x8(out + t * D + 8 * i, a[j]);
  }
}

/* Launches kernel<NV> for a row of D with NV from rv_vectors (1, 2 or 4). */
#define RV_LAUNCH(kernel, T, D, stream, ...)                                                            \
  do {                                                                                                  \
    if ((D) % 8 || (D) > 8 * RV_MAXV * RV_MAX_THREADS)                                                  \
      return VERR(#kernel ": row of %d (a multiple of 8 up to %d)", (D), 8 * RV_MAXV * RV_MAX_THREADS); \
    const int nv_ = rv_vectors(D), th_ = rv_threads(D);                                                 \
    if (nv_ == 1)                                                                                       \
      CUDA_CHECK(pdl_launch(kernel<1>, (T), th_, 0, (stream), __VA_ARGS__));                            \
    else if (nv_ == 2)                                                                                  \
      CUDA_CHECK(pdl_launch(kernel<2>, (T), th_, 0, (stream), __VA_ARGS__));                            \
    else                                                                                                \
      CUDA_CHECK(pdl_launch(kernel<4>, (T), th_, 0, (stream), __VA_ARGS__));                            \
  } while (0)

extern "C" vstatus lat_embed_norm(float *x, uint16_t *xn, const int32_t *tok, const uint16_t *emb, const uint16_t *w,
                                  int T, int D, float eps, cudaStream_t stream) {
  if (T <= 0) return V_OK;
  RV_LAUNCH(embed_norm_kernel, T, D, stream, x, xn, tok, emb, w, D, eps);
  return V_OK;
}

extern "C" vstatus lat_add_rmsnorm(float *x, uint16_t *xn, const uint16_t *y, const uint16_t *w, int T, int D,
                                   float eps, cudaStream_t stream) {
  if (T <= 0) return V_OK;
  RV_LAUNCH(add_rmsnorm_kernel, T, D, stream, x, xn, y, w, D, eps);
  return V_OK;
}

extern "C" vstatus lat_moe_combine_norm(float *x, uint16_t *xn, const uint16_t *Y, const float *wt, const uint16_t *ysh,
                                        const uint16_t *w, int T, int K, int D, float eps, cudaStream_t stream) {
  if (T <= 0) return V_OK;
  if (K > 64) return VERR("lat_moe_combine_norm: top-k %d > 64", K);
  RV_LAUNCH(moe_combine_norm_kernel, T, D, stream, x, xn, Y, wt, ysh, w, K, D, eps);
  return V_OK;
}

extern "C" vstatus lat_moe_combine_partial(float *out, const uint16_t *Y, const float *wt, const uint16_t *ysh, int T,
                                           int K, int D, cudaStream_t stream) {
  if (T <= 0) return V_OK;
  if (K > 64) return VERR("lat_moe_combine_partial: top-k %d > 64", K);
  RV_LAUNCH(moe_combine_partial_kernel, T, D, stream, out, Y, wt, ysh, K, D);
  return V_OK;
}

/* ---- router ---- */

#define RT_WARPS 4

/* Routes token t with the calling warp (lane = its lane): sc, ch are the warp's shared [E] scores
 * and choice values. */
static __device__ void route_token(int t, int lane, float *sc, float *ch, int32_t *idx, float *wt, const float *logits,
                                   const float *bias, const int32_t *forced, int E, int K, int G, int TG, int norm,
                                   float rsf) {
  const float *lr = logits + (long long)t * E;
  /* a lane's logits and biases (12 each for K2's 384 experts) in flight together, 8 at a time:
   * a loop that loads, stores and loads again paid one round trip per 32 experts */
  for (int e0 = lane; e0 < E; e0 += 32 * 8) {
    float l[8], bs[8];
#pragma unroll
    for (int u = 0; u < 8; u++) {
      const int e = e0 + 32 * u;
      l[u] = e < E ? lr[e] : 0.0f;
      bs[u] = e < E && bias ? bias[e] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < 8; u++) {
      const int e = e0 + 32 * u;
      if (e >= E) break;
      const float s = 1.0f / (1.0f + expf(-l[u]));
      sc[e] = s;
      ch[e] = s + bs[u];
    }
  }
  __syncwarp();
  int32_t *ir = idx + (long long)t * K;
  float *wr = wt + (long long)t * K;
  /* the k-th chosen weight lives in lane k % 32 (w0 for k < 32, w1 above): the normalization and the
   * stores then take one step, not K dependent round trips to global memory */
  float w0 = 0.0f, w1 = 0.0f, sum = 0.0f;
  if (forced) {
    int e0 = lane < K ? forced[(long long)t * K + lane] : 0;
    int e1 = lane + 32 < K ? forced[(long long)t * K + lane + 32] : 0;
    e0 = e0 < 0 ? 0 : e0 >= E ? E - 1 : e0; /* the host validated the ids */
    e1 = e1 < 0 ? 0 : e1 >= E ? E - 1 : e1;
    w0 = sc[e0];
    w1 = sc[e1];
    if (lane < K) ir[lane] = e0;
    if (lane + 32 < K) ir[lane + 32] = e1;
    for (int k = 0; k < K; k++) sum += __shfl_sync(FULL_MASK, k < 32 ? w0 : w1, k & 31); /* in k order */
  } else {
    if (TG < G) {
      const int gs = E / G;
      float gsc = -INFINITY;
      if (lane < G) gsc = router_group_score(ch + lane * gs, gs);
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
      if (lane == (k & 31)) (k < 32 ? w0 : w1) = s;
      __syncwarp();
      if (lane == 0) {
        ir[k] = bi;
        ch[bi] = -INFINITY; /* taken */
      }
      __syncwarp();
    }
  }
  const float den = sum + 1e-20f;
  if (lane < K) wr[lane] = (norm ? w0 / den : w0) * rsf;
  if (lane + 32 < K) wr[lane + 32] = (norm ? w1 / den : w1) * rsf;
}

/* The device buckets (lat_moe_bucket's outputs). */
typedef struct {
  int32_t *n_act, *act_e, *act_off, *act_cnt, *perm_tok, *perm_pair;
} bucket_out;

/* Buckets the P = T*K pairs of idx with the whole block. bsm: shared sidx [P], cnt [E], off [E];
 * P <= 4096, E <= 4096. Starts with the block reading idx: the caller makes it visible. */
static __device__ void bucket_block(const int32_t *idx, int P, int K, int E, bucket_out b, int *bsm) {
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
          b.act_e[a] = e;
          b.act_off[a] = carry_rows + sc - c;
          b.act_cnt[a] = c;
        }
      }
      carry_rows += __shfl_sync(FULL_MASK, sc, 31);
      carry_act += __shfl_sync(FULL_MASK, sf, 31);
    }
    if (lane == 0) *b.n_act = carry_act;
  }
  __syncthreads();
  for (int p = threadIdx.x; p < P; p += blockDim.x) {
    const int e = sidx[p];
    int rank = 0;
    for (int q = 0; q < p; q++) rank += sidx[q] == e;
    const int row = off[e] + rank;
    b.perm_tok[row] = p / K;
    b.perm_pair[row] = p;
  }
}

/* Shared: bucket_block's. */
static __global__ void moe_bucket_kernel(const int32_t *idx, int P, int K, int E, bucket_out b) {
  pdl_wait();
  pdl_trigger();
  extern __shared__ int bsm[];
  bucket_block(idx, P, K, E, b, bsm);
}

/* One warp per token. Shared: scores [RT_WARPS][E], choice [RT_WARPS][E]. */
static __global__ void router_topk_kernel(int32_t *idx, float *wt, const float *logits, const float *bias,
                                          const int32_t *forced, int T, int E, int K, int G, int TG, int norm,
                                          float rsf) {
  pdl_wait();
  pdl_trigger();
  extern __shared__ float rsm[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int t = blockIdx.x * RT_WARPS + warp;
  if (t < T)
    route_token(t, lane, rsm + warp * 2 * E, rsm + warp * 2 * E + E, idx, wt, logits, bias, forced, E, K, G, TG, norm,
                rsf);
}

/* Router logits, top-k and buckets in one grid, for T <= RT_WARPS token rows. Block = RL_EXPERTS
 * experts x RL_KSPLIT quarters of D, a warp each: bf16 weights and inputs, 16-byte loads (a
 * warp's weight loads all in flight: RL_MAXC per lane), fp32 sums; the quarters meet in shared
 * memory. The last block to finish (counter in global memory, which that block resets for the
 * next step or graph replay) routes the rows and buckets the pairs, as router_topk_kernel. */
#define RL_EXPERTS 2
#define RL_KSPLIT 4
#define RL_MAXC 8 /* 16-byte chunks per lane: D <= 8 * 32 * RL_KSPLIT * RL_MAXC = 8192 */
/* the kernel's static shared memory (part, last), counted against the 48 KB with the dynamic */
#define RL_STATIC_SMEM (RL_EXPERTS * RL_KSPLIT * RT_WARPS * sizeof(float) + 16)
static __global__ void __launch_bounds__(RL_EXPERTS *RL_KSPLIT * 32)
    router_fused_kernel(float *logits, const uint16_t *W, const uint16_t *x, int ldx, int D, int32_t *counter,
                        int32_t *idx, float *wt, const float *bias, const int32_t *forced, int T, int E, int K, int G,
                        int TG, int norm, float rsf, bucket_out b) {
  extern __shared__ float rsm[];
  __shared__ float part[RL_EXPERTS][RL_KSPLIT][RT_WARPS];
  __shared__ int last;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int ex = warp / RL_KSPLIT, ks = warp % RL_KSPLIT, e = blockIdx.x * RL_EXPERTS + ex;
  const int nch = D / 8, per = (nch + RL_KSPLIT - 1) / RL_KSPLIT, c0 = ks * per, c1 = min(nch, c0 + per);
  /* the weights are constant: their loads go out before the PDL wait */
  float w[RL_MAXC][8];
#pragma unroll
  for (int i = 0; i < RL_MAXC; i++) {
    const int c = c0 + lane + 32 * i;
    if (e < E && c < c1) ld_bf16x8(w[i], W + (long long)e * D + 8 * c);
  }
  pdl_wait();
  pdl_trigger();
  for (int t = 0; t < T; t++) {
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < RL_MAXC; i++) {
      const int c = c0 + lane + 32 * i;
      if (e >= E || c >= c1) continue;
      float xv[8];
      ld_bf16x8(xv, x + (long long)t * ldx + 8 * c);
#pragma unroll
      for (int j = 0; j < 8; j++) acc += w[i][j] * xv[j];
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(FULL_MASK, acc, o);
    if (lane == 0) part[ex][ks][t] = acc;
  }
  __syncthreads();
  if (threadIdx.x < RL_EXPERTS * T) {
    const int ee = threadIdx.x / T, t = threadIdx.x % T, eg = blockIdx.x * RL_EXPERTS + ee;
    float v = 0.0f;
    for (int k = 0; k < RL_KSPLIT; k++) v += part[ee][k][t];
    if (eg < E) logits[(long long)t * E + eg] = v;
  }
  __threadfence(); /* the logits are visible device-wide before the count says so */
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(counter, 1) == (int)gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  if (warp < T)
    route_token(warp, lane, rsm + warp * 2 * E, rsm + warp * 2 * E + E, idx, wt, logits, bias, forced, E, K, G, TG,
                norm, rsf);
  __syncthreads(); /* the block's idx stores are visible to the block */
  bucket_block(idx, T * K, K, E, b, (int *)(rsm + RT_WARPS * 2 * E));
  if (threadIdx.x == 0) *counter = 0;
}

/* Checks the router shape; *G, *TG the groups used. */
static vstatus router_shape(int E, int K, int n_group, int topk_group, int *G, int *TG) {
  if (E <= 0 || K <= 0 || K > E || K > 64) return VERR("lat_router_topk: top-k %d of %d experts (at most 64)", K, E);
  *G = n_group > 0 && n_group <= E ? n_group : 1;
  *TG = topk_group > 0 && topk_group <= *G ? topk_group : *G;
  if (E % *G) return VERR("lat_router_topk: %d experts not divisible into %d groups", E, *G);
  if (*G > 32) return VERR("lat_router_topk: %d expert groups (at most 32)", *G);
  return V_OK;
}

#define RT_SMEM(E) ((size_t)RT_WARPS * 2 * (E) * sizeof(float))
#define BK_SMEM(P, E) ((size_t)((P) + 2 * (E)) * sizeof(int))
#define BK_THREADS 1024

extern "C" vstatus lat_router_topk(int32_t *idx, float *wt, const float *logits, const float *bias,
                                   const int32_t *forced, int T, int E, int K, int n_group, int topk_group,
                                   int norm_topk_prob, float rsf, cudaStream_t stream) {
  if (T <= 0) return V_OK;
  int G = 0, TG = 0; /* set by router_shape on success */
  VTRY(router_shape(E, K, n_group, topk_group, &G, &TG));
  if (RT_SMEM(E) > 48 * 1024) return VERR("lat_router_topk: %d experts need too much shared memory", E);
  CUDA_CHECK(pdl_launch(router_topk_kernel, (T + RT_WARPS - 1) / RT_WARPS, RT_WARPS * 32, RT_SMEM(E), stream, idx, wt,
                        logits, bias, forced, T, E, K, G, TG, norm_topk_prob, rsf));
  return V_OK;
}

/* ---- token -> expert buckets ---- */

extern "C" vstatus lat_moe_bucket(const int32_t *idx, int T, int K, int E, int32_t *n_act, int32_t *act_e,
                                  int32_t *act_off, int32_t *act_cnt, int32_t *perm_tok, int32_t *perm_pair,
                                  cudaStream_t stream) {
  const int P = T * K;
  if (P <= 0) return V_OK;
  if (BK_SMEM(P, E) > 48 * 1024)
    return VERR("lat_moe_bucket: %d pairs and %d experts need too much shared memory", P, E);
  const bucket_out b = {n_act, act_e, act_off, act_cnt, perm_tok, perm_pair};
  CUDA_CHECK(pdl_launch(moe_bucket_kernel, 1, BK_THREADS, BK_SMEM(P, E), stream, idx, P, K, E, b));
  return V_OK;
}

extern "C" bool lat_router_fused_ok(int T, int E, int K, int D) {
  return T >= 1 && T <= RT_WARPS && D % 8 == 0 && D <= 8 * 32 * RL_KSPLIT * RL_MAXC && E >= 1 && K >= 1 && K <= E &&
         K <= 64 && RT_SMEM(E) + BK_SMEM(T * K, E) + RL_STATIC_SMEM <= 48 * 1024;
}

extern "C" vstatus lat_router_fused(float *logits, const uint16_t *W, const uint16_t *x, int ldx, int D,
                                    int32_t *counter, int32_t *idx, float *wt, const float *bias, const int32_t *forced,
                                    int T, int E, int K, int n_group, int topk_group, int norm_topk_prob, float rsf,
                                    int32_t *n_act, int32_t *act_e, int32_t *act_off, int32_t *act_cnt,
                                    int32_t *perm_tok, int32_t *perm_pair, cudaStream_t stream) {
  if (T <= 0) return V_OK;
  if (!lat_router_fused_ok(T, E, K, D))
    return VERR("lat_router_fused: %d rows, %d experts, top-%d, hidden %d outside the fused router", T, E, K, D);
  int G = 0, TG = 0; /* set by router_shape on success */
  VTRY(router_shape(E, K, n_group, topk_group, &G, &TG));
  const bucket_out b = {n_act, act_e, act_off, act_cnt, perm_tok, perm_pair};
  CUDA_CHECK(pdl_launch(router_fused_kernel, (E + RL_EXPERTS - 1) / RL_EXPERTS, RL_EXPERTS * RL_KSPLIT * 32,
                        RT_SMEM(E) + BK_SMEM(T * K, E), stream, logits, W, x, ldx, D, counter, idx, wt, bias, forced, T,
                        E, K, G, TG, norm_topk_prob, rsf, b));
  return V_OK;
}
