/* vstep_validate: the one step check every path uses. Capacity limits are "not supported"
 * (a caller may fall back or reopen larger); malformed steps are errors. */
#include <string.h>

#include "common/path.h"
#include "tests/harness.h"

static int cached[4] = {0, 5, 10, 0};
static const vstep_limits LIM = {"test-path", 4, 16, cached, 100, 2, 2, 8};

static vstatus check(int n_seq, const int *seq, const int *nt, const int *sp, const int32_t *tok, const int32_t *forced) {
  vstep s = {n_seq, seq, nt, sp, tok, false, forced};
  return vstep_validate(&s, &LIM);
}

int main(void) {
  int seq2[2] = {1, 2}, nt2[2] = {1, 2}, sp2[2] = {5, 10}, one = 1, zero = 0;
  int32_t tok3[3] = {1, 2, 3};
  CHECK_OK(check(2, seq2, nt2, sp2, tok3, NULL));
  /* rewinding inside the cached length is allowed (rejected speculative drafts) */
  int sp_rew[2] = {2, 0};
  CHECK_OK(check(2, seq2, nt2, sp_rew, tok3, NULL));
  /* capacity: not supported, with the reason naming the path */
  int far_slot = 4;
  CHECK(check(1, &far_slot, &one, &zero, tok3, NULL) == V_UNSUPPORTED && strstr(verr_msg(), "test-path"),
        "slot past max_seq: %s", verr_msg());
  int nt_long = 7, sp_long = 10, slot2 = 2;
  CHECK(check(1, &slot2, &nt_long, &sp_long, tok3, NULL) == V_UNSUPPORTED && strstr(verr_msg(), "max_ctx"),
        "positions past max_ctx: %s", verr_msg());
  /* malformed: errors */
  CHECK(check(0, seq2, nt2, sp2, tok3, NULL) == V_ERR, "no sequences");
  CHECK(check(1, NULL, &one, &zero, tok3, NULL) == V_ERR, "NULL arrays");
  int neg = -1;
  CHECK(check(1, &neg, &one, &zero, tok3, NULL) == V_ERR, "negative slot");
  CHECK(check(1, &seq2[0], &zero, &zero, tok3, NULL) == V_ERR, "n_tokens 0");
  CHECK(check(1, &seq2[0], &one, &neg, tok3, NULL) == V_ERR, "negative start_pos");
  int gap = 6;
  CHECK(check(1, &seq2[0], &one, &gap, tok3, NULL) == V_ERR && strstr(verr_msg(), "holds 5"), "gap: %s", verr_msg());
  int dup[2] = {1, 1}, ones[2] = {1, 1}, sps[2] = {5, 5};
  CHECK(check(2, dup, ones, sps, tok3, NULL) == V_ERR && strstr(verr_msg(), "both use slot 1"), "dup: %s", verr_msg());
  int32_t bad_tok[3] = {1, 100, 3};
  CHECK(check(2, seq2, nt2, sp2, bad_tok, NULL) == V_ERR && strstr(verr_msg(), "outside the vocabulary"),
        "token: %s", verr_msg());
  /* forced experts: [n_moe=2][tokens=3][top_k=2], ids in [0, 8), distinct per token */
  int32_t f_ok[12] = {0, 1, 2, 3, 4, 5, 6, 7, 0, 7, 1, 6};
  CHECK_OK(check(2, seq2, nt2, sp2, tok3, f_ok));
  int32_t f_range[12] = {0, 1, 2, 3, 4, 5, 6, 7, 0, 8, 1, 6};
  CHECK(check(2, seq2, nt2, sp2, tok3, f_range) == V_ERR && strstr(verr_msg(), "expert 8"), "forced range: %s",
        verr_msg());
  int32_t f_twice[12] = {0, 1, 2, 3, 4, 5, 6, 7, 0, 7, 6, 6};
  CHECK(check(2, seq2, nt2, sp2, tok3, f_twice) == V_ERR && strstr(verr_msg(), "chosen twice"), "forced twice: %s",
        verr_msg());
  return test_finish();
}
