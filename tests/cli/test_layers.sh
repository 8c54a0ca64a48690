#!/bin/bash
# The include rules of docs/architecture.md "Layers", on the source tree. The build already refuses
# an include up a layer (each layer compiles against build/include-LAYER/); this test holds the
# rules inside a layer that no include root can: runner/ (cli -> plan, evidence, serve; plan ->
# evidence), suites/ (engine, paths, served, plans at the bottom; a suite folder uses those, never
# another suite folder; evals/mrcr and evals/chain use evals/), reference/ (cpu/ and cuda/ apart).
# It first checks that it catches a planted include, so that it can fail.
set -u
[ -n "${VOUCH_SRC:-}" ] || exit 77
command -v python3 >/dev/null || { echo "python3 not available"; exit 77; }
check() {
python3 - "$1" <<'PY'
import os, re, sys
root = sys.argv[1]
rank = {"common": 0, "model": 1, "reference": 2, "kernels": 3, "suites": 4, "runner": 5}
runner_may = {"cli": {"cli", "plan", "evidence", "serve"}, "plan": {"plan", "evidence"},
              "evidence": {"evidence"}, "serve": {"serve"}}
bottom = {"engine", "paths", "served", "plans"}
bad = 0
for top in rank:
    for d, _, fs in os.walk(os.path.join(root, top)):
        for f in sorted(fs):
            if not f.endswith((".c", ".h", ".cu")):
                continue
            p = os.path.relpath(os.path.join(d, f), root)
            a = p.split("/")
            for n, line in enumerate(open(os.path.join(d, f), errors="replace"), 1):
                m = re.match(r'\s*#\s*include\s*"([^"]+)"', line)
                b = m.group(1).split("/") if m else []
                if not b or b[0] not in rank:
                    continue
                why = None
                if rank[b[0]] > rank[a[0]]:
                    why = "an include up a layer"
                elif a[0] == b[0] == "reference" and len(a) > 2 and len(b) > 2 and {a[1], b[1]} == {"cpu", "cuda"}:
                    why = "reference/cpu and reference/cuda include each other"
                elif a[0] == b[0] == "runner" and b[1] not in runner_may.get(a[1], set()):
                    why = "runner/%s may not use runner/%s" % (a[1], b[1])
                elif a[0] == b[0] == "suites" and len(a) > 2:
                    if a[1] in bottom and b[1] not in bottom:
                        why = "suites/%s is at the bottom of suites/ and may not use suites/%s" % (a[1], b[1])
                    elif a[1] not in bottom and b[1] not in bottom and b[1] != a[1]:
                        why = "suite folder suites/%s may not use suites/%s" % (a[1], b[1])
                    elif a[1] == b[1] == "evals" and len(b) > 3 and (len(a) < 4 or a[2] != b[2]):
                        why = "suites/evals/%s may not use suites/evals/%s" % ("/".join(a[2:-1]) or ".", b[2])
                if why:
                    print("%s:%d: #include \"%s\": %s" % (p, n, m.group(1), why))
                    bad += 1
sys.exit(1 if bad else 0)
PY
}
fail=0
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/suites/diverge" "$T/suites/sweep"
printf '#include "suites/sweep/sweep.h"\n' > "$T/suites/diverge/planted.c"
if check "$T" > "$T/out"; then echo "FAIL: a planted include of one suite folder by another was not caught"; fail=1
else echo "ok: the check catches a planted include ($(cat "$T/out"))"; fi
if check "$VOUCH_SRC"; then echo "ok: no include breaks the layer rules"
else echo "FAIL: the includes above break the layer rules (docs/architecture.md, Layers)"; fail=1; fi
exit $fail
