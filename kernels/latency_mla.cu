/* MLA decode with weight absorption over a latent cache (kv_lora + rope values per token,
 * 576 for K2), for the latency path.
 *   lat_mla_prep     q_a_layernorm, kv_a_layernorm, RoPE on k_rot, latent cache store (one kernel);
 *                    lat_mla_prep_dcp stores only the positions a DCP rank owns (kernels/latency_dcp.cu)
 *   lat_mla_attn     v1_split: flash-decoding split-KV. Block = (split, head group, token row);
 *                    the key tile (32 cache rows) is staged in shared memory with cp.async,
 *                    double-buffered; each warp takes keys in turn, computes the scores of
 *                    its head group (q_lat . c_lat + q_rot . k_rot, fp32), keeps an online
 *                    softmax and the p-weighted latent sum in registers; warps merge at the end.
 *   lat_mla_combine  log-sum-exp merge of the splits -> o_lat (bf16), W_UV applied afterwards by
 *                    the batched GEMM.
 *   lat_transpose_wuk  W_UK^T per head for the absorbed query GEMM (at open). */
#include "kernels/latency_kernels.h"
#include "reference/cuda/cuda_common.h"
#include "reference/cuda/cuda_pdl.h"
#include "kernels/latency_device.h"

#define FULL_MASK 0xffffffffu
#define AT_WARPS 8
#define AT_KEYS 32     /* keys per shared-memory tile */
#define AT_MAXCH 3     /* 16-byte chunks of a cache row per lane: (kl + r) <= 768 */
#define AT_MAXLAT 2    /* latent chunks per lane: kl <= 512 */



/* ---- prep: norms, RoPE, cache store ---- */

#define PREP_THREADS 256 /* per block */
#define PREP_PV 8        /* row elements a thread keeps in registers: rows up to 2048 in one pass */

/* x[u] = row[i_u] for the thread's elements i_u = threadIdx.x + u * blockDim.x < n (0 past n); returns
 * the thread's sum of squares in element order (elements past PREP_PV * blockDim: a tail loop, for
 * rows above 2048, not the family's). */
static __device__ __forceinline__ float prep_load(float (&x)[PREP_PV], const uint16_t *row, int n) {
  float ss = 0.0f;
#pragma unroll
  for (int u = 0; u < PREP_PV; u++) {
    const int i = threadIdx.x + u * blockDim.x;
    x[u] = i < n ? bf2f(row[i]) : 0.0f;
  }
#pragma unroll
  for (int u = 0; u < PREP_PV; u++) ss += x[u] * x[u];
  for (int i = threadIdx.x + PREP_PV * blockDim.x; i < n; i += blockDim.x) {
    const float v = bf2f(row[i]);
    ss += v * v;
  }
  return ss;
}

/* The norm weights of the thread's elements (constant: loaded before the PDL wait). */
static __device__ __forceinline__ void prep_weights(float (&w)[PREP_PV], const uint16_t *weight, int n) {
#pragma unroll
  for (int u = 0; u < PREP_PV; u++) {
    const int i = threadIdx.x + u * blockDim.x;
    w[u] = i < n ? bf2f(weight[i]) : 0.0f;
  }
}

/* out[i] = bf16(w[i] * (row[i] * inv)) for the thread's elements. */
static __device__ __forceinline__ void prep_store(uint16_t *out, const float (&x)[PREP_PV], const float (&w)[PREP_PV],
                                                  const uint16_t *row, const uint16_t *weight, int n, float inv) {
#pragma unroll
  for (int u = 0; u < PREP_PV; u++) {
    const int i = threadIdx.x + u * blockDim.x;
    if (i < n) out[i] = f2bf(w[u] * (x[u] * inv));
  }
  for (int i = threadIdx.x + PREP_PV * blockDim.x; i < n; i += blockDim.x)
    out[i] = f2bf(bf2f(weight[i]) * (bf2f(row[i]) * inv));
}

/* Every load of the row (and the constant norm weights and RoPE frequencies, before the PDL wait)
 * is issued before the first use: one round trip after the wait. (The first version read the norm
 * weights, the rotary half and the frequencies each after the previous step: ~8 us per layer.) */
