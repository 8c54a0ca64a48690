#!/usr/bin/env bash
# Builds gpu-carry/, what bench/gpu_session.sh runs on the H200 machine (pass carry: ["gpu-carry"]),
# from a revision of this checkout (HEAD unless REV), on this machine (nvcc, 2 cores: about 4 minutes):
#   head/vouch, head/test_*     vouch and the tests/gpu binaries (RelWithDebInfo, sm_90a, stripped)
#   devlibs.tar.xz              the libraries the GPU machine lacks (../shared/device/pack-libs.sh)
#   defects-out.tar.xz          the planted-defect corpus (scripts/plant-defects.sh build: vouch-00-main
#                               is the same build as head/vouch, unstripped)
#   pr-catch.json               pr's diverge steps 0-5 and its kernels step 9, in pr's order: the steps
#                               that caught every defect diverge catches (docs/verdicts.md), for the
#                               `defects` phase when device time is short ("GLOBS@gpu-carry/pr-catch.json")
# usage: bench/gpu_carry.sh [REV]      (DEFECTS=GLOBS: only those patches; WORK: the build tree, /tmp/vouch-carry)
# Exit: 0 built, 1 a build failed, 2 usage.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rev=${1:-HEAD}
[ $# -le 1 ] || { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
work=${WORK:-/tmp/vouch-carry}
out=$root/gpu-carry
pack=$root/../shared/device/pack-libs.sh
[ -f "$pack" ] || { echo "gpu_carry: $pack not found" >&2; exit 1; }
t0=$(date +%s)
"$root/scripts/plant-defects.sh" build "$work/d" --base "$rev" --only "${DEFECTS:-*}"
# the tests/gpu binaries, from the same (restored, unpatched) build tree
tests=()
for src in "$root"/tests/gpu/test_*.c; do tests+=("$(basename "$src" .c)"); done
cmake --build "$work/d.work/build" -j"$(nproc)" --target "${tests[@]}" > "$work/tests-build.log" 2>&1 ||
  { echo "gpu_carry: the GPU tests did not build: $work/tests-build.log" >&2; exit 1; }
rm -rf "$out/head" && mkdir -p "$out/head"
cp "$work/d/vouch-00-main" "$out/head/vouch"
for t in "${tests[@]}"; do cp "$work/d.work/build/tests/$t" "$out/head/"; done
strip "$out/head"/*
rm -rf "$work/libs" && bash "$pack" "$out/head/vouch" "$work/libs/.devlibs" > /dev/null
tar -C "$work/libs" -cJf "$out/devlibs.tar.xz" .devlibs
cp "$work/d.tar.xz" "$out/defects-out.tar.xz"
python3 - "$root/suites/plans/pr.json" "$out/pr-catch.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
p["name"] = "pr-catch"
p["description"] = ("pr's diverge steps (0-5) and its kernels step (9), in pr's order: the steps that caught every "
                    "planted defect diverge catches (docs/verdicts.md); a defect lane's plan when device time is short")
p["steps"] = [p["steps"][i] for i in (0, 1, 2, 3, 4, 5, 9)]
assert [s["suite"] for s in p["steps"]] == ["diverge"] * 6 + ["kernels"], "pr's steps moved: update gpu_carry.sh"
json.dump(p, open(sys.argv[2], "w"), indent=2)
EOF
echo "gpu_carry: $out from $(git -C "$root" rev-parse --short "$rev") in $(( $(date +%s) - t0 )) s: $(du -sh "$out" | cut -f1)" \
  "($("$out/head/vouch" --version 2>/dev/null | head -1 || echo 'vouch --version needs the CUDA runtime here'))"
