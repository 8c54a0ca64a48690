/* The latency path's oneshot TP reduce (kernels/latency_tp.h) with R ranks on ONE GPU: each rank
 * is a stream with its own lat_tp buffers, wired to the others by hand (same-device pointers are
 * always "peer accessible"), so the flag barrier, the rank-order sum, the residual add and the
 * RMSNorm run as they do across GPUs. Partials and residual are small integers: x must be exact,
 * xn within the bf16 norm bound and bitwise the same on every rank. Several calls in a row
 * alternate the two partial buffers (the epoch counters and the buffer-reuse rule). A miswired
 * peer must be caught. Also lat_tp_place_blocks, which places the all-gathered row blocks of the
 * split input projections ([q_a | kv_a] in bf16, router logits in fp32) into full rows: an exact
 * copy against a host expectation, every column written once, the columns past ncols (the row
 * stride's tail) untouched, and a wrong block size caught. Exit 77 without a GPU. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "kernels/latency_tp.h"
#include "common/tensor.h"
#include "reference/cuda/cuda_ref.h"
#include "tests/harness.h"

#define CALLS 5

static uint32_t rng(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(*s >> 33);
}
static float small_int(uint64_t *s) { return (float)((int)(rng(s) % 129) - 64); }

/* Waits for every stream, at most 30 s (a broken barrier would spin forever). */
static bool sync_all(cudaStream_t *st, int R) {
  const time_t t0 = time(NULL);
  for (int r = 0; r < R; r++)
    while (cudaStreamQuery(st[r]) == cudaErrorNotReady)
      if (time(NULL) - t0 > 30) return false;
  return cudaGetLastError() == cudaSuccess;
}

/* Returns the number of wrong elements (x inexact, xn out of bound, or ranks disagreeing);
 * miswire: rank 0 reads rank 1's partial in place of its own. */
static long run_case(int R, int T, int D, bool miswire) {
  lat_tp tp[LAT_TP_MAX];
  cudaStream_t st[LAT_TP_MAX];
  float *x[LAT_TP_MAX];
  uint16_t *xn[LAT_TP_MAX], *w = NULL;
  memset(tp, 0, sizeof tp);
  for (int r = 0; r < R; r++) {
    CHECK(cudaStreamCreateWithFlags(&st[r], cudaStreamNonBlocking) == cudaSuccess, "stream");
    CHECK_OK(lat_tp_alloc(&tp[r], r, R, D, T, st[r]));
  }
  const size_t ra = (size_t)tp[0].rows_alloc * D, td = (size_t)T * D;
  for (int r = 0; r < R; r++) {
    tp[r].p2p = true;
    for (int p = 0; p < R; p++) {
      tp[r].peer_part[0][p] = tp[p].part[0];
      tp[r].peer_part[1][p] = tp[p].part[1];
      tp[r].peer_sig[p] = tp[p].sig;
    }
    CHECK(cudaMalloc((void **)&x[r], ra * sizeof(float)) == cudaSuccess, "x");
    CHECK(cudaMalloc((void **)&xn[r], ra * sizeof(uint16_t)) == cudaSuccess, "xn");
  }
  if (miswire && R > 1) tp[0].peer_part[0][0] = tp[1].part[0], tp[0].peer_part[1][0] = tp[1].part[1];
  uint64_t seed = 0x5eedull + (uint64_t)R * 131 + (uint64_t)T * 7 + (uint64_t)D;
  float *hpart = malloc(sizeof(float) * td * R), *hx = malloc(sizeof(float) * td), *hr = malloc(sizeof(float) * td);
  double *ref = malloc(sizeof(double) * td);
  uint16_t *hw = malloc(sizeof(uint16_t) * D), *hn = malloc(sizeof(uint16_t) * td * R);
  for (int i = 0; i < D; i++) hw[i] = f32_to_bf16(1.0f + 0.01f * (float)((int)(rng(&seed) % 41) - 20));
  CHECK(cudaMalloc((void **)&w, sizeof(uint16_t) * D) == cudaSuccess, "w");
  cudaMemcpy(w, hw, sizeof(uint16_t) * D, cudaMemcpyHostToDevice);
  for (size_t i = 0; i < td; i++) ref[i] = hr[i] = small_int(&seed);
  for (int r = 0; r < R; r++) cudaMemcpy(x[r], hr, sizeof(float) * td, cudaMemcpyHostToDevice);
  long wrong = 0;
  for (int k = 0; k < CALLS && !wrong; k++) {
    const int which = k & 1;
    for (size_t i = 0; i < td * R; i++) hpart[i] = small_int(&seed);
    for (size_t i = 0; i < td; i++)
      for (int r = 0; r < R; r++) ref[i] += hpart[r * td + i];
    for (int r = 0; r < R; r++) {
      cudaMemcpyAsync(tp[r].part[which], hpart + r * td, sizeof(float) * td, cudaMemcpyHostToDevice, st[r]);
      cudaStreamSynchronize(st[r]); /* hpart is rewritten next call */
    }
    for (int r = 0; r < R; r++) CHECK_OK(lat_tp_reduce_add_norm(&tp[r], LAT_TP_ONESHOT, which, x[r], xn[r], w, T, 1e-6f, st[r]));
    if (!sync_all(st, R)) {
      fprintf(stderr, "FAIL R=%d T=%d D=%d call %d: the ranks did not finish in 30 s (barrier)\n", R, T, D, k);
      fflush(stderr);
      _exit(1); /* a spinning kernel cannot be recovered */
    }
    for (int r = 0; r < R; r++) {
      cudaMemcpy(hx, x[r], sizeof(float) * td, cudaMemcpyDeviceToHost);
      cudaMemcpy(hn + r * td, xn[r], sizeof(uint16_t) * td, cudaMemcpyDeviceToHost);
      for (size_t i = 0; i < td; i++) wrong += hx[i] != (float)ref[i];
    }
    for (int t = 0; t < T; t++) {
      double ss = 0;
      for (int i = 0; i < D; i++) ss += ref[(size_t)t * D + i] * ref[(size_t)t * D + i];
      const double inv = 1.0 / sqrt(ss / D + 1e-6);
      for (int i = 0; i < D; i++) {
        const size_t j = (size_t)t * D + i;
        const double want = bf16_to_f32(hw[i]) * ref[j] * inv;
        wrong += fabs(bf16_to_f32(hn[j]) - want) > 1.6e-2 * (fabs(want) + 1e-3);
        for (int r = 1; r < R; r++) wrong += hn[r * td + j] != hn[j];
      }
    }
  }
  for (int r = 0; r < R; r++) {
    cudaFree(x[r]);
    cudaFree(xn[r]);
    lat_tp_close(&tp[r]);
    cudaStreamDestroy(st[r]);
  }
  cudaFree(w);
  free(hpart), free(hx), free(hr), free(ref), free(hw), free(hn);
  return wrong;
}

