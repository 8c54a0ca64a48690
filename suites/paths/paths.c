#include "suites/paths/paths.h"
#include "suites/paths/spec.h"

#include <assert.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>

#include "suites/paths/plugin.h"
#include "suites/paths/ran.h"
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
static char *g_lib_file[MAX_LOADED]; /* the --path-lib file of g_loaded[i] as given; NULL: registered in code */

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

const vpath_ops *vpaths_find(const char *name) {
  for (size_t i = 0; i < sizeof g_builtin / sizeof g_builtin[0]; i++)
    if (strcmp(g_builtin[i]->name, name) == 0) return g_builtin[i];
  for (int i = 0; i < g_n_loaded; i++)
    if (strcmp(g_loaded[i]->name, name) == 0) return g_loaded[i];
  return NULL;
}

/* True when the byte behind a declared bool is 0 or 1 (a library's struct may hold anything). */
static bool is_bool(const bool *b) {
  unsigned char c;
  memcpy(&c, b, 1);
  return c <= 1;
}

vstatus vpaths_register(const vpath_ops *ops, const char *origin) {
  assert(ops && origin);
  const char *n = ops->name;
  if (!n || !n[0] || strlen(n) >= 64 || strpbrk(n, ":@, \t\n"))
    return VERR("%s: vouch_path_ops.name must be 1-63 characters without ':', '@', ',' or blanks", origin);
  if (!ops->open || !ops->forward || !ops->close)
    return VERR("%s: vouch_path_ops.%s is NULL (open, forward and close are required)", origin,
                !ops->open ? "open" : !ops->forward ? "forward" : "close");
  if (vpaths_find(n)) return VERR("%s: vouch_path_ops.name '%s' is already a path (known: %s)", origin, n, vpaths_names());
  const vpath_caps *c = &ops->caps;
  const char *bad_bool = !is_bool(&ops->latent_kv)     ? "latent_kv"
                         : !is_bool(&c->host_weights) ? "caps.host_weights"
                         : !is_bool(&c->dcp)          ? "caps.dcp"
                         : !is_bool(&c->ep)           ? "caps.ep"
                                                      : NULL;
  if (bad_bool) return VERR("%s: vouch_path_ops.%s is not a bool (0 or 1)", origin, bad_bool);
  if ((unsigned)c->tp >= VPATH_TP_KINDS)
    return VERR("%s: vouch_path_ops.caps.tp = %d is not a vpath_tp_kind (0 none, 1 threads, 2 nccl)", origin, (int)c->tp);
  if ((c->dcp || c->ep) && c->tp == VPATH_TP_NONE)
    return VERR("%s: vouch_path_ops.caps.%s needs caps.tp (it splits work over the TP ranks)", origin, c->dcp ? "dcp" : "ep");
  if (g_n_loaded == MAX_LOADED) return VERR("%s: too many loaded paths (max %d)", origin, MAX_LOADED);
  g_loaded[g_n_loaded++] = ops;
  return V_OK;
}

/* The path library h (opened from `file`) as vouch can use it: *ops its declaration. V_ERR naming the file
 * when its ABI stamp is missing or differs, it carries its own copy of vouch, or it has no vouch_path_ops. */
