/* The latency path's cp.async GEMMs (v6..v11, kernels/latency_gemm.cu) in every grid mode: one
 * CTA per work item (max_ctas -1, the older split-K rule), persistent over the whole GPU (0), and
 * persistent over 1, 3, 7 and 16 CTAs, where each CTA walks many items and its weight ring runs on
 * across item and split boundaries (a check asserts that some run walked split items).
 * Shapes: dense with N and K tails (N % 16, K % 32 != 0), z-batched slices, split-K, the three
 * epilogues (bf16, fp32, SwiGLU), and grouped (MoE) mode with gathered input rows, scattered
 * output rows, an expert slot without tokens, a slot past n_act whose expert has NaN weights, and
 * experts with more tokens than a variant's tile (computed in passes over the weights).
 * Per run:
 *   - every output element against an fp64 host product of the same bf16 inputs (tolerance by
 *     epilogue below), wrong elements counted;
 *   - runs that used the same split-K factor are bitwise equal (no order depends on the grid);
 *   - nothing outside the output was written: poisoned guards before and after the buffer, the
 *     padding columns of every row, and the rows no token maps to.
 * Tolerance: fp32 accumulation, |d| <= 2^-14 sum|w x| (+ 2^-8 |ref| for a bf16 output; SwiGLU
 * 2^-6 |ref| + 2^-10 (sum|w x| of gate and up), since gate and up are rounded to bf16 first).
 * Exit 77 without a GPU. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "kernels/latency_kernels.h"
#include "common/tensor.h"
#include "reference/cuda/cuda_ref.h"
#include "tests/harness.h"

#define GUARD 64                    /* poisoned elements before and after each output */
#define POISON 0x7fc1u              /* bf16 NaN; fp32 outputs get 0x7fc17fc1, also NaN */
#define WS_BYTES ((size_t)32 << 20) /* split-K scratch, as the path's */
static int g_sms;                   /* the device's SM count, as the path passes it */
static long g_split_walks;          /* persistent runs with split-K and several items per CTA */
#define N_EXPERTS 5

static uint64_t g_rng = 0x6e3a5d1bull;
static float unif(void) { /* [-1, 1) */
  g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void *dalloc(size_t bytes) {
  void *p = NULL;
  if (cudaMalloc(&p, bytes) != cudaSuccess) return NULL;
  return p;
}
static void up(void *d, const void *h, size_t bytes) { cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice); }
static void down(void *h, const void *d, size_t bytes) { cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost); }

/* Grouped mode: 3 active slots of Z = 4; slot 1 has no tokens, slot 3 (past n_act) points at an
 * expert with NaN weights and at the last two output rows, which must stay untouched. "light":
 * every expert fits one 8-token tile; "heavy": 11 and 19 tokens, so v6, v10, v11 (8 tokens per
 * tile) take 2 and 3 passes over the weights, v7 (16) 1 and 2. Rows map through a permutation. */
#define G_MAXROWS 32
typedef struct {
  int act_e[4], act_off[4], act_cnt[4];
  int rows; /* bucket rows = input rows = output rows */
} gbuckets;
static const gbuckets g_light = {{4, 0, 2, 1}, {0, 2, 2, 5}, {2, 0, 3, 2}, 7};
static const gbuckets g_heavy = {{4, 0, 2, 1}, {0, 11, 11, 30}, {11, 0, 19, 2}, 32};
static const int g_n_act = 3;
static int perm_in(int r, int rows) { return (r * 3 + 1) % rows; }  /* bucket row -> input row (7, 32 rows) */
static int perm_out(int r, int rows) { return (r * 5 + 2) % rows; } /* bucket row -> output row */

typedef struct {
  const char *name;
  int N, K;                /* weight rows, reduction length */
  int T;                   /* token rows (dense), or the most tokens of one expert (grouped) */
  int Z;                   /* z slices (dense) or expert slots (grouped) */
  int ep;                  /* LAT_EP_* */
  const gbuckets *grouped; /* MoE mode with these buckets, or NULL */
} gcase;

