#!/usr/bin/env bash
# The test command: installs dependencies, builds with -Werror (CUDA code compiled when nvcc
# is present, run only where a GPU is visible), runs every ctest test labelled cpu, then
# rebuilds without CUDA under AddressSanitizer + UBSan and reruns the bad-input tests there,
# then runs the fuzz targets briefly (scripts/fuzz.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
start=$(date +%s)
BUILD_DIR="$root/build" "$root/scripts/build.sh" -DVOUCH_WERROR=ON
(cd "$root/build" && ctest -L cpu --output-on-failure -j"$(nproc)")
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  (cd "$root/build" && ctest -L gpu --output-on-failure)
fi
# Left out under ASan: evals over a server (cpu-ref serving 1k-token prompts there takes over 10 minutes),
# features and diverge over a server (about 130 served decode steps per features run, 14 runs, ~65 ms a step
# in that build at -O0: 7 minutes; it passed there once, 416 s, on 2 cores) and the planted-slowdown timing
# test (timings of an instrumented build beside another test are not what it measures; it runs in the
# cpu stage), and the features / diverge kill-and-resume runs (test_resume_suites: full suite runs, ~200 s
# of the stage's 918 s in the CI of db305bc, where test_resume took 396 s; the store, kernels, eval and
# bad --resume input stay here in test_resume).
# Also left out: the served plan on a pair of vouch serve processes built with ASan (test_plan_served_ids: cpu-ref
# answering ~3800 one-token requests in that build, over 25 minutes in the CI of cf60839), the served
# plan over the llama.cpp pair (test_plan_served: 164 s here in the CI of 0a680d9, which took the CI to
# 31 minutes; each of its clients stays under ASan: test_features_text, test_diverge_text,
# test_eval_mrcr_dataset, test_eval_aime_llamacpp, test_served_launch, test_sweep; the plan itself runs
# in the cpu stage) and the served A/B's planted slowdown
# (test_sweep_ab, a timing test like test_ab_slowdown: 484 s there), and diverge's --kld-budget on a served
# pair (test_diverge_budget: three runs of two ASan-built servers, 123 s alone here; the served diverge
# client stays under ASan in test_ab_launch and test_plan_servers).
# Debug keeps the asserts; -O1 (ASan's own advice) instead of -O0 keeps cpu-ref's loops from running
# 30-50x slower than in the cpu stage (test_resume took 384 s at -O0 in the CI of 02b65f4, 181 s at -O1).
BUILD_DIR="$root/build-asan" "$root/scripts/build.sh" -DVOUCH_WERROR=ON -DVOUCH_ASAN=ON -DVOUCH_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1"
(cd "$root/build-asan" && ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$root/tests/lsan.supp ctest -L cpu -R 'safetensors|model|cli_' -E 'cli_test_resume_suites|cli_test_plan_served$|cli_test_plan_served_ids|cli_test_diverge_budget|cli_test_sweep_ab|cli_test_llamacpp|cli_test_evals_server|cli_test_features_diverge_server|cli_test_ab_slowdown' --output-on-failure -j"$(nproc)")
# The parsers' libFuzzer targets (fuzz/, clang + ASan + UBSan): every corpus input replayed,
# then VOUCH_FUZZ_SECONDS (10) of fuzzing each, two at a time; any finding fails. 10, not 15: the CI of
# c627abd took 1951 s (201 s of it fuzzing 14 targets); longer runs: scripts/fuzz.sh -t SECONDS.
"$root/scripts/fuzz.sh" -t "${VOUCH_FUZZ_SECONDS:-10}" -j 2
# The evaluation image's recipe in a clean debootstrap root (no Docker engine here): in CI, or
# when asked with VOUCH_CHECK_RECIPE=1. Needs root and the Debian mirror (~2 minutes).
if [ "${CI:-}" = true ] || [ "${VOUCH_CHECK_RECIPE:-0}" = 1 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "test.sh: image recipe check skipped: needs root"
  elif ! curl -sfI --max-time 20 "${DEBIAN_MIRROR:-http://deb.debian.org/debian}/dists/bookworm/Release" >/dev/null; then
    echo "test.sh: image recipe check SKIPPED: the Debian mirror is unreachable from here"
  else
    "$root/scripts/check-image-recipe.sh"
  fi
fi
echo "test.sh: done in $(( $(date +%s) - start )) s"
