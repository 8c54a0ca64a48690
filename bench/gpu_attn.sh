#!/usr/bin/env bash
# The latency path's MLA decode variants against each other (v1_split on CUDA cores, v2_gemm on
# tensor cores through cuBLAS, v3_mma hand-written on tensor cores): the kernel suite's exact-input
# cases, divergence vs cuda-ref, step times over context, recall at long context. Binaries as
# bench/gpu_session.sh (gpu-carry/bin). Summary in $OUT/summary.txt. ATTN_SWEEP_BUDGET (s) trims
# the sweep.
set -u
[ -d /tmp/vouch-libs/.devlibs ] || { mkdir -p /tmp/vouch-libs && tar -xJf gpu-carry/devlibs.tar.xz -C /tmp/vouch-libs; }
export LD_LIBRARY_PATH=/tmp/vouch-libs/.devlibs:${LD_LIBRARY_PATH:-}
V=gpu-carry/bin/vouch
FINAL=${OUT:-/tmp/out}; mkdir -p "$FINAL"; L=/tmp/vouch-attn-logs; rm -rf "$L"; mkdir -p "$L"
trap 'tar -czf "$FINAL/logs-attn.tgz" -C "$L" .' EXIT
note() { echo "$*" >> "$FINAL/summary.txt"; echo "$*"; }
P=latency@attn_split,latency@attn_gemm,latency@attn_mma
timeout 120 $V kernels --path latency --op mla_absorbed > "$L/kernels_mla.txt" 2>&1
note "kernels mla_absorbed rc=$?: $(tail -1 "$L/kernels_mla.txt")"; grep -E "FAIL" "$L/kernels_mla.txt" | head -5 >> "$FINAL/summary.txt"
timeout 100 $V diverge --model synth:small --paths cuda-ref,$P --baseline cuda-ref \
  --batch 1,8 --context 0,4k --tokens 16 > "$L/diverge.txt" 2>&1
note "diverge rc=$?"; tail -17 "$L/diverge.txt" >> "$FINAL/summary.txt"
b=${ATTN_SWEEP_BUDGET:-200}
timeout $(( b + 40 )) $V sweep --model synth:k2-slice --layers 2 --paths $P --batch 1,8,64 \
  --context 1k,8k,32k,128k --steps 20 --warmup 3 --time-budget $b --no-progress --json "$L/sweep.json" > "$L/sweep.txt" 2>&1
note "sweep rc=$?"; grep -E "^ *latency|wall|not run" "$L/sweep.txt" >> "$FINAL/summary.txt"
timeout 120 $V eval mrcr --paths latency@attn_mma --bins 32k,128k --needles 2,8 --samples 1 --batch 8 --chunk 4096 \
  > "$L/mrcr.txt" 2>&1
note "mrcr attn_mma rc=$?"; grep -A8 -m1 "score" "$L/mrcr.txt" >> "$FINAL/summary.txt"
