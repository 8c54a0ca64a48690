/* Divergence: a path against itself diverges by exactly zero (with and without a synthetic
 * context, batched); unknown paths are recorded as unsupported, not run; bad options are
 * errors; percentiles and standard errors are right; alternate_natural exposes a path that
 * replays one step's routing mode for the next (a cached step keyed without it), and only it; the
 * floor's KLD bound passes a correct path's router near-ties and fails a broad loss of accuracy. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/model.h"
#include "reference/cpu/cpu_ref.h"
#include "suites/diverge/diverge.h"
#include "suites/paths/paths.h"
#include "suites/engine/stats_tests.h"
#include "tests/cpu/path_specs.h"
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
  vrouting uni;
  memset(&uni, 0, sizeof uni);
  CHECK_OK(vrouting_parse("uniform", &uni));
  CHECK_OK(vrouting_prepare(&uni, &m->cfg, 5));
  const char *paths_s[] = {"cpu-ref", "cpu-ref", "stale-routing"};
  vpath_spec paths[sizeof paths_s / sizeof *paths_s];
  test_specs(paths_s, (int)(sizeof paths_s / sizeof *paths_s), paths);
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
  vrouting_free(&uni);
}

/* diverge_floor_judge at one point; a failure to judge is a failed check (NaN figures returned) */
static diverge_floor judge(const diverge_result *path, const diverge_result *base) {
  diverge_floor f = {.base_mean = NAN, .diff_se = NAN, .bound = NAN, .bulk = NAN, .bulk_se = NAN};
  CHECK(!diverge_floor_judge(path, base, 2, &f), "diverge_floor_judge: %s", verr_msg());
  return f;
}

/* diverge_floor_judge's mean arm: the KLD rule with a baseline (docs/verdicts.md). */
static void test_floor_bound(void) {
  /* H200, h200 plan seed 2, step 4 (k2-lite, natural routing, batch 1, context 0, 16 rows), main at
   * 038f3a4: latency met a router near-tie on rows 2 and 6 (an expert flipped against fp32, KLD ~500x
   * the bulk) and cuda-ref on none. Both engines are correct: the point must pass. The rule before
   * (k^2 x (baseline mean + 3 se), the baseline's noise alone) failed it: 0.0024 > 1.9e-4. */
  double kb[16] = {1.54756e-05, 2.33754e-05, 2.86313e-05, 3.88491e-05, 3.01578e-05, 4.43302e-05, 4.68783e-05, 4.84085e-05,
                   3.47096e-05, 4.02511e-05, 4.01845e-05, 5.31633e-05, 4.81484e-05, 4.90177e-05, 3.9617e-05, 4.45061e-05};
  double kp[16] = {1.70549e-05, 2.34754e-05, 0.0147981, 3.97592e-05, 3.16294e-05, 4.26145e-05, 0.0235213, 4.14361e-05,
                   3.85399e-05, 4.44618e-05, 4.72456e-05, 4.77407e-05, 4.38929e-05, 4.78602e-05, 3.52757e-05, 4.44982e-05};
  diverge_result b = {.rows = 16, .kld = kb}, p = {.rows = 16, .kld = kp};
  double mb, mp, se_b, se_p, dse;
  stat_mean_se(kb, 16, &mb, &se_b);
  stat_mean_se(kp, 16, &mp, &se_p);
  diverge_floor f = judge(&p, &b);
  double bound = f.bound;
  CHECK(mp > 4 * (mb + 3 * se_b) && mp <= bound, "two router near-ties of a correct path: mean %g <= bound %g "
        "(the baseline's noise alone: %g)", mp, bound, 4 * (mb + 3 * se_b));
  /* a path k^2 + 1 = 5 times as far from fp32 as the baseline on every row fails; 3 times passes */
  double k5[16], k3[16];
  for (int i = 0; i < 16; i++) k5[i] = 5 * kb[i], k3[i] = 3 * kb[i];
  diverge_result p5 = {.rows = 16, .kld = k5}, p3 = {.rows = 16, .kld = k3};
  f = judge(&p5, &b);
  bound = f.bound, mb = f.base_mean, dse = f.diff_se;
  CHECK(5 * mb > bound && fabs(dse - se_b) < 1e-15, "5x the floor on every row: %g > bound %g (se %g = the "
        "baseline's %g)", 5 * mb, bound, dse, se_b);
  CHECK(3 * mb <= judge(&p3, &b).bound, "3x the floor on every row passes");
  /* a broad defect among router near-ties in both engines (128 rows, 8 near-ties each, at other
   * rows): every row of the path 0.02 nats farther from fp32 (a near-tie's size) fails. (Where
   * near-ties make most of the floor's mean, a bulk loss smaller than k^2 x that mean passes: the
   * attention steps force uniform routing for this reason.) */
  double bb[128], pb[128];
  for (int i = 0; i < 128; i++) {
    bb[i] = 3e-5 + 1e-5 * (i % 7) / 6 + (i % 16 == 3 ? 0.02 : 0);
    pb[i] = 3e-5 + 1e-5 * (i % 5) / 4 + 0.02 + (i % 16 == 9 ? 0.02 : 0);
  }
  diverge_result b8 = {.rows = 128, .kld = bb}, p8 = {.rows = 128, .kld = pb};
  stat_mean_se(pb, 128, &mp, &se_p);
  bound = judge(&p8, &b8).bound;
  CHECK(mp > bound, "0.02 nats more on every row among near-ties: mean %g > bound %g", mp, bound);
  /* rows that are not finite in either engine are left out of both sides of the pairing */
  kb[5] = NAN;
  f = judge(&p3, &b);
  mb = f.base_mean, dse = f.diff_se;
  double rest = 0;
  for (int i = 0; i < 16; i++) rest += i == 5 ? 0 : kb[i];
  CHECK(fabs(mb - rest / 15) < 1e-18 && isfinite(dse), "paired over the 15 finite rows: mean %g want %g", mb, rest / 15);
  for (int i = 0; i < 16; i++) kb[i] = NAN;
  f = judge(&p, &b);
  CHECK(isnan(f.bound) && isnan(f.base_mean), "no paired row: no bound (NaN)");
}