static vstatus lib_ops(void *h, const char *file, const vpath_ops **ops) {
  /* dlsym on the handle searches the library and its dependencies, not the vouch binary */
  const int *abi = dlsym(h, "vouch_path_abi");
  if (!abi)
    return VERR("%s: symbol 'vouch_path_abi' not found: write VOUCH_PLUGIN_ABI; once in the library (suites/paths/plugin.h, "
                "docs/plugins.md)", file);
  if (*abi < VOUCH_PATH_ABI_OLDEST || *abi > VOUCH_PATH_ABI)
    return VERR("%s: vouch_path_abi is %d, this vouch's is %d (it loads %d..%d): rebuild the library against this "
                "vouch's headers", file, *abi, VOUCH_PATH_ABI, VOUCH_PATH_ABI_OLDEST, VOUCH_PATH_ABI);
  if (dlsym(h, "verr_set"))
    return VERR("%s: the library carries its own copy of vouch (it defines verr_set): link it against nothing of "
                "vouch's; the vouch binary exports its functions (docs/plugins.md)", file);
  *ops = dlsym(h, "vouch_path_ops");
  if (!*ops)
    return VERR("%s: symbol 'vouch_path_ops' not found (a path library exports const vpath_ops vouch_path_ops)", file);
  if (*abi == 1) { /* its vpath_ops ends at caps: copy that far into a slot of ours, the ABI 2 members NULL */
    static vpath_ops g_abi1[MAX_LOADED];
    static int g_n_abi1;
    if (g_n_abi1 == MAX_LOADED) return VERR("%s: too many loaded paths (max %d)", file, MAX_LOADED);
    for (int i = 0; i < g_n_abi1; i++)
      if (!memcmp(&g_abi1[i], *ops, offsetof(vpath_ops, selectable))) { *ops = &g_abi1[i]; return V_OK; }
    vpath_ops *o = &g_abi1[g_n_abi1++];
    memset(o, 0, sizeof *o);
    memcpy(o, *ops, offsetof(vpath_ops, selectable));
    *ops = o;
  }
  return V_OK;
}

vstatus vpaths_load_lib(const char *file) {
  assert(file);
  if (!file[0]) return VERR("--path-lib: empty file name");
  /* dlopen searches the library path for a bare name; a path library is named by its file */
  char rel[4096];
  snprintf(rel, sizeof rel, "%s%s", strchr(file, '/') ? "" : "./", file);
  void *h = dlopen(rel, RTLD_NOW | RTLD_LOCAL);
  if (!h) return VERR("%s: cannot load path library: %s", file, dlerror());
  const vpath_ops *ops = NULL;
  vstatus s = lib_ops(h, file, &ops);
  for (int i = 0; s == V_OK && i < g_n_loaded; i++)
    if (g_loaded[i] == ops) return V_OK; /* the same library again (a second plan step's --path-lib) */
  if (s == V_OK) s = vpaths_register(ops, file);
  if (s != V_OK) {
    dlclose(h);
    return s;
  }
  g_lib_file[g_n_loaded - 1] = strdup(file);
  if (!g_lib_file[g_n_loaded - 1]) return VERR("%s: out of memory", file);
  return V_OK;
}

int vpaths_n_loaded(void) { return g_n_loaded; }

const vpath_ops *vpaths_loaded(int i, const char **file) {
  assert(i >= 0 && i < g_n_loaded);
  if (file) *file = g_lib_file[i];
  return g_loaded[i];
}

#define N_BUILTIN (sizeof g_builtin / sizeof g_builtin[0])

/* The communicator factory for TP of path `ops` (its declared caps.tp); NULL when the path has no TP
 * support or this build lacks its kind (NCCL). */
static tp_group_fn tp_group_of(const vpath_ops *ops) {
  if (ops->caps.tp == VPATH_TP_THREADS) return tp_threads_group;
#ifdef VOUCH_HAVE_NCCL
  if (ops->caps.tp == VPATH_TP_NCCL) return comm_nccl_tp_group;
#endif
  return NULL;
}

/* True when `ops` has the capability `cap` names ("tp", "dcp", "ep"); tp counts only when this build
 * has its kind. */
static bool has_cap(const vpath_ops *ops, const char *cap) {
  if (!strcmp(cap, "tp")) return tp_group_of(ops) != NULL;
  if (!strcmp(cap, "dcp")) return ops->caps.dcp;
  return ops->caps.ep;
}

/* "a", "a and b", "a, b and c": the registered paths (built-in, then loaded) with capability `cap`, for
 * refusals; "no path" when none. */
static const char *cap_names(const char *cap, char *buf, size_t n) {
  const vpath_ops *with[N_BUILTIN + MAX_LOADED];
  int k = 0;
  for (size_t i = 0; i < N_BUILTIN; i++)
    if (has_cap(g_builtin[i], cap)) with[k++] = g_builtin[i];
  for (int i = 0; i < g_n_loaded; i++)
    if (has_cap(g_loaded[i], cap)) with[k++] = g_loaded[i];
  snprintf(buf, n, "%s", k ? "" : "no path");
  for (int i = 0; i < k; i++) {
    const size_t len = strlen(buf);
    snprintf(buf + len, n - len, "%s%s", i == 0 ? "" : i == k - 1 ? " and " : ", ", with[i]->name);
  }
  return buf;
}

