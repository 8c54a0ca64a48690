#!/usr/bin/env bash
# Proof that the code under test ran (issue 37) on the CPU, with the test plugin handover-ref
# (tests/plugins/handover_path.c: cpu-ref that records a hand-over to cpu-ref at open with @open, at its
# step 1 with @step; its logits stay cpu-ref's, so only the trace tells):
#   - diverge, features and eval chain fail (exit 1) with the one message naming the path, where it fell
#     back to and why, and --expect-fallback; with --expect-fallback they run and pass;
#   - the records name what ran (`ran`: per path, op/variant with counts) and the fallbacks;
#   - a hand-over in a step fails that path's record (status error) the same way;
#   - a plan step carries --expect-fallback in its args (`vouch run`).
. "$VOUCH_SRC/tests/cli/counters.sh"
H="$VOUCH_PLUGINS/handover_path_pct0.so"
[ -f "$H" ] || { echo "no $H; skipping"; exit 77; }
export VOUCH_HISTORY_DB=off
msg="path handover-ref@open fell back to cpu-ref at open (open: test: variant 'open' hands every step over)"
dv=(diverge --model synth:tiny --path-lib "$H" --batch 1,2 --context 8 --tokens 3)

# at open: the record errors with the one-line reason, the verdict fails
"$VOUCH" "${dv[@]}" --paths cpu-ref,handover-ref@open --json "$t/open.json" >"$t/o.out" 2>"$t/o.err"
[ $? -eq 1 ] && ok || bad "diverge @open: exit not 1: $(cat "$t/o.err")"
grep -qF "$msg" "$t/o.out" && ok || bad "diverge @open: no message: $(cat "$t/o.out")"
grep -qF -- "give --expect-fallback" "$t/o.out" && ok || bad "diverge @open: the message does not say --expect-fallback"
python3 - "$t/open.json" "$msg" <<'PY' && ok || bad "diverge @open: records"
import json, sys
rs = [r for r in json.load(open(sys.argv[1]))["records"] if r["path"] == "handover-ref@open"]
assert len(rs) == 2 and all(r["status"] == "error" and sys.argv[2] in r["reason"] for r in rs), rs
PY

# declared: it runs, and the records name what ran (per path, "[OTHER:]OP/VARIANT": count) and the fallback
"$VOUCH" "${dv[@]}" --paths cpu-ref,handover-ref@open --expect-fallback --json "$t/exp.json" >"$t/e.out" 2>"$t/e.err" \
  && ok || bad "diverge @open --expect-fallback: $(cat "$t/e.err")"
python3 - "$t/exp.json" <<'PY' && ok || bad "diverge --expect-fallback: ran and fallbacks in the records"
import json, sys
rs = json.load(open(sys.argv[1]))["records"]
assert len(rs) == 2
for r in rs:
    assert r["status"] == "pass", r
    assert set(r["ran"]) == {"cpu-ref", "handover-ref@open"}, r["ran"]
    assert r["ran"]["cpu-ref"]["lm_head/cpu"] == 3, r["ran"]["cpu-ref"]  # 3 steps, counted per case
    # the plugin runs cpu-ref's code: its events name cpu-ref
    assert r["ran"]["handover-ref@open"]["cpu-ref:lm_head/cpu"] == 3, r["ran"]
    assert r["fallbacks"] == [{"path": "handover-ref@open", "op": "open", "to": "cpu-ref",
                               "reason": "test: variant 'open' hands every step over", "count": 1}], r["fallbacks"]
PY

# the records with ran and fallbacks are valid against results-schema/record.schema.json
if python3 -c 'import jsonschema; jsonschema.Draft202012Validator' 2>/dev/null; then
  python3 - "$VOUCH_SRC/results-schema/record.schema.json" "$t/exp.json" "$t/open.json" <<'PY' && ok || bad "record schema"
import json, sys
from jsonschema import Draft202012Validator
v = Draft202012Validator(json.load(open(sys.argv[1])))
for f in sys.argv[2:]:
    for r in json.load(open(f))["records"]:
        errs = list(v.iter_errors(r))
        assert not errs, (f, r["case_id"], [e.message for e in errs])
PY
fi

# in a step: that path's records error, with the step named
"$VOUCH" "${dv[@]}" --paths cpu-ref,handover-ref@step >"$t/s.out" 2>"$t/s.err"
[ $? -eq 1 ] && ok || bad "diverge @step: exit not 1: $(cat "$t/s.err")"
grep -qF "path handover-ref@step fell back to cpu-ref at step 1 (decode_step: " "$t/s.out" && ok \
  || bad "diverge @step: no message: $(cat "$t/s.out")"
"$VOUCH" "${dv[@]}" --paths cpu-ref,handover-ref@step --expect-fallback >"$t/s2.out" 2>"$t/s2.err" && ok \
  || bad "diverge @step --expect-fallback: $(cat "$t/s2.out" "$t/s2.err")"
# a path that does not fall back needs nothing declared
"$VOUCH" "${dv[@]}" --paths cpu-ref,handover-ref >"$t/n.out" 2>"$t/n.err" && ok || bad "diverge plain: $(cat "$t/n.err")"

# the evals and features refuse it alike
ch=(eval chain --model synth:recall-chain --path-lib "$H" --paths cpu-ref,handover-ref@open --hops 16 --samples 2)
"$VOUCH" "${ch[@]}" >"$t/c.out" 2>"$t/c.err"
[ $? -eq 1 ] && grep -qF "$msg" "$t/c.out" && ok || bad "eval chain @open: $(cat "$t/c.out" "$t/c.err")"
"$VOUCH" "${ch[@]}" --expect-fallback >"$t/c2.out" 2>"$t/c2.err" && ok || bad "eval chain --expect-fallback: $(cat "$t/c2.err")"
"$VOUCH" features --model synth:tiny --path-lib "$H" --path handover-ref@open --full-ctx 64 >"$t/f.out" 2>"$t/f.err"
[ $? -eq 1 ] && grep -qF "$msg" "$t/f.out" && ok || bad "features @open: $(cat "$t/f.out" "$t/f.err")"

# a plan step carries it in its args
cat >"$t/plan.json" <<EOF
{"name": "handover", "description": "a declared hand-over",
 "steps": [{"suite": "diverge", "args": ["--model", "synth:tiny", "--paths", "cpu-ref,handover-ref@open", "--batch", "1",
   "--context", "8", "--tokens", "3", "--expect-fallback"]}]}
EOF
(cd "$t" && "$VOUCH" run --plan plan.json --path-lib "$H" --out r1 >run.out 2>run.err) && ok \
  || bad "vouch run with --expect-fallback in a step: $(cat "$t/run.out" "$t/run.err")"
sed 's/, "--expect-fallback"//' "$t/plan.json" >"$t/plan2.json"
(cd "$t" && "$VOUCH" run --plan plan2.json --path-lib "$H" --out r2 >run2.out 2>run2.err)
[ $? -ne 0 ] && ok || bad "vouch run without --expect-fallback passed"
finish test_expect_fallback
