/* Decode context parallelism of the latency path (kernels/latency_dcp.cu) with N simulated ranks
 * on ONE GPU (N = 1, 2, 3, 4, 8; 24 and 64 heads in all, K2's latent 512 + rope 64):
 *   - lat_mla_prep_dcp: every rank stores exactly the rows it owns (p % N == rank) at p / N,
 *     bitwise equal to the unsplit lat_mla_prep, and nothing else;
 *   - lat_dcp_lpos against a brute-force count of the owned positions <= pos (-1 when none);
 *   - lat_dcp_pack_q + a gather by cudaMemcpy + lat_dcp_place_q: every head's query back in the
 *     unsharded head order, bitwise;
 *   - per rank the split-KV attention (v3_mma and v1_split, several split counts) over its own
 *     positions of a random latent cache, lat_dcp_merge_local (rows without an owned key must give
 *     o = 0, lse = -inf), a gather by cudaMemcpy and lat_dcp_combine of the rank's heads: o_lat
 *     against the unsplit attention (lat_mla_attn_mma + lat_mla_combine on the whole cache, same
 *     query), which is itself checked against an fp64 oracle.
 * Rows: slots of 1, 5, 37, 300 and 1000 cached positions, a 3-token causal step (positions 37..39
 * of one slot) and a 2-token step from position 0. Outputs are poisoned (NaN) before each run.
 * Tolerance: bf16 rounding of the output and of P (v3_mma): |d| <= 2^-7 |ref| + 2^-6 rms(row) per
 * element and rms(d) <= 2^-7 rms(ref) per (token, head) row; wrong elements are counted. An
 * off-by-one causal window or a rank left out of the combine breaks both. Exit 77 without a GPU. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "kernels/latency_kernels.h"
#include "common/tensor.h"
#include "reference/cuda/cuda_ref.h"
#include "tests/harness.h"

#define KL 512
#define RP 64
#define W (KL + RP)
#define NOPE 128
#define DK (NOPE + RP)
#define CTX 1024
#define NSLOT 7
#define T 10
#define SMS 132

static const int g_slot[T] = {0, 1, 2, 3, 4, 4, 4, 5, 6, 6};
static const int g_pos[T] = {0, 4, 36, 299, 37, 38, 39, 999, 0, 1};
static const float g_scale = 0.0723f;

static uint64_t g_rng = 0x5eed0dcbull;
static float unif(void) { /* [-1, 1) */
  g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static float bfr(float x) { return bf16_to_f32(f32_to_bf16(x)); }

static void *dalloc(size_t bytes) {
  void *p = NULL;
  if (cudaMalloc(&p, bytes) != cudaSuccess) return NULL;
  return p;
}
static bool up(void *d, const void *h, size_t bytes) { return cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) == cudaSuccess; }
static bool down(void *h, const void *d, size_t bytes) { return cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost) == cudaSuccess; }

/* ---- lat_mla_prep_dcp: the owner stores, at p / N ---- */

