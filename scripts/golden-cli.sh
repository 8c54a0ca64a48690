#!/usr/bin/env bash
# Golden-output harness of the vouch CLI, for proving that a refactor changed nothing a user sees.
#
# usage: scripts/golden-cli.sh VOUCH_BINARY OUT_DIR
#
# Runs a fixed list of invocations of VOUCH_BINARY (a CPU-only build: -DVOUCH_CUDA=OFF) from a
# scratch directory and writes, per invocation, OUT_DIR/NNN-name.txt: the command line, the exit
# code, stdout, stderr (apart, so their interleaving cannot differ), the files it created, and the
# files it wrote (--json files, result directories with results.json / results.sqlite / traces,
# bundles, models), records sorted and normalized by scripts/golden_normalize.py, which masks only
# what varies between two runs of one binary (timings, dates, scratch paths, ports, the commit, the
# hashes of files holding times; see its header). Two runs of the same binary on the same machine
# give `diff -r` empty; a refactor that keeps behaviour gives `diff -r` against the old build empty.
#
# Every invocation runs under `env -i` with a fixed environment (HOME and VOUCH_HISTORY_DB in the
# scratch directory, so ~/.local/share/vouch is not touched) and with relative paths, so that the
# manifests and replay scripts written do not depend on where the harness ran. Servers take a free
# port (--port 0) on 127.0.0.1. Each invocation's wall time is printed (not written to OUT_DIR).
#
# Environment: GOLDEN_KEEP=1 keeps the scratch directory; GOLDEN_TIMEOUT (default 300) seconds per
# invocation; GOLDEN_ONLY=REGEX runs only the invocations whose name matches (for debugging; the
# numbering stays that of the full list; a server's clients run only when the server's name, e.g.
# serve-tiny, matches too; inputs made from earlier invocations' files may be missing).
set -uo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 VOUCH_BINARY OUT_DIR" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
NORM="$here/golden_normalize.py"
VOUCH=$(realpath "$1") || exit 2
OUT=$(realpath -m "$2")
[ -x "$VOUCH" ] || { echo "golden-cli: $1: not an executable" >&2; exit 2; }
# the system python when there is one: a pyenv shim costs half a second per call
PY=$(command -v /usr/bin/python3 || command -v python3) || { echo "golden-cli: python3 is required" >&2; exit 2; }
mkdir -p "$OUT" || exit 2
if [ -n "$(ls -A "$OUT")" ]; then
  echo "golden-cli: $OUT is not empty; give an empty or new directory" >&2
  exit 2
fi

SCR=$(mktemp -d "${TMPDIR:-/tmp}/vouch-golden.XXXXXX")
G=$SCR/.golden # the harness's own files (captured streams, file lists); not listed as created
mkdir -p "$G" "$SCR/home"
TMO=${GOLDEN_TIMEOUT:-300}
ONLY=${GOLDEN_ONLY:-}
TIMEOUT_BIN=$(command -v timeout)
SERVER_PIDS=()
cleanup() {
  for p in "${SERVER_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  if [ "${GOLDEN_KEEP:-0}" = 1 ]; then echo "golden-cli: scratch directory kept: $SCR"; else rm -rf "$SCR"; fi
}
trap cleanup EXIT

# the commit compiled into the binary: "vouch 0.1.0 (COMMIT): ..." on the first line of --help
COMMIT=$("$VOUCH" --help 2>/dev/null | sed -n '1s/^vouch [^ ]* (\([^)]*\)).*/\1/p')
export GOLDEN_SCRATCH=$SCR GOLDEN_VOUCH=$VOUCH GOLDEN_COMMIT=$COMMIT
ENVV=(PATH=/usr/local/bin:/usr/bin:/bin HOME="$SCR/home" LANG=C.UTF-8 LC_ALL=C.UTF-8 TZ=UTC
      VOUCH_HISTORY_DB="$SCR/home/history.sqlite")

n=0
IN_SERVE= URL= SPID=
total_t0=$(date +%s.%N)
listing() { (cd "$SCR" && find . -path ./.golden -prune -o -type f -print | sed 's|^\./||' | LC_ALL=C sort); }
listing >"$G/before"

# selected NAME: true when NAME is to run (GOLDEN_ONLY); advances the numbering either way
selected() {
  n=$((n + 1))
  id=$(printf '%03d' "$n")
  [ -z "$ONLY" ] || [[ "$1" =~ $ONLY ]]
}

# created_list FILE: what appeared (+) or went (-) in the scratch directory since the last call
created_list() {
  listing >"$G/after"
  LC_ALL=C comm -13 "$G/before" "$G/after" | sed 's/^/+ /' >"$1.tmp"
  LC_ALL=C comm -23 "$G/before" "$G/after" | sed 's/^/- /' >>"$1.tmp"
  # a folder with many new files (traces/) is summarized as a count
  awk '{ d=$2; sub(/\/[^\/]*$/, "/", d); if (d == $2) d=""; k=$1" "d; c[k]++; l[k]=l[k] $0 "\n" }
       END { for (k in c) { if (c[k] > 12) printf "%s(%d files)\n", k, c[k]; else printf "%s", l[k] } }' \
    "$1.tmp" | LC_ALL=C sort >"$1"
  mv "$G/after" "$G/before"
}

