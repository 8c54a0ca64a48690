/* MLA decode on tensor cores, hand-written (variant "v3_mma"): absorbed attention over the latent
 * cache with the heads of a token as the M dimension of mma.sync, so each cached key is read from
 * memory once per token row and head block instead of once per head group (v1_split) and no
 * score matrix goes through global memory (v2_gemm).
 *
 * Block = (head block of HB = 16 MT heads, split s of the keys, token row t); MM_WARPS warps.
 *   query   q = [q_lat (fp32) | q_rot (bf16)] per head, split into bf16 hi + lo (hi + lo keeps ~16
 *           bits of q_lat, as v2_gemm); staged once through shared memory into registers: warp w
 *           holds the A fragments of head tile w % MT for its range of k-steps (16 columns each).
 *   keys    tiles of MM_NK cache rows through a ring of MM_NS shared-memory stages filled by
 *           cp.async (MM_NS - 1 tiles in flight while one is computed; rows past the split zero-filled).
 *   phase 1 partial scores S_kr = Q[:, cols of k-range kr] K^T (hi and lo MMAs into one fp32
 *           accumulator) -> shared memory; the KR = MM_WARPS / MT k-ranges are summed in phase 2.
 *   phase 2 online softmax per head row (one warp per row, one key per lane): running max m, the
 *           correction e^(m_old - m_new), P = bf16(e^(s - m)), l += sum of the rounded P.
 *   phase 3 O = O corr + P V: warp w owns head tile w % MT and up to 8 NT latent columns; V is the
 *           tile's first kl columns, read transposed by ldmatrix.
 * Output: the split partials of lat_mla_attn (pm, pl natural-log domain; pacc = unnormalized sum),
 * merged by lat_mla_combine. */
#include <math.h>

#include "kernels/latency_device.h"
#include "kernels/latency_kernels.h"
#include "reference/cuda/cuda_common.h"
#include "reference/cuda/cuda_pdl.h"

#ifndef MM_WARPS
#define MM_WARPS 16  /* 16 warps: 4 per scheduler to hide the MMA / ldmatrix / shuffle latencies */
#endif
#define MM_NK 32     /* keys per tile: one key per lane in phase 2 */
#ifndef MM_NS
#define MM_NS 2 /* key-tile stages in shared memory (4 measured no faster on the H200) */
#endif
#define MM_QKS (MM_WARPS == 8 ? 9 : 5) /* most k-steps of the query a warp holds: 576 columns at MT 2 */
#define MM_MAXNT (MM_WARPS == 8 ? 16 : 8) /* most column tiles per warp (16 at 16 warps spills) */
#define MM_PAD 8     /* bf16 elements of padding per shared row: rows start 16 bytes apart mod 128 */
#define MM_LOG2E 1.4426950408889634f
#define MM_LN2 0.6931471805599453f
/* the query's hi and lo rows (at most 32 heads each) are staged in the key stages before the first tile */
static_assert(2 * 32 <= MM_NS * MM_NK, "query staging must fit the key-tile stages");
static_assert(16 % MM_WARPS == 0, "phase 2: every warp owns whole head rows of a 16-head tile");

/* m16 head tiles per block (MT): 2 (32 heads) by default above 16 heads, 1 (16 heads) when asked
 * for (hb 16) or when there are no more than 16 heads. */
static int mm_tiles(int H, int hb) { return H > 16 && hb != 16 ? 2 : 1; }
/* n8 column tiles of the latent each warp accumulates in phase 3: the kl / 8 tiles over the
 * MM_WARPS / MT warps of a head tile, rounded up to a power of two (warps past kl skip theirs). */
static int mm_nt(int MT, int kl) {
  const int KR = MM_WARPS / MT, need = (kl / 8 + KR - 1) / KR;
  int nt = 1;
  while (nt < need) nt *= 2;
  return nt;
}
static bool mm_fits(int MT, int kl, int r) {
  const int W = kl + r, KR = MM_WARPS / MT;
  return mm_nt(MT, kl) <= MM_MAXNT && (W / 16 + KR - 1) / KR <= MM_QKS;
}

extern "C" int lat_mla_mma_supported(int H, int kl, int r) {
  const int W = kl + r;
  if (H < 1 || kl < 8 || kl % 8 || r < 0 || W % 16) return 0;
  return mm_fits(1, kl, r) && (H <= 16 || mm_fits(2, kl, r));
}

