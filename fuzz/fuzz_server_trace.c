/* libFuzzer target: a request trace of `vouch sweep --server` (--trace / --sessions FILE): the shape
 * check (suites/sweep/server_agentx.c trace_format_detect), then the reader it picks, and the other
 * readers too (a file may be named with --trace-format against its shape): Mooncake lines, vouch's
 * sessions (suites/sweep/server_trace.c trace_read) and AgentX traces (agentx_read). An accepted
 * trace holds lines with counts >= 1, each session's turns contiguous, numbered from 0, trees
 * contiguous, and joiners and spawners that the replay can wait on (an earlier turn of the tree, another
 * session; a spawner only on a first turn and before its session's joiner). */
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "suites/sweep/server_agentx.h"
#include "suites/sweep/server_trace.h"

/* The properties of accepted lines; frees them. */
static void check_lines(trace_line *v, int n) {
  for (int i = 0; i < n; i++) {
    fz_assert(v[i].in >= 1 && v[i].out >= 1 && v[i].n_hash >= 0 && v[i].pause_ms >= 0, "line counts");
    const bool same = i > 0 && v[i].session == v[i - 1].session;
    fz_assert(same ? v[i].turn == v[i - 1].turn + 1 : v[i].turn == 0, "turns numbered from 0 within a session");
    fz_assert(same || i == 0 || v[i].session > v[i - 1].session, "a session's turns contiguous");
    /* trees in file order, each contiguous (the replay's lanes need it); a joiner is an earlier turn
     * of the same tree in another session, the same on every turn of a session */
    fz_assert(i == 0 ? v[i].tree == 0 : v[i].tree == v[i - 1].tree || v[i].tree == v[i - 1].tree + 1, "trees contiguous");
    const int j = v[i].joiner - 1;
    fz_assert(j == -1 || (j >= 0 && j < i && v[j].session != v[i].session && v[j].tree == v[i].tree), "a joiner");
    fz_assert(!same || v[i].joiner == v[i - 1].joiner, "one joiner per session");
    /* a spawner: only on a first turn, an earlier turn of the same tree in another session, and before
     * the session's joiner (else the join would wait on a subagent that waits on the join) */
    const int s = v[i].spawner - 1;
    fz_assert(s == -1 || (v[i].turn == 0 && s >= 0 && s < i && v[s].session != v[i].session && v[s].tree == v[i].tree &&
                          (j == -1 || s < j)),
              "a spawner");
  }
  trace_free(v, n);
}

static void one_line_error(void) {
  const char *m = verr_msg();
  fz_assert(m[0] && !strchr(m, '\n'), "trace error is one non-empty line");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  const char *p = fz_write("trace.jsonl", data, n);
  trace_format f;
  if (trace_format_detect(p, &f) != V_OK) { one_line_error(); return 0; }
  trace_line *v;
  int m, block;
  for (int sessions = 0; sessions < 2; sessions++) {
    if (trace_read(p, sessions ? 0 : 3, sessions, &v, &m) == V_OK) check_lines(v, m);
    else one_line_error();
  }
  for (int limit = 0; limit < 2; limit++) {
    if (agentx_read(p, limit, &v, &m, &block) == V_OK) {
      fz_assert(block >= 1 && m >= 1, "an AgentX trace has a block size and a turn");
      check_lines(v, m);
    } else {
      one_line_error();
    }
  }
  return 0;
}
