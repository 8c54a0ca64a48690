/* Divergence: a path against itself diverges by exactly zero (with and without a synthetic
 * context, batched); unknown paths are recorded as unsupported, not run; bad options are
 * errors; percentiles and standard errors are right; alternate_natural exposes a path that
 * replays one step's routing mode for the next (a cached step keyed without it), and only it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/model.h"
#include "reference/cpu/cpu_ref.h"
#include "suites/diverge.h"
#include "suites/paths.h"
#include "suites/stats_tests.h"
#include "tests/harness.h"

/* "stale-routing": cpu-ref that keeps the routing mode (forced or the router's) of its first step for
 * every later step, with the last forced experts it was given: as a CUDA graph captured with forced
 * experts and replayed, by a key that leaves the mode out, for a natural step (defects/14-*). */
static int g_stale_mode = -1;          /* -1: no step yet; 1: first step forced; 0: natural */
static const int32_t *g_stale_experts; /* the last forced_experts seen */
static vstatus stale_open(void **state, const ds_model *m, const vpath_opts *o) {
  g_stale_mode = -1;
  g_stale_experts = NULL;
  return cpu_ref_ops.open(state, m, o);
}
static vstatus stale_forward(void *state, const vstep *s, float *logits) {
  vstep c = *s;
  if (g_stale_mode < 0) g_stale_mode = s->forced_experts != NULL;
  if (s->forced_experts) g_stale_experts = s->forced_experts;
  c.forced_experts = g_stale_mode ? g_stale_experts : NULL;
  return cpu_ref_ops.forward(state, &c, logits);
}

static void test_alternate_natural(const ds_model *m) {
  static vpath_ops stale;
  stale = cpu_ref_ops;
  stale.name = "stale-routing";
  stale.open = stale_open;
  stale.forward = stale_forward;
  CHECK_OK(vpaths_register(&stale, "test_diverge.c"));
  sweep_routing uni;
  memset(&uni, 0, sizeof uni);
  CHECK_OK(sweep_routing_parse("uniform", &uni));
  CHECK_OK(sweep_routing_prepare(&uni, &m->cfg, 5));
  const char *paths[] = {"cpu-ref", "cpu-ref", "stale-routing"};
  diverge_result res[2];
  diverge_opts o = {.paths = paths, .n_paths = 3, .batch = 4, .context = 16, .tokens = 6, .seed = 5, .n_threads = 2,
                    .routing = &uni};
  CHECK_OK(diverge_run(m, &o, res));
  CHECK(res[0].kld_mean == 0 && res[1].kld_mean == 0, "forced on every step: the stale path is not told apart (%g, %g)",
        res[0].kld_mean, res[1].kld_mean);
  diverge_result_free(&res[0]);
  diverge_result_free(&res[1]);
  o.alternate_natural = true;
  CHECK_OK(diverge_run(m, &o, res));
  CHECK(res[0].supported && res[0].kld_mean == 0 && res[0].max_dlogit == 0,
        "alternating: the reference and a correct path route alike on every step (kld %g)", res[0].kld_mean);
  /* only the odd (natural) steps differ: every kld of an even step is 0, the odd ones are not */
  double even = 0, odd = 0;
  for (int t = 0; t < o.tokens; t++)
    for (int b = 0; b < o.batch; b++) *(t % 2 ? &odd : &even) += res[1].kld[t * o.batch + b];
  CHECK(even == 0 && odd / (o.batch * (o.tokens / 2)) > 1e-3,
        "alternating: the stale path diverges on the natural steps (mean %g) and only there (%g)",
        odd / (o.batch * (o.tokens / 2)), even);
  diverge_result_free(&res[0]);
  diverge_result_free(&res[1]);
  sweep_routing_free(&uni);
}

