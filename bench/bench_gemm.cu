/* bench_gemm: the latency path's decode GEMMs one at a time, at Kimi K2's shapes, on every
 * variant that takes the batch (cuBLAS, v6..v11 persistent, and one CTA per work item), the
 * way llm.c's dev harnesses time a kernel: the time per GEMM next to the weight bandwidth it
 * reached, so a GEMM change can be judged without a whole decode step.
 *   bench_gemm [--batch 1,8,64] [--only NAME] [--reps 20]
 * Each timing: REPS launches of the GEMM captured in one CUDA graph with programmatic dependent
 * launch on (as the path runs them; the next launch's weight prefetch overlaps this one's tail),
 * the graph replayed 5 times, the best replay / REPS. Weights rotate over enough copies that the
 * 50 MB L2 never holds the next launch's weights. Grouped (expert) GEMMs: each token picks 8 of
 * 384 experts at random (fixed seed), so batch 64 has ~300 active experts with 1-2 tokens each.
 * Weights and activations are constant bf16 (values do not change a bandwidth-bound kernel).
 * Exit 77 without a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels/latency_kernels.h"
#include "reference/cuda/cuda_pdl.h"

#define WS_BYTES ((size_t)32 << 20)      /* split-K scratch, as the path's */
#define ROTATE_BYTES ((size_t)256 << 20) /* weights of a timing span at least this (5x L2) */
#define N_EXPERTS 384
#define TOPK 8

