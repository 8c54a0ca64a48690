/* Device helpers shared by the CUDA kernels of cuda-ref and the latency path (static, so each
 * translation unit gets its own copy): bf16 <-> fp32 and a block-wide sum. */
#ifndef VOUCH_REFERENCE_CUDA_CUDA_DEVICE_H
#define VOUCH_REFERENCE_CUDA_CUDA_DEVICE_H

#include <cuda_bf16.h>
#include <stdint.h>

#define VOUCH_FULL_MASK 0xffffffffu

static __device__ __forceinline__ float bf2f(uint16_t h) { return __uint_as_float((unsigned)h << 16); }
static __device__ __forceinline__ uint16_t f2bf(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }

/* RoPE of one pair at position p: x1 = element i, x2 = element i + dim/2 of the de-interleaved
 * row; the angle in float32 (HF: inv_freq @ position_ids), cos and sin in double, times
 * attn_factor. One definition for every kernel that rotates (the results must agree bit for bit). */
static __device__ __forceinline__ void rope_pair(float x1, float x2, float p, float inv_freq, float attn_factor,
                                                 float *o1, float *o2) {
  const float f = __fmul_rn(p, inv_freq);
  const float c = __fmul_rn((float)cos((double)f), attn_factor);
  const float s = __fmul_rn((float)sin((double)f), attn_factor);
  *o1 = x1 * c - x2 * s;
  *o2 = x2 * c + x1 * s;
}

/* Sum of v over the block (blockDim.x a multiple of 32, <= 1024); red is __shared__ float[32].
 * Every thread gets the result. Starts with a barrier: red may still be read by a previous call. */
static __device__ float block_sum(float v, float *red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(VOUCH_FULL_MASK, v, o);
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
  __syncthreads();
  if (l == 0) red[w] = v;
  __syncthreads();
  if (w == 0) {
    float s = l < nw ? red[l] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(VOUCH_FULL_MASK, s, o);
    if (l == 0) red[0] = s;
  }
  __syncthreads();
  return red[0];
}

#endif
