#include "suites/paths.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>

#include "model/shard.h"
#include "reference/cpu/cpu_ref.h"
#include "reference/cpu/cpu_tp.h"
#ifdef VOUCH_HAVE_CUDA
#include "kernels/latency.h"
#include "reference/cuda/cuda_ref.h"
#endif
#ifdef VOUCH_HAVE_NCCL
#include "reference/cuda/comm_nccl.h"
#endif

#define MAX_LOADED 8
static const vpath_ops *g_loaded[MAX_LOADED];
static int g_n_loaded;

static const vpath_ops *const g_builtin[] = {
    &cpu_ref_ops,
#ifdef VOUCH_HAVE_CUDA
    &cuda_ref_ops,
    &latency_ops,
#endif
};

const char *vpaths_names(void) {
#ifdef VOUCH_HAVE_CUDA
  return "cpu-ref cuda-ref latency";
#else
  return "cpu-ref (cuda-ref needs a CUDA build)";
#endif
}

/* "@VARIANT" strings of opened paths, kept for the process's life (vpath_opts.variant points here;
 * a vpath may be copied by value). */
#define MAX_VARIANTS 32
static char g_variants[MAX_VARIANTS][64];
static int g_n_variants;
static pthread_mutex_t g_variants_mu = PTHREAD_MUTEX_INITIALIZER;

static const char *intern_variant(const char *v) {
  const char *out = NULL;
  pthread_mutex_lock(&g_variants_mu);
  for (int i = 0; i < g_n_variants && !out; i++)
    if (!strcmp(g_variants[i], v)) out = g_variants[i];
  if (!out && g_n_variants < MAX_VARIANTS) {
    snprintf(g_variants[g_n_variants], sizeof g_variants[0], "%s", v);
    out = g_variants[g_n_variants++];
  }
  pthread_mutex_unlock(&g_variants_mu);
  return out;
}

/* The options a path name fixes: NAME[:tpN][:ep][:dcp][@VARIANT] (":ep" and ":dcp" after ":tpN", in
 * either order, each at most once). */
typedef struct {
  int tp;   /* N of ":tpN", 0 when absent */
  bool dcp; /* ":dcp": decode context parallelism over the TP ranks */
  bool ep;  /* ":ep": expert parallelism over the TP ranks */
} name_opts;

/* NAME[:tpN][:ep][:dcp][@VARIANT] -> base NAME, options, variant ("" when none; vsize bytes); false
 * on a bad suffix. */
static bool parse_name(const char *name, char *base, size_t n, name_opts *no, char *variant, size_t vsize) {
  memset(no, 0, sizeof *no);
  snprintf(base, n, "%s", name);
  char *at = strchr(base, '@');
  if (variant && vsize) variant[0] = 0;
  if (at) {
    if (!at[1] || strlen(at + 1) >= 64) return false;
    if (variant) snprintf(variant, vsize, "%s", at + 1);
    *at = 0;
  }
  char *c = strrchr(base, ':');
  for (;;) { /* trailing ":dcp" / ":ep", each once */
    if (c && strcmp(c, ":dcp") == 0 && !no->dcp) no->dcp = true;
    else if (c && strcmp(c, ":ep") == 0 && !no->ep) no->ep = true;
    else break;
    *c = 0;
    c = strrchr(base, ':');
  }
  if (!c) return true;
  if (strncmp(c, ":tp", 3) != 0) return false;
  char *end;
  long v = strtol(c + 3, &end, 10);
  if (end == c + 3 || *end || v < 1 || v > 4096) return false;
  no->tp = (int)v;
  *c = 0;
  return true;
}

int vpaths_name_tp(const char *name) {
  char base[128];
  name_opts no;
  return parse_name(name, base, sizeof base, &no, NULL, 0) ? no.tp : 0;
}

bool vpaths_name_dcp(const char *name) {
  char base[128];
  name_opts no;
  return parse_name(name, base, sizeof base, &no, NULL, 0) && no.dcp;
}

bool vpaths_name_ep(const char *name) {
  char base[128];
  name_opts no;
  return parse_name(name, base, sizeof base, &no, NULL, 0) && no.ep;
}

