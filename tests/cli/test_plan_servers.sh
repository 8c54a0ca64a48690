#!/usr/bin/env bash
# A plan's 'launch:' servers are started once for the whole plan (runner/plan/plan_servers.h), and a
# launched server that dies between steps stops the plan with its exit status and log, not with a
# connection error per step. The server here is a few lines of Python that answers GET /v1/models and
# exits (status 3) at the first other request, so the first step fails on it and the later ones must be
# recorded as not run because the server is gone. A second run on a command that never starts records
# run/servers as an error and every step not run.
. "$VOUCH_SRC/tests/cli/counters.sh"
export VOUCH_HISTORY_DB="$t/history.db" TMPDIR="$t"
cat >"$t/fake.py" <<'PY'
import http.server, json, os, sys
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        if self.path != "/v1/models":
            if self.path == "/version":
                self.send_response(404); self.end_headers(); return
            os._exit(3)
        body = json.dumps({"object": "list", "data": [{"id": "fake", "object": "model", "owned_by": "fake"}]}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def do_POST(self):
        print("fake server: a POST to %s, exiting" % self.path, flush=True)
        os._exit(3)
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
step='{"suite": "diverge", "args": ["--server", "${server}", "--ref-server", "${server}"]}'
printf '{"name": "srv", "vars": {"server": ""}, "steps": [%s, %s, %s]}\n' "$step" "$step" "$step" >"$t/plan.json"

"$VOUCH" run --plan "$t/plan.json" --set server="launch:exec python3 $t/fake.py {port}" --out "$t/r" --no-bundle \
  >"$t/r.out" 2>"$t/r.err"
rc=$?
[ "$rc" -eq 1 ] && ok || bad "dying server: exit $rc, want 1: $(tail -5 "$t/r.err")"
# one server per option, though both options hold the same command (an A/A pair is two processes)
[ "$(grep -c 'starting the server for --server once for the plan' "$t/r.err")" -eq 1 ] &&
  [ "$(grep -c 'starting the server for --ref-server once for the plan' "$t/r.err")" -eq 1 ] && ok ||
  bad "the servers were not started exactly once each: $(grep -i start "$t/r.err")"
grep -q 'step 0: vouch diverge --server http://127.0.0.1:[0-9]* --ref-server http://127.0.0.1:' "$t/r.err" && ok ||
  bad "step 0 did not get the server's URL: $(grep 'step 0' "$t/r.err")"
grep -Eq "step [12] \(diverge\) not run: --(ref-)?server: the launched server on http://127.0.0.1:[0-9]+ exited \(status 3\); log the run's logs/(ref-)?server.log: .*a POST to" \
  "$t/r.err" && ok || bad "no step said the server exited with its status and log: $(grep -E 'step [12]' "$t/r.err")"
cat "$t/r/logs/server.log" "$t/r/logs/ref-server.log" 2>/dev/null | grep -q 'a POST to' && ok || bad "the server's log is not in the run: $(ls "$t/r/logs" 2>&1)"
python3 - "$t/r/results.json" <<'PY' && ok || bad "dying server: the records (above)"
import json, sys
recs = json.load(open(sys.argv[1]))["records"]
run = {r["case_id"]: r for r in recs if r["suite"] == "run"}
gone = [r for r in run.values() if r["status"] == "error" and "exited (status 3)" in r["reason"]]
assert len(gone) == 1, [(r["case_id"], r["status"], r["reason"]) for r in run.values()]
after = [r for r in run.values() if r["status"] == "not_run"]
assert all("exited before step" in r["reason"] for r in after), [(r["case_id"], r["reason"]) for r in after]
assert len(gone) + len(after) == 2 or "step1-diverge" in run or "step2-diverge" in run, sorted(run)
PY

"$VOUCH" run --plan "$t/plan.json" --set server="launch:exit 7 {port}" --out "$t/n" --no-bundle >"$t/n.out" 2>"$t/n.err"
rc=$?
[ "$rc" -eq 1 ] && ok || bad "server that never starts: exit $rc, want 1: $(tail -3 "$t/n.err")"
grep -q 'vouch run: error: --server: the launched server exited (status 7) before it answered' "$t/n.err" && ok ||
  bad "the start failure is not named: $(cat "$t/n.err")"
python3 - "$t/n/results.json" <<'PY' && ok || bad "server that never starts: the records (above)"
import json, sys
recs = json.load(open(sys.argv[1]))["records"]
assert [r["case_id"] for r in recs if r["status"] == "error"] == ["servers"], [(r["case_id"], r["status"]) for r in recs]
assert sorted(r["case_id"] for r in recs if r["status"] == "not_run") == ["step0-diverge", "step1-diverge", "step2-diverge"], recs
PY
finish test_plan_servers
