/* bench_latency: per-step device time of the latency path on synth:k2-slice (1 dense + 2 MoE
 * layers, weights generated on the GPU) at batch 1, 8, 64 and context 1024 (pure decode on a
 * fill_cache'd latent cache; the router decides), with a per-phase breakdown (attention,
 * dense MLP, MoE, lm_head; one eager step with events) next to the roofline: the bytes the
 * step must read (weights incl. the experts actually selected, latent cache) over the copy
 * bandwidth measured in the same run.
 *   bench_latency [--preset k2-slice] [--ctx 1024] [--steps 30] [--with-ref] [--variants "table;v6_cp_n8;..."]
 *                 [--ops FILE]
 * --variants times each GEMM choice in turn in the same process ("table": the per-bucket table;
 * a variant name forces it, see kernels/latency.h); --ops appends each profiled step's per-op
 * times (summed over layers, largest first) to FILE.
 * --with-ref runs cuda-ref on the same steps after closing latency (both paths' k2-slice
 * weights do not fit on one GPU together) and prints the speed-up.
 * Output: one line per batch; "PASS"/"MISS" against the issue's roofline figures
 * (>= 85 % at batch 1, >= 75 % at batch 64). Exit 77 without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "common/path.h"
#include "kernels/latency.h"
#include "model/model.h"
#include "reference/cuda/cuda_ref.h"

#define NB 3
static const int g_batches[NB] = {1, 8, 64};

static int cmp_d(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Copy bandwidth (bytes read + written per second) of a 2 GiB device-to-device copy. */
static double copy_bw(void) {
  const size_t n = (size_t)2 << 30;
  void *a = NULL, *b = NULL;
  if (cudaMalloc(&a, n) != cudaSuccess || cudaMalloc(&b, n) != cudaSuccess) {
    if (a) cudaFree(a);
    return 0;
  }
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice);
  float best = 1e30f;
  for (int i = 0; i < 5; i++) {
    cudaEventRecord(e0, 0);
    cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1, 0);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    if (ms < best) best = ms;
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(a);
  cudaFree(b);
  return 2.0 * (double)n / (best * 1e-3);
}

/* Median step time (ms) of `steps` decode steps at batch B over slots 0..B-1 at position ctx. */
static int time_steps(const vpath_ops *ops, void *st, int B, int ctx, int steps, int V, double *median) {
  int seq[64], n[64], sp[64];
  int32_t tok[64];
  for (int i = 0; i < B; i++) seq[i] = i, n[i] = 1, sp[i] = ctx, tok[i] = (int32_t)((i * 7919 + 13) % V);
  vstep s = {B, seq, n, sp, tok, false, NULL};
  float *logits = malloc((size_t)B * V * sizeof(float));
  double *t = malloc((size_t)steps * sizeof(double));
  if (!logits || !t) return 1;
  for (int k = 0; k < 3 + steps; k++) {
    if (ops->forward(st, &s, logits) != V_OK) {
      fprintf(stderr, "%s forward: %s\n", ops->name, verr_msg());
      free(logits), free(t);
      return 1;
    }
    if (k >= 3) t[k - 3] = ops->last_step_ms ? ops->last_step_ms(st) : 0;
  }
  qsort(t, (size_t)steps, sizeof(double), cmp_d);
  *median = t[steps / 2];
  free(logits);
  free(t);
  return 0;
}

/* Appends the last profiled step's per-op times, summed over equal labels, largest first. */
static void write_ops(const char *path, void *ls, const char *var, int B) {
  const char *lab[256];
  double ms[256];
  const int n = latency_profile_ops(ls, lab, ms, 256);
  const char *ul[256];
  double us[256];
  int cnt[256], nu = 0;
  double tot = 0;
  for (int i = 0; i < n; i++) {
    tot += ms[i];
    int j = 0;
    while (j < nu && strcmp(ul[j], lab[i]) != 0) j++;
    if (j == nu) ul[nu] = lab[i], us[nu] = 0, cnt[nu] = 0, nu++;
    us[j] += ms[i];
    cnt[j]++;
  }
  FILE *f = fopen(path, "a");
  if (!f) return;
  fprintf(f, "== %s batch %d: %d launches, %.3f ms eager\n", var, B, n, tot);
  for (int k = 0; k < nu; k++) {
    int best = k;
    for (int j = k + 1; j < nu; j++)
      if (us[j] > us[best]) best = j;
    const char *tl = ul[k];
    double tu = us[k];
    int tc = cnt[k];
    ul[k] = ul[best], us[k] = us[best], cnt[k] = cnt[best];
    ul[best] = tl, us[best] = tu, cnt[best] = tc;
    fprintf(f, "%9.1f us  x%-2d %s\n", us[k] * 1e3, cnt[k], ul[k]);
  }
  fclose(f);
}