static __global__ void mla_prep_kernel(const uint16_t *src, int src_ld, int q_off, int ql, const uint16_t *qnw,
                                       uint16_t *qan, int kv_off, int kl, int r, const uint16_t *kvnw,
                                       uint16_t *cache, const int32_t *slot, const int32_t *pos, int max_ctx,
                                       const float *inv_freq, float attn_factor, int interleave, float eps,
                                       int dcp_n, int dcp_rank) {
  __shared__ float red[32];
  const long long t = blockIdx.x;
  const uint16_t *row = src + t * src_ld;
  float w[PREP_PV], x[PREP_PV];
  /* blockIdx.y 0: the q norm, 1: the latent; two blocks per row, so the two chains run side by side */
  if (blockIdx.y == 0) {
    if (q_off >= 0) prep_weights(w, qnw, ql);
    pdl_wait();
    pdl_trigger();
    if (q_off < 0) return;
    const uint16_t *qa = row + q_off;
    const float ss = block_sum(prep_load(x, qa, ql), red);
    prep_store(qan + t * ql, x, w, qa, qnw, ql, 1.0f / sqrtf(ss / (float)ql + eps));
    return;
  }
  const int hd = r / 2;
  prep_weights(w, kvnw, kl);
  const float fr = (int)threadIdx.x < hd ? inv_freq[threadIdx.x] : 0.0f; /* hd <= blockDim (launcher) */
  pdl_wait();
  pdl_trigger();
  const int W = kl + r;
  /* DCP: only the owner (pos % dcp_n == dcp_rank) stores, at its local index pos / dcp_n; the
   * position is the same for the whole block, so the return is uniform */
  const int p = pos[t];
  if (p % dcp_n != dcp_rank) return;
  uint16_t *crow = cache + ((long long)slot[t] * max_ctx + p / dcp_n) * W;
  const uint16_t *lat = row + kv_off, *kr = lat + kl;
  /* the rotary pair of thread i < hd, loaded with the latent */
  float x1 = 0.0f, x2 = 0.0f;
  if ((int)threadIdx.x < hd) {
    const int i = threadIdx.x;
    x1 = bf2f(interleave ? kr[2 * i] : kr[i]);
    x2 = bf2f(interleave ? kr[2 * i + 1] : kr[hd + i]);
  }
  const float ss = block_sum(prep_load(x, lat, kl), red);
  prep_store(crow, x, w, lat, kvnw, kl, 1.0f / sqrtf(ss / (float)kl + eps));
  if ((int)threadIdx.x < hd) {
    float o1, o2;
    rope_pair(x1, x2, (float)p, fr, attn_factor, &o1, &o2);
    crow[kl + threadIdx.x] = f2bf(o1);
    crow[kl + hd + threadIdx.x] = f2bf(o2);
  }
}

extern "C" vstatus lat_mla_prep_dcp(const uint16_t *src, int src_ld, int q_off, int ql, const uint16_t *qnw,
                                    uint16_t *qan, int kv_off, int kl, int r, const uint16_t *kvnw, uint16_t *cache,
                                    const int32_t *slot, const int32_t *pos, int cache_ctx, const float *inv_freq,
                                    float attn_factor, int interleave, float eps, int T, int dcp_n, int dcp_rank,
                                    cudaStream_t stream) {
  if (T <= 0) return V_OK;
  if (r % 2) return VERR("lat_mla_prep: rope dim %d must be even", r);
  if (dcp_n < 1 || dcp_rank < 0 || dcp_rank >= dcp_n)
    return VERR("lat_mla_prep: dcp rank %d of %d outside [0, %d)", dcp_rank, dcp_n, dcp_n);
  if (r / 2 > PREP_THREADS) return VERR("lat_mla_prep: rope dim %d above %d", r, 2 * PREP_THREADS);
  CUDA_CHECK(pdl_launch(mla_prep_kernel, dim3((unsigned)T, 2), PREP_THREADS, 0, stream, src, src_ld, q_off, ql, qnw,
                        qan, kv_off, kl, r, kvnw, cache, slot, pos, cache_ctx, inv_freq, attn_factor, interleave, eps,
                        dcp_n, dcp_rank));
  return V_OK;
}

