/* The throughput sweep engine (see sweep.h). */
#include "common/clock.h"
#include "suites/sweep/sweep.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/philox.h"
#include "model/shard.h"
#include "suites/paths/paths.h"
#ifdef VOUCH_HAVE_CUDA
#include "reference/cuda/cuda_membw.h"
#endif

const char *sweep_workload_name(sweep_workload w) { return w == SWEEP_PREFILL_DECODE ? "prefill+decode" : "decode"; }

/* ---- routing (forced: suites/engine/routing.h) ---- */

double sweep_distinct_experts(const int32_t *ids, int n_moe, int T, int K, int E) {
  if (n_moe <= 0 || E <= 0) return 0;
  unsigned char *seen = calloc((size_t)E, 1);
  if (!seen) return NAN;
  double sum = 0;
  for (int j = 0; j < n_moe; j++) {
    memset(seen, 0, (size_t)E);
    int d = 0;
    for (size_t i = 0; i < (size_t)T * K; i++) {
      int32_t e = ids[(size_t)j * T * K + i];
      if (e >= 0 && e < E && !seen[e]) seen[e] = 1, d++;
    }
    sum += d;
  }
  free(seen);
  return sum / n_moe;
}

/* ---- bandwidth ---- */

static vstatus host_membw(size_t bytes, double *gbs, char *how, size_t how_n) {
  if (bytes == 0) bytes = (size_t)1 << 30;
  char *a = NULL, *b = NULL;
  for (;;) {
    a = malloc(bytes);
    b = a ? malloc(bytes) : NULL;
    if (a && b) break;
    free(a);
    a = NULL;
    if (bytes <= ((size_t)64 << 20)) return VERR("host bandwidth: cannot allocate two %zu MiB buffers", bytes >> 20);
    bytes /= 2;
  }
  memset(a, 0x5a, bytes);
  memset(b, 0, bytes);
  memcpy(b, a, bytes); /* warm-up */
  double best = INFINITY;
  for (int i = 0; i < 3; i++) {
    double t0 = vclock_now();
    memcpy(b, a, bytes);
    double t = vclock_now() - t0;
    if (t > 0 && t < best) best = t;
  }
  volatile char sink = b[bytes / 2]; /* keep the copies observable */
  (void)sink;
  free(a);
  free(b);
  *gbs = 2.0 * (double)bytes / best / 1e9;
  snprintf(how, how_n, "host memcpy of %zu MiB, read+write, best of 3", bytes >> 20);
  return V_OK;
}

/* ---- the run ---- */

typedef struct {
  const sweep_opts *o;
  const ds_model *m;
  sweep_result *res;
  int n_moe;
  vpath *open;           /* [n_paths] open paths (ops NULL when closed) */
  int pts_done, pts_total;
  double t_start;
  char membw_host_how[80], membw_gpu_how[80];
  /* step buffers sized for the largest step */
  int *seq, *ntok, *spos;
  int32_t *tok, *forced;
  float *logits;
  size_t tok_cap, forced_cap, logits_cap;
  int cur_tp;            /* the grid's TP degree being run (--tp); a path name's ":tpN" overrides it */
} runner;

static vstatus grow(void **p, size_t *cap, size_t n, size_t esz) {
  if (n <= *cap) return V_OK;
  void *q = realloc(*p, n * esz);
  if (!q) return VERR("sweep: out of memory (%zu bytes for step buffers)", n * esz);
  *p = q;
  *cap = n;
  return V_OK;
}

/* The copy bandwidth of the memory the path's steps read: host memory for a path that declares host
 * weights (vpath_caps.host_weights), else the GPU's. */
