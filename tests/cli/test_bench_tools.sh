#!/bin/bash
# The GPU-session tools (bench/) do not rot between the sessions that use them: no GPU here, so
#   - ShellCheck (warnings and errors) on every bench/*.sh, and every bench/*.py compiles;
#   - plan_summary.py on a crafted run whose answer is known: a step stopped by a call's end and
#     resumed in a later session counts its two segments (30 + 20 s), not the hours between; a step
#     skipped for another variant is not listed; each step's GPU memory peak is the fullest GPU's
#     over the step's segments, from the samples after its line (whole-second and microsecond
#     stamps); a last sample cut mid-line (a copy of a live file) is ignored.
# ~1 s. Exits 77 without python3 (shellcheck missing: that part is skipped, said so).
command -v python3 > /dev/null || { echo "python3 missing; skipping"; exit 77; }
. "$VOUCH_SRC/tests/cli/counters.sh"
S=$VOUCH_SRC T=$t

if command -v shellcheck > /dev/null; then
  for f in "$S"/bench/*.sh; do
    if shellcheck -S warning -s bash "$f"; then ok "shellcheck $(basename "$f")"; else bad "shellcheck $(basename "$f")"; fi
  done
else
  echo "shellcheck missing: bench/*.sh not linted"
fi
for f in "$S"/bench/*.py; do
  if python3 -c "import sys; compile(open(sys.argv[1]).read(), sys.argv[1], 'exec')" "$f" 2> "$T/err"; then ok "compiles: $(basename "$f")"; else bad "$(basename "$f"): $(head -1 "$T/err")"; fi
done

# A run of four steps: 0 (30 s), 1 cut at 150 after 20 s and resumed at 5001.5 for 19.75 s more, 2 a
# CPU-only step skipped, 3 (9.75 s). The first segment has whole-second stamps (logs before the
# fifteenth session), the resumed one microsecond stamps (gpu_session.sh's stamp now).
# GPU memory: 10 GiB in the second step 1 began belongs to step 0, still held then; GPU 1 is the
# fuller at 140; 9 GiB at 5021.1, before step 3's line at 5021.25 of the same second, is step 1's.
mkdir -p "$T/run"
cat > "$T/run/results.json" << 'EOF'
{"verdict": "pass", "complete": true, "counts": {"pass": 3}, "records": [
 {"suite": "kernels", "case_id": "a", "path": "latency", "status": "pass"}]}
EOF
cat > "$T/run.log" << 'EOF'
100 vouch run: plan h200 on GPU (1 GPU) -> /tmp/run
100 vouch run: step 0: vouch kernels --path cuda-ref
130 vouch run: step 1: vouch kernels --path latency
150 kernels: 4000 cases
5000.100000 vouch run: plan h200 on GPU (1 GPU) -> /tmp/run (resumed)
5000.200000 vouch run: step 0 (kernels) finished before: its records are kept
5001.500000 vouch run: step 1: vouch kernels --path latency
5021.250000 vouch run: step 2 (features) skipped: this step runs only on a cpu
5021.250000 vouch run: step 3: vouch diverge --model synth:small
5031.000000 verdict: pass (/tmp/run)
EOF
printf '101 0, 1024\n130 0, 10240\n140 0, 4096\n140 1, 8192\n5010.3 0, 2048\n5021.1 0, 9216\n5025.5 0, 3072\n5025.5 1, 1024\n5030 0, 99999' > "$T/run.mem"
python3 "$S/bench/plan_summary.py" "$T/run" "$T/run.log" "$T/run.mem" > "$T/out" 2>&1 || bad "plan_summary.py exited $?"
want() { grep -qE "$1" "$T/out" && ok "$2" || bad "$2: no line matching '$1'"; }
want '^  step  0    30 s    10\.00 GiB  vouch run: step 0: vouch kernels' "step 0: 30 s; 10 GiB, sampled in the second step 1 began"
want '^  step  1    40 s     9\.00 GiB  vouch run: step 1: vouch kernels' "step 1: its two segments, 40 s; 9 GiB, sampled just before step 3's line"
want '^  step  3    10 s     3\.00 GiB  vouch run: step 3: vouch diverge' "step 3: 10 s, 3 GiB (the cut last sample ignored)"
grep -q 'step  2' "$T/out" && bad "the skipped step 2 is listed" || ok "the skipped step 2 is not listed"
want 'first sample: 1\.00 GiB' "the first sample is named"
want '^  verdict pass, complete True' "the verdict line"
# gpu_session.sh's own stamp and gpumem, with an nvidia-smi of two GPUs that prints 100 and 200 MiB:
# one stamp per call, shared by both lines; a last line without its newline is stamped too
mkdir -p "$T/bin"
printf '#!/bin/sh\nprintf "0, 100\\n1, 200\\n"\n' > "$T/bin/nvidia-smi" && chmod +x "$T/bin/nvidia-smi"
# shellcheck source=/dev/null
. <(sed -n '/^stamp() /p; /^gpumem() {/,/^}/p' "$S/bench/gpu_session.sh")
sleep 1 & sp=$!
PATH="$T/bin:$PATH" gpumem "$T/live.mem" $sp
n=$(wc -l < "$T/live.mem")
[ "$n" -ge 4 ] && [ $((n % 2)) = 0 ] && ok "gpumem: $n lines, two per call" || bad "gpumem wrote $n lines: $(head -3 "$T/live.mem")"
awk 'NR % 2 == 1 { t = $1; if ($2 != "0,") bad = 1 } NR % 2 == 0 { if ($1 != t || $2 != "1,") bad = 1 }
     $1 !~ /^[0-9]+\.[0-9]+$/ { bad = 1 } END { exit bad }' "$T/live.mem" &&
  ok "gpumem: a call's two lines share one microsecond stamp" || bad "gpumem's stamps: $(head -4 "$T/live.mem")"
printf 'a\nb' | stamp > "$T/stamped"
grep -qE '^[0-9]+\.[0-9]{6} b$' "$T/stamped" && ok "stamp: the last line without a newline is kept" ||
  bad "stamp: $(cat "$T/stamped")"
# without samples: the same times, no memory column
python3 "$S/bench/plan_summary.py" "$T/run" "$T/run.log" "$T/none.mem" > "$T/out" 2>&1 || bad "plan_summary.py without samples exited $?"
want '^  step  1    40 s  vouch run: step 1' "no samples: times only"
finish test_bench_tools
