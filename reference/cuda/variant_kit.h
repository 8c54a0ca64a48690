/* The harness shared by the kernel-suite variants on the CUDA backend (cuda_variants.cu for
 * cuda-ref, kernels/latency_variants.cu for latency): grid-stride launches, bf16 <-> f32
 * conversions, guarded and poisoned device temporaries, the device probe, and run_body, which
 * runs a variant's body with its temporaries, waits for the GPU, checks every guard and records
 * the run in the trace, and register_entries. Header-only (static): include it from one .cu file per path, after
 * defining PATH ("cuda-ref", "latency"), which names the path in messages and traces. */
#ifndef VOUCH_REFERENCE_CUDA_VARIANT_KIT_H
#define VOUCH_REFERENCE_CUDA_VARIANT_KIT_H

#include "reference/cuda/cuda_common.h"
#include "reference/cuda/cuda_device.h"
extern "C" {
#include "reference/opreg.h"
}
#include "reference/cuda/cuda_variants.h"

#ifndef PATH
#error "define PATH (the path's name) before including variant_kit.h"
#endif

#define TMP_GUARD 256 /* bytes of guard on each side of a temporary */
#define TMP_GUARD_BYTE 0xA5
#define TMP_POISON_BYTE 0xFF
#define MAX_TMP 20

static unsigned grid_of(int64_t n) {
  int64_t b = (n + 255) / 256;
  if (b < 1) b = 1;
  if (b > 65536) b = 65536;
  return (unsigned)b;
}

#define GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

#define LAUNCH(kern, n, ...)                                   \
  do {                                                         \
    kern<<<grid_of((int64_t)(n)), 256, 0, 0>>>(__VA_ARGS__); \
    CUDA_CHECK_LAUNCH();                                       \
  } while (0)

static __global__ void to_bf16_kernel(uint16_t *dst, const float *src, int64_t n) {
  GRID_STRIDE(i, n) dst[i] = f2bf(src[i]);
}
static __global__ void to_f32_kernel(float *dst, const uint16_t *src, int64_t n) {
  GRID_STRIDE(i, n) dst[i] = bf2f(src[i]);
}

/* ---------------- guarded, poisoned temporaries ---------------- */

typedef struct {
  char *base[MAX_TMP];       /* allocation: guard + data + guard */
  size_t bytes[MAX_TMP];     /* data bytes */
  const char *name[MAX_TMP];
  int n;
  size_t align;              /* data bytes are rounded up to this (1: exact, so a 1-byte overrun hits the guard) */
} arena;

static vstatus tmp_alloc(arena *A, void **p, size_t bytes, const char *name) {
  *p = NULL;
  if (A->n == MAX_TMP) return VERR(PATH " variant: temporary '%s': more than %d temporaries", name, MAX_TMP);
  if (bytes == 0) bytes = 1;
  if (A->align > 1) bytes = (bytes + A->align - 1) / A->align * A->align;
  char *b = NULL;
  CUDA_CHECK(cudaMalloc((void **)&b, bytes + 2 * TMP_GUARD));
  A->base[A->n] = b;
  A->bytes[A->n] = bytes;
  A->name[A->n] = name;
  A->n++;
  CUDA_CHECK(cudaMemset(b, TMP_GUARD_BYTE, bytes + 2 * TMP_GUARD));
  CUDA_CHECK(cudaMemset(b + TMP_GUARD, TMP_POISON_BYTE, bytes));
  *p = b + TMP_GUARD;
  return V_OK;
}

