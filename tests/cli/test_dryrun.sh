#!/usr/bin/env bash
# vouch run --dry-run / --gpu-mem / --fail-fast on the CPU: the smoke plan's estimates print and
# nothing runs; a step that cannot fit a stated GPU (or the host) refuses the plan before anything
# runs, with or without --dry-run; --fail-fast records the steps after a failure as not run.
. "$VOUCH_SRC/tests/cli/counters.sh"
export VOUCH_HISTORY_DB="$t/history.sqlite"
cd "$t" || exit 2

# the smoke plan, CPU variant: one row per step, a total, no result directory
"$VOUCH" run --dry-run >dry.out 2>dry.err; rc=$?
[ $rc -eq 0 ] && ok || bad "smoke dry run exit $rc: $(cat dry.err)"
[ "$(grep -cE '^[0-6] +(kernels|generate|diverge|mrcr|chain|features|sweep) ' dry.out)" -eq 7 ] && ok ||
  bad "smoke dry run: want 7 step rows: $(cat dry.out)"
grep -qE '^2 +diverge +cpu-ref\+cpu-ref:tp2 ' dry.out && ok || bad "diverge opens its paths together: $(cat dry.out)"
grep -qE '^3 +mrcr +cpu-ref, cpu-ref:tp2 ' dry.out && ok || bad "mrcr opens one path at a time: $(cat dry.out)"
grep -q '^expected total: [0-9]' dry.out && ok || bad "no expected total: $(cat dry.out)"
[ ! -e vouch-results ] && ok || bad "a dry run wrote results"
# the GPU variant for a named GPU: smoke's GPU paths fit 141G
"$VOUCH" run --dry-run --gpu-mem 141G >g.out 2>g.err; rc=$?
[ $rc -eq 0 ] && grep -qE '^2 +diverge +cpu-ref\+cuda-ref\+latency ' g.out && ok || bad "smoke for 141G: exit $rc $(cat g.out g.err)"

# two_steps FILE PATHS BATCH CONTEXT: a small generate, then a diverge on synth:small
two_steps() {
  cat > "$1" <<JSON
{"name": "two", "steps": [
  {"suite": "generate", "args": ["--model", "synth:tiny", "-n", "2"]},
  {"suite": "diverge", "args": ["--model", "synth:small", "--paths", "$2", "--batch", "$3", "--context", "$4",
                                "--tokens", "4"]}]}
JSON
}
# a step that cannot fit 1 GiB: cuda-ref's expanded cache of synth:small at 8 x 32k is 2.7 GiB
two_steps big.json cuda-ref,latency 8 32k
"$VOUCH" run --plan big.json --dry-run --gpu-mem 1G >big.out 2>big.err; rc=$?
[ $rc -eq 2 ] && ok || bad "1G dry run exit $rc, want 2: $(cat big.err)"
grep -q 'step 1 (diverge) cannot fit: .*max_seq 8 x max_ctx 32772 needs .* GiB per GPU: cuda-ref' big.err && ok ||
  bad "refusal line: $(cat big.err)"
