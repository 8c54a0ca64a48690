#!/usr/bin/env bash
# One GPU session: every check and timing the H200 run needs, in one call (device time is
# scarce). Run from the repo root on the GPU machine with the CUDA build in build-cuda/ and
# its libraries in .devlibs/ (see ../shared/device/README.md). Phases: bench/gpu_session.sh
# [golden] [cudaref] [kernels] [latency] [sweep] [evals] ... ; logs and JSON go to $OUT.
set -u
# Binaries: gpu-carry/bin (stripped copies, libraries in gpu-carry/devlibs.tar.xz) when present,
# else build-cuda/ with .devlibs/.
if [ -d gpu-carry/bin ]; then
  mkdir -p /tmp/vouch-libs && tar -xJf gpu-carry/devlibs.tar.xz -C /tmp/vouch-libs
  export LD_LIBRARY_PATH=/tmp/vouch-libs/.devlibs:${LD_LIBRARY_PATH:-}
  B=gpu-carry/bin; T=gpu-carry/bin
else
  export LD_LIBRARY_PATH=$PWD/.devlibs:${LD_LIBRARY_PATH:-}
  B=build-cuda; T=build-cuda/tests
fi
export NCCL_NVLS_ENABLE=0
# The device tool returns at most 8 files: logs go to $LOGS and come back as one tarball.
FINAL=${OUT:-/tmp/out}; mkdir -p "$FINAL"
OUT=/tmp/vouch-logs; rm -rf "$OUT"; mkdir -p "$OUT"
trap 'tar -czf "$FINAL/logs.tgz" -C "$OUT" . ; cp "$OUT/summary.txt" "$FINAL/" 2>/dev/null' EXIT
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
      VOUCH_SRC=$PWD $T/test_cuda_ref > "$OUT/test_cuda_ref.log" 2>&1; note "test_cuda_ref rc=$? $(tail -1 "$OUT/test_cuda_ref.log")"
      grep -E "rows|identical" "$OUT/test_cuda_ref.log" | head -5 | tee -a "$summary" ;;
    kernels)
      $V kernels --path cuda-ref --json "$OUT/kernels_cuda.json" > "$OUT/kernels_cuda.txt" 2>&1; note "kernels cuda-ref rc=$?: $(tail -1 "$OUT/kernels_cuda.txt")"
      [ -x $T/test_cuda_kernels ] && { VOUCH_SRC=$PWD $T/test_cuda_kernels > "$OUT/test_cuda_kernels.log" 2>&1; note "test_cuda_kernels rc=$?"; } ;;
    latency)
      [ -x $T/test_latency ] && { VOUCH_SRC=$PWD $T/test_latency > "$OUT/test_latency.log" 2>&1; note "test_latency rc=$? $(tail -1 "$OUT/test_latency.log")"; }
      $V kernels --path latency > "$OUT/kernels_latency.txt" 2>&1; note "kernels latency rc=$?: $(tail -1 "$OUT/kernels_latency.txt")" ;;
    bench)
      timeout 300 $B/bench_latency --with-ref > "$OUT/bench_latency.txt" 2>&1; note "bench_latency rc=$?"
      tail -25 "$OUT/bench_latency.txt" | tee -a "$summary" ;;
    sweep-small)
      timeout 300 $V sweep --model synth:small --paths cuda-ref,latency --batch 1,8,64 --context 1k,8k --steps 30 --no-progress \
        --json "$OUT/sweep_small.json" > "$OUT/sweep_small.txt" 2>&1; note "sweep small rc=$?"; tail -20 "$OUT/sweep_small.txt" | tee -a "$summary" ;;
    sweep-k2)
      timeout 400 $V sweep --model synth:k2-slice --paths cuda-ref,latency --batch 1,8,64 --context 1k,32k --steps 30 --no-progress \
        --json "$OUT/sweep_k2.json" > "$OUT/sweep_k2.txt" 2>&1; note "sweep k2 rc=$?"; tail -20 "$OUT/sweep_k2.txt" | tee -a "$summary" ;;
    generate)
      for p in cuda-ref latency; do
        $V generate --model synth:small --path $p --tokens 1,2,3 -n 32 --batch 8 > "$OUT/gen_small_$p.txt" 2>&1; note "generate small $p rc=$?: $(tail -1 "$OUT/gen_small_$p.txt")"
      done
      diff <(grep ^seq "$OUT/gen_small_cuda-ref.txt") <(grep ^seq "$OUT/gen_small_latency.txt") > /dev/null && note "small tokens latency == cuda-ref" || note "small tokens latency != cuda-ref" ;;
    *) note "unknown phase $phase" ;;
  esac
  note "phase $phase: $(( $(date +%s) - ps )) s"
done
note "total $(( $(date +%s) - t0 )) s"
