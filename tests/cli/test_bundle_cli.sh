#!/bin/bash
# vouch bundle / verify / compare / report / history on fixture runs written by the
# test-only generator (tests/cpu/test_bundle.c --write).
set -u
[ -n "${VOUCH:-}" ] || { echo "VOUCH not set"; exit 77; }
"$VOUCH" bundle --help >/dev/null 2>&1 || { echo "bundle command not wired into this vouch; skipping"; exit 77; }
GEN=${VOUCH_GEN:-./test_bundle}
[ -x "$GEN" ] || GEN="$(dirname "$VOUCH")/tests/test_bundle"
[ -x "$GEN" ] || { echo "no fixture generator (test_bundle)"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export VOUCH_HISTORY_DB="$T/history.sqlite"
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
expect_rc() { local want=$1; shift; "$@" >"$T/out" 2>"$T/err"; local rc=$?; if [ "$rc" = "$want" ]; then ok "rc $rc: $*"; else bad "rc $rc (want $want): $* :: $(head -c 600 "$T/err")"; fi; }

"$GEN" --write "$T/base" base || { echo "generator failed"; exit 1; }
"$GEN" --write "$T/slow" slower || exit 1
"$GEN" --write "$T/broken" broken || exit 1

# bundle: twice, identical bytes
expect_rc 0 "$VOUCH" bundle "$T/base" --out "$T/one.vouch.tar.gz"
sleep 1
expect_rc 0 "$VOUCH" bundle "$T/base" --out "$T/two.vouch.tar.gz"
cmp -s "$T/one.vouch.tar.gz" "$T/two.vouch.tar.gz" && ok "byte-identical bundles" || bad "bundles differ"
expect_rc 0 "$VOUCH" bundle "$T/base"
[ -f "$T/base.vouch.tar.gz" ] && ok "default name NAME.vouch.tar.gz" || bad "default bundle name"
tar tzf "$T/one.vouch.tar.gz" > "$T/list"
[ "$(head -1 "$T/list")" = "base/SHA256SUMS" ] && ok "SHA256SUMS first" || bad "first member: $(head -1 "$T/list")"
for f in manifest.json results.json results.sqlite replay.sh plan.json logs/run.log traces/0000.json; do
  grep -qx "base/$f" "$T/list" && ok "member $f" || bad "member $f missing"
done
tar tvzf "$T/one.vouch.tar.gz" | grep -q -- '-rwxr-xr-x .*base/replay.sh' && ok "replay.sh is 0755" || bad "replay.sh mode"

# verify
expect_rc 0 "$VOUCH" verify "$T/one.vouch.tar.gz"
grep -q '^OK' "$T/out" && ok "verify says OK" || bad "verify output: $(cat "$T/out")"
expect_rc 0 "$VOUCH" verify --json "$T/base"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["ok"] and d["records"]==15' "$T/out" && ok "verify --json" || bad "verify --json"
mkdir "$T/x" && tar xzf "$T/one.vouch.tar.gz" -C "$T/x"
sed -i 's/"reason":\t"moe_gate: no variant for 7 experts"/"reason":\t"edited"/' "$T/x/base/results.json"
expect_rc 1 "$VOUCH" verify "$T/x/base"
grep -q 'MISMATCH results.json: SHA-256' "$T/out" && ok "edited file named" || bad "edit not reported: $(cat "$T/out")"
rm "$T/x/base/logs/run.log"
expect_rc 1 "$VOUCH" verify "$T/x/base"
grep -q 'logs/run.log: listed in SHA256SUMS but missing' "$T/out" && ok "removed file named" || bad "removal not reported"
expect_rc 2 "$VOUCH" verify "$T/nonexistent"
expect_rc 2 "$VOUCH" verify
expect_rc 0 "$VOUCH" verify --help

# compare
expect_rc 0 "$VOUCH" compare "$T/one.vouch.tar.gz" "$T/base"
grep -q '0 correctness regression(s), 0 performance regression(s)' "$T/out" && ok "self-compare clean" || bad "self compare: $(tail -2 "$T/out")"
# one run a side: timings are listed with "not enough samples", never a regression (vouch ab
# gives the rounds a timing needs; tests/cli/test_ab.sh)
expect_rc 0 "$VOUCH" compare "$T/base" "$T/slow"
grep -q 'step_us (median).*not enough samples' "$T/out" && ok "one run a side: not enough samples" || bad "timing verdict: $(grep step_us "$T/out" | head -2)"
"$VOUCH" compare "$T/base" "$T/slow" > "$T/out2"
cmp -s "$T/out" "$T/out2" && ok "compare output deterministic" || bad "compare output differs between runs"
# an incomplete candidate, and one that lacks cases, fail and say so first
mkdir -p "$T/cut" && cp -r "$T/base/." "$T/cut/"
python3 - "$T/cut/results.json" <<'PY'
import json, sys
p = sys.argv[1]; r = json.load(open(p))
r["complete"] = False; r["verdict"] = "incomplete"; r["records"] = r["records"][:5]
json.dump(r, open(p, "w"))
PY
expect_rc 1 "$VOUCH" compare "$T/base" "$T/cut" --md "$T/cut.md"
head -1 "$T/out" | grep -q '^INCOMPLETE: candidate incomplete' && ok "incomplete: first line" || bad "incomplete headline: $(head -1 "$T/out")"
grep -q 'candidate lacks 10 of the baseline.s 15 cases' "$T/out" && ok "missing cases named" || bad "missing: $(head -3 "$T/out")"
head -1 "$T/cut.md" | grep -q '^\*\*INCOMPLETE' && ok "markdown first line says INCOMPLETE" || bad "md: $(head -1 "$T/cut.md")"
# a comparison too long for a PR comment: cut at COMPARE_MD_LIMIT with a line that says so; equal
# figures are counted, not listed
for side in big-a big-b; do mkdir -p "$T/$side" && cp -r "$T/base/." "$T/$side/"; done
python3 - "$T/big-a/results.json" "$T/big-b/results.json" <<'PY'
import copy, json, sys
for k, p in enumerate(sys.argv[1:]):
    r = json.load(open(p)); recs = []
    for i in range(3000):
        for rec in r["records"][:2]:
            c = copy.deepcopy(rec); c["case_id"] = "%s-%d" % (rec["case_id"], i)
            for m in c.get("metrics", []):
                if i % 2 == 1:  # half the figures differ between the two sides
                    m["samples"] = [v * (1 + 0.001 * k) for v in m["samples"]]
                    m["value"] = m["value"] * (1 + 0.001 * k)
            recs.append(c)
    r["records"] = recs
    json.dump(r, open(p, "w"))
PY
"$VOUCH" compare "$T/big-a" "$T/big-b" --md "$T/big.md" > "$T/big.txt" 2>"$T/err"
n=$(wc -c < "$T/big.md")
[ "$n" -le 65000 ] && [ "$n" -gt 50000 ] && tail -1 "$T/big.md" | grep -q '^</details>' && ok "long comparison: $n characters of markdown, closed" \
  || bad "long comparison markdown: $n characters, last line $(tail -1 "$T/big.md")"
grep -q 'more line(s) not shown' "$T/big.md" && grep -q 'equal on both sides, not listed' "$T/big.md" && ok "cut and equal figures said" \
  || bad "long comparison: no cut line or equal count"
[ "$(wc -c < "$T/big.txt")" -gt 200000 ] && ok "the text listing keeps every figure" || bad "text listing cut"
expect_rc 1 "$VOUCH" compare --json "$T/base" "$T/broken"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); c=d["correctness"]; assert c[0]["kind"]=="regression" and d["correctness_regressions"]==1' "$T/out" \
  && ok "correctness regression listed" || bad "compare --json correctness"
