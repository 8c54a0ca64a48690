/* Token-id prompts of a served sweep, salted per pass (suites/sweep/sweep_prompt.h). */
#include "suites/sweep/sweep_prompt.h"

#include <assert.h>

#include "suites/engine/record.h"

uint64_t sweep_mix(uint64_t a, uint64_t b) {
  uint64_t st = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull);
  return rec_rng_next(&st);
}

void sweep_prompt_fill(const sweep_prompt_key *key, const trace_line *L, int i, int32_t *dst, int len) {
  assert(key->block > 0 && key->vocab > 0 && key->level >= 0 && key->pass >= 0);
  /* the salt: 0 on the first pass of the first level, so that pass draws what it drew before salts */
  const uint64_t salt = key->level || key->pass ? sweep_mix(0x5A17ull, ((uint64_t)key->level << 32) | (uint64_t)key->pass) : 0;
  const uint64_t block_seed = salt ? sweep_mix(key->seed ^ 0x4D6F6F6Eull, salt) : key->seed ^ 0x4D6F6F6Eull;
  /* past the line's hash ids (or without a line): the request's own seed, the same for every block */
  const uint64_t own = sweep_mix(key->seed, ((uint64_t)key->level << 40) ^ ((uint64_t)key->pass << 52) ^ (uint64_t)i);
  for (int k0 = 0, blk = 0; k0 < len; k0 += key->block, blk++) { /* a block's seed once, not per token */
    const uint64_t at = L && blk < L->n_hash ? sweep_mix(block_seed, (uint64_t)L->hash[blk]) : own;
    const int k1 = len - k0 < key->block ? len : k0 + key->block;
    for (int k = k0; k < k1; k++) dst[k] = (int32_t)(sweep_mix(at, (uint64_t)k) % (uint64_t)key->vocab);
  }
}
