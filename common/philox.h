/* Counter-based RNG (Philox4x32-10, Salmon et al. 2011) shared by host and device code.
 * A value depends only on (key, counter), so any slice of a synthetic tensor can be
 * generated independently, in any order, on the CPU or the GPU, with identical bits.
 * Only integer operations and exactly-rounded float ops are used, so results do not
 * depend on the compiler's contraction or math library. */
#ifndef VOUCH_COMMON_PHILOX_H
#define VOUCH_COMMON_PHILOX_H

#include <stdint.h>

#if defined(__CUDACC__)
#define PHILOX_FN static __host__ __device__ __forceinline__
#else
#define PHILOX_FN static inline
#endif

typedef struct { uint32_t v[4]; } philox_ctr;

PHILOX_FN void philox_mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo) {
  uint64_t p = (uint64_t)a * (uint64_t)b;
  *hi = (uint32_t)(p >> 32);
  *lo = (uint32_t)p;
}

/* Ten rounds of Philox4x32 over counter c with 64-bit key k. */
PHILOX_FN philox_ctr philox4x32(philox_ctr c, uint64_t key) {
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
  for (int r = 0; r < 10; r++) {
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(0xD2511F53u, c.v[0], &hi0, &lo0);
    philox_mulhilo(0xCD9E8D57u, c.v[2], &hi1, &lo1);
    philox_ctr n;
    n.v[0] = hi1 ^ c.v[1] ^ k0;
    n.v[1] = lo1;
    n.v[2] = hi0 ^ c.v[3] ^ k1;
    n.v[3] = lo0;
    c = n;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

/* 32 random bits for element `index` of the stream `key` (lane 0 of one block). */
PHILOX_FN uint32_t philox_bits(uint64_t key, uint64_t index) {
  philox_ctr c = {{(uint32_t)index, (uint32_t)(index >> 32), 0x76534f56u /* "VOSv" */, 0}};
  return philox4x32(c, key).v[0];
}

/* Uniform in [-1, 1) with 24 bits: an exact float (no rounding anywhere). */
PHILOX_FN float philox_symmetric(uint64_t key, uint64_t index) {
  int32_t i = (int32_t)(philox_bits(key, index) >> 8) - (1 << 23);
  return (float)i * (1.0f / 8388608.0f);
}

/* Uniform in [0, 1) with 53 bits, for sampling (host use). */
PHILOX_FN double philox_unit(uint64_t key, uint64_t index) {
  philox_ctr c = {{(uint32_t)index, (uint32_t)(index >> 32), 0x756e6974u /* "unit" */, 0}};
  philox_ctr r = philox4x32(c, key);
  uint64_t b = ((uint64_t)r.v[0] << 21) ^ (uint64_t)r.v[1];
  return (double)(b & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

/* Uniform integer in [0, n) from stream `key`, advancing the caller's counter (host use). */
PHILOX_FN int philox_below(uint64_t key, uint64_t *ctr, int n) {
  int v = (int)(philox_unit(key, (*ctr)++) * n);
  return v < n ? v : n - 1;
}

/* Stream key for (seed, name): FNV-1a 64 over the seed's 8 bytes, then the name. */
PHILOX_FN uint64_t philox_key(uint64_t seed, const char *name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int i = 0; i < 8; i++) { h ^= (seed >> (8 * i)) & 0xff; h *= 0x100000001b3ull; }
  for (; *name; name++) { h ^= (unsigned char)*name; h *= 0x100000001b3ull; }
  return h;
}

#endif