static void check_prep(int N) {
  enum { TP = 6 };
  const int sl[TP] = {0, 1, 1, 1, 2, 3}, ps[TP] = {0, 5, 6, 7, 37, 299};
  const int lctx = (CTX + N - 1) / N;
  uint16_t *hsrc = malloc(sizeof(uint16_t) * TP * W), *hw = malloc(sizeof(uint16_t) * KL);
  float inv[RP / 2];
  for (int i = 0; i < TP * W; i++) hsrc[i] = f32_to_bf16(2.0f * unif());
  for (int i = 0; i < KL; i++) hw[i] = f32_to_bf16(1.0f + 0.5f * unif());
  for (int i = 0; i < RP / 2; i++) inv[i] = powf(10000.0f, -2.0f * i / RP);
  const size_t full_b = sizeof(uint16_t) * 4 * CTX * W, loc_b = sizeof(uint16_t) * 4 * (size_t)lctx * W;
  uint16_t *src = dalloc(sizeof(uint16_t) * TP * W), *w = dalloc(sizeof(uint16_t) * KL), *full = dalloc(full_b);
  uint16_t *loc = dalloc(loc_b);
  int32_t *dsl = dalloc(sizeof(int32_t) * TP), *dps = dalloc(sizeof(int32_t) * TP);
  float *dinv = dalloc(sizeof inv);
  uint16_t *hfull = malloc(full_b), *hloc = malloc(loc_b);
  CHECK(src && w && full && loc && dsl && dps && dinv && hfull && hloc, "prep: allocations");
  if (!(src && w && full && loc && dsl && dps && dinv && hfull && hloc)) return;
  up(src, hsrc, sizeof(uint16_t) * TP * W);
  up(w, hw, sizeof(uint16_t) * KL);
  up(dsl, sl, sizeof sl);
  up(dps, ps, sizeof ps);
  up(dinv, inv, sizeof inv);
  cudaMemset(full, 0, full_b);
  CHECK_OK(lat_mla_prep(src, W, -1, 0, NULL, NULL, 0, KL, RP, w, full, dsl, dps, CTX, dinv, 1.0f, 0, 1e-6f, TP, 0));
  CHECK(down(hfull, full, full_b), "prep: copy back");
  long wrong = 0, stored = 0;
  for (int r = 0; r < N; r++) {
    cudaMemset(loc, 0, loc_b);
    CHECK_OK(lat_mla_prep_dcp(src, W, -1, 0, NULL, NULL, 0, KL, RP, w, loc, dsl, dps, lctx, dinv, 1.0f, 0, 1e-6f, TP, N,
                              r, 0));
    CHECK(down(hloc, loc, loc_b), "prep: copy back");
    for (int s = 0; s < 4; s++)
      for (int j = 0; j < lctx; j++) {
        const uint16_t *row = hloc + ((size_t)s * lctx + j) * W;
        const int p = j * N + r;
        bool nz = false;
        for (int i = 0; i < W; i++) nz |= row[i] != 0;
        stored += nz;
        bool mine = false;
        for (int t = 0; t < TP; t++) mine |= sl[t] == s && ps[t] == p;
        if (!mine) {
          wrong += nz; /* a row this rank does not own was written */
          continue;
        }
        if (memcmp(row, hfull + ((size_t)s * CTX + p) * W, sizeof(uint16_t) * W) != 0) wrong++;
      }
  }
  CHECK(wrong == 0 && stored == TP, "prep dcp N=%d: %ld wrong rows, %ld rows stored over the ranks (expected %d)", N,
        wrong, stored, TP);
  free(hsrc), free(hw), free(hfull), free(hloc);
  cudaFree(src), cudaFree(w), cudaFree(full), cudaFree(loc), cudaFree(dsl), cudaFree(dps), cudaFree(dinv);
}

/* ---- attention ---- */

typedef struct {
  int Ha;              /* heads in all */
  uint16_t *hcache;    /* [NSLOT, CTX, W] host */
  float *hqlat;        /* [T, Ha, KL] */
  uint16_t *hqrot;     /* [T, Ha, RP] */
  float *oracle;       /* [T, Ha, KL] fp64 oracle, as float */
  float *ref;          /* [T, Ha, KL] unsplit lat_mla_attn_mma + lat_mla_combine, widened */
} fixture;

static void oracle(fixture *F) {
  double *sc = malloc(sizeof(double) * CTX);
  for (int t = 0; t < T; t++)
    for (int h = 0; h < F->Ha; h++) {
      const float *ql = F->hqlat + ((size_t)t * F->Ha + h) * KL;
      const uint16_t *qr = F->hqrot + ((size_t)t * F->Ha + h) * RP;
      const int nk = g_pos[t] + 1;
      double mx = -INFINITY;
      for (int j = 0; j < nk; j++) {
        const uint16_t *c = F->hcache + ((size_t)g_slot[t] * CTX + j) * W;
        double s = 0;
        for (int i = 0; i < KL; i++) s += (double)ql[i] * bf16_to_f32(c[i]);
        for (int i = 0; i < RP; i++) s += (double)bf16_to_f32(qr[i]) * bf16_to_f32(c[KL + i]);
        sc[j] = s * g_scale;
        if (sc[j] > mx) mx = sc[j];
      }
      double L = 0;
      for (int j = 0; j < nk; j++) L += (sc[j] = exp(sc[j] - mx));
      float *o = F->oracle + ((size_t)t * F->Ha + h) * KL;
      for (int i = 0; i < KL; i++) {
        double v = 0;
        for (int j = 0; j < nk; j++) v += sc[j] * bf16_to_f32(F->hcache[((size_t)g_slot[t] * CTX + j) * W + i]);
        o[i] = (float)(v / L);
      }
    }
  free(sc);
}

