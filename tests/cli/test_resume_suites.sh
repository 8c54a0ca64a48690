#!/usr/bin/env bash
# kill -9 of a features step and of a diverge step mid-suite, then `vouch run --resume`: the checks and
# points stored before the kill are kept (not run again), the unfinished ones are not_run in the bundle
# (`vouch compare` counts them as missing), and the resumed run ends with the uninterrupted run's
# records. Apart from test_resume.sh because these full suite runs are most of its time: the ASan stage
# of scripts/test.sh runs test_resume (the store, kernels, eval and bad --resume input) and leaves
# this one to the cpu stage.
. "$VOUCH_SRC/tests/cli/counters.sh"
. "$VOUCH_SRC/tests/cli/resume_util.sh"
export VOUCH_HISTORY_DB="$t/history.sqlite"
cd "$t" || exit 2

# features stores each check as it finishes: kill -9 after its first check printed, then --resume
# keeps the printed checks (not run again) and ends with the uninterrupted run's records, figures
# included (full_context kept: the sampling rows that give the margin epsilon are decoded again)
cat >fplan.json <<'EOF'
{"name": "features", "steps": [
  {"suite": "features", "args": ["--path", "cpu-ref:tp2", "--ref", "cpu-ref", "--full-ctx", "256", "--seed", "0"]}
]}
EOF
# kill_mid PLAN P COUNT N TOTAL: runs PLAN into Pfull (`COUNT Pfull.out` must reach TOTAL), then again
# into Pkilled, kill -9ed once `COUNT Pkilled.out` reaches N; $printed: the count then (checked to be
# inside the step: N..TOTAL-1)
kill_mid() {
  local plan=$1 p=$2 count=$3 n=$4 total=$5
  "$VOUCH" run --plan "$plan" --out "${p}full" --no-bundle >"${p}full.out" 2>"${p}full.err" &&
    [ "$($count "${p}full.out")" -eq "$total" ] && ok ||
    bad "uninterrupted run of $plan: $($count "${p}full.out") of $total; $(tail -n 5 "${p}full.err")"
  signal_when -9 "$plan" "${p}killed" "$count" "$n"
  printed=$($count "${p}killed.out")
  [ "$printed" -ge "$n" ] && [ "$printed" -lt "$total" ] && ok ||
    bad "kill -9 did not land inside the step of $plan: $printed of $total printed"
}
checks() { grep -cE '^  (full_context|sampling|structured|speculative|stop_tokens) ' "$1"; }
kill_mid fplan.json f checks 1 5
fprinted=$printed
python3 - fkilled "$fprinted" <<'PY' && ok || bad "killed features run: stored or not_run checks wrong"
import sqlite3, sys
printed = int(sys.argv[2])
rows = sqlite3.connect(sys.argv[1] + "/results.sqlite").execute("SELECT status FROM records WHERE suite = 'features'").fetchall()
kept = sum(s != "not_run" for (s,) in rows)
assert len(rows) == 5 and printed <= kept <= printed + 1, (rows, printed)
print(f"kill -9 mid-features: {kept} checks kept ({printed} printed), {5 - kept} not_run")
PY
"$VOUCH" run --resume fkilled --no-bundle >fresumed.out 2>fresumed.err; rc=$?
[ $rc -eq 0 ] && ok || bad "resumed features run exit $rc: $(tail -n 5 fresumed.err)"
frun=$(checks fresumed.out)
grep -q "^features: $((5 - frun)) checks kept from the interrupted run" fresumed.out && [ "$frun" -le $((5 - fprinted)) ] && ok ||
  bad "resumed features ran $frun checks again after $fprinted printed: $(cat fresumed.out)"
python3 - ffull fkilled <<'PY' && ok || bad "resumed features records differ from the uninterrupted run's"
import json, sys
key = lambda r: (r["suite"], r["case_id"], r["path"], r["status"], r["params"].get("detail"))
a, b = (sorted(map(key, json.load(open(d + "/results.json"))["records"])) for d in sys.argv[1:])
assert a == b, (set(a) ^ set(b))
assert sum(1 for k in b if k[0] == "features") == 5, b
PY

