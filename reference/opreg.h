/* The op registry for kernel numerics (ggml test-backend-ops / nccl-tests style).
 *
 * Three structs of function pointers:
 *   vop_backend  where buffers live (host malloc for "cpu", device memory for "cuda");
 *   vop          one op: its buffers for a case, input generation, the float64 oracle,
 *                the error metric and tolerance per output, and its case generator;
 *   vop_variant  one implementation of an op on one path ("cpu-ref", "cuda-ref",
 *                "latency", or "test" for planted-bug self-tests), with supports() and run().
 * The numerics suite (suites/kernels/kernels.h) crosses every op with every variant that
 * supports each case, and checks outputs against the oracle.
 *
 * It lives in reference/, the lowest layer that knows a case's model config (ds_config), so that
 * reference/cpu, reference/cuda and kernels/ register into it without depending upward. The
 * registry is plain: it calls no module. Registration is explicit (no constructors): the numerics
 * suite's kernels_register_ops() (suites/kernels/kernels_ops.c) hands vopreg_init() the list:
 *   oracle_register_ops()        reference/cpu/oracle.c   every op descriptor
 *   cpu_variants_register()      reference/cpu/cpu_variants.c   the "cpu" variants (+ "test" ones)
 *   comm_variants_register()     reference/cpu/comm_variants.c  simulated-rank all-reduce
 *   test_variants_register()     reference/cpu/test_variants.c  "test" variants of the declarations
 *   cuda_ref_register_variants() reference/cuda/cuda_variants.cu, in CUDA builds (CMake defines
 *                                VOUCH_HAVE_CUDA_VARIANTS with VOUCH_HAVE_CUDA): it sets the CUDA
 *                                backend (reference/cuda/cuda_backend.cu) and adds the cuda-ref
 *                                variants;
 *   latency_register_variants()  kernels/latency_variants.cu: the latency path's kernels;
 *   latency_tp_register_variants() kernels/latency_tp_variants.cu: its TP reduce over N GPUs.
 *
 * Adding a CUDA backend from a .cu file: fill a static vop_backend with cudaMalloc /
 * cudaFree / cudaMemcpy / cudaMemset / cudaDeviceSynchronize wrappers (each returns
 * vstatus, VERR on a CUDA error), expose `const vop_backend *vop_backend_cuda(void)`,
 * and point the variants' `backend` at it. Device pointers are opaque to the suite
 * unless backend->host_mem is true.
 */
#ifndef VOUCH_REFERENCE_OPREG_H
#define VOUCH_REFERENCE_OPREG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/tensor.h"
#include "common/trace.h"
#include "common/vstatus.h"
#include "model/config.h"

/* ---------------- backends ---------------- */

typedef struct vop_backend {
  const char *name;  /* "cpu" or "cuda" */
  bool host_mem;     /* true: buffer pointers are host pointers (inputs may be generated in place) */
  vstatus (*alloc)(void **ptr, size_t bytes);                           /* bytes > 0 */
  void (*free)(void *ptr);                                              /* NULL is a no-op */
  vstatus (*upload)(void *dst, const void *src_host, size_t bytes);     /* host -> buffer */
  vstatus (*download)(void *dst_host, const void *src, size_t bytes);   /* buffer -> host */
  vstatus (*fill)(void *dst, int byte, size_t bytes);                   /* memset */
  vstatus (*sync)(void);                                                /* wait for queued work */
} vop_backend;

const vop_backend *vop_backend_cpu(void);

/* ---------------- cases ---------------- */

typedef enum {
  VD_NORMAL = 0,    /* N(0,1)-like values (sum of uniforms), scaled per op */
  VD_HEAVY = 1,     /* heavy tails plus outlier channels scaled x100 */
  VD_LARGE = 2,     /* magnitudes near the top of the range the op can hold (bf16 limits where it makes sense) */
  VD_NEARTIE = 3,   /* values on a coarse grid plus 1-ulp neighbours: ties for top-k / argmax */
  VD_SMALLINT = 4,  /* small integers stored as float (sums are exact) */
  VD_SMALL = 5,     /* N(0,1) x 1e-2: mean square 1e-4, the scale of real checkpoints' early-layer activations
                       (1e-4..1e-2; synthetic rows are ~1), where constants such as a norm's eps or the bf16
                       rounding of a small intermediate show (ops whose math is not scale-free) */
  VD_COUNT
} vop_dist;
const char *vop_dist_name(int d);
int vop_dist_from_name(const char *s); /* -1 when unknown */

