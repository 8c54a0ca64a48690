/* The kernel numerics suite on the GPU, in process: the cuda-ref variants are registered
 * (on the ops cuda-ref has kernels for, and only those), every one of them passes on the
 * tiny and edge presets (quick subset) with the trace naming it, the only not-supported
 * records are the stated ones, and the planted bugs still FAIL in a CUDA build: the CPU
 * "test" variants, plus two on the cuda backend (an unwritten element, a write past the end)
 * that prove the suite's poison and guard checks work on device memory. Exit 77 without a GPU. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference/opreg.h"
#include "reference/cuda/cuda_ref.h"
#include "suites/kernels/kernels.h"
#include "tests/harness.h"

static kernels_result run(const char *op, const char *path, const char *variant, const char *preset) {
  kernels_opts o;
  memset(&o, 0, sizeof o);
  o.op = op;
  o.path = path;
  o.variant = variant;
  o.preset = preset;
  o.quick = true;
  kernels_result r;
  vstatus s = kernels_run(&o, &r);
  CHECK(s == V_OK, "kernels_run(%s,%s,%s,%s): %s", op ? op : "*", path ? path : "*", variant ? variant : "*", preset,
        verr_msg());
  if (s != V_OK) memset(&r, 0, sizeof r);
  return r;
}

static int count(const kernels_result *r, const char *variant, int status, const char *why) {
  int n = 0;
  for (int i = 0; i < r->n; i++)
    if (!strcmp(r->r[i].variant, variant) && r->r[i].status == status && (!why || strstr(r->r[i].reason, why))) n++;
  return n;
}

/* A communication op: its variant moves host buffers through NCCL (fp32, exact on small integers), so it is
 * registered on the host backend, and a case with more ranks than visible GPUs is not supported. */
static bool is_comm(const char *op) { return !strcmp(op, "allreduce"); }

/* Which ops cuda-ref provides a variant for, and which it must not claim. */
static void test_registration(void) {
  static const char *const has[] = {"embed", "rmsnorm", "add_rmsnorm", "linear",      "rope",
                                    "mla_decode", "router", "swiglu", "moe_combine", "allreduce"};
  static const char *const lacks[] = {"mla_absorbed", "mla_absorbed_dcp", "attn_partial", "lse_combine", "sample"};
  CHECK(vopreg_cuda_backend() != NULL && !strcmp(vopreg_cuda_backend()->name, "cuda") &&
            !vopreg_cuda_backend()->host_mem,
        "the cuda backend is not set");
  for (size_t k = 0; k < sizeof has / sizeof has[0] + sizeof lacks / sizeof lacks[0]; k++) {
    const bool want = k < sizeof has / sizeof has[0];
    const char *op = want ? has[k] : lacks[k - sizeof has / sizeof has[0]];
    int n = 0;
    for (int i = 0; i < vopreg_n_variants(); i++) {
      const vop_variant *v = vopreg_variant(i);
      if (strcmp(v->path, "cuda-ref") || strcmp(v->op->name, op)) continue;
      n++;
      if (is_comm(op))
        CHECK(v->backend->host_mem && v->act_dtype == DT_F32, "%s/%s: backend or act dtype", op, v->name);
      else
        CHECK(v->backend == vopreg_cuda_backend() && v->act_dtype == DT_BF16, "%s/%s: backend or act dtype", op,
              v->name);
    }
    CHECK(want ? n > 0 : n == 0, "op %s: %d cuda-ref variants registered (want %s)", op, n, want ? ">0" : "none");
  }
}

