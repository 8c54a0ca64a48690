#!/bin/bash
# vouch ab finds a planted 10% slowdown and stays quiet on A/A. A tiny git repository holds a
# --path-lib library (tests/plugins/slow_path.c: "slow-ref" = cpu-ref whose forward takes
# SLOW_PCT% longer): commit "base" has it built with SLOW_PCT=0, commit "slow" with
# SLOW_PCT=10 (the "code change"). The plan sweeps slow-ref with the library of the worktree
# it runs in. base vs base (A/A): exit 0, no regression; its intervals measure the noise.
# base vs slow: every step-time figure whose own interval is within +-4% of its ratio (then a
# 10% slowdown lies beyond the 5% threshold) is named a regression with its ratio and interval,
# and the run exits 1; a wider one (a loaded machine) must never read as faster. 5 rounds of 200
# steps a side: with 3 rounds of 60 the t interval of the per-round ratios was too wide to
# resolve 10% on this 2-core machine in 5 of 8 tries.
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
  "--path-lib", "lib/path.so", "--batch", "1,4", "--context", "64", "--steps", "200", "--membw-bytes", "16m",
  "--threads", "1", "--no-progress"]}]}
PJ
export VOUCH_AB_PREBUILT=$VOUCH
cd "$T" || exit 1

# A/A first: the same library on both sides must give no regression; its intervals are the
# machine's noise floor for these figures
"$VOUCH" ab --repo "$R" --base base --head base --rounds 5 --plan "$T/plan.json" --out "$T/aa" > "$T/aa.out" 2> "$T/aa.err"
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

"$VOUCH" ab --repo "$R" --base base --head slow --rounds 5 --plan "$T/plan.json" --out "$T/slow" > "$T/slow.out" 2> "$T/slow.err"
rc=$?
grep 'slow-ref\] step_ms (median)' "$T/slow.out"
# each step_ms figure: narrow enough (interval within +-4% of the ratio) to require detection?
python3 - "$T/slow/compare.json" > "$T/slow.judge" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
for m in c["metrics"]:
    if m["metric"] != "step_ms" or m["path"] != "slow-ref":
        continue
    lo, hi, r = m["ci95"][0], m["ci95"][1], m["ratio"]
    narrow = lo is not None and max(hi - r, r - lo) < 0.04
    ok = (m["regression"] and lo > 1.05 and lo <= r <= hi and m["verdict"] == "slower") if narrow \
        else m["verdict"] != "faster"
    print("%s %s %s x%.4f [%s, %s] %s" % ("ok" if ok else "bad", "narrow" if narrow else "wide", m["case_id"], r, lo, hi,
                                          m["verdict"]))
PY
cat "$T/slow.judge"
n_narrow=$(grep -c ' narrow ' "$T/slow.judge")
[ -s "$T/slow.judge" ] && ! grep -q '^bad' "$T/slow.judge" \
  && ok "planted 10% slowdown: $n_narrow of $(wc -l < "$T/slow.judge") step-time figure(s) narrow enough to require it, each named" \
  || bad "planted slowdown missed or read as faster (see above)"
if [ "$n_narrow" -gt 0 ]; then
  [ $rc -eq 1 ] && ok "planted 10% slowdown: exit 1" || bad "planted slowdown: exit $rc: $(tail -3 "$T/slow.err")"
  head -1 "$T/slow/compare.md" | grep -q '^\*\*REGRESSION: 0 correctness, [1-9]' && ok "compare.md first line: REGRESSION" \
    || bad "compare.md: $(head -1 "$T/slow/compare.md")"
else
  [ $rc -le 1 ] && ok "machine too noisy (A/A +-$noise) to require detecting 10%; not read as faster" || bad "ab failed (exit $rc)"
fi
exit $fail