static vstatus membw_for(runner *R, const vpath_ops *ops, double *gbs, const char **how) {
  sweep_result *res = R->res;
  if (ops->caps.host_weights) {
    if (isnan(res->membw_host_gbs))
      VTRY(host_membw(R->o->membw_bytes, &res->membw_host_gbs, R->membw_host_how, sizeof R->membw_host_how));
    *gbs = res->membw_host_gbs;
    *how = R->membw_host_how;
    return V_OK;
  }
  if (isnan(res->membw_gpu_gbs)) {
#ifdef VOUCH_HAVE_CUDA
    size_t used = 0;
    vstatus s = cuda_membw(R->o->device, R->o->membw_bytes, 5, &res->membw_gpu_gbs, &used);
    if (s != V_OK) {
      res->membw_gpu_gbs = NAN;
      snprintf(R->membw_gpu_how, sizeof R->membw_gpu_how, "not measured: %.60s", verr_msg());
    } else {
      snprintf(R->membw_gpu_how, sizeof R->membw_gpu_how, "cudaMemcpy D2D of %zu MiB on GPU %d, read+write, best of 5",
               used >> 20, R->o->device);
    }
#else
    snprintf(R->membw_gpu_how, sizeof R->membw_gpu_how, "not measured: built without CUDA");
#endif
  }
  *gbs = res->membw_gpu_gbs;
  *how = R->membw_gpu_how;
  return V_OK;
}

double sweep_rank_bytes(const ds_config *c, int tp, const vpath_spec *path, int b, int ctx, double experts, bool latent_kv) {
  ds_config lc;
  if (tp <= 1 || ds_shard_config(c, tp, &lc) != V_OK) return ds_decode_bytes(c, b, ctx, experts, latent_kv);
  const bool dcp = path && path->dcp, split_in = path && path->splits_inputs;
  const int blk = ds_shard_vocab_block(c->vocab_size, tp);
  const int kv_ctx = dcp && latent_kv ? (ctx + tp - 1) / tp : ctx; /* ctx only scales the KV term */
  double bytes = ds_decode_bytes(&lc, b, kv_ctx, experts, latent_kv) - (double)(c->vocab_size - blk) * c->hidden_size * 2.0;
  if (split_in) { /* a rank reads ceil(rows / tp) of q_a|kv_a (with q LoRA) and of the router */
    const double D = c->hidden_size;
    const int na = c->kv_lora_rank + c->qk_rope_head_dim + (c->q_lora_rank > 0 ? c->q_lora_rank : 0);
    for (int l = 0; l < c->num_hidden_layers; l++) {
      if (c->q_lora_rank > 0) bytes -= (double)(na - (na + tp - 1) / tp) * D * 2.0;
      if (ds_layer_is_moe(c, l))
        bytes -= (double)(c->n_routed_experts - (c->n_routed_experts + tp - 1) / tp) * D * 2.0;
    }
  }
  return bytes;
}
static sweep_point *add_point(runner *R, int pi, int tp, int b, int ctx) {
  sweep_result *res = R->res;
  sweep_point *p = &res->p[res->n++]; /* capacity reserved for the whole grid up front */
  memset(p, 0, sizeof *p);
  snprintf(p->path, sizeof p->path, "%s", R->o->paths[pi].name);
  const int named = R->o->paths[pi].tp; /* a name's ":tpN" wins over the grid's --tp */
  p->tp = named ? named : tp;
  p->batch = b;
  p->ctx = ctx;
  p->prefill_ms = NAN;
  p->membw_gbs = NAN;
  p->roofline_pct = NAN;
  p->tok_s = NAN;
  return p;
}

static void not_run(sweep_point *p, bool unsupported, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void not_run(sweep_point *p, bool unsupported, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->reason, sizeof p->reason, fmt, ap);
  va_end(ap);
  p->ran = false;
  p->unsupported = unsupported;
  free(p->ms);
  p->ms = NULL;
  p->n_steps = p->n_warmup = 0;
}

static void progress(runner *R, const char *what) {
  if (!R->o->progress) return;
  const int W = 30, done = R->pts_total ? R->pts_done * W / R->pts_total : W;
  char bar[64];
  for (int i = 0; i < W; i++) bar[i] = i < done ? '#' : '.';
  bar[W] = 0;
  fprintf(stderr, "\r[%s] %d/%d points  %.1f s  %-40.40s", bar, R->pts_done, R->pts_total, vclock_now() - R->t_start,
          what);
  fflush(stderr);
}

