/* Per-step memory and time estimates of a plan (runner/plan/dryrun.h).
 *
 * Each suite is read with its own defaults and opens paths the way it does:
 *   generate   one path, max_seq = batch, max_ctx = prompt + batch - 1 + n + 1
 *   diverge    per batch x context all paths at once, max_seq = batch, max_ctx = context + tokens
 *   eval mrcr  one path at a time, max_seq = batch, max_ctx = the largest bin
 *   eval chain one path at a time, max_seq = batch, max_ctx = keys + 2 + the largest hop count
 *   features   reference and path at once, max_seq = 2, max_ctx = --full-ctx (max_position_embeddings)
 *   sweep      per context all paths at once, max_seq = the largest batch, max_ctx = context + span;
 *              what does not fit is retried with smaller batches and one path at a time
 *   kernels    no path (op-sized buffers only) */
#include "runner/plan/dryrun.h"

#include <assert.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/construct.h"
#include "model/model.h"
#include "model/spec_config.h"
#include "suites/engine/cli.h"
#include "runner/plan/dryrun_cost.h"
#include "suites/paths/paths.h"
#include "suites/sweep/sweep.h"

#define GIB 1073741824.0
#define MAX_PATHS 16

/* The value of option `name` in argv (its last occurrence, "--x V" or "--x=V"); def when absent. */
static const char *opt(int argc, char **argv, const char *name, const char *def) {
  const char *v = def, *got;
  vstatus err = V_OK;
  for (int i = 1; i < argc; i++)
    if (cli_opt(argc, argv, &i, name, &got, &err) && got) v = got;
  return v;
}

static vstatus opt_long(int argc, char **argv, const char *name, long def, long *out) {
  const char *v = opt(argc, argv, name, NULL);
  *out = def;
  return v ? cli_size(name, v, out) : V_OK;
}

static bool has_flag(int argc, char **argv, const char *name) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], name)) return true;
  return false;
}

static long list_max(const long *v, int n) {
  long m = v[0];
  for (int i = 1; i < n; i++) m = v[i] > m ? v[i] : m;
  return m;
}

/* Splits "a,b,c" into at most MAX_PATHS names in buf. */
static vstatus split_paths(const char *s, char *buf, size_t cap, char **names, int *n) {
  snprintf(buf, cap, "%s", s);
  *n = 0;
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (*n == MAX_PATHS) return VERR("--paths: more than %d paths", MAX_PATHS);
    names[(*n)++] = t;
  }
  if (*n == 0) return VERR("--paths: no path named");
  return V_OK;
}

/* ---- the time model (constants in runner/plan/dryrun_cost.h) ---- */

/* A path that reads host weights runs on the host (vpath_caps.host_weights); unknown names count as GPU paths. */
static bool path_on_gpu(const char *name) { return !vpaths_host_weights(name); }
/* The KV layout for the byte count: by name, since a dry run plans for a GPU the build may lack (--gpu-mem), where
 * the latency path is not registered to declare it. */
static bool path_latent(const char *name) { return !strncmp(name, "latency", 7); }
/* cuda-ref's op variants (any TP / @variant spelling) cost less than latency's: fewer per op. By name, as above. */
static bool path_cuda_ref(const char *name) { return !strncmp(name, "cuda-ref", 8); }

/* FLOPs of one token row through the model at `ctx` cached keys. */
static double token_flops(const ds_config *c, double ctx) {
  const double active = ds_decode_bytes(c, 1, 0, c->num_experts_per_tok, true) / 2.0;
  const double attn = 2.0 * c->num_hidden_layers * c->num_attention_heads * (c->qk_head_dim + c->v_head_dim);
  return 2.0 * active + attn * ctx;
}

