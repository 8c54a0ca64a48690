/* Absorbed MLA decode on tensor cores through cuBLAS, for long contexts (variant "v2_gemm" of
 * mla_decode in the latency path; lat_mla_attn is "v1_split"). Per token row t, with the latent
 * cache rows of its slot K_t [Ncap, kl + r] (kl latent, then the rotated k_rot):
 *   Q_t     [2H, kl + r] bf16: rows h = [hi(q_lat) | q_rot], rows H + h = [lo(q_lat) | 0]
 *           with hi = bf16(q_lat), lo = bf16(q_lat - hi): the fp32 query split in two bf16 parts
 *   S_t     [2H, Ncap]  fp32 = scale * Q_t K_t^T                        cublasGemmBatchedEx, batch T
 *   P_t     [H, Ncap]   bf16 = softmax of S_t[h] + S_t[H + h] over keys j <= pos[t], 0 after
 *   O_t     [H, kl]     bf16 = P_t K_t[:, :kl]                          cublasGemmBatchedEx, batch T
 * The latent rows serve as keys (all kl + r columns) and as values (the first kl): the MLA
 * cache is read twice per step instead of once per head group, on tensor cores. Ncap is the
 * step's key count rounded up to a bucket (lat_mla_gemm_ncap) so a CUDA graph captured for
 * the bucket replays for every length in it; keys past a row's position get probability 0.
 * The batch pointers are built on the device from slot[] (graph-safe). Precision: the hi/lo
 * split keeps q_lat to ~16 bits of mantissa (as v1_split's fp32 query against bf16 keys, to
 * within 2^-16); the second half of the rows costs tensor-core work, not cache reads (one GEMM
 * with 2H columns reads K once). P is bf16 (FlashAttention's choice), accumulation fp32. */
#include "kernels/latency_kernels.h"
#include "reference/cuda/cuda_common.h"
#include "reference/cuda/cuda_pdl.h"
#include "reference/cuda/cuda_device.h"

#define SM_THREADS 256

extern "C" int lat_mla_gemm_ncap(int max_keys, int max_ctx) {
  int n = 256;
  while (n < max_keys && n < 4096) n *= 2;
  if (n < max_keys) n = (max_keys + 4095) / 4096 * 4096; /* past 4096: multiples of 4096 (<= 12.5 % padding at 32k) */
  return n < max_ctx ? n : max_ctx;
}

/* qb[t][h] = [hi | q_rot], qb[t][H + h] = [lo | 0], hi = bf16(q_lat[t][h]), lo = bf16(q_lat[t][h] - hi);
 * q_rot = q[t*q_ld + h*q_hstride + q_rot_off + (0:r)] is bf16 already. */
static __global__ void q_pack_kernel(uint16_t *qb, const float *qlat, const uint16_t *q, int q_ld, int q_hstride,
                                     int q_rot_off, int H, int kl, int r) {
  pdl_wait();
  pdl_trigger();
  const int h = blockIdx.x, t = blockIdx.y, W = kl + r;
  uint16_t *hi = qb + ((size_t)t * 2 * H + h) * W, *lo = hi + (size_t)H * W;
  const float *ql = qlat + ((size_t)t * H + h) * kl;
  const uint16_t *qr = q + (size_t)t * q_ld + (size_t)h * q_hstride + q_rot_off;
  for (int c = threadIdx.x; c < W; c += blockDim.x) {
    if (c < kl) {
      const uint16_t b = f2bf(ql[c]);
      hi[c] = b;
      lo[c] = f2bf(ql[c] - bf2f(b));
    } else {
      hi[c] = qr[c - kl];
      lo[c] = 0;
    }
  }
}

/* The batch pointer arrays of both GEMMs for rows t < T. */
static __global__ void ptrs_kernel(const void **kp, const void **qp, void **sp, const void **pp, void **op,
                                   const uint16_t *cache, const int32_t *slot, const uint16_t *qb, float *scores,
                                   uint16_t *P, uint16_t *olat, int T, int H, int W, int kl, int max_ctx, int ncap) {
  pdl_wait();
  pdl_trigger();
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= T) return;
  kp[t] = cache + (size_t)slot[t] * max_ctx * W;
  qp[t] = qb + (size_t)t * 2 * H * W;
  sp[t] = scores + (size_t)t * 2 * H * ncap;
  pp[t] = P + (size_t)t * H * ncap;
  op[t] = olat + (size_t)t * H * kl;
}

