/* The tensor-parallel wrapper (see cpu_tp.h): N ranks, one persistent worker thread each,
 * every call broadcast to all ranks and joined. */
#include "reference/cpu/cpu_tp.h"

#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/shard.h"

enum { JOB_OPEN, JOB_FORWARD, JOB_RESET, JOB_FILL, JOB_CLOSE, JOB_SELECT };

struct tp_state;

typedef struct {
  struct tp_state *tp;   /* owner */
  int r;                 /* rank */
  pthread_t th;          /* worker thread */
  bool started;          /* th was created */
  ds_model local;        /* this rank's shard */
  bool has_local;        /* local was built */
  vpath_opts o;          /* options of this rank's inner path */
  void *st;              /* inner path state (NULL until opened) */
  float *logits;         /* [cap] scratch logits of ranks > 0 */
  size_t cap;            /* floats in logits */
  char err[1024];        /* message of this rank's last failure */
  vtrace sel;            /* JOB_SELECT: this rank's selectable pairs (a tally) */
} tp_rank;

typedef struct tp_state {
  const vpath_ops *inner; /* the sharded path */
  vcomm_group *g;        /* communicators, one per rank */
  int N;                 /* ranks */
  tp_rank *rk;           /* [N] */
  vtrace *trace;         /* the caller's trace (rank 0 records into it) */
  int vocab;             /* full vocabulary (logit row width) */
  bool ep;               /* expert parallelism (vpath_opts.ep): ranks own whole routed experts */
  /* the job being run, set by the caller under mu */
  pthread_mutex_t mu;
  pthread_cond_t go, done;
  unsigned long gen;     /* job generation (workers run each once) */
  int pending;           /* ranks still running the job */
  bool quit;             /* workers exit */
  int first_fail;        /* rank that failed first in this job, -1 when none */
  int op;                /* JOB_* */
  const vstep *s;        /* forward: the step */
  float *out;            /* forward: the caller's logits (rank 0) */
  int seq, len;          /* reset / fill_cache */
  uint64_t seed;         /* fill_cache */
  const vpath_envelope *env; /* selectable */
} tp_state;

static vstatus run_job(tp_state *tp, tp_rank *k) {
  switch (tp->op) {
    case JOB_OPEN: return tp->inner->open(&k->st, &k->local, &k->o);
    case JOB_FORWARD: {
      float *out = tp->out;
      if (k->r > 0) {
        size_t need = (size_t)vstep_logit_rows(tp->s) * (size_t)tp->vocab;
        if (need > k->cap) {
          float *nl = realloc(k->logits, need * sizeof(float));
          if (!nl) return VERR("tp rank %d: out of memory for %zu logits", k->r, need);
          k->logits = nl;
          k->cap = need;
        }
        out = k->logits;
      }
      return tp->inner->forward(k->st, tp->s, out);
    }
    case JOB_RESET: return tp->inner->reset(k->st, tp->seq);
    case JOB_FILL: return tp->inner->fill_cache(k->st, tp->seq, tp->len, tp->seed);
    case JOB_SELECT: /* every rank: a rank's choices may differ (its shard, its dcp positions) and a GPU
                      * path may need all ranks in a collective call */
      vtrace_init_tally(&k->sel);
      return tp->inner->selectable(k->st, tp->env, &k->sel);
    case JOB_CLOSE:
      if (k->st) tp->inner->close(k->st);
      k->st = NULL;
      return V_OK;
  }
  return VERR("tp: unknown job %d", tp->op);
}

static void *worker(void *arg) {
  tp_rank *k = arg;
  tp_state *tp = k->tp;
  unsigned long seen = 0;
  for (;;) {
    pthread_mutex_lock(&tp->mu);
    while (tp->gen == seen && !tp->quit) pthread_cond_wait(&tp->go, &tp->mu);
    if (tp->gen == seen) { /* quit with no job pending */
      pthread_mutex_unlock(&tp->mu);
      break;
    }
    seen = tp->gen;
    pthread_mutex_unlock(&tp->mu);
    verr_clear();
    vstatus s = run_job(tp, k);
    if (s != V_OK) {
      snprintf(k->err, sizeof k->err, "%s", verr_msg()[0] ? verr_msg() : "failed without a message");
      pthread_mutex_lock(&tp->mu);
      if (tp->first_fail < 0) tp->first_fail = k->r;
      pthread_mutex_unlock(&tp->mu);
      tp->g->abort(tp->g); /* wake ranks blocked in a collective */
    }
    pthread_mutex_lock(&tp->mu);
    if (--tp->pending == 0) pthread_cond_signal(&tp->done);
    pthread_mutex_unlock(&tp->mu);
  }
  return NULL;
}

