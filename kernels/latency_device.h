/* Device primitives of the latency path's hand-written kernels (static: each translation unit
 * gets its own copy): bf16 tensor-core MMA, shared-memory matrix loads, asynchronous copies.
 * Also 8-wide vector loads and stores of bf16 / fp32 rows.
 * Fragment layouts are PTX's for mma.sync.m16n8k16 (lane = 4 g + c):
 *   A 16x16 row-major  a0 (row g, cols 2c..2c+1)  a1 (row g+8, same)  a2 (row g, cols 2c+8..)  a3 (row g+8, ..)
 *   B 16x8  "col"      b0 (rows 2c..2c+1, col g)  b1 (rows 2c+8..2c+9, col g)
 *   C 16x8  fp32       c0 c1 (row g, cols 2c, 2c+1)  c2 c3 (row g+8, cols 2c, 2c+1) */
#ifndef VOUCH_KERNELS_LATENCY_DEVICE_H
#define VOUCH_KERNELS_LATENCY_DEVICE_H

#include <stdint.h>

#include "reference/cuda/cuda_device.h"

/* c += A B, bf16 in, fp32 accumulate. */
static __device__ __forceinline__ void mma16816(float *c, unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                                unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

static __device__ __forceinline__ unsigned smem_addr(const void *p) {
  return (unsigned)__cvta_generic_to_shared(p);
}

/* Four 8x8 bf16 matrices from shared memory; lane l gives the address of row l % 8 of matrix l / 8.
 * For an A fragment of a row-major 16x16 tile at (r0, k0): lane l points at row r0 + l % 8 + 8 ((l / 8) % 2),
 * column k0 + 8 (l / 16). */
static __device__ __forceinline__ void ldsm_x4(unsigned &r0, unsigned &r1, unsigned &r2, unsigned &r3,
                                               const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(smem_addr(p)));
}
/* Two 8x8 matrices (lanes 0..15 give the addresses). A B fragment from a tile stored [n][k]
 * (row n holds consecutive k): lane l points at row n0 + l % 8, column k0 + 8 ((l / 8) % 2). */
static __device__ __forceinline__ void ldsm_x2(unsigned &r0, unsigned &r1, const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r0), "=r"(r1) : "r"(smem_addr(p)));
}
/* Transposed: a B fragment from a tile stored [k][n] (row k holds consecutive n): lane l points at
 * row k0 + l % 8 + 8 ((l / 8) % 2), column n0. */
static __device__ __forceinline__ void ldsm_x2_trans(unsigned &r0, unsigned &r1, const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
               : "=r"(r0), "=r"(r1)
               : "r"(smem_addr(p)));
}

/* 16-byte global -> shared copy; with valid false the 16 bytes are zero-filled instead. */
static __device__ __forceinline__ void cp_async16_z(void *smem, const void *gmem, bool valid) {
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(smem)), "l"(gmem), "r"(n));
}
static __device__ __forceinline__ void cp_async16(void *smem, const void *gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(smem)), "l"(gmem));
}
static __device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
static __device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/* Two floats as one 32-bit register of two bf16 (lo = first, round to nearest). */
static __device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
  return (unsigned)f2bf(lo) | ((unsigned)f2bf(hi) << 16);
}

/* The 8 bf16 of a 16-byte word as fp32 (exact). */
static __device__ __forceinline__ void unpack_bf16x8(float (&v)[8], const uint4 u) {
  const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    v[2 * i] = __uint_as_float(w[i] << 16);
    v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

/* Eight consecutive values (16-byte aligned) as fp32, and back. */
static __device__ __forceinline__ void ld_bf16x8(float (&v)[8], const uint16_t *p) {
  unpack_bf16x8(v, *(const uint4 *)p);
}
static __device__ __forceinline__ void st_bf16x8(uint16_t *p, const float (&v)[8]) {
  *(uint4 *)p =
      make_uint4(pack_bf16x2(v[0], v[1]), pack_bf16x2(v[2], v[3]), pack_bf16x2(v[4], v[5]), pack_bf16x2(v[6], v[7]));
}
static __device__ __forceinline__ void ld_f32x8(float (&v)[8], const float *p) {
  const float4 a = ((const float4 *)p)[0], b = ((const float4 *)p)[1];
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
static __device__ __forceinline__ void st_f32x8(float *p, const float (&v)[8]) {
  ((float4 *)p)[0] = make_float4(v[0], v[1], v[2], v[3]);
  ((float4 *)p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}

#endif
