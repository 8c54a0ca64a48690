/* GGUF export: a DeepSeek-V3-family checkpoint as llama.cpp's `deepseek2` architecture.
 *
 * The file follows what llama.cpp's converter (conversion/deepseek.py, DeepseekV2Model) writes
 * and what src/models/deepseek2.cpp reads: MLA as MQA over the latent (key_length = kv_lora +
 * rope, value_length = kv_lora, the *_mla lengths per head), kv_b_proj split per head into
 * attn_k_b [H][kv_lora][nope] (transposed) and attn_v_b [H][v][kv_lora], routed experts stacked
 * into one 3-D tensor per projection, sigmoid gating with the selection bias, group counts,
 * YaRN with yarn_log_multiplier = 0.1 * mscale_all_dim. The vocabulary is
 * llama.cpp's id-only "test" vocabulary (vocab_size tokens named by their id in hex): vouch's
 * checkpoints are driven by token ids; or, given one, a real tokenizer (model/gguf_vocab.h).
 *
 * RoPE: llama.cpp rotates adjacent pairs (2i, 2i+1) for deepseek2. HF with rope_interleave
 * (vouch's default, DeepSeek-V3's) does the same on the stored layout; without it HF rotates
 * (i, i + r/2), so the export permutes the rope rows of the q and kv_a projections to keep HF's
 * semantics (llama.cpp's converter does not: it assumes interleaved checkpoints).
 *
 * 1-D tensors (norms, the selection bias) and the router are written in f32 whatever the
 * type, as the converter does; the other matrices in the chosen type (gguf_wtype). */
#ifndef VOUCH_MODEL_GGUF_H
#define VOUCH_MODEL_GGUF_H

#include "common/vstatus.h"
#include "model/gguf_vocab.h"
#include "model/model.h"

/* The matrices' element type. Q8_0 and Q4_0 are llama.cpp's 32-weight blocks (an fp16 scale,
 * then 32 int8 / 32 packed 4-bit values), quantized as llama.cpp's reference quantizer does; the
 * tensors chosen follow llama-quantize's defaults for those types: 2-D and 3-D weights except the
 * router (ffn_gate_inp); a tensor whose rows are not a multiple of 32 falls back to F16. The one
 * departure: with Q4_0, output.weight (or token_embd when tied) is Q8_0, where llama-quantize
 * picks Q6_K when the row length is a multiple of 256 (Q8_0 otherwise); Q6_K is not written. */
typedef enum { GGUF_W_F32, GGUF_W_BF16, GGUF_W_Q8_0, GGUF_W_Q4_0 } gguf_wtype;

typedef struct {
  gguf_wtype wtype;         /* the matrices' type */
  const gguf_vocab *vocab;  /* NULL: llama.cpp's id-only "test" vocabulary; else a real BPE tokenizer
                               (tokenizer.ggml.model "gpt2", its pre-tokenizer, tokens, types, merges,
                               special ids, add_bos/add_eos, tokenizer.chat_template); its n must be
                               the model's vocab_size */
} gguf_opts;

/* "f32", "bf16", "q8_0", "q4_0" -> *w; error naming the choices otherwise. */
vstatus gguf_wtype_parse(const char *s, gguf_wtype *w);
const char *gguf_wtype_name(gguf_wtype w);

/* Writes `m` (host weights: synthetic models materialized, or safetensors) to `path`. Without a
 * vocabulary and with f32 or bf16 the bytes are those of earlier versions of this exporter. */
vstatus gguf_export(const ds_model *m, const char *path, const gguf_opts *o);

#endif
