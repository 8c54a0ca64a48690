/* The value of element `index` of a synthetic tensor, shared by the CPU synthesizer
 * (model/model.c) and the GPU generators (reference/cuda), so both produce identical
 * bits. Every operation is exact or a single correctly rounded float op.
 *   linear weights: U[-1,1) * sqrt(3/fan_in)   (std 1/sqrt(fan_in): activations stay O(1))
 *   embeddings:     U[-1,1)
 *   norm weights:   1 + U[-1,1)/8
 *   router bias:    U[-1,1)/4                  (large enough to change expert choice) */
#ifndef VOUCH_MODEL_SYNTH_RULE_H
#define VOUCH_MODEL_SYNTH_RULE_H

#include <math.h>

#include "common/philox.h"

typedef enum { SYN_LINEAR = 0, SYN_EMBED = 1, SYN_NORM = 2, SYN_BIAS = 3 } synth_kind;

/* Scale of a linear weight with `fan_in` inputs (computed once on the host). */
static inline float synth_linear_scale(int fan_in) { return (float)sqrt(3.0 / (double)fan_in); }

/* `scale` is synth_linear_scale(fan_in) for SYN_LINEAR and ignored otherwise. */
PHILOX_FN float synth_value(synth_kind kind, float scale, uint64_t key, uint64_t index) {
  float s = philox_symmetric(key, index);
#if defined(__CUDA_ARCH__)
  switch (kind) {
    case SYN_LINEAR: return __fmul_rn(s, scale);
    case SYN_EMBED: return s;
    case SYN_NORM: return __fadd_rn(1.0f, s * 0.125f);
    default: return s * 0.25f;
  }
#else
  switch (kind) {
    case SYN_LINEAR: return s * scale;
    case SYN_EMBED: return s;
    case SYN_NORM: return 1.0f + s * 0.125f;
    default: return s * 0.25f;
  }
#endif
}

#endif
