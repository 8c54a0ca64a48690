/* The HF config.json of the DeepSeek-V3 family (DeepseekV3ForCausalLM; Kimi K2 uses it).
 * Every field HF's DeepseekV3Config reads is here; derived sizes are computed once. */
#ifndef VOUCH_MODEL_CONFIG_H
#define VOUCH_MODEL_CONFIG_H

#define DS_MAX_ROPE_DIM 1024 /* largest qk_rope_head_dim accepted (K2: 64) */

#include <stdbool.h>
#include <stdint.h>

#include "common/vstatus.h"

typedef struct {
  bool enabled;                  /* rope_scaling present with type "yarn" */
  double factor;                 /* context extension factor (K2: 32) */
  int original_max_position_embeddings; /* pretraining context (K2: 4096) */
  double beta_fast, beta_slow;   /* ramp bounds in rotations (HF defaults 32, 1) */
  double mscale, mscale_all_dim; /* 0 when absent */
  bool truncate;                 /* HF's "truncate" (default true): floor/ceil the ramp bounds */
} ds_yarn;

typedef struct {
  char architecture[64];   /* "DeepseekV3ForCausalLM" */
  char model_type[32];     /* "deepseek_v3" or "kimi_k2" */
  int vocab_size;
  int hidden_size;         /* d_model (K2: 7168) */
  int intermediate_size;   /* dense-layer MLP width (K2: 18432) */
  int moe_intermediate_size; /* per-expert MLP width (K2: 2048) */
  int num_hidden_layers;
  int num_attention_heads; /* H (K2: 64) */
  int num_key_value_heads; /* HF field; MLA expands K/V to H heads, so it must equal H */
  int n_shared_experts;    /* shared expert width = n_shared * moe_intermediate */
  int n_routed_experts;    /* E (K2: 384) */
  int num_experts_per_tok; /* top-k (K2: 8) */
  int n_group, topk_group; /* group-limited routing: E split in n_group groups, keep topk_group */
  double routed_scaling_factor;
  bool norm_topk_prob;
  int first_k_dense_replace; /* layers [0, k) are dense, the rest MoE (HF ignores moe_layer_freq) */
  int moe_layer_freq;        /* read and recorded; HF's DeepseekV3 does not use it */
  int q_lora_rank;           /* 0 when config says null: q_proj straight from hidden */
  int kv_lora_rank;          /* latent width (K2: 512) */
  int qk_nope_head_dim;      /* per-head non-RoPE q/k dims (K2: 128) */
  int qk_rope_head_dim;      /* per-head RoPE dims, shared k_rot (K2: 64) */
  int v_head_dim;            /* per-head value dims (K2: 128) */
  int max_position_embeddings;
  double rope_theta;
  bool rope_interleave;      /* rope dims stored interleaved (pairs), HF de-interleaves */
  ds_yarn yarn;
  double rms_norm_eps;
  bool tie_word_embeddings;
  bool attention_bias;       /* must be false: vouch does not implement projection biases */
  char hidden_act[16];       /* "silu" */
  char torch_dtype[16];      /* dtype written in config ("bfloat16") */
  int bos_token_id, eos_token_id; /* -1 when absent */
  /* derived */
  int qk_head_dim;           /* nope + rope */
} ds_config;

/* Parses config.json at `path`. Unknown architecture/model_type, missing required fields,
 * wrong JSON types and inconsistent sizes are errors naming the file and field. */
vstatus ds_config_load(ds_config *cfg, const char *path);
/* Same, from a JSON text (`origin` names it in errors). */
vstatus ds_config_parse(ds_config *cfg, const char *json, const char *origin);
/* Checks sizes for consistency (positive, divisibility, ranges). */
vstatus ds_config_validate(const ds_config *cfg, const char *origin);
/* Writes config.json in HF's format (loadable by transformers). */
vstatus ds_config_write(const ds_config *cfg, const char *path);
/* Returns a newly allocated JSON text of the config (caller frees). */
char *ds_config_to_json(const ds_config *cfg);

/* True when layer `l` uses the MoE block (HF: l >= first_k_dense_replace). */
static inline bool ds_layer_is_moe(const ds_config *c, int l) {
  return c->n_routed_experts > 0 && l >= c->first_k_dense_replace;
}

/* YaRN helpers, exactly as HF computes them (double precision, then float32 where HF uses it). */
double ds_yarn_get_mscale(double scale, double mscale);
/* Softmax scale: qk_head_dim^-0.5, times mscale(factor, mscale_all_dim)^2 under YaRN. */
double ds_attention_scale(const ds_config *c);
/* Fills inv_freq[qk_rope_head_dim/2] (float32, as HF) and returns the cos/sin attention factor. */
double ds_rope_inv_freq(const ds_config *c, float *inv_freq);

#endif

/* Applies "key=value" (JSON value; nested keys with dots, e.g. rope_scaling.factor=8,
 * q_lora_rank=null) to the config, then re-parses and validates it. */
vstatus ds_config_override(ds_config *cfg, const char *kv);
