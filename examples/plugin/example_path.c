/* An example decode path for vouch's plugin SDK (docs/plugins.md), to copy and edit.
 *
 * "example" wraps the CPU reference path: its state holds cpu-ref's, every operation hands the call
 * to cpu_ref_ops, and forward() records a trace event, so a run's trace shows that this library's
 * code ran. Replace the body of ex_forward with your own kernels (keeping cpu-ref as the fallback
 * for steps yours do not support, traced as fallbacks), and declare in `caps` what your path can do.
 *
 * Built on its own against the installed headers, linking nothing of vouch's (the vouch binary that
 * loads it exports cpu_ref_ops, verr_*, vtrace_*):
 *   cc -std=c11 -O2 -fPIC -shared -I PREFIX/include/vouch example_path.c -o example.so
 * -DEXAMPLE_PLANTED_BUG builds a deliberately wrong variant (every logit row shifted by one token
 * id, an off-by-one in the vocabulary index) that `vouch diverge` must fail. */
#include <stdlib.h>
#include <string.h>

#include "suites/paths/plugin.h"

VOUCH_PLUGIN_ABI;

#define EX_NAME "example"

typedef struct {
  void *ref;       /* cpu-ref's state: the numbers are cpu-ref's */
  vtrace *trace;   /* vpath_opts.trace: where this path's events go; may be NULL */
  int vocab;       /* logits per row */
} ex_state;

static void ex_close(void *st) {
  ex_state *S = st;
  if (!S) return;
  if (S->ref) cpu_ref_ops.close(S->ref);
  free(S);
}

/* Fails (V_ERR or V_UNSUPPORTED, with cpu-ref's message prefixed by the path name) when cpu-ref cannot
 * open m with o; the options travel unchanged, so TP ranks (o->comm), dcp and ep work as in cpu-ref. */
static vstatus ex_open(void **state, const ds_model *m, const vpath_opts *o) {
  *state = NULL;
  ex_state *S = vcalloc(1, sizeof *S, EX_NAME " state");
  if (!S) return V_ERR;
  S->trace = o->trace;
  S->vocab = m->cfg.vocab_size;
  vstatus s = cpu_ref_ops.open(&S->ref, m, o);
  if (s != V_OK) {
    verr_prefix(EX_NAME ": cpu-ref");
    ex_close(S);
    return s;
  }
  *state = S;
  return V_OK;
}

static vstatus ex_supports(void *st, const vstep *s) { return cpu_ref_ops.supports(((ex_state *)st)->ref, s); }

static vstatus ex_forward(void *st, const vstep *s, float *logits) {
  ex_state *S = st;
  VTRY(cpu_ref_ops.forward(S->ref, s, logits));
  vtrace_ran(S->trace, EX_NAME, "forward", "cpu-ref", "the example wraps cpu-ref");
#ifdef EXAMPLE_PLANTED_BUG
  const int rows = vstep_logit_rows(s);
  for (int r = 0; r < rows; r++) { /* logit v takes v+1's value: an off-by-one in the vocabulary index */
    float *row = logits + (size_t)r * (size_t)S->vocab;
    const float last = row[0];
    memmove(row, row + 1, (size_t)(S->vocab - 1) * sizeof *row);
    row[S->vocab - 1] = last;
  }
#endif
  return V_OK;
}

static vstatus ex_reset(void *st, int seq) { return cpu_ref_ops.reset(((ex_state *)st)->ref, seq); }

static vstatus ex_fill_cache(void *st, int seq, int len, uint64_t seed) {
  return cpu_ref_ops.fill_cache(((ex_state *)st)->ref, seq, len, seed);
}

static double ex_last_experts(void *st) { return cpu_ref_ops.last_experts(((ex_state *)st)->ref); }

const vpath_ops vouch_path_ops = {
    .name = EX_NAME,
#ifdef EXAMPLE_PLANTED_BUG
    .desc = "the SDK example with a planted bug (logits shifted by one token id)",
#else
    .desc = "the SDK example: cpu-ref behind a plugin of its own (examples/plugin)",
#endif
    .open = ex_open,
    .supports = ex_supports,
    .forward = ex_forward,
    .reset = ex_reset,
    .fill_cache = ex_fill_cache,
    .last_step_ms = NULL, /* a host path: callers time it by the wall clock */
    .close = ex_close,
    .latent_kv = false,   /* cpu-ref's expanded per-head K/V cache, for the roofline's byte count */
    .last_experts = ex_last_experts,
    /* what cpu-ref can do, since every call goes to it with the same options */
    .caps = {.host_weights = true, .tp = VPATH_TP_THREADS, .dcp = true, .ep = true},
};
