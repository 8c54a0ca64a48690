/* Divergence: a path against itself diverges by exactly zero (with and without a synthetic
 * context, batched); unknown paths are recorded as unsupported, not run; bad options are
 * errors; percentiles and standard errors are right. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/model.h"
#include "suites/diverge.h"
#include "suites/stats_tests.h"
#include "tests/harness.h"

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
