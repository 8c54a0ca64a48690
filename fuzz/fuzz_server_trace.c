/* libFuzzer target: a request trace of `vouch sweep --server` (--trace / --sessions FILE): the shape
 * check (suites/sweep/server_agentx.c trace_format_detect), then the reader it picks, and the other
 * readers too (a file may be named with --trace-format against its shape): Mooncake lines, vouch's
 * sessions (suites/sweep/server_trace.c trace_read) and AgentX traces (agentx_read). An accepted
 * trace holds lines with counts >= 1, each session's turns contiguous, numbered from 0, trees
 * contiguous, and joiners and spawners that the replay can wait on (an earlier turn of the tree, another
 * session; a spawner only on a first turn), with no wait that comes back to itself. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "suites/sweep/server_agentx.h"
#include "suites/sweep/server_trace.h"

/* True when the replay's waits have no cycle (Kahn's algorithm): a turn waits for its session's
 * previous turn, a first turn for its spawner, a join turn for every turn of the sessions it joins.
 * A cycle would hold its turns forever (a join turn that, through parallel chains, spawns the
 * subagent it waits for). */
static bool waits_acyclic(const trace_line *v, int n) {
  int *indeg = calloc((size_t)n, sizeof *indeg), *head = malloc((size_t)n * sizeof *head);
  int *next = malloc((size_t)3 * n * sizeof *next), *to = malloc((size_t)3 * n * sizeof *to), *queue = malloc((size_t)n * sizeof *queue);
  bool ok = indeg && head && next && to && queue;
  int ne = 0, done = 0, qh = 0, qt = 0;
  for (int i = 0; ok && i < n; i++) head[i] = -1;
  /* edge a -> b: b waits for a */
#define EDGE(a, b) (to[ne] = (b), next[ne] = head[a], head[a] = ne++, indeg[b]++)
  for (int i = 0; ok && i < n; i++) {
    if (i > 0 && v[i].session == v[i - 1].session) EDGE(i - 1, i);
    if (v[i].turn == 0 && v[i].spawner > 0) EDGE(v[i].spawner - 1, i);
    if (v[i].joiner > 0) EDGE(i, v[i].joiner - 1);
  }
#undef EDGE
  for (int i = 0; ok && i < n; i++)
    if (!indeg[i]) queue[qt++] = i;
  while (ok && qh < qt) {
    const int a = queue[qh++];
    done++;
    for (int e = head[a]; e >= 0; e = next[e])
      if (--indeg[to[e]] == 0) queue[qt++] = to[e];
  }
  free(indeg), free(head), free(next), free(to), free(queue);
  return !ok || done == n;
}

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
    /* a spawner: only on a first turn, an earlier turn of the same tree in another session */
    const int s = v[i].spawner - 1;
    fz_assert(s == -1 || (v[i].turn == 0 && s >= 0 && s < i && v[s].session != v[i].session && v[s].tree == v[i].tree),
              "a spawner");
  }
  fz_assert(waits_acyclic(v, n), "no turn waits on itself through its spawner, its joins and its earlier turns");
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