/* Fewest key tiles per split: a block's fixed costs (the query into registers, the partials out)
 * are paid once per split. One tile per split (66 blocks at batch 1, 1k keys, instead of 34)
 * measured no faster in the attention and slower in the combine (H200, fourth session). */
#define MM_MIN_TILES 2
extern "C" int lat_mla_mma_splits(int T, int H, int max_keys, int num_sms, int hb) {
  const int MT = mm_tiles(H, hb), blocks = T * ((H + 16 * MT - 1) / (16 * MT));
  /* one block per SM (shared memory and registers allow no second): round down, a partial
   * second wave would double the step */
  int S = (num_sms > 0 ? num_sms : 132) / blocks;
  const int by_len = (max_keys + MM_MIN_TILES * MM_NK - 1) / (MM_MIN_TILES * MM_NK);
  if (S > by_len) S = by_len;
  if (S > LAT_MLA_MAX_SPLITS) S = LAT_MLA_MAX_SPLITS;
  return S < 1 ? 1 : S;
}

/* 16-head blocks when 32-head ones would leave more than half the SMs idle (batch 1 at short
 * contexts: 34 blocks at 1k keys), else 32. */
extern "C" int lat_mla_mma_heads(int T, int H, int max_keys, int num_sms) {
  if (H <= 16) return 16;
  const int sms = num_sms > 0 ? num_sms : 132;
  const int blocks32 = T * ((H + 31) / 32) * lat_mla_mma_splits(T, H, max_keys, sms, 32);
  return 2 * blocks32 <= sms ? 16 : 32;
}

static size_t mm_smem(int MT, int kl, int r) {
  const int WP = kl + r + MM_PAD, HB = 16 * MT;
  return (size_t)MM_NS * MM_NK * WP * 2                   /* key tiles (the query staging first) */
         + (size_t)MM_WARPS * 16 * MM_NK * sizeof(float)  /* partial scores [KR][HB][NK] */
         + (size_t)HB * (MM_NK + MM_PAD) * 2              /* P */
         + (size_t)HB * sizeof(float);                    /* corrections */
}

