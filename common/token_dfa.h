/* A constraint on generated token ids: a deterministic automaton whose edges admit sets of token
 * ids. It is what a structured output means when prompts and outputs are token ids (no
 * tokenizer): vouch serve enforces one per request (`structured_outputs`, docs/serving.md), and
 * the features suite's structured check (suites/features/features.c: classes by id mod 3) is one of them:
 *   start 0, accept {0, 1}; 0 -[id%3==0]-> 1; 1 -[id%3==1]-> 1; 1 -[id%3==2]-> 0.
 * An edge admits the ids in [lo, hi] that are = rem (mod `mod`) when mod > 0. From a state, the
 * first edge (in order) that admits a token decides where it goes. */
#ifndef VOUCH_COMMON_TOKEN_DFA_H
#define VOUCH_COMMON_TOKEN_DFA_H

#include <stdbool.h>
#include <stdint.h>

#include "common/vstatus.h"

typedef struct {
  int from, to;     /* states in [0, n_states) */
  int32_t lo, hi;   /* admitted ids lo..hi (inclusive) */
  int32_t mod, rem; /* and id % mod == rem when mod > 0 (0 <= rem < mod) */
} tdfa_edge;

typedef struct {
  int n_states, start;
  bool *accept;     /* [n_states] the output may end in this state */
  tdfa_edge *edges; /* [n_edges] */
  int n_edges, cap_edges;
} tdfa;

/* Empty automaton of n_states states (none accepting, no edges); V_ERR on out of memory. */
vstatus tdfa_init(tdfa *d, int n_states, int start);
vstatus tdfa_add_edge(tdfa *d, tdfa_edge e);
void tdfa_free(tdfa *d);
/* The state after tok from `state`; -1 when no edge admits it. */
int tdfa_next(const tdfa *d, int state, int32_t tok);
/* Whether some id in [0, vocab) leaves `state`. */
bool tdfa_has_exit(const tdfa *d, int state, int vocab);
/* How many ids in [0, vocab) edge e admits. */
int64_t tdfa_edge_span(const tdfa_edge *e, int vocab);
/* A state reachable from the start (over ids below vocab) that does not accept and has no exit,
 * -1 when none (O(states + edges)). *start_only: the start accepts and has no exit (only the empty
 * output). -2 on out of memory. */
int tdfa_dead_end(const tdfa *d, int vocab, bool *start_only);
/* Sets allowed[t] = 1 for every id in [0, vocab) that leaves `state` (allowed is not cleared). */
void tdfa_mark(const tdfa *d, int state, int vocab, unsigned char *allowed);
/* The automaton that admits exactly the given sequences (a trie; a sequence that is a prefix of
 * another ends in an accepting state that still has exits). */
vstatus tdfa_choice(tdfa *d, const int32_t *const *seqs, const int *lens, int n);
/* The features suite's automaton (above). */
vstatus tdfa_mod3(tdfa *d);

#endif
