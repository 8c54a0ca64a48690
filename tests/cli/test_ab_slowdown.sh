#!/bin/bash
# vouch ab finds a planted 10% slowdown and stays quiet on A/A. A tiny git repository holds a
# --path-lib library (tests/plugins/slow_path.c: "slow-ref" = cpu-ref whose forward takes
# SLOW_PCT% longer): commit "base" has it built with SLOW_PCT=0, commit "slow" with
# SLOW_PCT=10 (the "code change"). The plan sweeps slow-ref with the library of the worktree
# it runs in. base vs base (A/A): exit 0, no regression; its intervals measure the noise.
# base vs slow: exit 1, the step time named as a regression with its ratio and interval,
# whenever that noise is under 4% (a 10% slowdown is then beyond the 5% threshold).
set -u
[ -n "${VOUCH:-}" ] || exit 77
[ -f "${VOUCH_PLUGINS:-}/slow_path_pct10.so" ] || { echo "no test plugins in '${VOUCH_PLUGINS:-}'; skipping"; exit 77; }
command -v git >/dev/null || { echo "git missing; skipping"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export VOUCH_HISTORY_DB=off GIT_CONFIG_NOSYSTEM=1 HOME="$T"
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.invalid GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.invalid
unset GITHUB_EVENT_PATH GITHUB_SHA GITHUB_REF GITHUB_REPOSITORY GITHUB_BASE_REF
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
R=$T/repo
git init -q "$R" && mkdir "$R/lib" || exit 1
cp "$VOUCH_PLUGINS/slow_path_pct0.so" "$R/lib/path.so"
git -C "$R" add -A && git -C "$R" commit -qm base && git -C "$R" tag base || exit 1
cp "$VOUCH_PLUGINS/slow_path_pct10.so" "$R/lib/path.so"
git -C "$R" commit -qam "slow-ref: 10% slower forward" && git -C "$R" tag slow || exit 1
cat > "$T/plan.json" <<'PJ'
{"name": "slowdown", "steps": [{"suite": "sweep", "args": ["--model", "synth:tiny", "--paths", "slow-ref",
  "--path-lib", "lib/path.so", "--batch", "1,4", "--context", "64", "--steps", "60", "--membw-bytes", "16m",
  "--threads", "1", "--no-progress"]}]}
PJ
export VOUCH_AB_PREBUILT=$VOUCH
cd "$T" || exit 1

# A/A first: the same library on both sides must give no regression; its intervals are the
# machine's noise floor for these figures
"$VOUCH" ab --repo "$R" --base base --head base --plan "$T/plan.json" --out "$T/aa" > "$T/aa.out" 2> "$T/aa.err"
rc=$?
[ $rc -eq 0 ] && ok "A/A: exit 0" || bad "A/A: exit $rc: $(grep -m3 REGRESSION "$T/aa.out")"
head -1 "$T/aa/compare.md" | grep -q '^\*\*No regression' && ok "A/A: compare.md says no regression" \
  || bad "A/A compare.md: $(head -1 "$T/aa/compare.md")"
# the widest A/A interval of a median step time, as a fraction: a 10% slowdown can be told
# apart only where the noise leaves room for it
noise=$(python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))
w = [max(m["ci95"][1] - 1, 1 - m["ci95"][0]) for m in c["metrics"] if m["metric"] == "step_ms" and m["ci95"][0] is not None]
print("%.3f" % max(w) if w else "1")' "$T/aa/compare.json")
echo "A/A noise floor of step_ms: +-${noise}"

"$VOUCH" ab --repo "$R" --base base --head slow --plan "$T/plan.json" --out "$T/slow" > "$T/slow.out" 2> "$T/slow.err"
rc=$?
grep 'slow-ref\] step_ms (median)' "$T/slow.out"
if python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) < 0.04 else 1)' "$noise"; then
  [ $rc -eq 1 ] && ok "planted 10% slowdown: exit 1" || bad "planted slowdown: exit $rc: $(tail -3 "$T/slow.err")"
  head -1 "$T/slow/compare.md" | grep -q '^\*\*REGRESSION: 0 correctness, [1-9]' && ok "compare.md first line: REGRESSION" \
    || bad "compare.md: $(head -1 "$T/slow/compare.md")"
  python3 - "$T/slow/compare.json" <<'PY' && ok "step_ms named with ratio and interval" || bad "no step_ms regression"
import json, sys
c = json.load(open(sys.argv[1]))
hits = [m for m in c["metrics"] if m["regression"] and m["metric"] == "step_ms"]
assert hits, [(m["case_id"], m["ratio"], m["ci95"], m["verdict"]) for m in c["metrics"] if m["metric"] == "step_ms"]
for m in hits:
    lo, hi = m["ci95"]
    assert m["path"] == "slow-ref" and lo > 1.05 and lo <= m["ratio"] <= hi and m["verdict"] == "slower", m
PY
else
  # too noisy to resolve 10% (a loaded machine): the slowdown must still never read as faster
  [ $rc -le 1 ] && ! grep -q 'slow-ref\] step_ms (median).* faster' "$T/slow.out" \
    && ok "machine too noisy (A/A +-$noise) to require detecting 10%; not read as faster" \
    || bad "slowdown read as faster or ab failed (exit $rc)"
fi
exit $fail