# inv NAME [ART...] -- ARGS...: runs vouch ARGS in the scratch directory and writes OUT/NNN-NAME.txt.
# ART: file:PATH (JSON or text the command wrote), run:DIR (a result directory), bundle:FILE, model:DIR
inv() {
  local name=$1 arts=()
  shift
  while [ "$1" != "--" ]; do arts+=("$1"); shift; done
  shift
  selected "$name" || return 0
  [ -z "$IN_SERVE" ] || [ -n "$URL" ] || return 0
  local so=$G/$id.out se=$G/$id.err t0 t1 rc
  t0=$(date +%s.%N)
  (cd "$SCR" && exec "$TIMEOUT_BIN" -k 5 "$TMO" env -i "${ENVV[@]}" "$VOUCH" "$@") >"$so" 2>"$se" </dev/null
  rc=$?
  t1=$(date +%s.%N)
  created_list "$G/$id.created"
  "$PY" "$NORM" inv "$OUT/$id-$name.txt" "$name" "$rc" "$so" "$se" "$G/$id.created" "${arts[@]}" -- vouch "$@"
  printf '%s %-40s rc=%-3s %7.2f s\n' "$id" "$name" "$rc" "$(awk "BEGIN { print $t1 - $t0 }")"
}

# sh_step NAME COMMAND: a harness step that prepares inputs (not a vouch invocation); its output
# goes to the terminal only
sh_step() {
  if [ -n "$ONLY" ]; then # with a subset the inputs made from earlier invocations' files may be missing
    (cd "$SCR" && eval "$2") >/dev/null 2>&1
  else
    (cd "$SCR" && eval "$2") || echo "golden-cli: preparing $1 failed" >&2
  fi
  listing >"$G/before"
}

# serve_start NAME ARGS...: starts `vouch serve ARGS --port 0` in the background; sets URL and SPID.
# Until serve_stop, the clients (inv, http) are only counted, not run, when the server is not
# selected (GOLDEN_ONLY) or did not start (URL empty): the numbering stays that of the full list.
serve_start() {
  local name=$1
  shift
  URL= SPID= IN_SERVE=1
  selected "$name" || return 0
  SID=$id SNAME=$name SARGS=("$@")
  ST0=$(date +%s.%N)
  (cd "$SCR" && exec env -i "${ENVV[@]}" "$VOUCH" serve "$@" --port 0) >"$G/$id.out" 2>"$G/$id.err" </dev/null &
  SPID=$!
  SERVER_PIDS+=("$SPID")
  URL=
  for _ in $(seq 1 600); do
    URL=$(grep -o 'listening on http://[0-9.]*:[0-9]*' "$G/$id.err" 2>/dev/null | head -1 | sed 's/listening on //')
    [ -n "$URL" ] && break
    kill -0 "$SPID" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$URL" ] || echo "golden-cli: $name did not start listening: its clients are skipped" >&2
}

# serve_stop: SIGINT to the server started last (it finishes requests in flight and exits 0), then
# its own OUT file
serve_stop() {
  [ -n "${SPID:-}" ] || { IN_SERVE= URL=; return 0; }
  kill -INT "$SPID" 2>/dev/null
  wait "$SPID"
  local rc=$? t1
  t1=$(date +%s.%N)
  created_list "$G/$SID.created"
  "$PY" "$NORM" inv "$OUT/$SID-$SNAME.txt" "$SNAME" "$rc" "$G/$SID.out" "$G/$SID.err" "$G/$SID.created" \
    -- vouch serve "${SARGS[@]}" --port 0
  printf '%s %-40s rc=%-3s %7.2f s (server, until stopped)\n' "$SID" "$SNAME" "$rc" "$(awk "BEGIN { print $t1 - $ST0 }")"
  SPID= URL= IN_SERVE=
}

# http NAME METHOD PATH [BODY]: one request to the running server (URL), normalized
http() {
  local name=$1
  shift
  selected "$name" || return 0
  [ -n "$URL" ] || return 0
  "$PY" "$NORM" http "$OUT/$id-$name.txt" "$URL" "$@"
  printf '%s %-40s\n' "$id" "$name"
}

# ============================================================ 1. help and usage texts
inv help -- --help
inv help-h -- -h
inv help-word -- help
inv no-args --
inv version -- --version
for c in model generate trace kernels diverge eval features sweep serve run bundle verify compare report publish \
  history ab; do
  inv "help-$c" -- "$c" --help
done
for s in synth info export peer-diverge; do inv "help-model-$s" -- model "$s" --help; done
for s in mrcr chain; do inv "help-eval-$s" -- eval "$s" --help; done
inv help-sweep-server -- sweep --server http://127.0.0.1:9 --help
inv help-history-baseline -- history baseline --help
inv help-generate-h -- generate -h
inv kernels-list -- kernels --list
inv run-list -- run --list

# ============================================================ 2. usage errors
inv err-unknown-command -- nosuch
inv err-model-nosub -- model
inv err-model-badsub -- model bogus
inv err-eval-nosub -- eval
inv err-eval-badsub -- eval bogus
for c in generate trace kernels diverge features sweep serve run bundle verify compare report history; do
  inv "err-unknown-option-$c" -- "$c" --bogus
