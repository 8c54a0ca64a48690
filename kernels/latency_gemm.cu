/* Skinny GEMM for decode: y[T, N] = x[T, K] . W[N, K]^T with T = 1..64 token rows.
 *
 * The weights are the M side of mma.sync.m16n8k16 (bf16 in, fp32 accumulate) and the
 * tokens the N side (8 per n-tile), so every weight element is loaded from memory once
 * per step for all tokens, with 16-byte loads: lane (g = lane/4, q = lane%4) loads 8
 * consecutive k of weight rows g and g+8 of the 16-row tile, and 8 consecutive k of token g.
 * The dot product does not care about the order of k, so the two mma k-steps of a 32-wide
 * chunk take k {q*8 + 0..3} and {q*8 + 4..7}: A regs {row g .x, row g+8 .x, row g .y, row g+8 .y}
 * with B {x.x, x.y}, then the .z/.w halves.
 * A CTA (8 warps) owns 16*MT weight rows and a range of k chunks: warps take U consecutive
 * chunks in turn, reduce through shared memory, then either apply the epilogue or (split-K
 * across CTAs) write float32 partials that a second kernel sums in split order: no atomics,
 * the result does not depend on scheduling.
 * Variants: v1 (MT 1, NT 1, U 4), v2 (2, 2, 2), v3 (2, 4, 2), v4 (2, 8, 2), v5 cuBLAS;
 * v6..v9 (gemm_cp_kernel, weights through a 4-stage cp.async ring per warp): v6 (1, 1, 2),
 * v7 (1, 2, 2), v8 (2, 4, 1), v9 (2, 8, 1); v10 (1, 1, 1) with 8 row groups: each warp owns 16 rows
 * over the whole k range, for small K (the per-head MLA absorptions: K 128 left 6 of v6's 8 warps
 * without a chunk); v11 (2, 1, 2) with 3 stages: 32 rows per CTA, 2 CTAs per SM. */
#include "kernels/latency_kernels.h"
#include "kernels/latency_device.h"
#include "reference/cuda/cuda_common.h"
#include "reference/cuda/cuda_pdl.h"

#define GW 8 /* warps per CTA */