/* Seconds of one decode step of `rows` token rows (batch x tokens per sequence) at context ctx. */
static double step_s(const char *path, const ds_config *c, const dry_env *env, int rows, double ctx) {
  if (!path_on_gpu(path)) {
    const int th = env->cpu_threads > 0 ? env->cpu_threads : 1;
    return rows * token_flops(c, ctx) / (COST_CPU_FLOPS_CORE * th) + c->num_hidden_layers * COST_CPU_LAYER_S;
  }
  const bool lat = path_latent(path);
  const double bytes = ds_decode_bytes(c, rows, (int)ctx, -1, lat);
  return bytes / (COST_GPU_BW * (lat ? COST_LAT_EFF : COST_REF_EFF)) +
         c->num_hidden_layers * (lat ? COST_LAT_LAYER_S : COST_REF_LAYER_S);
}

/* Seconds to run `tokens` prompt rows that end at context ctx (the mean key count is ctx/2). */
static double prefill_s(const char *path, const ds_config *c, const dry_env *env, double tokens, double ctx) {
  const double f = tokens * token_flops(c, ctx / 2);
  if (!path_on_gpu(path)) return f / (COST_CPU_FLOPS_CORE * (env->cpu_threads > 0 ? env->cpu_threads : 1));
  /* on the GPU the weight GEMMs of many rows and the attention over long prompts run at rates far apart */
  const double attn = tokens * (token_flops(c, ctx / 2) - token_flops(c, 0));
  return (f - attn) / COST_GPU_PREFILL_GEMM_FLOPS + attn / COST_GPU_PREFILL_FLOPS;
}

/* Seconds to open a path whose weights are `wbytes`. */
static double open_s(const char *path, const dry_env *env, double wbytes) {
  if (!path_on_gpu(path)) return wbytes / (COST_CPU_OPEN_BPS * (env->cpu_threads > 0 ? env->cpu_threads : 1));
  return COST_GPU_OPEN_S + wbytes / COST_GPU_SYNTH_BPS;
}

/* Seconds to fill `seqs` slots with `ctx` positions (fill_cache: the cache-write ops per position). */
static double fill_s(const char *path, const ds_config *c, const dry_env *env, double seqs, double ctx) {
  if (ctx <= 0) return 0;
  const double f = seqs * ctx * 2.0 * c->num_hidden_layers * c->num_attention_heads *
                   (c->qk_nope_head_dim + c->v_head_dim) * c->kv_lora_rank;
  if (!path_on_gpu(path)) return f / (COST_CPU_FILL_FLOPS_CORE * (env->cpu_threads > 0 ? env->cpu_threads : 1));
  return f / COST_GPU_FILL_FLOPS;
}

/* ---- opening paths ---- */

typedef struct {
  const ds_config *cfg;
  const dry_env *env;
  dry_step *out;
  double wbytes[MAX_PATHS]; /* weight bytes of each path at its last open, for open_s */
  int rows, logit_rows;     /* token rows and logit rows of the largest forward at the point being
                             * estimated (vpath_estimate's; 0: none beyond what open allocates) */
} ctx_t;

/* A row count for ds_mem_opts, saturated (an estimate past INT_MAX rows refuses either way). */
static int rows_int(double r) { return r > INT_MAX ? INT_MAX : (int)r; }

/* What paths names[n] opened together with (max_seq, max_ctx) take. */
typedef struct {
  double gpu, host;        /* bytes per GPU, bytes of host memory */
  int ranks;               /* GPUs the widest of them spans */
  bool uses_gpu;           /* one of them is on the GPU */
  double wbytes[MAX_PATHS]; /* [n] weight bytes of each (0: no memory model) */
  char detail[400];        /* the GPU paths' parts, for the message */
  char est_err[300];       /* the first estimate that failed with an error (a TP degree the model cannot split) */
} set_mem;

