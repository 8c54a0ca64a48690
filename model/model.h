/* A DeepSeek-V3-family checkpoint in host memory: its config and every weight, bound to
 * the per-layer structure the forward pass walks. Weights come from safetensors on disk
 * (mmap, zero copy) or are synthesized from the counter-based RNG (model/synth.h). */
#ifndef VOUCH_MODEL_MODEL_H
#define VOUCH_MODEL_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/vstatus.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "model/synth_rule.h"
#include "common/tensor.h"

/* One decoder layer's weights. Linear weights are [out_features, in_features] as in HF.
 * H = heads, D = hidden, r = qk_rope_head_dim, n = qk_nope_head_dim, v = v_head_dim. */
typedef struct {
  const vtensor *input_layernorm;          /* [D] */
  const vtensor *q_a_proj;                 /* [q_lora, D]; NULL without q LoRA */
  const vtensor *q_a_layernorm;            /* [q_lora]; NULL without q LoRA */
  const vtensor *q_b_proj;                 /* [H*(n+r), q_lora]; NULL without q LoRA */
  const vtensor *q_proj;                   /* [H*(n+r), D]; only without q LoRA */
  const vtensor *kv_a_proj_with_mqa;       /* [kv_lora + r, D] */
  const vtensor *kv_a_layernorm;           /* [kv_lora] */
  const vtensor *kv_b_proj;                /* [H*(n+v), kv_lora]: per head n rows of k_nope then v rows of value */
  const vtensor *o_proj;                   /* [D, H*v] */
  const vtensor *post_attention_layernorm; /* [D] */
  bool is_moe;
  /* dense MLP (is_moe == false) */
  const vtensor *gate_proj, *up_proj;      /* [intermediate, D] */
  const vtensor *down_proj;                /* [D, intermediate] */
  /* MoE (is_moe == true) */
  const vtensor *router;                   /* mlp.gate.weight [E, D] */
  const vtensor *router_bias;              /* mlp.gate.e_score_correction_bias [E] (selection only) */
  const vtensor **exp_gate, **exp_up;      /* [E] pointers to [moe_inter, D] */
  const vtensor **exp_down;                /* [E] pointers to [D, moe_inter] */
  const vtensor *sh_gate, *sh_up;          /* [moe_inter * n_shared, D] */
  const vtensor *sh_down;                  /* [D, moe_inter * n_shared] */
} ds_layer;

/* One tensor the architecture needs: its name and shape (from the config alone). */
typedef struct {
  char name[128];
  vdtype dtype;                      /* dtype synth writes (bf16; the router bias f32) */
  int ndim;
  int64_t shape[2];
  int fan_in;                        /* in_features for linear weights, 0 for norms/biases */
  int layer;                         /* decoder layer, -1 for embed/norm/lm_head */
  synth_kind kind;                   /* how synth generates it (model/synth_rule.h) */
} ds_tensor_spec;

/* How a tensor with no host data (data NULL: a synthetic model opened with
 * materialize=false, or a TP shard of one) is generated from the counter-based RNG: a
 * rows x cols block of the FULL synthetic tensor `spec`, block element (i, j) being
 * element start + i*stride + j of the full tensor (row-major, ds_synth_fill's index).
 *   whole tensor (ds_model_synth):   start 0, rows x cols = the full shape, stride = cols
 *   block of rows [r0, r0+rows):     start r0 * fcols, stride = cols = fcols (contiguous;
 *                                     TP splits "rows" and "vocab" of model/shard.h)
 *   block of columns [c0, c0+cols):  start c0, stride = fcols > cols (TP split "cols")
 * where fcols is the full tensor's row length. Only read while the tensor's data is NULL. */
typedef struct {
  ds_tensor_spec spec; /* the full tensor's spec: name (-> RNG key), kind, fan_in, dtype, full shape */
  int64_t start;       /* elements: index of block element (0, 0) in the full tensor */
  int64_t rows, cols;  /* elements: the block's shape (cols 1 for a 1-D tensor) */
  int64_t stride;      /* elements: distance between consecutive block rows in the full tensor */
} ds_synth_slice;

typedef struct ds_model_s {
  ds_config cfg;
  const vtensor *embed;      /* model.embed_tokens.weight [vocab, D] */
  const vtensor *final_norm; /* model.norm.weight [D] */
  const vtensor *lm_head;    /* lm_head.weight [vocab, D] (= embed when tied) */
  ds_layer *layers;          /* [num_hidden_layers] */
  /* storage: exactly one of the two is used */
  st_set st;                 /* loaded from disk */
  vtensor *synth;            /* synthesized tensors [n_synth] (data owned, or NULL when not materialized) */
  ds_synth_slice *lazy;      /* [n_synth] how synth[i] is generated while its data is NULL (synthetic models
                              * and their TP shards; NULL when the tensors come from safetensors) */
  int n_synth;
  bool is_synthetic;
  uint64_t seed;             /* synthetic: the RNG seed */
  char preset[32];           /* synthetic: preset name */
  char source[600];          /* where the weights came from, for messages and manifests */
  /* tensor parallelism (model/shard.h): a model built by ds_shard_model is rank tp_rank's shard
   * of tp_size; a full model has tp_size 0 (read as 1) and vocab_end 0 (read as vocab_size) */
  int tp_rank, tp_size;      /* this shard's rank, the TP degree */
  int vocab_begin, vocab_end;/* lm_head rows cover vocabulary ids [vocab_begin, vocab_end) */
  /* expert parallelism (model/shard.h ds_shard_model_ep): this shard holds the routed experts
   * [expert_begin, expert_end) whole; the others are absent (not in synth, bound as NULL).
   * 0, 0 on a full model or a TP shard: every routed expert (ds_model_expert_range) */
  int expert_begin, expert_end;
} ds_model;


