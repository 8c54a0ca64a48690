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
#define SPLIT_MIN_ITEM_BYTES (64 << 10) /* persistent grids: no split-K below this many bytes per item */

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

/* One 32-wide k chunk for every token tile: a[mt][h] holds weight rows g, g+8 of 16-row tile mt
 * (8 consecutive k at q*8, the k order the token loads use too), the token rows come from xr. */
template <int MT, int NT>
static __device__ __forceinline__ void mma_chunk(float (&acc)[MT][NT][4], const uint4 (&a)[MT][2],
                                                 const uint16_t *const (&xr)[NT], const bool (&xv)[NT], int kk, bool kv,
                                                 int T) {
  const uint4 zero = make_uint4(0, 0, 0, 0);
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

/* The reduced pair of weight rows n0 = tile + gg, n0 + 8 for token tok of the launch (tile: first
 * row of the 16-row tile): a split-K partial (S > 1, dense mode) or, through the row map from
 * off + tok, the epilogue. */
static __device__ __forceinline__ void emit_pair(const lat_gemm_args &p, int S, int z, int split, int off, int tok,
                                                 long long obase, int tile, int gg, float v0, float v1) {
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
      uint4 au[MT][2];
#pragma unroll
      for (int mt = 0; mt < MT; mt++) au[mt][0] = a[mt][0][u], au[mt][1] = a[mt][1][u];
      mma_chunk<MT, NT>(acc, au, xr, xv, kk, (c0 + u) < ce && kk < p.K, T);
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
    emit_pair(p, S, z, split, off, tok, obase, r0 + mt * 16, ln >> 2, v0, v1);
  }
}

/* v6..v11: the same tiling and k split as gemm_mma_kernel, but the weights stream through a
 * per-warp shared-memory ring of ST stages filled with cp.async (16 bytes per lane, zero-fill
 * past N / K), so ST-1 chunk groups per warp are in flight without holding registers: the
 * bytes in flight no longer fall with the accumulator count (v4 at 162 registers ran one
 * 8-warp CTA per SM with 16 KB in flight). A copy instruction covers whole 16*U-byte row
 * segments (128 bytes at U = 2; lane (g, q)'s own fragment pieces would be 64 bytes per row),
 * so lanes read back pieces other lanes copied: a __syncwarp after the wait, and one before a
 * stage is refilled.
 *
 * Persistent: the work items (z, split, tile; tile fastest) are dealt to the CTAs in turn
 * (item = blockIdx.x + i * gridDim.x), and each warp's ring runs on across its items: while a
 * CTA reduces one item the weights of the next are already in flight, and no CTA starts
 * cold after the first. With gridDim.x = the item count this is the one-CTA-per-item kernel. */

/* A warp's share of one work item. */
struct cp_share {
  int r0;            /* first weight row of the warp's row group */
  int first;         /* the warp's first chunk (32 k) */
  int ce;            /* end chunk of the item's k split */
  int nit;           /* chunk groups the warp takes in one pass (0: none, or an expert slot without tokens) */
  int passes;        /* passes over the item's weights: one per NT*8 of its tokens (grouped; dense: 1) */
};

/* Work item `item` decomposed: z slice / expert slot, k split, row tile. */
struct cp_item {
  int z, split, tile;
};

static __device__ __forceinline__ cp_item cp_item_of(int item, int S, int tiles) {
  const int per_z = S * tiles;
  cp_item it;
  it.z = item / per_z;
  const int rem = item - it.z * per_z;
  it.split = rem / tiles;
  it.tile = rem - it.split * tiles;
  return it;
}

/* The tokens of item `it`: the expert's count (grouped: read only after pdl_wait) or the launch's T. */
static __device__ __forceinline__ int cp_tokens(const lat_gemm_args &p, const cp_item &it) {
  return p.wptr ? p.act_cnt[it.z] : p.T;
}

/* The warp's share of item `it` with T tokens (row group rg, k group kw). */
template <int MT, int NT, int U, int WR>
static __device__ __forceinline__ cp_share cp_share_of(const lat_gemm_args &p, int S, const cp_item &it, int T, int rg,
                                                       int kw) {
  constexpr int KW = GW / WR;
  cp_share s;
  s.r0 = (it.tile * WR + rg) * 16 * MT;
  const int nck = (p.K + 31) / 32, cps = (nck + S - 1) / S;
  const int cb = it.split * cps;
  s.ce = min(nck, cb + cps);
  s.first = cb + kw * U;
  s.nit = T > 0 && s.first < s.ce ? (s.ce - s.first + KW * U - 1) / (KW * U) : 0;
  s.passes = p.wptr ? (T + NT * 8 - 1) / (NT * 8) : 1;
  return s;
}

