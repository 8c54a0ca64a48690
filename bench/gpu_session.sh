#!/usr/bin/env bash
# One GPU session: every check and timing the H200 run needs, in one call (device time is
# scarce). Run from the repo root on the GPU machine with the CUDA build in build-cuda/ and
# its libraries in .devlibs/ (see ../shared/device/README.md). Phases: bench/gpu_session.sh
# [plans] [resume] [runbg] [gputests] [golden] [cudaref] [kernels] [latency] [gemm] [sweep] [evals]
# [prsteps] [served] ... ; logs and JSON go to $OUT.
set -u
# Binaries: $GPU_BIN (default gpu-carry/head: stripped copies of vouch and the GPU tests, libraries in
# gpu-carry/devlibs.tar.xz; bench/gpu_carry.sh builds all of gpu-carry/ from HEAD) when present, else build-cuda/ with .devlibs/. A second directory
# (GPU_BIN=gpu-carry/bin) lets one carry hold the build that started a run to resume and a newer one.
GPU_BIN=${GPU_BIN:-gpu-carry/head}
if [ -d "$GPU_BIN" ]; then
  # extract once: a second script running beside this one must not see half-written libraries
  [ -d /tmp/vouch-libs/.devlibs ] || { mkdir -p /tmp/vouch-libs && tar -xJf gpu-carry/devlibs.tar.xz -C /tmp/vouch-libs; }
  export LD_LIBRARY_PATH=/tmp/vouch-libs/.devlibs:${LD_LIBRARY_PATH:-}
  B=$GPU_BIN; T=$GPU_BIN
else
  export LD_LIBRARY_PATH=$PWD/.devlibs:${LD_LIBRARY_PATH:-}
  B=build-cuda; T=build-cuda/tests
