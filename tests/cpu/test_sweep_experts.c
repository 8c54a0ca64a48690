/* vpath_ops.last_experts on cpu-ref (synth:tiny) and through the TP wrapper, and the sweep's use
 * of it: under natural routing the roofline counts the experts the router selected. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "suites/paths/paths.h"
#include "suites/sweep/sweep.h"
#include "tests/cpu/path_specs.h"
#include "tests/harness.h"

static ds_model M;

static int n_moe(void) {
  int n = 0;
  for (int l = 0; l < M.cfg.num_hidden_layers; l++) n += M.layers[l].is_moe ? 1 : 0;
  return n;
}

/* One step of T sequences (slots 0..T-1, emptied first), one token each (7*i + salt) at position 0. */
static vstatus decode(vpath *p, int T, int salt, const int32_t *forced, float *logits) {
  int seq[16], nt[16], sp[16];
  int32_t tok[16];
  for (int i = 0; i < T; i++) {
    VTRY(p->ops->reset(p->state, i));
    seq[i] = i, nt[i] = 1, sp[i] = 0, tok[i] = (int32_t)(7 * i + salt);
  }
  vstep s = {.n_seq = T, .seq = seq, .n_tokens = nt, .start_pos = sp, .tokens = tok, .all_logits = false,
             .forced_experts = forced};
  return p->ops->forward(p->state, &s, logits);
}

static void test_cpu_ref_counts(void) {
  const int K = M.cfg.num_experts_per_tok, E = M.cfg.n_routed_experts, nm = n_moe(), T = 8;
  vpath p;
  vpath_opts o = {.max_seq = T, .max_ctx = 16, .n_threads = 1};
  CHECK_OK(test_open(&p, "cpu-ref", &M, &o));
  CHECK(p.ops->last_experts != NULL, "cpu-ref reports the experts it selected");
  if (!p.ops->last_experts) return;
  CHECK(p.ops->last_experts(p.state) < 0, "unknown before the first step (%g)", p.ops->last_experts(p.state));
  float *lg = malloc((size_t)T * M.cfg.vocab_size * sizeof(float));
  int32_t *forced = malloc((size_t)nm * T * K * sizeof(int32_t));
  /* forced: every token of MoE layer j takes experts j..j+K-1, except token 0 of layer 0, which takes
   * the K experts after them: layer 0 touches 2K distinct experts, the others K */
  for (int j = 0; j < nm; j++)
    for (int t = 0; t < T; t++)
      for (int k = 0; k < K; k++)
        forced[((size_t)j * T + t) * K + k] = (int32_t)((j + k + (j == 0 && t == 0 ? K : 0)) % E);
  CHECK_OK(decode(&p, T, 0, forced, lg));
  const double want = (nm - 1) * (double)K / nm + (2.0 * K < E ? 2.0 * K : E) / nm;
  const double got = p.ops->last_experts(p.state);
  CHECK(fabs(got - want) < 1e-9, "forced ids: %g distinct experts per MoE layer, want %g", got, want);
  CHECK(fabs(got - sweep_distinct_experts(forced, nm, T, K, E)) < 1e-9, "agrees with sweep_distinct_experts");
  /* natural routing, one token: exactly K distinct experts per layer */
  CHECK_OK(decode(&p, 1, 1, NULL, lg));
  CHECK(fabs(p.ops->last_experts(p.state) - K) < 1e-9, "one token selects top-k = %d experts (%g)", K,
        p.ops->last_experts(p.state));
  /* natural routing, T tokens: between K and min(E, T*K) */
  CHECK_OK(decode(&p, T, 2, NULL, lg));
  const double nat = p.ops->last_experts(p.state);
  CHECK(nat >= K && nat <= (T * K < E ? T * K : E), "T=%d tokens select %g distinct experts per layer", T, nat);
  /* the TP wrapper forwards rank 0's count, which is the unsharded path's (the router is replicated) */
  vpath q;
  CHECK_OK(test_open(&q, "cpu-ref:tp2", &M, &o));
  CHECK(q.ops->last_experts != NULL, "cpu-ref:tp2 forwards last_experts");
  if (q.ops->last_experts) {
    CHECK_OK(decode(&q, T, 0, forced, lg));
    CHECK(fabs(q.ops->last_experts(q.state) - got) < 1e-9, "TP2 forced count %g == unsharded %g",
          q.ops->last_experts(q.state), got);
    CHECK_OK(decode(&q, T, 2, NULL, lg));
    CHECK(fabs(q.ops->last_experts(q.state) - nat) < 1e-9 || q.ops->last_experts(q.state) >= K,
          "TP2 natural count %g (unsharded %g)", q.ops->last_experts(q.state), nat);
  }
  vpath_close(&q);
  vpath_close(&p);
  free(lg);
  free(forced);
}

/* The sweep takes the path's count under natural routing and says so. */
static void test_sweep_natural(void) {
  const char *paths_s[] = {"cpu-ref"};
  vpath_spec paths[sizeof paths_s / sizeof *paths_s];
  test_specs(paths_s, (int)(sizeof paths_s / sizeof *paths_s), paths);
  int batches[] = {1, 4}, ctxs[] = {16};
  vrouting r;
  CHECK_OK(vrouting_parse("natural", &r));
  sweep_opts o = {.paths = paths, .n_paths = 1, .batches = batches, .n_batches = 2, .contexts = ctxs, .n_contexts = 1,
                  .spec_al = 1, .workload = SWEEP_DECODE, .routing = &r, .steps = 3, .warmup = 1, .seed = 5,
                  .n_threads = 1, .membw_bytes = (size_t)64 << 20};
  sweep_result res;
  CHECK_OK(sweep_run(&o, &M, &res));
  const int K = M.cfg.num_experts_per_tok, E = M.cfg.n_routed_experts;
  CHECK(res.n == 2, "two points (%d)", res.n);
  for (int i = 0; i < res.n; i++) {
    const sweep_point *p = &res.p[i];
    CHECK(p->ran, "b=%d ran (%s)", p->batch, p->reason);
    CHECK(p->experts_from == EXPERTS_REPORTED && p->experts_measured, "b=%d: experts from the path's count",
          p->batch);
    const double hi = p->batch * K < E ? p->batch * K : E;
    CHECK(p->experts_touched >= K && p->experts_touched <= hi, "b=%d: %g experts in [%d, %g]", p->batch,
          p->experts_touched, K, hi);
    if (p->batch == 1) CHECK(fabs(p->experts_touched - K) < 1e-9, "b=1: exactly top-k (%g)", p->experts_touched);
    const double bytes = ds_decode_bytes(&M.cfg, p->batch, (int)llround(p->mean_ctx), p->experts_touched, p->latent_kv);
    CHECK(fabs(bytes - p->bytes_per_step) <= 1e-9 * bytes, "b=%d: bytes use the counted experts", p->batch);
  }
  sweep_result_free(&res);
  vrouting_free(&r);
}

int main(void) {
  if (ds_model_open(&M, "synth:tiny", 0, 0, true)) {
    fprintf(stderr, "cannot open synth:tiny: %s\n", verr_msg());
    return 1;
  }
  test_cpu_ref_counts();
  test_sweep_natural();
  ds_model_close(&M);
  return test_finish();
}