/* lat_tp_place_blocks for N ranks, T rows, ncols columns of esz bytes (blocks of ceil(ncols / N),
 * from lat_tp_row_block), row stride ncols + 3; blk_bug != 0 passes that block size instead (a
 * planted bug). Returns the number of wrong bytes (including written guard columns), -1 when the
 * call failed. */
static long place_case(int N, int T, int ncols, int esz, int blk_bug) {
  int r0, n;
  const int blk = lat_tp_row_block(ncols, N, 0, &r0, &n), ldo = ncols + 3;
  const size_t gb = (size_t)N * T * blk * esz, ob = (size_t)T * ldo * esz;
  unsigned char *hg = malloc(gb), *ho = malloc(ob), *want = malloc(ob);
  void *dg = NULL, *dout = NULL;
  long wrong = -1;
  uint64_t seed = 0xb10cull + (uint64_t)N * 1009 + (uint64_t)T * 31 + (uint64_t)ncols * 3 + (uint64_t)esz;
  if (!hg || !ho || !want || cudaMalloc(&dg, gb) != cudaSuccess || cudaMalloc(&dout, ob) != cudaSuccess) goto done;
  for (size_t i = 0; i < gb; i++) hg[i] = (unsigned char)rng(&seed);
  memset(want, 0xA5, ob); /* poison: what the kernel must not touch stays */
  for (int t = 0; t < T; t++)
    for (int r = 0; r < N; r++) {
      int a, cnt;
      lat_tp_row_block(ncols, N, r, &a, &cnt);
      for (int j = 0; j < cnt; j++)
        memcpy(want + ((size_t)t * ldo + a + j) * esz, hg + (((size_t)r * T + t) * blk + j) * esz, (size_t)esz);
    }
  cudaMemcpy(dg, hg, gb, cudaMemcpyHostToDevice);
  cudaMemset(dout, 0xA5, ob);
  if (lat_tp_place_blocks(dout, ldo, dg, N, T, blk_bug ? blk_bug : blk, ncols, esz, NULL) != V_OK) goto done;
  if (cudaDeviceSynchronize() != cudaSuccess || cudaMemcpy(ho, dout, ob, cudaMemcpyDeviceToHost) != cudaSuccess)
    goto done;
  wrong = 0;
  for (size_t i = 0; i < ob; i++) wrong += ho[i] != want[i];
done:
  cudaFree(dg);
  cudaFree(dout);
  free(hg), free(ho), free(want);
  return wrong;
}

int main(void) {
  if (cuda_device_count() == 0) {
    printf("no CUDA device: skipped\n");
    return 77;
  }
  const int Rs[] = {1, 2, 4, 8, 16}, Ts[] = {1, 3, 64}, Ds[] = {64, 7168};
  for (int a = 0; a < 5; a++)
    for (int b = 0; b < 3; b++)
      for (int c = 0; c < 2; c++) {
        const long wrong = run_case(Rs[a], Ts[b], Ds[c], false);
        CHECK(wrong == 0, "oneshot R=%d T=%d D=%d: %ld wrong elements", Rs[a], Ts[b], Ds[c], wrong);
      }
  /* the checks can fail: a rank reading another rank's partial in place of its own */
  CHECK(run_case(4, 3, 64, true) > 0, "a miswired peer was not caught");
  /* placing gathered blocks: K2's [q_a | kv_a] (2112 rows) and router (384 experts), shapes whose
   * last blocks are short or empty (13 over 4 ranks: 4,4,4,1; 7 over 16: seven of one row) */
  const int Ns[] = {1, 2, 3, 8, 16}, PTs[] = {1, 5, 64}, Cs[] = {2112, 384, 13, 7};
  for (int a = 0; a < 5; a++)
    for (int b = 0; b < 3; b++)
      for (int c = 0; c < 4; c++)
        for (int e = 2; e <= 4; e += 2) {
          const long wrong = place_case(Ns[a], PTs[b], Cs[c], e, 0);
          CHECK(wrong == 0, "place_blocks N=%d T=%d ncols=%d esz=%d: %ld wrong bytes", Ns[a], PTs[b], Cs[c], e, wrong);
        }
  CHECK(place_case(4, 3, 13, 2, 5) > 0, "place_blocks with a wrong block size was not caught");
  CHECK(place_case(2, 1, 8, 4, 2) < 0, "place_blocks accepted blocks that cannot cover the columns");
  return test_finish();
}
