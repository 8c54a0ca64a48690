#!/usr/bin/env bash
# vouch sweep --repeat on the CPU (synth:tiny): every round's records (round param, "/r<N>" case
# ids), speedups within a round, the agreement table and its PASS/FAIL line, --require-agreement's
# exit status, the wall time at the end, the experts column under natural routing, usage errors.
. "$VOUCH_SRC/tests/cli/counters.sh"
if ! "$VOUCH" sweep --help 2>/dev/null | grep -q -- "--repeat"; then echo "vouch sweep has no --repeat"; exit 77; fi


common=(--model synth:tiny --threads 1 --membw-bytes 64m --no-progress --batch 1,2 --context 32 --steps 4 --warmup 1)

# generous thresholds: the wall clock of a shared CPU still passes
"$VOUCH" sweep "${common[@]}" --paths cpu-ref,cpu-ref:tp1 --repeat 3 --agree-pct 1000 --max-cv 1000 --require-agreement \
  --json "$t/a.json" >"$t/a.txt" 2>"$t/a.err" && ok || bad "repeat sweep: $(cat "$t/a.err")"
[ "$(grep -c '^decode: round [123] of 3' "$t/a.txt")" -eq 3 ] && ok || bad "a table per round: $(cat "$t/a.txt")"
grep -q "^repeat-run agreement over 3 rounds" "$t/a.txt" && ok || bad "agreement table: $(cat "$t/a.txt")"
grep -q "r1 p50 ms  *r2 p50 ms  *r3 p50 ms  *spread %" "$t/a.txt" && ok || bad "agreement columns: $(cat "$t/a.txt")"
[ "$(grep -cE '^cpu-ref(:tp1)? .* pass$' "$t/a.txt")" -eq 4 ] && ok || bad "4 points pass: $(cat "$t/a.txt")"
grep -q "^agreement: PASS: 0 of 4 points fail" "$t/a.txt" && ok || bad "PASS line: $(cat "$t/a.txt")"
tail -1 "$t/a.txt" | grep -qE "^sweep wall time [0-9.]+ s \(rounds: [0-9.]+ [0-9.]+ [0-9.]+ s\), model open [0-9.]+ s$" \
  && ok || bad "wall time last: $(tail -2 "$t/a.txt")"
python3 - "$t/a.json" <<'PY' && ok || bad "JSON rounds"
import json, sys
d = json.load(open(sys.argv[1]))
rs = d["records"]
assert len(rs) == 12, len(rs)  # 2 paths x 2 batches x 3 rounds
ids = {(r["case_id"], r["path"]) for r in rs}
assert len(ids) == 12, "case_id + path unique across rounds"
for r in rs:
    n = r["params"]["round"]
    assert r["params"]["repeat"] == 3 and r["case_id"].endswith("/r%d" % n), r["case_id"]
    m = {x["name"]: x for x in r["metrics"]}
    assert "speedup" in m, r["case_id"]
    if r["path"] == "cpu-ref":
        assert abs(m["speedup"]["value"] - 1) < 1e-12
    assert r["params"]["experts_touched_from"].startswith("experts the path"), r["params"]["experts_touched_from"]
assert d["options"]["repeat"] == 3 and len(d["rounds"]) == 3
assert abs(d["wall_s"] - sum(x["wall_s"] for x in d["rounds"])) < 1e-6
ag = d["agreement"]
assert ag["verdict"] == "pass" and ag["judged"] == 4 and ag["failed"] == 0, ag
for p in ag["points"]:
    assert len(p["median_ms"]) == 3 and p["verdict"] == "pass" and not p["case_id"].endswith(("/r1", "/r2", "/r3"))
    lo, hi = min(p["median_ms"]), max(p["median_ms"])
    assert abs(p["spread_pct"] - 100 * (hi - lo) / lo) < 1e-9
PY

# impossible thresholds: FAIL is reported; exit 0 without --require-agreement, 1 with it
"$VOUCH" sweep "${common[@]}" --paths cpu-ref --repeat 2 --agree-pct 0 --max-cv 0 >"$t/b.txt" 2>"$t/b.err" \
  && ok || bad "FAIL without --require-agreement exits 0: $(cat "$t/b.err")"
