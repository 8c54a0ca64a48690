#!/usr/bin/env bash
# Multi-turn session replay of `vouch sweep --server` (loopback only): the session file format
# (session_id, pause_ms on Mooncake lines), each turn's prompt = the previous prompt + the ids the
# server returned + the turn's new tokens (checked against a fake server that logs prompts, and by
# vouch serve's prompt token counter), tool pauses, the per-turn figures and interactivity_p90 in the
# record, the seeded generator, a failed turn ending its session, and errors naming FILE:LINE.
. "$VOUCH_SRC/tests/cli/counters.sh"
. "$VOUCH_SRC/tests/cli/serve_lib.sh"
command -v curl >/dev/null || { echo "curl missing"; exit 77; }

start_server a --max-seqs 4 --max-ctx 256
A=$url A_PID=$spid

# two sessions with interleaved lines, and a line without a session id (a session of its own)
cat >"$t/sess.jsonl" <<'EOF'
{"session_id": "agent-1", "timestamp": 0, "input_length": 20, "output_length": 4}
{"session_id": 7, "timestamp": 10, "input_length": 12, "output_length": 3}
{"session_id": "agent-1", "timestamp": 0, "input_length": 5, "output_length": 6, "pause_ms": 400}

{"timestamp": 30, "input_length": 9, "output_length": 2}
{"session_id": 7, "timestamp": 99, "input_length": 4, "output_length": 5, "pause_ms": 20}
{"session_id": "agent-1", "timestamp": 0, "input_length": 3, "output_length": 2, "pause_ms": 50}
EOF
# vouch serve counts every prompt token it admits: the composed prompts' lengths
# agent-1: 20, 20+4+5=29, 29+6+3=38; session 7: 12, 12+3+4=19; the lone line: 9  -> 127
p0=$(curl -s "$A/metrics" | awk '/^vllm:prompt_tokens_total/ {print $2}')
"$VOUCH" sweep --server "$A" --sessions "$t/sess.jsonl" --concurrency 2 --warmup 0 --json "$t/s.json" >"$t/s.txt" 2>&1 \
  && ok || bad "session replay: $(cat "$t/s.txt")"
p1=$(curl -s "$A/metrics" | awk '/^vllm:prompt_tokens_total/ {print $2}')
[ "$((p1 - p0))" -eq 127 ] && ok || bad "prompt tokens grew by $((p1 - p0)), want 127 (composed prompts)"
grep -q "turn  2: prompt *24 tok" "$t/s.txt" && ok || bad "per-turn lines: $(cat "$t/s.txt")"
python3 - "$t/s.json" <<'PY' && ok || bad "session record: $(head -c 900 "$t/s.json")"
import json, sys
(r,) = json.load(open(sys.argv[1]))["records"]
m = {x["name"]: x for x in r["metrics"]}
v = {k: x["value"] for k, x in m.items()}
assert r["case_id"] == "sessions/sess.jsonl/c2" and r["status"] == "pass", r["case_id"]
assert r["params"]["sessions"].endswith("sess.jsonl") and r["params"]["concurrency"] == 2, r["params"]
assert v["requests_ok"] == 6 and v["requests_failed"] == 0 and v["output_tokens"] == 4 + 3 + 6 + 2 + 5 + 2, v
assert v["sessions"] == 3 and v["sessions_ok"] == 3, v
# turn 1: 20, 12, 9; turn 2: 29, 19; turn 3: 38
assert abs(v["turn1_prompt_tokens"] - 41 / 3) < 1e-9 and v["turn2_prompt_tokens"] == 24 and v["turn3_prompt_tokens"] == 38, v
assert len(m["turn1_ttft_ms"]["samples"]) == 3 and len(m["turn3_tpot_ms"]["samples"]) == 1, m["turn1_ttft_ms"]
assert "turn4_ttft_ms" not in m
# interactivity: 1000 / TPOT p90 (linear interpolation of the per-request TPOTs)
t = sorted(m["tpot_ms"]["samples"]); pos = 0.9 * (len(t) - 1); lo = int(pos)
p90 = t[lo] + (t[min(lo + 1, len(t) - 1)] - t[lo]) * (pos - lo)
assert abs(v["tpot_ms_p90"] - p90) < 1e-9 and abs(v["interactivity_p90"] - 1000 / p90) < 1e-9, (v["tpot_ms_p90"], p90)
# agent-1 waits 400 + 50 ms of tool pauses: its session time is longer than that
assert m["session_ms"]["samples"][0] >= 450, m["session_ms"]["samples"]
PY

