/* Synthetic weights generated directly on the GPU: element i of tensor `spec` is
 * synth_value(kind, synth_linear_scale(fan_in), philox_key(seed, name), i) rounded to
 * the output dtype, the same rule (model/synth_rule.h) the CPU synthesizer uses, so a
 * slice made here equals the CPU's bit for bit and no host memory or disk is touched. */
#include "reference/cuda/cuda_common.h"
#include "reference/cuda/cuda_ref.h"
#include "reference/cuda/cuda_ref_kernels.h"

static __global__ void synth_fill_kernel(void *out, int dt, uint64_t n, int kind, float scale, uint64_t key,
                                         uint64_t index0) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    const float v = synth_value((synth_kind)kind, scale, key, index0 + i);
    if (dt == DT_BF16) ((__nv_bfloat16 *)out)[i] = __float2bfloat16_rn(v);
    else if (dt == DT_F16) ((__half *)out)[i] = __float2half_rn(v);
    else ((float *)out)[i] = v;
  }
}

extern "C" vstatus curef_synth_fill(void *out, int out_dtype, uint64_t n, int kind, float scale, uint64_t key,
                                    uint64_t index0, cudaStream_t stream) {
  if (out_dtype != DT_BF16 && out_dtype != DT_F16 && out_dtype != DT_F32)
    return VERR("curef_synth_fill: output dtype %s not supported (BF16, F16, F32)", vdtype_name((vdtype)out_dtype));
  if (kind < SYN_LINEAR || kind > SYN_BIAS) return VERR("curef_synth_fill: unknown synth kind %d", kind);
  if (n == 0) return V_OK;
  uint64_t blocks = (n + 255) / 256;
  if (blocks > 65536) blocks = 65536;
  synth_fill_kernel<<<(unsigned)blocks, 256, 0, stream>>>(out, out_dtype, n, kind, scale, key, index0);
  CUDA_CHECK_LAUNCH();
  return V_OK;
}

static vstatus spec_numel(const ds_tensor_spec *spec, uint64_t *n) {
  if (spec->ndim < 1 || spec->ndim > 2) return VERR("tensor '%s': ndim %d (expected 1 or 2)", spec->name, spec->ndim);
  uint64_t c = 1;
  for (int d = 0; d < spec->ndim; d++) {
    if (spec->shape[d] <= 0) return VERR("tensor '%s': shape[%d] = %lld", spec->name, d, (long long)spec->shape[d]);
    c *= (uint64_t)spec->shape[d];
  }
  *n = c;
  return V_OK;
}

extern "C" vstatus cuda_synth_tensor(void *dev_out, const ds_tensor_spec *spec, uint64_t seed, vdtype out_dtype) {
  uint64_t n;
  VTRY(spec_numel(spec, &n));
  const float scale = spec->kind == SYN_LINEAR ? synth_linear_scale(spec->fan_in) : 0.0f;
  VTRY(curef_synth_fill(dev_out, (int)out_dtype, n, (int)spec->kind, scale, philox_key(seed, spec->name), 0, 0));
  CUDA_CHECK(cudaStreamSynchronize(0));
  return V_OK;
}

extern "C" vstatus cuda_synth_tensor_host(void *host_out, const ds_tensor_spec *spec, uint64_t seed,
                                          vdtype out_dtype) {
  uint64_t n;
  VTRY(spec_numel(spec, &n));
  const size_t bytes = (size_t)n * vdtype_size(out_dtype);
  void *d = NULL;
  CUDA_CHECK(cudaMalloc(&d, bytes));
  vstatus s = cuda_synth_tensor(d, spec, seed, out_dtype);
  if (s == V_OK) {
    cudaError_t e = cudaMemcpy(host_out, d, bytes, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) s = VERR("tensor '%s': copy to host: %s", spec->name, cudaGetErrorString(e));
  }
  cudaFree(d);
  return s;
}

extern "C" int cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError(); /* clear the error so later calls start clean */
    return 0;
  }
  return n;
}
