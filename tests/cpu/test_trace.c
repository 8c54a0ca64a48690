/* common/trace.h: the step trace merges within a step; the tally (what every open path keeps,
 * issue 37) merges across steps into one event per (kind, path, op, variant), so its memory stays
 * bounded however many steps run, and tees every event to the caller's step trace. */
#include <stdlib.h>
#include <string.h>

#include "common/trace.h"
#include "tests/harness.h"

int main(void) {
  /* a step trace: one event per step and distinct detail */
  vtrace st;
  vtrace_init(&st, true);
  for (int k = 0; k < 3; k++) {
    vtrace_ran(&st, "p", "rmsnorm", "v1", "B1");
    vtrace_ran(&st, "p", "rmsnorm", "v1", "B1");
    vtrace_next_step(&st);
  }
  CHECK(st.n == 3 && st.ev[0].count == 2, "step trace: one merged event per step (n %d)", st.n);

  /* a tally: a million steps of the same few events hold as many events as are distinct */
  vtrace t;
  vtrace_init_tally(&t);
  t.tee = &st;
  const int steps = 1000000;
  for (int k = 0; k < steps; k++) {
    vtrace_ran(&t, "p", "decode_step", "whole", k % 2 ? "B8" : "B1");
    vtrace_ran(&t, "p", "mla_decode", "split_kv", NULL);
    if (k == 5) vtrace_fallback(&t, "p", "decode_step", "cpu-ref", "first reason");
    if (k == 7) vtrace_fallback(&t, "p", "decode_step", "cpu-ref", "second reason");
    vtrace_next_step(&t);
    if (k < 10) vtrace_next_step(&st);
    if (k == 10) t.tee = NULL; /* the step trace saw the first ten steps */
  }
  CHECK(t.n == 3, "tally: 3 distinct events after %d steps (n %d)", steps, t.n);
  CHECK(t.cap <= 256, "tally: memory bounded by the distinct events (cap %d)", t.cap);
  CHECK(t.ev[0].count == steps && !strcmp(t.ev[0].detail, "B1") && t.ev[0].step == 0,
        "tally: count over every step, first detail and step (%lld, %s, %lld)", (long long)t.ev[0].count,
        t.ev[0].detail, (long long)t.ev[0].step);
  CHECK(t.ev[2].kind == TR_FALLBACK && t.ev[2].count == 2 && !strcmp(t.ev[2].detail, "first reason") &&
            t.ev[2].step == 5,
        "tally: a fallback keeps its first reason and counts the rest");
  CHECK(vtrace_n_fallbacks(&t) == 1 && vtrace_n_fallbacks(NULL) == 0, "vtrace_n_fallbacks");
  CHECK(vtrace_has(&t, "mla_decode", "split_kv", 0), "vtrace_has on a tally");
  /* the tee got the first eleven steps' events in its own (step) mode: 2 ran + 2 fallbacks + per step */
  int tee_fb = 0;
  for (int i = 0; i < st.n; i++) tee_fb += st.ev[i].kind == TR_FALLBACK;
  CHECK(tee_fb == 2 && st.n == 3 + 11 * 2 + 2, "tee: every event of the teed steps (n %d, fallbacks %d)", st.n, tee_fb);

  /* clear: a new tally, the mode and step kept */
  const int64_t step = t.step;
  vtrace_clear(&t);
  CHECK(t.n == 0 && t.tally && t.step == step, "clear keeps the mode and the step");
  vtrace_ran(&t, "p", "decode_step", "chunked", "prefill");
  CHECK(t.n == 1 && t.ev[0].step == step, "after clear: events from the current step");

  /* the distinct cap: past it, dropped counts */
  t.max_events = 2;
  vtrace_ran(&t, "p", "a", "x", NULL);
  vtrace_ran(&t, "p", "b", "x", NULL);
  vtrace_ran(&t, "p", "a", "x", NULL);
  CHECK(t.n == 2 && t.dropped == 1 && t.ev[1].count == 2, "cap: distinct events past it dropped (n %d, dropped %lld)",
        t.n, (long long)t.dropped);
  char *j = vtrace_to_json(&t);
  CHECK(j && strstr(j, "\"count\":2"), "json: %s", j ? j : "(null)");
  free(j);
  vtrace_free(&t);
  vtrace_free(&st);
  return test_finish();
}