/* Elements outside the tolerance, plus rows whose relative rms error is too large. */
static long compare(const float *got, const float *want, int Ha, double *max_rel_rms) {
  long wrong = 0;
  *max_rel_rms = 0;
  for (int th = 0; th < T * Ha; th++) {
    const float *g = got + (size_t)th * KL, *w = want + (size_t)th * KL;
    double ss = 0, sd = 0;
    for (int i = 0; i < KL; i++) ss += (double)w[i] * w[i];
    const double rms = sqrt(ss / KL);
    for (int i = 0; i < KL; i++) {
      const double d = fabs((double)g[i] - w[i]);
      if (!(d <= ldexp(fabs(w[i]), -7) + ldexp(rms, -6))) wrong++; /* NaN counts */
      sd += d * d;
    }
    const double rel = sqrt(sd / KL) / (rms > 0 ? rms : 1e-30);
    if (!(rel <= ldexp(1.0, -7))) wrong++;
    if (!(rel <= *max_rel_rms)) *max_rel_rms = rel;
  }
  return wrong;
}

static void make_fixture(fixture *F, int Ha) {
  F->Ha = Ha;
  F->hcache = malloc(sizeof(uint16_t) * NSLOT * CTX * W);
  F->hqlat = malloc(sizeof(float) * T * Ha * KL);
  F->hqrot = malloc(sizeof(uint16_t) * T * Ha * RP);
  F->oracle = malloc(sizeof(float) * T * Ha * KL);
  F->ref = malloc(sizeof(float) * T * Ha * KL);
  for (size_t i = 0; i < (size_t)NSLOT * CTX * W; i++) F->hcache[i] = f32_to_bf16(unif());
  for (size_t i = 0; i < (size_t)T * Ha * KL; i++) F->hqlat[i] = unif();
  for (size_t i = 0; i < (size_t)T * Ha * RP; i++) F->hqrot[i] = f32_to_bf16(unif());
  oracle(F);
}

static void free_fixture(fixture *F) {
  free(F->hcache), free(F->hqlat), free(F->hqrot), free(F->oracle), free(F->ref);
}

/* The unsplit reference: v3_mma + lat_mla_combine over the whole cache. */
static void reference(fixture *F) {
  const int Ha = F->Ha, S = lat_mla_mma_splits(T, Ha, CTX, SMS, 32);
  uint16_t *cache = dalloc(sizeof(uint16_t) * NSLOT * CTX * W), *qrot = dalloc(sizeof(uint16_t) * T * Ha * RP);
  uint16_t *o = dalloc(sizeof(uint16_t) * T * Ha * KL);
  float *qlat = dalloc(sizeof(float) * T * Ha * KL), *pm = dalloc(sizeof(float) * T * Ha * S);
  float *pl = dalloc(sizeof(float) * T * Ha * S), *pacc = dalloc(sizeof(float) * T * Ha * S * KL);
  int32_t *sl = dalloc(sizeof g_slot), *ps = dalloc(sizeof g_pos);
  uint16_t *ho = malloc(sizeof(uint16_t) * T * Ha * KL);
  CHECK(cache && qrot && o && qlat && pm && pl && pacc && sl && ps && ho, "reference: allocations");
  up(cache, F->hcache, sizeof(uint16_t) * NSLOT * CTX * W);
  up(qrot, F->hqrot, sizeof(uint16_t) * T * Ha * RP);
  up(qlat, F->hqlat, sizeof(float) * T * Ha * KL);
  up(sl, g_slot, sizeof g_slot);
  up(ps, g_pos, sizeof g_pos);
  cudaMemset(o, 0xff, sizeof(uint16_t) * T * Ha * KL);
  CHECK_OK(lat_mla_mma_init(Ha, KL, RP));
  CHECK_OK(lat_mla_attn_mma(pm, pl, pacc, qlat, qrot, Ha * RP, RP, 0, cache, sl, ps, T, Ha, KL, RP, CTX, S, 32, g_scale,
                            NULL, 0));
  CHECK_OK(lat_mla_combine(o, pm, pl, pacc, T, Ha, KL, S, 0));
  CHECK(down(ho, o, sizeof(uint16_t) * T * Ha * KL), "reference: copy back");
  for (size_t i = 0; i < (size_t)T * Ha * KL; i++) F->ref[i] = bf16_to_f32(ho[i]);
  double rr;
  const long wrong = compare(F->ref, F->oracle, Ha, &rr);
  CHECK(wrong == 0, "unsplit reference H=%d vs fp64 oracle: %ld wrong (max row rel rms %.2e)", Ha, wrong, rr);
  free(ho);
  cudaFree(cache), cudaFree(qrot), cudaFree(o), cudaFree(qlat), cudaFree(pm), cudaFree(pl), cudaFree(pacc);
  cudaFree(sl), cudaFree(ps);
}

