#!/usr/bin/env bash
# vouch diverge --server --ref-server --prompts (suites/diverge/diverge_text.c) against a real engine no
# one here wrote: scripts/peers/llamacpp/server.mjs over llama.cpp, serving one tiny checkpoint exported
# with DeepSeek-V3's tokenizer as f32 (the reference, and a second f32 server: the A/A pair) and q4_0 (a
# quantized build: must fail), plus the f32 twin behind tests/cli/lp_shift_proxy.py, which lowers every
# prompt logprob by 0.03 nats (a planted misbehaviour: must fail). Then bad input: no --prompts, a
# malformed prompts file, a model the servers do not serve, a server that is not there.
# Set-up: tests/cli/llamacpp_pair.sh (skipped, 77, without node/npm on a workstation; FAILS in CI).
. "$VOUCH_SRC/tests/cli/counters.sh"
. "$VOUCH_SRC/tests/cli/llamacpp_pair.sh" test_diverge_text
python3 "$VOUCH_SRC/tests/cli/lp_shift_proxy.py" "$t/shift.port" "$W" 0.03 &
pids+=($!)
for _ in $(seq 1 100); do [ -s "$t/shift.port" ] && break; sleep 0.1; done
S="http://127.0.0.1:$(cat "$t/shift.port")"

cat >"$t/p.jsonl" <<'P'
{"prompt": "The committee met on a rainy Tuesday to decide whether the old bridge should be repaired."}
{"prompt": "To bake a simple loaf of bread you need flour, water, salt and yeast."}

{"prompt": "def square(x):\n    return x * x\n"}
{"prompt": "Prime numbers below twenty are 2, 3, 5, 7, 11, 13, 17 and 19; the next one is"}
{"prompt": "Water boils at 100 degrees Celsius at sea level, but at higher altitudes it boils"}
{"prompt": "SELECT name, count(*) FROM orders GROUP BY name;"}
P
# run NAME URL: diverge of URL against the reference, exit code in $rc, stdout in $t/NAME.out
run() {
  "$VOUCH" diverge --server "$2" --ref-server "$R" --prompts "$t/p.jsonl" --tokens 16 --concurrency 3 \
    --json "$t/$1.json" >"$t/$1.out" 2>"$t/$1.err"
  rc=$?
}
# status NAME PATH: the status of record PATH in $t/NAME.json
status() {
  python3 -c 'import json,sys; print([r["status"] for r in json.load(open(sys.argv[1]))["records"] if r["path"] == sys.argv[2]][0])' \
    "$t/$1.json" "$2" 2>/dev/null
}
run aa "$W"
[ "$rc" -eq 0 ] && ok || bad "A/A (f32 twin) exit $rc, want 0: $(tail -3 "$t/aa.err") $(tail -4 "$t/aa.out")"
[ "$(status aa server:tiny-text)" = pass ] && ok || bad "A/A: candidate record not pass"
[ "$(status aa ref-server:tiny-text@floor)" = pass ] && ok || bad "A/A: floor record not pass"
grep -q 'scored with prompt_logprobs' "$t/aa.err" && ok || bad "A/A: prompt_logprobs not used: $(cat "$t/aa.err")"
run q4 "$Q"
[ "$rc" -eq 1 ] && ok || bad "q4_0 exit $rc, want 1: $(tail -4 "$t/q4.out")"
[ "$(status q4 server:tiny-text)" = fail ] && ok || bad "q4_0: candidate record not fail"
run shift "$S"
[ "$rc" -eq 1 ] && ok || bad "logprobs shifted 0.03 nats: exit $rc, want 1: $(tail -4 "$t/shift.out")"
grep -q '^rule: mean KLD .*: FAIL' "$t/shift.out" && ok || bad "shift: the KLD rule did not fail: $(grep '^rule' "$t/shift.out")"
for n in aa q4 shift; do grep -E '^(server:|floor|rule)' "$t/$n.out" | sed "s/^/$n: /"; done

# bad input: one line, the usage exit code (2) or 1
# no --prompts: the built-in set (suites/diverge/diverge_prompts.c), A/A must pass on it too
"$VOUCH" diverge --server "$W" --ref-server "$R" --tokens 8 --concurrency 4 --json "$t/builtin.json" >"$t/builtin.out" 2>&1
rc=$?
[ "$rc" -eq 0 ] && ok || bad "built-in prompts, A/A: exit $rc, want 0: $(tail -4 "$t/builtin.out")"
python3 -c 'import json,sys; r=[r for r in json.load(open(sys.argv[1]))["records"] if r["path"]=="server:tiny-text"][0]; p=r["params"]; sys.exit(0 if p["prompts"]=="built-in" and p["n_prompts"]==32 else 1)' \
  "$t/builtin.json" && ok || bad "built-in prompts: record params not prompts=built-in, n_prompts=32"
printf '{"prompt": "ok"}\n{"prompt": 3}\n' >"$t/bad.jsonl"
expect_error 2 "bad.jsonl:2: field 'prompt'" "$VOUCH" diverge --server "$W" --ref-server "$R" --prompts "$t/bad.jsonl"
printf 'not json\n' >"$t/bad2.jsonl"
expect_error 2 "bad2.jsonl:1: not a JSON object" "$VOUCH" diverge --server "$W" --ref-server "$R" --prompts "$t/bad2.jsonl"
expect_error 1 "nope" "$VOUCH" diverge --server "$W" --ref-server "$R" --prompts "$t/p.jsonl" --server-model nope
expect_error 1 "--ref-server" "$VOUCH" diverge --server "$W" --ref-server http://127.0.0.1:9 --prompts "$t/p.jsonl"
expect_error 2 "--logprobs-api" "$VOUCH" diverge --server "$W" --ref-server "$R" --prompts "$t/p.jsonl" --logprobs-api x
# under vouch run: both servers' identities in the run's manifest
head -1 "$t/p.jsonl" >"$t/p1.jsonl"
run_manifest inrun "$Q" "$R" diverge --server "$Q" --ref-server "$R" --prompts "$t/p1.jsonl" --tokens 4
for n in ref twin q; do kill -0 "$(cat "$t/$n.pid")" 2>/dev/null && ok || bad "server $n died: $(tail -3 "$t/$n.log")"; done
finish test_diverge_text