/* 16-byte streaming load (weights are read once: keep them out of L1). */
static __device__ __forceinline__ uint4 ld_stream(const uint16_t *p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

static __device__ __forceinline__ float silu_f(float z) { return z / (1.0f + expf(-z)); }

/* Stores value pair (rows n0 = gate/first row, n0 + 8) of token row orow. */
static __device__ __forceinline__ void store_out(const lat_gemm_args &p, long long obase, int orow, int n0, int tile16,
                                                 int g, float v0, float v1) {
  if (p.ep == LAT_EP_SWIGLU) {
    if (n0 >= p.N) return;
    const float gt = bf2f(f2bf(v0)), up = bf2f(f2bf(v1));
    uint16_t *o = (uint16_t *)p.out + obase + (long long)orow * p.ldo;
    o[tile16 * 8 + g] = f2bf(silu_f(gt) * up);
    return;
  }
  if (p.ep == LAT_EP_F32) {
    float *o = (float *)p.out + obase + (long long)orow * p.ldo;
    if (n0 < p.N) o[n0] = v0;
    if (n0 + 8 < p.N) o[n0 + 8] = v1;
    return;
  }
  uint16_t *o = (uint16_t *)p.out + obase + (long long)orow * p.ldo;
  if (n0 < p.N) o[n0] = f2bf(v0);
  if (n0 + 8 < p.N) o[n0 + 8] = f2bf(v1);
}

/* The token row lane group g reads in each 8-token tile nt (xv false past T): row off + n of x, or
 * through the row map. */
template <int NT>
static __device__ __forceinline__ void token_rows(const uint16_t *(&xr)[NT], bool (&xv)[NT], const lat_gemm_args &p,
                                                  const uint16_t *x, int off, int T, int g) {
#pragma unroll
  for (int nt = 0; nt < NT; nt++) {
    const int n = nt * 8 + g;
    xv[nt] = n < T;
    const int row = xv[nt] ? (p.xmap ? p.xmap[off + n] : off + n) : 0;
    xr[nt] = x + (long long)row * p.ldx;
  }
}

template <int MT, int NT, int U>
static __global__ void __launch_bounds__(GW * 32) gemm_mma_kernel(lat_gemm_args p, int S) {
  extern __shared__ float red[]; /* [GW][MT*NT*4][32] */
  pdl_wait();
  pdl_trigger();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const int z = blockIdx.z, split = blockIdx.y;
  const uint16_t *W;
  const uint16_t *x = p.x;
  long long obase = 0;
  int T = p.T, off = 0;
  if (p.wptr) {
    if (z >= *p.n_act) return;
    W = p.wptr[p.act_e[z]];
    T = p.act_cnt[z];
    off = p.act_off[z];
  } else {
    W = p.W + (long long)z * p.w_bstride;
    x += (long long)z * p.x_bstride;
    obase = (long long)z * p.o_bstride;
  }
  if (T <= 0) return;
  if (T > NT * 8) T = NT * 8; /* the launcher never asks for more */
  const int r0 = blockIdx.x * 16 * MT;

  const uint16_t *wr[MT][2];
  bool wv[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int row = r0 + mt * 16 + g + 8 * h;
      wv[mt][h] = row < p.N;
      wr[mt][h] = W + (long long)(wv[mt][h] ? row : 0) * p.K;
    }
  const uint16_t *xr[NT];
  bool xv[NT];
  token_rows<NT>(xr, xv, p, x, off, T, g);

  float acc[MT][NT][4];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
      for (int i = 0; i < 4; i++) acc[mt][nt][i] = 0.0f;

  const int nck = (p.K + 31) / 32;
  const int cps = (nck + S - 1) / S;
  const int cb = split * cps, ce = min(nck, cb + cps);
  const uint4 zero = make_uint4(0, 0, 0, 0);
  for (int c0 = cb + warp * U; c0 < ce; c0 += GW * U) {
    uint4 a[MT][2][U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int kk = (c0 + u) * 32 + q * 8;
      const bool kv = (c0 + u) < ce && kk < p.K;
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) a[mt][h][u] = (kv && wv[mt][h]) ? ld_stream(wr[mt][h] + kk) : zero;
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int kk = (c0 + u) * 32 + q * 8;
      const bool kv = (c0 + u) < ce && kk < p.K;
#pragma unroll
      for (int nt = 0; nt < NT; nt++) {
        if (nt * 8 < T) { /* warp-uniform */
          const uint4 b = (kv && xv[nt]) ? __ldg((const uint4 *)(xr[nt] + kk)) : zero;
#pragma unroll
          for (int mt = 0; mt < MT; mt++) {
            mma16816(acc[mt][nt], a[mt][0][u].x, a[mt][1][u].x, a[mt][0][u].y, a[mt][1][u].y, b.x, b.y);
            mma16816(acc[mt][nt], a[mt][0][u].z, a[mt][1][u].z, a[mt][0][u].w, a[mt][1][u].w, b.z, b.w);
          }
        }
      }
    }
  }

  /* reduce the warps' partial tiles */
  constexpr int SZ = MT * NT * 4 * 32;
  float *my = red + warp * SZ;
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
      for (int i = 0; i < 4; i++) my[((mt * NT + nt) * 4 + i) * 32 + lane] = acc[mt][nt][i];
  __syncthreads();
  constexpr int NP = MT * NT * 2 * 32;
  for (int e = threadIdx.x; e < NP; e += GW * 32) {
    const int ln = e & 31, rp = (e >> 5) & 1, mn = e >> 6;
    const int mt = mn / NT, nt = mn % NT;
    const int tok = nt * 8 + (ln & 3) * 2 + rp;
    if (tok >= T) continue;
    float v0 = 0.0f, v1 = 0.0f;
#pragma unroll
    for (int w = 0; w < GW; w++) {
      v0 += red[w * SZ + (mn * 4 + rp) * 32 + ln];
      v1 += red[w * SZ + (mn * 4 + rp + 2) * 32 + ln];
    }
    const int gg = ln >> 2;
    const int tile = r0 + mt * 16; /* first row of the 16-row tile */
    const int n0 = tile + gg;
    if (S > 1) {
      float *ws = p.ws + (((long long)z * S + split) * p.T + tok) * (long long)p.N;
      if (n0 < p.N) ws[n0] = v0;
      if (n0 + 8 < p.N) ws[n0 + 8] = v1;
    } else {
      const int orow = p.omap ? p.omap[off + tok] : off + tok;
      store_out(p, obase, orow, n0, tile / 16, gg, v0, v1);
    }
  }
}

