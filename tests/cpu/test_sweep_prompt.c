/* suites/sweep/sweep_prompt.h: a served sweep's token-id prompts. Equal hash ids give equal blocks
 * inside a pass (a trace's shared prefixes), a pass over a level draws tokens no earlier pass drew
 * (cache-busting: nothing a prefix cache kept from an earlier round or level matches), the same
 * (level, pass) draws the same tokens (so an A/B's two sides get the same k-th round), the first
 * pass of level 0 draws what vouch drew before the salt existed, and ids stay below the vocabulary. */
#include <stdint.h>
#include <string.h>

#include "suites/engine/record.h"
#include "suites/sweep/sweep_prompt.h"
#include "tests/harness.h"

enum { LEN = 40, BLOCK = 8, VOCAB = 1000 };

/* The length of the common leading run of two prompts. */
static int common(const int32_t *a, const int32_t *b, int n) {
  int k = 0;
  while (k < n && a[k] == b[k]) k++;
  return k;
}

/* What vouch drew before the salt (sweep_server.c until this test's commit): the unsalted rule. */
static int32_t before_salt(uint64_t seed, const trace_line *L, int li, int i, int k) {
  const int blk = k / BLOCK;
  const uint64_t key = L && blk < L->n_hash ? sweep_mix(seed ^ 0x4D6F6F6Eull, (uint64_t)L->hash[blk])
                                            : sweep_mix(seed, ((uint64_t)li << 40) ^ (uint64_t)i);
  return (int32_t)(sweep_mix(key, (uint64_t)k) % VOCAB);
}

int main(void) {
  int64_t h1[] = {11, 12, 13}, h2[] = {11, 12, 99};
  const trace_line a = {.in = LEN, .hash = h1, .n_hash = 3}, b = {.in = LEN, .hash = h2, .n_hash = 3};
  int32_t pa[LEN], pb[LEN], qa[LEN], qb[LEN], r0[LEN], r1[LEN];
  sweep_prompt_key k0 = {.seed = 7, .level = 0, .pass = 0, .block = BLOCK, .vocab = VOCAB};

  /* inside one pass: blocks 0 and 1 shared (ids 11, 12), block 2 not (13 against 99) */
  sweep_prompt_fill(&k0, &a, 0, pa, LEN);
  sweep_prompt_fill(&k0, &b, 1, pb, LEN);
  CHECK(common(pa, pb, LEN) == 2 * BLOCK, "two lines sharing 2 hash ids share 2 blocks: %d tokens", common(pa, pb, LEN));
  int in_vocab = 1;
  for (int k = 0; k < LEN; k++) in_vocab &= pa[k] >= 0 && pa[k] < VOCAB && pb[k] >= 0 && pb[k] < VOCAB;
  CHECK(in_vocab, "ids below the vocabulary");
  int same_before = 1;
  for (int k = 0; k < LEN; k++) same_before &= pa[k] == before_salt(7, &a, 0, 0, k) && pb[k] == before_salt(7, &b, 0, 1, k);
  CHECK(same_before, "the first pass of level 0 draws what vouch drew before the salt");

  /* the next pass (an A/B's next round on the same server): nothing in common with the first, the
   * sharing inside the pass kept */
  sweep_prompt_key k1 = k0;
  k1.pass = 1;
  sweep_prompt_fill(&k1, &a, 0, qa, LEN);
  sweep_prompt_fill(&k1, &b, 1, qb, LEN);
  CHECK(common(qa, pa, LEN) == 0 && common(qb, pb, LEN) == 0, "pass 1 shares no prefix with pass 0");
  CHECK(common(qa, qb, LEN) == 2 * BLOCK, "pass 1 keeps the two lines' shared blocks");
  int differ = 0;
  for (int k = 0; k < LEN; k++) differ += qa[k] != pa[k];
  CHECK(differ > LEN * 9 / 10, "pass 1 draws other tokens: %d of %d differ", differ, LEN);

  /* another level replaying the same trace: its own tokens too */
  sweep_prompt_key l1 = k0;
  l1.level = 1;
  sweep_prompt_fill(&l1, &a, 0, qb, LEN);
  CHECK(common(qb, pa, LEN) == 0 && common(qb, qa, LEN) == 0, "level 1's pass 0 shares nothing with level 0's passes");

  /* the same (level, pass): the same prompt, as the other side of an A/B draws it */
  sweep_prompt_fill(&k1, &a, 0, qb, LEN);
  CHECK(!memcmp(qa, qb, sizeof qa), "the same key, the same prompt");

  /* random prompts (no trace line): per request, level and pass */
  sweep_prompt_fill(&k0, NULL, 3, r0, LEN);
  sweep_prompt_fill(&k1, NULL, 3, r1, LEN);
  CHECK(common(r0, r1, LEN) == 0, "a random prompt's next pass shares no prefix");
  int same_r = 1;
  for (int k = 0; k < LEN; k++) same_r &= r0[k] == before_salt(7, NULL, 0, 3, k);
  CHECK(same_r, "a random prompt's first pass: as before the salt");
  sweep_prompt_fill(&k0, NULL, 4, r1, LEN);
  CHECK(common(r0, r1, LEN) == 0, "two requests of a pass: two prompts");

  /* past the line's hash ids, the tokens are the request's own, salted too */
  const trace_line c = {.in = LEN, .hash = h1, .n_hash = 1};
  sweep_prompt_fill(&k0, &c, 5, pa, LEN);
  sweep_prompt_fill(&k1, &c, 5, qa, LEN);
  CHECK(common(pa, qa, LEN) == 0, "the unhashed tail of a line is salted per pass");
  return test_finish();
}
