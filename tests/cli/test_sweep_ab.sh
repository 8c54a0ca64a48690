#!/usr/bin/env bash
# vouch sweep --server --ref-server (runner/cli/cmd_sweep_ab.c), loopback only: an A/A (one vouch serve
# as both sides) passes (exit 0, no regression) with the rounds in the order base, head, head, base, ...,
# a result directory and bundle per side and round, compare.json / compare.md, and each side's
# spec-decode acceptance next to its draft length; the head slowed by vouch serve's planted
# --test-slowdown (per decode step; both sides launched, launch:CMD {port}, afresh for every run with
# --relaunch, logs in DIR/logs) is named a
# regression (exit 1) on the inter-token latency; the options the A/B refuses. The 20 % slowdown's
# figures and the A/A of two processes: docs/serving.md. As a plan step: the slowed head again, its
# comparison as the run's records.
. "$VOUCH_SRC/tests/cli/counters.sh"
. "$VOUCH_SRC/tests/cli/serve_lib.sh"
export VOUCH_HISTORY_DB="$t/history.db" TMPDIR="$t"
# both servers on one CPU where taskset exists: neither gets the quieter core of a shared machine
pin=""
command -v taskset >/dev/null && taskset -c 0 true 2>/dev/null && pin="taskset -c 0 "
srv="$pin$VOUCH serve --model synth:tiny --threads 1 --port {port}"
small=(--concurrency 1 --input-len 16 --output-len 32 --num-prompts 8)

# A/A: one server as both sides, with synthetic speculative decoding (K=3, AL=2: 1 draft of 3 accepted per
# step). One process, not two: two identical server processes on a loaded machine can differ by 20 %
# for minutes, which the A/B rightly names (docs/serving.md measures it); here the statistics alone
# must not name anything
start_server aa --spec K=3,AL=2
"$VOUCH" sweep --server "$url" --ref-server "$url" "${small[@]}" --rounds 3 --out "$t/aa" >"$t/aa.out" 2>"$t/aa.err"
rc=$?
[ $rc -eq 0 ] && grep -q "^No regression" "$t/aa.out" && ok || bad "A/A: exit $rc: $(cat "$t/aa.err" "$t/aa.out")"
order=$(grep -oE '^(base|head)-[0-9]+' "$t/aa.out" | tr '\n' ' ')
[ "$order" = "base-1 head-1 head-2 base-2 base-3 head-3 " ] && ok || bad "A/A: the rounds ran as '$order'"
for d in base-1 base-2 base-3 head-1 head-2 head-3; do
  [ -f "$t/aa/$d/results.json" ] && [ -f "$t/aa/$d.vouch.tar.gz" ] && ok || bad "A/A: $d or its bundle missing: $(ls "$t/aa")"
