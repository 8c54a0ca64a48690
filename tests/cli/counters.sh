# Sourced by the CLI tests that count checks: pass / fail counters, ok / bad, a scratch directory
# $t removed at exit. The test ends with `finish` (prints the counts; fails when any check failed).
set -u
fail=0 pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*" >&2; fail=$((fail + 1)); }
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
finish() {
  echo "${1:+$1: }$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