# prompt composition, exactly: a fake server that returns ids 500.. and logs every prompt
python3 "$VOUCH_SRC/tests/cli/serve_fake.py" "$t/fake.port" "$t/prompts.jsonl" 2>"$t/fake.log" &
servers+=("$!")
for _ in $(seq 1 100); do [ -s "$t/fake.port" ] && break; sleep 0.1; done
F="http://127.0.0.1:$(cat "$t/fake.port")"
head -3 "$t/sess.jsonl" | grep agent-1 >"$t/one.jsonl"
"$VOUCH" sweep --server "$F/ids" --sessions "$t/one.jsonl" --warmup 0 >"$t/f.txt" 2>&1 && ok || bad "fake ids: $(cat "$t/f.txt")"
python3 - "$t/prompts.jsonl" <<'PY' && ok || bad "composed prompts: $(cat "$t/prompts.jsonl")"
import json, sys
p = [json.loads(l) for l in open(sys.argv[1])]
assert [len(x) for x in p] == [20, 29], p
assert p[1][:20] == p[0] and p[1][20:24] == [500, 501, 502, 503], p[1]
PY
# a turn that fails ends its session: the turn after it is not sent and counts as failed
"$VOUCH" sweep --server "$F/500" --sessions "$t/one.jsonl" --warmup 0 --json "$t/f5.json" >"$t/f5.txt" 2>&1
rc=$?
[ "$rc" -eq 1 ] && grep -q "request 0 failed: HTTP 500" "$t/f5.txt" \
  && grep -q "request 1 failed: not sent: turn 1 of session 0 failed" "$t/f5.txt" && ok || bad "failed turn: rc $rc $(cat "$t/f5.txt")"
[ "$(wc -l <"$t/prompts.jsonl")" -eq 2 ] && ok || bad "the 500 run reached the ids log"

# the generator: seeded, written with --sessions-out in the file format, replayed as written
gen=gen:sessions=3,turns=2,input=16,delta=4,output=3,pause=30,gap=20
"$VOUCH" sweep --server "$A" --sessions "$gen" --seed 5 --sessions-out "$t/g1.jsonl" --concurrency 3 --warmup 0 \
  --json "$t/g.json" >"$t/g.txt" 2>&1 && ok || bad "generated sessions: $(cat "$t/g.txt")"
"$VOUCH" sweep --server "$A" --sessions "$gen" --seed 5 --sessions-out "$t/g2.jsonl" --concurrency 3 --warmup 0 >/dev/null 2>&1
"$VOUCH" sweep --server "$A" --sessions "$gen" --seed 6 --sessions-out "$t/g3.jsonl" --concurrency 3 --warmup 0 >/dev/null 2>&1
cmp -s "$t/g1.jsonl" "$t/g2.jsonl" && ok || bad "same seed, different sessions"
cmp -s "$t/g1.jsonl" "$t/g3.jsonl" && bad "seed 6 gave seed 5's sessions" || ok
python3 - "$t/g1.jsonl" "$t/g.json" <<'PY' && ok || bad "generated file: $(cat "$t/g1.jsonl")"
import json, sys
L = [json.loads(l) for l in open(sys.argv[1])]
assert [l["session_id"] for l in L] == ["s0", "s0", "s1", "s1", "s2", "s2"], L
for k, l in enumerate(L):
    first = k % 2 == 0
    assert (8 <= l["input_length"] <= 24) if first else (2 <= l["input_length"] <= 6), l
    assert 1 <= l["output_length"] <= 4 and (l["pause_ms"] == 0) == first or not first, l
