/* A minimal test harness: every check is counted, none is assumed.
 *   CHECK(cond, "what %d", x);  counts one pass or one failure (and prints the failure)
 *   return test_finish();       prints "N passed, N failed" and returns the exit code */
#ifndef VOUCH_TEST_HARNESS_H
#define VOUCH_TEST_HARNESS_H
#include <stdio.h>

extern int g_test_pass, g_test_fail;

#define CHECK(cond, ...)                                           \
  do {                                                             \
    if (cond) {                                                    \
      g_test_pass++;                                               \
    } else {                                                       \
      g_test_fail++;                                               \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);         \
      fprintf(stderr, __VA_ARGS__);                                \
      fprintf(stderr, "\n");                                       \
    }                                                              \
  } while (0)

/* CHECK that a vstatus call succeeded, printing the recorded error if not. */
#define CHECK_OK(expr) \
  do { vstatus chk_s_ = (expr); CHECK(chk_s_ == V_OK, "%s -> %d: %s", #expr, (int)chk_s_, verr_msg()); } while (0)

int test_finish(void);
/* A scratch directory unique to this test process (created on first call). */
const char *test_tmpdir(void);
/* Path to a file under the source tree (VOUCH_SRC), in a static buffer. */
const char *test_src_path(const char *rel);

#endif
