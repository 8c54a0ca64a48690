#!/usr/bin/env bash
# kill -9 of a plan step mid-suite, then `vouch run --resume`: every kernels case that printed its
# table row is in the run's SQLite (stored before the row is printed; committed to its WAL), the
# kernels cases not finished (planned by the suite driver) and the unfinished steps are not_run in the bundle, and the resumed run ends with the same records as an uninterrupted run
# without running the kept cases again; the same for a features step killed between two checks;
# SIGTERM stops a suite after the case in flight and resumes the same way; a diverge step killed
# mid-suite shows its unfinished points as not_run and resumes from the first one not stored; a run
# given --path-lib resumes with its library loaded.
# Bad --resume input is a one-line error.
. "$VOUCH_SRC/tests/cli/counters.sh"
export VOUCH_HISTORY_DB="$t/history.sqlite"
cd "$t" || exit 2

# diverge (kept whole), kernels (killed mid-suite), eval chain (never started)
cat >plan.json <<'EOF'
{"name": "resume", "steps": [
  {"suite": "diverge", "args": ["--paths", "cpu-ref,cpu-ref", "--batch", "1,2", "--tokens", "4"]},
  {"suite": "kernels", "args": ["--path", "cpu-ref", "--preset", "edge", "--seed", "${seed}"]},
  {"suite": "eval", "args": ["chain", "--hops", "4,8", "--samples", "2"]}
], "vars": {"seed": "0"}}
EOF
"$VOUCH" run --plan plan.json --out full --no-bundle --set seed=1 >full.out 2>full.err; rc=$?
[ $rc -eq 0 ] && ok || bad "uninterrupted run exit $rc: $(tail -5 full.err)"
# the run writes in WAL mode; a finished store is one file again (rollback journal), which opens
# read-only anywhere
mode=$(python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("PRAGMA journal_mode").fetchone()[0])' \
  full/results.sqlite)
[ "$mode" = delete ] && [ ! -e full/results.sqlite-wal ] && ok || bad "finished store: journal_mode '$mode', or a -wal left"

# rows of the kernels table printed so far (the lines after its header; an interrupted step prints no
# summary after them, and `vouch run` its verdict)
rows() { awk '/^op +path +variant/ {on = 1; next} on && (NF == 0 || /^verdict:/) {on = 0} on' "$1" | wc -l; }
total=$(rows full.out)
[ "$total" -ge 20 ] && ok || bad "the kernels step prints only $total rows: too few to kill it mid-suite"

# signal_when SIG PLAN DIR COUNT N [ARGS...]: `vouch run --plan PLAN --out DIR ARGS` in the background
# (stdout in DIR.out), sent signal SIG as soon as `COUNT DIR.out` reaches N; $rc: its exit code
signal_when() {
  local sig=$1 plan=$2 dir=$3 count=$4 n=$5 pid
  shift 5
  "$VOUCH" run --plan "$plan" --out "$dir" --no-bundle "$@" >"$dir.out" 2>"$dir.err" &
  pid=$!
  for _ in $(seq 1 1200); do
    [ "$($count "$dir.out")" -ge "$n" ] && break
    sleep 0.02
  done
  kill "$sig" $pid
  wait $pid 2>/dev/null
  rc=$?
}
signal_when -9 plan.json killed rows 3 --set seed=1
printed=$(rows killed.out)
[ "$printed" -ge 3 ] && [ "$printed" -lt "$total" ] && ok ||
  bad "kill -9 did not land mid-suite: $printed of $total kernels rows printed"
# the kept records were committed to the WAL only (no fsync per case): the bundle below must find them
[ -s killed/results.sqlite-wal ] && ok || bad "killed run left no results.sqlite-wal: the store did not run in WAL mode"