/* v6..v9: the same tiling and k split as gemm_mma_kernel, but the weights stream through a
 * per-warp shared-memory ring of ST stages filled with cp.async (16 bytes per lane, zero-fill
 * past N / K), so ST-1 chunk groups per warp are in flight without holding registers: the
 * bytes in flight no longer fall with the accumulator count (v4 at 162 registers ran one
 * 8-warp CTA per SM with 16 KB in flight). Each lane reads back only the 16-byte pieces it
 * copied itself, so a lane's cp.async.wait_group is the only synchronization the ring needs. */
template <int MT, int NT, int U, int ST, int WR>
static __global__ void __launch_bounds__(GW * 32) gemm_cp_kernel(lat_gemm_args p, int S) {
  constexpr int KW = GW / WR; /* warps per row group: they split the k chunks */
  static_assert(GW % WR == 0, "row groups must divide the warps");
  extern __shared__ __align__(16) unsigned char cp_raw[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const int z = blockIdx.z, split = blockIdx.y;
  const uint16_t *W;
  const uint16_t *x = p.x;
  long long obase = 0;
  int T = p.T, off = 0;
  /* PDL: the grouped mode learns its expert from the previous kernels, so it waits first; the
   * dense mode fills its ring with weights (constant) before it waits, overlapping the weight
   * stream with the previous kernel's tail */
  const bool grouped = p.wptr != nullptr;
  if (grouped) {
    pdl_wait();
    pdl_trigger();
    if (z >= *p.n_act) return;
    W = p.wptr[p.act_e[z]];
    T = p.act_cnt[z];
    off = p.act_off[z];
  } else {
    W = p.W + (long long)z * p.w_bstride;
    x += (long long)z * p.x_bstride;
    obase = (long long)z * p.o_bstride;
  }
  if (T <= 0) {
    pdl_wait();
    return;
  }
  if (T > NT * 8) T = NT * 8; /* the launcher never asks for more */
  const int rg = warp / KW, kw = warp % KW;
  const int r0 = (blockIdx.x * WR + rg) * 16 * MT;
  /* ring: [GW][ST][U][MT][2][32] uint4 */
  uint4 *ring = (uint4 *)cp_raw + (size_t)warp * ST * U * MT * 2 * 32;

  const uint16_t *wr[MT][2];
  bool wv[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int row = r0 + mt * 16 + g + 8 * h;
      wv[mt][h] = row < p.N;
      wr[mt][h] = W + (long long)(wv[mt][h] ? row : 0) * p.K;
    }
  float acc[MT][NT][4];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
      for (int i = 0; i < 4; i++) acc[mt][nt][i] = 0.0f;

  const int nck = (p.K + 31) / 32;
  const int cps = (nck + S - 1) / S;
  const int cb = split * cps, ce = min(nck, cb + cps);
  const int step = KW * U;
  const int first = cb + kw * U;
  const int nit = first < ce ? (ce - first + step - 1) / step : 0;

  /* issue chunk group i (chunks first + i*step + u) into stage i % ST; always commits a group */
  auto issue = [&](int i) {
    if (i < nit) {
      uint4 *st = ring + (size_t)(i % ST) * U * MT * 2 * 32;
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int c = first + i * step + u;
        const int kk = c * 32 + q * 8;
        const bool kv = c < ce && kk < p.K;
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
          for (int h = 0; h < 2; h++) {
            const bool ok = kv && wv[mt][h];
            cp_async16_z(st + ((u * MT + mt) * 2 + h) * 32 + lane, wr[mt][h] + (ok ? kk : 0), ok);
          }
      }
    }
    cp_commit();
  };
#pragma unroll
  for (int i = 0; i < ST - 1; i++) issue(i);
  if (!grouped) {
    pdl_wait();
    pdl_trigger();
  }
  /* the token rows (their map and values come from the previous kernels) */
  const uint16_t *xr[NT];
  bool xv[NT];
  token_rows<NT>(xr, xv, p, x, off, T, g);
  const uint4 zero = make_uint4(0, 0, 0, 0);
  for (int i = 0; i < nit; i++) {
    issue(i + ST - 1);
    cp_wait<ST - 1>();
    const uint4 *st = ring + (size_t)(i % ST) * U * MT * 2 * 32;
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int c = first + i * step + u;
      const int kk = c * 32 + q * 8;
      const bool kv = c < ce && kk < p.K;
      uint4 a[MT][2];
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) a[mt][h] = st[((u * MT + mt) * 2 + h) * 32 + lane];
#pragma unroll
      for (int nt = 0; nt < NT; nt++) {
        if (nt * 8 < T) { /* warp-uniform */
          const uint4 b = (kv && xv[nt]) ? __ldg((const uint4 *)(xr[nt] + kk)) : zero;
#pragma unroll
          for (int mt = 0; mt < MT; mt++) {
            mma16816(acc[mt][nt], a[mt][0].x, a[mt][1].x, a[mt][0].y, a[mt][1].y, b.x, b.y);
            mma16816(acc[mt][nt], a[mt][0].z, a[mt][1].z, a[mt][0].w, a[mt][1].w, b.z, b.w);
          }
        }
      }
    }
  }
  cp_wait<0>();
  __syncthreads(); /* the ring is reused for the reduction */

  constexpr int SZ = MT * NT * 4 * 32;
  float *red = (float *)cp_raw;
  float *my = red + warp * SZ;
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
      for (int i = 0; i < 4; i++) my[((mt * NT + nt) * 4 + i) * 32 + lane] = acc[mt][nt][i];
  __syncthreads();
  constexpr int NP = MT * NT * 2 * 32;
  for (int e = threadIdx.x; e < NP * WR; e += GW * 32) {
    const int g_ = e / NP, f = e % NP; /* row group g_, its element f */
    const int ln = f & 31, rp = (f >> 5) & 1, mn = f >> 6;
    const int mt = mn / NT, nt = mn % NT;
    const int tok = nt * 8 + (ln & 3) * 2 + rp;
    if (tok >= T) continue;
    float v0 = 0.0f, v1 = 0.0f;
#pragma unroll
    for (int w = g_ * KW; w < g_ * KW + KW; w++) {
      v0 += red[w * SZ + (mn * 4 + rp) * 32 + ln];
      v1 += red[w * SZ + (mn * 4 + rp + 2) * 32 + ln];
    }
    const int gg = ln >> 2;
    const int tile = (blockIdx.x * WR + g_) * 16 * MT + mt * 16;
    const int n0 = tile + gg;
    if (S > 1) {
      float *ws = p.ws + (((long long)z * S + split) * p.T + tok) * (long long)p.N;
      if (n0 < p.N) ws[n0] = v0;
      if (n0 + 8 < p.N) ws[n0 + 8] = v1;
    } else {
      const int orow = p.omap ? p.omap[off + tok] : off + tok;
      store_out(p, obase, orow, n0, tile / 16, gg, v0, v1);
    }
  }
}

