/* Kernel-suite variants of the communication ops (reference/opreg.h), run through the thread
 * communicators the CPU tensor-parallel path uses (common/comm_threads.c), R ranks as R threads:
 *   allreduce              rank r all-reduces its row of the case's input in place;
 *   allreduce_add_rmsnorm  rank r all-reduces its partial, adds the residual and normalizes, as
 *                          cpu-ref does after o_proj and the MLP under TP.
 * The inputs are small integers, so every order of summation gives exactly the oracle's value:
 * the sums are checked bitwise (nccl-tests' method). Registered by comm_variants_register(). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/comm.h"
#include "reference/opreg.h"
#include "reference/cpu/ops.h"
#include "reference/cpu/variants.h"

typedef struct {
  const vcomm *c;    /* this rank's communicator */
  float *row;        /* [n] this rank's buffer (reduced in place) */
  int64_t n;         /* elements */
  /* allreduce_add_rmsnorm only (norm_w NULL: plain all-reduce) */
  const vtensor *norm_w; /* [D] bf16 norm weight */
  float *x;          /* [rows, D] residual in, residual + sum out */
  float *xn;         /* [rows, D] normed out */
  int rows, D;
  float eps;
  vstatus st;        /* result */
  char err[512];     /* message on failure */
} rank_job;

static void *rank_main(void *arg) {
  rank_job *j = arg;
  j->st = j->c->allreduce_sum(j->c, j->row, j->n, DT_F32, NULL);
  if (j->st == V_OK && j->norm_w) cpu_add_rmsnorm(j->xn, j->x, j->row, j->norm_w, j->rows, j->D, j->eps);
  if (j->st != V_OK) snprintf(j->err, sizeof j->err, "%s", verr_msg());
  return NULL;
}

/* Runs jobs[0..R) on R threads of one thread-communicator group. */
static vstatus run_ranks(rank_job *jobs, int R, const char *what) {
  vcomm_group *g;
  VTRY(vcomm_threads_group(&g, R));
  pthread_t *th = vcalloc((size_t)R, sizeof *th, "rank threads");
  vstatus s = th ? V_OK : V_ERR;
  int started = 0;
  for (int r = 0; r < R && s == V_OK; r++) {
    jobs[r].c = g->rank(g, r);
    if (pthread_create(&th[r], NULL, rank_main, &jobs[r]) != 0) {
      s = VERR("%s threads: cannot start rank %d's thread", what, r);
      g->abort(g);
      break;
    }
    started++;
  }
  for (int r = 0; r < started; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < started && s == V_OK; r++)
    if (jobs[r].st != V_OK) s = VERR("%s threads: rank %d: %s", what, r, jobs[r].err);
  free(th);
  g->destroy(g);
  return s;
}

static vstatus threads_supports(const vop_case *c) {
  if (c->d[0] < 1 || c->d[0] > 256) return VUNSUPPORTED("thread all-reduce: %d ranks (1..256 threads)", c->d[0]);
  return V_OK;
}

static vstatus threads_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  (void)l;
  const int R = c->d[0];
  const int64_t n = c->d[1];
  float *out = b[1];
  memcpy(out, b[0], sizeof(float) * (size_t)(R * n));
  rank_job *jobs = vcalloc((size_t)R, sizeof *jobs, "allreduce rank jobs");
  if (!jobs) return V_ERR;
  for (int r = 0; r < R; r++) jobs[r] = (rank_job){.row = out + (size_t)r * n, .n = n};
  vstatus s = run_ranks(jobs, R, "allreduce");
  free(jobs);
  VTRY(s);
  char detail[96];
  snprintf(detail, sizeof detail, "%s/%s B=%d", c->preset, c->shape, c->batch);
  vtrace_ran(t, "cpu-ref", c->op->name, "threads", detail);
  return V_OK;
}

/* Planted bugs of the "test" path (the suite must FAIL them): */
enum { ARN_OK = 0, ARN_SKEW = 1 /* ranks > 0 normalize with another eps: ranks disagree */,
       ARN_DROP = 2 /* the last rank's partial is left out of the sum */ };

