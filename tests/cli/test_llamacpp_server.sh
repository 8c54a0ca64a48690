#!/usr/bin/env bash
# scripts/peers/llamacpp/server.mjs, the OpenAI-compatible server over llama.cpp (docs/llama-cpp.md),
# on a tiny text model: synthesized with DeepSeek-V3's vocabulary size, exported as f32 and q4_0
# GGUFs with DeepSeek-V3's tokenizer and chat template; three servers (f32 twice for A/A, q4_0) and
# one behind an API key; every feature exercised by tests/cli/llamacpp_server_checks.mjs (stop
# strings, stream = non-stream, seeded repeats, logprobs / echo / prompt_logprobs, chat, JSON schema,
# choice and regex constraints, errors, concurrency, f32 = f32 and f32 != q4_0 logprobs).
# Set-up: tests/cli/llamacpp_text_lib.sh (install.sh into $VOUCH_LLAMACPP_DIR; without node >= 20,
# npm or the registry this test is skipped (77) on a workstation and FAILS in CI (CI=true)).
. "$VOUCH_SRC/tests/cli/counters.sh"
. "$VOUCH_SRC/tests/cli/llamacpp_text_lib.sh" # the peer installed, $tok, start, url, the EXIT trap

# the model: tiny (3 layers, MoE, MLA) with DeepSeek-V3's 129280 logits and a narrow hidden size
"$VOUCH" model synth --preset tiny --seed 1 --out "$t/m" --set vocab_size=129280 --set hidden_size=128 >/dev/null || bad "synth"
"$VOUCH" model export --gguf "$t/m" --dtype f32 --tokenizer "$tok" -o "$t/f32.gguf" >/dev/null && ok || bad "export f32 with the tokenizer"
"$VOUCH" model export --gguf "$t/m" --dtype q4_0 --tokenizer "$tok" -o "$t/q4_0.gguf" >/dev/null && ok || bad "export q4_0 with the tokenizer"
# the tokenizer's ids (128815) do not fit tiny's 1024 logits
expect_error 1 "vocab_size is 1024" "$VOUCH" model export --gguf synth:tiny --tokenizer "$tok" -o "$t/x.gguf"

start a "$t/f32.gguf" --max-body-bytes 1048576
start b "$t/f32.gguf" --max-body-bytes 1048576
start q "$t/q4_0.gguf" --max-body-bytes 1048576
VOUCH_LLAMACPP_API_KEY=sekrit-key start k "$t/f32.gguf" --max-body-bytes 1048576
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
printf 'not\na gguf\n' >"$t/not.gguf" # its first bytes hold a line break, which the one-line error must not
expect_error 1 "cannot load it" node "$peer/server.mjs" --gguf "$t/not.gguf" --port 0
for n in a b q k; do kill -0 "$(cat "$t/$n.pid")" 2>/dev/null && ok || bad "server $n died: $(tail -3 "$t/$n.log")"; done
finish test_llamacpp_server
