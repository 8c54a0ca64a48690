/* Kernel-suite variants of the communication ops on real GPUs (reference/opreg.h):
 *   allreduce_add_rmsnorm  latency/p2p_oneshot, latency/nccl, latency/nccl_rs_ag: the three modes of
 *                          lat_tp_reduce_add_norm (kernels/latency_tp.h), rank r on GPU r;
 *   allreduce              cuda-ref/nccl: ncclAllReduce in fp32, rank r on GPU r.
 * A case of R ranks needs R visible GPUs (else "not supported"). The variants take host buffers
 * (backend "cpu") and move each rank's slice to its GPU themselves: one process drives the R GPUs
 * with one thread per rank, through the same NCCL group the TP paths use. The inputs are small
 * integers, so sums are exact and the suite checks them bitwise (nccl-tests' method); the normed
 * output must also be bitwise identical across ranks (the op's check). */
#include <pthread.h>

#include "kernels/latency.h"
#include "kernels/latency_tp.h"
#include "reference/cuda/cuda_common.h"
extern "C" {
#include "reference/opreg.h"
#include "reference/cuda/comm_nccl.h"
}

#ifdef VOUCH_HAVE_NCCL

typedef struct {
  const vcomm *c;        /* this rank's communicator */
  vcomm_group *g;        /* the group (aborted when this rank fails) */
  int mode;              /* LAT_TP_* for allreduce_add_rmsnorm; 0: plain allreduce */
  const vop_case *cs;    /* the case */
  void *const *b;        /* the case's host buffers, layout order */
  vstatus st;            /* result */
  char err[512];         /* message on failure */
} rank_job;

static int visible_gpus(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    n = 0;
  }
  return n;
}

/* allreduce: buffers in [R, n], out [R, n]. */
static vstatus allreduce_rank(rank_job *j, cudaStream_t st) {
  const int r = j->c->rank;
  const int64_t n = j->cs->d[1];
  float *buf = NULL;
  CUDA_CHECK(cudaMalloc((void **)&buf, (size_t)n * sizeof(float)));
  vstatus s = V_OK;
  if (cudaMemcpyAsync(buf, (const float *)j->b[0] + (size_t)r * n, (size_t)n * sizeof(float), cudaMemcpyHostToDevice,
                      st) != cudaSuccess)
    s = VERR("allreduce nccl: rank %d: upload failed", r);
  if (s == V_OK) s = j->c->allreduce_sum(j->c, buf, n, DT_F32, st);
  if (s == V_OK && (cudaMemcpyAsync((float *)j->b[1] + (size_t)r * n, buf, (size_t)n * sizeof(float),
                                    cudaMemcpyDeviceToHost, st) != cudaSuccess ||
                    cudaStreamSynchronize(st) != cudaSuccess))
    s = VERR("allreduce nccl: rank %d: download failed", r);
  cudaFree(buf);
  return s;
}

/* allreduce_add_rmsnorm: part [R, B, D], res [B, D], w [D] bf16; out x [R, B, D], xn [R, B, D]. */
static vstatus arn_rank(rank_job *j, cudaStream_t st) {
  const vop_case *c = j->cs;
  const int r = j->c->rank, B = c->batch, D = c->d[1];
  const size_t rn = (size_t)B * D;
  lat_tp tp;
  VTRY(lat_tp_open(&tp, j->c, r, D, B, st));
  float *x = NULL;
  uint16_t *xn = NULL, *w = NULL, *h = (uint16_t *)malloc(rn * sizeof(uint16_t));
  vstatus s = h ? V_OK : VERR("allreduce_add_rmsnorm: out of memory");
  const size_t ra = (size_t)tp.rows_alloc * D;
  if (s == V_OK && (cudaMalloc((void **)&x, ra * sizeof(float)) != cudaSuccess ||
                    cudaMalloc((void **)&xn, ra * sizeof(uint16_t)) != cudaSuccess ||
                    cudaMalloc((void **)&w, (size_t)D * sizeof(uint16_t)) != cudaSuccess))
    s = VERR("allreduce_add_rmsnorm: rank %d: cannot allocate device buffers", r);
  if (s == V_OK &&
      (cudaMemcpyAsync(tp.part[0], (const float *)j->b[0] + (size_t)r * rn, rn * sizeof(float), cudaMemcpyHostToDevice,
                       st) != cudaSuccess ||
       cudaMemcpyAsync(x, j->b[1], rn * sizeof(float), cudaMemcpyHostToDevice, st) != cudaSuccess ||
       cudaMemcpyAsync(w, j->b[2], (size_t)D * sizeof(uint16_t), cudaMemcpyHostToDevice, st) != cudaSuccess))
    s = VERR("allreduce_add_rmsnorm: rank %d: upload failed", r);
  if (s == V_OK) s = lat_tp_reduce_add_norm(&tp, j->mode, 0, x, xn, w, B, (float)c->f[0], st);
  if (s == V_OK && (cudaMemcpyAsync((float *)j->b[3] + (size_t)r * rn, x, rn * sizeof(float), cudaMemcpyDeviceToHost,
                                    st) != cudaSuccess ||
                    cudaMemcpyAsync(h, xn, rn * sizeof(uint16_t), cudaMemcpyDeviceToHost, st) != cudaSuccess ||
                    cudaStreamSynchronize(st) != cudaSuccess))
    s = VERR("allreduce_add_rmsnorm %s: rank %d: %s", lat_tp_mode_name(j->mode), r,
             cudaGetErrorString(cudaGetLastError()));
  if (s == V_OK) {
    float *xo = (float *)j->b[4] + (size_t)r * rn;
    for (size_t i = 0; i < rn; i++) xo[i] = bf16_to_f32(h[i]);
  }
  free(h);
  cudaFree(x);
  cudaFree(xn);
  cudaFree(w);
  lat_tp_close(&tp);
  return s;
}

