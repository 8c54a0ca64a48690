#include "tests/harness.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int g_test_pass, g_test_fail;

int test_finish(void) {
  printf("%d passed, %d failed\n", g_test_pass, g_test_fail);
  return g_test_fail ? 1 : (g_test_pass ? 0 : 1);
}

const char *test_tmpdir(void) {
  static char dir[256];
  if (!dir[0]) {
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/vouch-test-XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(dir)) { perror("mkdtemp"); exit(2); }
  }
  return dir;
}

const char *test_src_path(const char *rel) {
  static char buf[1024];
  const char *src = getenv("VOUCH_SRC");
  snprintf(buf, sizeof buf, "%s/%s", src ? src : ".", rel);
  return buf;
}