/* Positions a point needs: fill, then warmup + steps steps advancing AL, the last verifying K+1. */
static int decode_span(const sweep_opts *o) { return (o->warmup + o->steps - 1) * o->spec_al + o->spec_k + 1; }

static void close_all(runner *R) {
  for (int i = 0; i < R->o->n_paths; i++)
    if (R->open[i].ops) vpath_close(&R->open[i]);
}

/* Times one forward of path v: device events when the path has them, else the wall clock. */
static vstatus timed_forward(vpath *v, const vstep *st, float *logits, double *ms) {
  double t0 = vclock_now();
  vstatus s = v->ops->forward(v->state, st, logits);
  double wall = (vclock_now() - t0) * 1e3;
  if (s != V_OK) return s;
  *ms = v->ops->last_step_ms ? v->ops->last_step_ms(v->state) : wall;
  return V_OK;
}

/* Runs the point (b, ctx) on the open paths listed in act[n] (indices into o->paths); pts[i]
 * is the point of act[i]. A path that fails is marked not run and dropped from the point. */
static vstatus run_point(runner *R, const int *act_in, int n_in, sweep_point **pts_in, int b, int ctx, bool inter) {
  const sweep_opts *o = R->o;
  const ds_config *c = &R->m->cfg;
  const int K1 = o->spec_k + 1, AL = o->spec_al, T = b * K1, n_all = o->warmup + o->steps;
  const bool forced = o->routing->kind != ROUTE_NATURAL;
  int act[64];
  sweep_point *pts[64];
  int n = 0;
  const int span = decode_span(o);
  const int fill = ctx + span <= c->max_position_embeddings ? ctx : c->max_position_embeddings - span;
  for (int i = 0; i < n_in; i++) {
    act[n] = act_in[i];
    pts[n] = pts_in[i];
    pts[n]->fill_len = fill;
    n++;
  }
  /* buffers */
  size_t prefill_T = o->workload == SWEEP_PREFILL_DECODE ? (size_t)SWEEP_PREFILL_ROWS + b : 0;
  size_t maxT = (size_t)T > prefill_T ? (size_t)T : prefill_T;
  VTRY(grow((void **)&R->tok, &R->tok_cap, maxT, sizeof(int32_t)));
  VTRY(grow((void **)&R->forced, &R->forced_cap, maxT * (size_t)(R->n_moe ? R->n_moe : 1) * (size_t)(c->num_experts_per_tok > 0 ? c->num_experts_per_tok : 1), sizeof(int32_t)));
  VTRY(grow((void **)&R->logits, &R->logits_cap, (size_t)T * (size_t)c->vocab_size, sizeof(float)));
  const uint64_t tkey = philox_key(o->seed, "sweep.tokens"), pkey = philox_key(o->seed, "sweep.prompt");
  for (int i = 0; i < b; i++) R->seq[i] = i;

  /* cache setup: synthetic fill or real prefill */
  for (int a = 0; a < n; a++) {
    vpath *v = &R->open[act[a]];
    sweep_point *p = pts[a];
    vstatus s = V_OK;
    vpath_ran_clear(v); /* the point's record names what ran at this point only */
    for (int i = 0; i < b && s == V_OK; i++) s = v->ops->reset ? v->ops->reset(v->state, i) : V_OK;
    if (o->workload == SWEEP_DECODE) {
      if (!v->ops->fill_cache) {
        not_run(p, true, "path has no fill_cache (pure decode needs the synthetic KV fill)");
        continue;
      }
      for (int i = 0; i < b && s == V_OK; i++) s = v->ops->fill_cache(v->state, i, fill, o->seed);
      if (s != V_OK) {
        not_run(p, s == V_UNSUPPORTED, "fill_cache(%d): %s", fill, verr_msg());
        continue;
      }
    } else {
      double total = 0;
      const int chunk = sweep_prefill_chunk(b);
      for (int p0 = 0, ci = 0; p0 < fill && s == V_OK; p0 += chunk, ci++) {
        const int cn = fill - p0 < chunk ? fill - p0 : chunk;
        for (int i = 0; i < b; i++) R->ntok[i] = cn, R->spos[i] = p0;
        for (int i = 0; i < b; i++)
          for (int j = 0; j < cn; j++)
            R->tok[(size_t)i * cn + j] =
                (int32_t)(philox_unit(pkey, (uint64_t)i * (uint64_t)c->max_position_embeddings + (uint64_t)(p0 + j)) *
                          c->vocab_size);
        if (forced) vrouting_fill(o->routing, o->seed, -1 - (int64_t)ci, b * cn, R->forced);
        vstep st = {.n_seq = b, .seq = R->seq, .n_tokens = R->ntok, .start_pos = R->spos, .tokens = R->tok,
                    .all_logits = false, .forced_experts = forced ? R->forced : NULL};
        if (v->ops->supports && (s = v->ops->supports(v->state, &st)) != V_OK) break;
        double ms = 0;
        s = timed_forward(v, &st, R->logits, &ms);
        total += ms;
      }
      if (s != V_OK) {
        not_run(p, s == V_UNSUPPORTED, "prefill of %d tokens x %d sequences: %s", fill, b, verr_msg());
        continue;
      }
      p->prefill_ms = total;
    }
  }
  /* drop what failed */
  int m = 0;
  for (int a = 0; a < n; a++)
    if (!pts[a]->reason[0]) act[m] = act[a], pts[m] = pts[a], m++;
  n = m;
  /* supports() on the first decode step */
  for (int i = 0; i < b; i++) R->ntok[i] = K1, R->spos[i] = fill;
  for (int a = 0; a < n; a++) {
    vpath *v = &R->open[act[a]];
    vstep st = {.n_seq = b, .seq = R->seq, .n_tokens = R->ntok, .start_pos = R->spos, .tokens = R->tok,
                .all_logits = o->spec_k > 0, .forced_experts = NULL};
    for (int t = 0; t < T; t++) R->tok[t] = 0;
    vstatus s = v->ops->supports ? v->ops->supports(v->state, &st) : V_OK;
    if (s != V_OK) not_run(pts[a], s == V_UNSUPPORTED, "%s", verr_msg());
  }
  m = 0;
  for (int a = 0; a < n; a++)
    if (!pts[a]->reason[0]) act[m] = act[a], pts[m] = pts[a], m++;
  n = m;
  for (int a = 0; a < n; a++) {
    pts[a]->ms = calloc((size_t)n_all, sizeof(double));
    if (!pts[a]->ms) return VERR("sweep: out of memory for step times");
    pts[a]->n_warmup = o->warmup;
    pts[a]->n_steps = o->steps;
    pts[a]->device_timer = R->open[act[a]].ops->last_step_ms != NULL;
  }
  /* the steps, interleaved */
  double experts_sum = 0;
  double got_sum[64] = {0}; /* natural routing: experts the path reported, summed over the timed steps */
  bool got_ok[64] = {0};    /* every timed step of the path reported them */
  for (int a = 0; a < n; a++) got_ok[a] = !forced && R->open[act[a]].ops->last_experts != NULL;
  for (int step = 0; step < n_all; step++) {
    for (int i = 0; i < b; i++) R->ntok[i] = K1, R->spos[i] = fill + step * AL; /* rewinds K+1-AL each step */
    for (int t = 0; t < T; t++)
      R->tok[t] = (int32_t)(philox_unit(tkey, (uint64_t)step * (uint64_t)T + (uint64_t)t) * c->vocab_size);
    if (forced) {
      vrouting_fill(o->routing, o->seed, o->routing->fixed ? 0 : step, T, R->forced);
      if (step >= o->warmup)
        experts_sum += sweep_distinct_experts(R->forced, R->n_moe, T, c->num_experts_per_tok, c->n_routed_experts);
    }
    vstep st = {.n_seq = b, .seq = R->seq, .n_tokens = R->ntok, .start_pos = R->spos, .tokens = R->tok,
                .all_logits = o->spec_k > 0, .forced_experts = forced ? R->forced : NULL};
    for (int q = 0; q < n; q++) {
      const int a = (step % 2) ? n - 1 - q : q; /* A B, then B A: order effects cancel */
      if (!pts[a]->ms) continue;
      double ms = 0;
      vstatus s = timed_forward(&R->open[act[a]], &st, R->logits, &ms);
      if (s != V_OK) {
        not_run(pts[a], s == V_UNSUPPORTED, "decode step %d at position %d: %s", step, fill + step * AL, verr_msg());
        continue;
      }
      pts[a]->ms[step] = ms;
      if (got_ok[a] && step >= o->warmup) { /* read after the timed step: not in its time */
        const double e = R->open[act[a]].ops->last_experts(R->open[act[a]].state);
        if (e >= 0 && isfinite(e)) got_sum[a] += e;
        else got_ok[a] = false;
      }
    }
  }
  /* figures */
  for (int a = 0; a < n; a++) {
    sweep_point *p = pts[a];
    if (!p->ms) continue;
    const vpath_ops *ops = R->open[act[a]].ops;
    p->ran = true;
    vtrace_free(&p->what_ran);
    const vtrace *t = vpath_ran(&R->open[act[a]]);
    if (t && !vtrace_copy(&p->what_ran, t)) return VERR("sweep: out of memory for what ran");
    p->interleaved = inter && n > 1;
    p->tokens_kept = b * AL;
    p->tokens_verified = T;
    p->mean_ctx = fill + (o->warmup + (o->steps - 1) / 2.0) * AL;
    p->experts_from = forced ? EXPERTS_FORCED : got_ok[a] ? EXPERTS_REPORTED : EXPERTS_EXPECTED;
    p->experts_measured = p->experts_from != EXPERTS_EXPECTED;
    p->experts_touched = forced      ? experts_sum / o->steps
                         : got_ok[a] ? got_sum[a] / o->steps
                                     : ds_expected_experts(c->n_routed_experts, c->num_experts_per_tok, T);
    p->latent_kv = ops->latent_kv;
    /* T tokens run but the weights are read once; KV read per sequence at its mean length */
    p->bytes_per_step =
        sweep_rank_bytes(c, p->tp, &o->paths[act[a]], b, (int)llround(p->mean_ctx), p->experts_touched, p->latent_kv);
    const char *how = "";
    VTRY(membw_for(R, ops, &p->membw_gbs, &how));
    snprintf(p->membw_how, sizeof p->membw_how, "%s", how);
    vstats_summarize(p->ms, n_all, o->warmup, &p->st);
    p->tok_s = p->tokens_kept / (p->st.median * 1e-3);
    p->roofline_pct = 100.0 * (p->bytes_per_step / (p->membw_gbs * 1e9)) / (p->st.median * 1e-3);
  }
  return V_OK;
}