static void *rank_main(void *arg) {
  rank_job *j = (rank_job *)arg;
  cudaStream_t st = NULL;
  j->st = V_OK;
  if (cudaSetDevice(j->c->rank) != cudaSuccess || cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess)
    j->st = VERR("rank %d: cannot use GPU %d", j->c->rank, j->c->rank);
  if (j->st == V_OK) j->st = j->mode ? arn_rank(j, st) : allreduce_rank(j, st);
  if (st) cudaStreamDestroy(st);
  if (j->st != V_OK) {
    snprintf(j->err, sizeof j->err, "%s", verr_msg());
    j->g->abort(j->g); /* the other ranks must not wait in a collective forever */
  }
  return NULL;
}

/* One NCCL group per rank count, made on first use and kept for the next cases (making one costs
 * ~0.3 s: a suite of 100 cases spent most of its time there). A group a failed rank aborted is
 * destroyed and made again next time. The groups live until the process ends. */
static vcomm_group *g_groups[LAT_TP_MAX + 1];
static pthread_mutex_t g_groups_mu = PTHREAD_MUTEX_INITIALIZER;

static vstatus group_for(int R, vcomm_group **out) {
  pthread_mutex_lock(&g_groups_mu);
  vstatus s = V_OK;
  if (!g_groups[R]) {
    vpath_opts o;
    memset(&o, 0, sizeof o);
    s = comm_nccl_tp_group(&g_groups[R], R, &o);
  }
  *out = g_groups[R];
  pthread_mutex_unlock(&g_groups_mu);
  return s;
}

static void group_drop(int R) {
  pthread_mutex_lock(&g_groups_mu);
  if (g_groups[R]) g_groups[R]->destroy(g_groups[R]);
  g_groups[R] = NULL;
  pthread_mutex_unlock(&g_groups_mu);
}

static vstatus run_group(const vop_case *c, void *const *b, int mode, const char *what) {
  const int R = c->d[0];
  vcomm_group *g = NULL;
  VTRY(group_for(R, &g));
  rank_job *jobs = (rank_job *)calloc((size_t)R, sizeof *jobs);
  pthread_t *th = (pthread_t *)calloc((size_t)R, sizeof *th);
  vstatus s = jobs && th ? V_OK : VERR("%s: out of memory", what);
  int started = 0;
  for (int r = 0; r < R && s == V_OK; r++) {
    jobs[r].c = g->rank(g, r);
    jobs[r].g = g;
    jobs[r].mode = mode;
    jobs[r].cs = c;
    jobs[r].b = b;
    if (pthread_create(&th[r], NULL, rank_main, &jobs[r]) != 0) {
      s = VERR("%s: cannot start rank %d's thread", what, r);
      g->abort(g);
      break;
    }
    started++;
  }
  for (int r = 0; r < started; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < started && s == V_OK; r++)
    if (jobs[r].st != V_OK) s = VERR("%s: rank %d: %s", what, r, jobs[r].err);
  free(jobs);
  free(th);
  if (s != V_OK) group_drop(R); /* aborted, or a rank's state is unknown: do not reuse it */
  return s;
}