/* One DCP run: N ranks, variant mma (v3_mma) or v1_split, split count S (0: the table's). */
static void run_dcp(const fixture *F, int N, bool mma, int S_force) {
  const int Ha = F->Ha, H = Ha / N, lctx = (CTX + N - 1) / N, keys = (CTX + N - 1) / N;
  int S = S_force > 0 ? S_force : mma ? lat_mla_mma_splits(T, Ha, keys, SMS, 32) : lat_mla_splits(T, Ha, keys, SMS);
  const char *vn = mma ? "v3_mma" : "v1_split";
  const size_t lc_n = (size_t)NSLOT * lctx * W, part_n = (size_t)T * Ha * (KL + 1), qw = (size_t)T * H * (KL + RP);
  uint16_t *hlc = calloc(lc_n, sizeof(uint16_t)), *hq = malloc(sizeof(uint16_t) * T * H * DK);
  float *hql = malloc(sizeof(float) * T * H * KL), *hpart = malloc(sizeof(float) * part_n);
  uint16_t *ho = malloc(sizeof(uint16_t) * T * H * KL), *hqr_all = malloc(sizeof(uint16_t) * T * Ha * RP);
  float *got = malloc(sizeof(float) * T * Ha * KL), *hql_all = malloc(sizeof(float) * T * Ha * KL);
  uint16_t *lc = dalloc(sizeof(uint16_t) * lc_n), *q = dalloc(sizeof(uint16_t) * T * H * DK);
  uint16_t *qrot_all = dalloc(sizeof(uint16_t) * T * Ha * RP), *o = dalloc(sizeof(uint16_t) * T * H * KL);
  float *ql = dalloc(sizeof(float) * T * H * KL), *send = dalloc(sizeof(float) * qw);
  float *gath = dalloc(sizeof(float) * qw * N), *qlat_all = dalloc(sizeof(float) * T * Ha * KL);
  float *pm = dalloc(sizeof(float) * T * Ha * S), *pl = dalloc(sizeof(float) * T * Ha * S);
  float *pacc = dalloc(sizeof(float) * T * Ha * S * KL), *part = dalloc(sizeof(float) * part_n);
  float *parts = dalloc(sizeof(float) * part_n * N);
  int32_t *sl = dalloc(sizeof g_slot), *ps = dalloc(sizeof g_pos), *lp = dalloc(sizeof g_pos);
  const bool ok = hlc && hq && hql && hpart && ho && hqr_all && got && hql_all && lc && q && qrot_all && o && ql &&
                  send && gath && qlat_all && pm && pl && pacc && part && parts && sl && ps && lp;
  CHECK(ok, "dcp N=%d: allocations", N);
  if (!ok) return;
  up(sl, g_slot, sizeof g_slot);
  up(ps, g_pos, sizeof g_pos);
  long lpos_wrong = 0, q_wrong = 0, empty_wrong = 0, empty_rows = 0;
  /* every rank packs its heads' queries; the all-gather is a copy into rank-major blocks */
  for (int r = 0; r < N; r++) {
    for (int t = 0; t < T; t++)
      for (int h = 0; h < H; h++) {
        const size_t g = (size_t)t * Ha + r * H + h;
        memcpy(hql + ((size_t)t * H + h) * KL, F->hqlat + g * KL, sizeof(float) * KL);
        for (int i = 0; i < DK; i++) /* q_nope: junk the pack must not read */
          hq[((size_t)t * H + h) * DK + i] = i < NOPE ? f32_to_bf16(1000.0f + i) : F->hqrot[g * RP + i - NOPE];
      }
    up(ql, hql, sizeof(float) * T * H * KL);
    up(q, hq, sizeof(uint16_t) * T * H * DK);
    cudaMemset(send, 0xff, sizeof(float) * qw);
    CHECK_OK(lat_dcp_pack_q(send, ql, q, H * DK, DK, NOPE, T, H, KL, RP, 0));
    cudaMemcpy(gath + qw * r, send, sizeof(float) * qw, cudaMemcpyDeviceToDevice);
  }
  cudaMemset(qlat_all, 0xff, sizeof(float) * T * Ha * KL);
  cudaMemset(qrot_all, 0xff, sizeof(uint16_t) * T * Ha * RP);
  CHECK_OK(lat_dcp_place_q(qlat_all, qrot_all, gath, N, T, H, KL, RP, 0));
  down(hql_all, qlat_all, sizeof(float) * T * Ha * KL);
  down(hqr_all, qrot_all, sizeof(uint16_t) * T * Ha * RP);
  q_wrong += memcmp(hql_all, F->hqlat, sizeof(float) * T * Ha * KL) != 0;
  q_wrong += memcmp(hqr_all, F->hqrot, sizeof(uint16_t) * T * Ha * RP) != 0;
  /* per rank: its positions, its lpos, attention over all heads, local merge */
  for (int r = 0; r < N; r++) {
    memset(hlc, 0, sizeof(uint16_t) * lc_n);
    for (int s = 0; s < NSLOT; s++)
      for (int j = 0; j < lctx && j * N + r < CTX; j++)
        memcpy(hlc + ((size_t)s * lctx + j) * W, F->hcache + ((size_t)s * CTX + j * N + r) * W, sizeof(uint16_t) * W);
    up(lc, hlc, sizeof(uint16_t) * lc_n);
    CHECK_OK(lat_dcp_lpos(lp, ps, T, N, r, 0));
    int32_t hl[T];
    down(hl, lp, sizeof hl);
    for (int t = 0; t < T; t++) {
      int cnt = 0;
      for (int p = 0; p <= g_pos[t]; p++) cnt += p % N == r;
      lpos_wrong += hl[t] != cnt - 1;
    }
    cudaMemset(part, 0xff, sizeof(float) * part_n);
    if (mma)
      CHECK_OK(lat_mla_attn_mma(pm, pl, pacc, qlat_all, qrot_all, Ha * RP, RP, 0, lc, sl, lp, T, Ha, KL, RP, lctx, S,
                                32, g_scale, NULL, 0));
    else
      CHECK_OK(lat_mla_attn(pm, pl, pacc, qlat_all, qrot_all, Ha * RP, RP, 0, lc, sl, lp, T, Ha, KL, RP, lctx, S,
                            g_scale, 0));
    CHECK_OK(lat_dcp_merge_local(part, pm, pl, pacc, T, Ha, KL, S, 0));
    down(hpart, part, sizeof(float) * part_n);
    for (int t = 0; t < T; t++) {
      for (int h = 0; h < Ha; h++) {
        const float *pr = hpart + ((size_t)t * Ha + h) * (KL + 1);
        if (hl[t] >= 0) {
          empty_wrong += !isfinite(pr[KL]); /* a rank with keys has a finite lse */
          continue;
        }
        empty_rows++;
        bool bad = !(isinf(pr[KL]) && pr[KL] < 0);
        for (int i = 0; i < KL; i++) bad |= pr[i] != 0.0f;
        empty_wrong += bad;
      }
    }
    cudaMemcpy(parts + part_n * r, part, sizeof(float) * part_n, cudaMemcpyDeviceToDevice);
  }
  /* every rank combines its own heads from the gathered parts */
  for (int r = 0; r < N; r++) {
    cudaMemset(o, 0xff, sizeof(uint16_t) * T * H * KL);
    CHECK_OK(lat_dcp_combine(o, parts, N, T, Ha, H, r * H, KL, 0));
    down(ho, o, sizeof(uint16_t) * T * H * KL);
    for (int t = 0; t < T; t++)
      for (int h = 0; h < H; h++)
        for (int i = 0; i < KL; i++)
          got[((size_t)t * Ha + r * H + h) * KL + i] = bf16_to_f32(ho[((size_t)t * H + h) * KL + i]);
  }
  CHECK(cudaDeviceSynchronize() == cudaSuccess && cudaGetLastError() == cudaSuccess, "dcp N=%d: CUDA errors", N);
  CHECK(lpos_wrong == 0, "dcp N=%d: %ld wrong lpos", N, lpos_wrong);
  CHECK(q_wrong == 0, "dcp N=%d H=%d: gathered queries not in the unsharded head order (%ld)", N, Ha, q_wrong);
  /* rows without an owned key exist for N >= 2 (position 0 on ranks >= 1) */
  CHECK(empty_wrong == 0 && (N == 1 || empty_rows > 0), "dcp N=%d %s: %ld bad local parts (%ld empty rows)", N, vn,
        empty_wrong, empty_rows);
  double rr;
  const long wrong = compare(got, F->ref, Ha, &rr);
  CHECK(wrong == 0, "dcp N=%d H=%d %s splits=%d vs unsplit: %ld wrong (max row rel rms %.2e)", N, Ha, vn, S, wrong, rr);
  printf("dcp N=%d H=%d (%d per rank) %-8s splits=%-2d: %ld wrong, max row rel rms %.2e, %ld empty local rows\n", N,
         Ha, H, vn, S, wrong, rr, empty_rows);
  free(hlc), free(hq), free(hql), free(hpart), free(ho), free(hqr_all), free(got), free(hql_all);
  cudaFree(lc), cudaFree(q), cudaFree(qrot_all), cudaFree(o), cudaFree(ql), cudaFree(send), cudaFree(gath);
  cudaFree(qlat_all), cudaFree(pm), cudaFree(pl), cudaFree(pacc), cudaFree(part), cudaFree(parts), cudaFree(sl);
  cudaFree(ps), cudaFree(lp);
}

