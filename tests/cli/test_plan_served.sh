#!/usr/bin/env bash
# The shipped plan `served` (suites/plans/served.json) end to end, as a user runs it against a real
# engine no one here wrote: the llama.cpp pair of tests/cli/llamacpp_pair.sh (f32 twice: A/A; q4_0: a
# quantized candidate). `vouch run --plan served --set server=URL --set ref=URL` alone runs the
# features, diverge on vouch's own prompts and the speed A/B (sweep --ref-server), and records the
# dataset steps as not run, naming the --set that would run them; with prompts, MRCR and AIME files every step runs; the A/A bundle passes
# and verify, report and publish --dry-run take it like any other; q4_0 as the candidate fails the run.
# Without --set server the plan is refused in one line. Skipped (77) without node/npm on a workstation.
. "$VOUCH_SRC/tests/cli/counters.sh"
. "$VOUCH_SRC/tests/cli/llamacpp_pair.sh" test_plan_served

expect_error 2 "plan served: --set server=VALUE is required" "$VOUCH" run --plan served --no-bundle --set ref="$R"

# the speed step small: one level, short requests, 3 rounds (the A/A's figures are mostly undecided at that)
ab=(--set ab_concurrency=2 --set ab_input_len=16 --set ab_output_len=16 --set ab_num_prompts=4)

# only the servers: features, diverge on the built-in prompts and the speed A/B run; the rest say what they need
"$VOUCH" run --plan served --set server="$W" --set ref="$R" "${ab[@]}" --out "$t/min" >"$t/min.out" 2>"$t/min.err"
rc=$?
[ "$rc" -eq 0 ] && ok || bad "A/A, servers only: exit $rc, want 0: $(tail -5 "$t/min.err") $(tail -5 "$t/min.out")"
for v in prompts mrcr aime; do
  grep -q "skipped: needs --set $v=VALUE" "$t/min.err" && ok || bad "servers only: no skip line for $v: $(grep skipped "$t/min.err")"
done

# every step: a prompts file, public-format MRCR rows short enough for the 256-token servers, AIME items
printf '{"prompt": "The committee met on a rainy Tuesday to decide"}\n{"prompt": "def square(x):\\n    return"}\n' >"$t/p.jsonl"
python3 "$VOUCH_SRC/scripts/mrcr_synth.py" --out "$t/mrcr.jsonl" --rows 4 --seed 5 --min-chars 200 --max-chars 400 || bad "mrcr_synth"
printf '{"id": 0, "problem": "Compute 12 times 13.", "answer": "156"}\n{"id": 1, "problem": "What is 2 + 2?", "answer": "4"}\n' >"$t/aime.jsonl"
all=(--set prompts="$t/p.jsonl" --set mrcr="$t/mrcr.jsonl" --set aime="$t/aime.jsonl" --set aime_max_tokens=12 --set aime_repeats=2
     --set concurrency=2 "${ab[@]}")
"$VOUCH" run --plan served --set server="$W" --set ref="$R" "${all[@]}" --out "$t/aa" >"$t/aa.out" 2>"$t/aa.err"
rc=$?
[ "$rc" -eq 0 ] && ok || bad "A/A, every step: exit $rc, want 0: $(grep -E 'exited|FAIL|error' "$t/aa.err" "$t/aa.out" | head -5)"
grep -q "skipped" "$t/aa.err" && bad "A/A, every step: a step was skipped: $(grep skipped "$t/aa.err")" || ok
python3 - "$t/aa/results.json" <<'PY' && ok || bad "A/A records: see above"
import json, sys
recs = json.load(open(sys.argv[1]))["records"]
suites = {r["suite"] for r in recs}
bad = [r["case_id"] for r in recs if r["status"] in ("fail", "error")]
need = {"features", "diverge", "evals", "sweep"}
if not need <= suites or bad:
    print("suites", sorted(suites), "failing", bad[:5])
    sys.exit(1)
# the speed step: one record per level and gated figure (ratio and interval) and one of the whole A/B
ab = {r["case_id"]: r for r in recs if r["suite"] == "sweep"}
assert ab["sweep-ab"]["status"] == "pass", ab["sweep-ab"]
itl = ab["sweep-ab/served/c2/in16/out16/rate-inf/itl_ms"]
assert {"ratio", "ci_low", "ci_high"} <= {m["name"] for m in itl["metrics"]}, itl
PY
[ -f "$t/aa/sweep-ab/compare.md" ] && [ -f "$t/aa/sweep-ab/base-1/results.json" ] && ok || bad "A/A: sweep-ab/ rounds: $(ls "$t/aa")"
"$VOUCH" verify "$t/aa.vouch.tar.gz" >"$t/verify.out" 2>&1 && ok || bad "verify: $(tail -3 "$t/verify.out")"
"$VOUCH" report "$t/aa" --md "$t/report.md" >"$t/report.txt" 2>"$t/report.err" && [ -s "$t/report.md" ] && ok ||
  bad "report: $(tail -3 "$t/report.err")"
GITHUB_TOKEN=x "$VOUCH" publish "$t/aa.vouch.tar.gz" --pr o/r#1 --dry-run >"$t/pub.out" 2>&1 && ok ||
  bad "publish --dry-run: $(tail -3 "$t/pub.out")"
grep -q "$R" "$t/aa/manifest.json" && grep -q "$W" "$t/aa/manifest.json" && ok || bad "manifest does not name both servers"

# a quantized build as the candidate fails the run (diverge on text)
"$VOUCH" run --plan served --set server="$Q" --set ref="$R" "${ab[@]}" --no-bundle --out "$t/q4" >"$t/q4.out" 2>"$t/q4.err"
rc=$?
[ "$rc" -eq 1 ] && ok || bad "q4_0 as candidate: exit $rc, want 1: $(tail -5 "$t/q4.out")"
grep -q "step 1 (diverge) exited 1" "$t/q4.err" && ok || bad "q4_0: diverge did not fail: $(grep exited "$t/q4.err")"
finish test_plan_served