/* Sums the S partials of split-K in split order and applies the epilogue (dense mode). */
static __global__ void gemm_reduce_kernel(lat_gemm_args p, int S) {
  pdl_wait();
  pdl_trigger();
  const int z = blockIdx.y;
  const int ncol = p.ep == LAT_EP_SWIGLU ? p.N / 2 : p.N;
  const long long total = (long long)p.T * ncol;
  const long long obase = (long long)z * p.o_bstride;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    const int t = (int)(e / ncol), c = (int)(e % ncol);
    const int orow = p.omap ? p.omap[t] : t;
    const float *base = p.ws + ((long long)z * S * p.T + t) * (long long)p.N;
    const long long sstride = (long long)p.T * p.N;
    if (p.ep == LAT_EP_SWIGLU) {
      const int n0 = (c / 8) * 16 + (c % 8);
      float v0 = 0.0f, v1 = 0.0f;
      for (int s = 0; s < S; s++) v0 += base[s * sstride + n0], v1 += base[s * sstride + n0 + 8];
      store_out(p, obase, orow, n0, c / 8, c % 8, v0, v1);
    } else {
      float v = 0.0f;
      for (int s = 0; s < S; s++) v += base[s * sstride + c];
      if (p.ep == LAT_EP_F32) ((float *)p.out)[obase + (long long)orow * p.ldo + c] = v;
      else ((uint16_t *)p.out)[obase + (long long)orow * p.ldo + c] = f2bf(v);
    }
  }
}