#define CK(x)                                                                                         \
  do {                                                                                                \
    cudaError_t e_ = (x);                                                                             \
    if (e_ != cudaSuccess) {                                                                          \
      fprintf(stderr, "bench_gemm: %s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                                        \
    }                                                                                                 \
  } while (0)

typedef struct {
  const char *name;
  int N, K, Z;  /* weight rows, reduction length, z slices (dense) */
  int ep;       /* LAT_EP_* */
  bool grouped; /* routed experts: Z = active experts of the batch */
} shape;

/* Kimi K2 (hidden 7168, q_lora 1536, kv_lora 512 + rope 64, 64 heads of 128 + 64, v 128, dense
 * intermediate 18432, expert intermediate 2048, vocabulary 163840). */
static const shape g_shapes[] = {
    {"q_a|kv_a", 2112, 7168, 1, LAT_EP_BF16, false},    {"q_b", 12288, 1536, 1, LAT_EP_BF16, false},
    {"W_UK", 512, 128, 64, LAT_EP_F32, false},          {"W_UV", 128, 512, 64, LAT_EP_BF16, false},
    {"o_proj", 7168, 8192, 1, LAT_EP_BF16, false},      {"dense gate|up", 36864, 7168, 1, LAT_EP_SWIGLU, false},
    {"dense down", 7168, 18432, 1, LAT_EP_BF16, false}, {"shared gate|up", 4096, 7168, 1, LAT_EP_SWIGLU, false},
    {"shared down", 7168, 2048, 1, LAT_EP_BF16, false}, {"experts gate|up", 4096, 7168, 0, LAT_EP_SWIGLU, true},
    {"experts down", 7168, 2048, 0, LAT_EP_BF16, true}, {"lm_head", 163840, 7168, 1, LAT_EP_F32, false},
};

static void *dmalloc(size_t bytes) {
  void *p = NULL;
  CK(cudaMalloc(&p, bytes));
  CK(cudaMemset(p, 0x3c, bytes)); /* bf16 0x3c3c ~ 0.0115 */
  return p;
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static int rnd(int n) {
  g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
  return (int)((g_rng >> 33) % (uint64_t)n);
}

/* Buckets of a batch of B tokens that each pick TOPK distinct experts: act_* over the active
 * experts in id order, xmap (bucket row -> token), omap (bucket row -> token*TOPK + k). */
typedef struct {
  int n_act;
  int32_t *n_act_d, *act_e, *act_off, *act_cnt, *xmap, *omap; /* device */
} buckets;

static buckets make_buckets(int B) {
  int pick[64][TOPK], cnt[N_EXPERTS] = {0};
  for (int t = 0; t < B; t++)
    for (int k = 0; k < TOPK; k++) {
      int e, dup;
      do {
        e = rnd(N_EXPERTS);
        dup = 0;
        for (int i = 0; i < k; i++) dup |= pick[t][i] == e;
      } while (dup);
      pick[t][k] = e;
      cnt[e]++;
    }
  int32_t ae[N_EXPERTS], ao[N_EXPERTS], ac[N_EXPERTS], xm[64 * TOPK], om[64 * TOPK];
  buckets b = {0, NULL, NULL, NULL, NULL, NULL, NULL};
  int off = 0;
  for (int e = 0; e < N_EXPERTS; e++) {
    if (!cnt[e]) continue;
    ae[b.n_act] = e, ao[b.n_act] = off, ac[b.n_act] = cnt[e];
    int r = off;
    for (int t = 0; t < B; t++)
      for (int k = 0; k < TOPK; k++)
        if (pick[t][k] == e) xm[r] = t, om[r] = t * TOPK + k, r++;
    off += cnt[e];
    b.n_act++;
  }
  CK(cudaMalloc(&b.n_act_d, sizeof(int32_t)));
  CK(cudaMalloc(&b.act_e, sizeof ae));
  CK(cudaMalloc(&b.act_off, sizeof ao));
  CK(cudaMalloc(&b.act_cnt, sizeof ac));
  CK(cudaMalloc(&b.xmap, sizeof xm));
  CK(cudaMalloc(&b.omap, sizeof om));
  CK(cudaMemcpy(b.n_act_d, &b.n_act, sizeof(int32_t), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b.act_e, ae, sizeof ae, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b.act_off, ao, sizeof ao, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b.act_cnt, ac, sizeof ac, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b.xmap, xm, sizeof xm, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b.omap, om, sizeof om, cudaMemcpyHostToDevice));
  return b;
}

static void free_buckets(buckets *b) {
  cudaFree(b->n_act_d), cudaFree(b->act_e), cudaFree(b->act_off), cudaFree(b->act_cnt), cudaFree(b->xmap),
      cudaFree(b->omap);
}

/* Times `reps` launches of `variant` (max_ctas as lat_gemm_args) over the weight copies; returns
 * us per launch, or -1 when the variant does not take this GEMM. */
static double time_gemm(const shape *s, int B, const buckets *bk, uint16_t **wcopy, int ncopy,
                        const uint16_t *const *const *wptrs, uint16_t *x, void *out, float *ws, int variant,
                        int max_ctas, int reps, int sms, cublasHandle_t blas, cudaStream_t st) {
  if (variant == LAT_V5_CUBLAS && s->grouped) return -1;
  /* dense: the variant's token tile must take the batch; grouped: the cp.async variants take an
   * expert's tokens in passes, the register-load ones are not benchmarked */
  if (variant != LAT_V5_CUBLAS && !s->grouped && lat_gemm_variant_max_tokens(variant) < B) return -1;
  cudaGraph_t g;
  const bool was = pdl_set(true);
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int r = 0; r < reps; r++) {
    lat_gemm_args a;
    const int ncol = s->ep == LAT_EP_SWIGLU ? s->N / 2 : s->N;
    if (s->grouped) {
      a = lat_grouped_args(wptrs[r % ncopy], x, s->K, out, ncol, s->N, s->K, B, s->ep, bk->n_act, bk->n_act_d,
                           bk->act_e, bk->act_off, bk->act_cnt);
      a.xmap = bk->xmap;
      a.omap = bk->omap;
    } else {
      a = lat_dense_args(wcopy[r % ncopy], x, s->K, out, ncol, s->N, s->K, B, s->ep);
      a.Z = s->Z;
      a.w_bstride = (long long)s->N * s->K;
      a.x_bstride = (long long)B * s->K;
      a.o_bstride = (long long)B * ncol;
    }
    a.ws = ws;
    a.ws_bytes = WS_BYTES;
    a.max_ctas = max_ctas;
    if (lat_gemm(&a, variant, sms, blas, st, NULL, NULL) != V_OK) {
      fprintf(stderr, "bench_gemm: %s %s: %s\n", s->name, lat_gemm_variant_name(variant), verr_msg());
      exit(1);
    }
  }
  CK(cudaStreamEndCapture(st, &g));
  pdl_set(was);
  cudaGraphExec_t ge;
  CK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaGraphLaunch(ge, st)); /* warm-up */
  float best = 1e30f;
  for (int i = 0; i < 5; i++) {
    CK(cudaEventRecord(e0, st));
    CK(cudaGraphLaunch(ge, st));
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (ms < best) best = ms;
  }
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  cudaGraphExecDestroy(ge), cudaGraphDestroy(g);
  return best * 1000.0 / reps;
}

int main(int argc, char **argv) {
  int batches[8] = {1, 8, 64}, nb = 3, reps = 20;
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
      nb = 0;
      for (char *t = strtok(argv[++i], ","); t && nb < 8; t = strtok(NULL, ",")) batches[nb++] = atoi(t);
    } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
      only = argv[++i];
    } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: bench_gemm [--batch 1,8,64] [--only NAME] [--reps 20]\n");
      return 2;
    }
  }
  for (int b = 0; b < nb; b++)
    if (batches[b] < 1 || batches[b] > 64) {
      fprintf(stderr, "bench_gemm: --batch %d: want 1..64\n", batches[b]);
      return 2;
    }
  if (reps < 1 || reps > 1000) {
    fprintf(stderr, "bench_gemm: --reps %d: want 1..1000\n", reps);
    return 2;
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("bench_gemm: no CUDA device: skipped\n");
    return 77;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  if (lat_kernels_init() != V_OK) {
    fprintf(stderr, "bench_gemm: %s\n", verr_msg());
    return 1;
  }
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cublasHandle_t blas;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(blas, st) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "bench_gemm: cuBLAS init failed\n");
    return 1;
  }
  void *cublas_ws = dmalloc(WS_BYTES);
  cublasSetWorkspace(blas, cublas_ws, WS_BYTES);
  float *ws = (float *)dmalloc(WS_BYTES);
  uint16_t *x = (uint16_t *)dmalloc((size_t)64 * TOPK * 18432 * 2);
  void *out = dmalloc((size_t)64 * TOPK * 163840 * 4);
  static const int variants[] = {LAT_V5_CUBLAS, LAT_V6_CP_N8,  LAT_V7_CP_N16, LAT_V8_CP_N32,
                                 LAT_V9_CP_N64, LAT_V10_CP_W8, LAT_V11_CP_M2};
  printf("bench_gemm: %s, %d SMs, %d launches per graph, best of 5 replays; us per GEMM and weight GB/s\n", prop.name,
         prop.multiProcessorCount, reps);
  printf("%-16s %5s %8s | %-10s %9s %7s | %9s %7s (one CTA per item)\n", "gemm", "batch", "MB", "variant", "us", "GB/s",
         "us", "GB/s");
  for (size_t si = 0; si < sizeof g_shapes / sizeof g_shapes[0]; si++) {
    const shape *s = &g_shapes[si];
    if (only && strcmp(only, s->name)) continue;
    for (int bi = 0; bi < nb; bi++) {
      const int B = batches[bi];
      buckets bk = {0, NULL, NULL, NULL, NULL, NULL, NULL};
      const size_t one = (size_t)s->N * s->K * 2; /* one weight matrix (one expert) */
      size_t bytes = one * (s->grouped ? 0 : (size_t)s->Z);
      uint16_t *wcopy[64] = {0};
      const uint16_t *const *wptrs[64] = {0};
      uint16_t *experts = NULL;
      int ncopy = 1;
      if (s->grouped) {
        bk = make_buckets(B);
        bytes = one * (size_t)bk.n_act;
        /* every expert distinct memory: N_EXPERTS experts, and rotate the expert ids' mapping
         * over copies of the pointer table so consecutive launches read different experts */
        experts = (uint16_t *)dmalloc(one * N_EXPERTS);
        ncopy = 4;
        for (int c = 0; c < ncopy; c++) {
          const uint16_t *p[N_EXPERTS];
          for (int e = 0; e < N_EXPERTS; e++) p[e] = experts + (size_t)((e + c * 97) % N_EXPERTS) * s->N * s->K;
          void *d = NULL;
          CK(cudaMalloc(&d, sizeof p));
          CK(cudaMemcpy(d, p, sizeof p, cudaMemcpyHostToDevice));
          wptrs[c] = (const uint16_t *const *)d;
        }
      } else {
        ncopy = (int)((ROTATE_BYTES + bytes - 1) / bytes);
        if (ncopy > 64) ncopy = 64;
        if (ncopy < 1) ncopy = 1;
        for (int c = 0; c < ncopy; c++) wcopy[c] = (uint16_t *)dmalloc(bytes);
      }
      for (size_t vi = 0; vi < sizeof variants / sizeof variants[0]; vi++) {
        const int v = variants[vi];
        const double us =
            time_gemm(s, B, &bk, wcopy, ncopy, wptrs, x, out, ws, v, 0, reps, prop.multiProcessorCount, blas, st);
        if (us < 0) continue;
        const double gbs = (double)bytes / (us * 1e-6) / 1e9;
        if (v == LAT_V5_CUBLAS) {
          printf("%-16s %5d %8.1f | %-10s %9.2f %7.0f |\n", s->name, B, bytes / 1e6, lat_gemm_variant_name(v), us, gbs);
          continue;
        }
        const double us1 =
            time_gemm(s, B, &bk, wcopy, ncopy, wptrs, x, out, ws, v, -1, reps, prop.multiProcessorCount, blas, st);
        printf("%-16s %5d %8.1f | %-10s %9.2f %7.0f | %9.2f %7.0f\n", s->name, B, bytes / 1e6, lat_gemm_variant_name(v),
               us, gbs, us1, (double)bytes / (us1 * 1e-6) / 1e9);
      }
      fflush(stdout);
      for (int c = 0; c < 64; c++) {
        if (wcopy[c]) cudaFree(wcopy[c]);
        if (wptrs[c]) cudaFree((void *)wptrs[c]);
      }
      if (experts) cudaFree(experts);
      if (s->grouped) free_buckets(&bk);
    }
  }
  cublasDestroy(blas);
  cudaFree(cublas_ws), cudaFree(ws), cudaFree(x), cudaFree(out);
  cudaStreamDestroy(st);
  return 0;
}
