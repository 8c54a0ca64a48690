/* Token sampling from logits, identical for every path (paths return logits; the choice
 * of token is made here), so the same seeds give the same tokens wherever logits agree.
 * Order as HF transformers: temperature, then top-k, then top-p; then inverse-CDF
 * sampling over the kept tokens in token-id order with one uniform from the counter-based RNG
 * keyed by (seed, sequence, step). Id order makes the draw a coupling of two paths' distributions:
 * near-tied tokens swapping rank no longer remaps the draws (sampling.c says how close). */
#ifndef VOUCH_COMMON_SAMPLING_H
#define VOUCH_COMMON_SAMPLING_H

#include <stdint.h>

typedef struct {
  float temperature;  /* <= 0: greedy (argmax, lowest index wins ties) */
  int top_k;          /* 0: off */
  float top_p;        /* 1.0 (or >= 1): off; keep the smallest set whose mass >= top_p */
  uint64_t seed;
} vsampling;

/* Index of the largest logit (lowest index on ties). */
int vsample_argmax(const float *logits, int vocab);
/* Picks a token with uniform u in [0,1). `work` must hold VSAMPLE_WORK_BYTES(vocab) bytes of
 * scratch (pass NULL to allocate internally). */
#define VSAMPLE_WORK_BYTES(vocab) ((size_t)(vocab) * 16)
int vsample_with_u(const float *logits, int vocab, const vsampling *s, double u, void *work);
/* Picks a token for sequence `seq` at generation step `step` (u from the seeded RNG). */
int vsample(const float *logits, int vocab, const vsampling *s, int seq, int64_t step, void *work);
/* Fills probs[vocab] with the distribution vsample draws from (0 outside the kept set). */
void vsample_distribution(const float *logits, int vocab, const vsampling *s, double *probs);

#endif