fi
export NCCL_NVLS_ENABLE=0
# The device tool returns at most 8 files: logs go to $LOGS and come back as one tarball.
FINAL=${OUT:-/tmp/out}; mkdir -p "$FINAL"
OUT=/tmp/vouch-logs; rm -rf "$OUT"; mkdir -p "$OUT"
trap 'tar -czf "$FINAL/logs.tgz" -C "$OUT" .' EXIT
V=$B/vouch
summary="$OUT/summary.txt"
note() { echo "$*" | tee -a "$summary" "$FINAL/summary.txt"; }
# sweep-full / sweep-hf-k2 time keeping: phase deadline $dl (epoch s); lim MAX RESERVE = seconds a step
# may take: at most MAX, leaving RESERVE for the steps after it (at least 10)
left() { echo $(( dl - $(date +%s) )); }
lim() { local l=$(( $(left) - $2 )); [ "$l" -gt "$1" ] && l=$1; [ "$l" -lt 10 ] && l=10; echo "$l"; }
# sweep_step NAME BUDGET_S GRACE_S ARGS..: vouch sweep with --time-budget BUDGET (no point starts later) and
# a hard timeout GRACE later (the point in flight, the tables); log $OUT/NAME.txt, JSON $OUT/NAME.json
sweep_step() {
  local name=$1 l=$2 g=$3; shift 3
  timeout $(( l + g )) $V sweep "$@" --time-budget "$l" --no-progress --json "$OUT/$name.json" > "$OUT/$name.txt" 2>&1
  local rc=$?
  note "$name rc=$rc: $(grep -c 'not run: time budget' "$OUT/$name.txt") points cut by the time budget; $(grep -m1 '^agreement:' "$OUT/$name.txt")"
  note "$name: $(tail -1 "$OUT/$name.txt")"
}
# gpu_test NAME [TIMEOUT_S]: the GPU test $T/NAME when it was built, log $OUT/NAME.log, rc and last line noted
gpu_test() {
  [ -x "$T/$1" ] || return 0
  VOUCH_SRC=$PWD timeout "${2:-600}" "$T/$1" > "$OUT/$1.log" 2>&1
  note "$1 rc=$? $(tail -1 "$OUT/$1.log")"
}
# bench_ref / bench_ctx128: bench_latency with cuda-ref at ctx 1024, and at ctx 128 (the HF peer's context)
bench_ref() {
  timeout 300 $B/bench_latency --with-ref > "$OUT/bench_latency.txt" 2>&1; note "bench_latency rc=$?"
  grep -E "^ +[0-9]+ |speed-up|bench_latency:" "$OUT/bench_latency.txt" | tee -a "$summary" "$FINAL/summary.txt"
}
bench_ctx128() {
  timeout 200 $B/bench_latency --ctx 128 > "$OUT/bench_latency_ctx128.txt" 2>&1; note "bench ctx128 rc=$?"
  grep -E "^ +[0-9]+ " "$OUT/bench_latency_ctx128.txt" | tee -a "$summary" "$FINAL/summary.txt"
}
# stamp: stdin to stdout, each line prefixed with the epoch time it arrived, to the microsecond
# (plan_summary.py times the steps from these and gives each gpumem sample to the step whose line came
# before it: whole seconds gave a step the samples of the one before it, still held in the second it
# started); bash's own clock, no process per line, '.' whatever the locale's decimal point
# (a last line without its newline, from a process cut by timeout, is stamped too)
stamp() { local l; while IFS= read -r l || [ -n "$l" ]; do printf '%s %s\n' "${EPOCHREALTIME/[^0-9]/.}" "$l"; done; }
export -f stamp # the detached runbg run stamps its own log
# verdict_of LOG: the last "verdict: ..." line of a stamped vouch run log, without its stamp
verdict_of() { grep -E '^[0-9.]+ verdict: [a-z]+ \(' "$1" | tail -1 | cut -d' ' -f2-; }
# run_files DIR: DIR's name, then DIR.mem (gpumem's samples) and DIR.log (its stamped log) where they
# exist: what goes back with a run, one per line
run_files() { local x; basename "$1"; for x in mem log; do [ -f "$1.$x" ] && echo "$(basename "$1").$x"; done; return 0; }
# pack_run NAME DIR: a plan's run directory DIR back as $FINAL/NAME.tgz, with what lies beside it:
# DIR.log (its output, each line stamped with the epoch time) and DIR.mem (gpumem's samples); and
# plan_summary's table of it
pack_run() {
  local names; mapfile -t names < <(run_files "$2")
  tar -czf "$FINAL/$1.tgz" -C "$(dirname "$2")" "${names[@]}"; note "$1.tgz: $(du -k "$FINAL/$1.tgz" | cut -f1) KiB"
  python3 bench/plan_summary.py "$2" "$2.log" "$2.mem" 2>&1 | tee -a "$summary" "$FINAL/summary.txt"
}
# gpumem FILE PID: every GPU's memory.used (MiB, all processes: contexts included), about 3 times a
# second while PID lives, a line "EPOCH INDEX, MIB" each (EPOCH: seconds to the microsecond, one per
# nvidia-smi call, so the lines of one sample share it), appended to FILE: plan_summary.py takes each
# step's peak from it, to set beside the dry run's GPU GiB (a sample every ~0.3 s: a shorter peak is missed).
# GPU_MEM=0: no sampler (a run whose timings must not share the host with nvidia-smi's)
gpumem() {
  [ "${GPU_MEM:-1}" != 0 ] && command -v nvidia-smi > /dev/null || return 0
  local ts
  while kill -0 "$2" 2> /dev/null; do
    ts=${EPOCHREALTIME/[^0-9]/.}
    nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits 2> /dev/null | sed "s/^/$ts /"
    sleep 0.25
  done >> "$1"
}
export -f gpumem # the detached runbg run samples its own
# snapshot_run NAME DIR: a live run's directory DIR (and DIR.mem, DIR.log) back as $FINAL/NAME.tgz, the store copied whole
# through SQLite's backup API (a plain copy of a WAL database in use can be torn); what the copy lacks
# is the case in flight, which `vouch run --resume` runs again
snapshot_run() {
  local c=/tmp/snap-$1 names x; rm -rf "$c" && mkdir -p "$c"
  mapfile -t names < <(run_files "$2")
  for x in "${names[@]:1}"; do cp "$(dirname "$2")/$x" "$c/"; done # the samples and the log, as they are
  if tar -C "$(dirname "$2")" --exclude='results.sqlite*' -cf - "$(basename "$2")" | tar -C "$c" -xf - &&
    python3 -c 'import sqlite3, sys; d = sqlite3.connect(sys.argv[2]); sqlite3.connect(sys.argv[1]).backup(d); d.close()' \
      "$2/results.sqlite" "$c/$(basename "$2")/results.sqlite" &&
    tar -czf "$FINAL/$1.tgz" -C "$c" "${names[@]}"; then
    note "$1.tgz: a copy of the run in flight, $(du -k "$FINAL/$1.tgz" | cut -f1) KiB (carry it as gpu-carry/$1.tgz)"
  else
    rm -f "$FINAL/$1.tgz"; note "$1: the copy of the run in flight failed; none returned"
  fi
  rm -rf "$c"
}
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv,noheader > "$OUT/gpu.txt"
for phase in "$@"; do
  ps=$(date +%s)
  case $phase in
    golden)
      (cd out/golden && while IFS=$'\t' read -r name _; do # cases.tsv: name preset seed n sets
        python3 ../../scripts/peers/hf_logits.py --model models/$name --tokens "$(cat models/$name/tokens.txt)" \
          --out "$OUT/$name" > "$OUT/golden_$name.log" 2>&1 || echo "hf_logits $name failed" >> "$summary"
      done < cases.tsv)
      note "golden: $(ls "$OUT"/*.f32 2>/dev/null | wc -l) files" ;;
    plans)
      # PLANS="smoke pr" SEEDS="0 1 2": each plan once per seed, wall time, verdict, what failed
      for p in ${PLANS:-smoke pr}; do for sd in ${SEEDS:-0}; do
        s0=$(date +%s)
        gpumem "$OUT/$p-s$sd.mem" $$ & mp=$!
        timeout "${PLAN_TIMEOUT:-580}" $V run --plan "$p" --set seed="$sd" --out "$OUT/$p-s$sd" --no-bundle 2>&1 |
          stamp > "$OUT/$p-s$sd.log"
        note "plan $p seed $sd rc=${PIPESTATUS[0]} $(( $(date +%s) - s0 )) s: $(verdict_of "$OUT/$p-s$sd.log")"
        kill "$mp" 2> /dev/null
        python3 bench/plan_summary.py "$OUT/$p-s$sd" "$OUT/$p-s$sd.log" "$OUT/$p-s$sd.mem" 2>&1 | tee -a "$summary" "$FINAL/summary.txt"
      done; done ;;
    resume)
      # A plan longer than one device call (h200), over several calls: RUN_PLAN (h200) at RUN_SEED (0) runs
      # into /tmp/run-$RUN_PLAN-s$RUN_SEED until RUN_WALL seconds (540), or continues it (`vouch run --resume`)
      # when gpu-carry/run-$RUN_PLAN-s$RUN_SEED.tgz came with this call; the directory goes back as
      # $FINAL/run-PLAN-sSEED.tgz (copy it into gpu-carry/ for the next call). SIGTERM at the wall: the step in
      # flight keeps its stored cases, the rest of it and the later steps run on resume.
      rp=${RUN_PLAN:-h200}; rs=${RUN_SEED:-0}; rn=run-$rp-s$rs; s0=$(date +%s)
      if [ -f "gpu-carry/$rn.tgz" ]; then
        rm -rf "/tmp/$rn" "/tmp/$rn.mem" "/tmp/$rn.log" && tar -xzf "gpu-carry/$rn.tgz" -C /tmp
        ra=(--resume "/tmp/$rn" --no-bundle)
      else
        rm -rf "/tmp/$rn" "/tmp/$rn.mem" "/tmp/$rn.log"; ra=(--plan "$rp" --set seed="$rs" --out "/tmp/$rn" --no-bundle)
      fi
      gpumem "/tmp/$rn.mem" $$ & mp=$!
      timeout -k 20 "${RUN_WALL:-540}" $V run "${ra[@]}" 2>&1 |
        stamp >> "/tmp/$rn.log"
      note "$rn (${ra[0]}) rc=${PIPESTATUS[0]} $(( $(date +%s) - s0 )) s: $(verdict_of "/tmp/$rn.log")"
      kill "$mp" 2> /dev/null
      cp "/tmp/$rn.log" "$OUT/$rn.log"
      pack_run "$rn" "/tmp/$rn" ;;
    runbg)
      # The same long plan run detached from the device call (setsid), so no call's end cuts a case:
      # RUN_PLAN at RUN_SEED runs into /tmp/runbg-PLAN-sSEED (not the resume phase's directory) while the
      # machine stays warm, and each call waits for it at most RUN_WALL s (540). A call that finds the
      # directory but no live run (the call's end killed it after all) continues it with `vouch run
      # --resume`. When the run has ended, its directory goes back as $FINAL/runbg-PLAN-sSEED.tgz with
      # plan_summary's table. The run holds /tmp/NAME.lock for its life; NAME.started says it has the
      # lock, NAME.rc (written whole, under the lock) that it ended. A call that leaves the run going
      # returns a consistent copy of its directory, $FINAL/runbg-PLAN-sSEED.tgz (the store copied with
      # SQLite's backup API), so the device time ending (the machine is gone) loses no finished case:
      # carried back as gpu-carry/runbg-PLAN-sSEED.tgz with the same GPU_BIN, a fresh machine resumes it.
      rp=${RUN_PLAN:-h200}; rs=${RUN_SEED:-0}; rn=runbg-$rp-s$rs; s0=$(date +%s); f=/tmp/$rn
      if [ ! -d "$f" ] && [ -f "gpu-carry/$rn.tgz" ]; then
        tar -xzf "gpu-carry/$rn.tgz" -C /tmp && note "$rn: resuming the copy carried in gpu-carry/$rn.tgz"
      fi
      if [ -f "$f.rc" ]; then
        note "$rn: ended before this call (rc $(cat "$f.rc"))"
      elif ! flock -n "$f.lock" true; then # the live run holds the lock (a zombie does not)
        note "$rn: still running, waiting"
      else
        if [ -d "$f" ]; then ra=(--resume "$f" --no-bundle); else rm -f "$f.mem"; ra=(--plan "$rp" --set seed="$rs" --out "$f" --no-bundle); fi
        note "$rn: starting $V run ${ra[*]}"
        rm -f "$f.started"
        setsid flock "$f.lock" bash -c ': > "$1.started"; f=$1; shift
          gpumem "$f.mem" $$ &
          "$@" 2>&1 | stamp >> "$f.log"
          echo "${PIPESTATUS[0]}" > "$f.rc.tmp" && mv "$f.rc.tmp" "$f.rc"' _ "$f" "$(realpath "$V")" run "${ra[@]}" \
          < /dev/null > /dev/null 2>&1 &
        for _ in $(seq 60); do [ -f "$f.started" ] && break; sleep 1; done
        [ -f "$f.started" ] || note "$rn: the detached run did not start within 60 s"
      fi
      while [ ! -f "$f.rc" ] && [ $(( $(date +%s) - s0 )) -lt "${RUN_WALL:-540}" ]; do
        sleep 5
        # a free lock and no rc file is a run that was killed (the rc file is in place before the lock is freed)
        flock -n "$f.lock" true && [ ! -f "$f.rc" ] && { note "$rn: killed (no rc); the next call resumes it"; break; }
      done
      cp "$f.log" "$OUT/$rn.log" 2>/dev/null
      if [ -f "$f.rc" ]; then
        note "$rn rc=$(cat "$f.rc"): $(verdict_of "$f.log")"
        pack_run "$rn" "$f"
      else
        note "$rn: running after $(( $(date +%s) - s0 )) s of this call: $(grep -E 'vouch run: step [0-9]+' "$f.log" | tail -1 | cut -c1-150)"
        snapshot_run "$rn" "$f"
      fi ;;
    cudaref)
      VOUCH_SRC=$PWD $T/test_cuda_ref > "$OUT/test_cuda_ref.log" 2>&1; note "test_cuda_ref rc=$? $(tail -1 "$OUT/test_cuda_ref.log")"
      grep -E "rows|identical" "$OUT/test_cuda_ref.log" | head -5 | tee -a "$summary" "$FINAL/summary.txt" ;;
    kernels)
      $V kernels --path cuda-ref --json "$OUT/kernels_cuda.json" > "$OUT/kernels_cuda.txt" 2>&1; note "kernels cuda-ref rc=$?: $(tail -1 "$OUT/kernels_cuda.txt")"
      gpu_test test_cuda_kernels ;;
    gputests)
      # every test of tests/gpu (the ctest label gpu) that was carried, one after another (GPU_TEST_S each)
      for src in tests/gpu/test_*.c; do gpu_test "$(basename "$src" .c)" "${GPU_TEST_S:-240}"; done ;;
    shardgpu)
      gpu_test test_shard_gpu 120
      gpu_test test_latency_tp 120 ;;
    latency)
      gpu_test test_latency
      gpu_test test_latency_gemm 150
      gpu_test test_latency_dcp 150
      $V kernels --path latency > "$OUT/kernels_latency.txt" 2>&1; note "kernels latency rc=$?: $(tail -1 "$OUT/kernels_latency.txt")" ;;
    bench)
      bench_ref ;;
    gemm)
      # the decode GEMMs one at a time (bench/bench_gemm.cu): every variant at batch 1, 8, 64
      [ -x $B/bench_gemm ] && { timeout 300 $B/bench_gemm > "$OUT/bench_gemm.txt" 2>&1; note "bench_gemm rc=$?"; cat "$OUT/bench_gemm.txt" >> "$FINAL/summary.txt"; } ;;
    ab)
      # issue 8, one process: the table against the variant words in $BENCH_AB (";"-separated, default
      # PDL off, the wide GEMMs on v6 with and without PDL), ctx 1024 and 128; per-op eager tables in ops*.txt
      ab=${BENCH_AB:-"table;no_pdl;v6_cp_n8;v6_cp_n8,no_pdl"}
      timeout 240 $B/bench_latency --steps 30 --variants "$ab" --ops "$OUT/ops.txt" > "$OUT/bench_ab.txt" 2>&1; note "bench ab rc=$?"
      grep -E "^GEMM choice|^ +[0-9]+ " "$OUT/bench_ab.txt" | tee -a "$summary" "$FINAL/summary.txt"
      timeout 150 $B/bench_latency --ctx 128 --steps 30 --variants "$ab" --ops "$OUT/ops128.txt" > "$OUT/bench_ab128.txt" 2>&1; note "bench ab ctx128 rc=$?"
      grep -E "^GEMM choice|^ +1 " "$OUT/bench_ab128.txt" | tee -a "$summary" "$FINAL/summary.txt" ;;
    issue8)
      # issue 8's figures in one phase: bench_latency with cuda-ref (roofline %, speed-up), ctx 128
      # (the HF-compiled peer's 2.40 / 21.9 ms, 3 layers), the 2-layer slice at 128 and 32k against the
      # HF numbers stored in docs/h200-results.md, a graph-replay kernel timeline (CUPTI) at batch 1,
      # and PDL on / off giving the same tokens
      bench_ref
      bench_ctx128
      timeout 200 $V sweep --model synth:k2-slice --layers 2 --paths latency --batch 1,64 --context 128,32k --steps 20 \
        --warmup 3 --time-budget 150 --no-progress --json "$OUT/sweep_2l.json" > "$OUT/sweep_2l.txt" 2>&1; note "sweep 2-layer rc=$?"
      grep -E "^ *latency" "$OUT/sweep_2l.txt" | tee -a "$summary" "$FINAL/summary.txt"
      if [ -f $B/libvouch_cupti_trace.so ]; then
        CUDA_INJECTION64_PATH=$PWD/$B/libvouch_cupti_trace.so VOUCH_CUPTI_OUT=$OUT/kernels_b1.tsv timeout 120 \
          $B/bench_latency --steps 10 > "$OUT/bench_cupti.txt" 2>&1; note "cupti timeline rc=$?"
      fi
      for v in "" "@no_pdl"; do
        timeout 60 $V generate --model synth:small --path latency$v --tokens 1,2,3 -n 32 --batch 8 > "$OUT/gen_pdl$v.txt" 2>&1
      done
      cmp -s <(grep ^seq "$OUT/gen_pdl.txt") <(grep ^seq "$OUT/gen_pdl@no_pdl.txt") && note "PDL on/off: tokens identical" || note "PDL on/off: tokens DIFFER"
      timeout 60 $V trace --path latency --model synth:small --batch 1 > "$OUT/trace_latency.txt" 2>&1; note "trace rc=$?: $(grep -c . "$OUT/trace_latency.txt") lines" ;;
    sweep-small)
      timeout 300 $V sweep --model synth:small --paths cuda-ref,latency --batch 1,8,64 --context 1k,8k --steps 30 --no-progress \
        --json "$OUT/sweep_small.json" > "$OUT/sweep_small.txt" 2>&1; note "sweep small rc=$?"; tail -20 "$OUT/sweep_small.txt" | tee -a "$summary" "$FINAL/summary.txt" ;;
    sweep-k2)
      timeout 400 $V sweep --model synth:k2-slice --paths cuda-ref,latency --batch 1,8,64 --context 1k,32k --steps 30 --no-progress \
        --json "$OUT/sweep_k2.json" > "$OUT/sweep_k2.txt" 2>&1; note "sweep k2 rc=$?"; tail -20 "$OUT/sweep_k2.txt" | tee -a "$summary" "$FINAL/summary.txt" ;;
    generate)
      for p in cuda-ref latency; do
        $V generate --model synth:small --path $p --tokens 1,2,3 -n 32 --batch 8 > "$OUT/gen_small_$p.txt" 2>&1; note "generate small $p rc=$?: $(tail -1 "$OUT/gen_small_$p.txt")"
      done
      diff <(grep ^seq "$OUT/gen_small_cuda-ref.txt") <(grep ^seq "$OUT/gen_small_latency.txt") > /dev/null && note "small tokens latency == cuda-ref" || note "small tokens latency != cuda-ref" ;;
    tp1)
      timeout 200 $V sweep --model synth:small --paths cuda-ref,cuda-ref:tp1 --batch 1,8,64 --context 1k --steps 30 --no-progress \
        --json "$OUT/sweep_tp1.json" > "$OUT/sweep_tp1.txt" 2>&1; note "sweep tp1 rc=$?"; tail -12 "$OUT/sweep_tp1.txt" | tee -a "$summary" "$FINAL/summary.txt" ;;
    bench128)
      bench_ctx128 ;;
    hfpeer-small)
      $V model synth --preset small --out /tmp/small > /dev/null
      timeout 300 python3 scripts/peers/hf_decode.py --model /tmp/small --batch 1,8,64 --context 1k --steps 20 --out "$OUT/hf_small.json" \
        > "$OUT/hf_small.log" 2>&1; note "hf_decode small rc=$?"
      timeout 200 $V sweep --model /tmp/small --paths cuda-ref,latency --batch 1,8,64 --context 1k --steps 30 --no-progress \
        --peer "$OUT/hf_small.json" --json "$OUT/sweep_small_peer.json" > "$OUT/sweep_small_peer.txt" 2>&1; note "sweep small+peer rc=$?"
      tail -16 "$OUT/sweep_small_peer.txt" | tee -a "$summary" "$FINAL/summary.txt" ;;
    evals)
      timeout 200 $V eval mrcr --paths cuda-ref,latency --bins 4k,8k,16k,32k,64k,128k --needles 2,4,8 --samples 1 --batch 8 \
        --chunk 4096 --json "$OUT/mrcr.json" > "$OUT/mrcr.txt" 2>&1; note "eval mrcr rc=$?"; grep -B2 -A14 -m1 "score" "$OUT/mrcr.txt" | tee -a "$summary" "$FINAL/summary.txt"
      timeout 100 $V eval chain --paths cuda-ref,latency --hops 1000,8000 --samples 1 --json "$OUT/chain.json" > "$OUT/chain.txt" 2>&1
      note "eval chain rc=$?"; tail -12 "$OUT/chain.txt" | tee -a "$summary" "$FINAL/summary.txt"
      timeout 90 $V eval chain --paths latency --hops 1000,8000,32000 --samples 1 > "$OUT/chain32k.txt" 2>&1
      note "eval chain 32k (latency) rc=$?"; tail -6 "$OUT/chain32k.txt" | tee -a "$summary" "$FINAL/summary.txt"
      $V model synth --preset recall-mrcr --out /tmp/mrcr > /dev/null
      $V eval mrcr --model /tmp/mrcr --bins 4k,32k --needles 2,8 --samples 2 --export-prompts /tmp/mrcr_prompts.json > /dev/null 2>&1
      timeout 100 python3 scripts/peers/hf_eval.py --model /tmp/mrcr --prompts /tmp/mrcr_prompts.json > "$OUT/hf_eval.txt" 2>&1
      note "hf_eval rc=$?"; tail -8 "$OUT/hf_eval.txt" | tee -a "$summary" "$FINAL/summary.txt"
      timeout 60 $V eval mrcr --model /tmp/mrcr --paths cuda-ref --bins 4k,32k --needles 2,8 --samples 2 > "$OUT/mrcr_same.txt" 2>&1
      note "cuda-ref on the exported prompts' settings rc=$?"; grep -A6 -m1 score "$OUT/mrcr_same.txt" | tee -a "$summary" "$FINAL/summary.txt" ;;
    diverge)
      timeout 150 $V diverge --model synth:small --paths cpu-ref,cuda-ref,latency --baseline cuda-ref --batch 1,8 --context 0,4k --tokens 16 \
        --json "$OUT/diverge_small.json" > "$OUT/diverge_small.txt" 2>&1; note "diverge small rc=$?"; tail -12 "$OUT/diverge_small.txt" | tee -a "$summary" "$FINAL/summary.txt"
      timeout 150 $V diverge --model synth:small --paths cuda-ref,latency --batch 1,8,64 --context 32k,120k --tokens 16 --max-kld 0.05 --min-same-top 85 \
        --json "$OUT/diverge_long.json" > "$OUT/diverge_long.txt" 2>&1; note "diverge long rc=$?"; tail -10 "$OUT/diverge_long.txt" | tee -a "$summary" "$FINAL/summary.txt" ;;
    features)
      timeout 150 $V features --model synth:small --path latency --ref cuda-ref --kld-tol 0.25 --json "$OUT/features.json" > "$OUT/features.txt" 2>&1
      note "features rc=$?"; tail -12 "$OUT/features.txt" | tee -a "$summary" "$FINAL/summary.txt" ;;
    mrcr-bins)
      # one command per (path, bin) so a time limit keeps every finished bin
      for spec in latency:4k latency:8k latency:16k latency:32k latency:64k latency:128k cuda-ref:4k cuda-ref:16k cuda-ref:32k; do
        p=${spec%%:*}; b=${spec##*:}
        timeout 60 $V eval mrcr --paths $p --bins $b --needles 2,4,8 --samples 1 --batch 8 --chunk 4096 \
          --json "$OUT/mrcr_${p}_$b.json" > "$OUT/mrcr_${p}_$b.txt" 2>&1
        note "mrcr $p $b rc=$?: $(grep -m1 'score' "$OUT/mrcr_${p}_$b.txt") $(grep -A4 -m1 'needles ' "$OUT/mrcr_${p}_$b.txt" | tr '\n' ' ')"
      done ;;
    sweep-full)
      # Issue 9's figures in one call (under 570 s): the whole TP1 grid of cuda-ref and latency on
      # k2-slice and on small, each run twice (--repeat 2: repeat-run agreement against 2 % / CV 1 %,
      # wall time of the grid), then HF transformers (hf-eager, hf-compiled) on a reduced grid merged
      # into one table with cuda-ref and latency. The HF peer runs on small: k2-slice written to disk
      # is 68.9 GiB (74 GB), more than the machine's 64 GB disk (phase sweep-hf-k2 runs a 2-layer
      # k2-slice instead). Every step's limit comes from what is left of the phase.
      dl=$(( $(date +%s) + ${SWEEP_FULL_S:-540} ))
      sweep_step sweep_full_k2 "$(lim 240 290)" 45 --model synth:k2-slice --paths cuda-ref,latency \
        --batch 1,2,4,8,16,32,64 --context 1k,8k,32k,128k --steps 20 --warmup 3 --repeat 2
      sed -n '/^decode: round 1/,/^$/p' "$OUT/sweep_full_k2.txt" | tee -a "$summary" "$FINAL/summary.txt"
      grep -A60 '^repeat-run agreement' "$OUT/sweep_full_k2.txt" | grep -v ' pass$' | tee -a "$summary" "$FINAL/summary.txt"
      sweep_step sweep_full_small "$(lim 100 190)" 30 --model synth:small --paths cuda-ref,latency \
        --batch 1,2,4,8,16,32,64 --context 1k,8k,32k,128k --steps 20 --warmup 3 --repeat 2
      sed -n '/^decode: round 1/,/^$/p' "$OUT/sweep_full_small.txt" | tee -a "$summary" "$FINAL/summary.txt"
      grep -A60 '^repeat-run agreement' "$OUT/sweep_full_small.txt" | grep -v ' pass$' | tee -a "$summary" "$FINAL/summary.txt"
      # HF peer on small (written to disk: 0.46 GiB): starts no point later than 50 s before the deadline
      $V model synth --preset small --out /tmp/small > /dev/null
      l=$(lim 200 50)
      timeout $(( l + 20 )) python3 scripts/peers/hf_decode.py --model /tmp/small --batch 1,8,64 --context 1k,32k \
        --steps 20 --warmup 3 --prefill-chunk 256 --time-budget "$l" --out "$OUT/hf_small_full.json" > "$OUT/hf_small_full.log" 2>&1
      note "hf_decode small rc=$? ($(grep -c '"status": "pass"' "$OUT/hf_small_full.json" 2>/dev/null) records ran) $(grep -m1 'loaded in' "$OUT/hf_small_full.log")"
      peer=(); [ -s "$OUT/hf_small_full.json" ] && peer=(--peer "$OUT/hf_small_full.json")
      sweep_step sweep_small_peers "$(lim 30 0)" 20 --model /tmp/small --paths cuda-ref,latency --batch 1,8,64 \
        --context 1k,32k --steps 20 --warmup 3 "${peer[@]}"
      sed -n '/^decode:/,/^$/p' "$OUT/sweep_small_peers.txt" | tee -a "$summary" "$FINAL/summary.txt" ;;
    sweep-agree)
      # repeat-run agreement with the work of every step fixed (one uniform draw per point): the
      # spread and CV then measure the harness, not how many experts a fresh routing touches
      dl=$(( $(date +%s) + ${SWEEP_AGREE_S:-200} ))
      sweep_step sweep_agree_k2 "$(lim 190 10)" 40 --model synth:k2-slice --paths cuda-ref,latency \
        --batch 1,2,4,8,16,32,64 --context 1k,8k,32k,128k --steps 20 --warmup 3 --repeat 2 --routing uniform@fixed
      grep -A60 '^repeat-run agreement' "$OUT/sweep_agree_k2.txt" | grep -v ' pass$' | tee -a "$summary" "$FINAL/summary.txt" ;;
    sweep-hf-k2)
      # HF peers at Kimi K2's dimensions: k2-slice with 2 layers (1 dense + 1 MoE, 37 GiB on disk; the
      # 3-layer slice does not fit the 64 GB disk), hf-eager and hf-compiled next to cuda-ref and
      # latency on the same weights (synth:k2-slice --layers 2 with the same seed), under 570 s.
      dl=$(( $(date +%s) + ${SWEEP_FULL_S:-540} ))
      ts=$(date +%s); $V model synth --preset k2-slice --layers 2 --out /tmp/k2l2 > "$OUT/synth_k2l2.log" 2>&1
      note "synth k2-slice --layers 2 rc=$? in $(( $(date +%s) - ts )) s: $(du -sh /tmp/k2l2 | cut -f1); disk left $(df -h /tmp | tail -1 | awk '{print $4}')"
      l=$(lim 380 70)
      timeout $(( l + 20 )) python3 scripts/peers/hf_decode.py --model /tmp/k2l2 --batch 1,64 --context 128,32k \
        --steps 20 --warmup 3 --prefill-chunk 256 --time-budget "$l" --out "$OUT/hf_k2l2.json" > "$OUT/hf_k2l2.log" 2>&1
      note "hf_decode k2-slice 2 layers rc=$? ($(grep -c '"status": "pass"' "$OUT/hf_k2l2.json" 2>/dev/null) records ran) $(grep -m1 'loaded in' "$OUT/hf_k2l2.log")"
      rm -rf /tmp/k2l2
      peer=(); [ -s "$OUT/hf_k2l2.json" ] && peer=(--peer "$OUT/hf_k2l2.json")
      sweep_step sweep_k2l2_peers "$(lim 50 0)" 25 --model synth:k2-slice --layers 2 --paths cuda-ref,latency \
        --batch 1,64 --context 128,32k --steps 20 --warmup 3 "${peer[@]}"
      sed -n '/^decode:/,/^$/p' "$OUT/sweep_k2l2_peers.txt" | tee -a "$summary" "$FINAL/summary.txt" ;;
    defects)
      # Planted defects (defects/, scripts/plant-defects.sh) on one GPU, several lanes at once: the pr plan
      # is half cpu-ref floor and half short GPU steps, so lanes sharing the GPU and the host's cores finish
      # sooner than one after another. DEFECT_LANES="00-main 01-*,03-* 13-*@steps.json" (one lane per word, --only
      # globs[@plan]; the word 00-main: the unpatched control, the only lane that runs it),
      # DEFECT_TIMEOUT per binary, DEFECT_WALL for the whole phase (a lane cut by it leaves no row; its log
      # says how far it came), DEFECT_TAR the corpus from `plant-defects.sh build`.
      dbin=/tmp/defects-bin; det="$OUT/det"
      [ -n "$(find "$dbin" -name vouch-00-main 2>/dev/null)" ] || { mkdir -p "$dbin" && tar -C "$dbin" -xJf "${DEFECT_TAR:-gpu-carry/defects-out.tar.xz}"; }
      bd=$(find "$dbin" -name vouch-00-main -printf '%h\n' | head -1)
      i=0; lanes=()
      set -f # the lanes are globs for --only, not for this shell (the default "*" would list the repo root)
      for lane in ${DEFECT_LANES:-*}; do # GLOBS or GLOBS@PLAN (a lane's own plan: e.g. the pr steps it has left)
        lp=${lane#*@}; [ "$lp" = "$lane" ] && lp=${DEFECT_PLAN:-pr}
        ctl=--no-control; [ "${lane%@*}" = 00-main ] && ctl= # a lane "00-main[@PLAN]": the unpatched control
        timeout -k 10 "${DEFECT_WALL:-560}" scripts/plant-defects.sh run "$bd" "$det" --plan "$lp" \
          --timeout "${DEFECT_TIMEOUT:-540}" $ctl --only "${lane%@*}" > "$OUT/det-lane$i.log" 2>&1 &
        lanes+=($!); i=$((i + 1))
      done
      set +f
      for p in "${lanes[@]}"; do wait "$p"; done
      note "defects: $(ls "$det"/*.row 2>/dev/null | wc -l) of $(ls -d "$det"/[0-9]*/ 2>/dev/null | wc -l) started finished"
      cat "$det"/*.row 2>/dev/null | cut -f1-3,5,6,9 | tee -a "$summary" "$FINAL/summary.txt"
      for d in "$det"/[0-9]*/; do # a binary cut by DEFECT_WALL: the steps it finished
        n=$(basename "$d"); [ -s "$det/$n.row" ] && continue
        note "$n: cut by the phase wall after $(grep -c 'vouch run: step' "$det/$n.log" 2>/dev/null) step lines: $(grep -E 'step [0-9]+' "$det/$n.log" | tail -1 | cut -c1-160)"
      done ;;
    prsteps)
      # pr's GPU steps alone at fresh seeds (issue 37: each step under a minute at >= 40 seeds):
      # PR_STEPS="2:13 3:13 14:24" (step index in the pr plan : seeds), from PR_SEED0, round-robin over
      # the steps, PR_PAR at once; none starts after PHASE_S - 60 s and what runs at PHASE_S is cut (not
      # counted). $OUT/prsteps.txt: "NAME RC SECONDS" per finished run; a table per step in the summary.
      dl=$(( $(date +%s) + ${PHASE_S:-560} ))
      python3 bench/pr_step_jobs.py suites/plans/pr.json "$V" "${PR_SEED0:-0}" ${PR_STEPS:-2:4 3:4 5:4 6:4 7:4 14:4} > /tmp/prsteps.jobs
      mkdir -p "$OUT/prsteps"
      while IFS=$'\t' read -r name cmd; do
        while [ "$(jobs -rp | wc -l)" -ge "${PR_PAR:-6}" ]; do wait -n; done
        [ "$(left)" -lt 60 ] && break
        (s1=$EPOCHREALTIME; timeout "$(( $(left) > 1 ? $(left) : 1 ))" bash -c "$cmd" > "$OUT/prsteps/$name.log" 2>&1; rc=$?
         [ "$rc" -ne 124 ] && echo "$name $rc $(awk -v a="${s1/[^0-9]/.}" -v b="${EPOCHREALTIME/[^0-9]/.}" 'BEGIN{printf "%.1f", b - a}')" >> "$OUT/prsteps.txt") &
      done < /tmp/prsteps.jobs
      wait
      awk '{split($1, a, "_"); n[a[1]]++; ok[a[1]] += $2 == 0; t[a[1]] += $3}
           END {for (s in n) printf "prsteps %s: %d runs, %d exit 0, mean %.0f s (loaded)\n", s, n[s], ok[s], t[s] / n[s]}' \
        "$OUT/prsteps.txt" 2>/dev/null | sort -V | tee -a "$summary" "$FINAL/summary.txt"
      note "prsteps: $(wc -l < /tmp/prsteps.jobs) queued, $(cat "$OUT/prsteps.txt" 2>/dev/null | wc -l) finished" ;;
    served)
      # issue 38 on one GPU: the served plan with vouch serve --path latency against --path cuda-ref
      # (synth:small, kld_budget 1e-4: latency's declared bf16 difference), then SERVED_AA A/A sweeps
      # (latency on both sides) and SERVED_SLOW sweeps of a head planted 20 % slower per decode step, at
      # concurrency 1 and 4 (100 prompts of 32 + 32 tokens, SERVED_ROUNDS rounds a side), each only while
      # PHASE_S leaves 100 s. Nothing else may share the GPU: these are timings. SERVED_HEAD, SERVED_REF,
      # SERVED_MODEL, SERVED_PROMPTS change the pair (a CPU rehearsal: cpu-ref both sides, synth:tiny, 8).
      dl=$(( $(date +%s) + ${PHASE_S:-560} ))
      sv="launch:$V serve --model ${SERVED_MODEL:-synth:small} --port {port} --path"
      hp=${SERVED_HEAD:-latency} rp=${SERVED_REF:-cuda-ref} np=${SERVED_PROMPTS:-100}
      s1=$(date +%s)
      timeout "$(lim 400 100)" $V run --plan served --set "server=$sv $hp" --set "ref=$sv $rp" --set kld_budget=1e-4 \
        --set seed="${SERVED_SEED:-0}" --set ab_rounds="${SERVED_ROUNDS:-4}" --set ab_num_prompts="$np" --out "$OUT/served" --no-bundle > "$OUT/served.log" 2>&1
      note "served plan rc=$? $(( $(date +%s) - s1 )) s: $(grep -E '^verdict' "$OUT/served.log" | tail -1)"
      ab() { # ab NAME HEAD_FLAGS: one served sweep A/B, its exit and what it named
        local s2; s2=$(date +%s)
        timeout "$(lim 200 0)" $V sweep --server "$sv $hp $2" --ref-server "$sv $hp" --concurrency 1,4 --input-len 32 \
          --output-len 32 --num-prompts "$np" --rounds "${SERVED_ROUNDS:-4}" --seed "${SERVED_SEED:-0}" --out "$OUT/$1" > "$OUT/$1.log" 2>&1
        note "$1 rc=$? $(( $(date +%s) - s2 )) s: $(grep -c '^  regression:' "$OUT/$1.log") figures named, $(grep -o '[0-9]* gated figure(s) too noisy' "$OUT/$1.log" | head -1)"
      }
      for k in $(seq 1 "${SERVED_SLOW:-2}"); do [ "$(left)" -ge 100 ] && ab "slow20-$k" "--test-slowdown 0.2"; done
      for k in $(seq 1 "${SERVED_AA:-3}"); do [ "$(left)" -ge 100 ] && ab "aa-$k" ""; done ;;
    *) note "unknown phase $phase" ;;
  esac
  note "phase $phase: $(( $(date +%s) - ps )) s"
done
note "total $(( $(date +%s) - t0 )) s"