extern "C" vstatus lat_mla_prep(const uint16_t *src, int src_ld, int q_off, int ql, const uint16_t *qnw,
                                uint16_t *qan, int kv_off, int kl, int r, const uint16_t *kvnw, uint16_t *cache,
                                const int32_t *slot, const int32_t *pos, int max_ctx, const float *inv_freq,
                                float attn_factor, int interleave, float eps, int T, cudaStream_t stream) {
  return lat_mla_prep_dcp(src, src_ld, q_off, ql, qnw, qan, kv_off, kl, r, kvnw, cache, slot, pos, max_ctx, inv_freq,
                          attn_factor, interleave, eps, T, 1, 0, stream);
}

/* ---- split-KV attention ---- */

extern "C" int lat_mla_head_group(int H) { return H % 4 == 0 ? 4 : H % 2 == 0 ? 2 : 1; }

extern "C" int lat_mla_supported(int kl, int r) {
  return kl > 0 && kl % 8 == 0 && r % 8 == 0 && kl / 8 <= 32 * AT_MAXLAT && (kl + r) / 8 <= 32 * AT_MAXCH;
}

extern "C" int lat_mla_splits(int T, int H, int max_keys, int num_sms) {
  const int base = T * (H / lat_mla_head_group(H));
  const int target = 2 * (num_sms > 0 ? num_sms : 132);
  int S = (target + base - 1) / base;
  const int by_len = (max_keys + 63) / 64; /* at least 64 keys per split */
  if (S > by_len) S = by_len;
  if (S > 32) S = 32;
  return S < 1 ? 1 : S;
}

static size_t attn_smem(int HG, int W, int kl) {
  size_t a = (size_t)HG * W * sizeof(float);                           /* q */
  size_t tiles = (size_t)2 * AT_KEYS * W * sizeof(uint16_t);           /* two key tiles */
  const size_t merge = (size_t)AT_WARPS * kl * sizeof(float);          /* reuses the tiles */
  if (tiles < merge) tiles = merge;
  return a + tiles + (size_t)2 * AT_WARPS * HG * sizeof(float);        /* + m, l per warp */
}