/* Opens the paths act[n] with (max_seq, max_ctx); on failure closes what opened and leaves
 * the reason in why. */
static bool open_paths(runner *R, const int *act, int n, int max_seq, int max_ctx, char *why, size_t why_n) {
  vpath_opts po = {.max_seq = max_seq, .max_ctx = max_ctx, .n_threads = R->o->n_threads, .device = R->o->device,
                   .expect_fallback = R->o->expect_fallback};
  if (R->cur_tp > 1) po.tp = R->cur_tp; /* --tp N: N ranks (a name's ":tpN" still wins) */
  for (int i = 0; i < n; i++) {
    if (vpath_open(&R->open[act[i]], &R->o->paths[act[i]], R->m, &po) != V_OK) {
      snprintf(why, why_n, "%s%s", n > 1 ? "with all paths open together: " : "", verr_msg());
      close_all(R);
      return false;
    }
  }
  return true;
}

/* True when the sweep's deadline has passed; then marks the pending points of batches bi <= top
 * (all when top < 0) of the paths act[n] not run and clears them. */
static bool past_deadline(runner *R, const int *act, int n, bool *pending, sweep_point **pts, int top) {
  const sweep_opts *o = R->o;
  if (o->deadline <= 0 || vclock_now() < o->deadline) return false;
  for (int bi = 0; bi < o->n_batches; bi++) {
    if (!pending[bi] || (top >= 0 && bi > top)) continue;
    for (int i = 0; i < n; i++)
      not_run(pts[act[i] * o->n_batches + bi], false, "time budget spent before this point (--time-budget)");
    pending[bi] = false;
  }
  return true;
}

