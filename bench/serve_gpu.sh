#!/usr/bin/env bash
# Served figures of a vouch path next to its in-process step time, in one call (< 120 s on one H200):
# `vouch serve` over the path, `vouch sweep --server` at concurrency 1, 8, 64 (closed loop, random
# token-id prompts, ignore_eos), one Mooncake trace replay and one multi-turn session replay
# (synthetic agentic sessions, P90 interactivity), then `vouch sweep --path P` at the same batch sizes
# and mean context; a table of TTFT, TPOT p50/p90, tokens/s per user, the server's own decode step,
# the in-process step and the serving overhead (TPOT p50 - in-process step), and where the server's
# forward time went (/metrics). $OUT gets summary.txt and serve_gpu_logs.tgz (every log and JSON).
#
#   bench/serve_gpu.sh                                  # H200: --path latency --model synth:small
#   bench/serve_gpu.sh --path cpu-ref --model synth:tiny --conc 1,4 --out-len 16   # its logic on a CPU
#
# Options: --path P, --model M, --conc LIST (1,8,64), --in-len N (128), --out-len N (64),
# --deadline S (110: every step gets what is left of S seconds), --vouch BIN (else $VOUCH, else
# gpu-carry/bin/vouch, build-cuda/vouch, build/vouch). Needs only the vouch binary, bash and python3.
set -u
path=latency model=synth:small conc=1,8,64 in_len=128 out_len=64 deadline=110 bin=${VOUCH:-}
while [ $# -gt 0 ]; do
  case $1 in -h|--help) sed -n '2,14p' "$0"; exit 0 ;; esac
  [ $# -ge 2 ] || { echo "serve_gpu.sh: $1 needs a value" >&2; exit 2; }
  case $1 in
    --path) path=$2 ;; --model) model=$2 ;; --conc) conc=$2 ;; --in-len) in_len=$2 ;; --out-len) out_len=$2 ;;
    --deadline) deadline=$2 ;; --vouch) bin=$2 ;;
    *) echo "serve_gpu.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift 2
done
if [ -z "$bin" ]; then
  if [ -x gpu-carry/bin/vouch ]; then
    [ -d /tmp/vouch-libs/.devlibs ] || { mkdir -p /tmp/vouch-libs && tar -xJf gpu-carry/devlibs.tar.xz -C /tmp/vouch-libs; }
    export LD_LIBRARY_PATH=/tmp/vouch-libs/.devlibs:${LD_LIBRARY_PATH:-}
    bin=gpu-carry/bin/vouch
  elif [ -x build-cuda/vouch ]; then export LD_LIBRARY_PATH=$PWD/.devlibs:${LD_LIBRARY_PATH:-}; bin=build-cuda/vouch
  else bin=build/vouch
  fi
fi
[ -x "$bin" ] || { echo "serve_gpu.sh: no vouch binary at '$bin' (--vouch BIN)" >&2; exit 2; }
FINAL=${OUT:-/tmp/serve_gpu}; mkdir -p "$FINAL"
# the device tool returns at most 8 files: the logs travel as one tarball
O=$(mktemp -d /tmp/serve_gpu.XXXXXX)
spid=""
trap '[ -n "$spid" ] && kill "$spid" 2>/dev/null; tar -czf "$FINAL/serve_gpu_logs.tgz" -C "$O" . && cp "$O/summary.txt" "$FINAL/" && rm -rf "$O"' EXIT
t0=$(date +%s)
left() { local l=$(( deadline - ($(date +%s) - t0) )); [ "$l" -lt 5 ] && l=5; echo "$l"; }
note() { echo "$*" | tee -a "$O/summary.txt"; }
: > "$O/summary.txt"
max_c=$(echo "$conc" | tr ',' '\n' | sort -n | tail -1)
ctx=$(( (in_len + out_len) * 4 + 64 ))   # the session replay's turns grow past one request's length
[ "$ctx" -lt 1024 ] && ctx=1024

"$bin" serve --path "$path" --model "$model" --port 0 --max-seqs "$max_c" --max-ctx "$ctx" --max-batched-tokens 2048 \
  2> "$O/serve.log" &
spid=$!
url=""
for _ in $(seq 1 600); do
  url=$(grep -o 'listening on http://[0-9.]*:[0-9]*' "$O/serve.log" | sed 's/listening on //')
  [ -n "$url" ] && break
  kill -0 "$spid" 2>/dev/null || break
  sleep 0.1
done
[ -n "$url" ] || { note "vouch serve did not start: $(tail -3 "$O/serve.log")"; exit 1; }
note "serve: $path on $model at $url, ready after $(( $(date +%s) - t0 )) s"

timeout "$(left)" "$bin" sweep --server "$url" --concurrency "$conc" --input-len "$in_len" --output-len "$out_len" \
  --json "$O/served.json" > "$O/served.txt" 2>&1
note "served sweep rc=$? after $(( $(date +%s) - t0 )) s"

