#!/usr/bin/env bash
# --server 'launch:CMD {port}' (suites/served/served_launch.h): vouch starts the server itself on a free
# port, waits for /v1/models, logs its output (redacted; the run's logs/ under vouch run) and stops its
# whole process group at the end; a server that exits first fails with the tail of its log; a command
# without {port} is a usage error. Server: tests/cli/aime_fake.py (answers "What is A plus B?").
set -u
. "$VOUCH_SRC/tests/cli/counters.sh"
t=$(mktemp -d)
export TMPDIR="$t" # the logs of launched servers outside a run
trap 'pkill -f "vouch-launch-test-$$" 2>/dev/null; rm -rf "$t"' EXIT
python3 - "$t" <<'PY'
import json, sys
rows = [{"id": i, "problem": "What is %d plus %d?" % (3 * i + 1, 7 * i + 2), "answer": str(10 * i + 3)} for i in range(8)]
open(sys.argv[1] + "/d.jsonl", "w").write("\n".join(json.dumps(r) for r in rows) + "\n")
PY
# the marker names this test's servers (pkill at exit, and the check that none is left)
fake="PYTHONPATH=$VOUCH_SRC/tests/cli exec python3 $VOUCH_SRC/tests/cli/aime_fake.py port:{port} vouch-launch-test-$$"
echo "sk-launch-SECRET-99999999999999" > "$t/secret"
fake_talk="echo token=sk-launch-SECRET-99999999999999; $fake"

"$VOUCH" eval aime --dataset "$t/d.jsonl" --server "launch:$fake_talk" --ref-server "launch:$fake" >"$t/aa.out" 2>"$t/aa.err"
rc=$?
[ $rc -eq 0 ] && grep -q "0 differ" "$t/aa.out" && grep -q "^verdict: pass" "$t/aa.out" && ok \
  || bad "A/A of two launched servers: exit $rc: $(cat "$t/aa.err" "$t/aa.out")"
grep -q "^candidate http://127.0.0.1:[0-9]*: model fake-aime" "$t/aa.out" && ok || bad "the launched URL is shown: $(cat "$t/aa.out")"
sleep 0.3
pgrep -f "vouch-launch-test-$$" >/dev/null && bad "a launched server is still running after the suite" || ok
log=$(sed -n 's/^vouch: the launched server.s output goes to //p' "$t/aa.err" | head -1)
[ -n "$log" ] && grep -q "fake server listening on port" "$log" && grep -q "token=\*\*\*" "$log" && ! grep -q "SECRET" "$log" && ok \
  || bad "the server's log (redacted) at '$log': $(cat "$log" 2>/dev/null)"
rm -f "$log"

# under vouch run: the log is the run's logs/server.log
cat >"$t/plan.json" <<EOF2
{"name": "launch", "description": "test", "vars": {}, "steps": [
 {"suite": "eval", "args": ["aime", "--dataset", "$t/d.jsonl", "--server", "launch:$fake", "--ref-server", "launch:$fake"]}]}
EOF2
"$VOUCH" run --plan "$t/plan.json" --out "$t/run" --no-bundle >"$t/run.out" 2>&1 && grep -q "fake server listening" "$t/run/logs/server.log" \
  && grep -q "fake server listening" "$t/run/logs/ref-server.log" && ok || bad "vouch run: logs/server.log: $(cat "$t/run.out"; ls "$t/run/logs")"
# the report's AIME table: a row per server, pass@1 with its interval, the candidate's paired difference
"$VOUCH" report "$t/run" --md "$t/run.md" >/dev/null 2>"$t/report.err" && grep -q '^### AIME (pass@1' "$t/run.md" &&
  [ "$(grep -c '^| server:fake-aime | 1.000 | \[1.000, 1.000\] | 8 | 0 |' "$t/run.md")" -eq 1 ] &&
  grep -q '^| server:fake-aime | 1.000 | \[1.000, 1.000\] | 8 | 0 | +0.000 | 1 |$' "$t/run.md" &&
  grep -q '^| ref-server:fake-aime | 1.000 | \[1.000, 1.000\] | 8 | 0 | | |$' "$t/run.md" && ok ||
  bad "report: the AIME table: $(grep -A4 'AIME' "$t/run.md") $(cat "$t/report.err")"
# the same table in the full (HTML) report
"$VOUCH" report "$t/run" --html "$t/run.html" >/dev/null 2>"$t/report.err" && grep -q '<h2>AIME</h2>' "$t/run.html" &&
  grep -q '<tr><td>server:fake-aime</td><td class="pass">pass</td><td>1.000</td><td>\[1.000, 1.000\]</td><td>8</td><td>0</td><td>+0.000</td><td>1</td></tr>' "$t/run.html" &&
  grep -q '<tr><td>ref-server:fake-aime</td><td class="pass">pass</td><td>1.000</td><td>\[1.000, 1.000\]</td><td>8</td><td>0</td><td></td><td></td></tr>' "$t/run.html" && ok ||
  bad "report --html: the AIME table: $(grep -A4 'AIME' "$t/run.html" | head -8) $(cat "$t/report.err")"

# a server that exits first: the error names the status and shows its last output
"$VOUCH" eval aime --dataset "$t/d.jsonl" --server "launch:echo cannot load the weights {port}; exit 3" \
  --ref-server "launch:$fake" >"$t/dead.out" 2>"$t/dead.err"
rc=$?
[ $rc -ne 0 ] && grep -q "the launched server exited (status 3) before it answered; log .*cannot load the weights" "$t/dead.err" && ok \
  || bad "a dying server: exit $rc: $(cat "$t/dead.err")"
sleep 0.3
pgrep -f "vouch-launch-test-$$" >/dev/null && bad "the other launched server is still running after the error" || ok

# a server that outlives its shell and ignores SIGTERM: the shell dies at the stop, the server is in the
# same process group and must get SIGKILL after the 10 s grace (not be left running)
stubborn="(trap '' TERM; PYTHONPATH=$VOUCH_SRC/tests/cli exec python3 $VOUCH_SRC/tests/cli/aime_fake.py port:{port} vouch-launch-test-$$-stubborn) & wait"
"$VOUCH" eval aime --dataset "$t/d.jsonl" --server "launch:$stubborn" --ref-server "launch:$fake" >"$t/stub.out" 2>"$t/stub.err"
rc=$?
[ $rc -eq 0 ] && ok || bad "a server behind a non-exec shell: exit $rc: $(cat "$t/stub.err")"
sleep 0.3
pgrep -f "vouch-launch-test-$$-stubborn" >/dev/null && bad "a server that ignores SIGTERM outlived its shell and the stop" || ok

# usage: a command without {port}
"$VOUCH" eval aime --dataset "$t/d.jsonl" --server "launch:python3 -m http.server" >"$t/use.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "the command must hold {port}" "$t/use.out" && ok || bad "no {port}: exit $rc: $(cat "$t/use.out")"
finish test_served_launch
