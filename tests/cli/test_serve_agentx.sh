#!/usr/bin/env bash
# An AgentX trace (AIPerf's weka_trace format, suites/sweep/server_agentx.h) replayed by `vouch sweep
# --server --sessions` against vouch serve (loopback only): told by its shape, the composed prompts'
# lengths are the recorded ones (vouch serve's prompt token counter), a subagent and a context cut
# are sessions of their own, a subagent starts after the parent turn that spawned it (spawn), a
# parent turn waits for its subagent (join) and --concurrency counts session trees (all proven from
# the record's per-turn send and end times), the record carries
# trace_format, e2e_norm_interactivity_p90 (InferenceX: 1000 / p90 of E2E ms per output token)
# beside interactivity_p90, and decode_tokens_per_s beside tokens_per_s; errors name FILE:LINE and
# the field.
. "$VOUCH_SRC/tests/cli/counters.sh"
. "$VOUCH_SRC/tests/cli/serve_lib.sh"
command -v curl >/dev/null || { echo "curl missing"; exit 77; }

start_server a --max-seqs 4 --max-ctx 256
A=$url A_PID=$spid

cat >"$t/agentx.json" <<'EOF'
{
  "id": "tr1", "models": ["m"], "block_size": 4, "hash_id_scope": "local",
  "requests": [
    {"t": 0.0, "type": "n", "model": "m", "in": 8, "out": 3, "hash_ids": [1, 2], "api_time": 1.0, "think_time": 0.0},
    {"t": 1.5, "type": "s", "model": "m", "in": 16, "out": 2, "hash_ids": [1, 2, 3, 4], "api_time": 0.5},
    {"t": 0.4, "type": "subagent", "agent_id": "a1", "status": "completed", "requests": [
      {"t": 0.4, "type": "n", "model": "h", "in": 6, "out": 2, "hash_ids": [1, 9]},
      {"t": 0.8, "type": "n", "model": "h", "in": 10, "out": 1, "hash_ids": [1, 9, 10], "think_time": 0.2}]},
    {"t": 2.0, "type": "n", "model": "m", "in": 12, "out": 4, "hash_ids": [1, 2, 5], "think_time": 0.1}
  ]
}
EOF
# composed prompts: main 8, 8+3+5=16; the cut session 12; the subagent 6, 6+2+2=10  -> 52
p0=$(curl -s "$A/metrics" | awk '/^vllm:prompt_tokens_total/ {print $2}')
start=$(date +%s.%N)
"$VOUCH" sweep --server "$A" --sessions "$t/agentx.json" --concurrency 4 --warmup 0 --trace-speed 2 \
  --json "$t/a.json" >"$t/a.txt" 2>&1 && ok || bad "AgentX replay: $(cat "$t/a.txt")"
echo "AgentX replay of 5 turns took $(awk "BEGIN {print $(date +%s.%N) - $start}") s"
p1=$(curl -s "$A/metrics" | awk '/^vllm:prompt_tokens_total/ {print $2}')
[ "$((p1 - p0))" -eq 52 ] && ok || bad "prompt tokens grew by $((p1 - p0)), want 52 (the recorded prompt lengths)"
grep -q "session replay of an AgentX trace" "$t/a.txt" && grep -q "3 sessions, 5 turns, speed x2, block 4 tokens" "$t/a.txt" \
  && grep -q "E2E-normalized" "$t/a.txt" && ok || bad "intro: $(cat "$t/a.txt")"
