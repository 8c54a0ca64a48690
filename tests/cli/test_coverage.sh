#!/usr/bin/env bash
# vouch coverage (issue 37) on the CPU: cpu-ref's choices become records, one per (op, variant), with the
# envelope; a library of ABI 1 (tests/plugins/abi1_path.c, whose vpath_ops has no selectable) loads and
# its path gets the one not_supported record "does not enumerate its choices"; a plan with a coverage step
# and a diverge step gives a report whose coverage table names the steps that ran each choice.
. "$VOUCH_SRC/tests/cli/counters.sh"
L="$VOUCH_PLUGINS/abi1_path_pct0.so"
[ -f "$L" ] || { echo "no $L; skipping"; exit 77; }
export VOUCH_HISTORY_DB=off

"$VOUCH" coverage --path-lib "$L" --paths cpu-ref,abi1-ref --model synth:tiny --batch 4 --context 64 --spec 3 \
  --json "$t/c.json" >"$t/c.out" 2>"$t/c.err" && ok || bad "coverage: exit $?: $(cat "$t/c.err")"
grep -qF "abi1-ref: the path does not enumerate its choices" "$t/c.out" && ok || bad "coverage: abi1-ref line: $(cat "$t/c.out")"
python3 - "$t/c.json" <<'PY' && ok || bad "coverage: records"
import json, sys
rs = json.load(open(sys.argv[1]))["records"]
cpu = {r["params"]["choice"]: r for r in rs if r["path"] == "cpu-ref"}
assert all(r["case_id"] == k + " on synth:tiny" for k, r in cpu.items()), sorted(r["case_id"] for r in cpu.values())
assert {"attention/cpu", "linear/cpu", "moe/cpu", "lm_head/cpu"} <= set(cpu), sorted(cpu)
r = cpu["attention/cpu"]
assert r["suite"] == "coverage" and r["status"] == "pass", r
assert r["params"]["max_batch"] == 4 and r["params"]["max_context"] == 64 and r["params"]["max_tokens"] == 4, r
assert r["params"]["model"].startswith("synth:tiny") and r["params"]["when"], r
old = [r for r in rs if r["path"] == "abi1-ref"]
assert len(old) == 1 and old[0]["status"] == "not_supported" and "does not enumerate" in old[0]["reason"], old
PY

cat >"$t/plan.json" <<'PLAN'
{"name": "cov", "steps": [
  {"suite": "coverage", "args": ["--model", "synth:tiny", "--paths", "cpu-ref", "--batch", "2", "--context", "32"]},
  {"suite": "coverage", "args": ["--model", "synth:recall-chain", "--paths", "cpu-ref", "--batch", "2", "--context", "32"]},
  {"suite": "diverge", "args": ["--model", "synth:tiny", "--paths", "cpu-ref,cpu-ref:tp2", "--batch", "1",
                                "--context", "8", "--tokens", "2"]}]}
PLAN
"$VOUCH" run --plan "$t/plan.json" --out "$t/run" --no-bundle >"$t/r.out" 2>&1 && ok || bad "run: $(tail -5 "$t/r.out")"
"$VOUCH" report "$t/run" >"$t/report.md" 2>"$t/rep.err" && ok || bad "report: $(cat "$t/rep.err")"
# two models' choices in one run (their records do not collide); no decode step ran recall-chain, so
# each of its 9 choices is a gap, and tiny's are covered by the diverge step
grep -qF "**Coverage:** 18 (path, op, variant) choices the paths' rules can pick; **9 never ran (GAP)**." \
  "$t/report.md" && ok || bad "report: summary: $(grep -F Coverage "$t/report.md")"
grep -qF '| cpu-ref on synth:recall-chain | `attention/cpu` |' "$t/report.md" && ok || bad "report: recall-chain's gap row"
grep -qF '| cpu-ref on synth:tiny | `attention/cpu` |' "$t/report.md" && grep -qF "| diverge synth:tiny ×1 |" "$t/report.md" \
  && ok || bad "report: the table: $(sed -n '/### Coverage/,/^$/p' "$t/report.md")"
finish
