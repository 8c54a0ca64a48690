/* The dry run's cost model (suites/engine/estimate.h): what the suites' estimate functions price
 * their options with. How each suite opens its paths is in its own estimate function, beside its
 * options (vsuite.estimate). */
#include "suites/engine/estimate.h"

#include <assert.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "suites/engine/estimate_cost.h"
#include "suites/paths/paths.h"
#include "suites/paths/spec.h"

#define GIB 1073741824.0

void vest_clear(dry_step *out) {
  memset(out, 0, sizeof *out);
  out->fits = true;
}

/* ---- the time model (constants in suites/engine/estimate_cost.h) ---- */

/* A path that reads host weights runs on the host (vpath_caps.host_weights); unknown names count as GPU paths. */
bool vest_on_gpu(const char *name) {
  vpath_spec sp;
  return !(vpath_spec_lookup(name, &sp) == V_OK && sp.caps.host_weights);
}
/* The built-in facts of the path `name` (any TP / @variant spelling), from the registry's table of built-in
 * paths, which lists them also where this build lacks the path (a dry run plans for a GPU the build may
 * lack, --gpu-mem); NULL for a malformed name or a path that is no built-in. */
static const vpath_builtin *builtin_of(const char *name) {
  vpath_spec s;
  return vpath_spec_split(name, &s) ? vpaths_builtin(s.base) : NULL;
}
/* The KV layout for the byte count. */
static bool path_latent(const char *name) {
  const vpath_builtin *b = builtin_of(name);
  return b && b->kv_latent;
}
/* cuda-ref's op variants cost less than latency's: fewer per op. */
bool vest_cuda_ref(const char *name) {
  const vpath_builtin *b = builtin_of(name);
  return b && b->reference_kernels;
}

static int threads(const vest *X) { return X->env->cpu_threads > 0 ? X->env->cpu_threads : 1; }

/* FLOPs of one token row through the model at `ctx` cached keys. */
static double token_flops(const ds_config *c, double ctx) {
  const double active = ds_decode_bytes(c, 1, 0, c->num_experts_per_tok, true) / 2.0;
  const double attn = 2.0 * c->num_hidden_layers * c->num_attention_heads * (c->qk_head_dim + c->v_head_dim);
  return 2.0 * active + attn * ctx;
}

double vest_step_s(const vest *X, const char *path, int rows, double ctx) {
  const ds_config *c = X->cfg;
  if (!vest_on_gpu(path))
    return rows * token_flops(c, ctx) / (COST_CPU_FLOPS_CORE * threads(X)) + c->num_hidden_layers * COST_CPU_LAYER_S;
  const bool lat = path_latent(path);
  const double bytes = ds_decode_bytes(c, rows, (int)ctx, -1, lat);
  return bytes / (COST_GPU_BW * (lat ? COST_LAT_EFF : COST_REF_EFF)) +
         c->num_hidden_layers * (lat ? COST_LAT_LAYER_S : COST_REF_LAYER_S);
}

double vest_prefill_s(const vest *X, const char *path, double tokens, double ctx) {
  const ds_config *c = X->cfg;
  const double f = tokens * token_flops(c, ctx / 2);
  if (!vest_on_gpu(path)) return f / (COST_CPU_FLOPS_CORE * threads(X));
  /* on the GPU the weight GEMMs of many rows and the attention over long prompts run at rates far apart */
  const double attn = tokens * (token_flops(c, ctx / 2) - token_flops(c, 0));
  return (f - attn) / COST_GPU_PREFILL_GEMM_FLOPS + attn / COST_GPU_PREFILL_FLOPS;
}

double vest_open_s(const vest *X, const char *path, double wbytes) {
  if (!vest_on_gpu(path)) return wbytes / (COST_CPU_OPEN_BPS * threads(X));
  return COST_GPU_OPEN_S + wbytes / COST_GPU_SYNTH_BPS;
}

double vest_fill_s(const vest *X, const char *path, double seqs, double ctx) {
  if (ctx <= 0) return 0;
  const ds_config *c = X->cfg;
  const double f = seqs * ctx * 2.0 * c->num_hidden_layers * c->num_attention_heads *
                   (c->qk_nope_head_dim + c->v_head_dim) * c->kv_lora_rank;
  if (!vest_on_gpu(path)) return f / (COST_CPU_FILL_FLOPS_CORE * threads(X));
  return f / COST_GPU_FILL_FLOPS;
}

/* ---- opening paths ---- */

long vest_list_max(const long *v, int n) {
  assert(n >= 1);
  long m = v[0];
  for (int i = 1; i < n; i++) m = v[i] > m ? v[i] : m;
  return m;
}

int vest_rows(double r) { return r > INT_MAX ? INT_MAX : (int)r; }

/* What paths names[n] opened together with (max_seq, max_ctx) take. */
typedef struct {
  double gpu, host;        /* bytes per GPU, bytes of host memory */
  int ranks;               /* GPUs the widest of them spans */
  bool uses_gpu;           /* one of them is on the GPU */
  double wbytes[VEST_MAX_PATHS]; /* [n] weight bytes of each (0: no memory model) */
  char detail[400];        /* the GPU paths' parts, for the message */
  char est_err[300];       /* the first estimate that failed with an error (a TP degree the model cannot split) */
} set_mem;

