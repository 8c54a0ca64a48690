#!/usr/bin/env bash
# kill -9 of a plan step mid-suite, then `vouch run --resume`: every kernels case that printed its
# table row is in the run's SQLite (stored before the row is printed; committed to its WAL), the
# kernels cases not finished (planned by the suite driver) and the unfinished steps are not_run in the
# bundle, and the resumed run ends with the same records as an uninterrupted run without running the
# kept cases again; SIGTERM stops a suite after the case in flight and resumes the same way (a kernels
# step, and an eval step during its second path); a run given --path-lib resumes with its library
# loaded. The features and diverge steps killed mid-suite are test_resume_suites.sh.
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

. "$VOUCH_SRC/tests/cli/resume_util.sh"
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