python3 - "$t/a.json" <<'PY' && ok || bad "AgentX record: $(head -c 900 "$t/a.json")"
import json, sys
(r,) = json.load(open(sys.argv[1]))["records"]
m = {x["name"]: x for x in r["metrics"]}
v = {k: x["value"] for k, x in m.items()}
assert r["case_id"] == "sessions/agentx.json/c4" and r["status"] == "pass", r["case_id"]
assert r["params"]["trace_format"] == "agentx" and "trace" not in r["params"], r["params"]
assert v["sessions"] == 3 and v["sessions_ok"] == 3 and v["requests_ok"] == 5, v
assert v["output_tokens"] == 3 + 2 + 4 + 2 + 1, v
assert v["turn2_prompt_tokens"] == (16 + 10) / 2, v
# InferenceX: 1000 / the p90 (linear interpolation) of E2E ms / output tokens per request (line order)
outs = [3, 2, 4, 2, 1]
per = sorted(e / o for e, o in zip(m["e2e_ms"]["samples"], outs))
pos = 0.9 * (len(per) - 1); lo = int(pos)
p90 = per[lo] + (per[min(lo + 1, len(per) - 1)] - per[lo]) * (pos - lo)
assert abs(v["e2e_norm_interactivity_p90"] - 1000 / p90) < 1e-6 * v["e2e_norm_interactivity_p90"], (v, p90)
assert v["e2e_norm_interactivity_p90"] < v["interactivity_p90"], v  # TTFT counts against it
# pure decode: tokens after each first over the time some request decoded; faster than prefill + decode
assert v["decode_tokens_per_s"] > 0 and "tokens_per_s" in v, v
PY
# Spawns, joins and trees. The parent's first turn (0 s) spawns the subagent (at 0 s, the last parent
# request at or before it; gap 0 - (0 + 0) s): the subagent's first turn is sent only after it ended,
# with the parent's second turn (0.05 s recorded, no pause: due at that same end), beside it. The
# parent's turn at 0.2 s is at the subagent's recorded end (0 s + 190 ms), so it is sent only after the
# subagent's last turn ended; the subagent (1.2 s of think time between its turns) outlasts the
# parent's own schedule by far, so the wait shows in the record's per-turn times. The timing is in the
# think times, not in token counts: under ASan a 200-token first turn took 4.4 s and outlasted the
# subagent (the CI of 9c6e83d). --concurrency 1 counts trees: the subagent and its parent's second
# turn are both due at the first turn's end and go out together in the same lane, where a cap of 1
# turn in flight would hold one back until the other ended; the second trace (one turn) starts only
# when every turn of the first has ended.
cat >"$t/join.json" <<'EOF'
{
  "id": "tr1", "block_size": 4, "hash_id_scope": "local",
  "requests": [
    {"t": 0.0, "type": "n", "in": 8, "out": 8, "hash_ids": [1, 2], "api_time": 0.0},
    {"t": 0.0, "type": "subagent", "agent_id": "a1", "duration_ms": 190, "requests": [
      {"t": 0.0, "type": "n", "in": 6, "out": 2, "hash_ids": [1, 9]},
      {"t": 0.1, "type": "n", "in": 10, "out": 2, "hash_ids": [1, 9, 10], "think_time": 1.2}]},
    {"t": 0.05, "type": "s", "in": 20, "out": 8, "hash_ids": [1, 2, 3, 4, 5], "think_time": 0.0},
    {"t": 0.2, "type": "s", "in": 32, "out": 2, "hash_ids": [1, 2, 3, 4, 5, 6, 7, 8], "think_time": 0.0}
  ]
}
{"id": "tr2", "block_size": 4, "requests": [{"t": 0, "type": "n", "in": 8, "out": 2, "hash_ids": [1, 2]}]}
EOF
start=$(date +%s.%N)
"$VOUCH" sweep --server "$A" --sessions "$t/join.json" --concurrency 1 --warmup 0 --json "$t/j.json" >"$t/j.txt" 2>&1 \
  && ok || bad "AgentX replay with a spawn and a join: $(cat "$t/j.txt")"
