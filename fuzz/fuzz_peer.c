/* libFuzzer target: a --peer records file (suites/sweep/sweep_suite.c sweep_read_peer, records by
 * suites/engine/record.c rec_from_json). Each accepted record is finalized and its derived figures are
 * re-derived from its samples, as vouch sweep and vouch verify do. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "suites/sweep/sweep_suite.h"

static void ignore(void *ctx, const char *line) { (void)ctx; (void)line; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  const char *p = fz_write("peer.json", data, n);
  vrecord **recs = NULL;
  int nr = 0, cap = 0;
  vstatus s = sweep_read_peer(p, &recs, &nr, &cap);
  if (s != V_OK) {
    const char *m = verr_msg();
    fz_assert(m[0] && !strchr(m, '\n'), "peer error is one non-empty line");
  }
  for (int i = 0; i < nr; i++) {
    (void)rec_rederive_check(recs[i], "peer", ignore, NULL);
    (void)rec_finalize(recs[i]);
    rec_free(recs[i]);
  }
  free(recs);
  return 0;
}