/* One block per (h, t): with s = S[t][h] + S[t][H + h] (hi and lo query halves),
 * P[j] = exp(s[j] - max) / sum for j <= pos[t], 0 for pos[t] < j < ncap. */
static __global__ void __launch_bounds__(SM_THREADS)
    mla_softmax_kernel(uint16_t *P, const float *S, const int32_t *pos, int H, int ncap) {
  __shared__ float red[32];
  pdl_wait();
  pdl_trigger();
  const int h = blockIdx.x, t = blockIdx.y;
  const int n = min(pos[t] + 1, ncap);
  const float *s = S + ((size_t)t * 2 * H + h) * ncap, *s2 = s + (size_t)H * ncap;
  uint16_t *p = P + ((size_t)t * H + h) * ncap;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, s[j] + s2[j]);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(VOUCH_FULL_MASK, m, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
  __syncthreads();
  m = -INFINITY;
  for (int w = 0; w < (int)(blockDim.x >> 5); w++) m = fmaxf(m, red[w]);
  float z = 0.0f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) z += expf(s[j] + s2[j] - m);
  z = block_sum(z, red);
  const float inv = z > 0.0f ? 1.0f / z : 0.0f;
  for (int j = threadIdx.x; j < ncap; j += blockDim.x) p[j] = j < n ? f2bf(expf(s[j] + s2[j] - m) * inv) : (uint16_t)0;
}

extern "C" vstatus lat_mla_attn_gemm(const lat_mla_gemm_ws *ws, uint16_t *olat, const float *qlat, const uint16_t *q,
                                     int q_ld, int q_hstride, int q_rot_off, const uint16_t *cache,
                                     const int32_t *slot, const int32_t *pos, int T, int H, int kl, int r, int max_ctx,
                                     int ncap, float scale, cublasHandle_t blas, cudaStream_t stream) {
  if (T <= 0) return V_OK;
  const int W = kl + r;
  if (T > ws->rows || (size_t)T * 2 * H * ncap > ws->score_elems || ncap > max_ctx)
    return VERR("lat_mla_attn_gemm: %d rows x %d heads x %d keys exceed the workspace (%d rows, %zu scores)", T, H,
                ncap, ws->rows, ws->score_elems);
  CUDA_CHECK(pdl_launch(q_pack_kernel, dim3((unsigned)H, (unsigned)T), 128, 0, stream, ws->qb, qlat, q, q_ld, q_hstride,
                        q_rot_off, H, kl, r));
  CUDA_CHECK(pdl_launch(ptrs_kernel, (T + 63) / 64, 64, 0, stream, ws->kp, ws->qp, ws->sp, ws->pp, ws->op, cache, slot,
                        ws->qb, ws->scores, ws->P, olat, T, H, W, kl, max_ctx, ncap));
  CUBLAS_CHECK(cublasSetStream(blas, stream));
  const float alpha = scale, beta = 0.0f, one = 1.0f;
  /* S^T (col-major ncap x 2H) = K (col-major W x ncap)^T . Q (col-major W x 2H) */
  CUBLAS_CHECK(cublasGemmBatchedEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, ncap, 2 * H, W, &alpha, ws->kp, CUDA_R_16BF, W,
                                   ws->qp, CUDA_R_16BF, W, &beta, ws->sp, CUDA_R_32F, ncap, T, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
  CUDA_CHECK(pdl_launch(mla_softmax_kernel, dim3((unsigned)H, (unsigned)T), SM_THREADS, 0, stream, ws->P, ws->scores,
                        pos, H, ncap));
  /* O^T (col-major kl x H) = V (first kl rows of col-major W x ncap) . P^T (col-major ncap x H) */
  CUBLAS_CHECK(cublasGemmBatchedEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, kl, H, ncap, &one, ws->kp, CUDA_R_16BF, W,
                                   (const void *const *)ws->pp, CUDA_R_16BF, ncap, &beta, ws->op, CUDA_R_16BF, kl, T,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return V_OK;
}