/* One case's buffers and its fp64 reference. */
typedef struct {
  gcase c;
  int ncol, ldx, ldo, out_rows; /* output columns, row strides, output rows per z slice */
  size_t es;                    /* output element bytes */
  uint16_t *hw[N_EXPERTS];      /* host weights: dense uses hw[0] ([Z][N][K]) */
  uint16_t *hx;                 /* host inputs [Z][rows][ldx] */
  double *ref, *mag;            /* [Z][out_rows][ncol]: reference, and sum |w x| (NAN: row never written) */
  uint16_t *dw[N_EXPERTS], *dx;
  const uint16_t **dwptr;
  int32_t *dn_act, *dact_e, *dact_off, *dact_cnt, *dxmap, *domap;
  void *dout; /* GUARD + Z*out_rows*ldo + GUARD elements */
  float *ws;
  size_t out_elems; /* including the guards */
} fixture;

static double dot(const uint16_t *w, const uint16_t *x, int K, double *mag) {
  double s = 0.0, m = 0.0;
  for (int k = 0; k < K; k++) {
    const double p = (double)bf16_to_f32(w[k]) * bf16_to_f32(x[k]);
    s += p;
    m += fabs(p);
  }
  *mag = m;
  return s;
}
static double silu(double z) { return z / (1.0 + exp(-z)); }
static double bfr(double v) { return bf16_to_f32(f32_to_bf16((float)v)); }

/* ref for output column c of the token whose input row is xr (weights W [N][K]) */
static void ref_col(const fixture *F, const uint16_t *W, const uint16_t *xr, int c, double *ref, double *mag) {
  const int K = F->c.K;
  if (F->c.ep != LAT_EP_SWIGLU) {
    *ref = dot(W + (size_t)c * K, xr, K, mag);
    return;
  }
  const int n0 = (c / 8) * 16 + (c % 8); /* gate row; its up row is n0 + 8 */
  double mg, mu;
  const double g = bfr(dot(W + (size_t)n0 * K, xr, K, &mg)), u = bfr(dot(W + (size_t)(n0 + 8) * K, xr, K, &mu));
  *ref = silu(g) * u;
  *mag = mg + mu;
}