static void measure_set(const vest *X, const char *const *names, int n, int max_seq, int max_ctx, set_mem *m) {
  assert(n <= VEST_MAX_PATHS);
  memset(m, 0, sizeof *m);
  m->ranks = 1;
  for (int i = 0; i < n; i++) {
    vpath_opts po = {.max_seq = max_seq, .max_ctx = max_ctx};
    ds_mem_estimate e;
    vpath_spec sp; /* the name's syntax, and its declaration when this build has the path */
    vstatus s = vpath_spec_lookup(names[i], &sp);
    if (s == V_OK) s = vpath_estimate(&sp, X->cfg, &po, X->env->sms, X->rows, X->logit_rows, &e);
    if (s != V_OK) { /* no memory model (a --path-lib path) or a TP degree the model cannot split */
      if (s == V_ERR && !m->est_err[0]) snprintf(m->est_err, sizeof m->est_err, "%s", verr_msg());
      continue;
    }
    m->wbytes[i] = e.weight_bytes;
    if (e.on_gpu) {
      m->uses_gpu = true;
      m->gpu += ds_mem_total(&e);
      m->ranks = e.ranks > m->ranks ? e.ranks : m->ranks;
      size_t k = strlen(m->detail);
      snprintf(m->detail + k, sizeof m->detail - k, "%s%s %.2f GiB (%.2f weights + %.2f KV + %.2f work)", k ? " + " : "",
               names[i], ds_mem_total(&e) / GIB, e.weight_bytes / GIB, e.kv_bytes / GIB, e.work_bytes / GIB);
    }
    m->host += e.host_bytes;
  }
}

/* True when m fits this machine (GPU memory, GPU count, host memory); else false with why. */
static bool set_fits(const dry_env *env, const set_mem *m, int n, int max_seq, int max_ctx, char *why, size_t cap) {
  if (env->gpu && m->gpu > 0 && env->gpu_free > 0 && m->gpu > env->gpu_free)
    snprintf(why, cap, "%s at max_seq %d x max_ctx %d needs %.2f GiB per GPU: %.300s; %.120s has %.2f GiB free of %.2f",
             n > 1 ? "paths open together" : "path", max_seq, max_ctx, m->gpu / GIB, m->detail, env->device,
             env->gpu_free / GIB, env->gpu_total / GIB);
  else if (env->gpu && m->gpu > 0 && m->ranks > env->gpus)
    snprintf(why, cap, "needs %d GPUs (TP %d), %d available", m->ranks, m->ranks, env->gpus);
  else if (env->host_total > 0 && m->host > env->host_total)
    snprintf(why, cap, "host paths at max_seq %d x max_ctx %d need %.2f GiB of host memory, this machine has %.2f GiB",
             max_seq, max_ctx, m->host / GIB, env->host_total / GIB);
  else
    return true;
  return false;
}

bool vest_open_set(vest *X, const char *const *names, int n, int max_seq, int max_ctx, bool record_failure) {
  dry_step *o = X->out;
  set_mem m;
  measure_set(X, names, n, max_seq, max_ctx, &m);
  memcpy(X->wbytes, m.wbytes, (size_t)n * sizeof *m.wbytes);
  if (m.est_err[0] && record_failure) {
    o->fits = false;
    snprintf(o->why, sizeof o->why, "%s", m.est_err);
  }
  o->uses_gpu |= m.uses_gpu;
  const bool peak = m.gpu > o->gpu_bytes || (m.gpu == o->gpu_bytes && m.host > o->host_bytes);
  if (peak) snprintf(o->peak_at, sizeof o->peak_at, "max_seq %d x max_ctx %d", max_seq, max_ctx);
  if (m.gpu > o->gpu_bytes) o->gpu_bytes = m.gpu;
  if (m.host > o->host_bytes) o->host_bytes = m.host;
  if (m.ranks > o->gpus_needed) o->gpus_needed = m.ranks;
  char why[600] = "";
  const bool fits = set_fits(X->env, &m, n, max_seq, max_ctx, why, sizeof why);
  if (!fits && record_failure && o->fits) {
    o->fits = false;
    snprintf(o->why, sizeof o->why, "%s", why);
  }
  return fits;
}

bool vest_fits_alone(const vest *X, const char *name, int max_seq, int max_ctx) {
  const char *one[1] = {name};
  set_mem m;
  char why[600];
  measure_set(X, one, 1, max_seq, max_ctx, &m);
  return set_fits(X->env, &m, 1, max_seq, max_ctx, why, sizeof why);
}

void vest_name_paths(vest *X, const char *const *names, int n, bool together) {
  dry_step *o = X->out;
  o->paths[0] = 0;
  for (int i = 0; i < n; i++) {
    size_t k = strlen(o->paths);
    snprintf(o->paths + k, sizeof o->paths - k, "%s%s", i ? (together ? "+" : ", ") : "", names[i]);
  }
}
