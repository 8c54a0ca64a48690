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
# sharded_tokens LABEL SAYS ARGS...: `vouch generate` of the sharded tests' prompt with ARGS exits 0,
# prints the tokens in $ref (the unsharded run's seq lines) and a line equal to SAYS
sharded_tokens() {
  local label=$1 says=$2; shift 2
  local out rc got
  out=$("$VOUCH" generate --model synth:tiny --seed 5 --tokens 5,6,7 -n 8 --batch 2 "$@" 2>"$t/err")
  rc=$?
  [ "$rc" -eq 0 ] && ok || bad "$label exit $rc: $(cat "$t/err")"
  got=$(printf '%s\n' "$out" | grep '^seq')
  [ "$got" = "$ref" ] && ok || bad "$label tokens '$got' != unsharded '$ref'"
  printf '%s\n' "$out" | grep -qx "$says" && ok || bad "$label: output does not say '$says'"
}
finish() {
  echo "${1:+$1: }$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