done
"$VOUCH" verify "$t/aa/head-2.vouch.tar.gz" >/dev/null 2>&1 && ok || bad "A/A: head-2's bundle does not verify"
grep -Eq '"role":[[:space:]]*"server"' "$t/aa/base-1/manifest.json" && ok || bad "A/A: the server's identity is not in base-1's manifest"
python3 - "$t/aa/compare.json" <<'PY' && ok || bad "A/A: compare.json"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["failed"] is False and c["regressions"] == 0, c["headline"]
assert c["rounds"] == {"base": 3, "cand": 3}
m = {e["metric"]: e for e in c["metrics"] if e["case_id"] == "served/c1/in16/out32/rate-inf"}
for k in ("tokens_per_s_per_user", "ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "itl_ms_p90"):
    assert m[k]["paired_rounds"] and m[k]["ci95"][0] is not None, (k, m[k])
# once per run: one value a round, its interval the paired t interval of the rounds' ratios
assert m["tokens_per_s"]["paired_rounds"] and m["tokens_per_s"]["ci95"][0] is not None, m["tokens_per_s"]
spec = c["sweep_ab"]["levels"][0]["spec"]
for side in ("base", "head"):
    assert spec[side]["draft_length"] == 3 and abs(spec[side]["mean_acceptance_length"] - 2) < 1e-9, spec
    assert spec[side]["per_position"] == [1, 0, 0], spec
PY
grep -q "spec decode: base acceptance length 2.000 (draft length 3; per position 1.000 0.000 0.000)" "$t/aa.out" && ok \
  || bad "A/A: the acceptance line: $(grep spec "$t/aa.out")"
head -1 "$t/aa/compare.md" | grep -q '^\*\*No regression' && grep -q '| TPOT p50 |' "$t/aa/compare.md" && ok \
  || bad "A/A: compare.md: $(head -3 "$t/aa/compare.md")"
stop_server "$spid" && ok || bad "the A/A's server did not exit 0"

# the head slowed per decode step: a regression of the decode speed, its interval above 1.05. The
# planted factor is 3.0 (steps four times as long), not the 20 % measured in docs/serving.md: on this
# test's loaded 2-core machines two identical server processes differ by up to 20 % (which the A/B
# rightly cannot tell from a slower build), and the A/B's intervals are family-wise (1 - 0.05 / about 12
# figures: with 6 rounds the paired t quantile is about 5); F = 1.0 in 4 rounds read [0.09, 42.8] in CI
"$VOUCH" sweep --server "launch:$srv --test-slowdown 3.0" --ref-server "launch:$srv" "${small[@]}" --rounds 6 --relaunch \
  --out "$t/slow" >"$t/slow.out" 2>"$t/slow.err"
rc=$?
[ $rc -eq 1 ] && grep -q "^REGRESSION: 0 correctness" "$t/slow.out" && ok || bad "slowed head: exit $rc: $(cat "$t/slow.err" "$t/slow.out")"
# --relaunch: each side started afresh for each of its 6 runs, all in the one log per side
[ "$(grep -c 'listening on' "$t/slow/logs/server.log")" = 6 ] && [ "$(grep -c 'listening on' "$t/slow/logs/ref-server.log")" = 6 ] \
  && ok || bad "the launched servers' logs: $(ls "$t/slow/logs"; cat "$t/slow/logs/server.log")"
python3 - "$t/slow/compare.json" <<'PY' && ok || bad "slowed head: compare.json: $(grep -E 'ITL|TPOT' "$t/slow.out")"
import json, sys
c = json.load(open(sys.argv[1]))
m = {e["metric"]: e for e in c["metrics"]}
# every decode-speed figure reads slower; at least one is named a regression (under CI load a round
# with a scheduling stall can leave one figure too noisy to judge: ITL p50 read [0.19, 30.0] beside
# TPOT p50 x3.9 [2.3, 5.2] once)
speed = ("itl_ms", "tpot_ms", "e2e_ms")
assert all(1.5 < m[k]["ratio"] < 6 for k in speed), [m[k] for k in speed]
named = [k for k in speed if m[k]["regression"] and m[k]["ci95"][0] > 1.05]
named += [k for k in ("tokens_per_s_per_user",) if m[k]["regression"] and m[k]["ci95"][1] < 1 / 1.05]
assert named, [m[k] for k in speed]
assert not m["tokens_per_s_per_user"]["verdict"] == "faster", m["tokens_per_s_per_user"]
PY
grep -Eq "regression: served/c1/in16/out32/rate-inf (itl_ms|tpot_ms|e2e_ms|tokens_per_s_per_user) x[0-9.]+ \[" "$t/slow.out" && ok || bad "slowed head: not named: $(tail -5 "$t/slow.out")"

# usage: what the A/B does not take
expect_error 2 "--json: not taken with --ref-server" "$VOUCH" sweep --server http://127.0.0.1:9 --ref-server http://127.0.0.1:9 --json x
expect_error 2 "--server URL is required" "$VOUCH" sweep --ref-server http://127.0.0.1:9
expect_error 2 "'nosuch': expected an http" "$VOUCH" sweep --server http://127.0.0.1:9 --ref-server nosuch
expect_error 2 "--rounds" "$VOUCH" sweep --server http://127.0.0.1:9 --ref-server http://127.0.0.1:9 --rounds 0
expect_error 2 "--relaunch: neither" "$VOUCH" sweep --server http://127.0.0.1:9 --ref-server http://127.0.0.1:9 --relaunch
"$VOUCH" sweep --server x --ref-server y --help | grep -q "base, head, head, base" && ok || bad "--help"
# a plan step: --out is the run's (refused before anything runs)
cat >"$t/plan.json" <<'EOF'
{"name": "ab", "description": "test", "vars": {}, "steps": [
 {"suite": "sweep", "args": ["--server", "http://127.0.0.1:9", "--ref-server", "http://127.0.0.1:9", "--out", "x"]}]}
EOF
"$VOUCH" run --plan "$t/plan.json" --out "$t/run" --no-bundle >"$t/run.out" 2>&1
[ $? -eq 2 ] && grep -q -- "--out: not taken in a plan step" "$t/run.out" && ok || bad "vouch run with sweep --ref-server --out: $(cat "$t/run.out")"
# the slowed head again, as a plan step: exit 1, the comparison as the run's records (ITL, TPOT and E2E
# read slower, one or more fails with its interval wholly above 1.05; the whole A/B fails), the rounds under RUN/sweep-ab (no bundles of
# their own), the launched servers' logs in the run's logs/, a bundle that verifies (each status
# re-derived from its threshold). The A/A as a plan step: test_plan_served*.sh
cat >"$t/plan2.json" <<EOF
{"name": "ab", "description": "test", "vars": {}, "steps": [
 {"suite": "sweep", "args": ["--server", "launch:$srv --test-slowdown 3.0", "--ref-server", "launch:$srv",
  "--concurrency", "1", "--input-len", "16", "--output-len", "32", "--num-prompts", "8", "--rounds", "6", "--relaunch"]}]}
EOF
"$VOUCH" run --plan "$t/plan2.json" --out "$t/run2" >"$t/run2.out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "step 0 (sweep) exited 1" "$t/run2.out" && ok || bad "slowed head as a plan step: exit $rc: $(tail -5 "$t/run2.out")"
[ -f "$t/run2/sweep-ab/compare.json" ] && [ -f "$t/run2/sweep-ab/head-6/results.json" ] && ! ls "$t/run2/sweep-ab/"*.tar.gz >/dev/null 2>&1 \
  && [ "$(grep -c 'listening on' "$t/run2/logs/server.log")" = 6 ] && ok || bad "plan step: the rounds and logs: $(ls "$t/run2" "$t/run2/sweep-ab")"
python3 - "$t/run2/results.json" <<'PY' && ok || bad "slowed head as a plan step: the records"
import json, sys
recs = {r["case_id"]: r for r in json.load(open(sys.argv[1]))["records"] if r["suite"] == "sweep"}
assert recs["sweep-ab"]["status"] == "fail" and "REGRESSION" in recs["sweep-ab"]["reason"], recs["sweep-ab"]
failed = []
for k in ("itl_ms", "tpot_ms", "e2e_ms"):
    r = recs["sweep-ab/served/c1/in16/out32/rate-inf/" + k]
    m = {x["name"]: x["value"] for x in r["metrics"]}
    assert 1.5 < m["ratio"] < 6 and r["path"].startswith("server:"), r
    if r["status"] == "fail":
        assert m["ci_low"] > 1.05 and r["params"]["verdict"] == "slower", r
        failed.append(k)
assert failed, "no decode-speed figure's record fails"
PY
"$VOUCH" verify "$t/run2.vouch.tar.gz" >"$t/v2.out" 2>&1 && ok || bad "verify the plan's bundle: $(tail -3 "$t/v2.out")"
# the report's served A/B table names the regression in its level's row
"$VOUCH" report "$t/run2" --md "$t/run2.md" >/dev/null 2>&1 && grep -q '^### Speed (served A/B)' "$t/run2.md" \
  && grep -Eq '^\| c1/in16/out32/rate-inf \|.* x[0-9.]+ \[[0-9.]+, [0-9.]+\] ❌ regression \|' "$t/run2.md" && ok \
  || bad "report of the plan step: the served A/B table: $(grep -A4 'Speed (served' "$t/run2.md")"
finish sweep_ab