/* Runs the job set in tp->op on every rank and waits. */
static vstatus run_all(tp_state *tp, int op) {
  pthread_mutex_lock(&tp->mu);
  tp->op = op;
  tp->first_fail = -1;
  tp->pending = tp->N;
  tp->gen++;
  pthread_cond_broadcast(&tp->go);
  while (tp->pending > 0) pthread_cond_wait(&tp->done, &tp->mu);
  int fail = tp->first_fail;
  pthread_mutex_unlock(&tp->mu);
  if (fail < 0) return V_OK;
  vstatus rs = tp->g->recover(tp->g);
  char msg[1100];
  snprintf(msg, sizeof msg, "%s", tp->rk[fail].err);
  vstatus e = VERR("TP %d rank %d: %s", tp->N, fail, msg);
  if (rs != V_OK) verr_prefix("communicator not reusable after the failure");
  return e;
}

static void tp_close(void *state) {
  tp_state *tp = state;
  if (!tp) return;
  bool any = false;
  for (int r = 0; r < tp->N; r++) any = any || tp->rk[r].started;
  if (any) {
    /* every started worker closes its inner path on its own thread */
    bool all = true;
    for (int r = 0; r < tp->N; r++) all = all && tp->rk[r].started;
    if (all) run_all(tp, JOB_CLOSE);
    pthread_mutex_lock(&tp->mu);
    tp->quit = true;
    pthread_cond_broadcast(&tp->go);
    pthread_mutex_unlock(&tp->mu);
    for (int r = 0; r < tp->N; r++)
      if (tp->rk[r].started) pthread_join(tp->rk[r].th, NULL);
  }
  for (int r = 0; r < tp->N; r++) {
    tp_rank *k = &tp->rk[r];
    if (k->st) tp->inner->close(k->st); /* workers could not all start: close here */
    if (k->has_local) ds_model_close(&k->local);
    free(k->logits);
  }
  if (tp->g) tp->g->destroy(tp->g);
  pthread_mutex_destroy(&tp->mu);
  pthread_cond_destroy(&tp->go);
  pthread_cond_destroy(&tp->done);
  free(tp->rk);
  free(tp);
}

/* Builds rank r's shard of m. A shard of a lazy synthetic model is lazy (model/shard.h): GPU
 * paths (they time on the device: last_step_ms set) generate it on their device; a host path
 * (cpu-ref) reads host weights, so its shard's slices are generated on the host here. */
static vstatus open_shard(ds_model *local, const vpath_ops *inner, const ds_model *m, int r, int N, bool ep) {
  VTRY(ds_shard_model_ep(local, m, r, N, ep)); /* under EP: only the rank's own routed experts */
  vstatus s = inner->last_step_ms ? V_OK : ds_model_materialize(local);
  if (s != V_OK) ds_model_close(local);
  return s;
}

vstatus tp_path_open(void **state, const vpath_ops *inner, tp_group_fn group, const ds_model *m, const vpath_opts *o) {
  *state = NULL;
  if (!inner || !group || !m || !o) return VERR("tp: open needs a path, a communicator factory, a model and options");
  const int N = o->tp > 0 ? o->tp : 1;
  if (o->comm) return VERR("tp: options already carry a communicator (a TP wrapper inside a TP wrapper)");
  VTRY(ds_shard_check_ep(&m->cfg, N, o->ep));
  tp_state *tp = vcalloc(1, sizeof *tp, "tp state");
  if (!tp) return V_ERR;
  tp->inner = inner;
  tp->N = N;
  tp->trace = o->trace;
  tp->vocab = m->cfg.vocab_size;
  pthread_mutex_init(&tp->mu, NULL);
  pthread_cond_init(&tp->go, NULL);
  pthread_cond_init(&tp->done, NULL);
  tp->rk = vcalloc((size_t)N, sizeof *tp->rk, "tp ranks");
  if (!tp->rk) {
    free(tp);
    return V_ERR;
  }
  vstatus s = group(&tp->g, N, o);
  const int threads = o->n_threads > 0 ? o->n_threads : omp_get_max_threads();
  for (int r = 0; r < N && s == V_OK; r++) {
    tp_rank *k = &tp->rk[r];
    k->tp = tp;
    k->r = r;
    s = open_shard(&k->local, inner, m, r, N, o->ep);
    if (s != V_OK) break;
    k->has_local = true;
    k->o = *o;
    k->o.tp = 0;
    k->o.comm = tp->g->rank(tp->g, r);
    k->o.device = o->device + r;
    k->o.n_threads = threads / N > 1 ? threads / N : 1;
    k->o.trace = r == 0 ? o->trace : NULL;
  }
  for (int r = 0; r < N && s == V_OK; r++) {
    if (pthread_create(&tp->rk[r].th, NULL, worker, &tp->rk[r]) != 0) {
      s = VERR("tp: cannot start the worker thread of rank %d", r);
      break;
    }
    tp->rk[r].started = true;
  }
  if (s == V_OK) s = run_all(tp, JOB_OPEN);
  if (s != V_OK) {
    char msg[1100];
    snprintf(msg, sizeof msg, "%s", verr_msg());
    tp_close(tp);
    return VERR("%s", msg);
  }
  if (o->trace) {
    char d[200];
    snprintf(d, sizeof d, "tp=%d, comm %s, one thread per rank, shards of %.100s", N, tp->g->name, m->source);
    vtrace_note(o->trace, inner->name, d);
    if (o->ep) {
      snprintf(d, sizeof d, "ep=%d: rank r owns routed experts [r*%d/%d, (r+1)*%d/%d) whole, the others absent on it",
               N, m->cfg.n_routed_experts, N, m->cfg.n_routed_experts, N);
      vtrace_note(o->trace, inner->name, d);
    }
  }
  tp->ep = o->ep;
  *state = tp;
  return V_OK;
}