/* The registry slot of `ops` (built-in i, loaded N_BUILTIN + j); -1 when it is not registered. */
static int slot_of(const vpath_ops *ops) {
  for (size_t i = 0; i < N_BUILTIN; i++)
    if (g_builtin[i] == ops) return (int)i;
  for (int i = 0; i < g_n_loaded; i++)
    if (g_loaded[i] == ops) return (int)N_BUILTIN + i;
  return -1;
}

/* The TP wrappers' operations, one per registry slot (a vpath points at them). */
static vpath_ops g_tp_ops[N_BUILTIN + MAX_LOADED];

#ifdef VOUCH_HAVE_NCCL
static vpath_ops g_rank_ops[N_BUILTIN + MAX_LOADED];
#endif

static vstatus open_tp(vpath *p, const vpath_ops *ops, const ds_model *m, const vpath_opts *o) {
#ifdef VOUCH_HAVE_NCCL
  /* started by a launcher with one process per GPU: this process is one rank */
  int rank, size, local;
  vstatus le;
  bool launched = vcomm_env_launch(&rank, &size, &local, &le);
  if (le) return le;
  if (ops->caps.tp == VPATH_TP_NCCL && launched && size > 1) {
    if (o->tp != size)
      return VERR("--tp %d but the launcher started %d processes: with one process per GPU, --tp must equal the "
                  "world size", o->tp, size);
    vcomm *c;
    VTRY(comm_nccl_from_env(&c, local));
    vpath_opts lo = *o;
    lo.device = local;
    const int i = slot_of(ops);
    if (i < 0) {
      vstatus s = VERR("path %s: not a registered path", ops->name);
      comm_nccl_free(c);
      return s;
    }
    tp_path_make_rank_ops(&g_rank_ops[i], ops);
    vstatus s = tp_path_open_rank(&p->state, ops, c, comm_nccl_free, m, &lo);
    if (s == V_OK) p->ops = &g_rank_ops[i];
    return s;
  }
#endif
  tp_group_fn group = tp_group_of(ops);
  char names[256];
  if (!group)
    return VERR("path %s: --tp %d: this path has no tensor-parallel support (%s do)", ops->name, o->tp,
                cap_names("tp", names, sizeof names));
  const int i = slot_of(ops);
  if (i < 0) return VERR("path %s: not a registered path", ops->name);
  tp_path_make_ops(&g_tp_ops[i], ops);
  vstatus s = tp_path_open(&p->state, ops, group, m, o);
  if (s == V_OK) p->ops = &g_tp_ops[i];
  return s;
}

vstatus vpath_open(vpath *p, const vpath_spec *spec, const ds_model *m, const vpath_opts *o) {
  assert(spec);
  memset(p, 0, sizeof *p);
  const vpath_ops *ops = spec->ops;
  const char *name = spec->name;
  if (!ops) /* not from vpath_spec_parse: a name only (an eval's server) */
    return VERR("unknown path '%s' (known: %s)", name, vpaths_names());
  p->opts = *o;
  if (spec->variant[0]) { /* NAME@VARIANT overrides --variant */
    p->opts.variant = intern_variant(spec->variant);
    if (!p->opts.variant) return VERR("path %s: too many distinct @variants in one process (%d)", name, MAX_VARIANTS);
  }
  if (spec->tp > 0) p->opts.tp = spec->tp;
  if (spec->dcp) p->opts.dcp = true;
  if (spec->ep) p->opts.ep = true;
  /* the path records into its own tally (teed to the caller's trace), which the wrapper checks */
  void *w = ran_new(&p->opts, name);
  if (!w) return V_ERR;
  p->opts.trace = ran_tally(w);
  vstatus s;
  char names[256];
  if (p->opts.ep && !ops->caps.ep) { /* before any rank opens */
    s = VUNSUPPORTED("expert parallelism is implemented on %s only (not %s)%s", cap_names("ep", names, sizeof names),
                     ops->name, ops->caps.no_ep_why ? ops->caps.no_ep_why : "");
  } else if (p->opts.ep && p->opts.tp < 1) {
    s = VERR("ep splits the routed experts over the TP ranks: give --tp N or the name NAME:tpN:ep");
  } else if (p->opts.dcp && !ops->caps.dcp) {
    s = VUNSUPPORTED("decode context parallelism: dcp is implemented on %s only (not %s%s)",
                     cap_names("dcp", names, sizeof names), ops->name, ops->caps.no_dcp_why ? ops->caps.no_dcp_why : "");
  } else if (p->opts.dcp && p->opts.tp < 1) {
    s = VERR("dcp splits the KV cache over the TP ranks: give --tp N or the name NAME:tpN:dcp");
  } else if (p->opts.tp > 0) {
    s = open_tp(p, ops, m, &p->opts);
  } else {
    p->ops = ops;
    s = ops->open(&p->state, m, &p->opts);
  }
  p->opts.trace = o->trace;
  if (s != V_OK) {
    ran_free(w);
    verr_prefix("path %s", name);
    p->ops = NULL;
    p->state = NULL;
    return s;
  }
  return ran_wrap(w, p); /* its error names the path */
}

