#!/usr/bin/env bash
# Expert parallelism from the CLI on the CPU: `vouch generate --tp N --ep` (and the path name
# cpu-ref:tpN:ep) runs N simulated ranks that each own n_routed_experts/N whole experts and
# decodes the same greedy tokens as the unsharded path; `vouch diverge --paths
# cpu-ref,cpu-ref:tp4:ep` passes; --ep without --tp is a one-line usage error (exit 2).
. "$VOUCH_SRC/tests/cli/counters.sh"

ref=$("$VOUCH" generate --model synth:tiny --seed 5 --tokens 5,6,7 -n 8 --batch 2 | grep '^seq')
[ -n "$ref" ] && ok || bad "unsharded generate printed no tokens"
for n in 2 4 16; do sharded_tokens "--tp $n --ep" "tp $n, expert parallel (ep)" --tp "$n" --ep; done
# the path-name spelling, and ep with dcp
for p in cpu-ref:tp4:ep cpu-ref:tp4:ep:dcp; do
  got=$("$VOUCH" generate --model synth:tiny --seed 5 --tokens 5,6,7 -n 8 --batch 2 --path "$p" 2>"$t/err" | grep '^seq')
  [ "$got" = "$ref" ] && ok || bad "--path $p tokens '$got' != unsharded '$ref': $(cat "$t/err")"
done
# the trace says which experts rank 0 owns and that the EP MoE loop ran
"$VOUCH" generate --tp 4 --ep -n 2 --trace >"$t/trace" 2>&1 && ok || bad "--tp 4 --ep --trace failed"
grep -q "ep: rank 0 of 4 owns routed experts \[0, 4) of 16" "$t/trace" && ok || bad "trace lacks the ep note: $(grep -i ep "$t/trace" | head -3)"
grep -q "owned_experts" "$t/trace" && ok || bad "trace lacks the ep event"
# --json carries ep
"$VOUCH" generate --tp 2 --ep -n 2 --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["tp"] == 2 and d["ep"] is True' \
  && ok || bad "--json lacks ep"
# --ep without --tp: usage error, exit 2, one line
"$VOUCH" generate --model synth:tiny --ep -n 2 >"$t/out" 2>"$t/err"; rc=$?
[ "$rc" -eq 2 ] && ok || bad "--ep without --tp exit $rc, want 2: $(cat "$t/err")"
grep -q "give --tp N" "$t/err" && [ "$(wc -l <"$t/err")" -eq 1 ] && ok || bad "--ep without --tp message: $(cat "$t/err")"
# TP 3 does not divide tiny's heads (checked before the experts): usage error naming the field
"$VOUCH" generate --model synth:tiny --tp 3 --ep -n 2 >"$t/out" 2>"$t/err"; rc=$?
[ "$rc" -eq 2 ] && grep -q "divisible by 3" "$t/err" && ok || bad "--tp 3 --ep exit $rc: $(cat "$t/err")"

# diverge: EP 4 against the unsharded path passes, every top token the same
"$VOUCH" diverge --model synth:tiny --paths cpu-ref,cpu-ref:tp4:ep --tokens 8 >"$t/div" 2>&1; rc=$?
[ "$rc" -eq 0 ] && ok || bad "diverge cpu-ref,cpu-ref:tp4:ep exit $rc: $(cat "$t/div")"
grep -E "^cpu-ref:tp4:ep .* 100\.00 .* pass" "$t/div" >/dev/null && ok || bad "diverge row: $(cat "$t/div")"

finish
