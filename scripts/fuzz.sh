#!/usr/bin/env bash
# Builds vouch's libFuzzer targets (fuzz/fuzz_*.c; clang, ASan + UBSan, VOUCH_FUZZ=ON) in
# build-fuzz/, replays every corpus input once (the seeds and the regression inputs of fixed
# findings), then fuzzes each target for SECONDS, JOBS targets at a time, and prints one line per
# target: executions, coverage (edges, features), corpus size, findings. Exit 1 on any finding.
#
#   scripts/fuzz.sh                 # the long local run: 3600 s per target
#   scripts/fuzz.sh -t 15 -j 2      # what scripts/test.sh runs in CI
#   scripts/fuzz.sh -t 600 fuzz_config fuzz_bundle
#
# Corpora: fuzz/corpus/<target>/ (in git: seeds from real vouch outputs, regress-* inputs) is read;
# new inputs go to build-fuzz/corpus/<target>/; a crashing input is kept in
# build-fuzz/findings/<target>/ (add it to fuzz/corpus/<target>/ as regress-* once fixed).
# Environment: BUILD_DIR (default build-fuzz), CC (default clang), FUZZ_NICE (default 0).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=3600
jobs=$(nproc)
while getopts "t:j:h" o; do
  case $o in
    t) secs=$OPTARG ;;
    j) jobs=$OPTARG ;;
    *) sed -n '2,16p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
bd=${BUILD_DIR:-$root/build-fuzz}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$root"/fuzz/fuzz_*.c; do
    t=$(basename "$f" .c)
    [ "$t" = fuzz_util ] || targets+=("$t")
  done
fi
cc=${CC:-clang}
command -v "$cc" >/dev/null || { echo "fuzz.sh: $cc not found (apt-get install clang libclang-rt-dev libomp-dev)"; exit 2; }
start=$(date +%s)
cmake -S "$root" -B "$bd" -DCMAKE_C_COMPILER="$cc" -DVOUCH_FUZZ=ON -DVOUCH_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
nice cmake --build "$bd" -j"$(nproc)" --target "${targets[@]}" >"$bd/fuzz-build.log" 2>&1 ||
  { tail -30 "$bd/fuzz-build.log"; echo "fuzz.sh: build failed"; exit 2; }
built=$(date +%s)
mkdir -p "$bd/logs"
echo "fuzz.sh: built ${#targets[@]} targets in $((built - start)) s; ${secs} s each, $jobs at a time"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/tests/lsan.supp}
# The bundle target extracts up to 1 MB archives (a gzip bomb of 64 KB is refused by rss_limit)
max_len() { case $1 in fuzz_bundle | fuzz_safetensors) echo 65536 ;; *) echo 32768 ;; esac; }

run_one() {
  local t=$1 bin="$bd/fuzz/$1" seeds="$root/fuzz/corpus/$1" work="$bd/corpus/$1" found="$bd/findings/$1"
  local log="$bd/logs/$t.log"
  mkdir -p "$work" "$found"
  # 1. every corpus input once: the seeds and the regression inputs must pass
  local inputs=()
  [ -d "$seeds" ] && while IFS= read -r f; do inputs+=("$f"); done < <(find "$seeds" -type f | sort)
  if [ ${#inputs[@]} -gt 0 ] && ! "$bin" -runs=1 "${inputs[@]}" >"$log.replay" 2>&1; then
    echo "$t: FINDING replaying the corpus (see $log.replay)"; tail -20 "$log.replay"; return 1
  fi
  # 2. fuzz for secs seconds
  local rc=0
  nice -n "${FUZZ_NICE:-0}" "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len="$(max_len "$t")" \
    -print_final_stats=1 -artifact_prefix="$found/" "$work" "$seeds" >"$log" 2>&1 || rc=$?
  local execs cov ft
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  local nfind
  nfind=$(find "$found" -type f | wc -l)
  printf '%-22s %6ss  execs %10s  cov %6s  ft %6s  corpus %5s  findings %s\n' "$t" "$secs" "${execs:-?}" "${cov:-?}" \
    "${ft:-?}" "$(find "$work" -type f | wc -l)" "$nfind"
  if [ $rc -ne 0 ] || [ "$nfind" -gt 0 ]; then
    echo "$t: FINDING (exit $rc): $(grep -m1 -E 'ERROR|runtime error|property violated|Timeout|out-of-memory' "$log" || true)"
    echo "  input(s): $(find "$found" -type f | tr '\n' ' ')   log: $log"
    return 1
  fi
}

rm -f "$bd"/logs/*.status
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 1; done
  ( rc=0; run_one "$t" || rc=1; echo $rc >"$bd/logs/$t.status" ) &
done
wait
fail=0
for t in "${targets[@]}"; do
  [ "$(cat "$bd/logs/$t.status" 2>/dev/null)" = 0 ] || fail=1
done
echo "fuzz.sh: ${#targets[@]} targets, $(( $(date +%s) - start )) s in all; $([ $fail -eq 0 ] && echo 'no findings' || echo 'FINDINGS')"
exit $fail