const vpath_ops *vpaths_find(const char *name) {
  char base[128];
  name_opts no;
  if (!parse_name(name, base, sizeof base, &no, NULL, 0)) return NULL;
  for (size_t i = 0; i < sizeof g_builtin / sizeof g_builtin[0]; i++)
    if (strcmp(g_builtin[i]->name, base) == 0) return g_builtin[i];
  for (int i = 0; i < g_n_loaded; i++)
    if (strcmp(g_loaded[i]->name, base) == 0) return g_loaded[i];
  return NULL;
}

vstatus vpaths_load_lib(const char *file) {
  if (g_n_loaded == MAX_LOADED) return VERR("%s: too many --path-lib libraries (max %d)", file, MAX_LOADED);
  void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
  if (!h) return VERR("%s: cannot load path library: %s", file, dlerror());
  const vpath_ops *ops = dlsym(h, "vouch_path_ops");
  if (!ops) return VERR("%s: symbol 'vouch_path_ops' not found (a path library exports const vpath_ops vouch_path_ops)", file);
  if (!ops->name || !ops->open || !ops->forward || !ops->close)
    return VERR("%s: vouch_path_ops lacks name/open/forward/close", file);
  g_loaded[g_n_loaded++] = ops;
  return V_OK;
}

/* The communicator factory for TP of path `ops`; NULL when the path has no TP support. */
static tp_group_fn tp_group_of(const vpath_ops *ops) {
  if (ops == &cpu_ref_ops) return tp_threads_group;
#ifdef VOUCH_HAVE_NCCL
  if (ops == &cuda_ref_ops || ops == &latency_ops) return comm_nccl_tp_group;
#endif
  return NULL;
}

static vpath_ops g_tp_ops[sizeof g_builtin / sizeof g_builtin[0]];

#ifdef VOUCH_HAVE_NCCL
static vpath_ops g_rank_ops[sizeof g_builtin / sizeof g_builtin[0]];
#endif

static vstatus open_tp(vpath *p, const vpath_ops *ops, const ds_model *m, const vpath_opts *o) {
#ifdef VOUCH_HAVE_NCCL
  /* started by a launcher with one process per GPU: this process is one rank */
  int rank, size, local;
  vstatus le;
  bool launched = vcomm_env_launch(&rank, &size, &local, &le);
  if (le) return le;
  if ((ops == &cuda_ref_ops || ops == &latency_ops) && launched && size > 1) {
    if (o->tp != size)
      return VERR("--tp %d but the launcher started %d processes: with one process per GPU, --tp must equal the "
                  "world size", o->tp, size);
    vcomm *c;
    VTRY(comm_nccl_from_env(&c, local));
    vpath_opts lo = *o;
    lo.device = local;
    for (size_t i = 0; i < sizeof g_builtin / sizeof g_builtin[0]; i++)
      if (g_builtin[i] == ops) {
        tp_path_make_rank_ops(&g_rank_ops[i], ops);
        vstatus s = tp_path_open_rank(&p->state, ops, c, comm_nccl_free, m, &lo);
        if (s == V_OK) p->ops = &g_rank_ops[i];
        return s;
      }
  }
#endif
  tp_group_fn group = tp_group_of(ops);
  if (!group)
    return VERR("path %s: --tp %d: this path has no tensor-parallel support (cpu-ref%s do)", ops->name, o->tp,
#ifdef VOUCH_HAVE_NCCL
                ", cuda-ref and latency"
#else
                ""
#endif
    );
  for (size_t i = 0; i < sizeof g_builtin / sizeof g_builtin[0]; i++)
    if (g_builtin[i] == ops) {
      tp_path_make_ops(&g_tp_ops[i], ops);
      vstatus s = tp_path_open(&p->state, ops, group, m, o);
      if (s == V_OK) p->ops = &g_tp_ops[i];
      return s;
    }
  return VERR("path %s: not a built-in path", ops->name);
}

/* Paths that split the KV cache by position under vpath_opts.dcp (docs/tensor-parallel.md). */
static bool dcp_capable(const vpath_ops *ops) {
#ifdef VOUCH_HAVE_CUDA
  if (ops == &latency_ops) return true;
#endif
  return ops == &cpu_ref_ops;
}

