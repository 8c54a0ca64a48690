/* Faulty path libraries for tests/cli/test_plugin_example.sh, one per BAD_KIND (built there with the
 * docs' cc line plus -DBAD_KIND=K): each must be refused or fail with a one-line message that names
 * the file and field, or that carries the library's own text, and never crash vouch.
 *   1 open() fails with its own message        2 no VOUCH_PLUGIN_ABI stamp
 *   3 another ABI value                         4 caps.tp out of range
 *   5 carries its own copy of vouch (verr_set)  6 forward() fails with its own message
 *   7 a name already taken (cpu-ref)            8 caps.ep without caps.tp */
#include "suites/paths/plugin.h"

#ifndef BAD_KIND
#error "build with -DBAD_KIND=1..8"
#endif

#if BAD_KIND == 3
const int vouch_path_abi = VOUCH_PATH_ABI + 41;
#elif BAD_KIND != 2
VOUCH_PLUGIN_ABI;
#endif

#if BAD_KIND == 5
/* what a library that links vouch's static libraries carries */
vstatus verr_set(const char *file, int line, const char *fmt, ...) {
  (void)file, (void)line, (void)fmt;
  return V_ERR;
}
#endif

static vstatus bad_open(void **state, const ds_model *m, const vpath_opts *o) {
#if BAD_KIND == 1
  (void)state, (void)m, (void)o;
  return VERR("bad_path.c: open refused on purpose (kind %d)", BAD_KIND);
#else
  return cpu_ref_ops.open(state, m, o);
#endif
}

static vstatus bad_forward(void *st, const vstep *s, float *logits) {
#if BAD_KIND == 6
  (void)st, (void)logits;
  return VERR("bad_path.c: forward of a %d-sequence step failed on purpose", s->n_seq);
#else
  return cpu_ref_ops.forward(st, s, logits);
#endif
}

static void bad_close(void *st) { cpu_ref_ops.close(st); }

const vpath_ops vouch_path_ops = {
#if BAD_KIND == 7
    .name = "cpu-ref",
#else
    .name = "buggy",
#endif
    .desc = "a faulty path library (tests)",
    .open = bad_open,
    .supports = NULL,
    .forward = bad_forward,
    .reset = NULL,
    .fill_cache = NULL,
    .last_step_ms = NULL,
    .close = bad_close,
#if BAD_KIND == 4
    .caps = {.host_weights = true, .tp = (vpath_tp_kind)7},
#elif BAD_KIND == 8
    .caps = {.host_weights = true, .ep = true},
#else
    .caps = {.host_weights = true},
#endif
};