grep -q 'step 0' big.err && bad "the step that fits is listed as refused: $(cat big.err)" || ok
grep -qE '^1 +diverge .* NO ' big.out && ok || bad "table marks the step: $(cat big.out)"
"$VOUCH" run --plan big.json --dry-run --gpu-mem 64G >/dev/null 2>&1 && ok || bad "big.json fits 64G"
expect_error 2 "use it with --dry-run" "$VOUCH" run --plan big.json --gpu-mem 1G --out never
expect_error 2 "--gpu-mem 'lots'" "$VOUCH" run --dry-run --gpu-mem lots
# planning for another host: --host-mem / --cpus replace this machine's memory and cores
"$VOUCH" run --plan big.json --dry-run --gpu-mem 64G --host-mem 512G --cpus 16 >hm.out 2>&1 && ok || bad "--host-mem 512G: $(cat hm.out)"
grep -q 'a host of 512.0 GiB and 16 cores' hm.out && ok || bad "header names the planned host: $(head -1 hm.out)"
two_steps cpu.json cpu-ref,cpu-ref:tp2 8 4k
"$VOUCH" run --plan cpu.json --dry-run --cpus 1 >c1.out 2>&1
"$VOUCH" run --plan cpu.json --dry-run --cpus 64 >c64.out 2>&1
python3 - c1.out c64.out <<'PY' && ok || bad "--cpus does not price the CPU steps: $(cat c1.out c64.out)"
import re, sys
t = [float(re.search(r'^expected total: ([0-9.]+) s', open(f).read(), re.M).group(1)) for f in sys.argv[1:]]
sys.exit(0 if t[0] > t[1] else 1)
PY
# every step's options are checked by its suite's parser before anything runs: a misspelled option in
# the last step, an unknown path, a bad eval word refuse the plan with one line each (exit 2), with
# or without --dry-run, before step 0 starts; --force does not override it
cat > opts.json <<'JSON'
{"name": "opts", "steps": [
  {"suite": "generate", "args": ["--model", "synth:tiny", "-n", "2"]},
  {"suite": "generate", "args": ["--path", "cpu-rfe"]},
  {"suite": "eval", "args": ["mrcx"]},
  {"suite": "sweep", "args": ["--batch", "1", "--contxt", "1k"]},
  {"suite": "diverge", "args": ["--paths", "cpu-ref", "--tokens", "4"]},
  {"suite": "kernels", "args": ["--quick", "--seeds", "0"]},
  {"suite": "diverge", "args": ["--paths", "cpu-ref,cpu-ref:tp2", "--tokn", "4"]},
  {"suite": "sweep", "args": ["--server", "http://127.0.0.1:9/v1", "--concurrency", "1,0"]},
  {"suite": "kernels", "args": ["--quick", "--op", "nosuchop"]},
  {"suite": "sweep", "args": ["--paths", "cpu-ref,cpu-ref"]},
  {"suite": "diverge", "args": ["--paths", "cpu-ref,cpu-ref:tp2", "--routing", "bogus"]},
  {"suite": "eval", "args": ["--help"]}]}
JSON
"$VOUCH" run --plan opts.json --out optsrun --no-bundle --force >opts.out 2>opts.err; rc=$?
[ $rc -eq 2 ] && ok || bad "a plan with bad step options: exit $rc, want 2: $(cat opts.err)"
for want in "steps\[1\] (generate): unknown path 'cpu-rfe'" "steps\[2\] (eval): unknown subcommand 'eval mrcx'" \
            "steps\[3\] (sweep): unknown option '--contxt'" "steps\[4\] (diverge): .*--paths" \
            "steps\[5\] (kernels): .*--seeds" "steps\[6\] (diverge): unknown option '--tokn'" \
            "steps\[7\] (sweep): --concurrency: 0 is outside" "steps\[8\] (kernels): .*nosuchop" \
            "steps\[9\] (sweep): --paths: 'cpu-ref' listed twice" "steps\[10\] (diverge): option --routing" \
            "refused: 10 steps with options"; do
  grep -q "$want" opts.err && ok || bad "refusal lacks '$want': $(cat opts.err)"
done
grep -qE "steps\[(0|11)\]" opts.err && bad "a good step is refused: $(cat opts.err)" || ok
grep -q "vouch run: step 0" opts.err && bad "a step ran before the plan was checked: $(cat opts.err)" || ok
[ ! -e optsrun ] && ok || bad "a refused plan wrote a result directory"
"$VOUCH" run --plan opts.json --dry-run >optsd.out 2>optsd.err; rc=$?
[ $rc -eq 2 ] && grep -q "steps\[6\] (diverge): unknown option '--tokn'" optsd.err && ok ||
  bad "dry run of bad step options: exit $rc $(cat optsd.err)"

