#!/usr/bin/env bash
# A client no one here wrote: the official OpenAI Node client (npm `openai`, major version 4)
# makes a completion and a streaming call against vouch serve (cpu-ref, synth:tiny, loopback) and
# must get the tokens `vouch generate` gives. npm installs it into the build directory once
# (node-openai/, not in git); without node/npm or the registry the test is skipped (77).
. "$VOUCH_SRC/tests/cli/counters.sh"
. "$VOUCH_SRC/tests/cli/serve_lib.sh"
command -v node >/dev/null && command -v npm >/dev/null || { echo "node/npm not installed: skipped"; exit 77; }
dir="$PWD/node-openai"
if [ ! -f "$dir/node_modules/openai/package.json" ]; then
  mkdir -p "$dir"
  if ! timeout 180 npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "openai@4" >"$t/npm.log" 2>&1; then
    echo "npm could not install openai (registry unreachable?): skipped"; cat "$t/npm.log"; exit 77
  fi
fi
start_server a --max-seqs 4 --max-ctx 128
ref=$("$VOUCH" generate --model synth:tiny --threads 1 --tokens 5,6,7,8,9 -n 12 | sed -n 's/^seq 0 (prompt [0-9]*): //p')
node "$VOUCH_SRC/tests/cli/openai_client.mjs" "$dir" "$url" "$ref" >"$t/node.txt" 2>&1 && ok || bad "openai node client: $(cat "$t/node.txt")"
[ "$(grep -c '^ok:' "$t/node.txt")" -eq 5 ] && ok || bad "node checks: $(cat "$t/node.txt")"
stop_server "$spid" && ok || bad "server did not exit 0 on SIGTERM"
finish