done
inv err-unknown-option-eval-mrcr -- eval mrcr --bogus
inv err-unknown-option-eval-chain -- eval chain --bogus
inv err-unknown-option-model-synth -- model synth --bogus
inv err-unknown-option-model-info -- model info synth:tiny --bogus
inv err-missing-value -- generate --batch
inv err-generate-batch0 -- generate --batch 0
inv err-generate-n-abc -- generate -n abc
inv err-generate-temp-neg -- generate --temperature -1
inv err-generate-top-p -- generate --top-p 2
inv err-generate-tokens-bad -- generate --tokens 1,x,3
inv err-generate-tokens-vocab -- generate --tokens 1,99999 -n 2
inv err-generate-preset -- generate --model synth:nosuch
inv err-generate-model-missing -- generate --model /nonexistent/model
inv err-generate-path-lib -- generate --path-lib ./nosuch.so
inv err-generate-threads -- generate --threads -3
inv err-diverge-no-paths -- diverge
inv err-diverge-batch0 -- diverge --paths cpu-ref --batch 0
inv err-diverge-context-abc -- diverge --paths cpu-ref --context abc
inv err-diverge-routing -- diverge --paths cpu-ref,cpu-ref:tp2 --routing bogus
inv err-diverge-tokens0 -- diverge --paths cpu-ref --tokens 0
inv err-diverge-baseline -- diverge --paths cpu-ref,cpu-ref:tp2 --baseline nosuch
inv err-sweep-context-abc -- sweep --context abc
inv err-sweep-spec -- sweep --spec K=x
inv err-sweep-workload -- sweep --workload bogus
inv err-sweep-tp0 -- sweep --tp 0
inv err-sweep-routing-file -- sweep --routing trace:nosuch.jsonl
inv err-sweep-repeat-agree -- sweep --require-agreement
inv err-sweep-server-refused -- sweep --server http://127.0.0.1:9 --concurrency 1 --timeout 5
inv err-kernels-op -- kernels --op nosuch
inv err-kernels-preset -- kernels --preset nosuch
inv err-kernels-path -- kernels --path nosuch
inv err-kernels-variant -- kernels --op rmsnorm --variant nosuch
inv err-kernels-batch -- kernels --batch 0
inv err-eval-mrcr-bins -- eval mrcr --bins abc
inv err-eval-mrcr-needles -- eval mrcr --needles 0
inv err-eval-mrcr-model -- eval mrcr --model synth:tiny --bins 256 --needles 2 --samples 1
inv err-eval-chain-hops -- eval chain --hops 0
inv err-eval-chain-temp -- eval chain --temperature abc
inv err-features-no-path -- features
inv err-features-path -- features --path nosuch
inv err-serve-port -- serve --port abc
inv err-serve-path -- serve --path nosuch
inv err-serve-spec -- serve --spec K=0,AL=5
inv err-run-plan -- run --plan nosuch
inv err-run-host-mem -- run --host-mem 1G
inv err-run-gpu-mem -- run --gpu-mem abc --dry-run
inv err-run-cpus -- run --cpus 0 --dry-run
inv err-run-resume-missing -- run --resume nosuch
inv err-run-set -- run --set novalue --dry-run
inv err-verify-missing -- verify nosuch.vouch.tar.gz
inv err-verify-noargs -- verify
inv err-compare-missing -- compare a b
inv err-compare-one -- compare a
inv err-report-missing -- report nosuch
inv err-bundle-missing -- bundle nosuch
inv err-bundle-noargs -- bundle
inv err-model-info-missing -- model info /nonexistent/model
inv err-model-synth-preset -- model synth --preset nosuch --out m
inv err-model-synth-no-out -- model synth --preset tiny
inv err-model-synth-set -- model synth --preset tiny --set nosuch --out m
inv err-model-synth-shard -- model synth --preset tiny --shard-size 0 --out m
inv err-model-export-no-out -- model export --gguf synth:tiny
inv err-model-peer-missing -- model peer-diverge --model synth:tiny --peer nosuch
inv err-publish-no-pr -- publish nosuch.vouch.tar.gz
inv err-publish-missing -- publish nosuch.vouch.tar.gz --pr a/b#1 --dry-run
inv err-ab-no-base -- ab
inv err-ab-not-git -- ab --base HEAD --repo .
inv err-history-baseline -- history baseline

