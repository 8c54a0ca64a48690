#!/usr/bin/env bash
# Multi-GPU session (a machine with 2..8 GPUs of one host): the tensor-parallel checks and timings
# of docs/tensor-parallel.md in one call. Run from the repo root with the binaries in gpu-carry/bin
# (libraries in gpu-carry/devlibs.tar.xz) or build-cuda/ + .devlibs/, as bench/gpu_session.sh.
# Phases: tp1 (one GPU) kernels-tp generate-tp diverge-tp launch-tp sweep-tp sweep-tp-k2 ; logs go to $OUT
# (one tarball, logs.tgz) and a short summary to $OUT/summary.txt.
set -u
if [ -d gpu-carry/bin ]; then
  # extract once: a second script running beside this one must not see half-written libraries
  [ -d /tmp/vouch-libs/.devlibs ] || { mkdir -p /tmp/vouch-libs && tar -xJf gpu-carry/devlibs.tar.xz -C /tmp/vouch-libs; }
  export LD_LIBRARY_PATH=/tmp/vouch-libs/.devlibs:${LD_LIBRARY_PATH:-}
  B=gpu-carry/bin
else
  export LD_LIBRARY_PATH=$PWD/.devlibs:${LD_LIBRARY_PATH:-}
  B=build-cuda
