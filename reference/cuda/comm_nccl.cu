/* NCCL communicators (see comm_nccl.h): ncclAllReduce / ncclAllGather on the caller's
 * stream, one communicator per rank. Built only when CMake found libnccl (VOUCH_HAVE_NCCL). */
#ifdef VOUCH_HAVE_NCCL
#include <errno.h>
#include <nccl.h>
#include <unistd.h>

#include "reference/cuda/cuda_common.h"
#include "reference/cuda/comm_nccl.h"

#define NAME "nccl"

#define NCCL_CHECK(expr)                                                                                  \
  do {                                                                                                    \
    ncclResult_t nr_ = (expr);                                                                            \
    if (nr_ != ncclSuccess) return VERR("NCCL: %s: %s (%s:%d)", #expr, ncclGetErrorString(nr_), __FILE__, __LINE__); \
  } while (0)

typedef struct {
  ncclComm_t comm;   /* this rank's NCCL communicator */
  int device;        /* its GPU */
} nrank;

/* Multicast (NVLink SHARP) stays off unless the user set it explicitly. */
static void nvls_off(void) { setenv("NCCL_NVLS_ENABLE", "0", 0); }

static vstatus nccl_type(vdtype dt, ncclDataType_t *t) {
  switch (dt) {
    case DT_F32: *t = ncclFloat32; return V_OK;
    case DT_BF16: *t = ncclBfloat16; return V_OK;
    case DT_F16: *t = ncclFloat16; return V_OK;
    case DT_I32: *t = ncclInt32; return V_OK;
    default: return VERR("comm " NAME ": dtype %s is not supported", vdtype_name(dt));
  }
}

static vstatus n_allreduce(const vcomm *c, void *buf, int64_t count, vdtype dt, void *stream) {
  const nrank *k = (const nrank *)c->ctx;
  ncclDataType_t t = ncclFloat32;
  VTRY(nccl_type(dt, &t));
  NCCL_CHECK(ncclAllReduce(buf, buf, (size_t)count, t, ncclSum, k->comm, (cudaStream_t)stream));
  return V_OK;
}

static vstatus n_allgather(const vcomm *c, const void *send, void *recv, int64_t n, vdtype dt, void *stream) {
  const nrank *k = (const nrank *)c->ctx;
  ncclDataType_t t = ncclFloat32;
  VTRY(nccl_type(dt, &t));
  NCCL_CHECK(ncclAllGather(send, recv, (size_t)n, t, k->comm, (cudaStream_t)stream));
  return V_OK;
}

static vstatus n_reduce_scatter(const vcomm *c, const void *send, void *recv, int64_t n, vdtype dt, void *stream) {
  const nrank *k = (const nrank *)c->ctx;
  ncclDataType_t t = ncclFloat32;
  VTRY(nccl_type(dt, &t));
  NCCL_CHECK(ncclReduceScatter(send, recv, (size_t)n, t, ncclSum, k->comm, (cudaStream_t)stream));
  return V_OK;
}

/* The communicator of rank `rank` of `size` over NCCL communicator state k. */
static vcomm nccl_vcomm(int rank, int size, nrank *k) {
  vcomm c;
  memset(&c, 0, sizeof c);
  c.name = NAME;
  c.rank = rank;
  c.size = size;
  c.ctx = k;
  c.allreduce_sum = n_allreduce;
  c.allgather = n_allgather;
  c.reduce_scatter_sum = n_reduce_scatter;
  return c;
}

/* ---- one process, N GPUs ---- */

typedef struct {
  int size;
  nrank *rk;         /* [size] */
  vcomm *comms;      /* [size] */
  bool aborted;      /* abort() ran: the communicators are gone */
} ngroup;

static const vcomm *g_rank(vcomm_group *gr, int r) {
  ngroup *g = (ngroup *)gr->ctx;
  return r >= 0 && r < g->size ? &g->comms[r] : NULL;
}

static void g_abort(vcomm_group *gr) {
  ngroup *g = (ngroup *)gr->ctx;
  if (g->aborted) return;
  g->aborted = true;
  for (int r = 0; r < g->size; r++)
    if (g->rk[r].comm) {
      ncclCommAbort(g->rk[r].comm); /* unblocks kernels waiting for a failed peer */
      g->rk[r].comm = NULL;
    }
}

static vstatus g_recover(vcomm_group *gr) {
  ngroup *g = (ngroup *)gr->ctx;
  if (g->aborted) return VERR("comm " NAME ": communicators were aborted after a rank failed; reopen the path");
  return V_OK;
}

static void g_destroy(vcomm_group *gr) {
  if (!gr) return;
  ngroup *g = (ngroup *)gr->ctx;
  if (g) {
    for (int r = 0; r < g->size; r++)
      if (g->rk && g->rk[r].comm) ncclCommDestroy(g->rk[r].comm);
    free(g->rk);
    free(g->comms);
    free(g);
  }
  free(gr);
}

extern "C" vstatus comm_nccl_tp_group(vcomm_group **out, int size, const vpath_opts *o) {
  *out = NULL;
  nvls_off();
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess) {
    (void)cudaGetLastError();
    ndev = 0;
  }
  const int d0 = o ? o->device : 0;
  if (d0 < 0 || d0 + size > ndev)
    return VERR("comm " NAME ": TP %d from device %d needs GPUs %d..%d, but %d are visible (one process drives "
                "N GPUs; across hosts, start one process per GPU with srun/mpirun/torchrun)",
                size, d0, d0, d0 + size - 1, ndev);
  vcomm_group *gr = (vcomm_group *)calloc(1, sizeof *gr);
  ngroup *g = (ngroup *)calloc(1, sizeof *g);
  if (g) {
    g->rk = (nrank *)calloc((size_t)size, sizeof *g->rk);
    g->comms = (vcomm *)calloc((size_t)size, sizeof *g->comms);
  }
  int *devs = (int *)calloc((size_t)size, sizeof(int));
  ncclComm_t *cs = (ncclComm_t *)calloc((size_t)size, sizeof(ncclComm_t));
  if (!gr || !g || !g->rk || !g->comms || !devs || !cs) {
    free(devs);
    free(cs);
    if (g) {
      free(g->rk);
      free(g->comms);
    }
    free(g);
    free(gr);
    return VERR("comm " NAME ": out of memory");
  }
  for (int r = 0; r < size; r++) devs[r] = d0 + r;
  ncclResult_t nr = ncclCommInitAll(cs, size, devs);
  if (nr != ncclSuccess) {
    free(devs);
    free(cs);
    free(g->rk);
    free(g->comms);
    free(g);
    free(gr);
    return VERR("NCCL: ncclCommInitAll over %d GPUs from device %d: %s", size, d0, ncclGetErrorString(nr));
  }
  g->size = size;
  for (int r = 0; r < size; r++) {
    g->rk[r].comm = cs[r];
    g->rk[r].device = devs[r];
    g->comms[r] = nccl_vcomm(r, size, &g->rk[r]);
  }
  free(devs);
  free(cs);
  gr->name = NAME;
  gr->size = size;
  gr->ctx = g;
  gr->rank = g_rank;
  gr->abort = g_abort;
  gr->recover = g_recover;
  gr->destroy = g_destroy;
  *out = gr;
  return V_OK;
}

