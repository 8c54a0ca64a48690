/* Multi-turn session replay for `vouch sweep --server` (the session format: suites/sweep/server_trace.h).
 *
 * Requests are laid out as the trace lines are (turns of a session contiguous). A first turn is
 * sent at its timestamp; each later turn is held until the turn before it finished, then gets its
 * prompt (that turn's prompt + the token ids the server returned + its own new tokens) and is sent
 * pause_ms later. A failed turn ends its session: the turns after it are not sent and count as
 * failed, each saying which turn failed. */
#ifndef VOUCH_SUITES_SWEEP_SERVER_REPLAY_H
#define VOUCH_SUITES_SWEEP_SERVER_REPLAY_H

#include "suites/engine/record.h"
#include "suites/sweep/server_trace.h"
#include "suites/served/served.h"

typedef struct {
  const trace_line *tr;   /* [n] */
  int32_t *const *fresh;  /* [n] each line's new input tokens ([tr[i].in]) */
  int32_t **composed;     /* [n] prompts built for later turns (owned here; NULL for first turns) */
  int n;
  int vocab;              /* token ids a turn returned must be below it to go into the next prompt */
  double speed;           /* --trace-speed: divides timestamps and pauses */
} replay_ctx;

/* Prepares reqs[0..n) from the lines: prompts of first turns (fresh), arrival times, held later
 * turns, keep_ids where a next turn needs them. */
vstatus replay_init(replay_ctx *c, const trace_line *tr, int32_t *const *fresh, int n, int vocab, double speed,
                    served_req *reqs);
/* served_done_fn: releases (or skips) the next turn of the session of reqs[i]. */
void replay_done(void *ctx, served_req *reqs, int i, double t0);
void replay_free(replay_ctx *c);

/* Per-turn and per-session figures of a replay into r: turnK_ttft_ms, turnK_tpot_ms (medians, K = 1..
 * up to 16 turns), turnK_prompt_tokens (mean), session_ms (first send to last token of every session
 * whose turns all succeeded: median and session_ms_p90), sessions and sessions_ok. */
vstatus replay_metrics(vrecord *r, const replay_ctx *c, const served_req *reqs);

#endif