/* Runs the pending batches bi <= top of context ctx on the open paths act[n], then closes them. */
static vstatus run_open(runner *R, const int *act, int n, bool *pending, sweep_point **pts, int ctx, bool inter,
                        int top) {
  const sweep_opts *o = R->o;
  const int nb = o->n_batches;
  for (int bi = 0; bi <= top; bi++) {
    if (!pending[bi]) continue;
    if (past_deadline(R, act, n, pending, pts, top)) break;
    sweep_point *pp[64];
    for (int i = 0; i < n; i++) pp[i] = pts[act[i] * nb + bi];
    char what[80];
    snprintf(what, sizeof what, "b=%d ctx=%d", o->batches[bi], ctx);
    progress(R, what);
    vstatus s = run_point(R, act, n, pp, o->batches[bi], ctx, inter);
    if (s != V_OK) {
      close_all(R);
      return s;
    }
    pending[bi] = false;
  }
  close_all(R);
  return V_OK;
}

/* Runs every pending batch of context ctx on the paths act[n], opening them for the largest
 * batch that fits. pts[pi * nb + bi] is the point of path pi, batch bi. Clears pending; what
 * stays pending did not fit, with the reason in why[bi]. When the largest batch does not fit,
 * the smallest pending one is tried next: when that fails too nothing fits, and the batches
 * between are not opened one by one (each failed open of several paths costs loading weights). */
