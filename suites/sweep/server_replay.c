/* Multi-turn session replay (suites/sweep/server_replay.h). */
#include "suites/sweep/server_replay.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool has_next(const replay_ctx *c, int i) { return i + 1 < c->n && c->tr[i + 1].session == c->tr[i].session; }

/* The line whose turn waits for line i's session, -1 when none (or the joiner is not a line of
 * another session: nothing may wait for itself). */
static int joiner_of(const replay_ctx *c, int i) {
  const int j = c->tr[i].joiner - 1;
  return j >= 0 && j < c->n && c->tr[j].session != c->tr[i].session ? j : -1;
}

/* The line whose end releases line i (a subagent's first turn, after the parent turn that spawned
 * it), -1 when none: only a first turn waits so, for a line of another session of its tree (an
 * earlier tree would hold its lane while waiting for a later one). */
static int spawner_of(const replay_ctx *c, int i) {
  const int j = c->tr[i].spawner - 1;
  return c->tr[i].turn == 0 && j >= 0 && j < c->n && c->tr[j].session != c->tr[i].session &&
                 c->tr[j].tree == c->tr[i].tree
             ? j
             : -1;
}

/* Sizes the per-session and per-tree tables; the trees' first lines and earliest timestamps.
 * Error: out of memory, or with lanes a tree whose lines are not contiguous. */
static vstatus alloc_tables(replay_ctx *c) {
  const int n = c->n;
  for (int i = 0; i < n; i++) {
    if (c->tr[i].session + 1 > c->n_sess) c->n_sess = c->tr[i].session + 1;
  }
  VTRY(trace_tree_counts(c->tr, n, &c->n_trees, &c->n_joins));
  c->wait = calloc((size_t)n, sizeof *c->wait);
  c->due = calloc((size_t)n, sizeof *c->due);
  c->sess_left = calloc((size_t)c->n_sess, sizeof *c->sess_left);
  c->tree_left = calloc((size_t)c->n_trees, sizeof *c->tree_left);
  c->tree_first = calloc((size_t)c->n_trees, sizeof *c->tree_first);
  c->tree_t0 = calloc((size_t)c->n_trees, sizeof *c->tree_t0);
  c->spawned = malloc((size_t)n * sizeof *c->spawned);
  c->spawn_next = malloc((size_t)n * sizeof *c->spawn_next);
  if (!c->wait || !c->due || !c->sess_left || !c->tree_left || !c->tree_first || !c->tree_t0 || !c->spawned ||
      !c->spawn_next)
    return VERR("out of memory for %d turns", n);
  for (int t = 0; t < c->n_trees; t++) c->tree_first[t] = -1, c->tree_t0[t] = INFINITY;
  for (int i = 0; i < n; i++) c->spawned[i] = c->spawn_next[i] = -1;
  for (int i = n - 1; i >= 0; i--) { /* each spawner's list in line order */
    const int j = spawner_of(c, i);
    if (j >= 0) c->spawn_next[i] = c->spawned[j], c->spawned[j] = i, c->n_spawns++;
  }
  for (int i = 0; i < n; i++) {
    const trace_line *L = &c->tr[i];
    c->sess_left[L->session]++;
    if (c->tree_first[L->tree] < 0) c->tree_first[L->tree] = i;
    else if (c->lanes && L->tree != c->tr[i - 1].tree)
      return VERR("turn %d of tree %d is apart from the tree's other turns", i, L->tree);
    c->tree_left[L->tree]++;
    if (L->turn == 0) c->tree_t0[L->tree] = fmin(c->tree_t0[L->tree], L->t_ms);
  }
  return V_OK;
}

vstatus replay_init(replay_ctx *c, const trace_line *tr, int32_t *const *fresh, int n, int vocab, double speed,
                    int lanes, served_req *reqs) {
  assert(n >= 1 && speed > 0 && vocab >= 1 && lanes >= 0);
  *c = (replay_ctx){.tr = tr, .fresh = fresh, .n = n, .vocab = vocab, .speed = speed, .lanes = lanes};
  c->composed = calloc((size_t)n, sizeof *c->composed);
  if (!c->composed) return VERR("out of memory for %d turns", n);
  VTRY(alloc_tables(c));
  c->next_tree = lanes ? lanes : c->n_trees;
  double t_min = INFINITY;
  for (int i = 0; i < n; i++)
    if (tr[i].turn == 0) t_min = fmin(t_min, tr[i].t_ms);
  for (int i = 0; i < n; i++) {
    if (tr[i].turn > 0) c->wait[i]++;                     /* its previous turn */
    else if (spawner_of(c, i) >= 0) c->wait[i]++;         /* its spawner (admitted before it) */
    else if (tr[i].tree >= c->next_tree) c->wait[i]++;    /* its tree's admission */
    const int j = i == 0 || tr[i - 1].session != tr[i].session ? joiner_of(c, i) : -1;
    if (j >= 0) c->wait[j]++;                             /* this session, once */
  }
  for (int i = 0; i < n; i++) {
    served_req *q = &reqs[i];
    q->max_tokens = tr[i].out;
    q->keep_ids = has_next(c, i);
    if (tr[i].turn == 0) {
      q->prompt = fresh[i], q->n_prompt = tr[i].in;
      /* a spawned first turn: due from its spawner's end alone, not its recorded time */
      c->due[i] = spawner_of(c, i) >= 0 ? 0 : (tr[i].t_ms - t_min) / 1e3 / speed;
    }
    q->held = c->wait[i] > 0; /* replay_done gives a later turn its prompt; every held one its arrival */
    q->arrival_s = c->due[i];
  }
  return V_OK;
}

