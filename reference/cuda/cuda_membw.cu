/* Device-to-device copy bandwidth for rooflines (see cuda_membw.h): cudaMemcpyAsync of a
 * large buffer on a private stream, timed with events; the fastest of the timed copies. */
#include "reference/cuda/cuda_common.h"
#include "reference/cuda/cuda_membw.h"

static vstatus measure(void *dst, const void *src, size_t bytes, int reps, cudaStream_t st, cudaEvent_t a,
                       cudaEvent_t b, double *gbs) {
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st)); /* warm-up */
  CUDA_CHECK(cudaStreamSynchronize(st));
  float best = INFINITY;
  for (int i = 0; i < reps; i++) {
    CUDA_CHECK(cudaEventRecord(a, st));
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st));
    CUDA_CHECK(cudaEventRecord(b, st));
    CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    if (ms > 0 && ms < best) best = ms;
  }
  if (!(best < INFINITY)) return VERR("cuda_membw: no copy of %zu bytes took a measurable time", bytes);
  *gbs = 2.0 * (double)bytes / ((double)best * 1e-3) / 1e9;
  return V_OK;
}

extern "C" vstatus cuda_membw(int device, size_t bytes, int reps, double *gbs, size_t *used_bytes) {
  if (!gbs) return VERR("cuda_membw: output pointer 'gbs' is NULL");
  *gbs = NAN;
  if (bytes == 0) bytes = (size_t)4 << 30;
  if (reps <= 0) reps = 5;
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    cudaGetLastError();
    return VUNSUPPORTED("cuda_membw: no CUDA device visible");
  }
  if (device < 0 || device >= ndev) return VERR("cuda_membw: device %d outside the %d visible devices", device, ndev);
  CUDA_CHECK(cudaSetDevice(device));
  void *src = NULL, *dst = NULL;
  const size_t min_bytes = (size_t)256 << 20;
  for (;;) {
    if (cudaMalloc(&src, bytes) == cudaSuccess) {
      if (cudaMalloc(&dst, bytes) == cudaSuccess) break;
      cudaFree(src);
      src = NULL;
    }
    cudaGetLastError(); /* clear the allocation failure */
    if (bytes / 2 < min_bytes)
      return VERR("cuda_membw: device %d: cannot allocate two buffers of %zu MiB for the copy", device, bytes >> 20);
    bytes /= 2;
  }
  cudaStream_t st = NULL;
  cudaEvent_t a = NULL, b = NULL;
  vstatus s = V_OK;
  if (cudaStreamCreate(&st) != cudaSuccess || cudaEventCreate(&a) != cudaSuccess ||
      cudaEventCreate(&b) != cudaSuccess)
    s = VERR("cuda_membw: device %d: cannot create a stream and events: %s", device,
             cudaGetErrorString(cudaGetLastError()));
  if (s == V_OK) s = cudaMemsetAsync(src, 0x5a, bytes, st) == cudaSuccess
                         ? V_OK
                         : VERR("cuda_membw: device %d: memset failed: %s", device,
                                cudaGetErrorString(cudaGetLastError()));
  if (s == V_OK) s = measure(dst, src, bytes, reps, st, a, b, gbs);
  if (a) cudaEventDestroy(a);
  if (b) cudaEventDestroy(b);
  if (st) cudaStreamDestroy(st);
  cudaFree(src);
  cudaFree(dst);
  if (s == V_OK && used_bytes) *used_bytes = bytes;
  return s;
}
