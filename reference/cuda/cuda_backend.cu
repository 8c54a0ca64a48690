/* The "cuda" backend of the op registry (reference/opreg.h): kernel-suite buffers in device
 * memory on the current device, copies and memset through the CUDA runtime on the legacy
 * default stream, sync = cudaDeviceSynchronize (so asynchronous kernel faults surface as
 * errors of the case that caused them). Every call returns V_ERR with the CUDA error. */
#include "reference/cuda/cuda_common.h"

extern "C" {
#include "reference/opreg.h"
}
#include "reference/cuda/cuda_variants.h"

static vstatus cb_alloc(void **ptr, size_t bytes) {
  *ptr = NULL;
  if (bytes == 0) return VERR("cuda backend: alloc: field 'bytes': must be > 0");
  CUDA_CHECK(cudaMalloc(ptr, bytes));
  return V_OK;
}

static void cb_free(void *ptr) {
  if (ptr) cudaFree(ptr); /* an error here is a fault already reported by sync */
}

static vstatus cb_upload(void *dst, const void *src_host, size_t bytes) {
  if (bytes) CUDA_CHECK(cudaMemcpy(dst, src_host, bytes, cudaMemcpyHostToDevice));
  return V_OK;
}

static vstatus cb_download(void *dst_host, const void *src, size_t bytes) {
  if (bytes) CUDA_CHECK(cudaMemcpy(dst_host, src, bytes, cudaMemcpyDeviceToHost));
  return V_OK;
}

static vstatus cb_fill(void *dst, int byte, size_t bytes) {
  if (bytes) CUDA_CHECK(cudaMemset(dst, byte, bytes));
  return V_OK;
}

static vstatus cb_sync(void) {
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  return V_OK;
}

static const vop_backend g_cuda_backend = {
    /* name */ "cuda",
    /* host_mem */ false,
    /* alloc */ cb_alloc,
    /* free */ cb_free,
    /* upload */ cb_upload,
    /* download */ cb_download,
    /* fill */ cb_fill,
    /* sync */ cb_sync,
};

extern "C" const vop_backend *vop_backend_cuda(void) { return &g_cuda_backend; }
