/* Kernel-suite variants of the communication ops (common/opreg.h): the "allreduce" op run
 * through the thread communicators the CPU tensor-parallel path uses (common/comm_threads.c):
 * R ranks as R threads, rank r all-reducing its row of the case's input in place. The op's
 * inputs are small integers, so every order of summation gives exactly the oracle's value:
 * the check is bitwise (nccl-tests' method). Registered by comm_variants_register(). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/comm.h"
#include "common/opreg.h"

typedef struct {
  const vcomm *c;  /* this rank's communicator */
  float *row;      /* [n] this rank's buffer (reduced in place) */
  int64_t n;       /* elements */
  vstatus st;      /* result */
  char err[512];   /* message on failure */
} rank_job;

static void *rank_main(void *arg) {
  rank_job *j = arg;
  j->st = j->c->allreduce_sum(j->c, j->row, j->n, DT_F32, NULL);
  if (j->st != V_OK) snprintf(j->err, sizeof j->err, "%s", verr_msg());
  return NULL;
}

static vstatus threads_supports(const vop_case *c) {
  if (c->d[0] < 1 || c->d[0] > 256) return VUNSUPPORTED("thread all-reduce: %d ranks (1..256 threads)", c->d[0]);
  return V_OK;
}

static vstatus threads_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  const int R = c->d[0];
  const int64_t n = c->d[1];
  float *out = b[1];
  memcpy(out, b[0], sizeof(float) * (size_t)(R * n));
  vcomm_group *g;
  VTRY(vcomm_threads_group(&g, R));
  rank_job *jobs = vcalloc((size_t)R, sizeof *jobs, "allreduce rank jobs");
  pthread_t *th = vcalloc((size_t)R, sizeof *th, "allreduce rank threads");
  vstatus s = jobs && th ? V_OK : V_ERR;
  int started = 0;
  for (int r = 0; r < R && s == V_OK; r++) {
    jobs[r] = (rank_job){.c = g->rank(g, r), .row = out + (size_t)r * n, .n = n};
    if (pthread_create(&th[r], NULL, rank_main, &jobs[r]) != 0) {
      s = VERR("allreduce threads: cannot start rank %d's thread", r);
      g->abort(g);
      break;
    }
    started++;
  }
  for (int r = 0; r < started; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < started && s == V_OK; r++)
    if (jobs[r].st != V_OK) s = VERR("allreduce threads: rank %d: %s", r, jobs[r].err);
  free(jobs);
  free(th);
  g->destroy(g);
  if (s != V_OK) return s;
  char detail[96];
  snprintf(detail, sizeof detail, "%s/%s B=%d", c->preset, c->shape, c->batch);
  vtrace_ran(t, "cpu-ref", c->op->name, "threads", detail);
  return V_OK;
}

void comm_variants_register(void) {
  static vop_variant v;
  const vop *op = vopreg_find_op("allreduce");
  if (!op) {
    fprintf(stderr, "vouch: comm variants: op 'allreduce' is not registered\n");
    return;
  }
  v = (vop_variant){.op = op, .path = "cpu-ref", .name = "threads",
                    .desc = "thread communicators of the CPU TP path (common/comm_threads.c), one thread per rank",
                    .backend = vop_backend_cpu(), .act_dtype = DT_F32, .supports = threads_supports,
                    .run = threads_run};
  if (vopreg_add_variant(&v) != V_OK) fprintf(stderr, "vouch: %s\n", verr_msg());
}
