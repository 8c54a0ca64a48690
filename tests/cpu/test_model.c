/* config.json parsing and validation, presets, synthetic weights (slice independence),
 * and the synth -> safetensors -> load round trip. */
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <sys/stat.h>

#include "model/model.h"
#include "tests/harness.h"

static const char *GOOD =
    "{\"architectures\":[\"DeepseekV3ForCausalLM\"],\"model_type\":\"deepseek_v3\",\"vocab_size\":100,"
    "\"hidden_size\":64,\"intermediate_size\":128,\"moe_intermediate_size\":16,\"num_hidden_layers\":2,"
    "\"num_attention_heads\":2,\"num_key_value_heads\":2,\"n_shared_experts\":1,\"n_routed_experts\":8,"
    "\"num_experts_per_tok\":2,\"n_group\":2,\"topk_group\":1,\"routed_scaling_factor\":2.5,"
    "\"first_k_dense_replace\":1,\"q_lora_rank\":null,\"kv_lora_rank\":16,\"qk_nope_head_dim\":8,"
    "\"qk_rope_head_dim\":4,\"v_head_dim\":8,\"max_position_embeddings\":256,\"rope_theta\":10000,"
    "\"norm_topk_prob\":true,\"rope_scaling\":{\"type\":\"yarn\",\"factor\":4,"
    "\"original_max_position_embeddings\":64,\"mscale\":1.0,\"mscale_all_dim\":1.0}}";

/* Replaces the first occurrence of `from` in GOOD by `to`. */
static char *mutate(const char *from, const char *to) {
  static char buf[4096];
  const char *at = strstr(GOOD, from);
  if (!at) { fprintf(stderr, "mutate: '%s' not in GOOD\n", from); exit(2); }
  snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - GOOD), GOOD, to, at + strlen(from));
  return buf;
}

static void expect_error(const char *json, const char *needle) {
  ds_config c;
  vstatus s = ds_config_parse(&c, json, "cfg.json");
  CHECK(s == V_ERR, "expected an error mentioning '%s'", needle);
  CHECK(strstr(verr_msg(), needle) != NULL && strstr(verr_msg(), "cfg.json") != NULL,
        "message '%s' should name cfg.json and '%s'", verr_msg(), needle);
}

static void test_config(void) {
  ds_config c;
  CHECK_OK(ds_config_parse(&c, GOOD, "good"));
  CHECK(c.q_lora_rank == 0, "null q_lora_rank -> 0");
  CHECK(c.qk_head_dim == 12, "qk_head_dim derived");
  CHECK(c.yarn.enabled && c.yarn.factor == 4 && c.yarn.beta_fast == 32 && c.yarn.beta_slow == 1, "yarn defaults");
  CHECK(c.rope_interleave, "rope_interleave defaults to true (HF)");
  CHECK(!ds_layer_is_moe(&c, 0) && ds_layer_is_moe(&c, 1), "first_k_dense_replace");
  /* write -> parse round trip */
  char *txt = ds_config_to_json(&c);
  ds_config c2;
  CHECK_OK(ds_config_parse(&c2, txt, "roundtrip"));
  free(txt);
  CHECK(c2.hidden_size == c.hidden_size && c2.yarn.factor == c.yarn.factor && c2.q_lora_rank == 0 &&
        c2.n_group == c.n_group && c2.routed_scaling_factor == c.routed_scaling_factor, "config round trip");

  expect_error("{not json", "not valid JSON");
  expect_error("[1,2]", "top level");
  expect_error(mutate("DeepseekV3ForCausalLM", "LlamaForCausalLM"), "architectures");
  expect_error(mutate("\"model_type\":\"deepseek_v3\"", "\"model_type\":\"llama\""), "model_type");
  expect_error(mutate("\"hidden_size\":64,", ""), "'hidden_size' is missing");
  expect_error(mutate("\"hidden_size\":64", "\"hidden_size\":\"64\""), "'hidden_size' must be an integer");
  expect_error(mutate("\"hidden_size\":64", "\"hidden_size\":64.5"), "hidden_size");
  expect_error(mutate("\"n_group\":2", "\"n_group\":3"), "n_group");
  expect_error(mutate("\"topk_group\":1", "\"topk_group\":5"), "topk_group");
  expect_error(mutate("\"num_key_value_heads\":2", "\"num_key_value_heads\":1"), "num_key_value_heads");
  expect_error(mutate("\"type\":\"yarn\"", "\"type\":\"linear\""), "rope_scaling");
  expect_error(mutate("\"qk_rope_head_dim\":4", "\"qk_rope_head_dim\":5"), "qk_rope_head_dim");
  expect_error(mutate("\"norm_topk_prob\":true", "\"norm_topk_prob\":1"), "norm_topk_prob");
  expect_error(mutate("\"vocab_size\":100", "\"vocab_size\":0"), "vocab_size");
}

static void test_yarn(void) {
  ds_config c;
  CHECK_OK(ds_preset_config("k2-slice", 0, &c));
  float inv[32];
  double af = ds_rope_inv_freq(&c, inv);
  /* mscale == mscale_all_dim -> cos/sin factor exactly 1 (HF) */
  CHECK(af == 1.0, "K2 attention factor %g == 1", af);
  /* the highest-frequency dims are extrapolated (unchanged), the lowest interpolated (/factor) */
  CHECK(inv[0] == 1.0f, "inv_freq[0] = %g", inv[0]);
  float plain_last = 1.0f / powf(50000.0f, 62.0f / 64.0f);
  CHECK(fabsf(inv[31] - plain_last / 32.0f) < 1e-12f, "inv_freq[31] = %g, want %g", inv[31], plain_last / 32);
  double m = 0.1 * log(32.0) + 1.0;
  CHECK(fabs(ds_attention_scale(&c) - m * m / sqrt(192.0)) < 1e-15, "softmax scale with mscale_all_dim");
}