static vstatus gpus_supports(const vop_case *c) {
  const int R = c->d[0], n = visible_gpus();
  if (R < 1 || R > LAT_TP_MAX) return VUNSUPPORTED("%d ranks (1..%d)", R, LAT_TP_MAX);
  if (R > n) return VUNSUPPORTED("%d ranks need %d GPUs, %d visible", R, R, n);
  return V_OK;
}

static vstatus arn_supports(const vop_case *c) {
  VTRY(gpus_supports(c));
  if (c->d[1] % 4) return VUNSUPPORTED("hidden %d is not a multiple of 4", c->d[1]);
  return V_OK;
}

static vstatus oneshot_supports(const vop_case *c) {
  VTRY(arn_supports(c));
  for (int a = 0; a < c->d[0]; a++)
    for (int b = 0; b < c->d[0]; b++) {
      int ok = 0;
      if (a != b && (cudaDeviceCanAccessPeer(&ok, a, b) != cudaSuccess || !ok)) {
        (void)cudaGetLastError();
        return VUNSUPPORTED("GPU %d cannot access GPU %d (no peer access)", a, b);
      }
    }
  return V_OK;
}

static vstatus trace_ok(const vop_case *c, vtrace *t, const char *path, const char *name) {
  char detail[96];
  snprintf(detail, sizeof detail, "%s/%s B=%d on GPUs 0..%d", c->preset, c->shape, c->batch, c->d[0] - 1);
  vtrace_ran(t, path, c->op->name, name, detail);
  return V_OK;
}

static vstatus oneshot_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  (void)l;
  VTRY(run_group(c, b, LAT_TP_ONESHOT, "allreduce_add_rmsnorm p2p_oneshot"));
  return trace_ok(c, t, "latency", "p2p_oneshot");
}
static vstatus nccl_arn_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  (void)l;
  VTRY(run_group(c, b, LAT_TP_NCCL, "allreduce_add_rmsnorm nccl"));
  return trace_ok(c, t, "latency", "nccl");
}
static vstatus rsag_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  (void)l;
  VTRY(run_group(c, b, LAT_TP_RSAG, "allreduce_add_rmsnorm nccl_rs_ag"));
  return trace_ok(c, t, "latency", "nccl_rs_ag");
}
static vstatus nccl_allreduce_run(const vop_case *c, const vop_layout *l, void *const *b, vtrace *t) {
  (void)l;
  VTRY(run_group(c, b, 0, "allreduce nccl"));
  return trace_ok(c, t, "cuda-ref", "nccl");
}

extern "C" void latency_tp_register_variants(void) {
  static vop_variant v[4];
  const struct {
    const char *op, *path, *name, *desc;
    vstatus (*supports)(const vop_case *);
    vstatus (*run)(const vop_case *, const vop_layout *, void *const *, vtrace *);
  } e[4] = {
      {"allreduce_add_rmsnorm", "latency", "p2p_oneshot",
       "one kernel per rank: peers' fp32 partials read over NVLink, summed in rank order, + residual + RMSNorm",
       oneshot_supports, oneshot_run},
      {"allreduce_add_rmsnorm", "latency", "nccl", "ncclAllReduce fp32, then one residual + RMSNorm kernel",
       arn_supports, nccl_arn_run},
      {"allreduce_add_rmsnorm", "latency", "nccl_rs_ag",
       "two-stage: ncclReduceScatter by rows, residual + RMSNorm of own rows, ncclAllGather of x and xn",
       arn_supports, rsag_run},
      {"allreduce", "cuda-ref", "nccl", "ncclAllReduce fp32 in place, one GPU per rank", gpus_supports,
       nccl_allreduce_run},
  };
  for (int i = 0; i < 4; i++) {
    const vop *op = vopreg_find_op(e[i].op);
    if (!op) {
      fprintf(stderr, "vouch: latency TP variants: op '%s' is not registered\n", e[i].op);
      continue;
    }
    memset(&v[i], 0, sizeof v[i]);
    v[i].op = op;
    v[i].path = e[i].path;
    v[i].name = e[i].name;
    v[i].desc = e[i].desc;
    v[i].backend = vop_backend_cpu();
    v[i].act_dtype = i == 3 ? DT_F32 : DT_BF16;
    /* nondeterministic stays NULL (bitwise reruns, checked): the partials are integers, so every sum
     * is exact in any order, p2p_oneshot sums in rank order, and the norm runs on that exact x */
    v[i].supports = e[i].supports;
    v[i].run = e[i].run;
    if (vopreg_add_variant(&v[i]) != V_OK) fprintf(stderr, "vouch: %s\n", verr_msg());
  }
}

#else

extern "C" void latency_tp_register_variants(void) {} /* no NCCL in this build: no multi-GPU variants */

#endif