template <int MT, int NT>
static __global__ void __launch_bounds__(MM_WARPS * 32, 1)
    mla_mma_kernel(float *pm, float *pl, float *pacc, const float *qlat, const uint16_t *q, int q_ld, int q_hstride,
                   int q_rot_off, const uint16_t *cache, const int32_t *slot, const int32_t *pos, int H, int kl, int r,
                   int max_ctx, int S, float scale, lat_qrope rq) {
  constexpr int HB = 16 * MT, KR = MM_WARPS / MT, PS = MM_NK + MM_PAD, RPW = HB / MM_WARPS; /* rows per warp */
  extern __shared__ __align__(16) unsigned char mm_raw[];
  const int W = kl + r, WP = W + MM_PAD, nch = W / 8, KS = W / 16, ksw = (KS + KR - 1) / KR;
  uint16_t *tile = (uint16_t *)mm_raw;                                  /* [NS][NK][WP] */
  float *spart = (float *)(tile + MM_NS * MM_NK * WP);                  /* [KR][HB][NK] */
  uint16_t *P = (uint16_t *)(spart + KR * HB * MM_NK);                  /* [HB][PS] */
  float *corr_s = (float *)(P + HB * PS);                               /* [HB] */
  const int hb = blockIdx.x, s = blockIdx.y, t = blockIdx.z;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c4 = lane & 3;
  const int h0 = hb * HB;
  pdl_wait();
  pdl_trigger();

  /* query hi / lo rows into the (not yet used) key tiles, then into registers */
  uint16_t *qhi = tile, *qlo = tile + MM_NK * WP;
  const float qp = (float)pos[t];
  for (int i = threadIdx.x; i < HB * W; i += blockDim.x) {
    const int hh = i / W, c = i % W, h = h0 + hh;
    float v = 0.0f;
    if (h < H && c < kl) {
      v = qlat[((long long)t * H + h) * kl + c];
    } else if (h < H) {
      const uint16_t *qr = q + (long long)t * q_ld + (long long)h * q_hstride + q_rot_off;
      const int j = c - kl, hd = r / 2, pi = j < hd ? j : j - hd; /* pair index */
      if (!rq.inv_freq) {
        v = bf2f(qr[j]);
      } else { /* RoPE here instead of curef_rope over q: the bf16 rounding it would store */
        const float x1 = bf2f(rq.interleave ? qr[2 * pi] : qr[pi]);
        const float x2 = bf2f(rq.interleave ? qr[2 * pi + 1] : qr[hd + pi]);
        float o1, o2;
        rope_pair(x1, x2, qp, rq.inv_freq[pi], rq.attn_factor, &o1, &o2);
        v = bf2f(f2bf(j < hd ? o1 : o2));
      }
    }
    const uint16_t hi = f2bf(v);
    qhi[hh * WP + c] = hi;
    qlo[hh * WP + c] = f2bf(v - bf2f(hi));
  }
  __syncthreads();
  const int mt1 = warp % MT, kr = warp / MT, kbeg = kr * ksw, kend = min(KS, kbeg + ksw);
  unsigned qa[MM_QKS][2][4];
  {
    const int row = mt1 * 16 + (lane & 7) + 8 * ((lane >> 3) & 1), col = 8 * (lane >> 4);
#pragma unroll
    for (int i = 0; i < MM_QKS; i++)
      if (kbeg + i < kend) {
        const int k0 = (kbeg + i) * 16 + col;
        ldsm_x4(qa[i][0][0], qa[i][0][1], qa[i][0][2], qa[i][0][3], qhi + row * WP + k0);
        ldsm_x4(qa[i][1][0], qa[i][1][1], qa[i][1][2], qa[i][1][3], qlo + row * WP + k0);
      }
  }
  __syncthreads(); /* the staging area becomes the key tiles */

  const int nk = pos[t] + 1;
  int chunk = (nk + S - 1) / S;
  chunk = (chunk + MM_NK - 1) / MM_NK * MM_NK;
  const int j0 = s * chunk, j1 = min(nk, j0 + chunk);
  const int ntile = j1 > j0 ? (j1 - j0 + MM_NK - 1) / MM_NK : 0;
  const uint16_t *cbase = cache + (long long)slot[t] * max_ctx * W;

  /* phase 2 state: warp w owns head rows w, w + MM_WARPS, .. (RPW rows), all lanes hold the values */
  float m_row[RPW], l_row[RPW];
#pragma unroll
  for (int i = 0; i < RPW; i++) m_row[i] = -INFINITY, l_row[i] = 0.0f;
  /* phase 3 accumulators: head tile mt3, columns [c0, c0 + 8 NT) */
  const int mt3 = warp % MT, c0 = (warp / MT) * 8 * NT;
  float o[NT][4];
#pragma unroll
  for (int n = 0; n < NT; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

  auto issue = [&](int k) {
    const int kb = j0 + k * MM_NK, kn = min(MM_NK, j1 - kb);
    uint16_t *dst = tile + (k % MM_NS) * MM_NK * WP;
    for (int i = threadIdx.x; i < MM_NK * nch; i += blockDim.x) {
      const int key = i / nch, c = i % nch;
      const bool ok = key < kn;
      cp_async16_z(dst + key * WP + c * 8, cbase + (long long)(ok ? kb + key : kb) * W + c * 8, ok);
    }
  };

  for (int k = 0; k < MM_NS - 1; k++) {
    if (k < ntile) issue(k);
    cp_commit();
  }
  for (int k = 0; k < ntile; k++) {
    cp_wait<MM_NS - 2>(); /* tile k has landed (one commit group per tile, empty ones past the end) */
    __syncthreads();      /* ... for every thread's copies; and stage (k - 1) % NS is no longer read */
    if (k + MM_NS - 1 < ntile) issue(k + MM_NS - 1);
    cp_commit();
    const uint16_t *tb = tile + (k % MM_NS) * MM_NK * WP;
    const int kn = min(MM_NK, j1 - (j0 + k * MM_NK));

    /* phase 1: partial scores of head tile mt1 over k-range kr, the tile's 4 n8 key groups */
    {
      float sc[MM_NK / 8][4];
#pragma unroll
      for (int n = 0; n < MM_NK / 8; n++) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
      const int brow = lane & 7, bcol = 8 * ((lane >> 3) & 1);
#pragma unroll
      for (int i = 0; i < MM_QKS; i++) {
        if (kbeg + i >= kend) break;
        const int k0 = (kbeg + i) * 16 + bcol;
        unsigned b[MM_NK / 8][2];
#pragma unroll
        for (int n = 0; n < MM_NK / 8; n++) ldsm_x2(b[n][0], b[n][1], tb + (n * 8 + brow) * WP + k0);
        /* hi for the four key groups, then lo: back-to-back MMAs go to different accumulators */
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
          for (int n = 0; n < MM_NK / 8; n++)
            mma16816(sc[n], qa[i][h][0], qa[i][h][1], qa[i][h][2], qa[i][h][3], b[n][0], b[n][1]);
      }
      float *sp = spart + (kr * HB + mt1 * 16) * MM_NK;
#pragma unroll
      for (int n = 0; n < MM_NK / 8; n++) {
        *(float2 *)(sp + g * MM_NK + n * 8 + 2 * c4) = make_float2(sc[n][0], sc[n][1]);
        *(float2 *)(sp + (g + 8) * MM_NK + n * 8 + 2 * c4) = make_float2(sc[n][2], sc[n][3]);
      }
    }
    __syncthreads();

    /* phase 2: online softmax, one warp per head row, lane = key (log2 domain) */
#pragma unroll
    for (int i = 0; i < RPW; i++) {
      const int row = warp + MM_WARPS * i;
      float v = 0.0f;
#pragma unroll
      for (int q2 = 0; q2 < KR; q2++) v += spart[(q2 * HB + row) * MM_NK + lane];
      const float x = lane < kn ? v * scale * MM_LOG2E : -INFINITY;
      float mx = x;
      for (int o2 = 16; o2 > 0; o2 >>= 1) mx = fmaxf(mx, __shfl_xor_sync(VOUCH_FULL_MASK, mx, o2));
      const float mn = fmaxf(m_row[i], mx);
      const float corr = m_row[i] == -INFINITY ? 0.0f : exp2f(m_row[i] - mn);
      const uint16_t pb = f2bf(lane < kn ? exp2f(x - mn) : 0.0f);
      float sum = bf2f(pb);
      for (int o2 = 16; o2 > 0; o2 >>= 1) sum += __shfl_xor_sync(VOUCH_FULL_MASK, sum, o2);
      l_row[i] = l_row[i] * corr + sum;
      m_row[i] = mn;
      P[row * PS + lane] = pb;
      if (lane == 0) corr_s[row] = corr;
    }
    __syncthreads();

    /* phase 3: O = O corr + P V over the tile's keys */
    {
      const float cg0 = corr_s[mt3 * 16 + g], cg8 = corr_s[mt3 * 16 + g + 8];
#pragma unroll
      for (int n = 0; n < NT; n++) o[n][0] *= cg0, o[n][1] *= cg0, o[n][2] *= cg8, o[n][3] *= cg8;
      const int arow = mt3 * 16 + (lane & 7) + 8 * ((lane >> 3) & 1), acol = 8 * (lane >> 4);
      const int vrow = (lane & 7) + 8 * ((lane >> 3) & 1);
#pragma unroll
      for (int kk = 0; kk < MM_NK / 16; kk++) {
        unsigned a0, a1, a2, a3;
        ldsm_x4(a0, a1, a2, a3, P + arow * PS + kk * 16 + acol);
#pragma unroll
        for (int n = 0; n < NT; n++) {
          if (c0 + n * 8 >= kl) break; /* warp-uniform: kl not a multiple of the warps' columns */
          unsigned b0, b1;
          ldsm_x2_trans(b0, b1, tb + (kk * 16 + vrow) * WP + c0 + n * 8);
          mma16816(o[n], a0, a1, a2, a3, b0, b1);
        }
      }
    }
    /* no barrier here: the next iteration's first barrier orders phase 3's reads of this stage,
     * P and the corrections before anything rewrites them */
  }
  cp_wait<0>();

  /* partials: head h, split s */
  const long long TH = (long long)t * H;
#pragma unroll
  for (int n = 0; n < NT; n++) {
    if (c0 + n * 8 >= kl) break;
    const int col = c0 + n * 8 + 2 * c4, ha = h0 + mt3 * 16 + g, hb8 = ha + 8;
    if (ha < H) *(float2 *)(pacc + ((TH + ha) * S + s) * kl + col) = make_float2(o[n][0], o[n][1]);
    if (hb8 < H) *(float2 *)(pacc + ((TH + hb8) * S + s) * kl + col) = make_float2(o[n][2], o[n][3]);
  }
  if (lane == 0)
#pragma unroll
    for (int i = 0; i < RPW; i++) {
      const int h = h0 + warp + MM_WARPS * i;
      if (h >= H) continue;
      pm[(TH + h) * S + s] = m_row[i] == -INFINITY ? -INFINITY : m_row[i] * MM_LN2;
      pl[(TH + h) * S + s] = l_row[i];
    }
}

template <int MT>
static vstatus launch(int nt, dim3 grid, size_t sm, cudaStream_t st, float *pm, float *pl, float *pacc,
                      const float *qlat, const uint16_t *q, int q_ld, int q_hstride, int q_rot_off,
                      const uint16_t *cache, const int32_t *slot, const int32_t *pos, int H, int kl, int r, int max_ctx,
                      int S, float scale, lat_qrope rq, bool init) {
#define MM_CASE(N)                                                                                                   \
  case N:                                                                                                            \
    if (init)                                                                                                        \
      CUDA_CHECK(cudaFuncSetAttribute(mla_mma_kernel<MT, N>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm)); \
    else                                                                                                             \
      CUDA_CHECK(pdl_launch(mla_mma_kernel<MT, N>, grid, MM_WARPS * 32, sm, st, pm, pl, pacc, qlat, q, q_ld,         \
                            q_hstride, q_rot_off, cache, slot, pos, H, kl, r, max_ctx, S, scale, rq));               \
    break;
  switch (nt) {
    MM_CASE(1)
    MM_CASE(2)
    MM_CASE(4)
    MM_CASE(8)
#if MM_WARPS == 8
    MM_CASE(16)
#endif
    default: return VERR("lat_mla_attn_mma: %d column tiles per warp not instantiated", nt);
  }
#undef MM_CASE
  return V_OK;
}

static vstatus dispatch(int T, int H, int kl, int r, int S, int hb, bool init, cudaStream_t st, float *pm, float *pl,
                        float *pacc, const float *qlat, const uint16_t *q, int q_ld, int q_hstride, int q_rot_off,
                        const uint16_t *cache, const int32_t *slot, const int32_t *pos, int max_ctx, float scale,
                        lat_qrope rq) {
  if (!lat_mla_mma_supported(H, kl, r))
    return VERR("lat_mla_attn_mma: %d heads, latent %d + rope %d not supported (kv_lora a multiple of 8 up to 512 at 32 "
                "heads per block, kv_lora + rope a multiple of 16, at most 576 at 32 heads per block)", H, kl, r);
  const int MT = mm_tiles(H, hb), nt = mm_nt(MT, kl);
  const size_t sm = mm_smem(MT, kl, r);
  const dim3 grid((unsigned)((H + 16 * MT - 1) / (16 * MT)), (unsigned)S, (unsigned)T);
  if (MT == 2)
    return launch<2>(nt, grid, sm, st, pm, pl, pacc, qlat, q, q_ld, q_hstride, q_rot_off, cache, slot, pos, H, kl, r,
                     max_ctx, S, scale, rq, init);
  return launch<1>(nt, grid, sm, st, pm, pl, pacc, qlat, q, q_ld, q_hstride, q_rot_off, cache, slot, pos, H, kl, r,
                   max_ctx, S, scale, rq, init);
}

extern "C" vstatus lat_mla_mma_init(int H, int kl, int r) {
  for (int hb = 16; hb <= (H > 16 ? 32 : 16); hb += 16)
    VTRY(dispatch(1, H, kl, r, 1, hb, true, 0, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, NULL, NULL, NULL, 0, 0.0f,
                  lat_qrope{}));
  return V_OK;
}

extern "C" vstatus lat_mla_attn_mma(float *pm, float *pl, float *pacc, const float *qlat, const uint16_t *q, int q_ld,
                                    int q_hstride, int q_rot_off, const uint16_t *cache, const int32_t *slot,
                                    const int32_t *pos, int T, int H, int kl, int r, int max_ctx, int S, int hb,
                                    float scale, const lat_qrope *rope_q, cudaStream_t stream) {
  if (T <= 0) return V_OK;
  if (S < 1 || S > LAT_MLA_MAX_SPLITS) return VERR("lat_mla_attn_mma: %d splits outside 1..%d", S, LAT_MLA_MAX_SPLITS);
  if (rope_q && (!rope_q->inv_freq || r % 2))
    return VERR("lat_mla_attn_mma: RoPE of q needs inv_freq and an even rope dim (%d)", r);
  if (hb != 0 && hb != 16 && hb != 32) return VERR("lat_mla_attn_mma: %d heads per block (16 or 32)", hb);
  return dispatch(T, H, kl, r, S, hb, false, stream, pm, pl, pacc, qlat, q, q_ld, q_hstride, q_rot_off, cache, slot,
                  pos, max_ctx, scale, rope_q ? *rope_q : lat_qrope{});
}