static vstatus tp_supports(void *state, const vstep *s) {
  tp_state *tp = state;
  if (!tp->inner->supports) return V_OK;
  /* every rank runs the same shapes on the same config: rank 0 answers for all */
  return tp->inner->supports(tp->rk[0].st, s);
}

/* The wrapper's own event: the ranks ran (or can run) a step in tp's communicators. */
static void trace_tp(const tp_state *tp, vtrace *t, const char *detail) {
  vtrace_ran(t, tp->inner->name, "tp", tp->g->name, detail);
}

static vstatus tp_forward(void *state, const vstep *s, float *logits) {
  tp_state *tp = state;
  if (!tp) return VERR("tp: forward on a path that is not open");
  if (!logits) return VERR("tp: forward: logits buffer is NULL");
  tp->s = s;
  tp->out = logits;
  vstatus st = run_all(tp, JOB_FORWARD);
  tp->s = NULL;
  tp->out = NULL;
  if (st == V_OK && tp->trace) {
    char d[160];
    snprintf(d, sizeof d, "tp=%d%s ranks in threads, allreduce x2 per layer + logits allgather", tp->N,
             tp->ep ? " (ep: routed experts whole per rank)" : "");
    trace_tp(tp, tp->trace, d);
  }
  return st;
}

/* Every rank's choices (JOB_SELECT), merged into out (a tally: a pair any rank picks, with the first
 * condition found), and the wrapper's own event. */
static vstatus tp_selectable(void *state, const vpath_envelope *env, vtrace *out) {
  tp_state *tp = state;
  tp->env = env;
  vstatus st = run_all(tp, JOB_SELECT);
  tp->env = NULL;
  for (int r = 0; r < tp->N; r++) {
    const vtrace *t = &tp->rk[r].sel;
    for (int i = 0; st == V_OK && i < t->n; i++) {
      const vtrace_event *e = &t->ev[i];
      if (e->kind == TR_RAN) vtrace_ran(out, e->path, e->op, e->variant, e->detail);
      else if (e->kind == TR_FALLBACK) vtrace_fallback(out, e->path, e->op, e->variant, e->detail);
    }
    vtrace_free(&tp->rk[r].sel);
  }
  if (st == V_OK) {
    char d[96];
    snprintf(d, sizeof d, "any step: tp=%d ranks in threads", tp->N);
    trace_tp(tp, out, d);
  }
  return st;
}

static vstatus tp_reset(void *state, int seq) {
  tp_state *tp = state;
  tp->seq = seq;
  return run_all(tp, JOB_RESET);
}

static vstatus tp_fill(void *state, int seq, int len, uint64_t seed) {
  tp_state *tp = state;
  tp->seq = seq;
  tp->len = len;
  tp->seed = seed;
  return run_all(tp, JOB_FILL);
}

static double tp_last_ms(void *state) {
  tp_state *tp = state;
  double mx = 0;
  for (int r = 0; r < tp->N; r++) {
    double v = tp->inner->last_step_ms(tp->rk[r].st);
    if (r == 0 || v > mx || v != v) mx = v;
  }
  return mx;
}

/* Rank 0's count: the router is replicated, so every rank selects the same experts. */
static double tp_last_experts(void *state) {
  tp_state *tp = state;
  return tp->rk[0].st ? tp->inner->last_experts(tp->rk[0].st) : -1.0;
}