/* After the work finished: every guard byte must be intact. */
static vstatus tmp_check(const arena *A) {
  unsigned char g[2 * TMP_GUARD];
  for (int i = 0; i < A->n; i++) {
    CUDA_CHECK(cudaMemcpy(g, A->base[i], TMP_GUARD, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(g + TMP_GUARD, A->base[i] + TMP_GUARD + A->bytes[i], TMP_GUARD, cudaMemcpyDeviceToHost));
    for (int k = 0; k < 2 * TMP_GUARD; k++)
      if (g[k] != TMP_GUARD_BYTE)
        return VERR(PATH " variant: temporary '%s': out-of-bounds write by a " PATH " kernel (%s end)", A->name[i],
                    k < TMP_GUARD ? "front" : "back");
  }
  return V_OK;
}

static void tmp_free(arena *A) {
  for (int i = 0; i < A->n; i++) cudaFree(A->base[i]);
  A->n = 0;
}

/* ---------------- shared pieces ---------------- */

static int g_devices = -1; /* visible CUDA devices, probed once */

static vstatus have_device(void) {
  if (g_devices < 0) {
    int n = 0;
    g_devices = cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
    (void)cudaGetLastError(); /* a failed probe must not stick to the next launch */
  }
  if (g_devices == 0) return VUNSUPPORTED(PATH ": no CUDA device visible");
  return V_OK;
}

/* An f32 input converted into a bf16 temporary. */
static vstatus to_bf16(arena *A, uint16_t **dst, const void *src, int64_t n, const char *name) {
  VTRY(tmp_alloc(A, (void **)dst, (size_t)n * 2, name));
  if (n > 0) LAUNCH(to_bf16_kernel, n, *dst, (const float *)src, n);
  return V_OK;
}

/* A bf16 result widened into an f32 output buffer (exact). */
static vstatus to_f32(void *dst, const uint16_t *src, int64_t n) {
  if (n > 0) LAUNCH(to_f32_kernel, n, (float *)dst, src, n);
  return V_OK;
}

/* Copies a small int32 input to the host (row lengths, tokens) to check it as the path's host
 * code does before launching. */
static vstatus host_ints(int32_t *dst, const void *src, int n) {
  CUDA_CHECK(cudaMemcpy(dst, src, (size_t)n * sizeof(int32_t), cudaMemcpyDeviceToHost));
  return V_OK;
}

/* A variant's body: fills the case's outputs, may take temporaries from A, and writes a short
 * description of what ran into what[96]. */
typedef vstatus (*body_fn)(const vop_case *c, const vop_layout *l, void *const *b, arena *A, char *what);

/* Runs body f after pre(c) (device, envelope and one-time setup checks), waits for the GPU,
 * checks the temporaries' guards (sizes rounded to align) and records the run in the trace,
 * only when all of it succeeded. */
static vstatus run_body(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t, const char *variant,
                        body_fn f, vstatus (*pre)(const vop_case *), size_t align) {
  arena A;
  memset(&A, 0, sizeof A);
  A.align = align;
  char what[96] = "";
  vstatus s = pre(c);
  if (s == V_OK) s = f(c, l, b, &A, what);
  if (s == V_OK) {
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) s = VERR(PATH " variant: op '%s': variant '%s': %s", c->op->name, variant, cudaGetErrorString(e));
  }
  if (s == V_OK) s = tmp_check(&A);
  tmp_free(&A);
  if (s != V_OK) return s;
  char detail[192];
  snprintf(detail, sizeof detail, "%s/%s B=%d %s", c->preset, c->shape, c->batch, what);
  vtrace_ran(t, PATH, c->op->name, variant, detail);
  return V_OK;
}

/* ---------------- registration ---------------- */

/* One variant of the path: op, name, description, supports(), run(); the rest may be left out (a bf16
 * variant, every output rounded to bf16, bitwise identical reruns). */
typedef struct {
  const char *op, *name, *desc;
  vstatus (*supports)(const vop_case *);
  vstatus (*run)(const vop_case *, const vop_layout *, void *const *, vtrace *);
  bool f32_act;         /* the path computes this op on fp32 tensors (router logits, the fp32 residual stream):
                           fp32 inputs and the op's fp32 bound, so a rounding to bf16 inside it fails */
  uint32_t bf16_inputs; /* with f32_act: inputs the variant itself converts to bf16 (vop_variant.bf16_inputs) */
  uint32_t f32_outputs; /* without f32_act: outputs computed and stored in fp32, judged at the fp32 bound
                           (vop_variant.f32_outputs) */
  const char *nondeterministic; /* NULL: bitwise identical reruns (checked); else why not (vop_variant) */
} entry;


/* Registers entries e[n] on path PATH, backend cuda, bf16 activations; vars[n] holds them for the
 * process's life. An op that is not registered is skipped with a message. */
static void register_entries(const entry *e, size_t n, vop_variant *vars) {
  for (size_t i = 0; i < n; i++) {
    const vop *op = vopreg_find_op(e[i].op);
    if (!op) {
      fprintf(stderr, "vouch: %s variants: op '%s' is not registered\n", PATH, e[i].op);
      continue;
    }
    memset(&vars[i], 0, sizeof vars[i]);
    vars[i].op = op;
    vars[i].path = PATH;
    vars[i].name = e[i].name;
    vars[i].desc = e[i].desc;
    vars[i].backend = vop_backend_cuda();
    vars[i].act_dtype = e[i].f32_act ? DT_F32 : DT_BF16;
    vars[i].bf16_inputs = e[i].f32_act ? e[i].bf16_inputs : 0;
    vars[i].f32_outputs = e[i].f32_act ? 0 : e[i].f32_outputs;
    vars[i].nondeterministic = e[i].nondeterministic;
    vars[i].supports = e[i].supports;
    vars[i].run = e[i].run;
    if (vopreg_add_variant(&vars[i]) != V_OK) fprintf(stderr, "vouch: %s\n", verr_msg());
  }
}

#endif
