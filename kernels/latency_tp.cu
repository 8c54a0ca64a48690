/* Tensor-parallel reduce + residual + RMSNorm for the latency path (see latency_tp.h). */
#include <unistd.h>

#include "kernels/latency_tp.h"
#include "reference/cuda/cuda_common.h"
#include "reference/cuda/cuda_device.h"

#define TP_THREADS 256
#define FULL_MASK 0xffffffffu

static const char *const g_mode_names[LAT_TP_NMODES] = {"auto", "p2p_oneshot", "nccl", "nccl_rs_ag"};
static const char *const g_mode_words[LAT_TP_NMODES] = {"auto", "oneshot", "nccl", "rsag"};

extern "C" const char *lat_tp_mode_name(int mode) {
  return mode >= 0 && mode < LAT_TP_NMODES ? g_mode_names[mode] : "?";
}

extern "C" int lat_tp_mode_from_name(const char *s) {
  for (int i = 0; i < LAT_TP_NMODES; i++)
    if (strcmp(s, g_mode_words[i]) == 0 || strcmp(s, g_mode_names[i]) == 0) return i;
  return -1;
}

/* ---- kernels ---- */

typedef struct {
  const float *p[LAT_TP_MAX]; /* the partials summed, in rank order */
  uint32_t *sig[LAT_TP_MAX];  /* every rank's flag array (oneshot barrier) */
} tp_ptrs;

static __device__ __forceinline__ void st_release_sys(uint32_t *a, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(a), "r"(v) : "memory");
}
static __device__ __forceinline__ uint32_t ld_acquire_sys(const uint32_t *a) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(a) : "memory");
  return v;
}


/* Rows t = blockIdx.x, +gridDim.x, ... < T: x[t] += sum_r P.p[r][t] (rank order), xn[t] = norm.
 * Rows T <= t < Tz are zeroed in x and xn (RSAG padding). With sync, the block first waits until
 * every rank's block of the same index reached this call (flags in device memory, one per block):
 * the partials each rank wrote before this kernel are then complete and readable. D % 4 == 0. */
static __global__ void __launch_bounds__(TP_THREADS)
    reduce_add_norm_kernel(tp_ptrs P, int N, int rank, int sync, uint32_t *sig, uint32_t *epoch, float *x,
                           uint16_t *xn, const uint16_t *w, int T, int Tz, int D, float eps) {
  __shared__ float red[32];
  __shared__ uint32_t e;
  const int b = blockIdx.x;
  if (sync) {
    if (threadIdx.x == 0) {
      e = epoch[b] + 1;
      epoch[b] = e;
    }
    __syncthreads();
    if (threadIdx.x < N) {
      st_release_sys(P.sig[threadIdx.x] + rank * LAT_TP_BLOCKS + b, e);
      const uint32_t *mine = sig + threadIdx.x * LAT_TP_BLOCKS + b;
      while ((int)(ld_acquire_sys(mine) - e) < 0) {
      }
    }
    __syncthreads();
  }
  for (int t = b; t < Tz; t += gridDim.x) {
    float *xr = x + (size_t)t * D;
    uint16_t *nr = xn + (size_t)t * D;
    if (t >= T) {
      for (int i = threadIdx.x; i < D; i += blockDim.x) xr[i] = 0.0f, nr[i] = 0;
      continue;
    }
    float ss = 0.0f;
    for (int i = threadIdx.x * 4; i < D; i += blockDim.x * 4) {
      float4 s = __ldcv((const float4 *)(P.p[0] + (size_t)t * D + i));
      for (int r = 1; r < N; r++) {
        const float4 v = __ldcv((const float4 *)(P.p[r] + (size_t)t * D + i));
        s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
      }
      float4 h = *(float4 *)(xr + i);
      h.x += s.x, h.y += s.y, h.z += s.z, h.w += s.w;
      *(float4 *)(xr + i) = h;
      ss += h.x * h.x + h.y * h.y + h.z * h.z + h.w * h.w;
    }
    ss = block_sum(ss, red);
    const float inv = 1.0f / sqrtf(ss / (float)D + eps);
    for (int i = threadIdx.x * 4; i < D; i += blockDim.x * 4) {
      const float4 h = *(const float4 *)(xr + i);
      nr[i] = f2bf(bf2f(w[i]) * (h.x * inv));
      nr[i + 1] = f2bf(bf2f(w[i + 1]) * (h.y * inv));
      nr[i + 2] = f2bf(bf2f(w[i + 2]) * (h.z * inv));
      nr[i + 3] = f2bf(bf2f(w[i + 3]) * (h.w * inv));
    }
    __syncthreads(); /* red[] is reused by the next row */
  }
}

