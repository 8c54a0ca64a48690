/* Token-id automata (common/token_dfa.h). */
#include "common/token_dfa.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

vstatus tdfa_init(tdfa *d, int n_states, int start) {
  assert(n_states >= 1 && start >= 0 && start < n_states);
  memset(d, 0, sizeof *d);
  d->accept = calloc((size_t)n_states, sizeof *d->accept);
  if (!d->accept) return VERR("token automaton: out of memory for %d states", n_states);
  d->n_states = n_states, d->start = start;
  return V_OK;
}

vstatus tdfa_add_edge(tdfa *d, tdfa_edge e) {
  assert(e.from >= 0 && e.from < d->n_states && e.to >= 0 && e.to < d->n_states);
  assert(e.mod >= 0 && (e.mod == 0 || (e.rem >= 0 && e.rem < e.mod)));
  if (d->n_edges == d->cap_edges) {
    const int cap = d->cap_edges ? d->cap_edges * 2 : 16;
    tdfa_edge *ne = realloc(d->edges, (size_t)cap * sizeof *ne);
    if (!ne) return VERR("token automaton: out of memory for %d edges", cap);
    d->edges = ne, d->cap_edges = cap;
  }
  d->edges[d->n_edges++] = e;
  return V_OK;
}

void tdfa_free(tdfa *d) {
  free(d->accept);
  free(d->edges);
  memset(d, 0, sizeof *d);
}

static bool admits(const tdfa_edge *e, int32_t tok) {
  return tok >= e->lo && tok <= e->hi && (e->mod == 0 || tok % e->mod == e->rem);
}

int tdfa_next(const tdfa *d, int state, int32_t tok) {
  assert(state >= 0 && state < d->n_states);
  for (int i = 0; i < d->n_edges; i++)
    if (d->edges[i].from == state && admits(&d->edges[i], tok)) return d->edges[i].to;
  return -1;
}

/* The first admitted id in [0, vocab) (in *first) and the last bound; false when none. */
static bool span_of(const tdfa_edge *e, int vocab, int64_t *first, int64_t *hi) {
  const int64_t lo = e->lo > 0 ? e->lo : 0;
  *hi = e->hi < vocab - 1 ? e->hi : vocab - 1;
  if (lo > *hi) return false;
  *first = e->mod ? lo + ((e->rem - lo % e->mod) % e->mod + e->mod) % e->mod : lo; /* right residue */
  return *first <= *hi;
}

int64_t tdfa_edge_span(const tdfa_edge *e, int vocab) {
  int64_t first, hi;
  if (!span_of(e, vocab, &first, &hi)) return 0;
  return (hi - first) / (e->mod ? e->mod : 1) + 1;
}

bool tdfa_has_exit(const tdfa *d, int state, int vocab) {
  for (int i = 0; i < d->n_edges; i++)
    if (d->edges[i].from == state && tdfa_edge_span(&d->edges[i], vocab) > 0) return true;
  return false;
}

void tdfa_mark(const tdfa *d, int state, int vocab, unsigned char *allowed) {
  for (int i = 0; i < d->n_edges; i++) {
    const tdfa_edge *e = &d->edges[i];
    int64_t t, hi;
    if (e->from != state || !span_of(e, vocab, &t, &hi)) continue;
    for (; t <= hi; t += e->mod ? e->mod : 1) allowed[t] = 1;
  }
}

int tdfa_dead_end(const tdfa *d, int vocab, bool *start_only) {
  const int S = d->n_states, E = d->n_edges;
  int *first = calloc((size_t)S + 1, sizeof *first), *adj = malloc((size_t)(E ? E : 1) * sizeof *adj);
  int *queue = malloc((size_t)S * sizeof *queue);
  bool *seen = calloc((size_t)S, sizeof *seen), *exit_ = calloc((size_t)S, sizeof *exit_);
  int dead = -1;
  if (!first || !adj || !queue || !seen || !exit_) { dead = -2; goto out; }
  /* edges by source (counting sort), only those that admit some id below vocab */
  for (int i = 0; i < E; i++)
    if (tdfa_edge_span(&d->edges[i], vocab) > 0) first[d->edges[i].from + 1]++, exit_[d->edges[i].from] = true;
  for (int s = 0; s < S; s++) first[s + 1] += first[s];
  int *fill = queue; /* reused as the insertion cursor before the search */
  for (int s = 0; s < S; s++) fill[s] = first[s];
  for (int i = 0; i < E; i++)
    if (tdfa_edge_span(&d->edges[i], vocab) > 0) adj[fill[d->edges[i].from]++] = d->edges[i].to;
  int head = 0, tail = 0;
  queue[tail++] = d->start, seen[d->start] = true;
  while (head < tail) {
    const int s = queue[head++];
    if (!d->accept[s] && !exit_[s]) { dead = s; break; }
    for (int k = first[s]; k < first[s + 1]; k++)
      if (!seen[adj[k]]) seen[adj[k]] = true, queue[tail++] = adj[k];
  }
  *start_only = d->accept[d->start] && !exit_[d->start];
out:
  free(first); free(adj); free(queue); free(seen); free(exit_);
  return dead;
}

vstatus tdfa_choice(tdfa *d, const int32_t *const *seqs, const int *lens, int n) {
  int total = 1;
  for (int i = 0; i < n; i++) total += lens[i];
  VTRY(tdfa_init(d, total, 0));
  int used = 1; /* trie nodes so far; node 0 the root */
  for (int i = 0; i < n; i++) {
    int s = 0;
    for (int k = 0; k < lens[i]; k++) {
      int to = -1;
      for (int e = 0; e < d->n_edges && to < 0; e++)
        if (d->edges[e].from == s && d->edges[e].lo == seqs[i][k]) to = d->edges[e].to;
      if (to < 0) {
        to = used++;
        vstatus st = tdfa_add_edge(d, (tdfa_edge){.from = s, .to = to, .lo = seqs[i][k], .hi = seqs[i][k]});
        if (st) { tdfa_free(d); return st; }
      }
      s = to;
    }
    d->accept[s] = true;
  }
  return V_OK;
}

vstatus tdfa_mod3(tdfa *d) {
  VTRY(tdfa_init(d, 2, 0));
  d->accept[0] = d->accept[1] = true;
  const tdfa_edge e[3] = {{0, 1, 0, INT32_MAX, 3, 0}, {1, 1, 0, INT32_MAX, 3, 1}, {1, 0, 0, INT32_MAX, 3, 2}};
  for (int i = 0; i < 3; i++) {
    vstatus s = tdfa_add_edge(d, e[i]);
    if (s) { tdfa_free(d); return s; }
  }
  return V_OK;
}
