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
expect_rc 1 "$VOUCH" compare "$T/base" "$T/slow"
grep -q 'slower .*REGRESSION' "$T/out" && ok "slower path flagged" || bad "no regression line"
"$VOUCH" compare "$T/base" "$T/slow" > "$T/out2"
cmp -s "$T/out" "$T/out2" && ok "compare output deterministic" || bad "compare output differs between runs"
expect_rc 0 "$VOUCH" compare --threshold 0.5 "$T/base" "$T/slow"
expect_rc 1 "$VOUCH" compare --json "$T/base" "$T/broken"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); c=d["correctness"]; assert c[0]["kind"]=="regression" and d["correctness_regressions"]==1' "$T/out" \
  && ok "correctness regression listed" || bad "compare --json correctness"
expect_rc 2 "$VOUCH" compare "$T/base"
expect_rc 2 "$VOUCH" compare --threshold x "$T/base" "$T/slow"

# report
expect_rc 0 "$VOUCH" report "$T/one.vouch.tar.gz" --html "$T/r.html" --bundle-url https://example.com/b.tar.gz
[ "$(wc -c < "$T/out")" -lt 65000 ] && ok "markdown < 65000" || bad "markdown too long"
head -1 "$T/out" | grep -q '<!-- vouch-report -->' && ok "marker" || bad "marker missing"
grep -q '<details><summary>sweep' "$T/out" && ok "details block" || bad "no details"
grep -q '<svg' "$T/r.html" && grep -q 'tokens_per_s (tok/s) vs batch' "$T/r.html" && ok "html charts" || bad "html charts"
grep -qE '(src|href)="https?:' "$T/r.html" && bad "html not self-contained" || ok "html self-contained"

# history: every closed run was recorded; baseline lookup
expect_rc 0 "$VOUCH" history
[ "$(wc -l < "$T/out")" -ge 3 ] && ok "history lists runs" || bad "history: $(cat "$T/out")"
expect_rc 0 "$VOUCH" history --metric step_us --limit 5
grep -q 'sweep/decode' "$T/out" && ok "history --metric" || bad "history metric"
HW=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["hardware"]["key"])' "$T/base/manifest.json")
expect_rc 0 "$VOUCH" history baseline --plan test --hardware "$HW" --base 0123456789abcdef0123456789abcdef01234567
[ -e "$(cat "$T/out")" ] && ok "baseline path exists: $(cat "$T/out")" || bad "baseline path"
expect_rc 1 "$VOUCH" history baseline --plan nope --hardware "$HW"
exit $fail
