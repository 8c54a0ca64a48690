#!/usr/bin/env bash
# vouch serve over cpu-ref on synth:tiny (loopback only), driven by curl and by the served sweep
# client: greedy and seeded sampled tokens equal `vouch generate` alone and under concurrent
# load (continuous batching must not change tokens), also through the K+1 verify steps of --spec
# with AL=1; streaming SSE, stop ids, min_tokens, logprobs, /metrics (spec counters), OpenAI-style
# errors; the client's records and its errors (wrong model, refused, HTTP 500, text instead of
# token ids, truncated stream); clean exit on SIGTERM.
. "$VOUCH_SRC/tests/cli/counters.sh"
. "$VOUCH_SRC/tests/cli/serve_lib.sh"
command -v curl >/dev/null || { echo "curl missing"; exit 77; }

start_server a --max-seqs 8 --max-ctx 256 --max-batched-tokens 16
A=$url A_PID=$spid
start_server b --max-seqs 4 --max-ctx 256 --spec K=2,AL=1
B=$url B_PID=$spid
start_server c --max-seqs 4 --max-ctx 256 --spec K=3,AL=3
C=$url C_PID=$spid

post() { curl -s -X POST "$1/v1/completions" -H 'Content-Type: application/json' -d "$2"; }
# the token ids of a completion / of `vouch generate`'s first sequence, space-separated
ids() { sed -n 's/.*"token_ids":\[\([0-9,]*\)\].*/\1/p' | tr ',' ' '; }
gen() { "$VOUCH" generate --model synth:tiny --threads 1 "$@" | sed -n 's/^seq 0 (prompt [0-9]*): //p'; }

[ "$(curl -s -o /dev/null -w '%{http_code}' "$A/health")" = 200 ] && ok || bad "/health"
curl -s "$A/v1/models" | grep -q '"id":"synth:tiny".*"max_model_len":256,"vocab_size":1024' && ok || bad "/v1/models"

# greedy and sampled tokens equal vouch generate on the same path, model and prompt
ref=$(gen --tokens 5,6,7,8,9 -n 12)
[ "$(echo "$ref" | wc -w)" -eq 12 ] && ok || bad "generate gave '$ref'"
greedy='{"model":"synth:tiny","prompt":[5,6,7,8,9],"max_tokens":12,"temperature":0,"ignore_eos":true}'
got=$(post "$A" "$greedy" | ids)
[ "$got" = "$ref" ] && ok || bad "greedy served '$got' != generate '$ref'"
sref=$(gen --tokens 5,6,7,8,9 -n 12 --temperature 0.8 --top-k 50 --top-p 0.9 --sample-seed 3)
sampled='{"prompt":[5,6,7,8,9],"max_tokens":12,"temperature":0.8,"top_k":50,"top_p":0.9,"seed":3,"ignore_eos":true}'
got=$(post "$A" "$sampled" | ids)
[ "$got" = "$sref" ] && ok || bad "sampled served '$got' != generate '$sref'"
[ "$sref" != "$ref" ] && ok || bad "sampling gave the greedy tokens: the check would not see sampling ignored"
# under concurrent load (prefill chunks of 16 tokens mixed with decodes) the tokens stay the same
long=$(seq -s, 3 23 900 | tr -d '\n')
pids=()
for i in 1 2 3 4 5 6; do
  post "$A" "$greedy" >"$t/g$i.json" &
  pids+=("$!")
  post "$A" "{\"prompt\":[$long],\"max_tokens\":12,\"temperature\":0,\"ignore_eos\":true}" >"$t/l$i.json" &
  pids+=("$!")
done
wait "${pids[@]}"
lref=$(gen --tokens "$long" -n 12)
for i in 1 2 3 4 5 6; do
  [ "$(ids <"$t/g$i.json")" = "$ref" ] && ok || bad "concurrent greedy $i: $(cat "$t/g$i.json")"
  [ "$(ids <"$t/l$i.json")" = "$lref" ] && ok || bad "concurrent long $i: $(cat "$t/l$i.json") != $lref"
done
# --spec K=2,AL=1 verifies 3 tokens per step and keeps the sampled one: the same tokens
got=$(post "$B" "$greedy" | ids)
[ "$got" = "$ref" ] && ok || bad "spec K=2 AL=1 served '$got' != '$ref'"

