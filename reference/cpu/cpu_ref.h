/* The CPU reference decode path "cpu-ref": plain C, float32 math, HF transformers'
 * DeepseekV3ForCausalLM (eager float32) composed from reference/cpu/ops.h.
 * KV cache: HF's expanded per-head cache, float32: per layer, slot and position the
 * post-RoPE key [H, nope+rope] and the value [H, v]; grown per slot as it fills, bounded
 * at open by half the host's physical memory for max_seq x max_ctx positions.
 * fill_cache values: key = philox_key(seed, "cpu-ref.k.L<layer>") (".v." for values),
 * element (pos, head, dim) = philox_symmetric(key, (pos*H + head)*width + dim). */
#ifndef VOUCH_REFERENCE_CPU_CPU_REF_H
#define VOUCH_REFERENCE_CPU_CPU_REF_H

#include "common/path.h"

extern const vpath_ops cpu_ref_ops;

#endif