static void measure_set(const ctx_t *X, char **names, int n, int max_seq, int max_ctx, set_mem *m) {
  assert(n <= MAX_PATHS);
  memset(m, 0, sizeof *m);
  m->ranks = 1;
  for (int i = 0; i < n; i++) {
    vpath_opts po = {.max_seq = max_seq, .max_ctx = max_ctx};
    ds_mem_estimate e;
    vstatus s = vpath_estimate(names[i], X->cfg, &po, X->env->sms, X->rows, X->logit_rows, &e);
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

/* Paths names[n] opened together with (max_seq, max_ctx): adds their memory to the step's peak;
 * false (with why, when record_failure) when they do not fit. */
static bool open_set(ctx_t *X, char **names, int n, int max_seq, int max_ctx, bool record_failure) {
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

/* True when path `name` alone at (max_seq, max_ctx) fits this machine by open_set's rules: the sweep
 * reports a point that does not "does not fit" and spends no steps on it. The step's figures are
 * not touched. */
static bool fits_alone(const ctx_t *X, char *name, int max_seq, int max_ctx) {
  char *one[1] = {name};
  set_mem m;
  char why[600];
  measure_set(X, one, 1, max_seq, max_ctx, &m);
  return set_fits(X->env, &m, 1, max_seq, max_ctx, why, sizeof why);
}

static void name_paths(dry_step *o, char **names, int n, bool together) {
  o->paths[0] = 0;
  for (int i = 0; i < n; i++) {
    size_t k = strlen(o->paths);
    snprintf(o->paths + k, sizeof o->paths - k, "%s%s", i ? (together ? "+" : ", ") : "", names[i]);
  }
}

/* ---- the suites ---- */

static vstatus est_generate(int argc, char **argv, ctx_t *X) {
  char *path = (char *)opt(argc, argv, "--path", "cpu-ref");
  long *prompt = NULL, B, n_new;
  int np = 0;
  VTRY(cli_size_list("--tokens", opt(argc, argv, "--tokens", "1,2,3,4"), &prompt, &np));
  free(prompt);
  VTRY(opt_long(argc, argv, "--batch", 1, &B));
  VTRY(opt_long(argc, argv, "-n", 32, &n_new));
  const int max_ctx = np + (int)B - 1 + (int)n_new + 1;
  open_set(X, &path, 1, (int)B, max_ctx, true);
  name_paths(X->out, &path, 1, true);
  X->out->seconds = open_s(path, X->env, X->wbytes[0]) + prefill_s(path, X->cfg, X->env, (double)B * np, np) +
                    n_new * step_s(path, X->cfg, X->env, (int)B, max_ctx / 2.0);
  return V_OK;
}

static vstatus est_diverge(int argc, char **argv, ctx_t *X) {
  char pbuf[1024], *names[MAX_PATHS];
  int n, nb, nc;
  long *bs, *cs, T;
  const char *ps = opt(argc, argv, "--paths", NULL);
  if (!ps) return VERR("diverge: --paths is required");
  VTRY(split_paths(ps, pbuf, sizeof pbuf, names, &n));
  VTRY(opt_long(argc, argv, "--tokens", 32, &T));
  long K = 0; /* --spec K: K+1 tokens per sequence per step */
  VTRY(opt_long(argc, argv, "--spec", 0, &K));
  T *= K + 1;
  VTRY(cli_size_list("--batch", opt(argc, argv, "--batch", "1"), &bs, &nb));
  vstatus s = cli_size_list("--context", opt(argc, argv, "--context", "0"), &cs, &nc);
  if (s) { free(bs); return s; }
  name_paths(X->out, names, n, true);
  for (int bi = 0; bi < nb; bi++)
    for (int ci = 0; ci < nc; ci++) {
      open_set(X, names, n, (int)bs[bi], (int)(cs[ci] + T), true);
      for (int p = 0; p < n; p++)
        X->out->seconds += open_s(names[p], X->env, X->wbytes[p]) + fill_s(names[p], X->cfg, X->env, bs[bi], cs[ci]) +
                           T * step_s(names[p], X->cfg, X->env, (int)bs[bi], cs[ci] + T / 2.0);
    }
  free(bs);
  free(cs);
  return V_OK;
}

static vstatus est_mrcr(int argc, char **argv, ctx_t *X) {
  char pbuf[1024], *names[MAX_PATHS];
  int n, nbins, nneed;
  long *bins, *need, samples, B;
  VTRY(split_paths(opt(argc, argv, "--paths", "cpu-ref"), pbuf, sizeof pbuf, names, &n));
  VTRY(opt_long(argc, argv, "--samples", 4, &samples));
  VTRY(opt_long(argc, argv, "--batch", 1, &B));
  long chunk; /* suites/evals/mrcr/mrcr.c: each forward is min(batch, samples) prompts x min(chunk, bin) tokens */
  VTRY(opt_long(argc, argv, "--chunk", 2048, &chunk));
  VTRY(cli_size_list("--bins", opt(argc, argv, "--bins", "1k,4k"), &bins, &nbins));
  vstatus s = cli_size_list("--needles", opt(argc, argv, "--needles", "2,4,8"), &need, &nneed);
  if (s) { free(bins); return s; }
  name_paths(X->out, names, n, false);
  const long maxbin = list_max(bins, nbins);
  X->rows = rows_int((B < samples ? B : samples) * (chunk < maxbin ? chunk : maxbin));
  for (int p = 0; p < n; p++) {
    open_set(X, &names[p], 1, (int)B, (int)maxbin, true);
    X->out->seconds += open_s(names[p], X->env, X->wbytes[0]);
    for (int b = 0; b < nbins; b++)
      X->out->seconds += (double)nneed * samples * prefill_s(names[p], X->cfg, X->env, bins[b], bins[b]);
  }
  free(bins);
  free(need);
  return V_OK;
}

static vstatus est_chain(int argc, char **argv, ctx_t *X) {
  char pbuf[1024], *names[MAX_PATHS];
  int n, nh;
  long *hops, samples, B;
  VTRY(split_paths(opt(argc, argv, "--paths", "cpu-ref"), pbuf, sizeof pbuf, names, &n));
  VTRY(opt_long(argc, argv, "--samples", 8, &samples));
  VTRY(opt_long(argc, argv, "--batch", 1, &B));
  VTRY(cli_size_list("--hops", opt(argc, argv, "--hops", "64,256"), &hops, &nh));
  construct_opts co;
  const long keys = construct_preset_opts("recall-chain", &co) == V_OK ? co.n_keys : 32;
  const long H = list_max(hops, nh), need = keys + 2 + H;
  free(hops);
  name_paths(X->out, names, n, false);
  const double runs = ceil((double)samples / B);
  for (int p = 0; p < n; p++) {
    open_set(X, &names[p], 1, (int)B, (int)need, true);
    X->out->seconds += open_s(names[p], X->env, X->wbytes[0]) +
                       runs * (prefill_s(names[p], X->cfg, X->env, (double)B * (keys + 2), keys + 2) +
                               H * step_s(names[p], X->cfg, X->env, (int)B, need / 2.0));
  }
  return V_OK;
}

static vstatus est_features(int argc, char **argv, ctx_t *X) {
  char *names[2] = {(char *)opt(argc, argv, "--ref", "cpu-ref"), (char *)opt(argc, argv, "--path", NULL)};
  if (!names[1]) return VERR("features: --path is required");
  long full;
  VTRY(opt_long(argc, argv, "--full-ctx", 0, &full));
  if (full <= 0) full = X->cfg->max_position_embeddings;
  open_set(X, names, 2, 2, (int)full, true);
  for (int p = 0; p < 2; p++) {
    X->out->seconds += open_s(names[p], X->env, X->wbytes[p]) + fill_s(names[p], X->cfg, X->env, 1, (double)full);
    X->out->seconds += path_on_gpu(names[p]) ? COST_FEAT_GPU_S_PER_KPOS / 2 * full / 1024.0
                                             : COST_FEAT_STEPS * step_s(names[p], X->cfg, X->env, 2, (double)full);
  }
  /* --floor: a third path, open beside the two, on the short-context rows only (features.c: max_ctx 64) */
  char *fl = (char *)opt(argc, argv, "--floor", NULL);
  if (fl) {
    const double g0 = X->out->gpu_bytes, h0 = X->out->host_bytes;
    X->out->gpu_bytes = X->out->host_bytes = 0;
    open_set(X, &fl, 1, 2, 64, true);
    X->out->gpu_bytes += g0;
    X->out->host_bytes += h0;
    X->out->seconds += open_s(fl, X->env, X->wbytes[0]) + COST_FEAT_STEPS * step_s(fl, X->cfg, X->env, 2, 32);
  }
  char *all[3] = {names[0], names[1], fl};
  name_paths(X->out, all, fl ? 3 : 2, true);
  return V_OK;
}

/* The largest forward of a sweep point at batch b and context ctx (suites/sweep/sweep.c): a prefill chunk
 * of b x min(ctx, 8192 / b) rows (at least b) with one logit row each, and a decode step of
 * b x (K+1) rows, every position's logits under --spec. */
static void sweep_rows(ctx_t *X, bool prefill, int spec_k, long b, long ctx) {
  long chunk = sweep_prefill_chunk(b);
  if (chunk > ctx) chunk = ctx > 0 ? ctx : 1;
  const double pre = prefill ? (double)b * chunk : 0, dec = (double)b * (spec_k + 1);
  X->rows = rows_int(pre > dec ? pre : dec);
  X->logit_rows = rows_int(spec_k > 0 ? dec : b);
}

static vstatus est_sweep(int argc, char **argv, ctx_t *X) {
  char pbuf[1024], *names[MAX_PATHS];
  int n, nb, nc;
  long *bs, *cs, steps, warmup, repeat;
  VTRY(split_paths(opt(argc, argv, "--paths", "cpu-ref"), pbuf, sizeof pbuf, names, &n));
  VTRY(opt_long(argc, argv, "--steps", 20, &steps));
  VTRY(opt_long(argc, argv, "--warmup", 3, &warmup));
  VTRY(opt_long(argc, argv, "--repeat", 1, &repeat));
  int spec_k = 0, spec_al = 1;
  const char *spec = opt(argc, argv, "--spec", NULL);
  if (spec && sscanf(spec, "K=%d,AL=%d", &spec_k, &spec_al) != 2)
    return VERR("sweep: --spec '%s': expected K=k,AL=a", spec);
  const bool prefill = !strcmp(opt(argc, argv, "--workload", "decode"), "prefill+decode");
  VTRY(cli_size_list("--batch", opt(argc, argv, "--batch", "1"), &bs, &nb));
  vstatus s = cli_size_list("--context", opt(argc, argv, "--context", "1k"), &cs, &nc);
  if (s) { free(bs); return s; }
  const int span = (int)((warmup + steps - 1) * spec_al + spec_k + 1), maxpos = X->cfg->max_position_embeddings;
  X->out->degrades = true;
  bool any_cpu = false, any_gpu = false;
  for (int p = 0; p < n; p++) {
    if (path_on_gpu(names[p])) any_gpu = true;
    else any_cpu = true;
  }
  X->out->seconds = (any_cpu ? COST_SWEEP_MEMBW_S : 0) + (any_gpu ? COST_SWEEP_GPU_MEMBW_S : 0);
  name_paths(X->out, names, n, true);
  const long bmax = list_max(bs, nb);
  long bmin = bs[0];
  for (int i = 1; i < nb; i++) bmin = bs[i] < bmin ? bs[i] : bmin;
  for (int ci = 0; ci < nc; ci++) {
    const int max_ctx = cs[ci] + span <= maxpos ? (int)cs[ci] + span : maxpos;
    sweep_rows(X, prefill, spec_k, bmax, cs[ci]);
    if (!open_set(X, names, n, (int)bmax, max_ctx, false)) {
      /* the sweep retries smaller batches, then each path alone: refused only when nothing fits */
      bool any = false;
      sweep_rows(X, prefill, spec_k, bmin, cs[ci]);
      for (int p = 0; p < n; p++) any |= open_set(X, &names[p], 1, (int)bmin, max_ctx, false);
      if (!any) open_set(X, names, 1, (int)bmin, max_ctx, true);
    }
    for (int p = 0; p < n; p++) {
      X->out->seconds += open_s(names[p], X->env, X->wbytes[p]);
      for (int bi = 0; bi < nb; bi++) {
        sweep_rows(X, prefill, spec_k, bs[bi], cs[ci]);
        if (!fits_alone(X, names[p], (int)bs[bi], max_ctx)) continue; /* not run: does not fit */
        const int rows = (int)bs[bi] * (spec_k + 1);
        X->out->seconds += repeat * ((warmup + steps) * step_s(names[p], X->cfg, X->env, rows, cs[ci] + span / 2.0) +
                                     (prefill ? prefill_s(names[p], X->cfg, X->env, (double)bs[bi] * cs[ci], cs[ci])
                                              : fill_s(names[p], X->cfg, X->env, bs[bi], cs[ci])));
      }
    }
  }
  free(bs);
  free(cs);
  return V_OK;
}

static vstatus est_kernels(int argc, char **argv, ctx_t *X) {
  long seeds;
  VTRY(opt_long(argc, argv, "--seeds", 1, &seeds));
  const char *path = opt(argc, argv, "--path", NULL), *preset = opt(argc, argv, "--preset", NULL);
  const bool gpu = X->env->gpu && (!path || path_on_gpu(path));
  snprintf(X->out->paths, sizeof X->out->paths, "(op variants of %s)", path ? path : gpu ? "every path" : "cpu-ref");
  X->out->uses_gpu = gpu;
  double t = !gpu ? COST_KERNELS_CPU_S : path && path_cuda_ref(path) ? COST_KERNELS_CUDAREF_GPU_S : COST_KERNELS_GPU_S;
  if (has_flag(argc, argv, "--full")) t *= COST_KERNELS_FULL;
  if (preset && !strcmp(preset, "all")) t *= COST_KERNELS_ALL;
  else if (preset && !strcmp(preset, "tiny")) t = gpu ? COST_KERNELS_TINY_GPU_S : COST_KERNELS_TINY_CPU_S;
  if (!path && gpu) t *= COST_KERNELS_EVERY_PATH;
  X->out->seconds = t * (seeds > 0 ? seeds : 1);
  snprintf(X->out->peak_at, sizeof X->out->peak_at, "op-sized buffers");
  return V_OK;
}

vstatus dry_estimate(int argc, char **argv, const dry_env *env, dry_step *out) {
  memset(out, 0, sizeof *out);
  out->fits = true;
  const char *suite = argv[0];
  bool eval = !strcmp(suite, "eval");
  if (eval && argc < 2) return VERR("eval: name the eval (mrcr or chain)");
  const char *which = eval ? argv[1] : suite;
  if (eval) argc--, argv++; /* the eval's own options follow its name */
  if (!strcmp(which, "kernels")) {
    ctx_t X = {.env = env, .out = out};
    return est_kernels(argc, argv, &X);
  }
  const char *def_model = !strcmp(which, "mrcr") ? "synth:recall-mrcr" : !strcmp(which, "chain") ? "synth:recall-chain"
                                                                                                   : "synth:tiny";
  long layers;
  VTRY(opt_long(argc, argv, "--layers", 0, &layers));
  ds_config cfg;
  const char *model = opt(argc, argv, "--model", def_model);
  if (ds_spec_config(model, (int)layers, &cfg)) {
    verr_prefix("%s: --model %s", which, model);
    return V_ERR;
  }
  ctx_t X = {.cfg = &cfg, .env = env, .out = out};
  vstatus s;
  if (!strcmp(which, "generate")) s = est_generate(argc, argv, &X);
  else if (!strcmp(which, "diverge")) s = est_diverge(argc, argv, &X);
  else if (!strcmp(which, "mrcr")) s = est_mrcr(argc, argv, &X);
  else if (!strcmp(which, "chain")) s = est_chain(argc, argv, &X);
  else if (!strcmp(which, "features")) s = est_features(argc, argv, &X);
  else if (!strcmp(which, "sweep")) s = est_sweep(argc, argv, &X);
  else return VUNSUPPORTED("%s: no estimate for this suite", which);
  return s;
}
