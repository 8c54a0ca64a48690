#!/usr/bin/env bash
# vouch run end to end on the CPU: the smoke plan writes a result directory and a bundle that
# verifies; Ctrl-C keeps finished cases and marks the run incomplete; bad plans are clear errors.
. "$VOUCH_SRC/tests/cli/counters.sh"
export VOUCH_HISTORY_DB="$t/history.sqlite"
cd "$t" || exit 2

"$VOUCH" run --out smoke >smoke.out 2>smoke.err; rc=$?
[ $rc -eq 0 ] && ok || bad "smoke exit $rc: $(tail -5 smoke.err)"
grep -q "^verdict: pass" smoke.out && ok || bad "smoke verdict: $(cat smoke.out | tail -3)"
[ -f smoke.vouch.tar.gz ] && ok || bad "no bundle"
"$VOUCH" verify smoke.vouch.tar.gz >/dev/null && ok || bad "bundle does not verify"
python3 - smoke <<'PY' && ok || bad "smoke records"
import json, sys
d = sys.argv[1]
res = json.load(open(d + "/results.json"))
recs = res["records"] if isinstance(res, dict) else res
suites = {r["suite"] for r in recs}
need = {"kernels", "generate", "diverge", "evals", "features", "sweep"}
assert need <= suites, (need - suites, suites)
assert all(r["status"] in ("pass", "not_supported", "not_run") for r in recs), [r for r in recs if r["status"] not in ("pass", "not_supported", "not_run")][:3]
m = json.load(open(d + "/manifest.json"))
assert m["verdict"] == "pass" and m["plan"]["name"] == "smoke"
PY
# Ctrl-C: the first SIGINT stops after the case in flight; finished cases stay, run is incomplete
"$VOUCH" run --out stopped >stopped.out 2>stopped.err &
pid=$!
# wait for the first finished case (its trace file), without opening the run's database
# from a second process while vouch writes it
for _ in $(seq 1 200); do
  [ -d stopped/traces ] && [ -n "$(ls stopped/traces 2>/dev/null | head -1)" ] && break
  sleep 0.1
done
kill -INT $pid
wait $pid; rc=$?
[ $rc -eq 130 ] && ok || bad "interrupted run exit $rc, want 130: $(cat stopped.err | tail -8)"
python3 - stopped <<'PY' && ok || bad "interrupted run not marked incomplete with its records"
import json, sys
d = sys.argv[1]
m = json.load(open(d + "/manifest.json"))
assert m["verdict"] == "incomplete", m["verdict"]
res = json.load(open(d + "/results.json"))
recs = res["records"] if isinstance(res, dict) else res
assert len(recs) > 0
PY
# The shipped plans' kernels steps store every case id once: run here, where the GPU paths' op
# variants are not supported, each case is still a record. (h200's `--path latency --seeds 2`
# once redacted two case ids to the same "***" and its step failed on a UNIQUE constraint.)
if "$VOUCH" kernels --path latency --quick --seeds 1 >/dev/null 2>&1; then
  for plan in "$VOUCH_SRC"/suites/plans/*.json; do
    name=$(basename "$plan" .json)
    python3 - "$plan" > "k-$name.json" <<'PY'
import json, sys
steps = [{"suite": "kernels", "args": st["args"]} for st in json.load(open(sys.argv[1]))["steps"]
         if st["suite"] == "kernels" and st.get("when") == "gpu"]
print(json.dumps({"name": "kernels-ids", "vars": {"seed": "3"}, "steps": steps or [{"suite": "kernels", "args": ["--quick", "--preset", "tiny"]}]}))
PY
    "$VOUCH" run --plan "k-$name.json" --out "k-$name" --no-bundle >"k-$name.out" 2>"k-$name.err"; rc=$?
    [ $rc -eq 0 ] && grep -q "^verdict: pass" "k-$name.out" && ok ||
      bad "$name's kernels steps on the CPU: exit $rc: $(grep -i error "k-$name.err" | head -3)"
  done
fi
# bad plans
echo '{"steps": [{"suite": "warp", "args": []}]}' > bad.json
"$VOUCH" run --plan bad.json --out b1 >/dev/null 2>err; rc=$?
[ $rc -eq 2 ] && grep -q "steps\[0\].suite 'warp'" err && ok || bad "unknown suite: exit $rc $(cat err)"
echo '{"steps": [ {"suite": "generate", "args": ["--model", "${nope}"]} ]}' > bad2.json
"$VOUCH" run --plan bad2.json --out b2 --no-bundle >/dev/null 2>err; rc=$?
[ $rc -ne 0 ] && grep -q 'unknown variable ${nope}' err && ok || bad "unknown variable: exit $rc $(cat err)"
"$VOUCH" run --plan nonexistent >/dev/null 2>err; rc=$?
[ $rc -eq 2 ] && grep -q "neither a built-in plan" err && ok || bad "missing plan: exit $rc $(cat err)"
echo '{"steps": [{"suite": "generate", "args": ["--model", "/nonexistent/model"]}]}' > bad3.json
"$VOUCH" run --plan bad3.json --out b3 --no-bundle >/dev/null 2>err; rc=$?
v=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["verdict"])' b3/manifest.json 2>/dev/null)
[ $rc -eq 1 ] && [ "$v" = "fail" ] && ok || bad "a failing step must fail the run: exit $rc, verdict '$v'"
finish