static bool make_fixture(fixture *F, const gcase *c) {
  memset(F, 0, sizeof *F);
  F->c = *c;
  F->ncol = c->ep == LAT_EP_SWIGLU ? c->N / 2 : c->N;
  F->ldx = c->K + 8;
  F->ldo = F->ncol + 3;
  F->es = c->ep == LAT_EP_F32 ? 4 : 2;
  const int zs = c->grouped ? 1 : c->Z; /* output / input slices */
  const int in_rows = c->grouped ? c->grouped->rows : c->T;
  F->out_rows = in_rows;
  const size_t wn = (size_t)(c->grouped ? 1 : c->Z) * c->N * c->K;
  for (int e = 0; e < (c->grouped ? N_EXPERTS : 1); e++) {
    F->hw[e] = malloc(wn * 2);
    const bool nan_w = c->grouped && (e == 1 || e == 3); /* experts no active slot names */
    for (size_t i = 0; i < wn; i++) F->hw[e][i] = nan_w ? POISON : f32_to_bf16(unif() / sqrtf((float)c->K) * 4.0f);
    F->dw[e] = dalloc(wn * 2);
    if (!F->dw[e]) return false;
    up(F->dw[e], F->hw[e], wn * 2);
  }
  const size_t xn = (size_t)zs * in_rows * F->ldx;
  F->hx = malloc(xn * 2);
  for (size_t i = 0; i < xn; i++) F->hx[i] = f32_to_bf16(unif());
  F->dx = dalloc(xn * 2);
  const size_t on = (size_t)zs * F->out_rows * F->ncol;
  F->ref = malloc(on * sizeof(double));
  F->mag = malloc(on * sizeof(double));
  F->out_elems = (size_t)zs * F->out_rows * F->ldo + 2 * GUARD;
  F->dout = dalloc(F->out_elems * F->es);
  F->ws = dalloc(WS_BYTES);
  if (!F->dx || !F->dout || !F->ws) return false;
  up(F->dx, F->hx, xn * 2);
  for (size_t i = 0; i < on; i++) F->ref[i] = NAN, F->mag[i] = NAN;
  if (!c->grouped) {
    for (int z = 0; z < c->Z; z++)
      for (int t = 0; t < c->T; t++)
        for (int col = 0; col < F->ncol; col++) {
          const size_t o = ((size_t)z * F->out_rows + t) * F->ncol + col;
          ref_col(F, F->hw[0] + (size_t)z * c->N * c->K, F->hx + ((size_t)z * in_rows + t) * F->ldx, col, &F->ref[o],
                  &F->mag[o]);
        }
    return true;
  }
  const gbuckets *gb = c->grouped;
  int32_t xmap[G_MAXROWS], omap[G_MAXROWS];
  for (int r = 0; r < gb->rows; r++) xmap[r] = perm_in(r, gb->rows), omap[r] = perm_out(r, gb->rows);
  for (int s = 0; s < g_n_act; s++)
    for (int j = 0; j < gb->act_cnt[s]; j++) {
      const int b = gb->act_off[s] + j, orow = omap[b];
      for (int col = 0; col < F->ncol; col++) {
        const size_t o = (size_t)orow * F->ncol + col;
        ref_col(F, F->hw[gb->act_e[s]], F->hx + (size_t)xmap[b] * F->ldx, col, &F->ref[o], &F->mag[o]);
      }
    }
  const uint16_t *ptrs[N_EXPERTS];
  for (int e = 0; e < N_EXPERTS; e++) ptrs[e] = F->dw[e];
  F->dwptr = dalloc(sizeof ptrs);
  F->dn_act = dalloc(sizeof(int32_t));
  F->dact_e = dalloc(sizeof gb->act_e), F->dact_off = dalloc(sizeof gb->act_off);
  F->dact_cnt = dalloc(sizeof gb->act_cnt);
  F->dxmap = dalloc(sizeof xmap), F->domap = dalloc(sizeof omap);
  if (!F->dwptr || !F->dn_act || !F->dact_e || !F->dact_off || !F->dact_cnt || !F->dxmap || !F->domap) return false;
  up(F->dwptr, ptrs, sizeof ptrs);
  up(F->dn_act, &g_n_act, sizeof g_n_act);
  up(F->dact_e, gb->act_e, sizeof gb->act_e), up(F->dact_off, gb->act_off, sizeof gb->act_off);
  up(F->dact_cnt, gb->act_cnt, sizeof gb->act_cnt);
  up(F->dxmap, xmap, sizeof xmap), up(F->domap, omap, sizeof omap);
  return true;
}

static void free_fixture(fixture *F) {
  for (int e = 0; e < N_EXPERTS; e++) free(F->hw[e]), cudaFree(F->dw[e]);
  free(F->hx), free(F->ref), free(F->mag);
  cudaFree(F->dx), cudaFree(F->dout), cudaFree(F->ws), cudaFree((void *)F->dwptr), cudaFree(F->dn_act);
  cudaFree(F->dact_e), cudaFree(F->dact_off), cudaFree(F->dact_cnt), cudaFree(F->dxmap), cudaFree(F->domap);
}