echo "AgentX replay with a spawn, a join and 2 trees took $(awk "BEGIN {print $(date +%s.%N) - $start}") s"
grep -q "trees 2 (--concurrency counts live trees), join turns 1 .*spawned subagent sessions 1 " "$t/j.txt" && ok || bad "intro: $(cat "$t/j.txt")"
python3 - "$t/j.json" <<'PY' && ok || bad "spawn and join record: $(head -c 900 "$t/j.json")"
import json, sys
(r,) = json.load(open(sys.argv[1]))["records"]
m = {x["name"]: x for x in r["metrics"]}
v = {k: x["value"] for k, x in m.items()}
p = r["params"]
assert r["status"] == "pass" and v["requests_ok"] == 6 and v["sessions"] == 3, (r["status"], v)
assert p["trees"] == 2 and p["joins"] == 1 and p["spawns"] == 1 and p["concurrency"] == 1, p
# lines: parent turns 0, 1 and 2, subagent turns 3 and 4, the second trace's turn 5
send, end = m["turn_send_s"]["samples"], m["turn_end_s"]["samples"]
assert len(send) == len(end) == 6, (send, end)
eps = 1e-6
assert send[3] >= end[0] - eps, f"the subagent was sent at {send[3]:.3f} s, before its spawning turn ended at {end[0]:.3f} s"
assert send[2] >= end[4] - eps, f"the join turn was sent at {send[2]:.3f} s, before the subagent ended at {end[4]:.3f} s"
assert end[4] > end[1] + 0.1, f"vacuous: the subagent ended at {end[4]:.3f} s, the parent's second turn at {end[1]:.3f} s"
assert send[3] < end[1] and send[1] < end[3], f"the subagent ({send[3]:.3f}-{end[3]:.3f} s) did not run beside its parent's second turn ({send[1]:.3f}-{end[1]:.3f} s)"
assert send[5] >= max(end[:5]) - eps, f"the second tree started at {send[5]:.3f} s, before the first ended ({max(end[:5]):.3f} s)"
PY
# Parallel chains: a subagent whose two workers (A: ids 1, 2, ..; B: 1, 3, ..) interleave in its
# list, B's first request overlapping A's first. Each is a session spawned by the parent's first turn
# (ended at its recorded 0.3 s): A 0.2 s after it, B at its own offset 0.3 s later; A's second turn
# goes on A's history (14 - 10 = 4 new tokens), B's on B's (13 - 10 = 3), so the server's prompt
# counter grows by the recorded lengths, where one chain would have sent A's second turn on B's
# history. The recorded gaps, not token counts, keep the order (ASan).
cat >"$t/par.json" <<'EOF'
{"id": "p", "block_size": 4, "requests": [
  {"t": 0.0, "type": "n", "in": 4, "out": 1, "hash_ids": [7], "api_time": 0.3},
  {"t": 0.5, "type": "subagent", "requests": [
    {"t": 0.5, "type": "n", "in": 8, "out": 2, "hash_ids": [1, 2], "api_time": 0.5},
    {"t": 0.8, "type": "n", "in": 8, "out": 2, "hash_ids": [1, 3], "api_time": 0.5},
    {"t": 1.1, "type": "n", "in": 14, "out": 1, "hash_ids": [1, 2, 4], "think_time": 0.1},
    {"t": 1.4, "type": "n", "in": 13, "out": 1, "hash_ids": [1, 3, 5], "think_time": 0.1}]}]}
EOF
p0=$(curl -s "$A/metrics" | awk '/^vllm:prompt_tokens_total/ {print $2}')
"$VOUCH" sweep --server "$A" --sessions "$t/par.json" --concurrency 1 --warmup 0 --json "$t/p.json" >"$t/p.txt" 2>&1 \
  && ok || bad "parallel chains: $(cat "$t/p.txt")"
p1=$(curl -s "$A/metrics" | awk '/^vllm:prompt_tokens_total/ {print $2}')
[ "$((p1 - p0))" -eq $((4 + 8 + 14 + 8 + 13)) ] && ok || bad "parallel chains: prompt tokens grew by $((p1 - p0)), want 47"
grep -q "3 sessions, 5 turns" "$t/p.txt" && grep -q "spawned subagent sessions 2 " "$t/p.txt" && ok || bad "parallel intro: $(cat "$t/p.txt")"
python3 - "$t/p.json" <<'PY' && ok || bad "parallel chains record: $(head -c 900 "$t/p.json")"
import json, sys
(r,) = json.load(open(sys.argv[1]))["records"]
m = {x["name"]: x for x in r["metrics"]}
assert r["status"] == "pass" and m["requests_ok"]["value"] == 5, r["status"]
# lines: the parent 0; A 1, 2; B 3, 4 (grouped by session)
send, end = m["turn_send_s"]["samples"], m["turn_end_s"]["samples"]
assert send[1] >= end[0] + 0.2 - 0.01 and send[3] >= end[0] + 0.5 - 0.01, f"spawned at {send[1]:.3f}, {send[3]:.3f} s, the spawner ended at {end[0]:.3f} s"
assert send[3] < send[1] + 0.5, f"B ({send[3]:.3f} s) waited for A ({send[1]:.3f} s), not its offset of 0.3 s"
assert send[2] >= end[1] + 0.1 - 0.01 and send[4] >= end[3] + 0.1 - 0.01, (send, end)
PY
# a malformed join: FILE:LINE and the field
printf '%s\n' '{"block_size": 4, "requests": [{"t": 0, "type": "n", "in": 4, "out": 2},' \
  '{"t": 0.1, "type": "subagent", "duration_ms": -3, "requests": [{"t": 0.1, "type": "n", "in": 4, "out": 2}]}]}' >"$t/dur.json"