/* At least 2 CTAs per SM: v9's 140 registers otherwise left one (batch 64 9.5 vs 8.9 ms). */
template <int MT, int NT, int U, int ST, int WR>
static __global__ void __launch_bounds__(GW * 32, 2) gemm_cp_kernel(lat_gemm_args p, int S, int tiles) {
  constexpr int KW = GW / WR;            /* warps per row group: they split the k chunks */
  constexpr int STAGE = U * MT * 2 * 32; /* uint4 of one ring stage of one warp */
  constexpr int SEGS = 4 * U;            /* 16-byte segments of one row in a chunk group */
  constexpr int RI = 32 / SEGS;          /* rows one copy instruction covers */
  static_assert(32 % SEGS == 0, "a copy instruction covers whole row segments");
  constexpr bool SHARED_PIECES = SEGS > 4; /* at U = 1 every lane copies exactly its own fragment pieces */
  /* stage layout [16*MT rows][SEGS]: a copy instruction reads RI rows of 16*U contiguous bytes
   * each (128 bytes at U = 2); the lane computing on (row, segment) reads it back after a
   * __syncwarp. Odd rows swap the halves of their segments so that the 8 lanes of a quarter
   * warp (rows g and g+1, segments 4u+q) hit 8 different 16-byte bank groups. */
  auto ring_idx = [](int rho, int sg) { return rho * SEGS + (sg ^ ((rho & 1) * (SEGS >= 8 ? 4 : 0))); };
  constexpr int NR = NT < 2 * U ? NT : 2 * U; /* n-tiles per reduction round: MT*NR*4*32 floats fill one stage */
  static_assert(GW % WR == 0, "row groups must divide the warps");
  static_assert(NT % NR == 0, "reduction rounds must cover the n-tiles");
  extern __shared__ __align__(16) unsigned char cp_raw[];
  __shared__ int red_stage[GW]; /* the ring stage each warp reduces through */
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const int rg = warp / KW, kw = warp % KW;
  const int step = KW * U;
  /* ring: [GW][ST][16*MT rows][SEGS] uint4 */
  uint4 *ring = (uint4 *)cp_raw + (size_t)warp * ST * STAGE;
  /* PDL: the grouped mode learns its experts from the previous kernels, so it waits first; the
   * dense mode fills its ring with weights (constant) before it waits, overlapping the weight
   * stream with the previous kernel's tail */
  const bool grouped = p.wptr != nullptr;
  int n_items = p.Z * S * tiles;
  if (grouped) {
    pdl_wait();
    pdl_trigger();
    n_items = min(*p.n_act, p.Z) * S * tiles;
  }

  /* The issue cursor: the warp's next chunk group to copy, ST-1 groups ahead of the one it
   * computes on, across item boundaries (it visits the same items in the same order). */
  int is_item = blockIdx.x, is_g = 0, is_left = 0; /* group within the pass, groups left in the item */
  cp_share is{};
  const uint16_t *is_W = nullptr; /* the item's weights: z slice or expert (grouped: read after pdl_wait) */
  /* opens item `item` for the issue cursor */
  auto open = [&](int item) {
    const cp_item it = cp_item_of(item, S, tiles);
    is = cp_share_of<MT, NT, U, WR>(p, S, it, cp_tokens(p, it), rg, kw);
    is_W = p.wptr ? p.wptr[p.act_e[it.z]] : p.W + (long long)it.z * p.w_bstride;
    is_left = is.nit * is.passes;
  };
  if (is_item < n_items) open(is_item);
  /* copies the next chunk group into stage j % ST (j: the group's number in the warp's stream);
   * always commits a group, empty past the last item */
  auto issue = [&](int j) {
    while (is_left == 0 && is_item < n_items) {
      is_item += gridDim.x;
      is_g = 0;
      if (is_item < n_items) open(is_item);
    }
    if (is_left > 0) {
      uint4 *st = ring + (size_t)(j % ST) * STAGE;
      const int k0 = (is.first + is_g * step) * 32; /* the group's U chunks are consecutive */
#pragma unroll
      for (int n = 0; n < MT * 16 / RI; n++) {
        const int rho = n * RI + lane / SEGS, sg = lane % SEGS; /* row of the item's 16*MT, 16-byte segment */
        const int row = is.r0 + rho, kk = k0 + sg * 8;
        const bool ok = kk < is.ce * 32 && kk < p.K && row < p.N;
        cp_async16_z(st + ring_idx(rho, sg), is_W + (ok ? (long long)row * p.K + kk : 0), ok);
      }
      if (++is_g == is.nit) is_g = 0; /* the next token pass reads the same weights again */
      is_left--;
    }
    cp_commit();
  };
#pragma unroll
  for (int i = 0; i < ST - 1; i++) issue(i);
  if (!grouped) {
    pdl_wait();
    pdl_trigger();
  }

  int j = 0; /* chunk groups the warp has computed on */
  for (int item = blockIdx.x; item < n_items; item += gridDim.x) {
    const cp_item it = cp_item_of(item, S, tiles);
    const uint16_t *x = p.x;
    long long obase = 0;
    const int T = cp_tokens(p, it);
    int off = 0;
    if (grouped) {
      off = p.act_off[it.z];
    } else {
      x += (long long)it.z * p.x_bstride;
      obase = (long long)it.z * p.o_bstride;
    }
    if (T <= 0) continue; /* block-uniform; the issue cursor skipped it too */
    const cp_share sh = cp_share_of<MT, NT, U, WR>(p, S, it, T, rg, kw);
    /* grouped: the expert's tokens in passes of NT*8 (dense: the launcher keeps T <= NT*8) */
    for (int t0 = 0; t0 < T; t0 += NT * 8) {
      const int Tp = min(NT * 8, T - t0); /* tokens of this pass */
      /* the token rows (their map and values come from the previous kernels) */
      const uint16_t *xr[NT];
      bool xv[NT];
      token_rows<NT>(xr, xv, p, x, off + t0, Tp, g);
      float acc[MT][NT][4];
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
          for (int i = 0; i < 4; i++) acc[mt][nt][i] = 0.0f;

      for (int i = 0; i < sh.nit; i++, j++) {
        if constexpr (SHARED_PIECES) __syncwarp(); /* every lane is done with group j-1's stage: refilled next */
        issue(j + ST - 1);
        cp_wait<ST - 1>();
        if constexpr (SHARED_PIECES) __syncwarp(); /* the other lanes' copies of group j are visible */
        const uint4 *st = ring + (size_t)(j % ST) * STAGE;
#pragma unroll
        for (int u = 0; u < U; u++) {
          const int c = sh.first + i * step + u;
          const int kk = c * 32 + q * 8;
          const bool kv = c < sh.ce && kk < p.K;
          uint4 a[MT][2];
#pragma unroll
          for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++) a[mt][h] = st[ring_idx(mt * 16 + g + 8 * h, u * 4 + q)];
          mma_chunk<MT, NT>(acc, a, xr, xv, kk, kv, Tp);
        }
      }

      /* Reduce the warps' partial tiles through each warp's free ring stage: the one it computed
       * on last ((j + ST - 1) % ST), which its next copy will refill; the other ST-1 stages hold
       * the next weights in flight. NR n-tiles per round. */
      __syncwarp(); /* the free stage was group j-1's: every lane has read it (also at U = 1, where the
                       stage's pieces are the lanes' own, so the memory model orders the overwrite) */
      if (lane == 0) red_stage[warp] = (j + ST - 1) % ST;
      float *my = (float *)(ring + (size_t)((j + ST - 1) % ST) * STAGE);
#pragma unroll
      for (int r = 0; r < NT / NR; r++) {
        if (r * NR * 8 >= Tp) break; /* block-uniform: these n-tiles hold no token */
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
          for (int nn = 0; nn < NR; nn++)
#pragma unroll
            for (int i = 0; i < 4; i++) my[((mt * NR + nn) * 4 + i) * 32 + lane] = acc[mt][r * NR + nn][i];
        __syncthreads();
        constexpr int NP = MT * NR * 2 * 32;
        for (int e = threadIdx.x; e < NP * WR; e += GW * 32) {
          const int g_ = e / NP, f = e % NP; /* row group g_, its element f */
          const int ln = f & 31, rp = (f >> 5) & 1, mn = f >> 6;
          const int mt = mn / NR, nt = r * NR + mn % NR;
          const int tok = nt * 8 + (ln & 3) * 2 + rp; /* token of the pass */
          if (tok >= Tp) continue;
          float v0 = 0.0f, v1 = 0.0f;
#pragma unroll
          for (int w = g_ * KW; w < g_ * KW + KW; w++) {
            const float *rw = (const float *)((const uint4 *)cp_raw + (size_t)(w * ST + red_stage[w]) * STAGE);
            v0 += rw[(mn * 4 + rp) * 32 + ln];
            v1 += rw[(mn * 4 + rp + 2) * 32 + ln];
          }
          emit_pair(p, S, it.z, it.split, off, t0 + tok, obase, (it.tile * WR + g_) * 16 * MT + mt * 16, ln >> 2, v0,
                    v1);
        }
        __syncthreads(); /* the stages are written again: next round, or the next copies */
      }
    }
  }
  cp_wait<0>();
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
#define NAME_CASE(num, id, name, family, max_tokens, what) \
  case id: return #name;
    LAT_GEMM_VARIANTS(NAME_CASE)
