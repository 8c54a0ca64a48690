#include "suites/paths/ran.h"

#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The wrapper's state, p->state of every path vpath_open opened. */
typedef struct {
  const vpath_ops *inner; /* the path's own ops (built-in, loaded, or a TP wrapper's) */
  void *st;               /* the path's own state */
  vtrace tally;           /* what the path recorded since the last vpath_ran_clear (tally mode; tee: the
                           * caller's vpath_opts.trace) */
  bool expect_fallback;   /* vpath_opts.expect_fallback: a hand-over is accepted (and recorded) */
  char name[128];         /* the path as the user named it (vpath_spec.name), for messages */
  int64_t steps;          /* forward() calls so far, for messages */
} ran_state;

/* The wrapper's ops, one per distinct inner ops (registry slots, their TP and rank wrappers), made on
 * first use and kept for the process's life (a vpath points at them). */
#define MAX_WRAPPED 64
static vpath_ops g_ops[MAX_WRAPPED];
static const vpath_ops *g_inner[MAX_WRAPPED];
static int g_n;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

/* The sum of the counts of t's fallback events: grows when a step hands over. */
static int64_t handovers(const vtrace *t) {
  int64_t k = 0;
  for (int i = 0; i < t->n; i++)
    if (t->ev[i].kind == TR_FALLBACK) k += t->ev[i].count;
  return k;
}

/* The first fallback event of t, NULL: none. */
static const vtrace_event *first_fallback(const vtrace *t) {
  for (int i = 0; i < t->n; i++)
    if (t->ev[i].kind == TR_FALLBACK) return &t->ev[i];
  return NULL;
}

/* The V_ERR of a hand-over e that w does not expect, `where` "at open" or "at step N". */
static vstatus refuse(const ran_state *w, const vtrace_event *e, const char *where) {
  return VERR("path %s fell back to %s %s (%s: %s): the path under test did not run; give --expect-fallback if the "
              "plan means to accept it", w->name, e->variant, where, e->op, e->detail[0] ? e->detail : "no reason given");
}

static vstatus w_supports(void *s, const vstep *st) {
  ran_state *w = s;
  return w->inner->supports(w->st, st);
}

/* Runs the step; a hand-over recorded during it that is not expected makes it V_ERR (its logits are
 * another path's). */
static vstatus w_forward(void *s, const vstep *st, float *logits) {
  ran_state *w = s;
  const int64_t before = handovers(&w->tally);
  vstatus r = w->inner->forward(w->st, st, logits);
  const int64_t step = w->steps++;
  vtrace_next_step(&w->tally);
  if (r != V_OK || w->expect_fallback || handovers(&w->tally) == before) return r;
  char where[48];
  snprintf(where, sizeof where, "at step %lld", (long long)step);
  const vtrace_event *e = first_fallback(&w->tally);
  return refuse(w, e, where);
}

static vstatus w_reset(void *s, int seq) {
  ran_state *w = s;
  return w->inner->reset(w->st, seq);
}
static vstatus w_fill(void *s, int seq, int len, uint64_t seed) {
  ran_state *w = s;
  return w->inner->fill_cache(w->st, seq, len, seed);
}
static double w_last_ms(void *s) {
  ran_state *w = s;
  return w->inner->last_step_ms(w->st);
}
static double w_last_experts(void *s) {
  ran_state *w = s;
  return w->inner->last_experts(w->st);
}

/* The choices are the path's; they are not what ran, so they go to `out` only, not to the tally. */
static vstatus w_selectable(void *s, const vpath_envelope *env, vtrace *out) {
  ran_state *w = s;
  return w->inner->selectable(w->st, env, out);
}

void ran_free(void *s) {
  ran_state *w = s;
  if (!w) return;
  vtrace_free(&w->tally);
  free(w);
}

static void w_close(void *s) {
  ran_state *w = s;
  if (w->inner && w->st) w->inner->close(w->st);
  ran_free(w);
}

/* The wrapper's ops around `inner` (same name, caps and optional functions); NULL when MAX_WRAPPED
 * distinct inner ops are wrapped already. */
static const vpath_ops *ops_around(const vpath_ops *inner) {
  const vpath_ops *out = NULL;
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < g_n && !out; i++)
    if (g_inner[i] == inner) out = &g_ops[i];
  if (!out && g_n < MAX_WRAPPED) {
    vpath_ops *o = &g_ops[g_n];
    *o = *inner; /* name, desc, latent_kv, caps */
    o->open = NULL; /* opened through vpath_open only */
    o->supports = inner->supports ? w_supports : NULL;
    o->forward = w_forward;
    o->reset = inner->reset ? w_reset : NULL;
    o->fill_cache = inner->fill_cache ? w_fill : NULL;
    o->last_step_ms = inner->last_step_ms ? w_last_ms : NULL;
    o->last_experts = inner->last_experts ? w_last_experts : NULL;
    o->close = w_close;
    o->selectable = inner->selectable ? w_selectable : NULL;
    g_inner[g_n++] = inner;
    out = o;
  }
  pthread_mutex_unlock(&g_mu);
  return out;
}

void *ran_new(const vpath_opts *o, const char *name) {
  ran_state *w = vcalloc(1, sizeof *w, "the path's tally");
  if (!w) return NULL;
  vtrace_init_tally(&w->tally);
  w->tally.tee = o->trace;
  w->expect_fallback = o->expect_fallback;
  snprintf(w->name, sizeof w->name, "%s", name);
  return w;
}

vtrace *ran_tally(void *w) { return &((ran_state *)w)->tally; }

vstatus ran_wrap(void *s, vpath *p) {
  ran_state *w = s;
  assert(w && p->ops && p->state);
  w->inner = p->ops;
  w->st = p->state;
  const vpath_ops *ops = ops_around(w->inner);
  const vtrace_event *e = first_fallback(&w->tally);
  vstatus r = !ops ? VERR("path %s: more than %d distinct paths opened in one process", w->name, MAX_WRAPPED)
              : e && !w->expect_fallback ? refuse(w, e, "at open")
                                         : V_OK;
  if (r != V_OK) {
    w_close(w);
    p->ops = NULL;
    p->state = NULL;
    return r;
  }
  p->ops = ops;
  p->state = w;
  return V_OK;
}

vtrace *ran_of(const vpath *p) {
  if (!p->ops || p->ops->close != w_close) return NULL;
  return &((ran_state *)p->state)->tally;
}