/* One condition of held line k met at `at` (s after the run's start): sent when none is left, at
 * the latest time any of them set. A skipped line stays skipped. */
static void satisfy(replay_ctx *c, served_req *reqs, int k, double at) {
  served_req *q = &reqs[k];
  if (q->skip) return;
  assert(c->wait[k] > 0);
  c->due[k] = fmax(c->due[k], at);
  if (--c->wait[k] > 0) return;
  q->arrival_s = c->due[k];
  q->held = false;
}

/* With lanes, the next tree in file order is admitted at `at`: its first turns are due at their
 * offsets from the tree's start (never before their own timestamps: satisfy keeps the later). */
static void admit_next(replay_ctx *c, served_req *reqs, double at) {
  if (c->next_tree >= c->n_trees) return;
  const int t = c->next_tree++;
  for (int i = c->tree_first[t]; i >= 0 && i < c->n && c->tr[i].tree == t; i++)
    if (c->tr[i].turn == 0 && spawner_of(c, i) < 0) /* a spawned one goes with its spawner */
      satisfy(c, reqs, i, at + (c->tr[i].t_ms - c->tree_t0[t]) / 1e3 / c->speed);
}

/* Line k finished or was skipped at `at`: the subagents it spawned are due their gap later, its
 * session may be over (its joiner then has one wait less), and its tree (the next one is then
 * admitted). */
static void line_over(replay_ctx *c, served_req *reqs, int k, double at) {
  const trace_line *L = &c->tr[k];
  for (int s = c->spawned[k]; s >= 0; s = c->spawn_next[s])
    satisfy(c, reqs, s, at + c->tr[s].pause_ms / 1e3 / c->speed);
  const int j = joiner_of(c, k);
  if (--c->sess_left[L->session] == 0 && j >= 0) satisfy(c, reqs, j, at);
  if (c->lanes && --c->tree_left[L->tree] == 0) admit_next(c, reqs, at);
}

/* Marks the turns after i in its session as not sent, naming why; they are over at i's end (at). */
static void skip_rest(replay_ctx *c, served_req *reqs, int i, double at, const char *why) {
  for (int k = i + 1; k < c->n && c->tr[k].session == c->tr[i].session; k++) {
    served_req *q = &reqs[k];
    q->held = false, q->skip = true, q->ok = false;
    q->t_send = q->t_end = reqs[i].t_end; /* counted among the failed requests */
    snprintf(q->error, sizeof q->error, "not sent: turn %d of session %d %s", c->tr[i].turn + 1, c->tr[i].session, why);
  }
  for (int k = i + 1; k < c->n && c->tr[k].session == c->tr[i].session; k++) line_over(c, reqs, k, at);
}

/* The turn after i (of the same session) gets its prompt and one wait less: due its pause after
 * i's end (at); or, when i failed or its tokens cannot go into a prompt, the session ends. */
static void next_turn(replay_ctx *c, served_req *reqs, int i, double at) {
  const served_req *r = &reqs[i];
  if (!r->ok) { skip_rest(c, reqs, i, at, "failed"); return; }
  for (int k = 0; k < r->n_tokens; k++)
    if (!r->ids || r->ids[k] < 0 || r->ids[k] >= c->vocab) {
      skip_rest(c, reqs, i, at, "returned a token id outside the vocabulary");
      return;
    }
  const int in = c->tr[i + 1].in;
  const long n = (long)r->n_prompt + r->n_tokens + in;
  int32_t *p = n < (1L << 28) ? malloc((size_t)n * sizeof *p) : NULL;
  if (!p) { skip_rest(c, reqs, i, at, "left no memory for the next prompt"); return; }
  memcpy(p, r->prompt, (size_t)r->n_prompt * sizeof *p);
  memcpy(p + r->n_prompt, r->ids, (size_t)r->n_tokens * sizeof *p);
  memcpy(p + r->n_prompt + r->n_tokens, c->fresh[i + 1], (size_t)in * sizeof *p);
  free(c->composed[i + 1]);
  c->composed[i + 1] = p;
  served_req *q = &reqs[i + 1];
  q->prompt = p, q->n_prompt = (int)n;
  satisfy(c, reqs, i + 1, at + c->tr[i + 1].pause_ms / 1e3 / c->speed);
}