# streaming: token ids over the chunks equal the plain answer, finish_reason on the last, then [DONE]
curl -sN -X POST "$A/v1/completions" -d '{"prompt":[5,6,7,8,9],"max_tokens":12,"temperature":0,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}' >"$t/sse.txt"
python3 - "$t/sse.txt" "$ref" <<'PY' && ok || bad "SSE stream: $(head -c 600 "$t/sse.txt")"
import json, sys
lines = [l for l in open(sys.argv[1]).read().split("\n") if l]
assert all(l.startswith("data: ") for l in lines), lines
assert lines[-1] == "data: [DONE]", lines[-1]
ev = [json.loads(l[6:]) for l in lines[:-1]]
toks = [t for e in ev if e["choices"] for t in e["choices"][0]["token_ids"]]
assert " ".join(map(str, toks)) == sys.argv[2], toks
fins = [e["choices"][0]["finish_reason"] for e in ev if e["choices"]]
assert fins[-1] == "length" and all(f is None for f in fins[:-1]), fins
assert ev[-1]["choices"] == [] and ev[-1]["usage"]["completion_tokens"] == 12, ev[-1]
PY

# stop ids end the request; min_tokens masks them; logprobs give the top alternatives
stop=$(echo "$ref" | cut -d' ' -f4)
post "$A" "{\"prompt\":[5,6,7,8,9],\"max_tokens\":12,\"temperature\":0,\"stop_token_ids\":[$stop],\"ignore_eos\":true}" >"$t/stop.json"
python3 - "$t/stop.json" "$ref" "$stop" <<'PY' && ok || bad "stop_token_ids: $(cat "$t/stop.json")"
import json, sys
c = json.load(open(sys.argv[1]))["choices"][0]; ref = sys.argv[2].split(); stop = int(sys.argv[3])
want = [int(x) for x in ref[:ref.index(str(stop)) + 1]]
assert c["token_ids"] == want and c["finish_reason"] == "stop" and c["stop_reason"] == stop, c
PY
post "$A" "{\"prompt\":[5,6,7,8,9],\"max_tokens\":12,\"min_tokens\":8,\"temperature\":0,\"stop_token_ids\":[$stop],\"ignore_eos\":true}" >"$t/min.json"
python3 - "$t/min.json" "$stop" <<'PY' && ok || bad "min_tokens: $(cat "$t/min.json")"
import json, sys
c = json.load(open(sys.argv[1]))["choices"][0]; stop = int(sys.argv[2])
assert stop not in c["token_ids"][:8] and len(c["token_ids"]) >= 8, c
PY
post "$A" '{"prompt":[5,6,7,8,9],"max_tokens":4,"temperature":0,"logprobs":3,"ignore_eos":true}' >"$t/lp.json"
python3 - "$t/lp.json" <<'PY' && ok || bad "logprobs: $(cat "$t/lp.json")"
import json, sys
c = json.load(open(sys.argv[1]))["choices"][0]; lp = c["logprobs"]
assert len(lp["top_logprobs"]) == 4 and all(len(t) == 3 for t in lp["top_logprobs"])
for tok, chosen, top in zip(c["token_ids"], lp["token_logprobs"], lp["top_logprobs"]):
    best = max(top, key=top.get)
    assert best == "token_id:%d" % tok and abs(top[best] - chosen) < 1e-6 and chosen < 0, (tok, chosen, top)
PY

# OpenAI-style errors
code() { curl -s -o "$t/e.json" -w '%{http_code}' -X POST "$A/v1/completions" -d "$1"; }
check_err() {
  local want=$1 needle=$2 body=$3 got
  got=$(code "$body")
  [ "$got" = "$want" ] && grep -q "\"error\":{\"message\":\"[^\"]*$needle" "$t/e.json" && ok || bad "$body -> $got $(cat "$t/e.json")"
}
check_err 404 "does not exist" '{"model":"gpt-4","prompt":[1]}'
check_err 400 "no tokenizer" '{"prompt":"hello"}'
check_err 400 "outside the vocabulary" '{"prompt":[1,1024]}'
check_err 400 "not a JSON object" '{"prompt":'
check_err 400 "context is 256 tokens" '{"prompt":[1,2],"max_tokens":255}'
check_err 400 "constrains text" '{"prompt":[1],"response_format":{"type":"json_object"}}'
check_err 400 "must be an integer" '{"prompt":[1],"max_tokens":0}'
check_err 400 "exceeds" '{"prompt":[1],"max_tokens":2,"min_tokens":3}'
[ "$(curl -s -o /dev/null -w '%{http_code}' "$A/v1/completions")" = 405 ] && ok || bad "GET /v1/completions is not 405"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$A/nope")" = 404 ] && ok || bad "unknown path is not 404"