/* cuBLAS helpers: gather mapped rows; SwiGLU from an interleaved [T, N] bf16 buffer. */
static __global__ void gather_rows_kernel(uint16_t *dst, const uint16_t *src, int ldx, const int32_t *map, int K) {
  pdl_wait();
  pdl_trigger();
  const int j = blockIdx.x;
  const uint16_t *s = src + (long long)map[j] * ldx;
  for (int i = threadIdx.x; i < K; i += blockDim.x) dst[(long long)j * K + i] = s[i];
}

static __global__ void swiglu_rows_kernel(lat_gemm_args p, const uint16_t *tmp) {
  pdl_wait();
  pdl_trigger();
  const int t = blockIdx.x, z = blockIdx.y;
  const int ncol = p.N / 2;
  const int orow = p.omap ? p.omap[t] : t;
  const uint16_t *src = tmp + ((long long)z * p.T + t) * p.N;
  uint16_t *o = (uint16_t *)p.out + (long long)z * p.o_bstride + (long long)orow * p.ldo;
  for (int c = threadIdx.x; c < ncol; c += blockDim.x) {
    const int n0 = (c / 8) * 16 + (c % 8);
    o[c] = f2bf(silu_f(bf2f(src[n0])) * bf2f(src[n0 + 8]));
  }
}

static __global__ void scatter_rows_kernel(lat_gemm_args p, const void *tmp) {
  pdl_wait();
  pdl_trigger();
  const int t = blockIdx.x, z = blockIdx.y;
  const int orow = p.omap[t];
  const size_t es = p.ep == LAT_EP_F32 ? 4 : 2;
  const char *src = (const char *)tmp + (((long long)z * p.T + t) * p.N) * es;
  char *o = (char *)p.out + ((long long)z * p.o_bstride + (long long)orow * p.ldo) * es;
  for (int c = threadIdx.x; c < p.N; c += blockDim.x) {
    if (es == 4) ((float *)o)[c] = ((const float *)src)[c];
    else ((uint16_t *)o)[c] = ((const uint16_t *)src)[c];
  }
}

extern "C" int lat_gemm_variant_from_name(const char *name) {
  for (int v = LAT_V1_MMA_N8; v <= LAT_V11_CP_M2; v++)
    if (strcmp(name, lat_gemm_variant_name(v)) == 0) return v;
  return 0;
}