grep -q "^agreement: FAIL: 2 of 2 points fail" "$t/b.txt" && ok || bad "FAIL line: $(cat "$t/b.txt")"
grep -qE "^cpu-ref .*FAIL \((spread, )?CV\)$" "$t/b.txt" && ok || bad "per-point FAIL: $(cat "$t/b.txt")"
"$VOUCH" sweep "${common[@]}" --paths cpu-ref --repeat 2 --agree-pct 0 --max-cv 0 --require-agreement >"$t/c.txt" 2>"$t/c.err"
rc=$?
[ "$rc" -eq 1 ] && ok || bad "--require-agreement on FAIL exits 1 (got $rc)"
grep -q "agreement failed" "$t/c.err" && ok || bad "says why: $(cat "$t/c.err")"

# a peer (no rounds) gets its speedup from round 1 and stays out of the agreement table
python3 - "$t/a.json" "$t/peer.json" <<'PY' && ok || bad "make peer file"
import json, sys
d = json.load(open(sys.argv[1]))
out = []
for r in d["records"]:
    if r["path"] != "cpu-ref" or r["params"]["round"] != 1: continue
    r["path"] = "hf-eager"
    r["case_id"] = r["case_id"][: -len("/r1")]
    for k in ("round", "repeat"): r["params"].pop(k)
    r["metrics"] = [m for m in r["metrics"] if not m["name"].startswith("speedup")]
    out.append(r)
d["records"] = out
json.dump(d, open(sys.argv[2], "w"))
PY
"$VOUCH" sweep "${common[@]}" --paths cpu-ref --repeat 2 --agree-pct 1000 --max-cv 1000 --peer "$t/peer.json" \
  --json "$t/d.json" >"$t/d.txt" 2>"$t/d.err" && ok || bad "repeat + peer: $(cat "$t/d.err")"
python3 - "$t/d.json" <<'PY' && ok || bad "peer speedup from round 1, not in agreement"
import json, sys
d = json.load(open(sys.argv[1]))
peers = [r for r in d["records"] if r["path"] == "hf-eager"]
assert len(peers) == 2
for r in peers:
    assert any(m["name"] == "speedup" for m in r["metrics"]), r["case_id"]
assert all(p["path"] == "cpu-ref" for p in d["agreement"]["points"]) and d["agreement"]["judged"] == 2
PY
[ "$(sed -n '/^decode: round 1/,/^$/p' "$t/d.txt" | grep -c '^hf-eager ')" -eq 2 ] && ok || bad "peer rows in round 1's table: $(cat "$t/d.txt")"

# --time-budget: points that would start after it are listed as not run, with the reason; exit 0
"$VOUCH" sweep "${common[@]}" --paths cpu-ref --repeat 2 --time-budget 0.000001 --json "$t/e.json" >"$t/e.txt" 2>"$t/e.err" \
  && ok || bad "time budget: $(cat "$t/e.err")"
[ "$(grep -c 'not run: time budget spent before this point' "$t/e.txt")" -eq 4 ] && ok || bad "4 points cut: $(cat "$t/e.txt")"
grep -q "^agreement: FAIL: 0 of 0 points fail.*2 points not run in any round" "$t/e.txt" && ok || bad "nothing judged is no PASS: $(cat "$t/e.txt")"
expect_error 2 "--time-budget" "$VOUCH" sweep "${common[@]}" --time-budget 0

# usage errors
expect_error 2 "--require-agreement needs --repeat" "$VOUCH" sweep "${common[@]}" --require-agreement
expect_error 2 "--repeat" "$VOUCH" sweep "${common[@]}" --repeat 0
expect_error 2 "--agree-pct" "$VOUCH" sweep "${common[@]}" --repeat 2 --agree-pct x
expect_error 2 "--max-cv" "$VOUCH" sweep "${common[@]}" --repeat 2 --max-cv -1

finish "sweep --repeat"