fi
export NCCL_NVLS_ENABLE=0 # no NVLink multicast objects on the lent machines
FINAL=${OUT:-/tmp/out}; mkdir -p "$FINAL"
OUT=/tmp/vouch-tp-logs; rm -rf "$OUT"; mkdir -p "$OUT"
trap 'tar -czf "$FINAL/logs-tp.tgz" -C "$OUT" .' EXIT
V=$B/vouch
note() { echo "$*" >> "$FINAL/summary.txt"; echo "$*"; }
NG=$(nvidia-smi -L | wc -l)
TPS=""; for n in 2 4 8; do [ "$n" -le "$NG" ] && TPS="$TPS $n"; done
MAXTP=${TPS##* }
note "GPUs: $NG ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)); TP degrees:$TPS"
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
t0=$(date +%s)
for phase in "$@"; do
  ps=$(date +%s)
  case $phase in
    tp1)
      # what one GPU shows: the oneshot barrier with R ranks as streams of one GPU, the comm ops
      # at one rank, and latency through the TP code path (TP 1) in each reduce mode
      [ -x $B/test_latency_tp ] && { timeout 120 $B/test_latency_tp > "$OUT/test_latency_tp.log" 2>&1; note "test_latency_tp rc=$? $(tail -1 "$OUT/test_latency_tp.log")"; }
      timeout 180 $V kernels --tp 1 > "$OUT/kernels_tp1.txt" 2>&1; note "kernels --tp 1 rc=$?: $(tail -1 "$OUT/kernels_tp1.txt")"
      for p in latency latency:tp1 latency:tp1@tp_oneshot latency:tp1@tp_nccl latency:tp1@tp_rsag cuda-ref cuda-ref:tp1; do
        timeout 120 $V generate --model synth:small --path "$p" --tokens 1,2,3 -n 32 --batch 8 > "$OUT/gen1_$p.txt" 2>&1
        rc=$?
        diff <(grep ^seq "$OUT/gen1_latency.txt") <(grep ^seq "$OUT/gen1_$p.txt") > /dev/null && same="== latency" || same="DIFFERS from latency"
        note "generate small $p rc=$rc: tokens $same; $(tail -1 "$OUT/gen1_$p.txt")"
      done
      timeout 200 $V sweep --model synth:small --paths latency,latency:tp1@tp_oneshot,latency:tp1@tp_nccl,latency:tp1@tp_rsag \
        --batch 1,8,64 --context 1k --steps 30 --no-progress > "$OUT/sweep_tp1.txt" 2>&1
      note "sweep small latency vs TP1 modes rc=$?"; grep -E "^ *latency" "$OUT/sweep_tp1.txt" >> "$FINAL/summary.txt" ;;
    kernels-tp)
      for n in $TPS; do
        timeout 400 $V kernels --tp "$n" --json "$OUT/kernels_tp$n.json" > "$OUT/kernels_tp$n.txt" 2>&1
        note "kernels --tp $n rc=$?: $(tail -1 "$OUT/kernels_tp$n.txt")"
        grep -E "FAIL" "$OUT/kernels_tp$n.txt" | head -5 >> "$FINAL/summary.txt"
      done ;;
    generate-tp)
      # same greedy tokens on every TP degree and reduce mode (small: 16 heads divide 2..8)
      for p in cuda-ref latency $(for n in $TPS; do echo latency:tp$n cuda-ref:tp$n; done) \
               latency:tp$MAXTP@tp_nccl latency:tp$MAXTP@tp_rsag latency:tp$MAXTP@tp_oneshot \
               latency:tp$MAXTP@tp_split_in; do
        timeout 120 $V generate --model synth:small --path "$p" --tokens 1,2,3 -n 32 --batch 8 > "$OUT/gen_$p.txt" 2>&1
        rc=$?
        if diff <(grep ^seq "$OUT/gen_latency.txt") <(grep ^seq "$OUT/gen_$p.txt") > /dev/null; then same="== latency";
        elif diff <(grep ^seq "$OUT/gen_cuda-ref.txt") <(grep ^seq "$OUT/gen_$p.txt") > /dev/null; then same="== cuda-ref";
        else same="differs from latency and cuda-ref"; fi
        note "generate small $p rc=$rc: tokens $same; $(tail -1 "$OUT/gen_$p.txt")"
      done ;;
    diverge-tp)
      paths="cuda-ref,latency,latency:tp1,latency:tp1@tp_rsag"; for n in $TPS; do paths="$paths,latency:tp$n,cuda-ref:tp$n"; done
      timeout 240 $V diverge --model synth:small --paths "$paths" --baseline cuda-ref --batch 1,8 --context 0,4k --tokens 16 \
        --json "$OUT/diverge_tp.json" > "$OUT/diverge_tp.txt" 2>&1
      note "diverge small TP rc=$?"; tail -30 "$OUT/diverge_tp.txt" >> "$FINAL/summary.txt" ;;
    launch-tp)
      # one process per GPU, as srun / torchrun start them: rank and size from the environment,
      # the NCCL id through a file; rank 0 prints the tokens
      rm -f /tmp/vouch-nccl-id
      for r in 0 1; do
        RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r VOUCH_NCCL_ID_FILE=/tmp/vouch-nccl-id timeout 120 \
          $V generate --model synth:small --path latency --tp 2 --tokens 1,2,3 -n 32 --batch 8 > "$OUT/launch_rank$r.txt" 2>&1 &
      done
      wait
      diff <(grep ^seq "$OUT/gen_latency:tp2.txt") <(grep ^seq "$OUT/launch_rank0.txt") > /dev/null \
        && note "launch 2 processes (latency tp2): rank 0 tokens == one-process latency:tp2" \
        || note "launch 2 processes (latency tp2): tokens DIFFER or failed: $(tail -2 "$OUT/launch_rank0.txt" | tr '\n' ' ')" ;;
    sweep-tp)
      # the reduce modes against each other and TP 1, small (fits many paths at once)
      paths="latency,latency:tp1"; for n in $TPS; do paths="$paths,cuda-ref:tp$n,latency:tp$n@tp_oneshot,latency:tp$n@tp_nccl,latency:tp$n@tp_rsag"; done
      timeout 300 $V sweep --model synth:small --paths "$paths" --batch 1,8,64 --context 1k --steps 30 --no-progress \
        --json "$OUT/sweep_tp_small.json" > "$OUT/sweep_tp_small.txt" 2>&1
      note "sweep small TP rc=$?"; grep -E "^ *(latency|cuda-ref)" "$OUT/sweep_tp_small.txt" | head -80 >> "$FINAL/summary.txt" ;;
    sweep-tp-k2)
      # k2-slice at the largest TP: cuda-ref vs latency (replicated input projections, and split), spec off
      # and K=7/AL=6, ctx 1k and 32k
      # (SWEEP_K2_BATCH / SWEEP_K2_BUDGET trim the grid when the call has less time)
      timeout $(( ${SWEEP_K2_BUDGET:-400} + 60 )) $V sweep --model synth:k2-slice \
        --paths cuda-ref:tp$MAXTP,latency:tp$MAXTP,latency:tp$MAXTP@tp_split_in \
        --batch ${SWEEP_K2_BATCH:-1,2,4,8,16,32,64} --context 1k,32k --steps 20 --time-budget ${SWEEP_K2_BUDGET:-400} \
        --no-progress --json "$OUT/sweep_tp_k2.json" > "$OUT/sweep_tp_k2.txt" 2>&1
      note "sweep k2-slice TP$MAXTP rc=$?"; grep -E "^ *(latency|cuda-ref)|not run" "$OUT/sweep_tp_k2.txt" | head -40 >> "$FINAL/summary.txt"
      timeout $(( ${SWEEP_K2_BUDGET:-200} / 2 + 60 )) $V sweep --model synth:k2-slice --paths cuda-ref:tp$MAXTP,latency:tp$MAXTP \
        --batch 1,8,64 --context 1k,32k --spec K=7,AL=6 --steps 20 --time-budget $(( ${SWEEP_K2_BUDGET:-200} / 2 )) --no-progress --json "$OUT/sweep_tp_k2_spec.json" > "$OUT/sweep_tp_k2_spec.txt" 2>&1
      note "sweep k2-slice TP$MAXTP spec K=7 AL=6 rc=$?"; grep -E "^ *(latency|cuda-ref)|not run" "$OUT/sweep_tp_k2_spec.txt" | head -20 >> "$FINAL/summary.txt" ;;
    *) note "unknown phase $phase" ;;
  esac
  note "phase $phase: $(( $(date +%s) - ps )) s"
done
note "total $(( $(date +%s) - t0 )) s"
