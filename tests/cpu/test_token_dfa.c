/* Token-id automata (common/token_dfa.c): the features suite's mod-3 automaton, choice tries,
 * residue ranges at the vocabulary's edge, marking, and dead ends found by reachability. */
#include <stdlib.h>
#include <string.h>

#include "common/token_dfa.h"
#include "tests/harness.h"

/* suites/features/features.c's dfa_next, restated: state 0 admits class 0 (-> 1); 1 admits 1 (-> 1), 2 (-> 0) */
static int features_next(int state, int tok) {
  const int cls = tok % 3;
  if (state == 0) return cls == 0 ? 1 : -1;
  return cls == 1 ? 1 : cls == 2 ? 0 : -1;
}

int main(void) {
  tdfa d;
  CHECK_OK(tdfa_mod3(&d));
  int same = 0;
  for (int s = 0; s < 2; s++)
    for (int t = 0; t < 1024; t++) same += tdfa_next(&d, s, t) == features_next(s, t);
  CHECK(same == 2048, "mod3 automaton agrees with the features suite's on %d of 2048 (state, id)", same);
  unsigned char *m = calloc(1024, 1);
  tdfa_mark(&d, 1, 1024, m);
  int marked = 0, right = 0;
  for (int t = 0; t < 1024; t++) marked += m[t], right += m[t] == (t % 3 != 0);
  CHECK(marked == 682 && right == 1024, "state 1 marks %d ids (want 682, classes 1 and 2), %d right", marked, right);
  bool start_only = true;
  CHECK(tdfa_dead_end(&d, 1024, &start_only) == -1 && !start_only, "mod3 has no dead end");
  tdfa_free(&d);

  /* choice: a trie; [7] is a prefix of [7, 8, 9] */
  const int32_t a[] = {7}, b[] = {7, 8, 9}, c[] = {20, 21};
  const int32_t *seqs[] = {a, b, c};
  const int lens[] = {1, 3, 2};
  CHECK_OK(tdfa_choice(&d, seqs, lens, 3));
  int s = tdfa_next(&d, d.start, 7);
  CHECK(s > 0 && d.accept[s] && tdfa_has_exit(&d, s, 1024), "after 7: accepting with an exit (state %d)", s);
  s = tdfa_next(&d, s, 8);
  s = s >= 0 ? tdfa_next(&d, s, 9) : -1;
  CHECK(s > 0 && d.accept[s] && !tdfa_has_exit(&d, s, 1024), "after 7 8 9: accepting, no exit");
  CHECK(tdfa_next(&d, d.start, 8) == -1 && tdfa_next(&d, tdfa_next(&d, d.start, 20), 20) == -1, "refuses 8 and 20 20");
  CHECK(d.n_edges == 5, "the trie shares the prefix 7: %d edges, want 5", d.n_edges);
  tdfa_free(&d);

  /* residues near the vocabulary's end; reachability decides dead ends */
  CHECK_OK(tdfa_init(&d, 3, 0));
  CHECK_OK(tdfa_add_edge(&d, (tdfa_edge){.from = 0, .to = 1, .lo = 1020, .hi = 5000, .mod = 7, .rem = 3}));
  CHECK(tdfa_edge_span(&d.edges[0], 1024) == 0, "no id in [1020, 1023] is 3 mod 7 (1025 is)");
  CHECK(tdfa_edge_span(&d.edges[0], 1026) == 1 && tdfa_next(&d, 0, 1025) == 1, "1025 is, below vocab 1026");
  CHECK(!tdfa_has_exit(&d, 0, 1024) && tdfa_has_exit(&d, 0, 1026), "exit depends on the vocabulary");
  CHECK(tdfa_dead_end(&d, 1024, &start_only) == 0, "start 0 is a dead end below vocab 1024");
  CHECK(tdfa_dead_end(&d, 1026, &start_only) == 1, "state 1 is a dead end once reachable");
  d.accept[1] = true;
  CHECK(tdfa_dead_end(&d, 1026, &start_only) == -1, "state 2 is not reachable: no dead end");
  tdfa_free(&d);
  free(m);
  return test_finish();
}