/* ---- one process per GPU ---- */

/* The job's unique id: from VOUCH_NCCL_ID_FILE (rank 0 writes it atomically, the others
 * wait up to 300 s for it), or NCCL's own bootstrap from NCCL_COMM_ID (set from
 * MASTER_ADDR:MASTER_PORT when only those are given), where every rank calls ncclGetUniqueId. */
static vstatus unique_id(ncclUniqueId *id, int rank) {
  const char *file = getenv("VOUCH_NCCL_ID_FILE");
  if (file && file[0]) {
    if (rank == 0) {
      NCCL_CHECK(ncclGetUniqueId(id));
      char tmp[4200];
      snprintf(tmp, sizeof tmp, "%s.tmp.%d", file, (int)getpid());
      FILE *f = fopen(tmp, "wb");
      if (!f) return VERR("VOUCH_NCCL_ID_FILE '%s': cannot write %s: %s", file, tmp, strerror(errno));
      bool ok = fwrite(id, sizeof *id, 1, f) == 1;
      ok = fclose(f) == 0 && ok;
      if (!ok || rename(tmp, file) != 0) return VERR("VOUCH_NCCL_ID_FILE '%s': cannot write: %s", file, strerror(errno));
      return V_OK;
    }
    for (int waited = 0; waited < 3000; waited++) {
      FILE *f = fopen(file, "rb");
      if (f) {
        bool ok = fread(id, sizeof *id, 1, f) == 1;
        fclose(f);
        if (ok) return V_OK;
      }
      usleep(100000);
    }
    return VERR("VOUCH_NCCL_ID_FILE '%s': rank %d waited 300 s and rank 0 did not write it (a path on a file "
                "system every host sees?)", file, rank);
  }
  if (!getenv("NCCL_COMM_ID")) {
    const char *a = getenv("MASTER_ADDR"), *p = getenv("MASTER_PORT");
    if (!a || !p)
      return VERR("multi-process TP needs VOUCH_NCCL_ID_FILE (a file path every rank sees) or NCCL_COMM_ID "
                  "(host:port of rank 0) or MASTER_ADDR + MASTER_PORT");
    char v[300];
    snprintf(v, sizeof v, "%.200s:%.20s", a, p);
    setenv("NCCL_COMM_ID", v, 1);
  }
  NCCL_CHECK(ncclGetUniqueId(id));
  return V_OK;
}

extern "C" vstatus comm_nccl_from_env(vcomm **out, int device) {
  *out = NULL;
  nvls_off();
  int rank, size, local;
  vstatus err;
  if (!vcomm_env_launch(&rank, &size, &local, &err)) {
    if (err) return err;
    return VERR("multi-process TP: no launcher variables (RANK/WORLD_SIZE, SLURM_PROCID/SLURM_NTASKS or "
                "OMPI_COMM_WORLD_RANK/SIZE)");
  }
  ncclUniqueId id;
  VTRY(unique_id(&id, rank));
  CUDA_CHECK(cudaSetDevice(device));
  vcomm *c = (vcomm *)calloc(1, sizeof *c);
  nrank *k = (nrank *)calloc(1, sizeof *k);
  if (!c || !k) {
    free(c);
    free(k);
    return VERR("comm " NAME ": out of memory");
  }
  ncclResult_t nr = ncclCommInitRank(&k->comm, size, id, rank);
  if (nr != ncclSuccess) {
    free(c);
    free(k);
    return VERR("NCCL: ncclCommInitRank rank %d of %d on device %d: %s", rank, size, device, ncclGetErrorString(nr));
  }
  k->device = device;
  *c = nccl_vcomm(rank, size, k);
  *out = c;
  return V_OK;
}

extern "C" void comm_nccl_free(vcomm *c) {
  if (!c) return;
  nrank *k = (nrank *)c->ctx;
  if (k && k->comm) ncclCommDestroy(k->comm);
  free(k);
  free(c);
}
#endif