/* buffers: part [R, B, D], res [B, D], w [D] bf16, x [R, B, D], xn [R, B, D] */
static vstatus arn_run_mode(const vop_case *c, void *const *b, vtrace *t, int bug) {
  const int R = c->d[0], D = c->d[1], B = c->batch;
  const size_t rn = (size_t)B * D;
  float *parts = vcalloc((size_t)R * rn, sizeof(float), "allreduce_add_rmsnorm partials");
  rank_job *jobs = vcalloc((size_t)R, sizeof *jobs, "allreduce_add_rmsnorm rank jobs");
  vstatus s = parts && jobs ? V_OK : V_ERR;
  vtensor w = {.name = "w", .dtype = DT_BF16, .ndim = 1, .shape = {D}, .data = b[2]};
  float *x = b[3], *xn = b[4];
  for (int r = 0; r < R && s == V_OK; r++) {
    if (bug == ARN_DROP && r == R - 1) memset(parts + r * rn, 0, sizeof(float) * rn);
    else memcpy(parts + r * rn, (const float *)b[0] + r * rn, sizeof(float) * rn);
    memcpy(x + r * rn, b[1], sizeof(float) * rn);
    const float eps = (float)c->f[0] * (bug == ARN_SKEW && r > 0 ? 4.0f : 1.0f) + (bug == ARN_SKEW && r > 0 ? 1.0f : 0);
    jobs[r] = (rank_job){.row = parts + r * rn, .n = (int64_t)rn, .norm_w = &w, .x = x + r * rn,
                         .xn = xn + r * rn, .rows = B, .D = D, .eps = eps};
  }
  if (s == V_OK) s = run_ranks(jobs, R, "allreduce_add_rmsnorm");
  free(parts);
  free(jobs);
  VTRY(s);
  char detail[96];
  snprintf(detail, sizeof detail, "%s/%s B=%d", c->preset, c->shape, c->batch);
  vtrace_ran(t, bug ? "test" : "cpu-ref", c->op->name, bug == ARN_SKEW ? "rank_skew" : bug ? "drop_rank" : "threads",
             detail);
  return V_OK;
}
static vstatus arn_threads_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  (void)l;
  return arn_run_mode(c, b, t, ARN_OK);
}
static vstatus arn_skew_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  (void)l;
  return arn_run_mode(c, b, t, ARN_SKEW);
}
static vstatus arn_drop_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  (void)l;
  return arn_run_mode(c, b, t, ARN_DROP);
}

void comm_variants_register(void) {
  static const struct {
    const char *op, *path, *name, *desc;
    vstatus (*run)(const vop_case *, const vop_layout *, void *const *, vtrace *);
  } e[4] = {
      {"allreduce", "cpu-ref", "threads", "thread communicators of the CPU TP path (common/comm_threads.c), one thread per rank",
       threads_run},
      {"allreduce_add_rmsnorm", "cpu-ref", "threads",
       "thread all-reduce, then cpu_add_rmsnorm on every rank (cpu-ref under TP)", arn_threads_run},
      {"allreduce_add_rmsnorm", "test", "rank_skew", "PLANTED BUG: ranks > 0 normalize with another eps", arn_skew_run},
      {"allreduce_add_rmsnorm", "test", "drop_rank", "PLANTED BUG: the last rank's partial is not summed", arn_drop_run},
  };
  static vop_variant v[4];
  for (int i = 0; i < 4; i++) {
    const vop *op = vopreg_find_op(e[i].op);
    if (!op) {
      fprintf(stderr, "vouch: comm variants: op '%s' is not registered\n", e[i].op);
      continue;
    }
    v[i] = (vop_variant){.op = op, .path = e[i].path, .name = e[i].name, .desc = e[i].desc,
                         .backend = vop_backend_cpu(), .act_dtype = DT_F32, .supports = threads_supports,
                         .run = e[i].run};
    if (vopreg_add_variant(&v[i]) != V_OK) fprintf(stderr, "vouch: %s\n", verr_msg());
  }
}