extern "C" const char *lat_gemm_variant_name(int v) {
  switch (v) {
    case LAT_V1_MMA_N8: return "v1_mma_n8";
    case LAT_V2_MMA_N16: return "v2_mma_n16";
    case LAT_V3_MMA_N32: return "v3_mma_n32";
    case LAT_V4_MMA_N64: return "v4_mma_n64";
    case LAT_V5_CUBLAS: return "v5_cublas";
    case LAT_V6_CP_N8: return "v6_cp_n8";
    case LAT_V7_CP_N16: return "v7_cp_n16";
    case LAT_V8_CP_N32: return "v8_cp_n32";
    case LAT_V9_CP_N64: return "v9_cp_n64";
    case LAT_V10_CP_W8: return "v10_cp_w8";
    case LAT_V11_CP_M2: return "v11_cp_m2";
    default: return "unknown";
  }
}

extern "C" int lat_gemm_variant_max_tokens(int v) {
  switch (v) {
    case LAT_V1_MMA_N8: return 8;
    case LAT_V2_MMA_N16: return 16;
    case LAT_V3_MMA_N32: return 32;
    case LAT_V4_MMA_N64: return 64;
    case LAT_V5_CUBLAS: return 1 << 30;
    case LAT_V6_CP_N8: return 8;
    case LAT_V7_CP_N16: return 16;
    case LAT_V8_CP_N32: return 32;
    case LAT_V9_CP_N64: return 64;
    case LAT_V10_CP_W8: return 8;
    case LAT_V11_CP_M2: return 8;
    default: return 0;
  }
}

template <int MT, int NT, int U, int ST, int WR>
static size_t gemm_smem() {
  const size_t red = (size_t)GW * MT * NT * 4 * 32 * sizeof(float);
  const size_t ring = (size_t)GW * ST * U * MT * 2 * 32 * 16;
  return ring > red ? ring : red;
}

template <int MT, int NT, int U, int ST, int WR>
static cudaError_t gemm_set_smem() {
  if constexpr (ST == 0)
    return cudaFuncSetAttribute(gemm_mma_kernel<MT, NT, U>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)gemm_smem<MT, NT, U, ST, WR>());
  else
    return cudaFuncSetAttribute(gemm_cp_kernel<MT, NT, U, ST, WR>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)gemm_smem<MT, NT, U, ST, WR>());
}

/* Tile shapes of the variants: <MT (16-row tiles per row group), NT (8-token tiles), U (chunks per
 * warp step), ST (cp.async ring stages; 0: plain register loads), WR (row groups per CTA: the
 * warps split into WR groups, each with its own 16*MT rows, the group's warps splitting k)>. */
#define V1_SHAPE 1, 1, 4, 0, 1
#define V2_SHAPE 2, 2, 2, 0, 1
#define V3_SHAPE 2, 4, 2, 0, 1
#define V4_SHAPE 2, 8, 2, 0, 1
#define V6_SHAPE 1, 1, 2, 4, 1
#define V7_SHAPE 1, 2, 2, 4, 1
#define V8_SHAPE 2, 4, 1, 4, 1
#define V9_SHAPE 2, 8, 1, 4, 1
#define V10_SHAPE 1, 1, 1, 4, 8
#define V11_SHAPE 2, 1, 2, 3, 1

extern "C" vstatus lat_kernels_init(void) {
  CUDA_CHECK(gemm_set_smem<V1_SHAPE>());
  CUDA_CHECK(gemm_set_smem<V2_SHAPE>());
  CUDA_CHECK(gemm_set_smem<V3_SHAPE>());
  CUDA_CHECK(gemm_set_smem<V4_SHAPE>());
  CUDA_CHECK(gemm_set_smem<V6_SHAPE>());
  CUDA_CHECK(gemm_set_smem<V7_SHAPE>());
  CUDA_CHECK(gemm_set_smem<V8_SHAPE>());
  CUDA_CHECK(gemm_set_smem<V9_SHAPE>());
  CUDA_CHECK(gemm_set_smem<V10_SHAPE>());
  CUDA_CHECK(gemm_set_smem<V11_SHAPE>());
  return V_OK;
}

