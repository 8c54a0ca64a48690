/* Multi-turn session replay for `vouch sweep --server` (the session format: suites/sweep/server_trace.h).
 *
 * Requests are laid out as the trace lines are (turns of a session contiguous). A first turn is
 * sent at its timestamp; each later turn is held until the turn before it finished, then gets its
 * prompt (that turn's prompt + the token ids the server returned + its own new tokens) and is sent
 * pause_ms later. A failed turn ends its session: the turns after it are not sent and count as
 * failed, each saying which turn failed.
 *
 * Joins and trees (AgentX traces, server_agentx.h). A turn that sessions name as their joiner
 * (a parent turn after its subagent's recorded end) is held until every turn of those sessions
 * finished, ok or not (a subagent whose turn failed has ended: its later turns count as failed and
 * the parent goes on); it is then sent at the later of its own time (the previous turn's end +
 * its pause, or its timestamp for a first turn) and the last of those ends: the recorded pause
 * already holds the time the agent spent waiting, so it is not added again. With lanes > 0 at most
 * `lanes` trees are live: the first `lanes` start at their timestamps, and each tree whose every
 * turn finished (or was skipped) admits the next one in file order, whose first turns are then
 * sent at their offsets from that tree's start (never before their own timestamps).
 *
 * Spawns: a first turn that names a spawner (a subagent's, after the parent turn that spawned it)
 * is held until that turn finished or was skipped, ok or not, and is then sent its pause_ms (the
 * recorded gap) later, whatever its own timestamp; it is not counted as its tree's first turn
 * (the spawner's tree is admitted, and the subagent goes with it). Everything
 * waits in the held flags that served_run_hooked already honours: released by the done hook, no
 * thread and no polling of its own. */
#ifndef VOUCH_SUITES_SWEEP_SERVER_REPLAY_H
#define VOUCH_SUITES_SWEEP_SERVER_REPLAY_H

#include "suites/engine/record.h"
#include "suites/sweep/server_trace.h"
#include "suites/served/served.h"

typedef struct {
  const trace_line *tr;   /* [n] */
  int32_t *const *fresh;  /* [n] each line's new input tokens ([tr[i].in]) */
  int32_t **composed;     /* [n] prompts built for later turns (owned here; NULL for first turns, and once the
                             turn finished: the next turn holds a copy) */
  int n;
  int vocab;              /* token ids a turn returned must be below it to go into the next prompt */
  double speed;           /* --trace-speed: divides timestamps and pauses */
  int lanes;              /* > 0: at most this many trees live at once (AgentX --concurrency); 0: trees
                             not tracked (served_run's concurrency caps turns in flight) */
  int *wait;              /* [n] conditions a held line still waits for: its previous turn (1), each
                             session it joins (1 each), its spawner or else its tree's admission (first
                             turns, 1) (owned) */
  double *due;            /* [n] s after the run's start: the earliest send the conditions met so far
                             allow (owned) */
  int *sess_left;         /* [n_sess] turns of the session neither finished nor skipped (owned) */
  int n_sess;
  int *tree_left;         /* [n_trees] turns of the tree neither finished nor skipped (owned) */
  int *tree_first;        /* [n_trees] its first line (a tree's lines are contiguous) (owned) */
  double *tree_t0;        /* [n_trees] ms: its earliest first-turn timestamp (owned) */
  int n_trees;            /* 1 + the largest tree index */
  int next_tree;          /* lanes > 0: the first tree not admitted yet */
  int n_joins;            /* turns that wait for sessions (trace_tree_counts) */
  int *spawned;           /* [n] the first line that line i spawned, -1: none (owned) */
  int *spawn_next;        /* [n] the next line spawned by the same line, -1: none (owned) */
  int n_spawns;           /* first turns that wait for the turn that spawned them */
} replay_ctx;

/* Prepares reqs[0..n) from the lines: prompts of first turns (fresh), arrival times, held later
 * turns, join turns and the turns of trees past the first `lanes` (0: no tree cap), keep_ids where
 * a next turn needs them. Error: out of memory, or lanes > 0 and a tree's lines not contiguous. */
vstatus replay_init(replay_ctx *c, const trace_line *tr, int32_t *const *fresh, int n, int vocab, double speed,
                    int lanes, served_req *reqs);
/* served_done_fn: releases (or skips) the next turn of the session of reqs[i], the first turns it
 * spawned, the turn joining that session once it is over, and the next tree once this one is over. */
void replay_done(void *ctx, served_req *reqs, int i, double t0);
void replay_free(replay_ctx *c);

/* Per-turn and per-session figures of a replay into r: turnK_ttft_ms, turnK_tpot_ms (medians, K = 1..
 * up to 16 turns), turnK_prompt_tokens (mean), session_ms (first send to last token of every session
 * whose turns all succeeded: median and session_ms_p90), sessions and sessions_ok; turn_send_s and
 * turn_end_s: every line's send and end, s after the first send, in line order (value: the latest;
 * a skipped turn has its failed turn's end as both), left out when a line was never sent (an
 * interrupted run), so that a join can be checked from the record. */
vstatus replay_metrics(vrecord *r, const replay_ctx *c, const served_req *reqs);

#endif