int main(int argc, char **argv) {
  const char *preset = "k2-slice";
  int ctx = 1024, steps = 30, with_ref = 0;
  const char *variants = "table", *ops_file = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--preset") && i + 1 < argc) preset = argv[++i];
    else if (!strcmp(argv[i], "--ctx") && i + 1 < argc) ctx = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--with-ref")) with_ref = 1;
    else if (!strcmp(argv[i], "--variants") && i + 1 < argc) variants = argv[++i];
    else if (!strcmp(argv[i], "--ops") && i + 1 < argc) ops_file = argv[++i];
    else {
      fprintf(stderr, "usage: bench_latency [--preset k2-slice] [--ctx 1024] [--steps 30] [--with-ref] "
                      "[--variants \"table;v6_cp_n8\"] [--ops FILE]\n");
      return 2;
    }
  }
  if (cuda_device_count() == 0) {
    printf("no CUDA device: skipped\n");
    return 77;
  }
  if (steps < 1) steps = 1;
  char spec[64];
  snprintf(spec, sizeof spec, "synth:%s", preset);
  ds_model m;
  if (ds_model_open(&m, spec, 1234, 0, false) != V_OK) {
    fprintf(stderr, "model: %s\n", verr_msg());
    return 1;
  }
  const int V = m.cfg.vocab_size;
  const double bw = copy_bw();
  printf("bench_latency: %s, context %d, %d steps per point, copy bandwidth %.0f GB/s\n", spec, ctx, steps, bw / 1e9);
  vpath_opts o = {.max_seq = 64, .max_ctx = ctx + 8};
  void *ls = NULL;
  if (latency_ops.open(&ls, &m, &o) != V_OK) {
    fprintf(stderr, "latency open: %s\n", verr_msg());
    return 1;
  }
  int fails = 0;
  double lat_ms[NB] = {0};
  for (int i = 0; i < 64; i++)
    if (latency_ops.fill_cache(ls, i, ctx, 42 + i) != V_OK) {
      fprintf(stderr, "fill_cache: %s\n", verr_msg());
      return 1;
    }
  char vlist[512];
  snprintf(vlist, sizeof vlist, "%s", variants);
  char *vsave = NULL;
  for (char *var = strtok_r(vlist, ";", &vsave); var; var = strtok_r(NULL, ";", &vsave)) {
    if (latency_set_variant(ls, var) != V_OK) {
      fprintf(stderr, "variant %s: %s\n", var, verr_msg());
      return 1;
    }
    printf("GEMM choice: %s (table 1/8/64: %s/%s/%s, experts %s/%s/%s)\n", var, latency_table_variant(1, false),
           latency_table_variant(8, false), latency_table_variant(64, false), latency_table_variant(1, true),
           latency_table_variant(8, true), latency_table_variant(64, true));
    printf("%5s %10s %9s %9s %9s %9s %9s %10s %9s %7s %s\n", "batch", "step_ms", "attn_ms", "dense_ms", "moe_ms",
           "lmhead_ms", "experts", "bytes_GB", "roof_ms", "%roof", "verdict");
    for (int b = 0; b < NB; b++) {
      const int B = g_batches[b];
      double med = 0;
      if (time_steps(&latency_ops, ls, B, ctx, steps, V, &med)) return 1;
      if (var == vlist) lat_ms[b] = med;
      int seq[64], n[64], sp[64];
      int32_t tok[64];
      for (int i = 0; i < B; i++) seq[i] = i, n[i] = 1, sp[i] = ctx, tok[i] = (int32_t)((i * 7919 + 13) % V);
      vstep s = {B, seq, n, sp, tok, false, NULL};
      float *logits = malloc((size_t)B * V * sizeof(float));
      double ph[LAT_NPHASE] = {0}, experts = 0;
      if (!logits || latency_profile_step(ls, &s, logits, ph, &experts) != V_OK) {
        fprintf(stderr, "profile: %s\n", verr_msg());
        return 1;
      }
      free(logits);
      if (ops_file) write_ops(ops_file, ls, var, B);
      const double bytes = ds_decode_bytes(&m.cfg, B, ctx, experts, true);
      const double roof = bw > 0 ? bytes / bw * 1e3 : 0;
      const double pct = med > 0 ? 100.0 * roof / med : 0;
      const double need = B == 1 ? 85.0 : B == 64 ? 75.0 : 0.0;
      const char *verdict = need == 0 ? "-" : pct >= need ? "PASS" : "MISS";
      if (need > 0 && pct < need && var == vlist) fails++;
      printf("%5d %10.3f %9.3f %9.3f %9.3f %9.3f %9.1f %10.3f %9.3f %6.1f%% %s (need >= %.0f%%)\n", B, med,
             ph[LAT_PH_ATTN], ph[LAT_PH_DENSE], ph[LAT_PH_MOE], ph[LAT_PH_LMHEAD], experts, bytes / 1e9, roof, pct,
             verdict, need);
    }
  }
  printf("(phase times come from one eager step with events, so they add up to more than the graph step)\n");
  latency_ops.close(ls);
  if (with_ref) {
    void *rs = NULL;
    if (cuda_ref_ops.open(&rs, &m, &o) != V_OK) {
      fprintf(stderr, "cuda-ref open: %s\n", verr_msg());
      return 1;
    }
    for (int i = 0; i < 64; i++) cuda_ref_ops.fill_cache(rs, i, ctx, 42 + i);
    for (int b = 0; b < NB; b++) {
      double med = 0;
      if (!cuda_ref_ops.last_step_ms) {
        printf("cuda-ref has no last_step_ms: no comparison\n");
        break;
      }
      if (time_steps(&cuda_ref_ops, rs, g_batches[b], ctx, steps, V, &med)) return 1;
      const double sp = lat_ms[b] > 0 ? med / lat_ms[b] : 0;
      const double need = g_batches[b] == 1 ? 1.5 : g_batches[b] == 64 ? 1.3 : 0;
      printf("batch %2d: cuda-ref %.3f ms, latency %.3f ms, speed-up %.2fx %s\n", g_batches[b], med, lat_ms[b], sp,
             need == 0 ? "" : sp >= need ? "PASS" : "MISS");
      if (need > 0 && sp < need) fails++;
    }
    cuda_ref_ops.close(rs);
  }
  ds_model_close(&m);
  printf("bench_latency: %s\n", fails ? "figures missed (see MISS lines)" : "all figures reached");
  return fails ? 3 : 0;
}