/* Why a path has no dcp, appended to the not-supported message. */
static const char *dcp_why(const vpath_ops *ops) {
#ifdef VOUCH_HAVE_CUDA
  if (ops == &cuda_ref_ops)
    return ": its expanded per-head K/V cache is already split by head under TP, so dcp would save no memory";
#endif
  (void)ops;
  return "";
}

vstatus vpath_open(vpath *p, const char *name, const ds_model *m, const vpath_opts *o) {
  memset(p, 0, sizeof *p);
  const vpath_ops *ops = vpaths_find(name);
  if (!ops)
    return VERR("unknown path '%s' (known: %s; NAME:tpN opens TP N, NAME:tpN:dcp adds decode context parallelism, "
                "NAME:tpN:ep expert parallelism)", name, vpaths_names());
  char base[128];
  name_opts no;
  char variant[64];
  parse_name(name, base, sizeof base, &no, variant, sizeof variant);
  p->opts = *o;
  if (variant[0]) { /* NAME@VARIANT overrides --variant */
    p->opts.variant = intern_variant(variant);
    if (!p->opts.variant) return VERR("path %s: too many distinct @variants in one process (%d)", name, MAX_VARIANTS);
  }
  if (no.tp > 0) p->opts.tp = no.tp;
  if (no.dcp) p->opts.dcp = true;
  if (no.ep) p->opts.ep = true;
  vstatus s;
  if (p->opts.ep && ops != &cpu_ref_ops) { /* before any rank opens */
    s = VUNSUPPORTED("expert parallelism is implemented on cpu-ref only (not %s): the GPU paths split every routed "
                     "expert along its intermediate dimension under TP", ops->name);
  } else if (p->opts.ep && p->opts.tp < 1) {
    s = VERR("ep splits the routed experts over the TP ranks: give --tp N or the name NAME:tpN:ep");
  } else if (p->opts.dcp && !dcp_capable(ops)) {
    s = VUNSUPPORTED("decode context parallelism: dcp is implemented on cpu-ref and latency only (not %s%s)", ops->name,
                     dcp_why(ops));
  } else if (p->opts.dcp && p->opts.tp < 1) {
    s = VERR("dcp splits the KV cache over the TP ranks: give --tp N or the name NAME:tpN:dcp");
  } else if (p->opts.tp > 0) {
    s = open_tp(p, ops, m, &p->opts);
  } else {
    p->ops = ops;
    s = ops->open(&p->state, m, &p->opts);
  }
  if (s != V_OK) {
    verr_prefix("path %s", name);
    p->ops = NULL;
    p->state = NULL;
  }
  return s;
}

void vpath_close(vpath *p) {
  if (p->ops && p->state) p->ops->close(p->state);
  memset(p, 0, sizeof *p);
}

vstatus vpath_estimate(const char *name, const ds_config *full, const vpath_opts *o, int sms, ds_mem_estimate *out) {
  memset(out, 0, sizeof *out);
  char base[128];
  name_opts no;
  if (!parse_name(name, base, sizeof base, &no, NULL, 0)) return VERR("path '%s': malformed name", name);
  const int tp = no.tp > 0 ? no.tp : o->tp;
  const bool ep = no.ep || o->ep;
  ds_config local = *full;
  ds_mem_opts mo = {.max_seq = o->max_seq, .max_ctx = o->max_ctx, .tp = tp, .dcp = no.dcp || o->dcp, .sms = sms};
  if (tp > 1) {
    VTRY(ds_shard_config_ep(full, tp, ep, &local));
    mo.lm_rows = ds_shard_vocab_block(full->vocab_size, tp);
  }
  if (!strcmp(base, "cpu-ref")) {
    VTRY(ds_mem_cpu_ref(&local, &mo, out));
    if (tp > 1) { /* simulated ranks in this process: the host holds every shard */
      out->weight_bytes *= tp, out->kv_bytes *= tp, out->work_bytes *= tp;
      out->host_bytes = ds_mem_total(out);
    }
    return V_OK;
  }
  if (!strcmp(base, "cuda-ref")) VTRY(ds_mem_cuda_ref(&local, &mo, out));
  else if (!strcmp(base, "latency")) VTRY(ds_mem_latency(&local, &mo, out));
  else return VUNSUPPORTED("path '%s': no memory model (built-in paths: cpu-ref, cuda-ref, latency)", name);
  out->ranks = tp > 1 ? tp : 1;
  return V_OK;
}