# the served sweep client: one record per level, all requests ok, token counts in /metrics
gen0=$(curl -s "$A/metrics" | awk '/^vllm:generation_tokens_total/ {print $2}')
"$VOUCH" sweep --server "$A" --concurrency 1,4 --input-len 8 --output-len 8 --num-prompts 4 --slo ttft:60000,tpot:60000 \
  --json "$t/ss.json" >"$t/ss.txt" 2>"$t/ss.err" && ok || bad "served sweep: $(cat "$t/ss.err" "$t/ss.txt")"
gen1=$(curl -s "$A/metrics" | awk '/^vllm:generation_tokens_total/ {print $2}')
[ "$((gen1 - gen0))" -eq $((8 * (4 + 4 + 1))) ] && ok || bad "generation tokens grew by $((gen1 - gen0)), want 72 (8 requests + 1 warm-up)"
python3 - "$t/ss.json" <<'PY' && ok || bad "served records: $(head -c 800 "$t/ss.json")"
import json, sys
rs = json.load(open(sys.argv[1]))["records"]
assert [r["params"]["concurrency"] for r in rs] == [1, 4], rs
for r in rs:
    m = {x["name"]: x for x in r["metrics"]}
    assert r["suite"] == "serve" and r["status"] == "pass", r
    assert m["requests_ok"]["value"] == 4 and m["requests_failed"]["value"] == 0 and m["output_tokens"]["value"] == 32
    for k in ("ttft_ms", "ttft_ms_p90", "ttft_ms_p99", "ttft_ms_mean", "tpot_ms", "itl_ms", "e2e_ms_p99", "tokens_per_s",
              "tokens_per_s_per_user", "goodput_pct", "server_decode_step_ms", "serve_overhead_ms"):
        assert k in m, k
    # ITL: gaps between stream events; a loaded machine may get several tokens in one event (seen: 2 gaps
    # over 4 requests in a CI run beside other builds), so only "some gap, at most one per token" holds
    assert len(m["ttft_ms"]["samples"]) == 4 and 1 <= len(m["itl_ms"]["samples"]) <= 4 * 7, m["itl_ms"]
    assert m["goodput_pct"]["value"] == 100 and "spec_drafts" not in m
PY
# a closed loop keeps the server busy: at concurrency 1 the next request goes out when the previous one
# ends, not at the client's next 50 ms poll (before the fix every gap was ~50 ms: 11 x 50 ms of idle server
# here); the gaps summed stay under 11 x 20 ms however loaded the machine
"$VOUCH" sweep --server "$A" --concurrency 1 --input-len 8 --output-len 8 --num-prompts 12 \
  --json "$t/cl.json" >"$t/cl.txt" 2>"$t/cl.err" && ok || bad "closed-loop sweep: $(cat "$t/cl.err")"
python3 - "$t/cl.json" <<'PY' && ok || bad "closed loop: the client left the server idle between requests"
import json, sys
m = {x["name"]: x for x in json.load(open(sys.argv[1]))["records"][0]["metrics"]}
busy = sum(m["e2e_ms"]["samples"]) / 1e3
idle = m["duration_s"]["value"] - busy
assert len(m["e2e_ms"]["samples"]) == 12 and idle < 11 * 0.020, (m["duration_s"]["value"], busy, idle)
PY
# against --spec K=3,AL=3: acceptance from /metrics (the last step of a request may keep fewer)
"$VOUCH" sweep --server "$C" --concurrency 2 --input-len 8 --output-len 16 --num-prompts 2 --rate poisson:20 \
  --json "$t/sp.json" >"$t/sp.txt" 2>&1 && ok || bad "spec sweep: $(cat "$t/sp.txt")"