#define VOP_MAX_DIMS 8

/* One case of one op. The meaning of d[] and f[] is the op's (see dim_names). */
typedef struct vop_case {
  const struct vop *op;
  char preset[16];        /* "tiny", "small", "k2-slice", "edge" */
  char shape[32];         /* which shape of the preset ("q_b_proj", "hidden", "odd", ...) */
  int batch;              /* rows / tokens / sequences */
  int d[VOP_MAX_DIMS];    /* op-specific sizes and flags */
  double f[4];            /* op-specific real parameters (eps, scale, temperature, ...) */
  int dist;               /* vop_dist */
  uint64_t seed;          /* input RNG seed */
  vdtype wdtype;          /* dtype of weights (bf16) */
  ds_config cfg;          /* the preset's config (router, rope and attention scale read it) */
} vop_case;

/* A growable list of cases. */
typedef struct vop_case_list {
  vop_case *c;        /* [n] cases */
  int n, cap;
} vop_case_list;
vstatus vop_case_push(vop_case_list *l, const vop_case *c);
void vop_case_list_free(vop_case_list *l);

/* What the case generator is asked for. */
typedef struct vop_gen_opts {
  const int *batches; /* [n_batches] batch sizes; n_batches 0: the generator's defaults */
  int n_batches;
  int seeds;          /* seeds per shape and distribution (>= 1) */
  uint64_t seed0;     /* first case seed is 1000 + 100 * seed0 (a plan's --set seed=N moves every input) */
  bool quick;         /* a CPU-sized subset (big shapes once, few batches) */
  int tp;             /* > 0: communication ops only, cases with exactly this many ranks (vouch kernels --tp) */
} vop_gen_opts;

/* ---------------- op descriptors ---------------- */

typedef enum {
  VM_REL_L2 = 0,   /* ||y - ref||_2 / ||ref||_2 over the whole output (reductions) */
  VM_MAX_REL = 1,  /* max_i |y_i - ref_i| / (|ref_i| + atol_frac * rms(ref)) (elementwise) */
  VM_EXACT = 2,    /* number of elements != ref (integers, or exactly representable floats) */
  VM_TOPK_SET = 3, /* rows whose index set differs from the oracle's outside near-ties (op's check) */
  VM_CUSTOM = 4,   /* the op's check() computes the error */
  VM_MAX_ABS = 5,  /* max_i |y_i - ref_i| (log-sum-exp values, where absolute error is what matters) */
} vop_metric;
const char *vop_metric_name(int m);

#define VOP_MAX_BUFS 8

typedef struct {
  char name[24];      /* "x", "w", "out", ... */
  vdtype dtype;       /* element type in the buffer */
  int64_t n;          /* elements */
  bool is_output;     /* written by the variant, checked by the suite */
  int metric;         /* vop_metric, outputs only */
} vop_buf;

typedef struct {
  int n;                      /* buffers in order; variants receive them in this order */
  vop_buf b[VOP_MAX_BUFS];
} vop_layout;

typedef struct {
  double bound;       /* error <= bound passes */
  double atol_frac;   /* VM_MAX_REL only: absolute floor as a fraction of rms(ref) */
  const char *why;    /* one line: where the bound comes from */
} vop_tol;

