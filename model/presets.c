/* Built-in model presets for synthetic checkpoints.
 *  tiny:     a few M params, every architecture feature on (q LoRA, 4 groups with topk_group 2,
 *            shared expert, 1 dense + 2 MoE layers, YaRN with positions past the original window);
 *            16 narrow heads so that every TP degree 1..16 divides heads, widths and vocabulary.
 *  small:    CPU-friendly but realistic proportions (~0.25 B params).
 *  k2-slice: Kimi K2's dimensions, 1 dense + 2 MoE layers by default (~37 B params).
 *  k2-lite:  Kimi K2's vocabulary (163840), heads (64, MLA dims 128/64/128, kv LoRA 512, q LoRA
 *            1536), experts (384, top 8, one group, 1 shared) and RoPE/YaRN, on a hidden width of
 *            1024 and expert width 256 (1 dense + 1 MoE layer, ~0.72 B params): the shapes the
 *            attention, router and MoE kernels specialize on, small enough for an fp32 reference
 *            (cpu-ref) to run next to the GPU paths as the noise floor. */
#include <stdio.h>
#include <string.h>

#include "model/model.h"

void ds_preset_defaults(ds_config *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->architecture, sizeof c->architecture, "DeepseekV3ForCausalLM");
  snprintf(c->model_type, sizeof c->model_type, "deepseek_v3");
  snprintf(c->hidden_act, sizeof c->hidden_act, "silu");
  snprintf(c->torch_dtype, sizeof c->torch_dtype, "bfloat16");
  c->rms_norm_eps = 1e-6;
  c->rope_interleave = true;
  c->norm_topk_prob = true;
  c->moe_layer_freq = 1;
  c->first_k_dense_replace = 1;
  c->bos_token_id = 0;
  c->eos_token_id = 1;
}

static void yarn(ds_config *c, double factor, int orig, double mscale) {
  c->yarn.enabled = true;
  c->yarn.factor = factor;
  c->yarn.original_max_position_embeddings = orig;
  c->yarn.beta_fast = 32;
  c->yarn.beta_slow = 1;
  c->yarn.mscale = mscale;
  c->yarn.mscale_all_dim = mscale;
  c->yarn.truncate = true;
}

/* Kimi K2's dimensions (config.json of moonshotai/Kimi-K2), 1 dense + 2 MoE layers. */
static void kimi_k2(ds_config *c) {
  snprintf(c->model_type, sizeof c->model_type, "kimi_k2");
  c->vocab_size = 163840; c->hidden_size = 7168; c->intermediate_size = 18432;
  c->moe_intermediate_size = 2048; c->num_hidden_layers = 3; c->num_attention_heads = 64;
  c->n_shared_experts = 1; c->n_routed_experts = 384; c->num_experts_per_tok = 8;
  c->n_group = 1; c->topk_group = 1; c->routed_scaling_factor = 2.827;
  c->q_lora_rank = 1536; c->kv_lora_rank = 512; c->qk_nope_head_dim = 128; c->qk_rope_head_dim = 64;
  c->v_head_dim = 128; c->max_position_embeddings = 131072; c->rope_theta = 50000;
  c->bos_token_id = 163584; c->eos_token_id = 163585;
  yarn(c, 32.0, 4096, 1.0);
}

const char *ds_preset_names(void) { return "tiny small k2-slice k2-lite"; }

vstatus ds_preset_config(const char *name, int layers, ds_config *c) {
  ds_preset_defaults(c);
  if (strcmp(name, "tiny") == 0) {
    c->vocab_size = 1024; c->hidden_size = 256; c->intermediate_size = 512;
    c->moe_intermediate_size = 64; c->num_hidden_layers = 3; c->num_attention_heads = 16;
    c->n_shared_experts = 1; c->n_routed_experts = 16; c->num_experts_per_tok = 4;
    c->n_group = 4; c->topk_group = 2; c->routed_scaling_factor = 2.5;
    c->q_lora_rank = 96; c->kv_lora_rank = 64; c->qk_nope_head_dim = 16; c->qk_rope_head_dim = 16;
    c->v_head_dim = 16; c->max_position_embeddings = 16384; c->rope_theta = 10000;
    yarn(c, 4.0, 4096, 1.0);
  } else if (strcmp(name, "small") == 0) {
    c->vocab_size = 32000; c->hidden_size = 1024; c->intermediate_size = 2816;
    c->moe_intermediate_size = 256; c->num_hidden_layers = 4; c->num_attention_heads = 16;
    c->n_shared_experts = 1; c->n_routed_experts = 64; c->num_experts_per_tok = 6;
    c->n_group = 8; c->topk_group = 4; c->routed_scaling_factor = 2.5;
    c->q_lora_rank = 384; c->kv_lora_rank = 256; c->qk_nope_head_dim = 64; c->qk_rope_head_dim = 32;
    c->v_head_dim = 64; c->max_position_embeddings = 131072; c->rope_theta = 10000;
    yarn(c, 32.0, 4096, 1.0);
  } else if (strcmp(name, "k2-slice") == 0) {
    kimi_k2(c);
  } else if (strcmp(name, "k2-lite") == 0) {
    kimi_k2(c); /* narrow widths, K2's vocabulary, heads and experts */
    c->hidden_size = 1024; c->intermediate_size = 2816; c->moe_intermediate_size = 256; c->num_hidden_layers = 2;
  } else {
    return VERR("unknown preset '%s' (known: %s)", name, ds_preset_names());
  }
  if (layers > 0) {
    c->num_hidden_layers = layers;
    if (c->first_k_dense_replace > layers) c->first_k_dense_replace = layers;
  } else if (layers < 0) {
    return VERR("--layers must be > 0 (got %d)", layers);
  }
  c->num_key_value_heads = c->num_attention_heads;
  c->qk_head_dim = c->qk_nope_head_dim + c->qk_rope_head_dim;
  return ds_config_validate(c, name);
}
