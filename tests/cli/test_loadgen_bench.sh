#!/usr/bin/env bash
# The served load generator against bench/loadgen_bench.c's null server at a small rate: the sweep's
# --send-times file is written, the achieved rate keeps up with the schedule (a loose 0.95, so that a
# loaded CI machine cannot fail it; the figures themselves come from the bench, docs/serving.md), and
# the Kolmogorov-Smirnov p-value of the Poisson gaps is reported (not judged here).
set -euo pipefail
bench="$VOUCH_BUILD/loadgen_bench"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; echo "--- bench output"; cat "$tmp/out" || true; exit 1; }

"$bench" --vouch "$VOUCH" --rates 100 --modes poisson,const --seconds 2 --min-ratio 0.95 --min-ks-p 0 --keep "$tmp/run" \
  >"$tmp/out" 2>&1 || fail "loadgen_bench exit $?"
grep -q '^start-up run' "$tmp/out" || fail "no start-up line"
# a poisson row: the ratio column (7th) and a numeric KS p (11th)
awk '$1 == 100 && $2 == "poisson" { ok = ($7 >= 0.95 && $11 ~ /^[0-9.]+$/ && $11 >= 0 && $11 <= 1) } END { exit !ok }' \
  "$tmp/out" || fail "poisson row: ratio < 0.95 or no KS p"
awk '$1 == 100 && $2 == "const" { ok = ($7 >= 0.95) } END { exit !ok }' "$tmp/out" || fail "const row: ratio < 0.95"
# the send times: one line per request (200 at 100/s for 2 s), due and sent times from 0 on
lines=$(wc -l <"$tmp/run/sends.tsv")
[ "$lines" -eq 200 ] || fail "sends.tsv has $lines lines, want 200"
awk 'NF != 4 || $3 < 0 || $4 < 0 { exit 1 }' "$tmp/run/sends.tsv" || fail "malformed sends.tsv line"
# an unwritable --send-times is an error before anything is sent
if "$VOUCH" sweep --server http://127.0.0.1:1 --send-times /nonexistent/x.tsv >"$tmp/e" 2>&1; then fail "bad --send-times accepted"; fi
grep -q -- '--send-times /nonexistent/x.tsv: cannot open' "$tmp/e" || fail "no --send-times error: $(cat "$tmp/e")"
echo "loadgen_bench: ok"