#undef NAME_CASE
    default: return "unknown";
  }
}

extern "C" int lat_gemm_variant_max_tokens(int v) {
  switch (v) {
#define TOKENS_CASE(num, id, name, family, max_tokens, what) \
  case id: return max_tokens;
    LAT_GEMM_VARIANTS(TOKENS_CASE)
#undef TOKENS_CASE
    default: return 0;
  }
}

/* Shared memory: the cp.async ring (the reduction reuses a stage of it), or the reduction
 * buffer of the register-load kernels. */
template <int MT, int NT, int U, int ST, int WR>
static size_t gemm_smem() {
  if constexpr (ST > 0) return (size_t)GW * ST * U * MT * 2 * 32 * 16;
  return (size_t)GW * MT * NT * 4 * 32 * sizeof(float);
}

/* CTAs of a cp.async variant one SM holds at once (lat_kernels_init measures it; 0 before). */
template <int MT, int NT, int U, int ST, int WR>
static int &cp_ctas_per_sm() {
  static int n = 0;
  return n;
}

template <int MT, int NT, int U, int ST, int WR>
static cudaError_t gemm_set_smem() {
  const int smem = (int)gemm_smem<MT, NT, U, ST, WR>();
  if constexpr (ST == 0) {
    return cudaFuncSetAttribute(gemm_mma_kernel<MT, NT, U>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  } else {
    cudaError_t e =
        cudaFuncSetAttribute(gemm_cp_kernel<MT, NT, U, ST, WR>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return e;
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&cp_ctas_per_sm<MT, NT, U, ST, WR>(),
                                                         gemm_cp_kernel<MT, NT, U, ST, WR>, GW * 32, smem);
  }
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

/* Per family: the shared-memory setup of a variant and its launch (LAT_GEMM_VARIANTS). */
#define INIT_MMA(num) CUDA_CHECK(gemm_set_smem<V##num##_SHAPE>());
#define INIT_CUBLAS(num)
#define LAUNCH_MMA(num) return launch_mma<V##num##_SHAPE>(a, num_sms, stream, splits_out);
#define LAUNCH_CUBLAS(num) return launch_cublas(a, blas, stream);

extern "C" vstatus lat_kernels_init(void) {
#define INIT_VARIANT(num, id, name, family, max_tokens, what) INIT_##family(num)
  LAT_GEMM_VARIANTS(INIT_VARIANT)
#undef INIT_VARIANT
  return V_OK;
}

/* Split-K for the one-CTA-per-item launch (max_ctas < 0) and the register-load kernels: enough
 * CTAs for two per SM. */
static int fill_splits(long long units, int num_sms) {
  const long long target = 2LL * (num_sms > 0 ? num_sms : 132);
  return units < target ? (int)((target + units - 1) / units) : 1;
}

/* Split-K for a persistent grid of `slots` CTAs over `units` row tiles: the factor whose items
 * spread most evenly over the slots (items / (slots * rounds), rounds = items per CTA, rounded up),
 * less a charge for splitting at all (partials and a reduce kernel) and per split; only factors
 * that leave no split without chunks. o_proj at batch 1 on an H200 (448 tiles, 396 slots): 7. */
static int balanced_splits(long long units, long long slots, int nck, int smax) {
  int best = 1;
  double best_score = -1.0;
  for (int s = 1; s <= smax; s++) {
    const int cps = (nck + s - 1) / s;
    if ((long long)(s - 1) * cps >= nck) continue;
    const long long items = units * s, rounds = (items + slots - 1) / slots;
    const double score = (double)items / ((double)rounds * slots) - (s > 1 ? 0.03 : 0.0) - 0.005 * s;
    if (score > best_score + 1e-9) best = s, best_score = score;
  }
  return best;
}

template <int MT, int NT, int U, int ST, int WR>
static vstatus launch_mma(const lat_gemm_args *a, int num_sms, cudaStream_t stream, int *splits_out) {
  const int rows_per_cta = 16 * MT * WR;
  const int tiles = (a->N + rows_per_cta - 1) / rows_per_cta;
  const int nck = (a->K + 31) / 32;
  const long long units = (long long)tiles * a->Z;
  /* CTAs resident at once: the persistent grid's size (cp.async variants, max_ctas >= 0) */
  long long slots = 0;
  if constexpr (ST > 0) {
    if (a->max_ctas >= 0) slots = (long long)cp_ctas_per_sm<MT, NT, U, ST, WR>() * (num_sms > 0 ? num_sms : 132);
    /* a cap applies even before lat_kernels_init measured the occupancy (slots 0) */
    if (a->max_ctas > 0 && (slots == 0 || a->max_ctas < slots)) slots = a->max_ctas;
  }
  int S = 1;
  if (!a->wptr) {
    int smax = nck / (GW / WR * U); /* every warp gets at least one chunk group */
    if (smax < 1) smax = 1;
    if (smax > 64) smax = 64;
    while (smax > 1 && (size_t)smax * a->Z * a->T * a->N * sizeof(float) > a->ws_bytes) smax--;
    if (!a->ws) smax = 1;
    /* a persistent grid splits k only where an item carries enough bytes for bandwidth to matter
     * (W_UK on v10, 32 KB items: 4.84 us whole against 7.73 split in two with a reduce kernel) */
    const long long item_bytes = (long long)rows_per_cta * a->K * 2;
    if (slots > 0 && item_bytes < SPLIT_MIN_ITEM_BYTES) smax = 1;
    S = slots > 0 ? balanced_splits(units, slots, nck, smax) : fill_splits(units, num_sms);
    if (S > smax) S = smax;
  }
  const size_t smem = gemm_smem<MT, NT, U, ST, WR>();
  if constexpr (ST == 0) {
    CUDA_CHECK(pdl_launch(gemm_mma_kernel<MT, NT, U>, dim3((unsigned)tiles, (unsigned)S, (unsigned)a->Z), GW * 32, smem,
                          stream, *a, S));
  } else {
    const long long items = units * S;
    const long long ctas = slots > 0 && slots < items ? slots : items;
    CUDA_CHECK(
        pdl_launch(gemm_cp_kernel<MT, NT, U, ST, WR>, dim3((unsigned)ctas), GW * 32, smem, stream, *a, S, tiles));
  }
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
  /* grouped mode: a cp.async variant takes any T (an expert's tokens in passes of its token tile) */
  const bool passes = a->wptr && variant >= LAT_V6_CP_N8 && variant <= LAT_V11_CP_M2;
  if (variant != LAT_V5_CUBLAS && (variant < LAT_V1_MMA_N8 || variant > LAT_V11_CP_M2 ||
                                   (!passes && lat_gemm_variant_max_tokens(variant) < a->T))) {
    const bool cp = variant >= LAT_V6_CP_N8; /* keep the family: register loads or the cp.async ring */
    if (cp)
      variant = a->T <= 8 ? LAT_V6_CP_N8 : a->T <= 16 ? LAT_V7_CP_N16 : a->T <= 32 ? LAT_V8_CP_N32 : LAT_V9_CP_N64;
    else
      variant = a->T <= 8 ? LAT_V1_MMA_N8 : a->T <= 16 ? LAT_V2_MMA_N16 : a->T <= 32 ? LAT_V3_MMA_N32 : LAT_V4_MMA_N64;
  }
  if (splits_out) *splits_out = 1;
  if (ran_out) *ran_out = variant;
  switch (variant) {
#define LAUNCH_CASE(num, id, name, family, max_tokens, what) \
  case id: LAUNCH_##family(num)
    LAT_GEMM_VARIANTS(LAUNCH_CASE)
#undef LAUNCH_CASE
    default: return VERR("lat_gemm: unknown variant %d", variant);
  }
}