# the bundle of the killed run: repaired, incomplete, with what printed and the rest not_run
"$VOUCH" bundle killed >/dev/null 2>bundle.err && ok || bad "bundle of the killed run: $(cat bundle.err)"
[ ! -e killed/results.sqlite-wal ] && ok || bad "bundle left the killed run's WAL beside results.sqlite (not folded in)"
python3 - killed "$printed" <<'PY' && ok || bad "killed run: kept records or not_run steps wrong"
import json, sys
d, printed = sys.argv[1], int(sys.argv[2])
res = json.load(open(d + "/results.json"))
recs = res["records"]
kernels = [r for r in recs if r["suite"] == "kernels" and r["status"] != "not_run"]
planned = [r for r in recs if r["suite"] == "kernels" and r["status"] == "not_run"]
not_run = sorted(r["case_id"] for r in recs if r["status"] == "not_run" and r["suite"] != "kernels")
# a case is stored before its row is printed: at most one stored case has no row yet
assert printed <= len(kernels) <= printed + 1, (printed, len(kernels))
# every case is planned: the rest are not_run records of their own (the suite driver's rec_plan)
assert planned and all(r["reason"].startswith("not run") and "variant" in r["params"] for r in planned), planned[:1]
assert len({(r["case_id"], r["path"]) for r in kernels + planned}) == len(kernels) + len(planned)
assert not_run == ["step1-kernels", "step2-eval"], not_run
assert any(r["suite"] == "diverge" for r in recs)
assert res["verdict"] == "incomplete" and not res["complete"]
print(f"kill -9 mid-suite: {len(kernels)} kernels cases kept ({printed} rows printed), {len(not_run)} steps not_run")
PY

# resume: the kernels cases kept are not run again; the records end as the uninterrupted run's
"$VOUCH" run --resume killed >resumed.out 2>resumed.err; rc=$?
[ $rc -eq 0 ] && ok || bad "resumed run exit $rc: $(tail -5 resumed.err)"
grep -q "^verdict: pass" resumed.out && ok || bad "resumed verdict: $(tail -3 resumed.out)"
grep -q "step 0 (diverge) finished before" resumed.err && ok || bad "the finished step ran again: $(head -5 resumed.err)"
again=$(rows resumed.out)
python3 - full killed "$again" "$total" <<'PY' && ok || bad "resumed records differ from the uninterrupted run's"
import json, sys
full, killed, again, total = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
key = lambda r: (r["suite"], r["case_id"], r["path"], r["status"])
a = sorted(map(key, json.load(open(full + "/results.json"))["records"]))
res = json.load(open(killed + "/results.json"))
b = sorted(map(key, res["records"]))
assert a == b, (set(a) ^ set(b))
kept = sum(1 for r in res["records"] if r["suite"] == "kernels") - again
assert not any(r["status"] == "not_run" for r in res["records"]), "a planned case stayed not_run"
assert kept > 0 and again < total, (kept, again, total)
assert res["verdict"] == "pass" and res["complete"]
print(f"resumed: {again} kernels cases run again, {kept} kept; {len(b)} records as uninterrupted")
PY
"$VOUCH" verify killed.vouch.tar.gz >/dev/null 2>verify.err && ok || bad "resumed bundle does not verify: $(cat verify.err)"

# SIGTERM (as `timeout` sends) mid-suite: the suite stops after the case in flight, not at the end
# of its step; the run exits 130, incomplete; --resume ends with the uninterrupted run's records
signal_when -TERM plan.json termed rows 3 --set seed=1
printed=$(rows termed.out)
[ $rc -eq 130 ] && ok || bad "SIGTERMed run exit $rc (want 130): $(tail -3 termed.err)"
grep -q "^kernels: interrupted after [0-9]* of [0-9]* records" termed.err && [ "$printed" -lt "$total" ] && ok ||
  bad "SIGTERM did not stop the kernels step after its case in flight: $printed of $total rows; $(tail -3 termed.err)"
"$VOUCH" run --resume termed >termed2.out 2>termed2.err && ok || bad "resume after SIGTERM: $(tail -3 termed2.err)"
python3 - full termed <<'PY' && ok || bad "records after SIGTERM and resume differ from the uninterrupted run's"
import json, sys
key = lambda r: (r["suite"], r["case_id"], r["path"], r["status"])
a, b = (sorted(map(key, json.load(open(d + "/results.json"))["records"])) for d in sys.argv[1:3])
assert a == b, (set(a) ^ set(b))
PY

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

# an eval step stopped by SIGTERM during its second path: the driver finishes that path, and the
# third path's planned records (one per hop count) stay not_run until --resume runs it. 12 samples make
# each path's case ~2 s on 2 cores: with 2 samples (0.35 s) the poll below (a python3 + sqlite start,
# ~0.45 s) could see the first path's records only after the second path was done, and the signal then
# landed in the third (it failed that way in CI)
cat >evplan.json <<'EOF'
{"name": "ev", "steps": [{"suite": "eval", "args": ["chain", "--paths", "cpu-ref,cpu-ref:tp2,cpu-ref:tp4",
  "--hops", "64,256", "--samples", "12"]}]}