static lat_gemm_args args_of(const fixture *F, int T, int max_ctas) {
  const gcase *c = &F->c;
  void *out = (char *)F->dout + GUARD * F->es;
  lat_gemm_args a;
  if (c->grouped) {
    a = lat_grouped_args(F->dwptr, F->dx, F->ldx, out, F->ldo, c->N, c->K, T, c->ep, c->Z, F->dn_act, F->dact_e,
                         F->dact_off, F->dact_cnt);
    a.xmap = F->dxmap;
    a.omap = F->domap;
  } else {
    a = lat_dense_args(F->dw[0], F->dx, F->ldx, out, F->ldo, c->N, c->K, T, c->ep);
    a.Z = c->Z;
    a.w_bstride = (long long)c->N * c->K;
    a.x_bstride = (long long)c->T * F->ldx;
    a.o_bstride = (long long)c->T * F->ldo;
  }
  a.ws = F->ws;
  a.ws_bytes = WS_BYTES;
  a.max_ctas = max_ctas;
  return a;
}

static bool is_poison(const unsigned char *p, size_t es) {
  return es == 2 ? *(const uint16_t *)p == POISON : *(const uint32_t *)p == (POISON | (POISON << 16));
}
static double value_of(const unsigned char *p, int ep) {
  return ep == LAT_EP_F32 ? *(const float *)p : bf16_to_f32(*(const uint16_t *)p);
}

/* Runs the variant on T tokens (dense: rows 0..T-1 of every slice) with max_ctas; checks against
 * the reference; returns the output (host copy, caller frees) and the split-K factor. */
static unsigned char *run(const fixture *F, int variant, int T, int max_ctas, int *splits, long *wrong, long *stray) {
  const size_t es = F->es;
  uint16_t *poison = malloc(F->out_elems * es);
  for (size_t i = 0; i < F->out_elems * es / 2; i++) poison[i] = POISON;
  up(F->dout, poison, F->out_elems * es);
  free(poison);
  lat_gemm_args a = args_of(F, T, max_ctas);
  int ran = 0;
  *splits = 0;
  cudaMemset(F->ws, 0xff, WS_BYTES); /* NaN partials: a split item a run skipped shows */
  CHECK_OK(lat_gemm(&a, variant, g_sms, NULL, 0, splits, &ran));
  const cudaError_t e = cudaDeviceSynchronize();
  CHECK(e == cudaSuccess && ran == variant, "%s %s T=%d max_ctas=%d: %s, ran %s", F->c.name,
        lat_gemm_variant_name(variant), T, max_ctas, cudaGetErrorString(e), lat_gemm_variant_name(ran));
  unsigned char *h = malloc(F->out_elems * es);
  down(h, F->dout, F->out_elems * es);
  *wrong = *stray = 0;
  for (size_t i = 0; i < GUARD; i++) {
    *stray += !is_poison(h + i * es, es);
    *stray += !is_poison(h + (F->out_elems - 1 - i) * es, es);
  }
  const int zs = F->c.grouped ? 1 : F->c.Z;
  for (int z = 0; z < zs; z++)
    for (int r = 0; r < F->out_rows; r++)
      for (int col = 0; col < F->ldo; col++) {
        const unsigned char *p = h + (GUARD + ((size_t)z * F->out_rows + r) * F->ldo + col) * es;
        const bool live =
            col < F->ncol && (F->c.grouped || r < T) && !isnan(F->ref[((size_t)z * F->out_rows + r) * F->ncol + col]);
        if (!live) {
          *stray += !is_poison(p, es);
          continue;
        }
        const size_t o = ((size_t)z * F->out_rows + r) * F->ncol + col;
        const double ref = F->ref[o], mag = F->mag[o], got = value_of(p, F->c.ep);
        double tol = mag * 0x1p-14;
        if (F->c.ep == LAT_EP_BF16) tol += fabs(ref) * 0x1p-8;
        if (F->c.ep == LAT_EP_SWIGLU) tol = fabs(ref) * 0x1p-6 + mag * 0x1p-10;
        if (!(fabs(got - ref) <= tol)) {
          if (*wrong < 3)
            fprintf(stderr, "  %s %s T=%d max_ctas=%d z=%d row=%d col=%d: got %g want %g (tol %g)\n", F->c.name,
                    lat_gemm_variant_name(variant), T, max_ctas, z, r, col, got, ref, tol);
          (*wrong)++;
        }
      }
  return h;
}