template <int MT, int NT, int U, int ST, int WR>
static vstatus launch_mma(const lat_gemm_args *a, int num_sms, cudaStream_t stream, int *splits_out) {
  const int rows_per_cta = 16 * MT * WR;
  const int tiles = (a->N + rows_per_cta - 1) / rows_per_cta;
  const int nck = (a->K + 31) / 32;
  int S = 1;
  if (!a->wptr) {
    const long long ctas = (long long)tiles * a->Z;
    const long long target = 2LL * (num_sms > 0 ? num_sms : 132);
    if (ctas < target) S = (int)((target + ctas - 1) / ctas);
    int smax = nck / (GW / WR * U); /* every warp gets at least one chunk group */
    if (smax < 1) smax = 1;
    if (S > smax) S = smax;
    if (S > 64) S = 64;
    while (S > 1 && (size_t)S * a->Z * a->T * a->N * sizeof(float) > a->ws_bytes) S--;
    if (S > 1 && !a->ws) S = 1;
  }
  dim3 grid((unsigned)tiles, (unsigned)S, (unsigned)a->Z);
  const size_t smem = gemm_smem<MT, NT, U, ST, WR>();
  if constexpr (ST == 0)
    CUDA_CHECK(pdl_launch(gemm_mma_kernel<MT, NT, U>, grid, GW * 32, smem, stream, *a, S));
  else
    CUDA_CHECK(pdl_launch(gemm_cp_kernel<MT, NT, U, ST, WR>, grid, GW * 32, smem, stream, *a, S));
  if (S > 1) {
    const int ncol = a->ep == LAT_EP_SWIGLU ? a->N / 2 : a->N;
    long long total = (long long)a->T * ncol;
    unsigned b = (unsigned)((total + 255) / 256);
    if (b > 4096) b = 4096;
    CUDA_CHECK(pdl_launch(gemm_reduce_kernel, dim3(b, (unsigned)a->Z), 256, 0, stream, *a, S));
  }
  if (splits_out) *splits_out = S;
  return V_OK;
}

static vstatus launch_cublas(const lat_gemm_args *a, cublasHandle_t blas, cudaStream_t stream) {
  if (!blas) return VERR("lat_gemm: v5_cublas needs a cuBLAS handle");
  CUBLAS_CHECK(cublasSetStream(blas, stream));
  const float alpha = 1.0f, beta = 0.0f;
  const uint16_t *x = a->x;
  int ldx = a->ldx;
  long long xbs = a->x_bstride;
  char *wsb = (char *)a->ws;
  size_t used = 0;
  if (a->xmap) {
    if (a->Z != 1) return VERR("lat_gemm: v5_cublas with a row map needs Z = 1");
    const size_t need = (size_t)a->T * a->K * 2;
    if (need > a->ws_bytes) return VERR("lat_gemm: scratch of %zu bytes too small for gathered rows", a->ws_bytes);
    CUDA_CHECK(pdl_launch(gather_rows_kernel, a->T, 256, 0, stream, (uint16_t *)wsb, a->x, a->ldx, a->xmap, a->K));
    x = (const uint16_t *)wsb;
    ldx = a->K;
    xbs = 0;
    used = (need + 255) & ~(size_t)255;
  }
  void *out = a->out;
  int ldo = a->ldo;
  long long obs = a->o_bstride;
  const bool via_tmp = a->ep == LAT_EP_SWIGLU || a->omap;
  const size_t es = a->ep == LAT_EP_F32 ? 4 : 2;
  if (via_tmp) {
    const size_t need = (size_t)a->Z * a->T * a->N * es;
    if (used + need > a->ws_bytes) return VERR("lat_gemm: scratch too small for the cuBLAS output");
    out = wsb + used;
    ldo = a->N;
    obs = (long long)a->T * a->N;
  }
  const cudaDataType ot = a->ep == LAT_EP_F32 ? CUDA_R_32F : CUDA_R_16BF;
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, a->N, a->T, a->K, &alpha, a->W, CUDA_R_16BF,
                                          a->K, a->w_bstride, x, CUDA_R_16BF, ldx, xbs, &beta, out, ot, ldo, obs,
                                          a->Z, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  if (a->ep == LAT_EP_SWIGLU) {
    CUDA_CHECK(pdl_launch(swiglu_rows_kernel, dim3((unsigned)a->T, (unsigned)a->Z), 256, 0, stream, *a,
                          (const uint16_t *)out));
  } else if (a->omap) {
    CUDA_CHECK(pdl_launch(scatter_rows_kernel, dim3((unsigned)a->T, (unsigned)a->Z), 256, 0, stream, *a, out));
  }
  return V_OK;
}

