#!/bin/bash
# The planted-defect corpus (defects/*.patch, scripts/plant-defects.sh) does not rot silently:
#   - every patch still applies alone to the source tree (git apply --check), touches only the
#     latency path (kernels/), and has its line in defects/README.md; at least 16 patches;
#   - `plant-defects.sh run` on stand-in binaries (shell scripts that write a results.json as
#     `vouch run` does) writes detection.tsv with the failing record named, and says loudly,
#     exiting 1, when the unpatched control does not pass.
# No CUDA build and no plan run: ~1 s of CPU (8 python3 starts). Exits 77 outside a git checkout.
set -u
S=${VOUCH_SRC:?VOUCH_SRC is the source tree}
command -v git >/dev/null || { echo "git missing; skipping"; exit 77; }
git -C "$S" rev-parse --git-dir >/dev/null 2>&1 || { echo "$S is not a git checkout; skipping"; exit 77; }
command -v python3 >/dev/null || { echo "python3 missing; skipping"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }

n=0
for p in "$S"/defects/[0-9]*.patch; do
  [ -e "$p" ] || continue
  n=$((n + 1))
  b=$(basename "$p" .patch)
  if git -C "$S" apply --check "$p" 2>"$T/err"; then ok "$b applies"; else bad "$b does not apply: $(head -1 "$T/err")"; fi
  others=$(grep -E '^\+\+\+ ' "$p" | grep -v '^+++ b/kernels/' || true)
  [ -z "$others" ] && ok "$b touches only kernels/" || bad "$b touches more than kernels/: $others"
  grep -q "^| *${b%%-*} *|" "$S/defects/README.md" && ok "$b has a README line" || bad "$b: no line '| ${b%%-*} |' in defects/README.md"
done
[ "$n" -ge 30 ] && ok "$n patches" || bad "only $n patches (at least 30)"
bash -n "$S/scripts/plant-defects.sh" && ok "plant-defects.sh parses" || bad "plant-defects.sh: syntax"
if command -v shellcheck >/dev/null; then
  shellcheck -S warning -s bash "$S/scripts/plant-defects.sh" && ok "shellcheck plant-defects.sh" || bad "shellcheck plant-defects.sh"
fi

# run mode on stand-ins: 00-main passes, 01-x fails one check, 02-y crashes before results.json;
# two workers (--gpus 0,1; the stand-ins ignore CUDA_VISIBLE_DEVICES), rows still in defect order
mkbin() { # NAME VERDICT STATUS EXIT
  cat >"$T/bin/vouch-$1" <<STUB
#!/bin/bash
[ "\$2" = --help ] && { echo "usage: vouch run [--fail-fast]"; exit 0; }
while [ \$# -gt 0 ]; do [ "\$1" = --out ] && out=\$2; shift; done
[ "$2" = none ] && { echo "vouch run: step 3 (kernels) exited 1" >&2; exit $4; }
mkdir -p "\$out"
echo "vouch run: step 0: vouch kernels --path latency" >&2
[ "$3" = fail ] && echo "vouch run: step 0 (kernels) exited 1" >&2
cat >"\$out/results.json" <<J
{"verdict": "$2", "records": [
 {"suite": "kernels", "case_id": "linear/v6/b1", "status": "pass", "checks": [], "reason": ""},
 {"suite": "kernels", "case_id": "mla_absorbed/v3_mma/b8", "status": "$3",
  "checks": [{"name": "nmse", "ok": false}, {"name": "finite", "ok": true}], "reason": "nmse 3e-2 > 1e-4"}]}
J
exit $4
STUB
  chmod +x "$T/bin/vouch-$1"
}
mkdir -p "$T/bin"
mkbin 00-main pass pass 0
mkbin 01-x fail fail 1
mkbin 02-y none none 134
if "$S/scripts/plant-defects.sh" run "$T/bin" "$T/out" --plan smoke --gpus 0,1 >"$T/run.log" 2>&1; then ok "run (two workers): exit 0 with main passing"
else bad "run: exit $? with main passing"; cat "$T/run.log"; fi
tsv="$T/out/detection.tsv"
if [ -f "$tsv" ] && [ "$(wc -l <"$tsv")" -eq 4 ]; then ok "detection.tsv: 3 rows"; else bad "detection.tsv missing or wrong row count"; fi
row() { awk -F'\t' -v d="$1" '$1 == d' "$tsv"; }
row 01-x | grep -q $'\t1\tfail\tstep 0 (kernels) exit 1: kernels --path latency\tkernels/mla_absorbed/v3_mma/b8 \[fail\]\tnmse\tnmse 3e-2 > 1e-4\t1\t' \
  && ok "01-x named by its failing record and check" || { bad "01-x row: $(row 01-x)"; }
row 02-y | grep -q $'\t134\tno-results\tstep 3 (kernels) exit 1' && ok "02-y: crash without results" || bad "02-y row: $(row 02-y)"
grep -q 'caught 2 / 2 defects' "$T/run.log" && ok "summary counts caught" || bad "summary: $(tail -3 "$T/run.log")"
# --no-control: the defects only; into the same OUT the table keeps the earlier call's rows
if "$S/scripts/plant-defects.sh" run "$T/bin" "$T/out" --no-control --only '09-*,01-*' >"$T/run3.log" 2>&1 &&
   [ "$(wc -l <"$tsv")" -eq 4 ] && grep -q 'caught 2 / 2 defects' "$T/run3.log"; then
  ok "--no-control into the same OUT: the whole table"
else bad "--no-control, same OUT: $(tail -2 "$T/run3.log")"; fi
if "$S/scripts/plant-defects.sh" run "$T/bin" "$T/out3" --no-control --only '01-*' >"$T/run4.log" 2>&1 &&
   [ "$(wc -l <"$T/out3/detection.tsv")" -eq 2 ] && grep -q 'not run in this call' "$T/run4.log"; then
  ok "--no-control into a new OUT: the one defect, no control"
else bad "--no-control, new OUT: $(tail -2 "$T/run4.log")"; fi
# a control that fails makes the table say so and the script fail
mkbin 00-main fail fail 1
if "$S/scripts/plant-defects.sh" run "$T/bin" "$T/out2" --only none >"$T/run2.log" 2>&1; then bad "run: exit 0 with main failing"
else grep -q 'UNMODIFIED MAIN DOES NOT PASS' "$T/run2.log" && ok "failing main reported loudly" || bad "no loud main failure"; fi
exit $fail