const vtrace *vpath_ran(const vpath *p) { return ran_of(p); }

vstatus vpath_close_keep(vpath *p, vtrace *ran) {
  vtrace_free(ran);
  const vtrace *t = ran_of(p);
  const bool ok = !t || vtrace_copy(ran, t);
  vpath_close(p);
  return ok ? V_OK : VERR("out of memory for what the path ran");
}

void vpath_ran_clear(vpath *p) {
  vtrace *t = ran_of(p);
  if (t) vtrace_clear(t);
}

void vpath_close(vpath *p) {
  if (p->ops && p->state) p->ops->close(p->state);
  memset(p, 0, sizeof *p);
}

/* The built-in paths as the dry run prices them, by registered name: the registry's declaration,
 * listed also where this build lacks the path (the dry run prices GPUs the build may not have). */
static const vpath_builtin g_builtins[] = {
    {"cpu-ref", ds_mem_cpu_ref, false, false},
    {"cuda-ref", ds_mem_cuda_ref, false, true},
    {"latency", ds_mem_latency, true, false},
};

const vpath_builtin *vpaths_builtin(const char *base) {
  assert(base);
  for (size_t i = 0; i < sizeof g_builtins / sizeof *g_builtins; i++)
    if (!strcmp(g_builtins[i].name, base)) return &g_builtins[i];
  return NULL;
}

vstatus vpath_estimate(const vpath_spec *spec, const ds_config *full, const vpath_opts *o, int sms, int rows,
                       int logit_rows, ds_mem_estimate *out) {
  assert(spec);
  memset(out, 0, sizeof *out);
  vpath_mem_fn fn = NULL;
  const int slot = spec->ops ? slot_of(spec->ops) : -1;
  const vpath_builtin *b = vpaths_builtin(spec->base);
  if (b && (!spec->ops || (slot >= 0 && slot < (int)N_BUILTIN))) fn = b->mem; /* a loaded path of a built-in's name has none */
  const int tp = spec->tp > 0 ? spec->tp : o->tp;
  const bool ep = spec->ep || o->ep;
  ds_config local = *full;
  ds_mem_opts mo = {.max_seq = o->max_seq, .max_ctx = o->max_ctx, .tp = tp, .dcp = spec->dcp || o->dcp, .sms = sms,
                    .rows = rows, .logit_rows = logit_rows};
  if (tp > 1) {
    VTRY(ds_shard_config_ep(full, tp, ep, &local));
    mo.lm_rows = ds_shard_vocab_block(full->vocab_size, tp);
  }
  if (!fn) return VUNSUPPORTED("path '%s': no memory model (built-in paths: cpu-ref, cuda-ref, latency)", spec->name);
  VTRY(fn(&local, &mo, out));
  if (spec->caps.tp == VPATH_TP_THREADS) { /* simulated ranks in this process: the host holds every shard */
    if (tp > 1) {
      out->weight_bytes *= tp, out->kv_bytes *= tp, out->work_bytes *= tp;
      out->host_bytes = ds_mem_total(out);
    }
    return V_OK;
  }
  out->ranks = tp > 1 ? tp : 1;
  return V_OK;
}