void tp_path_make_ops(vpath_ops *ops, const vpath_ops *inner) {
  memset(ops, 0, sizeof *ops);
  ops->name = inner->name;
  ops->desc = inner->desc;
  ops->latent_kv = inner->latent_kv;
  ops->caps = inner->caps;
  ops->supports = tp_supports;
  ops->forward = tp_forward;
  ops->reset = tp_reset;
  ops->fill_cache = inner->fill_cache ? tp_fill : NULL;
  ops->last_step_ms = inner->last_step_ms ? tp_last_ms : NULL;
  ops->last_experts = inner->last_experts ? tp_last_experts : NULL;
  ops->close = tp_close;
  ops->selectable = inner->selectable ? tp_selectable : NULL;
}

vstatus tp_threads_group(vcomm_group **g, int size, const vpath_opts *o) {
  (void)o;
  return vcomm_threads_group(g, size);
}

/* ---- one rank per process (multi-process launch) ---- */

typedef struct {
  const vpath_ops *inner;     /* the sharded path */
  void *st;                   /* its state */
  ds_model local;             /* this process's shard */
  vcomm *comm;                /* this process's communicator (owned) */
  void (*free_comm)(vcomm *); /* frees comm */
} tp_one;

static void one_close(void *state) {
  tp_one *k = state;
  if (!k) return;
  if (k->st) k->inner->close(k->st);
  ds_model_close(&k->local);
  if (k->comm && k->free_comm) k->free_comm(k->comm);
  free(k);
}

vstatus tp_path_open_rank(void **state, const vpath_ops *inner, vcomm *comm, void (*free_comm)(vcomm *),
                          const ds_model *m, const vpath_opts *o) {
  *state = NULL;
  tp_one *k = vcalloc(1, sizeof *k, "tp rank state");
  if (!k) {
    if (free_comm) free_comm(comm);
    return V_ERR;
  }
  k->inner = inner;
  k->comm = comm;
  k->free_comm = free_comm;
  vstatus s = open_shard(&k->local, inner, m, comm->rank, comm->size, o->ep);
  if (s == V_OK) {
    vpath_opts lo = *o;
    lo.tp = 0;
    lo.comm = comm;
    s = inner->open(&k->st, &k->local, &lo);
  }
  if (s != V_OK) {
    char msg[1100];
    snprintf(msg, sizeof msg, "%s", verr_msg());
    one_close(k);
    return VERR("TP %d rank %d: %s", comm->size, comm->rank, msg);
  }
  if (o->trace) {
    char d[160];
    snprintf(d, sizeof d, "tp=%d, this process is rank %d, comm %s", comm->size, comm->rank, comm->name);
    vtrace_note(o->trace, inner->name, d);
  }
  *state = k;
  return V_OK;
}

static vstatus one_supports(void *state, const vstep *s) {
  tp_one *k = state;
  return k->inner->supports ? k->inner->supports(k->st, s) : V_OK;
}
static vstatus one_forward(void *state, const vstep *s, float *logits) {
  tp_one *k = state;
  return k->inner->forward(k->st, s, logits);
}
static vstatus one_reset(void *state, int seq) {
  tp_one *k = state;
  return k->inner->reset(k->st, seq);
}
static vstatus one_fill(void *state, int seq, int len, uint64_t seed) {
  tp_one *k = state;
  return k->inner->fill_cache(k->st, seq, len, seed);
}
static double one_last_ms(void *state) {
  tp_one *k = state;
  return k->inner->last_step_ms(k->st);
}

static vstatus one_selectable(void *state, const vpath_envelope *env, vtrace *out) {
  tp_one *k = state;
  return k->inner->selectable(k->st, env, out);
}

static double one_last_experts(void *state) {
  tp_one *k = state;
  return k->inner->last_experts(k->st);
}

void tp_path_make_rank_ops(vpath_ops *ops, const vpath_ops *inner) {
  memset(ops, 0, sizeof *ops);
  ops->name = inner->name;
  ops->desc = inner->desc;
  ops->latent_kv = inner->latent_kv;
  ops->caps = inner->caps;
  ops->supports = one_supports;
  ops->forward = one_forward;
  ops->reset = one_reset;
  ops->fill_cache = inner->fill_cache ? one_fill : NULL;
  ops->last_step_ms = inner->last_step_ms ? one_last_ms : NULL;
  ops->last_experts = inner->last_experts ? one_last_experts : NULL;
  ops->close = one_close;
  ops->selectable = inner->selectable ? one_selectable : NULL;
}