/* ---- open / close ---- */

extern "C" void lat_tp_close(lat_tp *t) {
  if (!t) return;
  cudaFree(t->part[0]);
  cudaFree(t->part[1]);
  cudaFree(t->rs);
  cudaFree(t->sig);
  cudaFree(t->epoch);
  memset(t, 0, sizeof *t);
}

/* What each rank tells the others at open: its process, GPU and buffers. */
typedef struct {
  int64_t pid, device, part0, part1, sig;
} tp_card;

static vstatus alloc_impl(lat_tp *t, int rank, int N, int D, int rows, cudaStream_t st) {
  if (N < 1 || N > LAT_TP_MAX) return VERR("latency TP: %d ranks (1..%d)", N, LAT_TP_MAX);
  if (rank < 0 || rank >= N) return VERR("latency TP: rank %d of %d", rank, N);
  if (D % 4) return VERR("latency TP: hidden size %d is not a multiple of 4", D);
  if (rows < 1) return VERR("latency TP: %d rows", rows);
  t->rank = rank;
  t->size = N;
  t->D = D;
  t->rows = rows;
  t->rows_alloc = (rows + N - 1) / N * N;
  const size_t pb = (size_t)t->rows_alloc * D * sizeof(float);
  CUDA_CHECK(cudaMalloc((void **)&t->part[0], pb));
  CUDA_CHECK(cudaMalloc((void **)&t->part[1], pb));
  CUDA_CHECK(cudaMalloc((void **)&t->rs, pb / N));
  CUDA_CHECK(cudaMalloc((void **)&t->sig, sizeof(uint32_t) * LAT_TP_MAX * LAT_TP_BLOCKS));
  CUDA_CHECK(cudaMalloc((void **)&t->epoch, sizeof(uint32_t) * LAT_TP_BLOCKS));
  CUDA_CHECK(cudaMemsetAsync(t->part[0], 0, pb, st));
  CUDA_CHECK(cudaMemsetAsync(t->part[1], 0, pb, st));
  CUDA_CHECK(cudaMemsetAsync(t->sig, 0, sizeof(uint32_t) * LAT_TP_MAX * LAT_TP_BLOCKS, st));
  CUDA_CHECK(cudaMemsetAsync(t->epoch, 0, sizeof(uint32_t) * LAT_TP_BLOCKS, st));
  return V_OK;
}

extern "C" vstatus lat_tp_alloc(lat_tp *t, int rank, int size, int D, int rows, cudaStream_t st) {
  memset(t, 0, sizeof *t);
  const vstatus s = alloc_impl(t, rank, size, D, rows, st);
  if (s != V_OK) lat_tp_close(t);
  return s;
}

