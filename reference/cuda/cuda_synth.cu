/* Synthetic weights generated directly on the GPU: element i of tensor `spec` is
 * synth_value(kind, synth_linear_scale(fan_in), philox_key(seed, name), i) rounded to
 * the output dtype, the same rule (model/synth_rule.h) the CPU synthesizer uses, so a
 * slice made here equals the CPU's bit for bit and no host memory or disk is touched.
 * cuda_synth_model_tensor generates a lazy tensor of a model (a whole synthetic tensor, or a
 * TP shard's row or column block of one: model.h ds_synth_slice) for both GPU paths. */
#include "reference/cuda/cuda_common.h"
#include "reference/cuda/cuda_ref.h"
#include "reference/cuda/cuda_ref_kernels.h"

/* out[k] = element index0 + (k / cols) * stride + k % cols of the synthetic tensor, k < n: a
 * rows x cols block (n = rows * cols) whose rows lie `stride` elements apart in the full
 * tensor; cols == n is a contiguous run. */
static __global__ void synth_fill_kernel(void *out, int dt, uint64_t n, uint64_t cols, uint64_t stride, int kind,
                                         float scale, uint64_t key, uint64_t index0) {
  for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < n; k += (uint64_t)gridDim.x * blockDim.x) {
    const uint64_t idx = cols == n ? index0 + k : index0 + (k / cols) * stride + k % cols;
    const float v = synth_value((synth_kind)kind, scale, key, idx);
    if (dt == DT_BF16) ((__nv_bfloat16 *)out)[k] = __float2bfloat16_rn(v);
    else if (dt == DT_F16) ((__half *)out)[k] = __float2half_rn(v);
    else ((float *)out)[k] = v;
  }
}

/* Launches synth_fill_kernel for an n-element block (see there) after checking dtype and kind. */
static vstatus synth_block(void *out, int out_dtype, uint64_t n, uint64_t cols, uint64_t stride, int kind, float scale,
                           uint64_t key, uint64_t index0, cudaStream_t stream) {
  if (out_dtype != DT_BF16 && out_dtype != DT_F16 && out_dtype != DT_F32)
    return VERR("GPU synthesis: output dtype %s not supported (BF16, F16, F32)", vdtype_name((vdtype)out_dtype));
  if (kind < SYN_LINEAR || kind > SYN_BIAS) return VERR("GPU synthesis: unknown synth kind %d", kind);
  if (n == 0) return V_OK;
  uint64_t blocks = (n + 255) / 256;
  if (blocks > 65536) blocks = 65536;
  synth_fill_kernel<<<(unsigned)blocks, 256, 0, stream>>>(out, out_dtype, n, cols, stride, kind, scale, key, index0);
  CUDA_CHECK_LAUNCH();
  return V_OK;
}

extern "C" vstatus curef_synth_fill(void *out, int out_dtype, uint64_t n, int kind, float scale, uint64_t key,
                                    uint64_t index0, cudaStream_t stream) {
  return synth_block(out, out_dtype, n, n, n, kind, scale, key, index0, stream);
}

/* The rule of model tensor t: its own entry in m->lazy, or (t not in m->synth) the entry
 * of the synth tensor with t's name; NULL when there is none. */
static const ds_synth_slice *rule_of(const ds_model *m, const vtensor *t) {
  if (!m->is_synthetic || !m->synth || !m->lazy) return NULL;
  int i = -1;
  if (t >= m->synth && t < m->synth + m->n_synth) i = (int)(t - m->synth);
  for (int k = 0; i < 0 && k < m->n_synth; k++)
    if (strcmp(m->synth[k].name, t->name) == 0) i = k;
  return i >= 0 && m->lazy[i].spec.name[0] ? &m->lazy[i] : NULL;
}

extern "C" vstatus cuda_synth_model_rows(void *dst, vdtype dt, const ds_model *m, const vtensor *t, int64_t r0,
                                         int64_t n, cudaStream_t st) {
  const ds_synth_slice *sl = rule_of(m, t);
  if (!sl) return VERR("%s: tensor '%s' has no host data and no synthesis rule (not loaded)", m->source, t->name);
  if (sl->rows < 0 || sl->cols <= 0 || sl->stride < sl->cols || sl->start < 0 || sl->rows * sl->cols != vtensor_numel(t))
    return VERR("%s: tensor '%s': synthesis rule [%lld x %lld, stride %lld] does not match its %lld elements",
                m->source, t->name, (long long)sl->rows, (long long)sl->cols, (long long)sl->stride,
                (long long)vtensor_numel(t));
  if (r0 < 0 || n < 0 || r0 + n > sl->rows)
    return VERR("%s: tensor '%s': rows [%lld, %lld) outside its %lld rows", m->source, t->name, (long long)r0,
                (long long)(r0 + n), (long long)sl->rows);
  const ds_tensor_spec *sp = &sl->spec;
  const float scale = sp->kind == SYN_LINEAR ? synth_linear_scale(sp->fan_in) : 0.0f;
  const uint64_t count = (uint64_t)(n * sl->cols);
  /* rows of a row block (stride == cols), or a single row, are one contiguous run */
  const bool run = sl->stride == sl->cols || n == 1;
  return synth_block(dst, (int)dt, count, run ? count : (uint64_t)sl->cols, run ? count : (uint64_t)sl->stride,
                     (int)sp->kind, scale, philox_key(m->seed, sp->name), (uint64_t)(sl->start + r0 * sl->stride), st);
}

extern "C" vstatus cuda_synth_model_tensor(void *dst, vdtype dt, const ds_model *m, const vtensor *t,
                                           cudaStream_t st) {
  const ds_synth_slice *sl = rule_of(m, t);
  return cuda_synth_model_rows(dst, dt, m, t, 0, sl ? sl->rows : 0, st);
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
  uint64_t n = 0; /* set by spec_numel on success */
  VTRY(spec_numel(spec, &n));
  const float scale = spec->kind == SYN_LINEAR ? synth_linear_scale(spec->fan_in) : 0.0f;
  VTRY(curef_synth_fill(dev_out, (int)out_dtype, n, (int)spec->kind, scale, philox_key(seed, spec->name), 0, 0));
  CUDA_CHECK(cudaStreamSynchronize(0));
  return V_OK;
}

extern "C" vstatus cuda_synth_tensor_host(void *host_out, const ds_tensor_spec *spec, uint64_t seed,
                                          vdtype out_dtype) {
  uint64_t n = 0; /* set by spec_numel on success */
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
