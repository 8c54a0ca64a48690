/* GGUF export: a DeepSeek-V3-family checkpoint as llama.cpp's `deepseek2` architecture.
 *
 * The file follows what llama.cpp's converter (conversion/deepseek.py, DeepseekV2Model) writes
 * and what src/models/deepseek2.cpp reads: MLA as MQA over the latent (key_length = kv_lora +
 * rope, value_length = kv_lora, the *_mla lengths per head), kv_b_proj split per head into
 * attn_k_b [H][kv_lora][nope] (transposed) and attn_v_b [H][v][kv_lora], routed experts stacked
 * into one 3-D tensor per projection, sigmoid gating with the selection bias, group counts,
 * YaRN with yarn_log_multiplier = 0.1 * mscale_all_dim. The vocabulary is
 * llama.cpp's id-only "test" vocabulary (vocab_size tokens named by their id in hex): vouch's
 * checkpoints are driven by token ids.
 *
 * RoPE: llama.cpp rotates adjacent pairs (2i, 2i+1) for deepseek2. HF with rope_interleave
 * (vouch's default, DeepSeek-V3's) does the same on the stored layout; without it HF rotates
 * (i, i + r/2), so the export permutes the rope rows of the q and kv_a projections to keep HF's
 * semantics (llama.cpp's converter does not: it assumes interleaved checkpoints).
 *
 * 1-D tensors (norms, the selection bias) and the router are written in f32 whatever the
 * dtype, as the converter does; the other matrices in `dtype` (DT_F32 or DT_BF16). */
#ifndef VOUCH_MODEL_GGUF_H
#define VOUCH_MODEL_GGUF_H

#include "common/vstatus.h"
#include "model/model.h"

/* Writes `m` (host weights: synthetic models materialized, or safetensors) to `path`. */
vstatus gguf_export(const ds_model *m, const char *path, vdtype dtype);

#endif
