/* libFuzzer target: a routing trace file (--routing trace:FILE, suites/engine/routing.c). An accepted
 * trace is prepared for the tiny preset (16 experts, top-4, 2 MoE layers) and replayed
 * for a few steps; the ids it produces must be in [0, E). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "model/model.h"
#include "suites/engine/routing.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  static ds_config cfg;
  static int ready;
  if (!ready) {
    if (ds_preset_config("tiny", 0, &cfg) != V_OK) abort();
    ready = 1;
  }
  const char *p = fz_write("trace.jsonl", data, n);
  char spec[4200];
  snprintf(spec, sizeof spec, "trace:%s", p);
  vrouting r;
  memset(&r, 0, sizeof r);
  vstatus s = vrouting_parse(spec, &r);
  if (s == V_OK) s = vrouting_prepare(&r, &cfg, 7);
  if (s != V_OK) {
    const char *m = verr_msg();
    fz_assert(m[0] && !strchr(m, '\n'), "routing error is one non-empty line");
    vrouting_free(&r);
    return 0;
  }
  const int T = 3;
  int32_t *ids = malloc((size_t)r.n_moe * T * r.K * sizeof *ids);
  for (int64_t step = -1; step < 3; step++) {
    vrouting_fill(&r, 7, step, T, ids);
    for (int i = 0; i < r.n_moe * T * r.K; i++) fz_assert(ids[i] >= 0 && ids[i] < r.E, "expert id in [0, E)");
  }
  free(ids);
  vrouting_free(&r);
  return 0;
}