# diverge on the suite driver plans its points: kill -9 mid-step keeps every point whose rows printed
# (stored before they print), every point not finished is in the bundle as not_run records (one per
# compared path, not absent), `vouch compare` counts those as missing, and --resume runs only the
# points not stored and ends with the uninterrupted run's records
cat >dplan.json <<'EOF'
{"name": "dkill", "steps": [
  {"suite": "diverge", "args": ["--paths", "cpu-ref,cpu-ref:tp2,cpu-ref:tp4", "--batch", "1,2,3",
                                "--context", "0,64,128", "--tokens", "16", "--threads", "1"]},
  {"suite": "eval", "args": ["chain", "--hops", "4,8", "--samples", "2"]}
]}
EOF
drows() { grep -cE '^cpu-ref:tp[24] +[0-9]+ +[0-9]+ ' "$1"; }
kill_mid dplan.json d drows 6 18
dprinted=$printed
"$VOUCH" bundle dkilled >/dev/null 2>bundle.err && ok || bad "bundle of the killed diverge run: $(cat bundle.err)"
"$VOUCH" verify dkilled.vouch.tar.gz >/dev/null 2>verify.err && ok || bad "killed diverge bundle does not verify: $(cat verify.err)"
python3 - dkilled "$dprinted" <<'PY' && ok || bad "killed diverge run: kept records or not_run points wrong"
import json, sys
d, printed = sys.argv[1], int(sys.argv[2])
res = json.load(open(d + "/results.json"))
div = [r for r in res["records"] if r["suite"] == "diverge"]
kept = [r for r in div if r["status"] != "not_run"]
not_run = [r for r in div if r["status"] == "not_run"]
# every point is planned: 9 points x 2 compared paths, each one record, stored or not_run
assert len({(r["case_id"], r["path"]) for r in div}) == len(div) == 18, len(div)
# a point is stored before its rows print: each printed row is kept, and at most the point in flight more
assert printed <= len(kept) <= printed + 2, (printed, len(kept))
assert all(r["status"] == "pass" for r in kept), [r["status"] for r in kept]
assert all(r["reason"].startswith("not run") and "batch" in r["params"] and not r["metrics"] for r in not_run), not_run[:1]
assert sorted(r["case_id"] for r in res["records"] if r["suite"] == "run") == ["step0-diverge", "step1-eval"]
assert res["verdict"] == "incomplete" and not res["complete"] and res["counts"]["not_run"] == len(not_run) + 2
print(f"kill -9 mid-diverge: {len(kept)} records kept ({printed} rows printed), {len(not_run)} not_run")
PY
# the baseline's cases the killed run planned and did not run: its not_run diverge records, and the
# chain step that never started
dmissing=$(python3 -c "import json, sys; r = json.load(open(sys.argv[1]))['records']
print(sum(x['suite'] == 'diverge' and x['status'] == 'not_run' for x in r))" dkilled/results.json)
"$VOUCH" compare dfull dkilled >dcmp.out 2>&1
grep -q "missing *diverge/" dcmp.out && [ "$(grep -c 'missing *diverge/' dcmp.out)" -eq "$dmissing" ] && ok ||
  bad "compare does not list the killed run's $dmissing not_run diverge cases as missing: $(head -3 dcmp.out)"
"$VOUCH" run --resume dkilled --no-bundle >dresumed.out 2>dresumed.err && ok || bad "resumed diverge run: $(tail -n 3 dresumed.err)"
dkept=$(grep -c "kept from the interrupted run" dresumed.out)
drun=$(drows dresumed.out)
[ "$dkept" -ge $((dprinted / 2)) ] && [ $((2 * dkept + drun)) -eq 18 ] && ok ||
  bad "resumed diverge: $dkept points kept, $drun rows run again after $dprinted printed"
python3 - dfull dkilled <<'PY' && ok || bad "resumed diverge records differ from the uninterrupted run's"
import json, sys
key = lambda r: (r["suite"], r["case_id"], r["path"], r["status"], r["params"].get("batch"), r["params"].get("context"))
a, b = (sorted(map(key, json.load(open(d + "/results.json"))["records"])) for d in sys.argv[1:])
assert a == b, (set(a) ^ set(b))
assert not any(k[3] == "not_run" for k in b), b
print(f"resumed diverge: records as uninterrupted ({len(b)})")
PY

finish resume_suites