expect_error 1 "dur.json:1: requests\[1\].duration_ms must be a number of ms >= 0" \
  "$VOUCH" sweep --server "$A" --sessions "$t/dur.json"
# a directory of trace files (AIPerf's layout): its own *.json files in name order, one tree each;
# the same trace twice under two ids, and a file that is no trace beside them: the prompts of both
mkdir -p "$t/dir/sub"
sed 's/"tr1"/"tr0"/' "$t/agentx.json" >"$t/dir/0.json" && cp "$t/agentx.json" "$t/dir/1.json" && echo x >"$t/dir/notes.txt"
cp "$t/dur.json" "$t/dir/sub/2.json"
p0=$(curl -s "$A/metrics" | awk '/^vllm:prompt_tokens_total/ {print $2}')
"$VOUCH" sweep --server "$A" --sessions "$t/dir/" --concurrency 2 --warmup 0 --trace-speed 4 --json "$t/d.json" >"$t/d.txt" 2>&1 \
  && ok || bad "directory replay: $(cat "$t/d.txt")"
p1=$(curl -s "$A/metrics" | awk '/^vllm:prompt_tokens_total/ {print $2}')
[ "$((p1 - p0))" -eq 104 ] && ok || bad "directory: prompt tokens grew by $((p1 - p0)), want 2 x 52"
grep -q "6 sessions, 10 turns" "$t/d.txt" && grep -q "trees 2" "$t/d.txt" && ok || bad "directory intro: $(cat "$t/d.txt")"
python3 -c 'import json,sys; (r,) = json.load(open(sys.argv[1]))["records"]; assert r["case_id"] == "sessions/dir/c2", r["case_id"]' \
  "$t/d.json" && ok || bad "directory record id: $(head -c 300 "$t/d.json")"
cp "$t/dir/1.json" "$t/dir/2.json"
expect_error 1 "dir/2.json:1: id \"tr1\" names an earlier trace of the directory too" "$VOUCH" sweep --server "$A" --sessions "$t/dir"
rm "$t/dir/2.json" && ln -s "$t/agentx.json" "$t/dir/2.json"
expect_error 1 "dir/2.json: not a regular file" "$VOUCH" sweep --server "$A" --sessions "$t/dir"
expect_error 1 "replay it with --sessions" "$VOUCH" sweep --server "$A" --trace "$t/dir"
# --trace-format wins over the shape; --trace refuses an AgentX trace (it holds sessions)
expect_error 1 "agentx.json:1: not a JSON object" "$VOUCH" sweep --server "$A" --sessions "$t/agentx.json" --trace-format mooncake
printf '%s\n' '{"timestamp": 0, "input_length": 4, "output_length": 2}' >"$t/moon.jsonl"
expect_error 1 "moon.jsonl:1: requests must be a list" "$VOUCH" sweep --server "$A" --sessions "$t/moon.jsonl" --trace-format agentx
expect_error 1 "replay it with --sessions" "$VOUCH" sweep --server "$A" --trace "$t/agentx.json"
expect_error 2 "--trace-format 'weka'" "$VOUCH" sweep --server "$A" --sessions "$t/agentx.json" --trace-format weka
expect_error 2 "--trace-format needs" "$VOUCH" sweep --server "$A" --trace-format agentx
# broken traces: FILE:LINE and the field
printf '\n{"block_size": 4, "requests": [{"t": 0, "type": "n", "in": 4, "out": 0}]}\n' >"$t/bad.json"
expect_error 1 "bad.json:2: requests\[0\].out must be an integer" "$VOUCH" sweep --server "$A" --sessions "$t/bad.json"
printf '%s\n' '{"block_size": 4, "requests": [{"t": 0, "type": "n", "in": 300, "out": 2}]}' >"$t/long.json"
expect_error 1 "session 0 needs 302 tokens by turn 1, more than the server's max_model_len 256" \
  "$VOUCH" sweep --server "$A" --sessions "$t/long.json"

stop_server "$A_PID" && ok || bad "server a did not exit 0 on SIGTERM"
finish
