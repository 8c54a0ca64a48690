/* The CPU reference decode path "cpu-ref": plain C, float32 math, HF transformers'
 * DeepseekV3ForCausalLM (eager float32) composed from reference/cpu/ops.h.
 * KV cache: HF's expanded per-head cache, float32: per layer, slot and position the
 * post-RoPE key [H, nope+rope] and the value [H, v]; grown per slot as it fills, bounded
 * at open by half the host's physical memory for max_seq x max_ctx positions.
 * fill_cache follows the shared latent rule of common/path.h (as cuda-ref does): the
 * compressed vector ckv[p] = bf16(philox_symmetric(philox_key(seed, "kvfill.L<l>"),
 * p*(kv_lora+rope) + i)), then kv_a_layernorm, kv_b_proj, RoPE on k_rot at p, store.
 * A step's start_pos may be below the slot's cached length (rewind for rejected
 * speculative drafts): positions from start_pos on are overwritten.
 * vstep.forced_experts replaces the router's choice in every MoE layer; the weights are the
 * chosen experts' sigmoid scores, normalized and scaled as the router does. */
#ifndef VOUCH_REFERENCE_CPU_CPU_REF_H
#define VOUCH_REFERENCE_CPU_CPU_REF_H

#include "common/path.h"

extern const vpath_ops cpu_ref_ops;

#endif
