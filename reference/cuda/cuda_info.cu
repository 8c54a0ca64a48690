/* GPU facts for manifests: one JSON object per visible GPU. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef VOUCH_HAVE_NCCL
#include <nccl.h>
#endif

#include "reference/cuda/cuda_info.h"

extern "C" char *cuda_gpu_info_json(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) { cudaGetLastError(); n = 0; }
  int drv = 0, rt = 0, nccl = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
#ifdef VOUCH_HAVE_NCCL
  ncclGetVersion(&nccl);
#endif
  size_t cap = 256 + (size_t)n * 512;
  char *s = (char *)malloc(cap), *p = s;
  if (!s) return NULL;
  p += snprintf(p, cap, "[");
  for (int i = 0; i < n; i++) {
    cudaDeviceProp pr;
    if (cudaGetDeviceProperties(&pr, i) != cudaSuccess) continue;
    int sm_clock = 0, mem_clock = 0;
    cudaDeviceGetAttribute(&sm_clock, cudaDevAttrClockRate, i);
    cudaDeviceGetAttribute(&mem_clock, cudaDevAttrMemoryClockRate, i);
    p += snprintf(p, cap - (size_t)(p - s),
                  "%s{\"index\":%d,\"name\":\"%s\",\"memory_bytes\":%zu,\"sm_count\":%d,\"cc\":\"%d.%d\","
                  "\"sm_clock_khz\":%d,\"mem_clock_khz\":%d,\"l2_bytes\":%d,\"driver\":%d,\"cuda_runtime\":%d,"
                  "\"nccl\":%d}",
                  i ? "," : "", i, pr.name, pr.totalGlobalMem, pr.multiProcessorCount, pr.major, pr.minor, sm_clock,
                  mem_clock, pr.l2CacheSize, drv, rt, nccl);
  }
  snprintf(p, cap - (size_t)(p - s), "]");
  return s;
}

extern "C" int cuda_gpu_mem(int dev, double *free_b, double *total_b, int *sms, char *name, int name_cap) {
  cudaDeviceProp pr;
  size_t fr = 0, tot = 0;
  int prev = 0;
  cudaGetDevice(&prev);
  if (cudaGetDeviceProperties(&pr, dev) != cudaSuccess || cudaSetDevice(dev) != cudaSuccess ||
      cudaMemGetInfo(&fr, &tot) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  cudaSetDevice(prev);
  *free_b = (double)fr;
  *total_b = (double)tot;
  *sms = pr.multiProcessorCount;
  snprintf(name, (size_t)name_cap, "%s", pr.name);
  return 0;
}