static vstatus run_group(runner *R, const int *act, int n, bool *pending, sweep_point **pts, int ctx, bool inter,
                         char (*why)[400]) {
  const sweep_opts *o = R->o;
  const int nb = o->n_batches, span = decode_span(o);
  const int max_ctx = ctx + span <= R->m->cfg.max_position_embeddings ? ctx + span : R->m->cfg.max_position_embeddings;
  if (past_deadline(R, act, n, pending, pts, -1)) return V_OK;
  int lo = 0;
  while (lo < nb && !pending[lo]) lo++;
  bool probed = false;
  for (int top = nb - 1; top >= lo; top--) {
    if (!pending[top]) continue;
    char msg[400] = "";
    if (open_paths(R, act, n, o->batches[top], max_ctx, msg, sizeof msg))
      return run_open(R, act, n, pending, pts, ctx, inter, top);
    for (int bi = top; bi < nb; bi++)
      if (pending[bi]) snprintf(why[bi], sizeof why[bi], "%s", msg);
    if (!probed && top > lo) {
      probed = true;
      if (!open_paths(R, act, n, o->batches[lo], max_ctx, msg, sizeof msg)) {
        for (int bi = lo; bi < top; bi++)
          if (pending[bi]) snprintf(why[bi], sizeof why[bi], "%s", msg);
        return V_OK;
      }
      VTRY(run_open(R, act, n, pending, pts, ctx, inter, lo));
    }
  }
  return V_OK;
}

static int cmp_int(const void *a, const void *b) { return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b); }

/* A round of the sweep in progress (sweep_begin .. sweep_end). */
struct sweep_round {
  sweep_opts o;           /* the options, batches sorted and distinct (bs), at least one TP degree */
  runner R;               /* the open paths and step buffers; R.o = &o */
  int *bs;                /* [o.n_batches] the batches, ascending and distinct (owned) */
  sweep_point **pts;      /* [n_paths * nb] the current pair's points, pts[pi * nb + bi] */
  bool *pending, *pend1;  /* [nb] batches of the current pair not run yet (all paths; one path alone) */
  char (*why)[400];       /* [nb] why a pending batch did not fit */
};

