/* AgentX traces for `vouch sweep --server --sessions FILE`: the agentic-coding trace format that
 * AIPerf reads as `weka_trace` and SemiAnalysis' InferenceX AgentX benchmark replays (docs/serving.md,
 * "AgentX traces", with the sources), parsed once here into the session lines of server_trace.h.
 *
 * A trace is one JSON object: {"id", "block_size": tokens per hash id, "hash_id_scope": "local",
 * "requests": [...]}. A request is {"t": s from the trace's start, "type": "n" | "s", "in": the
 * whole prompt's tokens, "out": output tokens, "hash_ids": [block ids of the whole prompt],
 * "think_time": s the client waited after the previous answer, "api_time": s the answer took}; a
 * {"type": "subagent", "t", "duration_ms", "requests": [...]} entry holds a helper agent's own
 * requests. A file holds one trace (pretty-printed or not) or one trace per line; other fields are
 * ignored. A directory holds trace files, as AIPerf reads one: its own *.json files (not its
 * subdirectories', no links) in byte order of their names, trace ids ("id") distinct.
 *
 * Into sessions: each list (the trace's own requests, each subagent's) is read into chains, each
 * chain a session. A request continues the chain whose latest request its prompt holds (its `in` at
 * least that one's `in` + `out`), which had answered before it started (t + api_time, 1 ms of slack:
 * requests that overlapped in time are parallel chains, as AIPerf splits a capture's flattened
 * workers), and which shares a leading hash id with it where both have ids; of several, the longest
 * shared prefix, then the latest continued (256 chains of a list are kept open). Otherwise it starts
 * a session at its recorded time: a first request, a context the agent cut, a parallel worker. The
 * lines are then grouped by session. A trace and its subagents are one tree (trace_line.tree): the
 * replay admits --concurrency trees at a time. Spawn (AIPerf's spawn/join): the parent's last own
 * request (in list order) whose t is at or before the subagent's t spawned it: the first turn of
 * each of the subagent's sessions is marked with that turn (trace_line.spawner), which the replay
 * lets it wait for, then the recorded gap max(0, subagent t - (spawn t + api_time)), plus, for a
 * session after the first, its start's offset from the first's (trace_line.pause_ms); a subagent
 * before every parent request starts its sessions at their recorded times. Join: a subagent ends at
 * its t + duration_ms / 1000 when given, else at the latest t + api_time of its requests, else at
 * its t; the parent's first own request (in list order) whose t is at or after that end waits for
 * it: every session of the subagent is marked with that turn (trace_line.joiner), which the replay
 * sends only after each of their turns finished. A subagent that ends after the parent's last
 * request is joined by none and runs on beside it. A spawner at or after the join turn in list
 * order (requests out of time order) would wait for its own subagent: that subagent is spawned by
 * none. What the replay does: server_replay.h.
 *
 * A later turn's new input is its `in` minus its chain's latest `in` + `out` (at least 1 token):
 * vouch composes the history from the server's own answers. Its pause is `think_time`, else t -
 * (that request's t + api_time), else t - that t (never below 0). A first turn keeps all its hash
 * ids, a later one those past the prefix it shares with its chain's latest; ids are scoped to their
 * trace (a trace and its subagents share blocks, two traces never). */
#ifndef VOUCH_SUITES_SWEEP_SERVER_AGENTX_H
#define VOUCH_SUITES_SWEEP_SERVER_AGENTX_H

#include "common/vstatus.h"
#include "suites/sweep/server_trace.h"

typedef enum {
  TRACE_FMT_AUTO = 0, /* decided by the file's shape (trace_format_detect) */
  TRACE_FMT_MOONCAKE, /* Mooncake JSON lines, with vouch's session fields (server_trace.h) */
  TRACE_FMT_AGENTX,   /* AgentX trace objects (above) */
} trace_format;

/* --trace-format auto|mooncake|agentx. Error: another word (names the option). */
vstatus trace_format_parse(const char *s, trace_format *f);
const char *trace_format_name(trace_format f);
/* The file's shape: AgentX for a directory (of trace files) or when its first JSON value is an
 * object with a "requests" list, else Mooncake (whose reader then names what is wrong). Error: the
 * file cannot be read. */
vstatus trace_format_detect(const char *file, trace_format *f);

/* Reads the AgentX traces of `file` (a file, or a directory of them) into session lines (turns of
 * a session contiguous, sessions in the order above, trees, spawns and joins set). limit > 0 keeps
 * the first `limit` sessions (a join turn that was cut leaves its subagent unjoined). *block: the
 * traces' block_size (every trace of the file, or the directory, must have the same). Errors name
 * FILE:LINE (the line its trace starts on) and the field, e.g. "t.json:1: requests[3].in must be an
 * integer in [1, 1e7]" or "t.json:1: requests[2].duration_ms must be a number of ms >= 0"; in a
 * directory DIR/NAME.json:LINE, e.g. "d/b.json:1: id \"x\" names an earlier trace of the directory too". */
vstatus agentx_read(const char *file, int limit, trace_line **out, int *n_out, int *block);

#endif