# ============================================================ 3. plan files refused up front
sh_step plans '
mkdir -p plans
printf "{\"name\": \"x\", \"steps\": [" > plans/truncated.json
echo "[1, 2]" > plans/array.json
echo "{\"name\": \"x\", \"stepz\": []}" > plans/no-steps.json
echo "{\"name\": \"u\", \"steps\": [{\"suite\": \"nosuch\", \"args\": []}]}" > plans/unknown-suite.json
echo "{\"name\": \"m\", \"steps\": [{\"suite\": \"diverge\", \"args\": [\"--modle\", \"synth:tiny\"]}]}" > plans/misspelled-option.json
echo "{\"name\": \"b\", \"steps\": [{\"suite\": \"generate\", \"args\": [\"--batch\", \"0\"]}]}" > plans/bad-value.json
echo "{\"name\": \"v\", \"steps\": [{\"suite\": \"generate\", \"args\": [\"--model\", \"\${nosuch}\"]}]}" > plans/unknown-var.json
echo "{\"name\": \"w\", \"steps\": [{\"suite\": \"generate\", \"args\": [], \"when\": \"tpu\"}]}" > plans/bad-when.json
echo "{\"name\": \"a\", \"steps\": [{\"suite\": \"generate\", \"args\": \"--batch 2\"}]}" > plans/args-not-list.json
echo "{\"name\": \"p\", \"steps\": [{\"suite\": \"sweep\", \"args\": [\"--paths\", \"cpu-ref,nosuch\"]}]}" > plans/unknown-path.json
cat > plans/det.json <<EOF
{
  "name": "golden-det",
  "description": "golden harness: small CPU steps whose records hold no timings but wall_s and tok/s",
  "vars": {"seed": "0", "max_kld": "0.01", "paths": "cpu-ref,cpu-ref:tp2"},
  "steps": [
    {"suite": "kernels", "args": ["--op", "rmsnorm", "--preset", "tiny", "--seeds", "1", "--seed", "\${seed}"]},
    {"suite": "generate", "args": ["--model", "synth:tiny", "--path", "cpu-ref:tp2", "--tokens", "1,2,3", "-n", "8", "--batch", "2"]},
    {"suite": "diverge", "args": ["--model", "synth:tiny", "--paths", "\${paths}", "--batch", "1,4", "--context", "0,64", "--tokens", "4", "--max-kld", "\${max_kld}", "--seed", "\${seed}"]},
    {"suite": "eval", "args": ["mrcr", "--paths", "\${paths}", "--bins", "256", "--needles", "2", "--samples", "1", "--seed", "\${seed}"]},
    {"suite": "eval", "args": ["chain", "--paths", "\${paths}", "--hops", "16", "--samples", "2", "--seed", "\${seed}"]},
    {"suite": "features", "args": ["--model", "synth:tiny", "--path", "cpu-ref:tp2", "--ref", "cpu-ref", "--full-ctx", "512", "--seed", "\${seed}"]}
  ]
}
EOF'
for p in truncated array no-steps unknown-suite misspelled-option bad-value unknown-var bad-when args-not-list \
  unknown-path; do
  inv "plan-$p" -- run --plan "plans/$p.json" --out "runs/refused-$p"
done
for p in misspelled-option unknown-suite bad-value; do
  inv "plan-$p-dry" -- run --plan "plans/$p.json" --dry-run
done

# ============================================================ 4. dry runs of every plan
plans=$("$VOUCH" run --list 2>/dev/null | awk '{print $1}')
for p in $plans; do
  inv "dry-$p" -- run --plan "$p" --dry-run
  inv "dry-$p-gpu141" -- run --plan "$p" --dry-run --gpu-mem 141G --host-mem 128G --cpus 16
  inv "dry-$p-gpu1" -- run --plan "$p" --dry-run --gpu-mem 1G
done
inv dry-det -- run --plan plans/det.json --dry-run
inv dry-det-set -- run --plan plans/det.json --dry-run --set seed=3 --set nosuchvar=1
inv dry-smoke-tiny-host -- run --plan smoke --dry-run --host-mem 1M --cpus 1
inv dry-smoke-model -- run --plan smoke --dry-run --model synth:small
inv dry-pr-gpu80 -- run --plan pr --dry-run --gpu-mem 80G --host-mem 64G --cpus 8

# ============================================================ 5. path names in generate, diverge, sweep, run --dry-run
forms=(cpu-ref cpu-ref:tp1 cpu-ref:tp2 cpu-ref:tp4 cpu-ref:tp16 cpu-ref:tp4:dcp cpu-ref:tp2:ep cpu-ref:tp2:dcp:ep
  cpu-ref:tp2:ep:dcp cpu-ref@foo cpu-ref:tp2@foo cpu-ref:tp2:dcp@foo cpu-ref:dcp cpu-ref:ep
  cpu-ref:tp3 cpu-ref:tp32 cpu-ref:tp0 cpu-ref:tp cpu-ref:tpx cpu-ref:tp5000 cpu-ref:tp2:dcp:dcp cpu-ref:tp2:foo
  cpu-ref@ CPU-REF cuda-ref latency latency:tp2 'latency@attn_split' nosuch)
