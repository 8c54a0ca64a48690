#!/usr/bin/env bash
# One GPU session: every check and timing the H200 run needs, in one call (device time is
# scarce). Run from the repo root on the GPU machine with the CUDA build in build-cuda/ and
# its libraries in .devlibs/ (see ../shared/device/README.md). Phases: bench/gpu_session.sh
# [golden] [cudaref] [kernels] [latency] [sweep] [evals] ... ; logs and JSON go to $OUT.
set -u
export LD_LIBRARY_PATH=$PWD/.devlibs:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build-cuda
V=$B/vouch
summary="$OUT/summary.txt"
note() { echo "$*" | tee -a "$summary"; }
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv,noheader > "$OUT/gpu.txt"
for phase in "$@"; do
  ps=$(date +%s)
  case $phase in
    golden)
      (cd out/golden && while IFS=$'\t' read -r name preset seed n sets; do
        python3 ../../scripts/peers/hf_logits.py --model models/$name --tokens "$(cat models/$name/tokens.txt)" \
          --out "$OUT/$name" > "$OUT/golden_$name.log" 2>&1 || echo "hf_logits $name failed" >> "$summary"
      done < cases.tsv)
      note "golden: $(ls "$OUT"/*.f32 2>/dev/null | wc -l) files" ;;
    cudaref)
      VOUCH_SRC=$PWD $B/tests/test_cuda_ref > "$OUT/test_cuda_ref.log" 2>&1; note "test_cuda_ref rc=$? $(tail -1 "$OUT/test_cuda_ref.log")"
      grep -E "rows|identical" "$OUT/test_cuda_ref.log" | head -5 | tee -a "$summary" ;;
    kernels)
      $V kernels --path cuda-ref --json "$OUT/kernels_cuda.json" > "$OUT/kernels_cuda.txt" 2>&1; note "kernels cuda-ref rc=$?: $(tail -1 "$OUT/kernels_cuda.txt")"
      [ -x $B/tests/test_cuda_kernels ] && { VOUCH_SRC=$PWD $B/tests/test_cuda_kernels > "$OUT/test_cuda_kernels.log" 2>&1; note "test_cuda_kernels rc=$?"; } ;;
    latency)
      [ -x $B/tests/test_latency ] && { VOUCH_SRC=$PWD $B/tests/test_latency > "$OUT/test_latency.log" 2>&1; note "test_latency rc=$? $(tail -1 "$OUT/test_latency.log")"; }
      $V kernels --path latency > "$OUT/kernels_latency.txt" 2>&1; note "kernels latency rc=$?: $(tail -1 "$OUT/kernels_latency.txt")" ;;
    *) note "unknown phase $phase" ;;
  esac
  note "phase $phase: $(( $(date +%s) - ps )) s"
done
note "total $(( $(date +%s) - t0 )) s"