template <int HG>
static __global__ void __launch_bounds__(AT_WARPS * 32) mla_attn_kernel(
    float *pm, float *pl, float *pacc, const float *qlat, const uint16_t *q, int q_ld, int q_hstride, int q_rot_off,
    const uint16_t *cache, const int32_t *slot, const int32_t *pos, int H, int kl, int r, int max_ctx, int S,
    float scale) {
  extern __shared__ __align__(16) unsigned char asm_raw[];
  const int W = kl + r, nch = W / 8, nlat = kl / 8;
  pdl_wait();
  pdl_trigger();
  float *qs = (float *)asm_raw;                                   /* [HG][W] */
  uint16_t *tile = (uint16_t *)(qs + HG * W);                     /* [2][AT_KEYS][W] */
  const size_t tile_bytes = (size_t)2 * AT_KEYS * W * sizeof(uint16_t) > (size_t)AT_WARPS * kl * sizeof(float)
                                ? (size_t)2 * AT_KEYS * W * sizeof(uint16_t)
                                : (size_t)AT_WARPS * kl * sizeof(float);
  float *sm_m = (float *)((unsigned char *)tile + tile_bytes);    /* [AT_WARPS][HG] */
  float *sm_l = sm_m + AT_WARPS * HG;
  const int s = blockIdx.x, h0 = blockIdx.y * HG, t = blockIdx.z;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

  for (int i = threadIdx.x; i < HG * W; i += blockDim.x) {
    const int hh = i / W, c = i % W;
    qs[i] = c < kl ? qlat[((long long)t * H + h0 + hh) * kl + c]
                   : bf2f(q[(long long)t * q_ld + (long long)(h0 + hh) * q_hstride + q_rot_off + (c - kl)]);
  }
  const int nk = pos[t] + 1;
  const int chunk = (nk + S - 1) / S;
  const int j0 = s * chunk, j1 = min(nk, j0 + chunk);
  const uint16_t *cbase = cache + (long long)slot[t] * max_ctx * W;
  const int ntile = j1 > j0 ? (j1 - j0 + AT_KEYS - 1) / AT_KEYS : 0;

  float m[HG], l[HG], acc[AT_MAXLAT][HG][8];
#pragma unroll
  for (int hh = 0; hh < HG; hh++) {
    m[hh] = -INFINITY;
    l[hh] = 0.0f;
#pragma unroll
    for (int i = 0; i < AT_MAXLAT; i++)
#pragma unroll
      for (int e = 0; e < 8; e++) acc[i][hh][e] = 0.0f;
  }

  /* issue tile k into buffer k & 1 */
#define ISSUE(k)                                                                         \
  do {                                                                                   \
    const int kb_ = j0 + (k) * AT_KEYS, kn_ = min(AT_KEYS, j1 - kb_);                    \
    uint16_t *dst_ = tile + ((k) & 1) * AT_KEYS * W;                                     \
    for (int i_ = threadIdx.x; i_ < kn_ * nch; i_ += blockDim.x) {                       \
      const int key_ = i_ / nch, c_ = i_ % nch;                                          \
      cp_async16(dst_ + key_ * W + c_ * 8, cbase + (long long)(kb_ + key_) * W + c_ * 8); \
    }                                                                                    \
  } while (0)

  if (ntile > 0) ISSUE(0);
  cp_commit();
  __syncthreads(); /* qs visible */
  for (int k = 0; k < ntile; k++) {
    if (k + 1 < ntile) ISSUE(k + 1);
    cp_commit();
    cp_wait<1>();
    __syncthreads();
    const uint16_t *tb = tile + (k & 1) * AT_KEYS * W;
    const int kn = min(AT_KEYS, j1 - (j0 + k * AT_KEYS));
    for (int jj = warp; jj < kn; jj += AT_WARPS) {
      const uint16_t *row = tb + jj * W;
      float xf[AT_MAXCH][8];
      float part[HG];
#pragma unroll
      for (int hh = 0; hh < HG; hh++) part[hh] = 0.0f;
#pragma unroll
      for (int i = 0; i < AT_MAXCH; i++) {
        const int c = lane + 32 * i;
        if (c < nch) {
          const uint4 v = *(const uint4 *)(row + c * 8);
          const unsigned u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
          for (int e = 0; e < 4; e++) {
            xf[i][2 * e] = __uint_as_float(u[e] << 16);
            xf[i][2 * e + 1] = __uint_as_float(u[e] & 0xffff0000u);
          }
#pragma unroll
          for (int hh = 0; hh < HG; hh++) {
            const float4 qa = *(const float4 *)(qs + hh * W + c * 8);
            const float4 qb = *(const float4 *)(qs + hh * W + c * 8 + 4);
            part[hh] += qa.x * xf[i][0] + qa.y * xf[i][1] + qa.z * xf[i][2] + qa.w * xf[i][3] + qb.x * xf[i][4] +
                        qb.y * xf[i][5] + qb.z * xf[i][6] + qb.w * xf[i][7];
          }
        } else {
#pragma unroll
          for (int e = 0; e < 8; e++) xf[i][e] = 0.0f;
        }
      }
#pragma unroll
      for (int hh = 0; hh < HG; hh++) {
        float v = part[hh];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
        const float sc = v * scale;
        const float mn = fmaxf(m[hh], sc);
        const float corr = expf(m[hh] - mn); /* 0 on the first key (m = -inf) */
        const float pe = expf(sc - mn);
        l[hh] = l[hh] * corr + pe;
        m[hh] = mn;
#pragma unroll
        for (int i = 0; i < AT_MAXLAT; i++)
#pragma unroll
          for (int e = 0; e < 8; e++) acc[i][hh][e] = acc[i][hh][e] * corr + pe * xf[i][e];
      }
    }
    __syncthreads(); /* buffer k & 1 is refilled next iteration */
  }
#undef ISSUE
  asm volatile("cp.async.wait_group 0;" ::: "memory");
  __syncthreads();

  /* merge the warps: M = max m_w, L = sum l_w e^(m_w - M), acc = sum acc_w e^(m_w - M) */
  if (lane == 0) {
#pragma unroll
    for (int hh = 0; hh < HG; hh++) {
      sm_m[warp * HG + hh] = m[hh];
      sm_l[warp * HG + hh] = l[hh];
    }
  }
  __syncthreads();
  float *mrg = (float *)tile; /* [AT_WARPS][kl] */
#pragma unroll
  for (int hh = 0; hh < HG; hh++) {
    float M = -INFINITY;
    for (int w = 0; w < AT_WARPS; w++) M = fmaxf(M, sm_m[w * HG + hh]);
    const float my = (M == -INFINITY || m[hh] == -INFINITY) ? 0.0f : expf(m[hh] - M);
#pragma unroll
    for (int i = 0; i < AT_MAXLAT; i++) {
      const int c = lane + 32 * i;
      if (c < nlat)
#pragma unroll
        for (int e = 0; e < 8; e++) mrg[warp * kl + c * 8 + e] = acc[i][hh][e] * my;
    }
    __syncthreads();
    const long long o = ((long long)t * H + h0 + hh) * S + s;
    for (int c = threadIdx.x; c < kl; c += blockDim.x) {
      float v = 0.0f;
      for (int w = 0; w < AT_WARPS; w++) v += mrg[w * kl + c];
      pacc[o * kl + c] = v;
    }
    if (threadIdx.x == 0) {
      float L = 0.0f;
      for (int w = 0; w < AT_WARPS; w++) {
        const float mw = sm_m[w * HG + hh];
        if (mw != -INFINITY) L += sm_l[w * HG + hh] * expf(mw - M);
      }
      pm[o] = M;
      pl[o] = L;
    }
    __syncthreads();
  }
}