static void test_cuda_ref_pass(const char *preset) {
  kernels_result r = run(NULL, "cuda-ref", NULL, preset);
  CHECK(r.run > 0, "%s: no cuda-ref case ran", preset);
  CHECK(r.failed == 0, "%s: %d of %d cuda-ref cases failed", preset, r.failed, r.run);
  for (int i = 0; i < r.n; i++)
    if (r.r[i].status == KS_FAIL) fprintf(stderr, "  FAIL %s: %s\n", r.r[i].id, r.r[i].reason);
  /* not supported only where stated: add_rmsnorm (not fused in cuda-ref), and a communication case with more
   * ranks than this machine has GPUs */
  int unsup_other = 0, unsup_gpus = 0;
  for (int i = 0; i < r.n; i++) {
    const bool too_few_gpus =
        r.r[i].status == KS_UNSUPPORTED && is_comm(r.r[i].op) && strstr(r.r[i].reason, "GPUs") != NULL;
    unsup_gpus += too_few_gpus;
    if (r.r[i].status == KS_UNSUPPORTED && strcmp(r.r[i].op, "add_rmsnorm") != 0 && !too_few_gpus) {
      if (unsup_other++ < 10) fprintf(stderr, "  not supported %s: %s\n", r.r[i].id, r.r[i].reason);
    }
  }
  CHECK(unsup_other == 0, "%s: %d cuda-ref cases not supported outside add_rmsnorm", preset, unsup_other);
  CHECK(count(&r, "ref_unfused", KS_UNSUPPORTED, "fused") > 0 && count(&r, "ref_unfused", KS_PASS, NULL) == 0,
        "%s: add_rmsnorm ref_unfused is not reported as not supported with its reason", preset);
  /* every runnable cuda-ref variant passed at least one case, and its records carry its trace */
  for (int i = 0; i < vopreg_n_variants(); i++) {
    const vop_variant *v = vopreg_variant(i);
    if (strcmp(v->path, "cuda-ref") || !strcmp(v->name, "ref_unfused")) continue;
    int passed = 0, traced = 0, cases = 0;
    for (int k = 0; k < r.n; k++) {
      if (r.r[k].op != v->op->name || strcmp(r.r[k].variant, v->name) != 0) continue;
      cases += r.r[k].status != KS_UNSUPPORTED;
      if (r.r[k].status == KS_PASS) {
        passed++;
        traced += r.r[k].trace_json && strstr(r.r[k].trace_json, "\"cuda-ref\"") && strstr(r.r[k].trace_json, v->name);
      }
    }
    /* a communication variant whose every case needs more GPUs than are visible has nothing to pass */
    if (cases == 0 && is_comm(v->op->name) && unsup_gpus > 0) continue;
    CHECK(passed > 0, "%s: %s/%s passed no case", preset, v->op->name, v->name);
    CHECK(traced == passed, "%s: %s/%s: %d of %d passing records show the cuda-ref trace", preset, v->op->name, v->name,
          traced, passed);
  }
  CHECK(r.run == r.passed + r.failed && r.run + r.unsupported == r.n, "%s: counts", preset);
  printf("%s: %d cuda-ref cases run, %d passed, %d failed, %d not supported, %.1f s\n", preset, r.run, r.passed,
         r.failed, r.unsupported, r.wall_s);
  kernels_result_free(&r);
}

static void test_cpu_planted_bugs(void) {
  kernels_result r = run(NULL, "test", NULL, "tiny");
  int nomax_large = 0, nomax_large_fail = 0;
  for (int i = 0; i < r.n; i++)
    if (!strcmp(r.r[i].variant, "nomax") && r.r[i].dist == VD_LARGE)
      nomax_large++, nomax_large_fail += r.r[i].status == KS_FAIL;
  CHECK(nomax_large > 0 && nomax_large_fail == nomax_large, "nomax: %d of %d large-lse cases FAIL", nomax_large_fail,
        nomax_large);
  CHECK(count(&r, "skiplast", KS_PASS, NULL) == 0 && count(&r, "skiplast", KS_FAIL, "bound") > 0, "skiplast not caught");
  CHECK(count(&r, "unwritten", KS_PASS, NULL) == 0 && count(&r, "unwritten", KS_FAIL, "not written") > 0,
        "unwritten not caught");
  CHECK(count(&r, "oob", KS_PASS, NULL) == 0 && count(&r, "oob", KS_FAIL, "out-of-bounds") > 0, "oob not caught");
  CHECK(count(&r, "notrace", KS_PASS, NULL) == 0 && count(&r, "notrace", KS_FAIL, "trace") > 0, "notrace not caught");
  kernels_result_free(&r);
}

/* ---- planted bugs on the cuda backend (test-only, registered here) ----
 * Both compute a correct rmsnorm on the host from downloaded inputs, then: "cuda_unwritten"
 * uploads all but the last element; "cuda_oob" uploads everything and also writes 4 bytes
 * past the end of out through the backend's fill. */