extern "C" vstatus lat_gemm(const lat_gemm_args *a, int variant, int num_sms, cublasHandle_t blas,
                            cudaStream_t stream, int *splits_out, int *ran_out) {
  if (a->T <= 0 || a->Z <= 0 || a->N <= 0) return V_OK;
  if (a->K % 8) return VERR("lat_gemm: K %d must be a multiple of 8", a->K);
  if (a->ep == LAT_EP_SWIGLU && a->N % 16) return VERR("lat_gemm: SwiGLU needs N %% 16 == 0 (N %d)", a->N);
  if (a->wptr && variant == LAT_V5_CUBLAS) variant = 0; /* grouped experts: pick an mma variant below */
  if (a->T > 64 && variant != LAT_V5_CUBLAS) return VERR("lat_gemm: %d token rows exceed the mma variants' 64", a->T);
  if (variant != LAT_V5_CUBLAS &&
      (variant < LAT_V1_MMA_N8 || variant > LAT_V11_CP_M2 || lat_gemm_variant_max_tokens(variant) < a->T)) {
    const bool cp = variant >= LAT_V6_CP_N8; /* keep the family: register loads or the cp.async ring */
    if (cp)
      variant = a->T <= 8 ? LAT_V6_CP_N8 : a->T <= 16 ? LAT_V7_CP_N16 : a->T <= 32 ? LAT_V8_CP_N32 : LAT_V9_CP_N64;
    else
      variant = a->T <= 8 ? LAT_V1_MMA_N8 : a->T <= 16 ? LAT_V2_MMA_N16 : a->T <= 32 ? LAT_V3_MMA_N32 : LAT_V4_MMA_N64;
  }
  if (splits_out) *splits_out = 1;
  if (ran_out) *ran_out = variant;
  switch (variant) {
    case LAT_V1_MMA_N8: return launch_mma<V1_SHAPE>(a, num_sms, stream, splits_out);
    case LAT_V2_MMA_N16: return launch_mma<V2_SHAPE>(a, num_sms, stream, splits_out);
    case LAT_V3_MMA_N32: return launch_mma<V3_SHAPE>(a, num_sms, stream, splits_out);
    case LAT_V4_MMA_N64: return launch_mma<V4_SHAPE>(a, num_sms, stream, splits_out);
    case LAT_V6_CP_N8: return launch_mma<V6_SHAPE>(a, num_sms, stream, splits_out);
    case LAT_V7_CP_N16: return launch_mma<V7_SHAPE>(a, num_sms, stream, splits_out);
    case LAT_V8_CP_N32: return launch_mma<V8_SHAPE>(a, num_sms, stream, splits_out);
    case LAT_V9_CP_N64: return launch_mma<V9_SHAPE>(a, num_sms, stream, splits_out);
    case LAT_V10_CP_W8: return launch_mma<V10_SHAPE>(a, num_sms, stream, splits_out);
    case LAT_V11_CP_M2: return launch_mma<V11_SHAPE>(a, num_sms, stream, splits_out);
    case LAT_V5_CUBLAS: return launch_cublas(a, blas, stream);
    default: return VERR("lat_gemm: unknown variant %d", variant);
  }
}
