/* A --path-lib path for tests of the proof that the code under test ran (issue 37): "handover-ref"
 * is cpu-ref that, like latency on a config its kernels cannot run, says it handed the work over to
 * another path: with variant "open" its open() records a fallback to cpu-ref ("handover-ref@open"),
 * with variant "step" its second forward() does ("handover-ref@step"); with no variant it is
 * cpu-ref and records nothing of its own. The logits are always cpu-ref's, so only the trace tells
 * the hand-over: vpath_open and the steps must refuse it unless --expect-fallback declares it.
 * Loaded into the vouch binary, which exports its symbols (SLOW_PCT is unused). */
#include <stdlib.h>
#include <string.h>

#include "suites/paths/plugin.h"

VOUCH_PLUGIN_ABI;

typedef struct {
  void *ref;      /* cpu-ref's state */
  vtrace *trace;  /* vpath_opts.trace of the open; may be NULL */
  bool at_step;   /* variant "step": the second forward() records a hand-over */
  int steps;      /* forward() calls so far */
} handover;

static vstatus h_open(void **state, const struct ds_model_s *m, const vpath_opts *o) {
  handover *h = calloc(1, sizeof *h);
  if (!h) return VERR("handover-ref: out of memory");
  const char *v = o->variant ? o->variant : "";
  h->trace = o->trace;
  h->at_step = !strcmp(v, "step");
  vpath_opts ro = *o;
  ro.variant = NULL;
  vstatus s = cpu_ref_ops.open(&h->ref, m, &ro);
  if (s != V_OK) {
    free(h);
    return s;
  }
  if (!strcmp(v, "open") && h->trace)
    vtrace_fallback(h->trace, "handover-ref", "open", "cpu-ref", "test: variant 'open' hands every step over");
  *state = h;
  return V_OK;
}

static vstatus h_forward(void *st, const vstep *s, float *logits) {
  handover *h = st;
  if (h->at_step && h->steps == 1 && h->trace)
    vtrace_fallback(h->trace, "handover-ref", "decode_step", "cpu-ref", "test: variant 'step' hands step 1 over");
  h->steps++;
  return cpu_ref_ops.forward(h->ref, s, logits);
}

static vstatus h_supports(void *st, const vstep *s) {
  handover *h = st;
  return cpu_ref_ops.supports ? cpu_ref_ops.supports(h->ref, s) : V_OK;
}
static vstatus h_reset(void *st, int seq) {
  handover *h = st;
  return cpu_ref_ops.reset(h->ref, seq);
}
static vstatus h_fill(void *st, int seq, int len, uint64_t seed) {
  handover *h = st;
  return cpu_ref_ops.fill_cache(h->ref, seq, len, seed);
}
static void h_close(void *st) {
  handover *h = st;
  cpu_ref_ops.close(h->ref);
  free(h);
}

/* cpu-ref's declaration with these functions; filled when vouch loads the library */
vpath_ops vouch_path_ops;

__attribute__((constructor)) static void handover_init(void) {
  vouch_path_ops = cpu_ref_ops;
  vouch_path_ops.name = "handover-ref";
  vouch_path_ops.desc = "cpu-ref that says it handed over to cpu-ref (@open: at open, @step: at step 1; a test's)";
  vouch_path_ops.open = h_open;
  vouch_path_ops.forward = h_forward;
  vouch_path_ops.supports = cpu_ref_ops.supports ? h_supports : NULL;
  vouch_path_ops.reset = cpu_ref_ops.reset ? h_reset : NULL;
  vouch_path_ops.fill_cache = cpu_ref_ops.fill_cache ? h_fill : NULL;
  vouch_path_ops.close = h_close;
  vouch_path_ops.last_step_ms = NULL;
  vouch_path_ops.last_experts = NULL;
  vouch_path_ops.selectable = NULL; /* its state is not cpu-ref's: no enumeration */
  vouch_path_ops.caps.tp = VPATH_TP_NONE; /* its state is not cpu-ref's: no TP wrapper */
  vouch_path_ops.caps.dcp = false;
  vouch_path_ops.caps.ep = false;
}