python3 - "$t/sp.json" <<'PY' && ok || bad "spec records: $(head -c 800 "$t/sp.json")"
import json, sys
m = {x["name"]: x["value"] for x in json.load(open(sys.argv[1]))["records"][0]["metrics"]}
assert 2.5 <= m["spec_mean_acceptance_length"] <= 3.0, m
assert abs(m["spec_acceptance_rate"] - (m["spec_mean_acceptance_length"] - 1) / 3) < 1e-9, m
assert m["spec_acceptance_pos0"] == 1 and m["spec_acceptance_pos2"] == 0, m
PY
curl -s "$C/metrics" | grep -q '^vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="synth:tiny",position="1"} [1-9]' \
  && ok || bad "per-position counter"

# Mooncake trace replay: arrival offsets from timestamps, shared prefixes from hash_ids
printf '%s\n' '{"timestamp": 0, "input_length": 20, "output_length": 4, "hash_ids": [7, 8]}' \
  '{"timestamp": 50, "input_length": 12, "output_length": 3, "hash_ids": [7]}' '' \
  '{"timestamp": 120, "input_length": 9, "output_length": 5}' >"$t/trace.jsonl"
"$VOUCH" sweep --server "$A" --trace "$t/trace.jsonl" --trace-block 8 --concurrency 4 --json "$t/tr.json" >"$t/tr.txt" 2>&1 \
  && ok || bad "trace replay: $(cat "$t/tr.txt")"
grep -q '"case_id":[[:space:]]*"trace/trace.jsonl/c4"' "$t/tr.json" && grep -q '"output_tokens",' "$t/tr.json" \
  && [ "$(grep -A2 '"name":[[:space:]]*"output_tokens"' "$t/tr.json" | grep -c '"value":[[:space:]]*12')" -eq 1 ] \
  && ok || bad "trace record: $(head -c 600 "$t/tr.json")"
printf '%s\n' '{"timestamp": 0, "input_length": 20, "output_length": 4}' '{"timestamp": 5, "input_length": "x", "output_length": 4}' >"$t/bad.jsonl"
expect_error 1 "bad.jsonl:2: 'input_length' must be an integer" "$VOUCH" sweep --server "$A" --trace "$t/bad.jsonl"

# client errors: wrong model, connection refused, HTTP 500, text instead of token ids, truncated stream
expect_error 1 "serves no model 'other' (it serves: synth:tiny)" "$VOUCH" sweep --server "$A" --server-model other
stop_server "$B_PID" && ok || bad "server b did not exit 0 on SIGTERM"
expect_error 1 "cannot connect to $B/v1/models" "$VOUCH" sweep --server "$B"
python3 "$VOUCH_SRC/tests/cli/serve_fake.py" "$t/fake.port" 2>"$t/fake.log" &
servers+=("$!")
for _ in $(seq 1 100); do [ -s "$t/fake.port" ] && break; sleep 0.1; done
F="http://127.0.0.1:$(cat "$t/fake.port")"
for mode in "500:HTTP 500 from .*: the engine is on fire" "text:returned text, not token ids" "trunc:without 'data: \[DONE\]' after 2 tokens"; do
  "$VOUCH" sweep --server "$F/${mode%%:*}" --concurrency 1 --input-len 4 --output-len 4 --num-prompts 1 --warmup 0 \
    --json "$t/f.json" >"$t/f.txt" 2>&1
  rc=$?
  [ "$rc" -eq 1 ] && grep -q "request 0 failed: .*${mode#*:}" "$t/f.txt" && ok || bad "fake ${mode%%:*}: rc $rc $(cat "$t/f.txt")"
  grep -q '"status":[[:space:]]*"fail"' "$t/f.json" && ok || bad "fake ${mode%%:*}: record not failed"
done

# SIGTERM: clean exit 0
stop_server "$A_PID" && ok || bad "server a did not exit 0 on SIGTERM"
grep -q "shutting down" "$t/a.log" && ok || bad "no shutdown line: $(cat "$t/a.log")"
stop_server "$C_PID" && ok || bad "server c did not exit 0 on SIGTERM"
finish
