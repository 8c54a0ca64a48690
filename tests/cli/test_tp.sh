#!/usr/bin/env bash
# Tensor parallelism from the CLI on the CPU: `vouch generate --tp N` runs N simulated ranks
# and decodes the same greedy tokens as the unsharded path; a TP degree the model does not
# divide is a one-line usage error (exit 2) naming the field.
. "$VOUCH_SRC/tests/cli/counters.sh"

ref=$("$VOUCH" generate --model synth:tiny --seed 5 --tokens 5,6,7 -n 8 --batch 2 | grep '^seq')
[ -n "$ref" ] && ok || bad "unsharded generate printed no tokens"
for n in 1 2 4 16; do sharded_tokens "--tp $n" "tp $n" --tp "$n"; done
# the trace names the communicator and the path's all-reduce
"$VOUCH" generate --tp 4 -n 2 --trace >"$t/trace" 2>&1 && ok || bad "--tp 4 --trace failed"
grep -q "allreduce" "$t/trace" && grep -q "threads" "$t/trace" && ok || bad "trace lacks the all-reduce: $(head -5 "$t/trace")"
# --json carries tp
"$VOUCH" generate --tp 2 -n 2 --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["tp"] == 2' \
  && ok || bad "--json lacks tp"

# TP 3 does not divide tiny's 16 heads: usage error, exit 2, one line naming the field
"$VOUCH" generate --model synth:tiny --tp 3 -n 2 >"$t/out" 2>"$t/err"; rc=$?
[ "$rc" -eq 2 ] && ok || bad "--tp 3 exit $rc, want 2: $(cat "$t/err")"
grep -q "TP 3 needs num_attention_heads (16) divisible by 3" "$t/err" && ok || bad "--tp 3 message: $(cat "$t/err")"
[ "$(wc -l <"$t/err")" -eq 1 ] && ok || bad "--tp 3 error is not one line: $(cat "$t/err")"
"$VOUCH" generate --tp 0 -n 2 >/dev/null 2>"$t/err"; rc=$?
[ "$rc" -eq 2 ] && ok || bad "--tp 0 exit $rc, want 2"
# the NAME:tpN spelling of --path works too
"$VOUCH" generate --path cpu-ref:tp2 -n 2 >/dev/null 2>"$t/err" && ok || bad "--path cpu-ref:tp2: $(cat "$t/err")"

finish
