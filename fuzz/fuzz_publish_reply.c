/* libFuzzer target: what GitHub's API sends back to vouch publish (runner/evidence/publish_reply.c):
 * header lines up to the first empty line, then the body, read as a comment list, as an error
 * reply and as the new comment. Properties: retry and rate-limit values are in range or absent
 * (they become sleeps), a Link URL has no control characters, a found comment id is a positive
 * integer. */
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "runner/evidence/publish_reply.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  publish_reply r;
  memset(&r, 0, sizeof r);
  publish_reply_init(&r);
  size_t i = 0;
  while (i < n) {
    size_t e = i;
    while (e < n && data[e] != '\n') e++;
    if (e == i || (e == i + 1 && data[i] == '\r')) { i = e + 1; break; }
    publish_reply_header(&r, (const char *)data + i, e - i);
    i = e + 1;
  }
  if (i < n) fz_assert(publish_reply_body(&r, (const char *)data + i, n - i) == n - i, "body kept");
  fz_assert(r.retry_after == -1 || (isfinite(r.retry_after) && r.retry_after >= 0 && r.retry_after <= PUBLISH_MAX_RETRY_AFTER_S),
            "retry_after in range");
  fz_assert(r.rl_remaining >= -1, "rl_remaining in range");
  fz_assert(r.rl_reset == -1 || (isfinite(r.rl_reset) && r.rl_reset >= 0), "rl_reset in range");
  for (const char *c = r.next; *c; c++) fz_assert((unsigned char)*c > 0x20 && *c != 0x7f, "Link URL printable");
  double id = 0;
  if (publish_reply_find_comment(r.data, "<!-- vouch-report -->", "fuzz", &id) == V_OK)
    fz_assert(id == 0 || (id >= 1 && id == floor(id)), "comment id is a positive integer");
  char m[256], u[2048];
  publish_reply_field(r.data, "message", m, sizeof m);
  publish_reply_field(r.data, "html_url", u, sizeof u);
  free(r.data);
  return 0;
}
