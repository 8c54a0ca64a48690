/* Request traces for `vouch sweep --server`: Mooncake JSONL traces, and multi-turn sessions in
 * vouch's extension of that format (docs/serving.md, "Sessions").
 *
 * Mooncake's open trace format is one request per line: {"timestamp": ms, "input_length": N,
 * "output_length": N, "hash_ids": [...]} (hash ids name blocks of the prompt, so equal ids mean
 * shared prefixes). vouch adds two optional fields for agentic sessions:
 *   "session_id": string or integer; lines with the same id are the turns of one session, in file
 *                 order. A line without it is a session of one turn, so a plain Mooncake trace
 *                 reads as one-turn sessions.
 *   "pause_ms":   the tool pause before this turn: it is sent pause_ms after the previous turn's
 *                 last token arrived (ignored on a first turn, whose start is its timestamp; the
 *                 timestamps of later turns are ignored).
 * In a session, a turn's input_length (and hash_ids) are its new tokens only (the tool's result,
 * the user's next message): its prompt is the previous turn's prompt + the token ids the server
 * returned for it + these new tokens, so every turn shares the whole history as a prefix. */
#ifndef VOUCH_SUITES_SWEEP_SERVER_TRACE_H
#define VOUCH_SUITES_SWEEP_SERVER_TRACE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/vstatus.h"

typedef struct {
  double t_ms;     /* timestamp (first turns; later turns: ignored) */
  int in, out;     /* new input tokens, output tokens */
  int64_t *hash;   /* [n_hash] block ids of the new input (owned) */
  int n_hash;
  int session;     /* session index, 0.. in order of first appearance */
  int turn;        /* 0.. within the session */
  double pause_ms; /* tool pause before this turn (turn > 0); a spawned first turn (spawner > 0): the
                      recorded gap between its spawner's end and its start */
  /* Session trees, joins and spawns (AgentX traces, server_agentx.h; 0 in Mooncake and generated sessions,
   * whose sessions stand alone). Zero means "none" so that a line built field by field stays plain. */
  int tree;        /* the tree (an agent run: its sessions and its subagents'), 0.. in file order;
                      AgentX replays admit --concurrency trees at a time */
  int joiner;      /* 1 + the index (into the lines) of the turn that is sent only after every turn of
                      this line's session finished (a parent turn joining its subagent); the same on
                      every line of a session; 0: no turn waits for this session */
  int spawner;     /* on the first turn of each of a subagent's sessions: 1 + the index of the parent turn
                      that spawned it, which it waits for (ok or failed) and then pause_ms, instead of
                      starting at t_ms; always an earlier line of the tree in another session; 0: none
                      (it starts at t_ms), as on every other line */
} trace_line;

/* Reads a trace. sessions: group lines by session_id (the turns of a session become contiguous,
 * sessions ordered by their first line); else every line is its own request (session = index).
 * limit > 0 keeps the first `limit` lines (requests) or, with sessions, the first `limit` sessions.
 * Errors name FILE:LINE and the field. */
vstatus trace_read(const char *file, int limit, bool sessions, trace_line **out, int *n_out);
void trace_free(trace_line *v, int n);
/* Every session's last turn (all its new inputs and outputs) must fit the server's context
 * (max_len; 0: unknown, not checked); the error names the session and the lengths. */
vstatus trace_sessions_fit(const char *src, const trace_line *v, int n, int max_len);
/* The trees (1 + the largest tree index) and the join turns (distinct joiners) of the lines.
 * Error: out of memory. */
vstatus trace_tree_counts(const trace_line *v, int n, int *trees, int *joins);

/* Synthetic agentic sessions: `gen:sessions=N,turns=T,input=I,delta=D,output=O,pause=MS,gap=MS,system=S`
 * (any subset; defaults 8, 4, 256, 64, 64, 500, 100, 0). Per session: T turns; the first turn's new
 * input uniform in [I/2, 3I/2], later turns' (tool results) in [D/2, 3D/2], every output in
 * [O/2, 3O/2] (at least 1), tool pauses exponential with mean MS, session starts a Poisson process
 * with mean gap MS; the first S tokens of every first turn (whole blocks of `block`) share hash ids
 * (a common system prompt). Seeded: the same seed gives the same sessions. */
typedef struct {
  int sessions, turns, input, delta, output, system;
  double pause_ms, gap_ms;
} session_gen;
vstatus session_gen_parse(const char *spec, session_gen *g);
vstatus session_generate(const session_gen *g, uint64_t seed, int block, trace_line **out, int *n_out);
/* Writes lines in the session format (session_id "s<index>"), one JSON object per line. */
vstatus trace_write(const char *file, const trace_line *v, int n);

#endif