vstatus sweep_check(const sweep_opts *o) {
  if (o->n_paths < 1 || o->n_paths > 64) return VERR("--paths: give 1 to 64 paths (got %d)", o->n_paths);
  if (o->n_batches < 1 || o->n_contexts < 1) return VERR("--batch and --context need at least one value each");
  if (o->n_batches > 64) return VERR("--batch: at most 64 batch sizes (got %d)", o->n_batches);
  if (o->steps < 1) return VERR("--steps must be >= 1 (got %d)", o->steps);
  if (o->warmup < 0) return VERR("--warmup must be >= 0 (got %d)", o->warmup);
  if (o->spec_k < 0 || o->spec_al < 1 || o->spec_al > o->spec_k + 1)
    return VERR("--spec: need K >= 0 and 1 <= AL <= K+1 (got K=%d AL=%d)", o->spec_k, o->spec_al);
  for (int i = 0; i < o->n_paths; i++) {
    for (int j = 0; j < i; j++)
      if (!strcmp(o->paths[i].name, o->paths[j].name)) return VERR("--paths: '%s' listed twice", o->paths[i].name);
  }
  for (int i = 0; i < o->n_batches; i++)
    if (o->batches[i] < 1) return VERR("--batch: %d must be >= 1", o->batches[i]);
  for (int i = 0; i < o->n_contexts; i++)
    if (o->contexts[i] < 0) return VERR("--context: %d must be >= 0", o->contexts[i]);
  return V_OK;
}

int sweep_batches(const sweep_opts *o, int *bs) {
  memcpy(bs, o->batches, (size_t)o->n_batches * sizeof(int));
  qsort(bs, (size_t)o->n_batches, sizeof(int), cmp_int);
  int nb = 0;
  for (int i = 0; i < o->n_batches; i++)
    if (!nb || bs[nb - 1] != bs[i]) bs[nb++] = bs[i];
  return nb;
}

int sweep_n_pairs(const sweep_opts *o) { return o->n_contexts * (o->n_tps < 1 ? 1 : o->n_tps); }

void sweep_end(sweep_round *w) {
  if (!w) return;
  runner *R = &w->R;
  if (w->o.progress) fprintf(stderr, "\n");
  close_all(R);
  free(R->open);
  free(w->pts);
  free(w->pending);
  free(w->pend1);
  free(w->why);
  free(R->seq);
  free(R->ntok);
  free(R->spos);
  free(R->tok);
  free(R->forced);
  free(R->logits);
  free(w->bs);
  R->res->wall_s = vclock_now() - R->t_start;
  free(w);
}

vstatus sweep_begin(const sweep_opts *o_in, const ds_model *m, sweep_result *res, sweep_round **out) {
  memset(res, 0, sizeof *res);
  res->membw_host_gbs = res->membw_gpu_gbs = NAN;
  VTRY(sweep_check(o_in));
  sweep_round *w = calloc(1, sizeof *w);
  int *bs = malloc((size_t)o_in->n_batches * sizeof(int));
  if (!w || !bs) { free(w); free(bs); return VERR("sweep: out of memory"); }
  w->o = *o_in;
  sweep_opts *o = &w->o;
  static const int tp1 = 1;
  if (o->n_tps < 1) o->tps = &tp1, o->n_tps = 1;
  /* batches ascending, distinct (the open-for-largest-that-fits logic relies on it) */
  const int nb = sweep_batches(o, bs);
  o->batches = w->bs = bs;
  o->n_batches = nb;
  vstatus prep = vrouting_prepare(o->routing, &m->cfg, o->seed);
  if (prep != V_OK) {
    free(bs);
    free(w);
    return prep;
  }
  runner *R = &w->R;
  *R = (runner){.o = o, .m = m, .res = res, .n_moe = o->routing->n_moe, .t_start = vclock_now()};
  const int np = o->n_paths;
  res->cap = np * nb * o->n_contexts * o->n_tps;
  res->p = calloc((size_t)res->cap, sizeof(sweep_point));
  R->open = calloc((size_t)np, sizeof(vpath));
  w->pts = calloc((size_t)np * nb, sizeof(sweep_point *));
  w->pending = calloc((size_t)nb, sizeof(bool));
  w->pend1 = calloc((size_t)nb, sizeof(bool));
  w->why = calloc((size_t)nb, sizeof *w->why);
  R->seq = calloc((size_t)bs[nb - 1], sizeof(int));
  R->ntok = calloc((size_t)bs[nb - 1], sizeof(int));
  R->spos = calloc((size_t)bs[nb - 1], sizeof(int));
  R->pts_total = nb * o->n_contexts * o->n_tps;
  if (!res->p || !R->open || !w->pts || !w->pending || !w->pend1 || !w->why || !R->seq || !R->ntok || !R->spos) {
    w->o.progress = false;
    sweep_end(w);
    return VERR("sweep: out of memory");
  }
  *out = w;
  return V_OK;
}

