/* Decode context parallelism (DCP) for the latency path's latent MLA cache
 * (docs/tensor-parallel.md, "Decode context parallelism"). On top of TP N the N ranks split the
 * latent cache by position: rank r holds the positions p with p % N == r at local index p / N
 * (lat_mla_prep_dcp stores only those). Per layer and step:
 *   lat_dcp_pack_q     this rank's absorbed query of its H heads, [T, H, kl + r] fp32 (q_lat | q_rot),
 *                      all-gathered by the caller into [N][T][H][kl + r]
 *   lat_dcp_place_q    the gathered queries in the unsharded head order (rank r's heads are r*H ..):
 *                      q_lat [T, N*H, kl] fp32 and q_rot [T, N*H, r] bf16, the attention kernels' inputs
 *   lat_dcp_lpos       per token row the last visible LOCAL key index: owned(pos + 1) - 1 (-1: none)
 *   (the split-KV attention, v3_mma or v1_split, over the local cache for all N*H heads)
 *   lat_dcp_merge_local  the splits of one rank -> (o_r normalized by its own sum | lse_r) per
 *                      (token, head), [T, N*H, kl + 1] fp32, all-gathered by the caller
 *   lat_dcp_combine    this rank's heads over the N parts: o = sum_r e^(lse_r - M) o_r / sum_r
 *                      e^(lse_r - M) -> o_lat bf16 [T, H, kl]; W_UV, o_proj and the TP reduce follow. */
#include <math.h>

#include "kernels/latency_device.h"
#include "kernels/latency_kernels.h"
#include "reference/cuda/cuda_common.h"
#include "reference/cuda/cuda_pdl.h"

#define DCP_THREADS 128

static unsigned grid_for(long long n) {
  long long b = (n + 255) / 256;
  if (b > 4096) b = 4096;
  return (unsigned)(b > 0 ? b : 1);
}

static __global__ void dcp_lpos_kernel(int32_t *lpos, const int32_t *pos, int T, int N, int rank) {
  pdl_wait();
  pdl_trigger();
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= T) return;
  const int n = pos[t] + 1; /* positions [0, pos] are visible */
  lpos[t] = (n > rank ? (n - 1 - rank) / N + 1 : 0) - 1;
}

extern "C" vstatus lat_dcp_lpos(int32_t *lpos, const int32_t *pos, int T, int N, int rank, cudaStream_t stream) {
  if (T <= 0) return V_OK;
  if (N < 1 || rank < 0 || rank >= N) return VERR("lat_dcp_lpos: rank %d of %d", rank, N);
  CUDA_CHECK(pdl_launch(dcp_lpos_kernel, (T + 127) / 128, 128, 0, stream, lpos, pos, T, N, rank));
  return V_OK;
}

static __global__ void dcp_pack_q_kernel(float *send, const float *qlat, const uint16_t *q, int q_ld, int q_hstride,
                                         int q_rot_off, int T, int H, int kl, int r) {
  pdl_wait();
  pdl_trigger();
  const int w = kl + r;
  const long long total = (long long)T * H * w;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    const int c = (int)(e % w);
    const long long th = e / w; /* t * H + h */
    const int h = (int)(th % H), t = (int)(th / H);
    send[e] = c < kl ? qlat[th * kl + c] : bf2f(q[(long long)t * q_ld + (long long)h * q_hstride + q_rot_off + c - kl]);
  }
}

extern "C" vstatus lat_dcp_pack_q(float *send, const float *qlat, const uint16_t *q, int q_ld, int q_hstride,
                                  int q_rot_off, int T, int H, int kl, int r, cudaStream_t stream) {
  if (T <= 0) return V_OK;
  if (H < 1 || kl < 1 || r < 0) return VERR("lat_dcp_pack_q: heads %d, latent %d, rope %d", H, kl, r);
  CUDA_CHECK(pdl_launch(dcp_pack_q_kernel, grid_for((long long)T * H * (kl + r)), 256, 0, stream, send, qlat, q, q_ld,
                        q_hstride, q_rot_off, T, H, kl, r));
  return V_OK;
}

static __global__ void dcp_place_q_kernel(float *qlat_all, uint16_t *qrot_all, const float *gathered, int N, int T,
                                          int H, int kl, int r) {
  pdl_wait();
  pdl_trigger();
  const int w = kl + r, Ha = N * H;
  const long long total = (long long)N * T * H * w;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    const int c = (int)(e % w);
    long long rest = e / w;
    const int h = (int)(rest % H);
    rest /= H;
    const int t = (int)(rest % T), rank = (int)(rest / T);
    const long long g = (long long)t * Ha + (long long)rank * H + h; /* row of head rank*H + h */
    const float v = gathered[e];
    if (c < kl) qlat_all[g * kl + c] = v;
    else qrot_all[g * r + c - kl] = f2bf(v); /* exact: v was a bf16 */
  }
}

extern "C" vstatus lat_dcp_place_q(float *qlat_all, uint16_t *qrot_all, const float *gathered, int N, int T, int H,
                                   int kl, int r, cudaStream_t stream) {
  if (T <= 0) return V_OK;
  if (N < 1 || H < 1 || kl < 1 || r < 0) return VERR("lat_dcp_place_q: ranks %d, heads %d, latent %d, rope %d", N, H, kl, r);
  CUDA_CHECK(pdl_launch(dcp_place_q_kernel, grid_for((long long)N * T * H * (kl + r)), 256, 0, stream, qlat_all,
                        qrot_all, gathered, N, T, H, kl, r));
  return V_OK;
}