# a Mooncake-format trace: 48 requests over 1.2 s, every 4 sharing a 2-block prefix (block 64 tokens)
python3 - "$in_len" "$out_len" > "$O/trace.jsonl" <<'PY'
import sys
i, o = int(sys.argv[1]), int(sys.argv[2])
for k in range(48):
    print('{"timestamp": %d, "input_length": %d, "output_length": %d, "hash_ids": [%d, %d]}'
          % (25 * k, i + i // 4 * (k % 3), max(1, o - o // 4 * (k % 2)), 1000 + k // 4, 2000 + k // 4))
PY
timeout "$(left)" "$bin" sweep --server "$url" --trace "$O/trace.jsonl" --trace-block 64 --concurrency "$max_c" --warmup 0 \
  --json "$O/trace.json" > "$O/trace.txt" 2>&1
note "trace replay rc=$? after $(( $(date +%s) - t0 )) s"

# multi-turn agentic sessions (vouch's generator, seeded): prompts grow by output + new input per turn,
# tool pauses between turns
timeout "$(left)" "$bin" sweep --server "$url" --sessions "gen:sessions=$(( max_c / 2 > 0 ? max_c / 2 : 1 )),turns=4,input=$in_len,delta=32,output=$out_len,pause=200" \
  --concurrency "$max_c" --warmup 0 --sessions-out "$O/sessions.jsonl" --json "$O/sessions.json" > "$O/sessions.txt" 2>&1
note "session replay rc=$? after $(( $(date +%s) - t0 )) s"

# where the server's forward time went: pure decode steps vs steps with prefill chunks
python3 - "$url" <<'PY' | tee -a "$O/summary.txt"
import sys, urllib.request
t = urllib.request.urlopen(sys.argv[1] + "/metrics", timeout=10).read().decode()
v = {}
for l in t.splitlines():
    if l and not l.startswith("#"):
        k, x = l.rsplit(" ", 1)
        v[k.split("{")[0]] = v.get(k.split("{")[0], 0) + float(x)
fs, fn = v.get("vouch:forward_seconds_total", 0), v.get("vouch:forward_steps_total", 0)
ds, dn = v.get("vouch:decode_seconds_total", 0), v.get("vouch:decode_steps_total", 0)
print("server forward: %d steps %.2f s (%.3f ms each); decode-only %d steps %.3f ms each; with prefill %d steps %.3f ms each; "
      "fallback steps %d" % (fn, fs, 1e3 * fs / max(fn, 1), dn, 1e3 * ds / max(dn, 1), fn - dn, 1e3 * (fs - ds) / max(fn - dn, 1),
                             v.get("vouch:fallback_steps_total", 0)))
ls, cs = v.get("vouch:scheduler_seconds_total", 0), v.get("vouch:sample_seconds_total", 0)
print("scheduler: %.2f s in iterations that ran a step, %.3f ms per step of which forward %.3f, sampling %.3f, the rest "
      "(admission, lock waits, retiring) %.3f" % (ls, 1e3 * ls / max(fn, 1), 1e3 * fs / max(fn, 1), 1e3 * cs / max(fn, 1),
                                                  1e3 * (ls - fs - cs) / max(fn, 1)))
PY
kill -TERM "$spid"; wait "$spid"; note "serve exit rc=$?"; spid=""

# in-process: the same batch sizes at the served requests' mean context (prompt + half the output)
timeout "$(left)" "$bin" sweep --model "$model" --paths "$path" --batch "$conc" --context $(( in_len + out_len / 2 )) \
  --steps 20 --warmup 3 --membw-bytes 64M --no-progress --json "$O/inproc.json" > "$O/inproc.txt" 2>&1
note "in-process sweep rc=$? after $(( $(date +%s) - t0 )) s"

python3 - "$O" <<'PY' | tee -a "$O/summary.txt"
import json, os, sys
o = sys.argv[1]
def recs(name):
    try:
        return json.load(open(os.path.join(o, name)))["records"]
    except (OSError, ValueError, KeyError):
        return []
def m(r, k):
    for x in r["metrics"]:
        if x["name"] == k:
            return x["value"]
    return float("nan")
step = {r["params"]["batch"]: m(r, "step_ms") for r in recs("inproc.json")}
print("%-22s %8s %8s %8s %8s %9s %9s %9s %9s %9s" % ("load", "ok/sent", "TTFT p50", "TTFT p90", "TPOT p50",
      "TPOT p90", "tok/s/u", "srv step", "raw step", "overhead"))
rows = [("c%d" % r["params"]["concurrency"], r) for r in recs("served.json")]
rows += [("trace c%d" % r["params"]["concurrency"], r) for r in recs("trace.json")]
rows += [("sessions c%d" % r["params"]["concurrency"], r) for r in recs("sessions.json")]
for name, r in rows:
    c = r["params"]["concurrency"]
    raw = step.get(c, float("nan")) if name.startswith("c") else float("nan")
    ok = m(r, "requests_ok")
    print("%-22s %4.0f/%-4.0f %8.1f %8.1f %8.2f %9.2f %9.1f %9.2f %9.3f %9.2f" % (name, ok, ok + m(r, "requests_failed"),
          m(r, "ttft_ms"), m(r, "ttft_ms_p90"), m(r, "tpot_ms"), m(r, "tpot_ms_p90"), m(r, "tokens_per_s_per_user"),
          m(r, "server_decode_step_ms"), raw, m(r, "tpot_ms") - raw))
    if name.startswith("sessions"):
        print("  sessions: P90 interactivity %.1f tok/s/user (1000 / TPOT p90), turn TTFT p90 %.1f ms, %d turns"
              % (m(r, "interactivity_p90"), m(r, "ttft_ms_p90"), ok))
print("raw step: vouch sweep --path at batch = concurrency, context = input + output/2; overhead = TPOT p50 - raw step")
PY
note "total $(( $(date +%s) - t0 )) s; logs in $FINAL/serve_gpu_logs.tgz"