expect_rc 2 "$VOUCH" compare "$T/base"
expect_rc 2 "$VOUCH" compare --threshold x "$T/base" "$T/slow"

# report
expect_rc 0 "$VOUCH" report "$T/one.vouch.tar.gz" --html "$T/r.html" --bundle-url https://example.com/b.tar.gz
[ "$(wc -c < "$T/out")" -lt 65000 ] && ok "markdown < 65000" || bad "markdown too long"
head -1 "$T/out" | grep -q '<!-- vouch-report -->' && ok "marker" || bad "marker missing"
grep -q '^| sweep | 8 |' "$T/out" && ok "counts per suite" || bad "no counts"
grep -q '<svg' "$T/r.html" && grep -q 'Tokens/s vs batch' "$T/r.html" && ok "html charts" || bad "html charts"
grep -qE '(src|href)="https?:' "$T/r.html" && bad "html not self-contained" || ok "html self-contained"

# history: every closed run was recorded; baseline lookup
expect_rc 0 "$VOUCH" history
[ "$(wc -l < "$T/out")" -ge 3 ] && ok "history lists runs" || bad "history: $(cat "$T/out")"
expect_rc 0 "$VOUCH" history --metric step_us --limit 5
grep -q 'sweep/decode' "$T/out" && ok "history --metric" || bad "history metric"
HW=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["hardware"]["key"])' "$T/base/manifest.json")
HEAD_SHA=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["subject"]["head_sha"] or "")' "$T/base/manifest.json")
# a pull request's run of the same plan (its manifest names the PR): never a baseline
GITHUB_REF=refs/pull/7/merge "$GEN" --write "$T/pr7" base || exit 1
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["subject"]["pr"] == 7' "$T/pr7/manifest.json" \
  && ok "fixture PR run" || bad "fixture PR run has no pr"
if [ -n "$HEAD_SHA" ]; then
  expect_rc 0 "$VOUCH" history baseline --plan test --hardware "$HW" --base "$HEAD_SHA"
  got=$(cat "$T/out")
  [ -e "$got" ] && [ "${got#"$T/pr7"}" = "$got" ] && ok "baseline is not the PR run: $got" || bad "baseline path: $got"
  grep -q 'skipped 1 pull-request run' "$T/err" && grep -q 'its head is the base commit' "$T/err" \
    && ok "baseline says why" || bad "why: $(cat "$T/err")"
  # a base commit the runs are not ancestors of: nothing qualifies, and it says so
  expect_rc 1 "$VOUCH" history baseline --plan test --hardware "$HW" --base 0123456789abcdef0123456789abcdef01234567
  grep -q 'no baseline' "$T/err" && ok "no baseline for an unrelated base" || bad "unrelated base: $(cat "$T/err")"
fi
expect_rc 1 "$VOUCH" history baseline --plan nope --hardware "$HW"
exit $fail
