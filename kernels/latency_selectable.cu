/* The latency path's choices (vpath_ops.selectable, common/path.h; issue 37): every (op, variant) its
 * forward() would record for the step shapes of an envelope, on this open path (its model, TP rank,
 * dcp, variant words), found by the functions forward() runs, never a second list of the rules:
 *   lt_envelope_reason  whether the step runs as CUDA graphs or eagerly in chunks (decode_step/...),
 *   lt_fill_chunk       the chunks and each chunk's positions and logit rows,
 *   lt_choose_key       the attention kernel, its splits and key bucket (the graph key),
 *   lt_capture_events   the step of that key enqueued into a discarded stream capture: every launch's
 *                       trace event (the GEMM table's variant per shape, router/bucket/combine, the TP
 *                       reduction mode, dcp), with no kernel run.
 * Distinct graph keys are captured once (equal keys run the same kernels: lt_step_key). */
#include "kernels/latency_state.h"

/* The graph keys captured so far. */
typedef struct {
  lt_step_key *k; /* [n] */
  int n, cap;
} key_set;

static bool key_seen(key_set *ks, const lt_step_key *k, vstatus *err) {
  for (int i = 0; i < ks->n; i++) {
    const lt_step_key *a = &ks->k[i];
    if (a->T == k->T && a->R == k->R && a->S_att == k->S_att && a->forced == k->forced && a->attn == k->attn &&
        a->gemm_keys == k->gemm_keys)
      return true;
  }
  if (ks->n == ks->cap) {
    const int cap = ks->cap ? 2 * ks->cap : 256;
    lt_step_key *nk = (lt_step_key *)realloc(ks->k, (size_t)cap * sizeof *nk);
    if (!nk) {
      *err = VERR(PATH_NAME ": selectable: out of memory for %d step keys", cap);
      return true;
    }
    ks->k = nk;
    ks->cap = cap;
  }
  ks->k[ks->n++] = *k;
  return false;
}

/* The cached lengths the envelope visits: 0, the powers of two up to max_context, and max_context (the
 * rules' thresholds are powers of two or lie between them: split counts, key buckets, 64k). */
static int contexts(int max_context, int *out, int cap) {
  int n = 0;
  out[n++] = 0;
  for (long c = 1; c < max_context && n < cap - 1; c *= 2) out[n++] = (int)c;
  if (max_context > 0) out[n++] = max_context;
  return n;
}

/* The choices of one step shape: b sequences of n tokens each, at cached length ctx (ragged: only the
 * first sequence; the others at 0). */
static vstatus one_shape(lstate *S, int b, int n, int ctx, bool ragged, bool forced, key_set *ks, vtrace *out) {
  int seq[TC * 8], ntok[TC * 8], start[TC * 8];
  static const int32_t tok[TC * MAX_TPS * 8] = {0}; /* token ids: zeros (nothing runs) */
  if (b > TC * 8 || b * n > TC * MAX_TPS * 8) return VERR(PATH_NAME ": selectable: batch %d x %d tokens too large", b, n);
  for (int i = 0; i < b; i++) seq[i] = i, ntok[i] = n, start[i] = ragged && i > 0 ? 0 : ctx;
  vstep s;
  memset(&s, 0, sizeof s);
  s.n_seq = b;
  s.seq = seq;
  s.n_tokens = ntok;
  s.start_pos = start;
  s.tokens = tok;
  s.all_logits = n > 1; /* verification steps score every token */
  char when[160];
  snprintf(when, sizeof when, "batch %d x %d token%s, context %d%s%s", b, n, n > 1 ? "s" : "", ctx,
           ragged && b > 1 ? " (ragged: the others at 0)" : "", forced ? ", forced experts" : "");
  char why[160];
  const char *to = "";
  lt_envelope_reason(&s, why, sizeof why, &to);
  if (why[0]) vtrace_ran(out, PATH_NAME, "decode_step", to, when);
  const bool graph = !why[0] && !S->prof && S->use_graphs; /* as lt_forward_impl: profiling runs eagerly */
  const int T = b * n;
  vstatus err = V_OK;
  for (int t0 = 0, i = 0, j = 0; t0 < T;) {
    int R = 0, max_keys = 1;
    const int c = lt_fill_chunk(S, &s, t0, &i, &j, &R, &max_keys, NULL, NULL);
    t0 += c;
    const lt_step_key k = lt_choose_key(S, c, R, max_keys, forced);
    if (graph) { /* the first step of a key captures its graph, the later ones replay it */
      vtrace_ran(out, PATH_NAME, "cuda_graph", lt_graph_event(true), when);
      vtrace_ran(out, PATH_NAME, "cuda_graph", lt_graph_event(false), when);
    }
    if (key_seen(ks, &k, &err)) {
      if (err != V_OK) return err;
      continue;
    }
    gentry g;
    err = lt_capture_events(S, &k, &g);
    for (int e = 0; err == V_OK && e < g.n_ev; e++) vtrace_ran(out, PATH_NAME, g.ev[e].op, g.ev[e].variant, when);
    lt_graph_free(&g);
    if (err != V_OK) return err;
  }
  return V_OK;
}

extern "C" vstatus latency_selectable(void *st, const vpath_envelope *env, vtrace *out) {
  lstate *S = (lstate *)st;
  if (!S || !env || !out) return VERR(PATH_NAME ": selectable: NULL state, envelope or trace");
  if (env->max_batch < 1 || env->max_tokens < 1 || env->max_context < 0)
    return VERR(PATH_NAME ": selectable: envelope batch %d, tokens %d, context %d", env->max_batch, env->max_tokens,
                env->max_context);
  if (S->ref) { /* the config fell back at open: every step is cuda-ref's */
    vtrace_fallback(out, PATH_NAME, "decode_step", "cuda-ref", S->ref_reason);
    return V_OK;
  }
  if (env->max_batch > S->opt.max_seq || env->max_context + env->max_tokens > S->opt.max_ctx)
    return VUNSUPPORTED(PATH_NAME ": selectable: envelope batch %d, context %d + %d tokens beyond the open's max_seq %d, "
                        "max_ctx %d", env->max_batch, env->max_context, env->max_tokens, S->opt.max_seq, S->opt.max_ctx);
  CUDA_CHECK(cudaStreamSynchronize(S->st));
  CUDA_CHECK(cudaStreamSynchronize(S->st2));
  int ctx[40];
  const int nc = contexts(env->max_context, ctx, 40);
  const int ns = env->max_tokens > 1 ? 2 : 1;
  const int tokens[2] = {1, env->max_tokens};
  key_set ks = {NULL, 0, 0};
  vstatus r = V_OK;
  for (int f = 0; f < (S->n_moe > 0 ? 2 : 1) && r == V_OK; f++)
    for (int t = 0; t < ns && r == V_OK; t++)
      for (int b = 1; b <= env->max_batch && r == V_OK; b++)
        for (int c = 0; c < nc && r == V_OK; c++)
          for (int rg = 0; rg < (b > 1 && ctx[c] > 0 ? 2 : 1) && r == V_OK; rg++)
            r = one_shape(S, b, tokens[t], ctx[c], rg == 1, f == 1, &ks, out);
  free(ks.k);
  return r;
}
