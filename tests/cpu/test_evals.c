/* Ground-truth evals on constructed checkpoints: cpu-ref scores 100% on mrcr (256 and 1k
 * contexts, 2 and 8 near-duplicate needles) and chain (greedy and seeded sampling), and a
 * deliberately broken model (the MoE copy expert's combine weight without the routed
 * scaling factor; attention with a 100x smaller score scale) scores near 0%. Plus the
 * paired statistics the comparisons use. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/construct.h"
#include "suites/evals/evals.h"
#include "suites/engine/stats_tests.h"
#include "tests/cpu/path_specs.h"
#include "tests/harness.h"

static double mrcr_score(const ds_model *m, const construct_layout *L, double *min_margin) {
  const char *paths_s[] = {"cpu-ref"};
  vpath_spec paths[sizeof paths_s / sizeof *paths_s];
  test_specs(paths_s, (int)(sizeof paths_s / sizeof *paths_s), paths);
  const long bins[] = {256, 1024}, needles[] = {2, 8};
  mrcr_opts o = {.paths = paths, .n_paths = 1, .bins = bins, .n_bins = 2, .needles = needles, .n_needles = 2,
                 .samples = 2, .batch = 2, .chunk = 512, .seed = 11, .n_threads = 2};
  mrcr_result r;
  if (mrcr_run(m, L, &o, &r) != V_OK) { fprintf(stderr, "mrcr: %s\n", verr_msg()); return -1; }
  long ok = 0;
  double mm = INFINITY;
  for (int i = 0; i < r.n_queries; i++) { ok += r.pr[0].correct[i]; if (r.pr[0].margin[i] < mm) mm = r.pr[0].margin[i]; }
  double s = (double)ok / r.n_queries;
  if (min_margin) *min_margin = mm;
  CHECK(r.n_queries == 2 * 2 * (2 + 8), "query count %d", r.n_queries);
  mrcr_result_free(&r);
  return s;
}

static double chain_score(const ds_model *m, const construct_layout *L, float temp, int *first_wrong0) {
  const char *paths_s[] = {"cpu-ref"};
  vpath_spec paths[sizeof paths_s / sizeof *paths_s];
  test_specs(paths_s, (int)(sizeof paths_s / sizeof *paths_s), paths);
  const long hops[] = {40, 96};
  chain_opts o = {.paths = paths, .n_paths = 1, .hops = hops, .n_hops = 2, .samples = 3, .batch = 3,
                  .sampling = {.temperature = temp, .top_p = 1.0f, .seed = 5}, .seed = 2, .n_threads = 2};
  chain_result r;
  if (chain_run(m, L, &o, &r) != V_OK) { fprintf(stderr, "chain: %s\n", verr_msg()); return -1; }
  long ok = 0;
  for (int i = 0; i < 3 * 2; i++) ok += r.pr[0].correct[i];
  if (first_wrong0) *first_wrong0 = r.first_wrong[0][0];
  chain_result_free(&r);
  return ok / 6.0;
}

static vtensor *find(ds_model *m, const char *name) {
  for (int i = 0; i < m->n_synth; i++)
    if (!strcmp(m->synth[i].name, name)) return &m->synth[i];
  return NULL;
}

static void scale(vtensor *t, int64_t from, int64_t to, float f) {
  for (int64_t i = from; i < to; i++) ((uint16_t *)t->data)[i] = f32_to_bf16(bf16_to_f32(((uint16_t *)t->data)[i]) * f);
}

int main(void) {
  /* statistics */
  CHECK(stat_mcnemar_p(0, 0) == 1.0, "McNemar no discordance");
  CHECK(fabs(stat_mcnemar_p(0, 10) - 2.0 / 1024) < 1e-12, "McNemar 0/10 = %g", stat_mcnemar_p(0, 10));
  CHECK(fabs(stat_mcnemar_p(3, 7) - 0.34375) < 1e-9, "McNemar 3/7 = %g", stat_mcnemar_p(3, 7));
  CHECK(fabs(stat_chi2_sf(3.841459, 1) - 0.05) < 1e-5, "chi2 sf(3.84, 1) = %g", stat_chi2_sf(3.841459, 1));
  CHECK(fabs(stat_chi2_sf(18.307, 10) - 0.05) < 1e-4, "chi2 sf(18.3, 10) = %g", stat_chi2_sf(18.307, 10));
  long fair[4] = {250, 250, 250, 250}, skew[4] = {400, 200, 200, 200};
  double pr4[4] = {0.25, 0.25, 0.25, 0.25}, c2, p;
  int dof;
  stat_chi2_gof(fair, pr4, 4, &c2, &dof, &p);
  CHECK(c2 == 0 && dof == 3 && p == 1.0, "chi2 of exact frequencies: %g %d %g", c2, dof, p);
  stat_chi2_gof(skew, pr4, 4, &c2, &dof, &p);
  CHECK(p < 1e-10, "chi2 rejects skewed draws (p %g)", p);
  double xs[3] = {1, 2, 3}, ys[3] = {1, 0.5, 0};
  CHECK(fabs(stat_auc_normalized(xs, ys, 3) - 0.5) < 1e-12, "AUC");

  /* mrcr */
  ds_model m;
  construct_layout L;
  CHECK_OK(construct_model_open(&m, "recall-mrcr", NULL, 0, &L));
  double mm;
  double s = mrcr_score(&m, &L, &mm);
  printf("mrcr cpu-ref: score %.3f, min margin %.2f\n", s, mm);
  CHECK(s == 1.0, "cpu-ref mrcr score %.3f == 1", s);
  CHECK(mm > 5, "cpu-ref mrcr min margin %.2f > 5", mm);
  int32_t tok[300], q[8], a[8];
  double d[8];
  CHECK(mrcr_prompt(&L, 256, 9, 0, 1, tok, q, a, d) != V_OK, "9 needles > family 8 rejected");
  CHECK_OK(mrcr_prompt(&L, 256, 8, 0, 1, tok, q, a, d));
  int pairs = 0;
  for (int i = 0; i < 248; i++) pairs += tok[i] >= L.pair0 && tok[i] < L.query0;
  CHECK(pairs == 8, "8 needles placed (%d)", pairs);
  CHECK(d[0] >= 0 && d[0] < 1, "depth in [0,1)");

  char name[160];
  snprintf(name, sizeof name, "model.layers.%d.mlp.experts.%d.down_proj.weight", L.circuit_layer, L.copy_expert);
  vtensor *dn = find(&m, name);
  CHECK(dn != NULL, "copy expert present");
  if (dn) {
    scale(dn, 0, vtensor_numel(dn), 1 / 2.5f); /* combine weight without routed_scaling_factor */
    s = mrcr_score(&m, &L, NULL);
    printf("mrcr with a broken MoE combine weight: %.3f\n", s);
    CHECK(s <= 0.05, "broken MoE combine: mrcr score %.3f near 0", s);
    scale(dn, 0, vtensor_numel(dn), 2.5f);
  }
  snprintf(name, sizeof name, "model.layers.%d.self_attn.kv_b_proj.weight", L.circuit_layer);
  vtensor *kb = find(&m, name);
  int64_t c = kb ? kb->shape[1] : 0, r0 = (int64_t)L.circuit_head * (m.cfg.qk_nope_head_dim + m.cfg.v_head_dim);
  if (kb) {
    scale(kb, r0 * c, (r0 + m.cfg.qk_nope_head_dim) * c, 0.01f);
    s = mrcr_score(&m, &L, NULL);
    printf("mrcr with attention scores / 100: %.3f\n", s);
    CHECK(s <= 0.10, "broken attention scale: mrcr score %.3f near 0", s);
  }
  ds_model_close(&m);

  /* chain */
  CHECK_OK(construct_model_open(&m, "recall-chain", NULL, 0, &L));
  int fw = -1;
  s = chain_score(&m, &L, 0, &fw);
  printf("chain cpu-ref greedy: %.3f (first wrong %d)\n", s, fw);
  CHECK(s == 1.0 && fw == 0, "cpu-ref greedy chain %.3f == 1", s);
  s = chain_score(&m, &L, 1.0f, NULL);
  CHECK(s == 1.0, "cpu-ref chain at temperature 1: %.3f == 1 (answer logit ~24)", s);
  int fw1 = -1, fw2 = -2;
  double s1 = chain_score(&m, &L, 4.0f, &fw1), s2 = chain_score(&m, &L, 4.0f, &fw2);
  CHECK(s1 == s2 && fw1 == fw2 && fw1 > 0, "seeded sampling at T=4 is reproducible and leaves the chain (%d %d)", fw1, fw2);
  snprintf(name, sizeof name, "model.layers.%d.mlp.shared_experts.down_proj.weight", L.circuit_layer);
  vtensor *sh = find(&m, name);
  if (sh) {
    scale(sh, 0, vtensor_numel(sh), 0.0f); /* shared expert output lost */
    s = chain_score(&m, &L, 0, &fw);
    printf("chain without the shared expert: %.3f (first wrong %d)\n", s, fw);
    CHECK(s == 0 && fw == 1, "no shared expert: the chain breaks at hop 1 (%.3f, %d)", s, fw);
  }
  ds_model_close(&m);
  return test_finish();
}