typedef struct vop {
  const char *name;   /* "rmsnorm", "linear", ... */
  const char *desc;   /* one line */
  const char *dim_names[VOP_MAX_DIMS]; /* names of d[] used by this op, NULL-terminated */
  /* The buffers of case c (inputs then outputs, any order; is_output marks outputs). */
  vstatus (*layout)(const vop_case *c, vop_layout *l);
  /* Fills the input buffers (host memory, layout order; outputs are NULL) from c->seed, c->dist. */
  vstatus (*gen_inputs)(const vop_case *c, const vop_layout *l, void **host);
  /* Expected outputs in float64: ref[i] has l->b[i].n doubles for each output i, NULL for inputs. */
  vstatus (*oracle)(const vop_case *c, const vop_layout *l, void *const *host, double **ref);
  /* Bound for output `out` when the variant computes in `act_dtype` (DT_F32 or DT_BF16). */
  vop_tol (*tolerance)(const vop_case *c, int out, vdtype act_dtype);
  /* VM_TOPK_SET / VM_CUSTOM outputs: the error of output `out`; NULL otherwise. buf[] holds
   * host copies in layout order: the inputs, and at output positions what the variant wrote.
   * May write a short note (e.g. "3 near-tie rows accepted") into note[160]. */
  double (*check)(const vop_case *c, const vop_layout *l, void *const *buf, double *const *ref, int out,
                  char *note);
  /* Optional: appends this op's cases for `preset` ("tiny", "small", "k2-slice", "edge").
   * NULL for the built-in ops, whose cases suites/kernels/kernels.c generates. */
  vstatus (*gen_cases)(vop_case_list *list, const char *preset, const vop_gen_opts *o);
} vop;

/* ---------------- variants ---------------- */

typedef struct vop_variant {
  const vop *op;
  const char *path;    /* "cpu-ref", "cuda-ref", "latency", "test" */
  const char *name;    /* "cpu", "ref", "v1_gemv", ... (recorded in the trace) */
  const char *desc;    /* one line */
  const vop_backend *backend;
  vdtype act_dtype;    /* DT_F32 or DT_BF16: activation precision the tolerance assumes */
  /* DT_F32 variants only: inputs (bit i = layout buffer i) the variant converts to bf16 itself,
   * as the path holds those tensors in bf16 (moe_combine's expert outputs). The suite hands them
   * on the bf16 grid and the rest unrounded, so the fp32 bound tests the fp32 arithmetic. 0: none. */
  uint32_t bf16_inputs;
  /* DT_BF16 variants only: outputs (bit i = layout buffer i) the variant computes in fp32 from its
   * bf16-grid inputs and stores without rounding to bf16 (a GEMM's fp32 epilogue, the fp32 residual
   * stream): judged at the op's fp32 bound, so a bf16 rounding of them fails. 0: every output is
   * judged at the bf16 bound. */
  uint32_t f32_outputs;
  /* NULL: the variant promises bitwise identical outputs from run to run on the same inputs, and a
   * case whose two runs differ FAILS. Else one line saying why it does not (float atomics, split-K
   * without a fixed order): each run is still checked against the bound, the difference only noted. */
  const char *nondeterministic;
  /* V_OK, or V_UNSUPPORTED (VUNSUPPORTED("reason")) when this variant cannot run case c. */
  vstatus (*supports)(const vop_case *c);
  /* Runs case c on buffers buf[] (backend memory, layout order; inputs must not be written).
   * Must call vtrace_ran(t, path, op->name, name, ...) so the suite sees it ran. */
  vstatus (*run)(const vop_case *c, const vop_layout *l, void *const *buf, vtrace *t);
} vop_variant;

/* ---------------- registry ---------------- */

/* Registers the built-in ops and variants once: calls register_all() the first time, and again only
 * after vopreg_reset(). register_all is the numerics suite's list (suites/kernels/kernels.h
 * kernels_register_ops); a registration that fails prints its error and the rest go on. */
void vopreg_init(void (*register_all)(void));
void vopreg_reset(void);  /* forget everything (tests) */
vstatus vopreg_add_op(const vop *op);
vstatus vopreg_add_variant(const vop_variant *v);
int vopreg_n_ops(void);
const vop *vopreg_op(int i);
const vop *vopreg_find_op(const char *name);
int vopreg_n_variants(void);
const vop_variant *vopreg_variant(int i);
/* The CUDA backend, once a CUDA module set it (NULL otherwise). */
void vopreg_set_cuda_backend(const vop_backend *b);
const vop_backend *vopreg_cuda_backend(void);

#endif