assert L[0]["timestamp"] == 0 and L[2]["timestamp"] >= 0
(r,) = json.load(open(sys.argv[2]))["records"]
v = {x["name"]: x["value"] for x in r["metrics"]}
assert r["case_id"] == "sessions/" + "gen:sessions=3,turns=2,input=16,delta=4,output=3,pause=30,gap=20/c3", r["case_id"]
assert v["sessions"] == 3 and v["requests_ok"] == 6 and v["output_tokens"] == sum(l["output_length"] for l in L), v
PY
"$VOUCH" sweep --server "$A" --sessions "$t/g1.jsonl" --concurrency 3 --warmup 0 --json "$t/g1.json" >"$t/g1.txt" 2>&1 \
  && grep -q "3 sessions, 6 turns" "$t/g1.txt" && ok || bad "replay of the written sessions: $(cat "$t/g1.txt")"

# under vouch run the session record goes to the result directory and its bundle, and compare reads it
printf '{"name": "sess", "description": "a session replay", "steps": [{"suite": "sweep", "args": ["--server", "%s", "--sessions", "%s", "--concurrency", "3", "--warmup", "0"]}]}\n' \
  "$A" "$t/g1.jsonl" >"$t/plan.json"
"$VOUCH" run --plan "$t/plan.json" --out "$t/run" >"$t/run.txt" 2>&1 && [ -f "$t/run.vouch.tar.gz" ] && ok || bad "vouch run: $(tail -5 "$t/run.txt")"
python3 - "$t/run/manifest.json" "$A" <<'PY' && ok || bad "vouch run: the server's identity in the manifest: $(cat "$t/run/manifest.json")"
import json, sys
(s,) = json.load(open(sys.argv[1]))["servers"]
assert (s["role"], s["url"], s["model"]) == ("server", sys.argv[2], "synth:tiny"), s
assert json.loads(s["v1_models"])["data"][0]["id"] == "synth:tiny" and s["version"] is None, s
PY
"$VOUCH" compare "$t/run.vouch.tar.gz" "$t/run" >"$t/cmp.txt" 2>&1 \
  && grep -q "serve/sessions/g1.jsonl/c3 \[server\] interactivity_p90" "$t/cmp.txt" && ok || bad "compare: $(head -c 600 "$t/cmp.txt")"

# errors: FILE:LINE and the field, a session past the server's context, usage
printf '%s\n' '{"session_id": "a", "timestamp": 0, "input_length": 4, "output_length": 2}' \
  '{"session_id": "a", "timestamp": 0, "input_length": 4, "output_length": 2, "pause_ms": -1}' >"$t/bad.jsonl"
expect_error 1 "bad.jsonl:2: 'pause_ms' must be a number of ms >= 0" "$VOUCH" sweep --server "$A" --sessions "$t/bad.jsonl"
printf '%s\n' '{"session_id": [1], "timestamp": 0, "input_length": 4, "output_length": 2}' >"$t/bad2.jsonl"
expect_error 1 "bad2.jsonl:1: 'session_id' must be a string" "$VOUCH" sweep --server "$A" --sessions "$t/bad2.jsonl"
printf '%s\n' '{"session_id": "a", "timestamp": 0, "input_length": 200, "output_length": 20}' \
  '{"session_id": "a", "timestamp": 0, "input_length": 30, "output_length": 20, "pause_ms": 1}' >"$t/long.jsonl"
expect_error 1 "session 0 needs 270 tokens by turn 2, more than the server's max_model_len 256" \
  "$VOUCH" sweep --server "$A" --sessions "$t/long.jsonl"
expect_error 2 "--sessions: 'foo=1'" "$VOUCH" sweep --server "$A" --sessions gen:foo=1
expect_error 2 "give one of them" "$VOUCH" sweep --server "$A" --sessions gen --trace "$t/sess.jsonl"
expect_error 2 "--sessions-out needs --sessions gen" "$VOUCH" sweep --server "$A" --sessions "$t/sess.jsonl" --sessions-out "$t/x"

stop_server "$A_PID" && ok || bad "server a did not exit 0 on SIGTERM"
finish
