/* latency's choices (vpath_ops.selectable, kernels/latency_selectable.cu; issue 37) hold every
 * (op, variant) its trace records over a small sweep of real steps: decode at batch 1, 3, 8, 17, 33 and
 * 64 over cached contexts 0, 100, 1000 and 4000 (fill_cache), a 4-token verification step, a forced-
 * experts step and a batch of 65 (chunked), on synth:small and synth:k2-lite (K2's 64 heads, 384 experts).
 * Enumerating runs nothing: the steps after it still run, and it takes seconds. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/path.h"
#include "common/trace.h"
#include "kernels/latency.h"
#include "model/model.h"
#include "reference/cuda/cuda_ref.h"
#include "tests/harness.h"

#define MAX_SEQ 72
#define MAX_CTX 4104

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* One step of b sequences (slots 0..b-1) of n tokens each at cached length ctx; forced: expert ids for
 * every MoE layer and token. */
static void step(void *ls, const ds_config *c, int n_moe, int b, int n, int ctx, bool forced, float *logits) {
  int seq[MAX_SEQ], nt[MAX_SEQ], pos[MAX_SEQ];
  int32_t tok[MAX_SEQ * 4];
  for (int i = 0; i < b; i++) {
    seq[i] = i, nt[i] = n, pos[i] = ctx;
    CHECK_OK(latency_ops.fill_cache(ls, i, ctx, 7));
  }
  for (int i = 0; i < b * n; i++) tok[i] = (int32_t)((i * 37 + 11) % c->vocab_size);
  const int T = b * n, K = c->num_experts_per_tok, E = c->n_routed_experts;
  int32_t *fx = NULL;
  if (forced && n_moe > 0) {
    fx = malloc((size_t)n_moe * T * K * sizeof *fx);
    for (int l = 0; l < n_moe; l++)
      for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++) fx[((size_t)l * T + t) * K + k] = (int32_t)((t * K + k) % E);
  }
  vstep s = {.n_seq = b, .seq = seq, .n_tokens = nt, .start_pos = pos, .tokens = tok, .all_logits = n > 1,
             .forced_experts = fx};
  vstatus r = latency_ops.forward(ls, &s, logits);
  CHECK(r == V_OK, "step batch %d x %d at %d%s: %s", b, n, ctx, forced ? " forced" : "", verr_msg());
  free(fx);
}

static void test_model(const char *spec) {
  ds_model m;
  CHECK_OK(ds_model_open(&m, spec, 3, 0, false));
  if (g_test_fail) return;
  const ds_config *c = &m.cfg;
  int n_moe = 0;
  for (int l = 0; l < c->num_hidden_layers; l++) n_moe += ds_layer_is_moe(c, l);
  vtrace ran;
  vtrace_init_tally(&ran);
  vpath_opts o = {.max_seq = MAX_SEQ, .max_ctx = MAX_CTX, .trace = &ran};
  void *ls = NULL;
  CHECK_OK(latency_ops.open(&ls, &m, &o));
  if (!ls) return;
  float *logits = malloc((size_t)MAX_SEQ * 4 * c->vocab_size * sizeof(float));
  const int batches[] = {1, 3, 8, 17, 33, 64}, ctxs[] = {0, 100, 1000, 4000};
  for (size_t b = 0; b < sizeof batches / sizeof *batches; b++)
    for (size_t x = 0; x < sizeof ctxs / sizeof *ctxs; x++) step(ls, c, n_moe, batches[b], 1, ctxs[x], false, logits);
  step(ls, c, n_moe, 2, 4, 1000, false, logits);
  step(ls, c, n_moe, 8, 1, 100, true, logits);
  step(ls, c, n_moe, 65, 1, 100, false, logits);
  step(ls, c, n_moe, 3, 1, 100, false, logits); /* a second time: its graph replays */
  vtrace sel;
  vtrace_init_tally(&sel);
  const vpath_envelope env = {.max_batch = 65, .max_context = 4000, .max_tokens = 4};
  const double t0 = now_s();
  CHECK_OK(latency_ops.selectable(ls, &env, &sel));
  const double dt = now_s() - t0;
  printf("%s: %d choices in %.2f s; %d distinct events ran\n", spec, sel.n, dt, ran.n);
  CHECK(dt < 30, "%s: enumerating took %.1f s (< 30)", spec, dt);
  int missing = 0;
  for (int i = 0; i < ran.n; i++) {
    const vtrace_event *e = &ran.ev[i];
    if (e->kind != TR_RAN || !strcmp(e->op, "fill_cache")) continue; /* fill_cache is no step's choice */
    bool found = false;
    for (int j = 0; j < sel.n && !found; j++)
      found = !strcmp(sel.ev[j].op, e->op) && !strcmp(sel.ev[j].variant, e->variant);
    if (!found) {
      missing++;
      printf("  ran but not among the choices: %s/%s (%s)\n", e->op, e->variant, e->detail);
    }
  }
  CHECK(missing == 0, "%s: every (op, variant) the steps ran is among latency's choices (%d missing)", spec, missing);
  for (int j = 0; j < sel.n; j++) printf("  %-24s %-22s %s\n", sel.ev[j].op, sel.ev[j].variant, sel.ev[j].detail);
  /* enumerating ran no kernel and left the path usable */
  const int64_t before = ran.n;
  step(ls, c, n_moe, 3, 1, 100, false, logits);
  CHECK(ran.n == before, "%s: a step after enumerating records nothing new (%d -> %d events)", spec, (int)before, ran.n);
  free(logits);
  vtrace_free(&sel);
  latency_ops.close(ls);
  vtrace_free(&ran);
  ds_model_close(&m);
}

int main(void) {
  if (cuda_device_count() == 0) {
    printf("no CUDA device: skipped\n");
    return 77;
  }
  test_model("synth:small");
  test_model("synth:k2-lite");
  return test_finish();
}