static vstatus open_impl(lat_tp *t, const vcomm *c, int device, int D, int rows, cudaStream_t st) {
  const int N = c->size;
  if (!c->reduce_scatter_sum) return VERR("latency TP: communicator '%s' has no reduce-scatter", c->name);
  VTRY(alloc_impl(t, c->rank, N, D, rows, st));
  t->comm = c;
  /* exchange cards through the communicator (an all-gather of int32 pairs) */
  tp_card mine = {(int64_t)getpid(), device, (int64_t)(uintptr_t)t->part[0], (int64_t)(uintptr_t)t->part[1],
                  (int64_t)(uintptr_t)t->sig};
  tp_card *all = (tp_card *)calloc((size_t)N, sizeof *all);
  if (!all) return VERR("latency TP: out of memory");
  void *dsend = NULL, *drecv = NULL;
  vstatus s = V_OK;
  if (cudaMalloc(&dsend, sizeof mine) != cudaSuccess || cudaMalloc(&drecv, sizeof mine * N) != cudaSuccess)
    s = VERR("latency TP: cannot allocate %zu bytes for the pointer exchange", sizeof mine * N);
  if (s == V_OK && cudaMemcpyAsync(dsend, &mine, sizeof mine, cudaMemcpyHostToDevice, st) != cudaSuccess)
    s = VERR("latency TP: pointer exchange upload failed");
  if (s == V_OK) s = c->allgather(c, dsend, drecv, (int64_t)(sizeof mine / 4), DT_I32, st);
  if (s == V_OK && (cudaMemcpyAsync(all, drecv, sizeof mine * N, cudaMemcpyDeviceToHost, st) != cudaSuccess ||
                    cudaStreamSynchronize(st) != cudaSuccess))
    s = VERR("latency TP: pointer exchange download failed");
  cudaFree(dsend);
  cudaFree(drecv);
  if (s != V_OK) {
    free(all);
    return s;
  }
  t->p2p = true;
  for (int r = 0; r < N && t->p2p; r++) {
    if (all[r].pid != mine.pid) {
      t->p2p = false;
      snprintf(t->no_p2p, sizeof t->no_p2p, "rank %d is another process (one process per GPU: NCCL only)", r);
      break;
    }
    if (r == t->rank) continue;
    int ok = 0;
    if (cudaDeviceCanAccessPeer(&ok, device, (int)all[r].device) != cudaSuccess || !ok) {
      (void)cudaGetLastError();
      t->p2p = false;
      snprintf(t->no_p2p, sizeof t->no_p2p, "GPU %d cannot access GPU %d (no peer access)", device,
               (int)all[r].device);
      break;
    }
    cudaError_t e = cudaDeviceEnablePeerAccess((int)all[r].device, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
      (void)cudaGetLastError();
    } else if (e != cudaSuccess) {
      (void)cudaGetLastError();
      t->p2p = false;
      snprintf(t->no_p2p, sizeof t->no_p2p, "enabling peer access GPU %d -> %d: %s", device, (int)all[r].device,
               cudaGetErrorString(e));
    }
  }
  /* every rank must choose the same reduce: a rank without peer access turns the oneshot off for
   * all (an all-reduce of "cannot" flags), else some would spin in its barrier while others sit
   * in an NCCL all-reduce */
  int32_t cannot = t->p2p ? 0 : 1, *dflag = NULL;
  vstatus fs = cudaMalloc((void **)&dflag, sizeof cannot) == cudaSuccess ? V_OK
                                                                       : VERR("latency TP: cannot allocate 4 bytes");
  if (fs == V_OK && cudaMemcpyAsync(dflag, &cannot, sizeof cannot, cudaMemcpyHostToDevice, st) != cudaSuccess)
    fs = VERR("latency TP: flag upload failed");
  if (fs == V_OK) fs = c->allreduce_sum(c, dflag, 1, DT_I32, st);
  if (fs == V_OK && (cudaMemcpyAsync(&cannot, dflag, sizeof cannot, cudaMemcpyDeviceToHost, st) != cudaSuccess ||
                     cudaStreamSynchronize(st) != cudaSuccess))
    fs = VERR("latency TP: flag download failed");
  cudaFree(dflag);
  if (fs != V_OK) {
    free(all);
    return fs;
  }
  if (cannot && t->p2p) {
    t->p2p = false;
    snprintf(t->no_p2p, sizeof t->no_p2p, "%d rank(s) lack peer access to the others", (int)cannot);
  }
  for (int r = 0; r < N; r++) {
    t->peer_part[0][r] = (const float *)(uintptr_t)all[r].part0;
    t->peer_part[1][r] = (const float *)(uintptr_t)all[r].part1;
    t->peer_sig[r] = (uint32_t *)(uintptr_t)all[r].sig;
  }
  free(all);
  return V_OK;
}

extern "C" vstatus lat_tp_open(lat_tp *t, const vcomm *c, int device, int D, int rows, cudaStream_t st) {
  memset(t, 0, sizeof *t);
  const vstatus s = open_impl(t, c, device, D, rows, st);
  if (s != V_OK) lat_tp_close(t);
  return s;
}

extern "C" int lat_tp_auto_mode(const lat_tp *t, int T) {
  (void)T;
  return t->p2p ? LAT_TP_ONESHOT : LAT_TP_NCCL;
}

/* ---- the reduce ---- */

