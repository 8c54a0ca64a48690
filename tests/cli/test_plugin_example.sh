#!/bin/bash
# The plugin SDK as a contributor uses it (docs/plugins.md), with the page's own commands: every
# block of docs/plugins.md marked <!-- test:NAME --> runs here as written, in a scratch directory
# where `build` is this build tree and HOME is empty (the page installs to $HOME/.local/vouch).
#   - build-example: the SDK installs, the example (examples/plugin/example_path.c) builds against
#     the installed headers alone, linking nothing of vouch's;
#   - diverge: the example matches cpu-ref (exit 0, every row "pass"), also as example:tp2:dcp and
#     example:tp2:ep (TP, dcp and ep from its declaration);
#   - run: `vouch run --path-lib` with examples/plugin/plan.json passes with the example's records in
#     diverge, eval mrcr, eval chain, features and sweep, the bundle verifies, and the manifest holds
#     the library's sha256 (compared with sha256sum);
#   - build-bug: the planted bug (logits shifted by one token id) fails diverge (exit 1, FAIL rows)
#     and fails the plan (--fail-fast: exit 1, verdict fail, the diverge records named);
#   - faults (tests/plugins/faults/bad_path.c, built with the page's cc line): each bad library gets
#     one line naming the file and the field, exit 2, or its own error text arrives in the message.
# Exits 77 without a C compiler or the build tree.
set -u
[ -n "${VOUCH:-}" ] && [ -n "${VOUCH_SRC:-}" ] || exit 77
[ -d "${VOUCH_BUILD:-}" ] || { echo "VOUCH_BUILD is not a build tree; skipping"; exit 77; }
CC=${CC:-cc}
command -v "$CC" >/dev/null || { echo "no C compiler '$CC'; skipping"; exit 77; }
command -v python3 >/dev/null || { echo "python3 missing; skipping"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export VOUCH_HISTORY_DB=off HOME="$T" PREFIX="$T/.local/vouch" # the page exports PREFIX=$HOME/.local/vouch
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
DOC="$VOUCH_SRC/docs/plugins.md"

# The first ```sh block after the marker <!-- test:NAME, as written in the page.
doc_block() {
  awk -v m="<!-- test:$1 " 'index($0, m) { on = 1; next } on && /^ *```sh/ { inb = 1; next }
    inb && /^ *```/ { exit } inb { sub(/^   /, ""); print }' "$DOC"
}
run_block() {
  local name=$1 out=$2
  local b
  b=$(doc_block "$name")
  [ -n "$b" ] || { bad "docs/plugins.md has no block <!-- test:$name"; return 99; }
  (cd "$T" && bash -euo pipefail -c "$b") > "$T/$out.out" 2> "$T/$out.err"
}

ln -s "$VOUCH_BUILD" "$T/build"

# --- build-example: install the SDK, build the example as the page says
run_block build-example build
rc=$?
[ $rc -eq 0 ] && [ -f "$T/example.so" ] && ok "build-example: the SDK installs and example.so builds" \
  || bad "build-example: exit $rc: $(tail -3 "$T/build.err")"
[ -f "$PREFIX/include/vouch/suites/paths/plugin.h" ] && ok "installed: include/vouch/suites/paths/plugin.h" || bad "no installed plugin.h"
if command -v nm >/dev/null && [ -f "$T/example.so" ]; then
  n_def=$(nm -D --defined-only "$T/example.so" | grep -c -E ' (verr_set|cpu_ref_ops|vtrace_ran)$')
  [ "$n_def" -eq 0 ] && ok "example.so defines none of vouch's functions (they come from the binary)" \
    || bad "example.so carries vouch's functions"
fi
cp "$T/example.so" "$T/example-good.so" 2>/dev/null

# --- diverge: the example is cpu-ref behind a plugin: it must match
run_block diverge diverge
rc=$?
[ $rc -eq 0 ] && ok "diverge: exit 0" || bad "diverge: exit $rc: $(tail -3 "$T/diverge.err")"
n_pass=$(grep -c '^example .* pass$' "$T/diverge.out")
[ "$n_pass" -eq 4 ] && ! grep -q FAIL "$T/diverge.out" && ok "diverge: 4 example rows pass" \
  || bad "diverge: $n_pass passing example rows: $(cat "$T/diverge.out")"

# the example declares cpu-ref's capabilities (caps: threads TP, dcp, ep): vouch runs its TP wrapper on it
(cd "$T" && build/vouch diverge --path-lib ./example.so --paths cpu-ref,example:tp2:dcp,example:tp2:ep --batch 2 \
  --context 32 --tokens 4) > "$T/tp.out" 2> "$T/tp.err"
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c -E '^example:tp2:(dcp|ep) .* pass$' "$T/tp.out")" -eq 2 ] \
  && ok "declared capabilities: example:tp2:dcp and example:tp2:ep run and match cpu-ref" \
  || bad "example under TP: exit $rc: $(cat "$T/tp.out" "$T/tp.err")"

# --- run: the plan with --path-lib, a bundle that verifies, the library's sha256 in the manifest
run_block run run
rc=$?
[ $rc -eq 0 ] && ok "run + verify: exit 0" || bad "run + verify: exit $rc: $(tail -5 "$T/run.err")"
grep -q '^verdict: pass' "$T/run.out" && ok "run: verdict pass" || bad "run: $(grep verdict "$T/run.out")"
grep -q '^OK: ' "$T/run.out" && ok "verify: OK" || bad "verify did not say OK: $(tail -2 "$T/run.out")"
want=$(sha256sum "$T/example.so" | cut -d' ' -f1)
python3 - "$T/out/example" "$want" "$VOUCH_SRC" <<'PY' && ok "manifest path_libs (schema-valid) and the example's records in every suite" \
  || bad "manifest or records"
import json, sys
d, want = sys.argv[1], sys.argv[2]
m = json.load(open(d + "/manifest.json"))
libs = m.get("path_libs", [])
assert len(libs) == 1 and libs[0]["path"] == "example" and libs[0]["sha256"] == want, libs
recs = json.load(open(d + "/results.json"))["records"]
ran = {}
for r in recs:
    if r["path"] == "example":
        ran.setdefault(r["suite"], []).append((r["case_id"], r["status"]))
for suite, n in (("diverge", 4), ("evals", 3), ("features", 5), ("sweep", 2)):
    got = ran.get(suite, [])
    assert len(got) >= n and all(s == "pass" for _, s in got), (suite, got)
assert any(c.startswith("mrcr") for c, _ in ran["evals"]) and any(c.startswith("chain") for c, _ in ran["evals"]), ran["evals"]
try:
    import jsonschema
except ImportError:
    sys.exit(0)
jsonschema.Draft202012Validator(json.load(open(sys.argv[3] + "/results-schema/manifest.schema.json"))).validate(m)
PY
# by its absolute path: replay.sh (and --resume) may run from any directory
grep -q -- "--path-lib '$(realpath "$T")/example.so'" "$T/out/example/replay.sh" && ok "replay.sh passes --path-lib again, absolute" \
  || bad "replay.sh lacks --path-lib $(realpath "$T")/example.so: $(grep -o -- "--path-lib '[^']*'" "$T/out/example/replay.sh")"

# --- build-bug: the planted bug must be caught
run_block build-bug buildbug
rc=$?
[ $rc -eq 0 ] && ok "build-bug: builds" || bad "build-bug: exit $rc: $(tail -3 "$T/buildbug.err")"
run_block diverge diverge-bug
rc=$?
n_fail=$(grep -c '^example .* FAIL$' "$T/diverge-bug.out")
[ $rc -eq 1 ] && [ "$n_fail" -eq 4 ] && ok "planted bug: diverge exits 1, 4 FAIL rows" \
  || bad "planted bug: diverge exit $rc, $n_fail FAIL rows"
(cd "$T" && build/vouch run --plan "$PREFIX/share/vouch/examples/plugin/plan.json" --path-lib ./example.so --set candidate=example \
  --fail-fast --no-bundle --out out/bug) > "$T/runbug.out" 2> "$T/runbug.err"
rc=$?
[ $rc -eq 1 ] && grep -q '^verdict: fail' "$T/runbug.out" && ok "planted bug: the plan fails (exit 1, verdict fail)" \
  || bad "planted bug: run exit $rc: $(grep verdict "$T/runbug.out")"
python3 - "$T/out/bug" <<'PY' && ok "planted bug: the failing records are diverge's on example" || bad "planted bug: records"
import json, sys
recs = json.load(open(sys.argv[1] + "/results.json"))["records"]
failed = [(r["suite"], r["path"]) for r in recs if r["status"] == "fail"]
assert failed and all(f == ("diverge", "example") for f in failed), failed
PY

# --- faults: the page's cc line on tests/plugins/faults/bad_path.c
ccline=$(doc_block build-example | grep -E '^(cc|\$CC) ')
[ -n "$ccline" ] || bad "no cc line in the build-example block"
fault() { # KIND RC WANT...: build kind KIND, load it into diverge; expect exit RC (-1: any) and each WANT in the output
  local k=$1 want_rc=$2
  shift 2
  local line=${ccline/example_path.c/-DBAD_KIND=$k $VOUCH_SRC/tests/plugins/faults/bad_path.c}
  line=${line/-o example.so/-o bad$k.so}
  (cd "$T" && bash -c "$line") 2> "$T/cc$k.err" || { bad "fault $k: does not build: $(head -2 "$T/cc$k.err")"; return; }
  (cd "$T" && build/vouch diverge --path-lib ./bad$k.so --paths cpu-ref,buggy --tokens 2) > "$T/f$k.out" 2> "$T/f$k.err"
  local rc=$? e
  e=$(cat "$T/f$k.err" "$T/f$k.out" | grep -v '^$')
  for w in "$@"; do
    case "$e" in *"$w"*) ;; *) bad "fault $k: no '$w' in: $e"; return ;; esac
  done
  { [ "$want_rc" -lt 0 ] || [ "$rc" -eq "$want_rc" ]; } && ok "fault $k: exit $rc: $(echo "$e" | grep -m1 -F "$1")" \
    || bad "fault $k: exit $rc (want $want_rc): $e"
}
fault 2 2 "./bad2.so: symbol 'vouch_path_abi' not found"
fault 3 2 "./bad3.so: vouch_path_abi is 43, this vouch's is 2 (it loads 1..2)"
fault 4 2 "./bad4.so: vouch_path_ops.caps.tp = 7"
fault 5 2 "./bad5.so: the library carries its own copy of vouch"
fault 7 2 "./bad7.so: vouch_path_ops.name 'cpu-ref' is already a path"
fault 8 2 "./bad8.so: vouch_path_ops.caps.ep needs caps.tp"
# a library's own error text arrives (one error state): at open, and from forward; a compared path that
# fails is an error of the check (exit 1), never "not supported"
fault 1 1 "path buggy: bad_path.c: open refused on purpose (kind 1)" "error:"
fault 6 1 "bad_path.c: forward of a 1-sequence step failed on purpose" "error:"
(cd "$T" && build/vouch generate --path-lib ./bad1.so --path buggy --tokens 1,2 -n 2) > /dev/null 2> "$T/g1.err"
rc=$?
[ $rc -ne 0 ] && grep -q '^vouch generate: error: path buggy: bad_path.c: open refused on purpose' "$T/g1.err" \
  && ok "generate: exit $rc, the library's message arrives with its text" || bad "generate: exit $rc: $(cat "$T/g1.err")"
(cd "$T" && build/vouch diverge --path-lib ./missing.so --paths cpu-ref,buggy) > /dev/null 2> "$T/m.err"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l < "$T/m.err")" -eq 1 ] && grep -q 'missing.so: cannot load path library' "$T/m.err" \
  && ok "a missing file: one line, exit 2" || bad "missing file: exit $rc: $(cat "$T/m.err")"
echo "not a library" > "$T/junk.so"
(cd "$T" && build/vouch run --path-lib junk.so --plan "$PREFIX/share/vouch/examples/plugin/plan.json" --set candidate=x) > /dev/null 2> "$T/j.err"
rc=$?
[ $rc -eq 2 ] && grep -q '^vouch run: error: junk.so: cannot load path library' "$T/j.err" \
  && ok "run --path-lib on a file that is not a library: one line, exit 2" || bad "junk: exit $rc: $(cat "$T/j.err")"

exit $fail
