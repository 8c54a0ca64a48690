#!/usr/bin/env bash
# `vouch ab --launch`: the repository is a server's (here a two-commit repository whose rev.txt names
# the side), --build runs in each worktree, and one plan run judges the server started from the head's
# worktree (`server`) against the one started from the base's (`ref`), both launched once for the plan.
# The server is vouch serve (synth:tiny); the command refuses to start unless --build ran in its
# worktree, and says which revision it was started from, so the logs prove which side is which.
. "$VOUCH_SRC/tests/cli/counters.sh"
export VOUCH_HISTORY_DB="$t/history.db" TMPDIR="$t"
repo="$t/engine"
mkdir -p "$repo" && git -C "$repo" init -q && git -C "$repo" config user.email t@t && git -C "$repo" config user.name t
echo base >"$repo/rev.txt" && git -C "$repo" add rev.txt && git -C "$repo" commit -qm base
echo head >"$repo/rev.txt" && git -C "$repo" commit -qam head
step='{"suite": "diverge", "args": ["--server", "${server}", "--ref-server", "${ref}", "--concurrency", "2", "--limit", "4", "--tokens", "8"]}'
printf '{"name": "pair", "vars": {"server": "", "ref": ""}, "steps": [%s]}\n' "$step" >"$t/plan.json"
cmd="test -f built.txt && echo \"side \$(cat rev.txt)\" && exec $VOUCH serve --model synth:tiny --threads 1 --port {port}"

"$VOUCH" ab --repo "$repo" --base HEAD~1 --launch "$cmd" --build 'echo built >built.txt' --plan "$t/plan.json" \
  --out "$t/ab" >"$t/ab.out" 2>"$t/ab.err"
rc=$?
[ "$rc" -eq 0 ] && ok || bad "ab --launch: exit $rc, want 0: $(tail -5 "$t/ab.err"; tail -8 "$t/ab/logs/served.log" 2>/dev/null)"
grep -qx 'side head' "$t/ab/served/logs/server.log" && grep -qx 'side base' "$t/ab/served/logs/ref-server.log" && ok ||
  bad "the servers were not started from their worktrees: $(cat "$t/ab/served/logs/server.log" "$t/ab/served/logs/ref-server.log" 2>&1 | head -4)"
[ "$(grep -c 'starting the server for' "$t/ab/logs/served.log")" -eq 2 ] && ok ||
  bad "not one launch per side: $(grep -i start "$t/ab/logs/served.log")"
python3 - "$t/ab/ab.json" "$t/ab/served/results.json" <<'PY' && ok || bad "ab --launch: ab.json / results (above)"
import json, sys
ab = json.load(open(sys.argv[1]))
sv = ab["served"]
assert sv["exit_code"] == 0 and sv["verdict"] == "pass" and sv["bundle"] == "served.vouch.tar.gz" and len(sv["bundle_sha256"]) == 64, sv
assert sv["build"] == "echo built >built.txt" and "{port}" in sv["launch"], sv
assert ab["base"]["commit"] != ab["head"]["commit"], (ab["base"], ab["head"])
recs = [r for r in json.load(open(sys.argv[2]))["records"] if r["suite"] == "diverge"]
assert recs and all(r["status"] == "pass" for r in recs), [(r["case_id"], r["status"], r["reason"]) for r in recs]
PY
"$VOUCH" verify "$t/ab/served.vouch.tar.gz" >"$t/verify.out" 2>&1 && ok || bad "verify: $(tail -3 "$t/verify.out")"
[ ! -e "$t/ab/work" ] && [ -z "$(git -C "$repo" worktree list | grep vouch-ab)" ] && ok ||
  bad "worktrees left: $(git -C "$repo" worktree list) $(ls "$t/ab")"
# usage errors: exit 2, the error on the first line (the usage follows, as for every ab usage error)
"$VOUCH" ab --repo "$repo" --base HEAD~1 --build true --out "$t/x1" 2>"$t/e1"; rc=$?
[ "$rc" -eq 2 ] && head -1 "$t/e1" | grep -q -- "--build: only with --launch" && ok || bad "--build alone: exit $rc: $(head -2 "$t/e1")"
"$VOUCH" ab --repo "$repo" --base HEAD~1 --launch true --out "$t/x2" 2>"$t/e2"; rc=$?
[ "$rc" -eq 2 ] && head -1 "$t/e2" | grep -q "must hold {port}" && ok || bad "--launch without {port}: exit $rc: $(head -2 "$t/e2")"
[ ! -e "$t/x1" ] && [ ! -e "$t/x2" ] && ok || bad "a usage error made an output directory"
finish test_ab_launch