int main(void) {
  double x[5] = {5, 1, 4, 2, 3}, mean, se;
  CHECK(stat_percentile(x, 5, 50) == 3 && stat_percentile(x, 5, 100) == 5 && stat_percentile(x, 5, 25) == 2,
        "percentiles");
  CHECK(fabs(stat_percentile(x, 5, 99) - 4.96) < 1e-12, "p99 interpolates (%g)", stat_percentile(x, 5, 99));
  stat_mean_se(x, 5, &mean, &se);
  CHECK(mean == 3 && fabs(se - sqrt(2.5 / 5)) < 1e-12, "mean %g se %g", mean, se);
  float a[3] = {0, 0, 0}, b[3] = {1, 0, 0};
  double scr[6];
  double k = stat_kld(a, b, 3, scr);
  double want = log(3.0) - log(3.0) + (log(2 + exp(1.0)) - 1 + 2 * log(2 + exp(1.0))) / 3 - log(3.0);
  CHECK(fabs(k - want) < 1e-12, "KLD %g want %g", k, want);

  ds_model m;
  CHECK_OK(ds_model_open(&m, "synth:tiny", 3, 2, true));
  const char *paths[] = {"cpu-ref", "cpu-ref", "no-such-path"};
  diverge_result res[2];
  diverge_opts o = {.paths = paths, .n_paths = 3, .batch = 2, .context = 64, .tokens = 4, .seed = 9, .n_threads = 2};
  CHECK_OK(diverge_run(&m, &o, res));
  CHECK(res[0].supported && res[0].rows == 8, "cpu-ref vs itself ran (%d rows)", res[0].rows);
  CHECK(res[0].kld_mean == 0 && res[0].kld_p999 == 0 && res[0].max_dlogit == 0 && res[0].same_top_pct == 100 &&
            res[0].rms_dp == 0 && res[0].nonfinite == 0,
        "identical paths: kld %g, dlogit %g, same %g", res[0].kld_mean, res[0].max_dlogit, res[0].same_top_pct);
  CHECK(!res[1].supported && strstr(res[1].reason, "no-such-path"), "unknown path unsupported: %s", res[1].reason);
  diverge_result_free(&res[0]);
  diverge_result_free(&res[1]);
  /* ragged contexts, K+1-token verification steps and forced (skewed) routing: every row compared */
  sweep_routing zipf;
  memset(&zipf, 0, sizeof zipf);
  CHECK_OK(sweep_routing_parse("zipf:1.5", &zipf));
  CHECK_OK(sweep_routing_prepare(&zipf, &m.cfg, 9));
  const char *tp[] = {"cpu-ref", "cpu-ref:tp2"};
  diverge_opts os = {.paths = tp, .n_paths = 2, .batch = 3, .context = 40, .tokens = 3, .seed = 9, .n_threads = 2,
                     .ragged = true, .spec_k = 2, .routing = &zipf};
  CHECK_OK(diverge_run(&m, &os, res));
  CHECK(res[0].supported && res[0].rows == 3 * 3 * 3, "spec rows: %d", res[0].rows);
  bool margins = true;
  for (int i = 0; i < res[0].rows; i++) margins &= res[0].margin[i] >= 0 && res[0].top_err[i] < 1e-3 && res[0].same[i];
  CHECK(margins && res[0].kld_mean < 1e-9, "TP2 against TP1 on ragged spec steps: kld %g", res[0].kld_mean);
  diverge_result_free(&res[0]);
  os.spec_k = 16;
  CHECK(diverge_run(&m, &os, res) == V_ERR && strstr(verr_msg(), "spec"), "spec_k past 15 is an error");
  sweep_routing_free(&zipf);
  test_alternate_natural(&m);
  o.n_paths = 1;
  CHECK(diverge_run(&m, &o, res) == V_ERR, "one path is an error");
  o.n_paths = 2;
  o.context = 1 << 30;
  CHECK(diverge_run(&m, &o, res) == V_ERR && strstr(verr_msg(), "max_position_embeddings"), "context past the model");
  paths[0] = "no-such-path";
  o.context = 0;
  CHECK(diverge_run(&m, &o, res) == V_ERR, "unknown reference is an error");
  ds_model_close(&m);
  return test_finish();
}