static void test_presets_and_specs(void) {
  ds_config c;
  CHECK(ds_preset_config("nope", 0, &c) == V_ERR && strstr(verr_msg(), "tiny"), "unknown preset lists known ones");
  CHECK_OK(ds_preset_config("k2-slice", 0, &c));
  ds_model m;
  CHECK_OK(ds_model_open(&m, "synth:k2-slice", 0, 0, false));
  ds_model_stats st;
  ds_model_count(&m, &st);
  /* Kimi K2 slice, 1 dense + 2 MoE layers: about 37 B parameters */
  CHECK(st.params_total > 36.5e9 && st.params_total < 38.5e9, "k2-slice params %.3f B", st.params_total / 1e9);
  CHECK(m.layers[1].is_moe && !m.layers[0].is_moe && m.layers[2].exp_down[383] != NULL, "k2-slice layers bound");
  ds_model_close(&m);
  CHECK_OK(ds_model_open(&m, "synth:tiny", 0, 0, false));
  ds_model_count(&m, &st);
  CHECK(st.params_total > 1e6 && st.params_total < 10e6, "tiny has a few M params (%.2f M)", st.params_total / 1e6);
  CHECK(m.cfg.q_lora_rank > 0 && m.cfg.n_group > 1 && m.cfg.topk_group < m.cfg.n_group && m.cfg.n_shared_experts > 0 &&
        m.cfg.yarn.enabled && m.cfg.first_k_dense_replace == 1 && m.cfg.num_hidden_layers == 3,
        "tiny has every feature on");
  ds_model_close(&m);
}

/* Two slices of a synthetic tensor generated independently equal the whole tensor's slices. */
static void test_synth_slices(void) {
  ds_config c;
  CHECK_OK(ds_preset_config("tiny", 0, &c));
  ds_tensor_spec *specs;
  int n;
  CHECK_OK(ds_tensor_specs(&c, &specs, &n));
  const ds_tensor_spec *s = NULL;
  for (int i = 0; i < n; i++) if (strstr(specs[i].name, "layers.1.mlp.experts.3.up_proj")) s = &specs[i];
  CHECK(s != NULL, "expert tensor listed");
  if (!s) return;
  int64_t numel = s->shape[0] * s->shape[1];
  uint16_t *whole = malloc((size_t)numel * 2), *a = malloc(1000 * 2), *b = malloc(777 * 2);
  ds_synth_fill(whole, s, 42, 0, numel);
  ds_synth_fill(b, s, 42, 5000, 777); /* generated before a, in another order */
  ds_synth_fill(a, s, 42, 123, 1000);
  CHECK(memcmp(a, whole + 123, 1000 * 2) == 0, "slice [123, 1123) matches");
  CHECK(memcmp(b, whole + 5000, 777 * 2) == 0, "slice [5000, 5777) matches");
  ds_synth_fill(a, s, 43, 123, 1000);
  CHECK(memcmp(a, whole + 123, 1000 * 2) != 0, "another seed gives other values");
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < numel; i++) { float v = bf16_to_f32(whole[i]); sum += v; sq += v * v; }
  double sd = sqrt(sq / numel), want = 1.0 / sqrt(s->fan_in);
  CHECK(fabs(sum / numel) < 0.01 * want * 10 && fabs(sd - want) < 0.02 * want, "std %.5f ~ 1/sqrt(fan_in) %.5f", sd, want);
  free(whole); free(a); free(b); free(specs);
}

/* synth:tiny -> safetensors (sharded) -> load: identical tensors, then a corrupted shape is caught. */
static void test_roundtrip(void) {
  ds_model m;
  CHECK_OK(ds_model_open(&m, "synth:tiny", 7, 0, true));
  char dir[512], cfg[600];
  snprintf(dir, sizeof dir, "%s/tiny", test_tmpdir());
  mkdir(dir, 0755);
  snprintf(cfg, sizeof cfg, "%s/config.json", dir);
  CHECK_OK(st_write(dir, m.synth, m.n_synth, 2u << 20, NULL, NULL));
  CHECK_OK(ds_config_write(&m.cfg, cfg));
  ds_model d;
  CHECK_OK(ds_model_open(&d, dir, 0, 0, false));
  CHECK(d.st.n_files >= 2, "sharded into %d files", d.st.n_files);
  int same = 0;
  for (int i = 0; i < m.n_synth; i++) {
    const vtensor *t = st_find(&d.st, m.synth[i].name);
    same += t && vtensor_nbytes(t) == vtensor_nbytes(&m.synth[i]) && !memcmp(t->data, m.synth[i].data, vtensor_nbytes(t));
  }
  CHECK(same == m.n_synth, "%d of %d tensors identical after the round trip", same, m.n_synth);
  ds_model_close(&d);
  /* a checkpoint whose config disagrees with its tensors is rejected, naming the tensor */
  ds_config bad = m.cfg;
  bad.kv_lora_rank = 32;
  CHECK_OK(ds_config_write(&bad, cfg));
  vstatus s = ds_model_open(&d, dir, 0, 0, false);
  CHECK(s == V_ERR && strstr(verr_msg(), "kv_a_proj_with_mqa") && strstr(verr_msg(), "shape"),
        "shape mismatch named: %s", verr_msg());
  ds_model_close(&m);
}

int main(void) {
  test_config();
  test_yarn();
  test_presets_and_specs();
  test_synth_slices();
  test_roundtrip();
  return test_finish();
}