extern "C" vstatus lat_mla_attn(float *pm, float *pl, float *pacc, const float *qlat, const uint16_t *q, int q_ld,
                                int q_hstride, int q_rot_off, const uint16_t *cache, const int32_t *slot,
                                const int32_t *pos, int T, int H, int kl, int r, int max_ctx, int S, float scale,
                                cudaStream_t stream) {
  if (T <= 0) return V_OK;
  if (!lat_mla_supported(kl, r)) return VERR("lat_mla_attn: latent %d + rope %d not supported", kl, r);
  if (S < 1) S = 1;
  const int HG = lat_mla_head_group(H);
  const int W = kl + r;
  const size_t sm = attn_smem(HG, W, kl);
  dim3 grid((unsigned)S, (unsigned)(H / HG), (unsigned)T);
  switch (HG) {
    case 4:
      CUDA_CHECK(pdl_launch(mla_attn_kernel<4>, grid, AT_WARPS * 32, sm, stream, pm, pl, pacc, qlat, q, q_ld, q_hstride,
                            q_rot_off, cache, slot, pos, H, kl, r, max_ctx, S, scale));
      break;
    case 2:
      CUDA_CHECK(pdl_launch(mla_attn_kernel<2>, grid, AT_WARPS * 32, sm, stream, pm, pl, pacc, qlat, q, q_ld, q_hstride,
                            q_rot_off, cache, slot, pos, H, kl, r, max_ctx, S, scale));
      break;
    default:
      CUDA_CHECK(pdl_launch(mla_attn_kernel<1>, grid, AT_WARPS * 32, sm, stream, pm, pl, pacc, qlat, q, q_ld, q_hstride,
                            q_rot_off, cache, slot, pos, H, kl, r, max_ctx, S, scale));
      break;
  }
  return V_OK;
}

/* Called once from lat_kernels_init's sibling in the path (shared-memory limit per HG). */
extern "C" vstatus lat_mla_init(int kl, int r) {
  const int W = kl + r;
  CUDA_CHECK(cudaFuncSetAttribute(mla_attn_kernel<4>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)attn_smem(4, W, kl)));
  CUDA_CHECK(cudaFuncSetAttribute(mla_attn_kernel<2>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)attn_smem(2, W, kl)));
  CUDA_CHECK(cudaFuncSetAttribute(mla_attn_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)attn_smem(1, W, kl)));
  return V_OK;
}