# a sweep spends no time on a point that does not fit the GPU (it reports it "does not fit"): cuda-ref's
# expanded cache of k2-slice (2 layers) at 64 x 128k is 160 GiB, more than 141G, and dominates the step
cat > sw.json <<'JSON'
{"name": "sw", "steps": [{"suite": "sweep", "args": ["--model", "synth:k2-slice", "--layers", "2", "--paths",
  "cuda-ref,latency", "--batch", "1,64", "--context", "128k", "--steps", "20"]}]}
JSON
"$VOUCH" run --plan sw.json --dry-run --gpu-mem 141G >sw141.out 2>&1
"$VOUCH" run --plan sw.json --dry-run --gpu-mem 1000G >sw1000.out 2>&1
python3 - sw141.out sw1000.out <<'PY' && ok || bad "the sweep prices a point that does not fit: $(cat sw141.out sw1000.out)"
import re, sys
t = [float(re.search(r'^expected total: ([0-9.]+) s', open(f).read(), re.M).group(1)) for f in sys.argv[1:]]
sys.exit(0 if 0 < t[0] < t[1] / 2 else 1)
PY
expect_error 2 "--host-mem and --cpus describe another machine" "$VOUCH" run --plan big.json --host-mem 8G --out never
expect_error 2 "--cpus 'many'" "$VOUCH" run --dry-run --cpus many
expect_error 2 "--host-mem '0'" "$VOUCH" run --dry-run --host-mem 0
# without --dry-run the same check refuses before anything runs: host memory for cpu-ref's cache
two_steps host.json cpu-ref,cpu-ref:tp2 4096 64k
"$VOUCH" run --plan host.json --out host --no-bundle >host.out 2>host.err; rc=$?
[ $rc -eq 2 ] && grep -q 'step 1 (diverge) cannot fit: host paths .* of host memory' host.err && ok ||
  bad "host refusal: exit $rc $(cat host.err)"
"$VOUCH" run --plan host.json --dry-run --host-mem 1G >/dev/null 2>hm1.err; rc=$?
[ $rc -eq 2 ] && grep -q 'this machine has 1.00 GiB' hm1.err && ok || bad "--host-mem 1G refusal: exit $rc $(cat hm1.err)"
[ ! -e host ] && ok || bad "a refused plan ran (host/ exists)"

# --fail-fast: step 0 fails (an unreadable model), steps 1 and 2 are recorded not run
cat > ff.json <<'JSON'
{"name": "ff", "steps": [
  {"suite": "generate", "args": ["--model", "/nonexistent/model"]},
  {"suite": "generate", "args": ["--model", "synth:tiny", "-n", "2"]},
  {"suite": "generate", "args": ["--model", "synth:tiny", "-n", "2"]}]}
JSON
"$VOUCH" run --plan ff.json --out ff --no-bundle --fail-fast >ff.out 2>ff.err; rc=$?
[ $rc -eq 1 ] && ok || bad "fail-fast exit $rc, want 1: $(tail -3 ff.err)"
grep -q 'step 1: vouch' ff.err && bad "fail-fast ran step 1: $(cat ff.err)" || ok
python3 - ff <<'PY' && ok || bad "fail-fast records"
import json, sys
d = sys.argv[1]
res = json.load(open(d + "/results.json"))
recs = res["records"] if isinstance(res, dict) else res
nr = {r["case_id"]: r for r in recs if r["status"] == "not_run"}
assert set(nr) == {"step1-generate", "step2-generate"}, sorted(nr)
why = json.dumps(nr["step1-generate"])
assert "--fail-fast: step 0 (generate) exited" in why, why
assert json.load(open(d + "/manifest.json"))["verdict"] == "fail"
PY
# without --fail-fast every step runs after the failure
"$VOUCH" run --plan ff.json --out ff2 --no-bundle >/dev/null 2>ff2.err
grep -q 'step 2: vouch' ff2.err && ok || bad "without --fail-fast step 2 did not run: $(cat ff2.err)"
finish