void replay_done(void *ctx, served_req *reqs, int i, double t0) {
  replay_ctx *c = ctx;
  assert(i >= 0 && i < c->n);
  const double at = reqs[i].t_end - t0;
  if (has_next(c, i)) next_turn(c, reqs, i, at);
  /* its prompt went out and the next turn's holds a copy: a session's history is kept once, for its
   * latest turn, not once per turn (a replay of long agent sessions held every turn's whole history
   * until the level ended; n_prompt stays for the figures) */
  if (c->composed[i]) {
    free(c->composed[i]);
    c->composed[i] = NULL;
    reqs[i].prompt = NULL;
  }
  line_over(c, reqs, i, at);
}

void replay_free(replay_ctx *c) {
  if (c->composed)
    for (int i = 0; i < c->n; i++) free(c->composed[i]);
  free(c->composed);
  free(c->wait);
  free(c->due);
  free(c->sess_left);
  free(c->tree_left);
  free(c->tree_first);
  free(c->tree_t0);
  free(c->spawned);
  free(c->spawn_next);
  *c = (replay_ctx){0};
}

#define MAX_TURN_METRICS 16

/* turn_send_s and turn_end_s: every line's send and end in line order, s after the first send
 * (buf: [n] scratch); nothing when a line was never sent. */
static vstatus turn_times(vrecord *r, const replay_ctx *c, const served_req *reqs, double *buf) {
  double first = INFINITY;
  for (int i = 0; i < c->n; i++) {
    if (reqs[i].t_send == 0) return V_OK; /* interrupted: the times would not line up */
    first = fmin(first, reqs[i].t_send);
  }
  for (int i = 0; i < c->n; i++) buf[i] = reqs[i].t_send - first;
  VTRY(rec_metric_samples(r, "turn_send_s", "s", RD_MAX, RB_NONE, buf, c->n, 0));
  for (int i = 0; i < c->n; i++) buf[i] = reqs[i].t_end - first;
  return rec_metric_samples(r, "turn_end_s", "s", RD_MAX, RB_NONE, buf, c->n, 0);
}

vstatus replay_metrics(vrecord *r, const replay_ctx *c, const served_req *reqs) {
  const int n = c->n;
  double *ttft = malloc((size_t)n * sizeof *ttft), *tpot = malloc((size_t)n * sizeof *tpot);
  double *sess = malloc((size_t)n * sizeof *sess);
  if (!ttft || !tpot || !sess) { free(ttft); free(tpot); free(sess); return VERR("out of memory"); }
  vstatus s = V_OK;
  int max_turn = 0;
  for (int i = 0; i < n; i++) max_turn = c->tr[i].turn + 1 > max_turn ? c->tr[i].turn + 1 : max_turn;
  if (max_turn > MAX_TURN_METRICS) max_turn = MAX_TURN_METRICS;
  for (int k = 0; k < max_turn && s == V_OK; k++) {
    int na = 0, nb = 0;
    double prompt = 0;
    for (int i = 0; i < n; i++) {
      const served_req *q = &reqs[i];
      if (c->tr[i].turn != k || !q->ok) continue;
      ttft[na++] = (q->t_first - q->t_send) * 1e3;
      prompt += q->n_prompt;
      if (q->n_tokens > 1) tpot[nb++] = (q->t_end - q->t_first) * 1e3 / (q->n_tokens - 1);
    }
    char nm[48];
    snprintf(nm, sizeof nm, "turn%d_ttft_ms", k + 1);
    if (na) s = rec_metric_samples(r, nm, "ms", RD_MEDIAN, RB_LOWER, ttft, na, 0);
    snprintf(nm, sizeof nm, "turn%d_tpot_ms", k + 1);
    if (nb && s == V_OK) s = rec_metric_samples(r, nm, "ms", RD_MEDIAN, RB_LOWER, tpot, nb, 0);
    snprintf(nm, sizeof nm, "turn%d_prompt_tokens", k + 1);
    if (na && s == V_OK) s = rec_metric_value(r, nm, "tok", RB_NONE, prompt / na);
  }
  /* sessions: first send to the last token of the last turn, for sessions whose every turn succeeded */
  int ns = 0, n_sess = 0;
  for (int i = 0; i < n;) {
    int j = i;
    bool ok = true;
    while (j < n && c->tr[j].session == c->tr[i].session) ok &= reqs[j].ok, j++;
    n_sess++;
    if (ok) sess[ns++] = (reqs[j - 1].t_end - reqs[i].t_send) * 1e3;
    i = j;
  }
  if (ns && s == V_OK) s = rec_metric_samples(r, "session_ms", "ms", RD_MEDIAN, RB_LOWER, sess, ns, 0);
  if (ns && s == V_OK) s = rec_metric_samples(r, "session_ms_p90", "ms", RD_P90, RB_LOWER, sess, ns, 0);
  if (s == V_OK) s = rec_metric_value(r, "sessions", "", RB_NONE, n_sess);
  if (s == V_OK) s = rec_metric_value(r, "sessions_ok", "", RB_HIGHER, ns);
  if (s == V_OK) s = turn_times(r, c, reqs, sess);
  free(ttft);
  free(tpot);
  free(sess);
  return s;
}