for f in "${forms[@]}"; do
  s=${f//[:@]/_}
  inv "paths-generate-$s" -- generate --path "$f" -n 3 --batch 2
  inv "paths-diverge-$s" -- diverge --paths "cpu-ref,$f" --batch 2 --tokens 2
  inv "paths-sweep-$s" -- sweep --paths "$f" --batch 2 --context 32 --steps 2 --warmup 0 --membw-bytes 1m --no-progress
  inv "paths-dryrun-$s" -- run --plan smoke --paths "cpu-ref,$f" --dry-run
done
inv paths-generate-tp2-dcp-opts -- generate --tp 2 --dcp -n 3
inv paths-generate-tp4-ep-opts -- generate --tp 4 --ep -n 3
inv paths-generate-tp2-ep-dcp-opts -- generate --tp 2 --ep --dcp -n 3
inv paths-generate-dcp-no-tp -- generate --dcp -n 3
inv paths-generate-ep-no-tp -- generate --ep -n 3
inv paths-generate-name-and-tp -- generate --path cpu-ref:tp2 --tp 4 -n 3
inv paths-generate-tp3-opt -- generate --tp 3 -n 3
inv paths-diverge-list -- diverge --paths cpu-ref,cpu-ref:tp4,cpu-ref:tp4:dcp,cpu-ref:tp4:ep --tokens 2
inv paths-diverge-dup -- diverge --paths cpu-ref,cpu-ref --tokens 2
inv paths-diverge-empty-elem -- diverge --paths cpu-ref,,cpu-ref:tp2 --tokens 2
inv paths-sweep-tp-opt -- sweep --paths cpu-ref,cpu-ref:tp4 --tp 1,2 --batch 1 --context 32 --steps 2 --warmup 0 \
  --membw-bytes 1m --no-progress

# ============================================================ 6. models and checkpoints
inv model-synth-tiny model:models/tiny -- model synth --preset tiny --out models/tiny
inv model-synth-tiny-sharded model:models/tiny-sharded -- model synth --preset tiny --shard-size 1m \
  --out models/tiny-sharded
inv model-synth-tiny-set model:models/t2 -- model synth --preset tiny --set q_lora_rank=null \
  --set rope_scaling.factor=8 --out models/t2
inv model-synth-tiny-layers model:models/tiny-l2 -- model synth --preset tiny --layers 2 --seed 5 --out models/tiny-l2
inv model-synth-mrcr model:models/mrcr -- model synth --preset recall-mrcr --out models/mrcr
inv model-synth-exists -- model synth --preset tiny --out models/tiny
inv model-info-tiny -- model info models/tiny
inv model-info-tiny-json -- model info models/tiny --json
inv model-info-sharded -- model info models/tiny-sharded
inv model-info-t2-json -- model info models/t2 --json
for p in tiny small k2-slice k2-lite recall-mrcr recall-chain; do inv "model-info-synth-$p" -- model info "synth:$p"; done
inv model-info-k2-layers-json -- model info synth:k2-slice --layers 5 --json
inv model-export-gguf file:tiny.gguf -- model export --gguf models/tiny -o tiny.gguf
inv model-export-gguf-f32 file:tiny-f32.gguf -- model export --gguf synth:tiny -o tiny-f32.gguf --dtype f32
sh_step broken-models '
mkdir -p models/trunc models/badtype models/noconfig models/badshape
cp models/tiny/config.json models/trunc/ && head -c 100000 models/tiny/model.safetensors > models/trunc/model.safetensors
sed "s/\"deepseek_v3\"/\"llama\"/" models/tiny/config.json > models/badtype/config.json && cp models/tiny/model.safetensors models/badtype/
cp models/tiny/model.safetensors models/noconfig/
sed "s/\"hidden_size\": *256/\"hidden_size\": 128/" models/tiny/config.json > models/badshape/config.json && cp models/tiny/model.safetensors models/badshape/
printf "{\"tokens\": [1, 2, 3, 4, 5], \"shape\": [5, 1024], \"engine\": \"golden-peer\"}" > peer.json
"$PY" -c "
import struct, math
with open(\"peer.f32\", \"wb\") as f:
    for t in range(5):
        f.write(struct.pack(\"<1024f\", *[math.sin(0.37 * v + t) for v in range(1024)]))
"
head -c 1000 peer.f32 > peer-short.f32 && cp peer.json peer-short.json'
for m in trunc badtype noconfig badshape; do inv "model-broken-generate-$m" -- generate --model "models/$m" -n 2; done
inv model-broken-info-trunc -- model info models/trunc
inv model-peer-diverge file:peer-div.json -- model peer-diverge --model synth:tiny --peer peer --json peer-div.json
inv model-peer-diverge-short -- model peer-diverge --model synth:tiny --peer peer-short

# ============================================================ 7. decoding, kernels, divergence, evals, features
inv generate-default -- generate
inv generate-readme -- generate --model models/tiny --path cpu-ref --tokens 1,2,3 -n 32 --batch 8
inv generate-synth-same -- generate --model synth:tiny --path cpu-ref --tokens 1,2,3 -n 32 --batch 8
inv generate-sharded -- generate --model models/tiny-sharded --tokens 1,2,3 -n 8 --batch 2
inv generate-t2 -- generate --model models/t2 -n 8
inv generate-l2 -- generate --model models/tiny-l2 -n 8 --seed 5
inv generate-layers-opt -- generate --layers 2 -n 8
inv generate-sampled -- generate --model synth:tiny --temperature 0.8 --top-k 50 --top-p 0.9 --sample-seed 7 -n 16 \
  --batch 3
inv generate-stop -- generate --stop 426,209 --tokens 1,2,3 -n 16 --batch 2
inv generate-json -- generate --tokens 1,2,3 -n 4 --batch 2 --json
inv generate-tp2-json -- generate --path cpu-ref:tp2 -n 4 --json
inv generate-tp4-dcp -- generate --path cpu-ref:tp4:dcp -n 16 --batch 4
inv generate-tp2-ep -- generate --path cpu-ref:tp2:ep -n 16 --batch 4
inv generate-tp4-opt -- generate --tp 4 -n 16 --batch 4
inv generate-small -- generate --model synth:small -n 2
inv trace-latency-name -- trace --model synth:tiny --path latency -n 4
inv trace-cpu -- trace --model synth:tiny -n 3
inv trace-tp2-dcp -- trace --path cpu-ref:tp2:dcp -n 2 --batch 2
inv kernels-rmsnorm-json file:k-rmsnorm.json -- kernels --op rmsnorm --preset tiny --json k-rmsnorm.json
inv kernels-router-edge -- kernels --op router --preset edge --batch 1,3
inv kernels-sample -- kernels --op sample --seeds 2 --seed 3
inv kernels-quick-failures -- kernels --quick --preset tiny --seeds 1 --failures-only
inv kernels-test-lse -- kernels --path test --op lse_combine
inv kernels-test-rmsnorm -- kernels --path test --op rmsnorm --preset tiny
inv kernels-test-allreduce -- kernels --path test --op allreduce_add_rmsnorm --preset tiny
inv kernels-tp2 -- kernels --tp 2
inv kernels-variant -- kernels --op allreduce --variant threads --preset tiny
inv diverge-readme file:d-readme.json -- diverge --model synth:tiny --paths cpu-ref,cpu-ref:tp2,cpu-ref:tp4:dcp,cpu-ref:tp2:ep \
  --batch 1,4 --context 0,128 --tokens 4 --json d-readme.json
inv diverge-ragged-spec -- diverge --paths cpu-ref,cpu-ref:tp2 --batch 4 --context 256 --ragged --spec 3 --tokens 2
inv diverge-zipf-alt -- diverge --paths cpu-ref,cpu-ref:tp2 --batch 4 --context 32 --routing zipf:1.5 \
  --alternate-natural --tokens 4
inv diverge-uniform -- diverge --paths cpu-ref,cpu-ref:tp2 --routing uniform --tokens 4
inv diverge-baseline -- diverge --paths cpu-ref,cpu-ref:tp2,cpu-ref:tp4 --baseline cpu-ref:tp2 --batch 2 --tokens 8
inv diverge-fail file:d-fail.json -- diverge --paths cpu-ref,cpu-ref:tp2 --max-kld 1e-30 --tokens 2 --json d-fail.json
inv diverge-sizes -- diverge --paths cpu-ref,cpu-ref:tp2 --context 1k --tokens 2 --seed 4 --threads 1
inv eval-mrcr file:e-mrcr.json -- eval mrcr --paths cpu-ref,cpu-ref:tp2 --bins 256,1k --needles 2,8 --samples 2 \
  --json e-mrcr.json
inv eval-mrcr-model-dir -- eval mrcr --model models/mrcr --bins 256 --needles 2 --samples 1 --batch 2
inv eval-mrcr-hard -- eval mrcr --bins 256 --needles 4 --samples 2 --cos 0.99 --gap 0.5 --answer-logit 2 --min-score 0.5
inv eval-mrcr-export file:mrcr-prompts.json -- eval mrcr --bins 256 --needles 2 --samples 1 \
  --export-prompts mrcr-prompts.json
inv eval-chain file:e-chain.json -- eval chain --paths cpu-ref,cpu-ref:tp2 --hops 16,64 --samples 2 --json e-chain.json
inv eval-chain-sampled -- eval chain --paths cpu-ref,cpu-ref:tp2 --hops 64 --samples 2 --temperature 0.7 --sample-seed 3
inv eval-chain-export file:chain-prompts.json -- eval chain --hops 16 --samples 1 --export-prompts chain-prompts.json
inv features-tp2 file:f-tp2.json -- features --path cpu-ref:tp2 --full-ctx 512 --json f-tp2.json
inv features-dcp-floor -- features --path cpu-ref:tp4:dcp --ref cpu-ref --floor cpu-ref:tp2 --full-ctx 256
inv features-ep -- features --path cpu-ref:tp2:ep --full-ctx 256 --kld-tol 0.001 --margin-eps 0.01 --seed 2

# ============================================================ 8. sweeps (timing figures masked)
sh_step routing-trace '
printf "# tiny: 16 experts, top-4\n[[0,1,2,3],[4,5,6,7]]\n[[8,9,10,11],[12,13,14,15]]\n" > routing.jsonl
printf "[[0,1,2,99]]\n" > routing-bad.jsonl'
inv sweep-readme file:sw-readme.json -- sweep --model synth:tiny --paths cpu-ref,cpu-ref:tp2 --batch 1,4 --context 64,256 \
  --steps 4 --warmup 1 --membw-bytes 64m --no-progress --json sw-readme.json
inv sweep-spec -- sweep --paths cpu-ref,cpu-ref:tp2 --batch 1,4 --context 64 --steps 3 --warmup 1 --spec K=3,AL=2 \
  --membw-bytes 64m --no-progress
inv sweep-prefill-repeat file:sw-repeat.json -- sweep --paths cpu-ref --workload prefill+decode --batch 2 --context 128 \
  --steps 3 --warmup 1 --routing uniform@fixed --repeat 2 --membw-bytes 64m --no-progress --json sw-repeat.json
inv sweep-zipf-peer -- sweep --paths cpu-ref --batch 1 --context 64 --steps 3 --warmup 1 --routing zipf:1.5 \
  --peer sw-readme.json --membw-bytes 64m --no-progress
inv sweep-trace -- sweep --paths cpu-ref --batch 2 --context 32 --steps 3 --warmup 1 --routing trace:routing.jsonl \
  --membw-bytes 64m --no-progress
inv sweep-trace-bad -- sweep --paths cpu-ref --routing trace:routing-bad.jsonl
inv sweep-k2-layers -- sweep --model synth:k2-slice --layers 1 --paths cpu-ref --batch 1 --context 64 --steps 1 \
  --warmup 0 --membw-bytes 64m --no-progress --dry-run
inv sweep-not-fit -- sweep --paths cpu-ref:tp3,cpu-ref --batch 1 --context 32 --steps 2 --warmup 0 --membw-bytes 1m \
  --no-progress

# ============================================================ 9. plans, bundles, verify, report, compare, history
inv run-smoke-default -- run
inv run-smoke-seed1 run:runs/smoke-s1 bundle:runs/smoke-s1.vouch.tar.gz -- run --set seed=1 --out runs/smoke-s1
sh_step smoke-default-dir 'd=$(ls -d vouch-results/smoke-* 2>/dev/null | head -1); [ -n "$d" ] && mv "$d" runs/smoke-default && mv "$d.vouch.tar.gz" runs/smoke-default.vouch.tar.gz'
inv verify-smoke-default-dir -- verify runs/smoke-default
inv run-pr run:runs/pr bundle:runs/pr.vouch.tar.gz -- run --plan pr --out runs/pr
inv run-det-a run:runs/det-a bundle:runs/det-a.vouch.tar.gz -- run --plan plans/det.json --out runs/det-a
inv run-det-b run:runs/det-b -- run --plan plans/det.json --out runs/det-b
inv run-det-c-failfast run:runs/det-c -- run --plan plans/det.json --set max_kld=1e-30 --fail-fast --no-bundle \
  --out runs/det-c
inv run-det-paths run:runs/det-p -- run --plan plans/det.json --paths cpu-ref,cpu-ref:tp4:dcp --model synth:tiny \
  --no-bundle --out runs/det-p
inv run-refuse-existing -- run --plan plans/det.json --out runs/det-a
inv run-resume-complete -- run --resume runs/det-a
inv run-force-dry -- run --plan smoke --dry-run --gpu-mem 1G --force
inv bundle-det-c bundle:runs/det-c.vouch.tar.gz -- bundle runs/det-c --json
inv bundle-det-a-out bundle:det-a-copy.vouch.tar.gz -- bundle runs/det-a --out det-a-copy.vouch.tar.gz --json
inv verify-det-a -- verify runs/det-a.vouch.tar.gz
inv verify-det-a-json -- verify runs/det-a --json
inv verify-det-a-quiet -- verify runs/det-a.vouch.tar.gz --quiet
inv verify-smoke -- verify runs/smoke-s1.vouch.tar.gz
inv verify-pr -- verify runs/pr.vouch.tar.gz --json
inv verify-det-c -- verify runs/det-c
sh_step tamper '
cp -r runs/det-a runs/det-tampered
"$PY" -c "
import json
p = \"runs/det-tampered/results.json\"
d = json.load(open(p))
for r in d[\"records\"]:
    if r[\"suite\"] == \"diverge\":
        r[\"metrics\"][0][\"value\"] *= 2
        break
json.dump(d, open(p, \"w\"), indent=1)
"
cp -r runs/det-a runs/det-tampered2 && echo extra >> runs/det-tampered2/plan.json
printf "not a bundle" > fake.vouch.tar.gz'
inv verify-tampered-value -- verify runs/det-tampered
inv verify-tampered-file -- verify runs/det-tampered2 --json
inv verify-fake-bundle -- verify fake.vouch.tar.gz
inv report-det-a -- report runs/det-a.vouch.tar.gz
inv report-det-c -- report runs/det-c --bundle-url https://example.invalid/b.tgz --report-url https://example.invalid/r
inv report-det-a-files file:det-a.md file:det-a.html -- report runs/det-a --md det-a.md --html det-a.html
inv report-smoke -- report runs/smoke-s1.vouch.tar.gz
inv report-pr -- report runs/pr.vouch.tar.gz
inv report-fake -- report fake.vouch.tar.gz
inv compare-det-a-b -- compare runs/det-a runs/det-b.vouch.tar.gz
inv compare-det-a-c file:cmp-ac.md -- compare runs/det-a runs/det-c --md cmp-ac.md
inv compare-det-a-c-json -- compare runs/det-a.vouch.tar.gz runs/det-c --json
inv compare-det-a-p -- compare runs/det-a runs/det-p --threshold 0.2
inv compare-det-a-smoke -- compare runs/det-a runs/smoke-s1
inv compare-tampered -- compare runs/det-a runs/det-tampered
inv publish-dry -- publish runs/det-a.vouch.tar.gz --pr owner/repo#12 --dry-run --bundle-url https://example.invalid/b
inv publish-dry-status -- publish runs/det-a.vouch.tar.gz --pr owner/repo#12 --status --dry-run
inv publish-no-token -- publish runs/det-a.vouch.tar.gz --pr owner/repo#12
inv publish-bad-pr -- publish runs/det-a.vouch.tar.gz --pr nonsense --dry-run
inv history -- history
inv history-json -- history --json
inv history-plan -- history --plan smoke --limit 1
inv history-metric -- history --metric kld --limit 3
hw=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["hardware"]["key"])' \
  "$SCR/runs/det-a/manifest.json" 2>/dev/null)
inv history-baseline -- history baseline --plan plans/det.json --hardware "$hw" --json
inv history-baseline-none -- history baseline --plan h200 --hardware nosuch

# ============================================================ 10. serving
serve_start serve-tiny --model synth:tiny --seed 1
  http serve-api-health GET /health
  http serve-api-models GET /v1/models
  http serve-api-completion POST /v1/completions '{"model": "synth:tiny", "prompt": [1, 2, 3], "max_tokens": 6, "temperature": 0}'
  http serve-api-completion-logprobs POST /v1/completions \
    '{"model": "synth:tiny", "prompt": [5, 6, 7, 8], "max_tokens": 3, "temperature": 0, "logprobs": 2, "stop_token_ids": [999]}'
  http serve-api-completion-stream POST /v1/completions \
    '{"model": "synth:tiny", "prompt": [1, 2], "max_tokens": 4, "temperature": 0, "stream": true, "stream_options": {"include_usage": true}}'
  http serve-api-completion-seeded POST /v1/completions \
    '{"model": "synth:tiny", "prompt": [9, 9], "max_tokens": 8, "temperature": 1.0, "top_k": 20, "seed": 11}'
  http serve-api-completion-choice POST /v1/completions \
    '{"model": "synth:tiny", "prompt": [3], "max_tokens": 4, "temperature": 0, "structured_outputs": {"choice": [[5, 6], [7, 8, 9]]}}'
  http serve-api-max-tokens-0 POST /v1/completions '{"model": "synth:tiny", "prompt": [1, 2, 3], "max_tokens": 0}'
  http serve-api-n2 POST /v1/completions '{"model": "synth:tiny", "prompt": [1], "max_tokens": 2, "n": 2}'
  http serve-api-wrong-model POST /v1/completions '{"model": "nosuch", "prompt": [1], "max_tokens": 2}'
  http serve-api-text-prompt POST /v1/completions '{"model": "synth:tiny", "prompt": "hello", "max_tokens": 2}'
  http serve-api-bad-json POST /v1/completions '{"model": '
  http serve-api-not-found GET /nosuch
  inv sweep-server file:ss.json -- sweep --server "$URL" --concurrency 1,4 --input-len 32 --output-len 16 --json ss.json
  inv sweep-server-poisson -- sweep --server "$URL" --concurrency 2 --input-len 16 --output-len 8 --rate poisson:50 \
    --slo ttft:500,tpot:50
  sh_step mooncake 'printf "%s\n" "{\"timestamp\": 0, \"input_length\": 32, \"output_length\": 8, \"hash_ids\": [1]}" "{\"timestamp\": 20, \"input_length\": 48, \"output_length\": 8, \"hash_ids\": [1, 2]}" "{\"timestamp\": 40, \"input_length\": 16, \"output_length\": 4, \"hash_ids\": [3]}" > mooncake.jsonl'
  inv sweep-server-trace -- sweep --server "$URL" --trace mooncake.jsonl --trace-block 16
  inv sweep-server-sessions file:sessions.jsonl -- sweep --server "$URL" \
    --sessions gen:sessions=2,turns=2,input=16,delta=8,output=8,pause=10,gap=10 --sessions-out sessions.jsonl --seed 2
  inv sweep-server-wrong-model -- sweep --server "$URL" --server-model nosuch --concurrency 1 --num-prompts 1
  inv features-server file:fs.json -- features --server "$URL" --json fs.json
  inv diverge-server file:ds.json -- diverge --paths cpu-ref --server "$URL" --batch 1,4 --tokens 8 --json ds.json
  inv diverge-server-context -- diverge --paths cpu-ref --server "$URL" --context 64
  inv eval-mrcr-server-wrong-model -- eval mrcr --paths cpu-ref --server "$URL" --bins 256 --needles 2 --samples 1
  http serve-api-metrics GET /metrics
serve_stop
serve_start serve-mrcr --model synth:recall-mrcr
  inv eval-mrcr-server -- eval mrcr --paths cpu-ref --server "$URL" --bins 256,1k --needles 2 --samples 1 --batch 4
  inv eval-mrcr-server-alone -- eval mrcr --server "$URL" --bins 256 --needles 2,4 --samples 1 --batch 2
serve_stop
serve_start serve-chain --model synth:recall-chain --max-seqs 4
  inv eval-chain-server -- eval chain --paths cpu-ref --server "$URL" --hops 16,64 --samples 2 --batch 2
  inv eval-chain-server-sampled -- eval chain --server "$URL" --hops 16 --samples 2 --temperature 0.7 --sample-seed 1
serve_stop
serve_start serve-spec --model synth:tiny --spec K=3,AL=2 --max-seqs 4 --max-batched-tokens 64
  inv sweep-server-spec -- sweep --server "$URL" --concurrency 2 --input-len 16 --output-len 8
  http serve-spec-metrics GET /metrics
serve_stop
serve_start serve-tp2 --path cpu-ref:tp2 --model models/tiny --served-model-name tiny --max-ctx 512
  http serve-tp2-models GET /v1/models
  http serve-tp2-completion POST /v1/completions '{"model": "tiny", "prompt": [1, 2, 3], "max_tokens": 6, "temperature": 0}'
  http serve-tp2-too-long POST /v1/completions "{\"model\": \"tiny\", \"prompt\": [$(seq -s, 1 600)], \"max_tokens\": 2}"
serve_stop

total=$(awk "BEGIN { print $(date +%s.%N) - $total_t0 }")
printf 'golden-cli: %d invocations, %d files in %s, %.0f s\n' "$n" "$(ls "$OUT" | wc -l)" "$OUT" "$total"