/* Block = one (token, head) row of the partials; the S split weights go through shared memory,
 * then each thread takes columns c, c + 128, ... */
static __global__ void __launch_bounds__(DCP_THREADS) dcp_merge_local_kernel(float *part, const float *pm,
                                                                             const float *pl, const float *pacc,
                                                                             int kl, int S) {
  __shared__ float e_s[LAT_MLA_MAX_SPLITS], l_s[LAT_MLA_MAX_SPLITS];
  __shared__ float stat[2]; /* M, L */
  pdl_wait();
  pdl_trigger();
  const long long row = blockIdx.x;
  if (threadIdx.x < S) {
    e_s[threadIdx.x] = pm[row * S + threadIdx.x];
    l_s[threadIdx.x] = pl[row * S + threadIdx.x];
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float M = -INFINITY;
    bool nan = false;
    for (int s = 0; s < S; s++) {
      nan |= e_s[s] != e_s[s];
      M = fmaxf(M, e_s[s]);
    }
    float L = 0.0f;
    for (int s = 0; s < S; s++) {
      const float w = e_s[s] == -INFINITY ? 0.0f : expf(e_s[s] - M); /* an empty split weighs 0 */
      e_s[s] = w;
      L += w * l_s[s];
    }
    stat[0] = M;
    stat[1] = nan ? NAN : L;
  }
  __syncthreads();
  const float M = stat[0], L = stat[1];
  const long long o = row * (kl + 1);
  for (int c = threadIdx.x; c < kl; c += blockDim.x) {
    float v = 0.0f;
    for (int s = 0; s < S; s++)
      if (e_s[s] != 0.0f) v += e_s[s] * pacc[(row * S + s) * kl + c];
    part[o + c] = L == 0.0f ? 0.0f : v / L; /* no visible key: o = 0 */
  }
  if (threadIdx.x == 0) part[o + kl] = L == 0.0f ? -INFINITY : M + logf(L); /* NaN stays NaN */
}

extern "C" vstatus lat_dcp_merge_local(float *part, const float *pm, const float *pl, const float *pacc, int T, int H,
                                       int kl, int S, cudaStream_t stream) {
  if (T <= 0) return V_OK;
  if (S < 1 || S > LAT_MLA_MAX_SPLITS) return VERR("lat_dcp_merge_local: %d splits outside 1..%d", S, LAT_MLA_MAX_SPLITS);
  if (H < 1 || kl < 1) return VERR("lat_dcp_merge_local: heads %d, latent %d", H, kl);
  CUDA_CHECK(pdl_launch(dcp_merge_local_kernel, (unsigned)(T * H), DCP_THREADS, 0, stream, part, pm, pl, pacc, kl, S));
  return V_OK;
}

/* Block = (token t, own head hl); the N rank weights through shared memory. */
static __global__ void __launch_bounds__(DCP_THREADS) dcp_combine_kernel(uint16_t *olat, const float *parts, int N,
                                                                         int T, int Ha, int H, int h0, int kl) {
  __shared__ float w_s[LAT_DCP_MAX_RANKS];
  __shared__ float inv_s;
  pdl_wait();
  pdl_trigger();
  const int t = blockIdx.x / H, hl = blockIdx.x % H;
  const long long rs = (long long)T * Ha * (kl + 1); /* one rank's [T, Ha, kl + 1] */
  const float *p0 = parts + ((long long)t * Ha + h0 + hl) * (kl + 1);
  if (threadIdx.x == 0) {
    float M = -INFINITY;
    bool nan = false;
    for (int r = 0; r < N; r++) {
      const float l = p0[r * rs + kl];
      nan |= l != l;
      M = fmaxf(M, l);
    }
    float W = 0.0f;
    for (int r = 0; r < N; r++) {
      const float l = p0[r * rs + kl];
      w_s[r] = l == -INFINITY ? 0.0f : expf(l - M); /* a rank without visible keys weighs 0 */
      W += w_s[r];
    }
    inv_s = nan ? NAN : W > 0.0f ? 1.0f / W : 0.0f; /* every part empty: o = 0 */
  }
  __syncthreads();
  const float inv = inv_s;
  uint16_t *out = olat + ((long long)t * H + hl) * kl;
  for (int c = threadIdx.x; c < kl; c += blockDim.x) {
    float v = 0.0f;
    for (int r = 0; r < N; r++)
      if (w_s[r] != 0.0f) v += w_s[r] * p0[r * rs + c]; /* empty parts are not read */
    out[c] = f2bf(v * inv);
  }
}

extern "C" vstatus lat_dcp_combine(uint16_t *olat, const float *parts, int N, int T, int Ha, int H, int h0, int kl,
                                   cudaStream_t stream) {
  if (T <= 0) return V_OK;
  if (N < 1 || N > LAT_DCP_MAX_RANKS || H < 1 || h0 < 0 || h0 + H > Ha || kl < 1)
    return VERR("lat_dcp_combine: ranks %d (at most %d), heads [%d, %d) of %d, latent %d", N, LAT_DCP_MAX_RANKS, h0,
                h0 + H, Ha, kl);
  CUDA_CHECK(
      pdl_launch(dcp_combine_kernel, (unsigned)(T * H), DCP_THREADS, 0, stream, olat, parts, N, T, Ha, H, h0, kl));
  return V_OK;
}