EOF
# stored_of PATH: records of PATH in evterm/ with a result (not not_run)
stored_of() {
  python3 - "$t/evterm/results.sqlite" "$1" <<'PY' 2>/dev/null || echo 0
import sqlite3, sys
db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
print(db.execute("SELECT count(*) FROM records WHERE suite = 'evals' AND path = ? AND status != 'not_run'",
                 (sys.argv[2],)).fetchone()[0])
PY
}
first_path_stored() { stored_of cpu-ref; }
signal_when -TERM evplan.json evterm first_path_stored 2
python3 - evterm/results.sqlite <<'PY' && ok || bad "eval stopped mid-suite: want tp4's 2 hop records not_run: $(tail -3 evterm.err)"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
st = dict(db.execute("SELECT path || ' ' || case_id, status FROM records WHERE suite = 'evals' AND case_id LIKE 'chain_hops%'"))
want = {f"cpu-ref:tp4 chain_hops{h}_t0": "not_run" for h in (64, 256)}
sys.exit(0 if all(st.get(k) == v for k, v in want.items()) and st.get("cpu-ref chain_hops64_t0") == "pass" else 1)
PY
"$VOUCH" run --resume evterm --no-bundle >evterm2.out 2>evterm2.err && ok || bad "resume of the eval step: $(tail -3 evterm2.err)"
python3 - evterm/results.sqlite <<'PY' && ok || bad "resumed eval step: records not all pass"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
n = db.execute("SELECT count(*) FROM records WHERE suite = 'evals' AND case_id LIKE 'chain_hops%' AND status = 'pass'").fetchone()[0]
sys.exit(0 if n == 6 else 1)
PY

# a run given --path-lib: --resume loads the library again, so the plan's plugin path is known
lib="${VOUCH_PLUGINS:-}/slow_path_pct0.so"
cat >pplan.json <<'EOF'
{"name": "plugin", "steps": [{"suite": "diverge", "args": ["--paths", "cpu-ref,slow-ref", "--tokens", "2"]}]}
EOF
"$VOUCH" run --plan pplan.json --path-lib "$lib" --out plug --no-bundle >plug.out 2>plug.err && ok ||
  bad "run with --path-lib $lib: $(tail -3 plug.err)"
python3 - plug <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1] + "/results.sqlite")
db.execute("UPDATE meta SET value = 'incomplete' WHERE key = 'state'")
db.execute("DELETE FROM meta WHERE key = 'steps_done'")
db.commit()
PY
"$VOUCH" run --resume plug --no-bundle >plug2.out 2>plug2.err && ok || bad "resume of a --path-lib run: $(tail -3 plug2.err)"
grep -q "kept from the interrupted run" plug2.out && ok || bad "resumed diverge ran the stored point again: $(cat plug2.out)"
expect_error 2 "drop --plan" "$VOUCH" run --resume plug --path-lib "$lib"

# bad --resume input: one line naming the directory or the field, exit 2
expect_error 2 "not a result directory" "$VOUCH" run --resume nowhere
expect_error 2 "only a running or incomplete run can be resumed" "$VOUCH" run --resume full
expect_error 2 "drop --plan" "$VOUCH" run --resume killed --plan smoke
cp -r full broken
python3 - broken <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1] + "/results.sqlite")
db.execute("UPDATE meta SET value = 'incomplete' WHERE key = 'state'")
db.execute("UPDATE meta SET value = '{\"vars\": [1]}' WHERE key = 'run_args'")
db.commit()
PY
expect_error 2 "meta 'run_args'" "$VOUCH" run --resume broken
python3 - broken <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1] + "/results.sqlite")
db.execute("""UPDATE meta SET value = '{"vars": [], "path_libs": [], "fail_fast": false}' WHERE key = 'run_args'""")
db.execute("UPDATE meta SET value = 'many' WHERE key = 'steps_done'")
db.commit()
PY
expect_error 2 "meta 'steps_done'" "$VOUCH" run --resume broken
# a run started by another build is not continued by this one: its records would pass for the first's
cp -r full otherbuild
python3 - otherbuild <<'PY'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1] + "/results.sqlite")
db.execute("UPDATE meta SET value = 'incomplete' WHERE key = 'state'")
m = json.loads(db.execute("SELECT value FROM meta WHERE key = 'manifest'").fetchone()[0])
m["tool"]["commit"] = "0123456789abcdef0123456789abcdef01234567"
db.execute("UPDATE meta SET value = ? WHERE key = 'manifest'", (json.dumps(m),))
db.commit()
PY
expect_error 2 "tool.commit: the run was started by vouch 0123456789ab" "$VOUCH" run --resume otherbuild
finish resume