static void check_case(const gcase *c) {
  static const int variants[] = {LAT_V6_CP_N8,  LAT_V7_CP_N16, LAT_V8_CP_N32,
                                 LAT_V9_CP_N64, LAT_V10_CP_W8, LAT_V11_CP_M2};
  static const int modes[] = {-1, 0, 1, 3, 7, 16}; /* 16: "split-k f32" (24 tiles) splits in 2, 3 items per CTA */
  fixture F;
  const bool ok = make_fixture(&F, c);
  CHECK(ok, "%s: allocations", c->name);
  if (!ok) {
    free_fixture(&F);
    return;
  }
  for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
    /* dense: variants whose token tile takes the batch; grouped: all (passes) */
    if (!c->grouped && lat_gemm_variant_max_tokens(variants[v]) < c->T) continue;
    /* dense: the whole batch and one token; grouped: T is the slot bound */
    const int Ts[2] = {c->T, 1};
    for (int ti = 0; ti < (c->grouped || c->T == 1 ? 1 : 2); ti++) {
      const int T = Ts[ti];
      unsigned char *by_split[65] = {0};
      long wrong_all = 0, stray_all = 0, bitdiff = 0, compared = 0;
      for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        int S = 0;
        long wrong, stray;
        unsigned char *h = run(&F, variants[v], T, modes[m], &S, &wrong, &stray);
        if (modes[m] > 0 && S > 1 && !c->grouped) g_split_walks++;
        wrong_all += wrong, stray_all += stray;
        if (S < 1 || S > 64) {
          CHECK(false, "%s: split-K factor %d out of range", c->name, S);
          free(h);
          continue;
        }
        if (by_split[S]) {
          compared++;
          bitdiff += memcmp(by_split[S], h, F.out_elems * F.es) != 0;
          free(h);
        } else {
          by_split[S] = h;
        }
      }
      CHECK(wrong_all == 0 && stray_all == 0 && bitdiff == 0,
            "%s %s T=%d: %ld wrong, %ld stray writes, %ld of %ld same-split runs not bitwise equal", c->name,
            lat_gemm_variant_name(variants[v]), T, wrong_all, stray_all, bitdiff, compared);
      for (int s = 0; s <= 64; s++) free(by_split[s]);
    }
  }
  free_fixture(&F);
}

int main(void) {
  if (cuda_device_count() == 0) {
    printf("no CUDA device: skipped\n");
    return 77;
  }
  CHECK_OK(lat_kernels_init());
  int dev = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, dev);
  const gcase cases[] = {
      {"tails", 1000, 1000, 8, 1, LAT_EP_BF16, NULL},
      {"tails-64", 1000, 1000, 64, 1, LAT_EP_BF16, NULL},
      {"swiglu", 4096, 512, 5, 1, LAT_EP_SWIGLU, NULL},
      {"split-k f32", 384, 4096, 3, 1, LAT_EP_F32, NULL},
      {"heads", 128, 512, 2, 6, LAT_EP_BF16, NULL},
      {"o_proj-like", 7168, 2048, 1, 1, LAT_EP_BF16, NULL},
      {"W_UK-like (idle warps)", 512, 128, 16, 8, LAT_EP_F32, NULL},
      {"grouped swiglu", 256, 1024, 3, 4, LAT_EP_SWIGLU, &g_light},
      {"grouped down", 200, 520, 3, 4, LAT_EP_BF16, &g_light},
      {"grouped heavy swiglu", 256, 1024, 19, 4, LAT_EP_SWIGLU, &g_heavy},
      {"grouped heavy down", 200, 520, 64, 4, LAT_EP_BF16, &g_heavy},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);
  CHECK(g_split_walks > 0, "no persistent run walked several split-K items per CTA: the ring never crossed a split");
  return test_finish();
}