/* Lists every tensor of the architecture, in a fixed order; returns a malloc'ed array. */
vstatus ds_tensor_specs(const ds_config *cfg, ds_tensor_spec **out, int *n);

/* Opens a model from `spec`: a directory (or config.json path) with safetensors, or
 * "synth:PRESET" (a built-in preset or a constructed one, model/construct.h). For synth, `seed`
 * and `layers` (0 = preset default) apply and `materialize` says whether host copies of the
 * weights are generated now. Checks every tensor's presence, dtype class and shape against the
 * config. Defined in model/open.c, above model.c and construct.c (it knows both). */
vstatus ds_model_open(ds_model *m, const char *spec, uint64_t seed, int layers, bool materialize);
/* ds_model_open's directory half: `path` a directory (or a file in it) with config.json and
 * safetensors shards, checked as above. On error m is closed. */
vstatus ds_model_open_dir(ds_model *m, const char *path);
void ds_model_close(ds_model *m);
/* Opens a synthetic model for an explicit config (`label` names it, e.g. the preset). */
vstatus ds_model_synth(ds_model *m, const ds_config *cfg, const char *label, uint64_t seed, bool materialize);
/* The same over an explicit tensor list `specs` [n] (copied): a subset of ds_tensor_specs(cfg),
 * shapes possibly changed (an expert-parallel shard, model/shard.h). A tensor the config names
 * but the list lacks is bound as NULL. */
vstatus ds_model_synth_specs(ds_model *m, const ds_config *cfg, const char *label, uint64_t seed,
                             const ds_tensor_spec *specs, int n, bool materialize);

/* Parameter and byte counts. */
typedef struct {
  int64_t params_total;
  int64_t params_embed, params_attn, params_dense_mlp, params_experts, params_shared, params_router, params_norm, params_lm_head;
  int64_t bytes_by_dtype[6];  /* indexed by vdtype */
  int64_t bytes_total;
} ds_model_stats;
void ds_model_count(const ds_model *m, ds_model_stats *s);

/* Bytes one decode step must read from memory at batch `batch` and context `ctx`,
 * assuming `experts_touched` distinct routed experts per MoE layer (<0: the expected
 * number under uniform routing), the latent KV cache (kv_lora + rope per token per layer,
 * 2 bytes each) when `latent_kv`, else the expanded per-head K/V cache. bf16 weights. */
double ds_decode_bytes(const ds_config *c, int batch, int ctx, double experts_touched, bool latent_kv);
/* Expected distinct experts touched by `tokens` tokens choosing k of E uniformly. */
double ds_expected_experts(int E, int k, int tokens);

#endif

/* Built-in synthetic presets: "tiny", "small", "k2-slice". `layers` > 0 overrides the
 * layer count (the first layer stays dense, the rest MoE). Unknown names are errors
 * listing the known ones. */
vstatus ds_preset_config(const char *name, int layers, ds_config *c);
/* The fields every vouch-made config shares (architecture names, silu, bf16, eps 1e-6,
 * interleaved RoPE, normalized top-k, first layer dense, bos 0 / eos 1); sizes zero. */
void ds_preset_defaults(ds_config *c);
/* Space-separated list of preset names, for --help. */
const char *ds_preset_names(void);
/* Generates host data for every synthetic tensor not yet materialized (threaded), each from
 * its rule m->lazy[i]: a whole tensor, or a TP shard's slice of the full one (model/shard.h). */
vstatus ds_model_materialize(ds_model *m);
/* Fills `dst` (sl->rows * sl->cols elements of sl->spec.dtype, row-major) with the block `sl`
 * of the synthetic tensor sl->spec under `seed` (threaded; the result does not depend on the
 * thread count). */
void ds_synth_slice_fill(void *dst, const ds_synth_slice *sl, uint64_t seed);
/* Fills `dst` (numel elements of spec->dtype) with elements [start, start+numel) of the
 * synthetic tensor `spec` under `seed` (the slice API used by tests and streaming writes). */
void ds_synth_fill(void *dst, const ds_tensor_spec *spec, uint64_t seed, int64_t start, int64_t numel);