/* diverge_floor_judge's bulk arm: the rule's trimmed arm, which a few huge rows cannot hide a broad loss from. */
static void test_floor_bulk(void) {
  /* H200, pr at seed 0, defect 15 (the chunked logits read at a wrong offset), batch 64 ragged K+1 at
   * context 1k, 2048 rows: latency ~1 nat from fp32 on every row, argmax agreement 0 %, and 4 rows at
   * 7.44e27 nats. The plain-mean arm passed it (mean 1.5e25 <= bound 2.2e25); the bulk arm must not. */
  enum { N = 2048 };
  static double kb[N], kp[N];
  for (int i = 0; i < N; i++) {
    kb[i] = 2.5e-5 + 2e-5 * (i % 9) / 8 + (i % 97 == 11 ? 0.18 : 0); /* the bulk, and router near-ties */
    kp[i] = 0.95 + 0.1 * (i % 13) / 12 + (i % 512 == 258 ? 7.44e27 : 0);
  }
  diverge_result b = {.rows = N, .kld = kb}, p = {.rows = N, .kld = kp};
  diverge_floor f;
  double mp, se_p, ex, se;
  stat_mean_se(kp, N, &mp, &se_p);
  CHECK(mp <= judge(&p, &b).bound, "defect 15's rows pass the plain-mean arm (mean %g)", mp);
  f = judge(&p, &b), ex = f.bulk, se = f.bulk_se;
  CHECK(ex > 3 * se && ex > 0.9, "defect 15's rows: trimmed excess %g > 3 se %g", ex, 3 * se);
  /* the seed-2 false alarm of the rule before (two near-ties in the path, none in the baseline) */
  double b2[16] = {1.54756e-05, 2.33754e-05, 2.86313e-05, 3.88491e-05, 3.01578e-05, 4.43302e-05, 4.68783e-05, 4.84085e-05,
                   3.47096e-05, 4.02511e-05, 4.01845e-05, 5.31633e-05, 4.81484e-05, 4.90177e-05, 3.9617e-05, 4.45061e-05};
  double p2[16] = {1.70549e-05, 2.34754e-05, 0.0147981, 3.97592e-05, 3.16294e-05, 4.26145e-05, 0.0235213, 4.14361e-05,
                   3.85399e-05, 4.44618e-05, 4.72456e-05, 4.77407e-05, 4.38929e-05, 4.78602e-05, 3.52757e-05, 4.44982e-05};
  diverge_result bb = {.rows = 16, .kld = b2}, pp = {.rows = 16, .kld = p2};
  f = judge(&pp, &bb), ex = f.bulk, se = f.bulk_se;
  CHECK(ex < 0, "two near-ties of a correct path: trimmed excess %g < 0", ex);
  /* k^2 + 1 = 5 times the floor on every row fails, 3 times passes; a defect on 10 % of rows is the
   * plain-mean arm's to catch (the trim cuts it), and it does */
  double k5[16], k3[16], k10[160], b10[160];
  for (int i = 0; i < 16; i++) k5[i] = 5 * b2[i], k3[i] = 3 * b2[i];
  diverge_result p5 = {.rows = 16, .kld = k5}, p3 = {.rows = 16, .kld = k3};
  f = judge(&p5, &bb), ex = f.bulk, se = f.bulk_se;
  CHECK(ex > 3 * se, "5x the floor: trimmed excess %g > 3 se %g", ex, 3 * se);
  f = judge(&p3, &bb), ex = f.bulk, se = f.bulk_se;
  CHECK(ex <= 3 * se, "3x the floor: trimmed excess %g <= 3 se %g", ex, 3 * se);
  for (int i = 0; i < 160; i++) b10[i] = b2[i % 16], k10[i] = b2[i % 16] + (i % 10 == 4 ? 0.5 : 0);
  diverge_result p10 = {.rows = 160, .kld = k10}, b10r = {.rows = 160, .kld = b10};
  stat_mean_se(k10, 160, &mp, &se_p);
  f = judge(&p10, &b10r), ex = f.bulk, se = f.bulk_se;
  CHECK(ex <= 3 * se && mp > f.bound, "0.5 nats on 1 row in 10: cut by the trim (%g), failed by the plain mean (%g)", ex, mp);
  /* non-finite rows are left out; no paired row gives NaN */
  for (int i = 0; i < 16; i++) b2[i] = NAN;
  f = judge(&pp, &bb), ex = f.bulk, se = f.bulk_se;
  CHECK(isnan(ex) && isnan(se), "no paired row: NaN");
  /* stat_trimmed_mean_se: 20 % of 10 values cut from each end, winsorized se by hand */
  double x[10] = {9, 1, 1e9, 3, 4, 5, 6, -1e9, 7, 8}, tm, tse;
  stat_trimmed_mean_se(x, 10, 0.2, &tm, &tse);
  /* kept 3..8 (mean 5.5); winsorized 3,3,3,4,5,6,7,8,8,8: mean 5.5, sum of squares 42.5 */
  CHECK(fabs(tm - 5.5) < 1e-12 && fabs(tse - sqrt(42.5 / (6 * 5))) < 1e-12, "trimmed mean %g se %g", tm, tse);
  double y[4] = {1, 2, 3, 10};
  stat_trimmed_mean_se(y, 4, 0.2, &tm, &tse); /* floor(0.8) = 0 cut: the plain mean and its se */
  double pm, pse;
  stat_mean_se(y, 4, &pm, &pse);
  CHECK(tm == pm && fabs(tse - pse) < 1e-12, "nothing cut: the plain mean %g, se %g (want %g)", tm, tse, pse);
  double one = 7;
  stat_trimmed_mean_se(&one, 1, 0.2, &tm, &tse);
  CHECK(tm == 7 && tse == 0, "one value: itself, se 0 (%g, %g)", tm, tse);
  stat_trimmed_mean_se(&one, 0, 0.2, &tm, &tse);
  CHECK(isnan(tm) && tse == 0, "no value: NaN, se 0 (%g, %g)", tm, tse);
}

