#!/usr/bin/env bash
# vouch eval aime against a real engine no one here wrote: scripts/peers/llamacpp/server.mjs over
# llama.cpp, serving one tiny checkpoint exported with DeepSeek-V3's tokenizer (and its chat template)
# as f32 twice: the A/A pair. A random tiny model answers nothing right and every answer runs to
# --max-tokens, on both sides alike, so the pair must pass (exit 0) with 0 items differing, greedy
# and with three seeded sampled repeats (llama.cpp honours the per-request seed). Then a q4_0 export
# as the candidate: answered and graded (its verdict is not asserted: two wrong answers are equal).
# Set-up: tests/cli/llamacpp_pair.sh (skipped, 77, without node/npm on a workstation; FAILS in CI).
. "$VOUCH_SRC/tests/cli/counters.sh"
. "$VOUCH_SRC/tests/cli/llamacpp_pair.sh" test_eval_aime_llamacpp

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