extern "C" vstatus lat_tp_reduce_add_norm(lat_tp *t, int mode, int which, float *x, uint16_t *xn,
                                          const uint16_t *w, int T, float eps, cudaStream_t st) {
  if (T < 1 || T > t->rows) return VERR("latency TP: %d rows outside 1..%d", T, t->rows);
  if (which != 0 && which != 1) return VERR("latency TP: partial buffer %d (0 or 1)", which);
  const int N = t->size, D = t->D;
  if (mode != LAT_TP_ONESHOT && !t->comm) return VUNSUPPORTED("latency TP: %s needs a communicator", lat_tp_mode_name(mode));
  tp_ptrs P;
  memset(&P, 0, sizeof P);
  switch (mode) {
    case LAT_TP_ONESHOT: {
      if (!t->p2p) return VUNSUPPORTED("latency TP: the oneshot reduce needs peer access: %s", t->no_p2p);
      for (int r = 0; r < N; r++) P.p[r] = t->peer_part[which][r], P.sig[r] = t->peer_sig[r];
      const int grid = T < LAT_TP_BLOCKS ? T : LAT_TP_BLOCKS;
      reduce_add_norm_kernel<<<grid, TP_THREADS, 0, st>>>(P, N, t->rank, N > 1, t->sig, t->epoch, x, xn, w, T, T, D,
                                                          eps);
      CUDA_CHECK_LAUNCH();
      return V_OK;
    }
    case LAT_TP_NCCL: {
      VTRY(t->comm->allreduce_sum(t->comm, t->part[which], (int64_t)T * D, DT_F32, st));
      P.p[0] = t->part[which];
      reduce_add_norm_kernel<<<T, TP_THREADS, 0, st>>>(P, 1, 0, 0, NULL, NULL, x, xn, w, T, T, D, eps);
      CUDA_CHECK_LAUNCH();
      return V_OK;
    }
    case LAT_TP_RSAG: {
      const int chunk = (T + N - 1) / N, r0 = t->rank * chunk;
      const int valid = T - r0 < 0 ? 0 : (T - r0 < chunk ? T - r0 : chunk);
      const int64_t n = (int64_t)chunk * D;
      VTRY(t->comm->reduce_scatter_sum(t->comm, t->part[which], t->rs, n, DT_F32, st));
      P.p[0] = t->rs;
      reduce_add_norm_kernel<<<chunk, TP_THREADS, 0, st>>>(P, 1, 0, 0, NULL, NULL, x + (size_t)r0 * D,
                                                           xn + (size_t)r0 * D, w, valid, chunk, D, eps);
      CUDA_CHECK_LAUNCH();
      VTRY(t->comm->allgather(t->comm, x + (size_t)r0 * D, x, n, DT_F32, st));
      VTRY(t->comm->allgather(t->comm, xn + (size_t)r0 * D, xn, n, DT_BF16, st));
      return V_OK;
    }
    default:
      return VERR("latency TP: reduce mode %d", mode);
  }
}

/* ---- placing all-gathered row blocks (split input projections) ---- */

/* Row t = blockIdx.x of out: column c comes from rank c / blk's block, its column c % blk. */
template <typename E>
static __global__ void place_blocks_kernel(E *out, int ldo, const E *g, int T, int blk, int ncols) {
  const int t = blockIdx.x;
  for (int c = threadIdx.x; c < ncols; c += blockDim.x) {
    const int r = c / blk, j = c - r * blk;
    out[(size_t)t * ldo + c] = g[((size_t)r * T + t) * blk + j];
  }
}

extern "C" vstatus lat_tp_place_blocks(void *out, int ldo, const void *gathered, int N, int T, int blk, int ncols,
                                       int esz, cudaStream_t st) {
  if (N < 1 || N > LAT_TP_MAX || T < 1 || ncols < 1 || blk < 1 || (long long)N * blk < ncols || ldo < ncols)
    return VERR("latency TP: place_blocks: N %d, T %d, blocks of %d for %d columns, row stride %d", N, T, blk, ncols,
                ldo);
  if (esz == 2)
    place_blocks_kernel<uint16_t><<<T, TP_THREADS, 0, st>>>((uint16_t *)out, ldo, (const uint16_t *)gathered, T, blk,
                                                           ncols);
  else if (esz == 4)
    place_blocks_kernel<float><<<T, TP_THREADS, 0, st>>>((float *)out, ldo, (const float *)gathered, T, blk, ncols);
  else
    return VERR("latency TP: place_blocks: element size %d (2 or 4)", esz);
  CUDA_CHECK_LAUNCH();
  return V_OK;
}
