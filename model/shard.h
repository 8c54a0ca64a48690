/* The tensor-parallel shard plan: what rank r of TP N holds (docs/tensor-parallel.md).
 *
 *   attention  q_a_proj, q_a_layernorm, kv_a_proj_with_mqa, kv_a_layernorm   replicated
 *              q_b_proj / q_proj, kv_b_proj    rows of the rank's heads [r*H/N, (r+1)*H/N)
 *              o_proj                          columns of those heads (a [D, H/N*v] copy)
 *   dense MLP  gate_proj, up_proj rows / down_proj columns of [r*I/N, (r+1)*I/N)
 *   MoE        router weight + e_score_correction_bias replicated; every routed expert and the
 *              shared expert split like the dense MLP along its own intermediate dimension
 *   vocab      embed_tokens replicated; lm_head rows [v0, v1) = ds_shard_vocab (blocks of
 *              ceil(V/N) rows, the last one shorter when N does not divide V)
 *   norms      replicated
 * A path then sums the attention output (after o_proj) and the MLP/MoE output over the
 * ranks before each residual add, and gathers the logits over the vocabulary blocks.
 * The local config is the full one with num_attention_heads, num_key_value_heads,
 * intermediate_size and moe_intermediate_size divided by N (the shared-expert width
 * follows); vocab_size stays (token ids are global); tie_word_embeddings becomes false for
 * N > 1 (the rank holds its own lm_head block).
 *
 * Expert parallelism (EP N, an option over the same N ranks; docs/tensor-parallel.md): only the
 * ROUTED experts change. Rank r holds the experts [r*E/N, (r+1)*E/N) whole (E = n_routed_experts,
 * divisible by N) and no tensor of the others (absent from the shard, bound as NULL); the router
 * stays replicated, the shared expert stays split along its intermediate dimension, everything
 * else is as under TP N. A rank adds the weighted outputs of the selected experts it owns into its
 * MoE partial sum; the all-reduce after the MoE (as under TP) sums over the ranks. The local config
 * keeps the full moe_intermediate_size (the routed experts are whole); the shared expert's tensors
 * are [F*S/N, D] / [D, F*S/N] blocks (F = moe_intermediate_size, S = n_shared_experts). */
#ifndef VOUCH_MODEL_SHARD_H
#define VOUCH_MODEL_SHARD_H

#include <stdint.h>

#include "common/vstatus.h"
#include "model/model.h"

#define SHARD_MAX_TP 1024

/* How one tensor is split across the ranks. */
typedef enum {
  SHARD_REPLICATE = 0, /* every rank holds all of it */
  SHARD_ROWS = 1,      /* rank r holds rows [r*rows/N, (r+1)*rows/N) (out_features) */
  SHARD_COLS = 2,      /* rank r holds columns [r*cols/N, (r+1)*cols/N) (in_features) */
  SHARD_VOCAB = 3,     /* lm_head: rank r holds rows ds_shard_vocab(r) */
} shard_split;

/* The split the plan uses for the HF tensor `name` (any name: unknown ones replicate). */
shard_split ds_shard_rule(const char *name);
/* The same under EP when `ep`: a routed expert's tensors are whole (SHARD_REPLICATE) on the rank
 * that owns the expert and absent elsewhere (ds_shard_owns). */
shard_split ds_shard_rule_ep(const char *name, bool ep);
/* The routed expert a tensor name belongs to ("model.layers.L.mlp.experts.E.*"), -1 for others. */
int ds_shard_expert_of(const char *name);
/* The routed experts rank `rank` of EP `size` owns: [*e0, *e1) = [rank*E/size, (rank+1)*E/size). */
void ds_shard_experts(int n_experts, int size, int rank, int *e0, int *e1);
const char *ds_shard_split_name(shard_split s); /* "replicate", "rows", "cols", "vocab" */

/* V_OK when TP `size` can split `full`; otherwise one line naming the field, e.g.
 * "TP 16 needs num_attention_heads (12) divisible by 16". */
vstatus ds_shard_check(const ds_config *full, int size);
/* ds_shard_check, plus under `ep` n_routed_experts divisible by `size` when an MoE layer exists:
 * "EP 8 needs n_routed_experts (12) divisible by 8 ...". */
vstatus ds_shard_check_ep(const ds_config *full, int size, bool ep);
/* The config of every rank (identical across ranks). Checks divisibility first. */
vstatus ds_shard_config(const ds_config *full, int size, ds_config *local);
/* The same under `ep`: moe_intermediate_size stays full (the routed experts are whole). */
vstatus ds_shard_config_ep(const ds_config *full, int size, bool ep, ds_config *local);
/* The lm_head rows of rank `rank`: [*v0, *v1), blocks of ceil(vocab/size). */
void ds_shard_vocab(int vocab, int size, int rank, int *v0, int *v1);
/* Rows per vocabulary block, ceil(vocab/size): the gather's count per rank. */
static inline int ds_shard_vocab_block(int vocab, int size) { return (vocab + size - 1) / size; }

/* Builds rank `rank`'s model of TP `size` from `full`: the local config and only this rank's
 * tensors. Tensors the full model holds in host memory become views (replicated tensors,
 * row blocks: zero copy, so `full` must stay open while `local` is used) or copies (column
 * blocks). A tensor of a lazy synthetic `full` (opened with materialize=false: no host data)
 * stays lazy in `local` (data NULL, nothing generated here): local->lazy[i] records its
 * slice of the FULL tensor (the full spec, start, rows x cols, stride; model.h
 * ds_synth_slice), which the GPU paths generate on the device (cuda_synth_model_tensor) and
 * ds_model_materialize(local) generates on the host, both equal to the full model's values.
 * For synthetic `full`, local->lazy[i] is recorded for every tensor (views and copies too).
 * local->tp_rank/tp_size/vocab_begin/vocab_end are set. Close with ds_model_close. */
vstatus ds_shard_model(ds_model *local, const ds_model *full, int rank, int size);
/* ds_shard_model, with expert parallelism when `ep` (see the top of this file): the shard holds
 * only the routed experts [expert_begin, expert_end) it owns (set in local); the others' tensors
 * are not in local->synth, so ds_model_materialize generates nothing for them. */
vstatus ds_shard_model_ep(ds_model *local, const ds_model *full, int rank, int size, bool ep);

/* The vocabulary range of a model's lm_head (a full model: [0, vocab_size)). */
static inline void ds_model_vocab_range(const ds_model *m, int *v0, int *v1) {
  *v0 = m->vocab_end > 0 ? m->vocab_begin : 0;
  *v1 = m->vocab_end > 0 ? m->vocab_end : m->cfg.vocab_size;
}
/* The routed experts a model holds: [expert_begin, expert_end) of an EP shard, else all. */
static inline void ds_model_expert_range(const ds_model *m, int *e0, int *e1) {
  *e0 = m->expert_end > 0 ? m->expert_begin : 0;
  *e1 = m->expert_end > 0 ? m->expert_end : m->cfg.n_routed_experts;
}
/* True for an expert-parallel shard (built by ds_shard_model_ep with ep). */
static inline bool ds_model_is_ep(const ds_model *m) { return m->expert_end > 0; }
/* TP degree of a model (1 for a full model). */
static inline int ds_model_tp_size(const ds_model *m) { return m->tp_size > 1 ? m->tp_size : 1; }

#endif
