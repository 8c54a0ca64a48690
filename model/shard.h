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
 * N > 1 (the rank holds its own lm_head block). */
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
const char *ds_shard_split_name(shard_split s); /* "replicate", "rows", "cols", "vocab" */

/* V_OK when TP `size` can split `full`; otherwise one line naming the field, e.g.
 * "TP 16 needs num_attention_heads (12) divisible by 16". */
vstatus ds_shard_check(const ds_config *full, int size);
/* The config of every rank (identical across ranks). Checks divisibility first. */
vstatus ds_shard_config(const ds_config *full, int size, ds_config *local);
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

/* The vocabulary range of a model's lm_head (a full model: [0, vocab_size)). */
static inline void ds_model_vocab_range(const ds_model *m, int *v0, int *v1) {
  *v0 = m->vocab_end > 0 ? m->vocab_begin : 0;
  *v1 = m->vocab_end > 0 ? m->vocab_end : m->cfg.vocab_size;
}
/* TP degree of a model (1 for a full model). */
static inline int ds_model_tp_size(const ds_model *m) { return m->tp_size > 1 ? m->tp_size : 1; }

#endif