static vstatus rms_host(const vop_case *c, const vop_layout *l, void *const *b, float **out) {
  const vop_backend *be = vopreg_cuda_backend();
  const int n = c->d[0];
  float *x = malloc(sizeof(float) * (size_t)l->b[0].n), *o = malloc(sizeof(float) * (size_t)l->b[2].n);
  uint16_t *w = malloc(sizeof(uint16_t) * (size_t)n);
  vstatus s = x && o && w ? V_OK : VERR("test_cuda_kernels.c: out of memory");
  if (s == V_OK) s = be->download(x, b[0], sizeof(float) * (size_t)l->b[0].n);
  if (s == V_OK) s = be->download(w, b[1], sizeof(uint16_t) * (size_t)n);
  for (int i = 0; i < c->batch && s == V_OK; i++) {
    double ss = 0;
    for (int j = 0; j < n; j++) ss += (double)x[(int64_t)i * n + j] * x[(int64_t)i * n + j];
    const double r = 1.0 / sqrt(ss / n + c->f[0]);
    for (int j = 0; j < n; j++) o[(int64_t)i * n + j] = (float)(bf16_to_f32(w[j]) * (x[(int64_t)i * n + j] * r));
  }
  free(x);
  free(w);
  if (s != V_OK) {
    free(o);
    return s;
  }
  *out = o;
  return V_OK;
}

static vstatus cuda_unwritten_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  float *o = NULL;
  VTRY(rms_host(c, l, b, &o));
  vstatus s = vopreg_cuda_backend()->upload(b[2], o, sizeof(float) * (size_t)(l->b[2].n - 1));
  free(o);
  vtrace_ran(t, "test", c->op->name, "cuda_unwritten", "planted");
  return s;
}

static vstatus cuda_oob_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  float *o = NULL;
  VTRY(rms_host(c, l, b, &o));
  vstatus s = vopreg_cuda_backend()->upload(b[2], o, sizeof(float) * (size_t)l->b[2].n);
  free(o);
  if (s == V_OK) s = vopreg_cuda_backend()->fill((float *)b[2] + l->b[2].n, 0, sizeof(float));
  vtrace_ran(t, "test", c->op->name, "cuda_oob", "planted");
  return s;
}

static void test_cuda_planted_bugs(void) {
  static vop_variant v[2];
  const vop *op = vopreg_find_op("rmsnorm");
  CHECK(op != NULL, "rmsnorm not registered");
  if (!op || !vopreg_cuda_backend()) return;
  v[0] = (vop_variant){.op = op, .path = "test", .name = "cuda_unwritten", .desc = "PLANTED BUG (cuda backend)",
                       .backend = vopreg_cuda_backend(), .act_dtype = DT_F32, .run = cuda_unwritten_run};
  v[1] = v[0];
  v[1].name = "cuda_oob";
  v[1].run = cuda_oob_run;
  CHECK_OK(vopreg_add_variant(&v[0]));
  CHECK_OK(vopreg_add_variant(&v[1]));
  kernels_result r = run("rmsnorm", "test", "cuda_unwritten", "tiny");
  CHECK(r.n > 0 && count(&r, "cuda_unwritten", KS_FAIL, "not written") == r.n, "cuda_unwritten: %d of %d caught",
        count(&r, "cuda_unwritten", KS_FAIL, "not written"), r.n);
  kernels_result_free(&r);
  r = run("rmsnorm", "test", "cuda_oob", "tiny");
  CHECK(r.n > 0 && count(&r, "cuda_oob", KS_FAIL, "out-of-bounds") == r.n, "cuda_oob: %d of %d caught",
        count(&r, "cuda_oob", KS_FAIL, "out-of-bounds"), r.n);
  kernels_result_free(&r);
}

int main(void) {
  if (cuda_device_count() == 0) {
    printf("no CUDA device: skipped\n");
    return 77;
  }
  kernels_register_ops();
  test_registration();
  test_cuda_ref_pass("tiny");
  test_cuda_ref_pass("edge");
  test_cpu_planted_bugs();
  test_cuda_planted_bugs();
  return test_finish();
}
