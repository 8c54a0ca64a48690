# Sourced by the CLI tests that count checks: pass / fail counters, ok / bad, a scratch directory
# $t removed at exit, expect_error. The test ends with `finish` (prints the counts; fails when any check failed).
set -u
fail=0 pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*" >&2; fail=$((fail + 1)); }
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
# expect_error CODE NEEDLE CMD...: exit code CODE and stderr containing NEEDLE, one line
expect_error() {
  local code=$1 needle=$2; shift 2
  "$@" >"$t/out" 2>"$t/err"; local rc=$?
  if [ "$rc" -ne "$code" ]; then bad "$* -> exit $rc, want $code: $(cat "$t/err")"; return; fi
  if ! grep -q -- "$needle" "$t/err"; then bad "$* -> stderr lacks '$needle': $(cat "$t/err")"; return; fi
  if [ "$(wc -l <"$t/err")" -ne 1 ]; then bad "$* -> error is not one line: $(cat "$t/err")"; return; fi
  ok
}
finish() {
  echo "${1:+$1: }$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