/* The combine leaves a rank out when it is told one rank fewer: the test must see it. */
static void check_detects_missing_rank(const fixture *F) {
  const int N = 2, Ha = F->Ha;
  const size_t part_n = (size_t)T * Ha * (KL + 1);
  float *hp = malloc(sizeof(float) * part_n * N), *got = malloc(sizeof(float) * T * Ha * KL);
  uint16_t *ho = malloc(sizeof(uint16_t) * T * Ha * KL);
  float *parts = dalloc(sizeof(float) * part_n * N);
  uint16_t *o = dalloc(sizeof(uint16_t) * T * Ha * KL);
  if (!hp || !got || !ho || !parts || !o) {
    CHECK(false, "missing rank: allocations");
    return;
  }
  /* rank 0's part is 3 ref, rank 1's -ref, both with lse 0: the combine of both is (3 ref - ref) / 2
   * = ref; rank 0 alone gives 3 ref */
  for (int r = 0; r < N; r++)
    for (int th = 0; th < T * Ha; th++) {
      float *p = hp + part_n * r + (size_t)th * (KL + 1);
      for (int i = 0; i < KL; i++) p[i] = r == 0 ? 3.0f * F->ref[(size_t)th * KL + i] : -F->ref[(size_t)th * KL + i];
      p[KL] = 0.0f; /* equal weights: the combine is (3 ref - ref) / 2 = ref */
    }
  cudaMemcpy(parts, hp, sizeof(float) * part_n * N, cudaMemcpyHostToDevice);
  long wrong[2];
  for (int k = 0; k < 2; k++) {
    const int n = k == 0 ? N : 1; /* k = 1: rank 1 left out */
    CHECK_OK(lat_dcp_combine(o, parts, n, T, Ha, Ha, 0, KL, 0));
    down(ho, o, sizeof(uint16_t) * T * Ha * KL);
    for (size_t i = 0; i < (size_t)T * Ha * KL; i++) got[i] = bf16_to_f32(ho[i]);
    double rr;
    wrong[k] = compare(got, F->ref, Ha, &rr);
  }
  CHECK(wrong[0] == 0 && wrong[1] > 0, "combine: both ranks give the reference (%ld wrong), one rank alone does not (%ld)",
        wrong[0], wrong[1]);
  free(hp), free(got), free(ho);
  cudaFree(parts), cudaFree(o);
}

int main(void) {
  if (cuda_device_count() == 0) {
    printf("no CUDA device: skipped\n");
    return 77;
  }
  CHECK_OK(lat_kernels_init());
  CHECK_OK(lat_mla_init(KL, RP));
  const int Ns[] = {1, 2, 3, 4, 8};
  for (int i = 0; i < 5; i++) check_prep(Ns[i]);
  const int Has[] = {24, 64};
  for (int a = 0; a < 2; a++) {
    fixture F;
    make_fixture(&F, Has[a]);
    reference(&F);
    if (Has[a] == 24) check_detects_missing_rank(&F);
    for (int i = 0; i < 5; i++) {
      if (Has[a] % Ns[i]) continue;
      for (int v = 0; v < 2; v++) {
        run_dcp(&F, Ns[i], v == 0, 0);
        run_dcp(&F, Ns[i], v == 0, 1);
        run_dcp(&F, Ns[i], v == 0, LAT_MLA_MAX_SPLITS);
      }
    }
    free_fixture(&F);
  }
  return test_finish();
}