int main(void) {
  test_floor_bound();
  test_floor_bulk();
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
  const char *paths_s[] = {"cpu-ref", "cpu-ref", "no-such-path"};
  vpath_spec paths[sizeof paths_s / sizeof *paths_s];
  test_specs(paths_s, (int)(sizeof paths_s / sizeof *paths_s), paths);
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
  vrouting zipf;
  memset(&zipf, 0, sizeof zipf);
  CHECK_OK(vrouting_parse("zipf:1.5", &zipf));
  CHECK_OK(vrouting_prepare(&zipf, &m.cfg, 9));
  const char *tp_s[] = {"cpu-ref", "cpu-ref:tp2"};
  vpath_spec tp[sizeof tp_s / sizeof *tp_s];
  test_specs(tp_s, (int)(sizeof tp_s / sizeof *tp_s), tp);
  diverge_opts os = {.paths = tp, .n_paths = 2, .batch = 3, .context = 40, .tokens = 3, .seed = 9, .n_threads = 2,
                     .ragged = DIVERGE_CTX_RAGGED, .spec_k = 2, .routing = &zipf};
  CHECK_OK(diverge_run(&m, &os, res));
  CHECK(res[0].supported && res[0].rows == 3 * 3 * 3, "spec rows: %d", res[0].rows);
  bool margins = true;
  for (int i = 0; i < res[0].rows; i++) margins &= res[0].margin[i] >= 0 && res[0].top_err[i] < 1e-3 && res[0].same[i];
  CHECK(margins && res[0].kld_mean < 1e-9, "TP2 against TP1 on ragged spec steps: kld %g", res[0].kld_mean);
  diverge_result_free(&res[0]);
  /* the context shapes: uniform, ragged (C x (B - b) / B) and skew (one long row, the others empty),
   * and a skewed run: TP2 equals TP1 there too */
  diverge_opts shp = {.batch = 4, .context = 40};
  const int shape_ctx[3][4] = {{40, 40, 40, 40}, {40, 30, 20, 10}, {40, 0, 0, 0}};
  for (int sk = 0; sk < 3; sk++) {
    shp.ragged = (diverge_ctx)sk;
    for (int sb = 0; sb < 4; sb++)
      CHECK(diverge_context_of(&shp, sb) == shape_ctx[sk][sb], "context shape %d, sequence %d: %d, want %d", sk, sb,
            diverge_context_of(&shp, sb), shape_ctx[sk][sb]);
  }
  os.ragged = DIVERGE_CTX_SKEW;
  CHECK_OK(diverge_run(&m, &os, res));
  CHECK(res[0].supported && res[0].rows == 3 * 3 * 3 && res[0].kld_mean < 1e-9, "TP2 against TP1 on skewed spec steps: "
        "rows %d, kld %g", res[0].rows, res[0].kld_mean);
  diverge_result_free(&res[0]);
  os.ragged = DIVERGE_CTX_RAGGED;
  os.spec_k = 16;
  CHECK(diverge_run(&m, &os, res) == V_ERR && strstr(verr_msg(), "spec"), "spec_k past 15 is an error");
  vrouting_free(&zipf);
  test_alternate_natural(&m);
  o.n_paths = 1;
  CHECK(diverge_run(&m, &o, res) == V_ERR, "one path is an error");
  o.n_paths = 2;
  o.context = 1 << 30;
  CHECK(diverge_run(&m, &o, res) == V_ERR && strstr(verr_msg(), "max_position_embeddings"), "context past the model");
  test_specs(&paths_s[2], 1, &paths[0]); /* "no-such-path": a name only */
  o.context = 0;
  CHECK(diverge_run(&m, &o, res) == V_ERR, "unknown reference is an error");
  diverge_result_free(&res[0]); /* a failed run may leave the rows it allocated (the suite frees them) */
  ds_model_close(&m);
  return test_finish();
}