/* Block t*H + h (one head row): warp 0 weighs the splits (lane s takes s, s + 32), e^(m_s - M) / L,
 * then each thread sums 8 consecutive columns over the splits (two 16-byte loads per split, the
 * splits unrolled so the loads are in flight together). Threads: kl / 8, at least one warp. */
static __global__ void mla_combine_kernel(uint16_t *o, const float *pm, const float *pl, const float *pacc, int kl,
                                          int S) {
  __shared__ float wsc[LAT_MLA_MAX_SPLITS];
  const long long th = blockIdx.x; /* t*H + h */
  pdl_wait();
  pdl_trigger();
  /* the first 8 splits' partial rows go out before the weights are known: their round trip
   * overlaps warp 0's */
  const int c = threadIdx.x * 8;
  const bool live = c < kl;
  const float *src = pacc + th * S * kl + c;
  float pre[8][8];
#pragma unroll
  for (int s = 0; s < 8; s++)
    if (live && s < S) ld_f32x8(pre[s], src + (long long)s * kl);
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    float M = -INFINITY;
    for (int s = lane; s < S; s += 32) M = fmaxf(M, pm[th * S + s]);
    for (int k = 16; k > 0; k >>= 1) M = fmaxf(M, __shfl_xor_sync(FULL_MASK, M, k));
    float L = 0.0f;
    for (int s = lane; s < S; s += 32) {
      const float ms = pm[th * S + s];
      const float e = ms != -INFINITY ? expf(ms - M) : 0.0f;
      wsc[s] = e;
      L += pl[th * S + s] * e;
    }
    for (int k = 16; k > 0; k >>= 1) L += __shfl_xor_sync(FULL_MASK, L, k);
    for (int s = lane; s < S; s += 32) wsc[s] = L > 0.0f ? wsc[s] / L : 0.0f;
  }
  __syncthreads();
  if (!live) return;
  float v[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int s = 0; s < 8; s++)
    if (s < S)
#pragma unroll
      for (int e = 0; e < 8; e++) v[e] += wsc[s] * pre[s][e];
#pragma unroll 8
  for (int s = 8; s < S; s++) {
    float a[8];
    ld_f32x8(a, src + (long long)s * kl);
#pragma unroll
    for (int e = 0; e < 8; e++) v[e] += wsc[s] * a[e];
  }
  st_bf16x8(o + th * kl + c, v);
}

extern "C" vstatus lat_mla_combine(uint16_t *o, const float *pm, const float *pl, const float *pacc, int T, int H,
                                   int kl, int S, cudaStream_t stream) {
  if (T <= 0) return V_OK;
  if (S < 1 || S > LAT_MLA_MAX_SPLITS) return VERR("lat_mla_combine: %d splits outside 1..%d", S, LAT_MLA_MAX_SPLITS);
  if (kl % 8) return VERR("lat_mla_combine: latent width %d not a multiple of 8", kl);
  const int threads = ((kl / 8 + 31) / 32) * 32;
  CUDA_CHECK(pdl_launch(mla_combine_kernel, (unsigned)(T * H), threads, 0, stream, o, pm, pl, pacc, kl, S));
  return V_OK;
}

static __global__ void transpose_wuk_kernel(uint16_t *out, const uint16_t *kv_b, int H, int n, int v, int kl) {
  const long long total = (long long)H * kl * n;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    const int i = (int)(e % n);
    const long long hc = e / n;
    const int c = (int)(hc % kl), h = (int)(hc / kl);
    out[e] = kv_b[((long long)h * (n + v) + i) * kl + c];
  }
}

extern "C" vstatus lat_transpose_wuk(uint16_t *out, const uint16_t *kv_b, int H, int n, int v, int kl,
                                     cudaStream_t stream) {
  transpose_wuk_kernel<<<1024, 256, 0, stream>>>(out, kv_b, H, n, v, kl);
  CUDA_CHECK_LAUNCH();
  return V_OK;
}