vstatus sweep_pair(sweep_round *w, int pair, int *first) {
  const sweep_opts *o = &w->o;
  runner *R = &w->R;
  const ds_model *m = R->m;
  sweep_result *res = R->res;
  const int np = o->n_paths, nb = o->n_batches, span = decode_span(o);
  const int ctx = o->contexts[pair / o->n_tps], tp = o->tps[pair % o->n_tps];
  sweep_point **pts = w->pts;
  bool *pending = w->pending, *pend1 = w->pend1;
  char(*why)[400] = w->why;
  *first = res->n; /* this pair's points */
  for (int bi = 0; bi < nb; bi++)
    for (int pi = 0; pi < np; pi++) pts[pi * nb + bi] = add_point(R, pi, tp, o->batches[bi], ctx);
  R->cur_tp = tp;
  vstatus tps = tp > 1 ? ds_shard_check(&m->cfg, tp) : V_OK;
  if (tps != V_OK || span > m->cfg.max_position_embeddings) {
    for (int i = 0; i < np * nb; i++) {
      if (tps != V_OK)
        not_run(pts[i], false, "TP %d: %s", tp, verr_msg());
      else
        not_run(pts[i], false, "%d decode positions exceed max_position_embeddings %d", span,
                m->cfg.max_position_embeddings);
    }
    R->pts_done += nb;
    progress(R, "");
    return V_OK;
  }
  for (int bi = 0; bi < nb; bi++) pending[bi] = true, why[bi][0] = 0;
  int all[64] = {0}; /* the paths' indices (np >= 1: sweep_check) */
  for (int pi = 0; pi < np; pi++) all[pi] = pi;
  vstatus s = run_group(R, all, np, pending, pts, ctx, true, why);
  for (int bi = 0; bi < nb && s == V_OK; bi++) {
    if (!pending[bi]) continue;
    if (np > 1) { /* the paths do not fit together: each alone for what is left */
      for (int pi = 0; pi < np && s == V_OK; pi++) {
        char w1[64][400];
        for (int k = 0; k < nb; k++) pend1[k] = pending[k], w1[k][0] = 0;
        s = run_group(R, &all[pi], 1, pend1, pts, ctx, false, w1);
        for (int k = 0; k < nb; k++)
          if (pend1[k] && pending[k]) not_run(pts[pi * nb + k], false, "does not fit: %s", w1[k]);
      }
    } else {
      for (int k = 0; k < nb; k++)
        if (pending[k]) not_run(pts[k], false, "does not fit: %s", why[k]);
    }
    break;
  }
  R->pts_done += nb;
  progress(R, "");
  return s;
}

vstatus sweep_run(const sweep_opts *o, const ds_model *m, sweep_result *res) {
  sweep_round *w;
  VTRY(sweep_begin(o, m, res, &w));
  vstatus s = V_OK;
  for (int i = 0, first; i < sweep_n_pairs(o) && s == V_OK; i++) s = sweep_pair(w, i, &first);
  sweep_end(w);
  return s;
}

void sweep_result_free(sweep_result *res) {
  for (int i = 0; i < res->n; i++) free(res->p[i].ms), vtrace_free(&res->p[i].what_ran);
  free(res->p);
  memset(res, 0, sizeof *res);
}
