#!/usr/bin/env bash
# Planted-defect corpus (defects/*.patch, issue 17): builds one vouch binary per defect and runs a
# plan on each, to measure which check catches which defect.
#
#   scripts/plant-defects.sh build OUTDIR [--only GLOB,..] [--base REV]
#       For each defects/NN-name.patch: applies it alone to a work tree of REV (HEAD), builds the vouch
#       target with CUDA (sm_90a, RelWithDebInfo; one build directory reused, so only the patched
#       translation unit recompiles), copies the binary to OUTDIR/vouch-NN-name. The unpatched
#       build is OUTDIR/vouch-00-main. Then packs OUTDIR.tar.xz (xz, one 192 MiB dictionary: the
#       near-identical binaries cost a few MB together). The work tree and build directory stay in
#       OUTDIR.work (a registered git worktree; reused by the next build, removed by `clean`).
#   scripts/plant-defects.sh run BINDIR|TARBALL OUT [--plan pr] [--set k=v]... [--only GLOB,..]
#                                [--timeout SECONDS (900)] [--gpus all|0,1,..] [--no-control]
#       Runs `BIN run --plan PLAN --out OUT/NN-name --no-bundle` (plus --fail-fast when the binary
#       offers it) for every vouch-* binary, vouch-00-main first; with --gpus one binary per GPU at
#       a time (CUDA_VISIBLE_DEVICES), else one after another; --no-control leaves out vouch-00-main
#       (it ran in an earlier call: split the corpus over calls with --only, same OUT). Writes
#       OUT/detection.tsv, one row per binary run into OUT by this call or an earlier one:
#       defect, exit code, verdict, the first failing step and record (suite/case_id, failed checks,
#       reason), failing record count, wall seconds. Needs only bash, python3 and the binaries
#       (no compiler): this is what runs on the GPU machine.
#   scripts/plant-defects.sh clean OUTDIR
#       Removes OUTDIR.work's worktree registration and files.
# Exit: 0 done (build: every patch applied and built; run: main passed), 1 otherwise, 2 usage.
set -euo pipefail

usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
die() { echo "plant-defects: $*" >&2; exit 1; }

repo=$(cd "$(dirname "$0")/.." && pwd)

abspath() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
# matches NAME GLOBS: NAME matches one of the comma-separated globs
matches() {
  local g gs
  IFS=, read -r -a gs <<<"$2"
  for g in "${gs[@]}"; do
    # shellcheck disable=SC2053
    [[ $1 == $g ]] && return 0
  done
  return 1
}

cmd_build() {
  [ $# -ge 1 ] || usage
  local out only='*' base=HEAD
  out=$(abspath "${1%/}"); shift
  while [ $# -gt 0 ]; do
    case $1 in
      --only) only=$2; shift 2 ;;
      --base) base=$2; shift 2 ;;
      *) usage ;;
    esac
  done
  command -v xz >/dev/null || die "xz not found (apt-get install xz-utils)"
  git -C "$repo" rev-parse --git-dir >/dev/null 2>&1 || die "$repo is not a git checkout"
  local head work src bld
  head=$(git -C "$repo" rev-parse --verify "$base^{commit}") || die "--base $base: not a commit"
  work="$out.work"; src="$work/src"; bld="$work/build"
  mkdir -p "$out" "$work"
  if [ -e "$src/.git" ]; then
    git -C "$src" checkout -q --detach "$head"
    git -C "$src" reset -q --hard
  else
    git -C "$repo" worktree add -q --detach "$src" "$head"
  fi
  # The corpus comes from the caller's checkout, the code from REV (e.g. main with the pr plan).
  local patches=()
  for p in "$repo"/defects/[0-9]*.patch; do
    matches "$(basename "$p" .patch)" "$only" && patches+=("$p")
  done
  [ ${#patches[@]} -gt 0 ] || die "no defects/*.patch matches '$only'"
  cmake -S "$src" -B "$bld" -DVOUCH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    >"$work/configure.log" 2>&1 || die "configure failed: $work/configure.log"
  local jobs=${PLANT_JOBS:-2} failed=0 t0
  build_one() { # NAME: builds the work tree as it is now, copies the binary to OUTDIR/vouch-NAME
    t0=$(date +%s)
    if nice cmake --build "$bld" -j"$jobs" --target vouch >"$work/build-$1.log" 2>&1; then
      cp "$bld/vouch" "$out/vouch-$1"
      echo "plant-defects: built vouch-$1 ($(( $(date +%s) - t0 )) s)" >&2
    else
      echo "plant-defects: BUILD FAILED for $1: $work/build-$1.log" >&2
      failed=1
    fi
  }
  build_one 00-main
  for p in "${patches[@]}"; do
    local name; name=$(basename "$p" .patch)
    if git -C "$src" apply "$p"; then
      build_one "$name"
    else
      echo "plant-defects: $name does not apply to $head" >&2
      failed=1
    fi
    git -C "$src" checkout -q -- .
  done
  # Back to the unpatched tree so the next build starts from main's objects.
  t0=$(date +%s)
  nice cmake --build "$bld" -j"$jobs" --target vouch >"$work/build-restore.log" 2>&1 || true
  printf '%s\n' "$head" >"$out/COMMIT"
  local tb="$out.tar.xz"
  t0=$(date +%s)
  tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -9e --lzma2=dict=192MiB -T1 >"$tb.tmp"
  mv "$tb.tmp" "$tb"
  local raw packed nbin
  raw=$(du -cb "$out"/vouch-* | tail -1 | cut -f1)
  nbin=$(find "$out" -maxdepth 1 -name 'vouch-*' | wc -l)
  packed=$(stat -c %s "$tb")
  echo "plant-defects: $tb: $nbin binaries, $((raw / 1048576)) MiB -> $((packed / 1048576)).$(( (packed % 1048576) * 10 / 1048576 )) MiB ($(( $(date +%s) - t0 )) s to pack)" >&2
  return $failed
}

# Runs one binary: run_one BIN OUT GPU (GPU: a CUDA_VISIBLE_DEVICES value, or "" to leave it as it
# is); writes OUT/NAME.row (NAME's detection.tsv row) and OUT/NAME.log (the run's output).
run_one() {
  local b=$1 out=$2 gpu=$3 name dir log ff=() rc t0 t1
  name=${b##*/vouch-}; dir="$out/$name"; log="$out/$name.log"
  rm -rf "$dir"
  # the whole help read before it is searched: `| grep -q` would close the pipe at the first match, and
  # under pipefail the writer's SIGPIPE made the test false at random (defect 09 ran without it once)
  local help; help=$("$b" run --help 2>&1 || true)
  if [[ $help == *--fail-fast* ]]; then ff=(--fail-fast); fi
  echo "plant-defects: $name${gpu:+ (GPU $gpu)}: $b run --plan $plan --out $dir --no-bundle ${ff[*]} ${sets[*]}" >&2
  t0=$(date +%s.%N)
  set +e
  if [ -n "$gpu" ]; then
    CUDA_VISIBLE_DEVICES=$gpu timeout -k 30 "$timeout_s" "$b" run --plan "$plan" --out "$dir" --no-bundle "${ff[@]}" \
      "${sets[@]}" >"$log" 2>&1
  else
    timeout -k 30 "$timeout_s" "$b" run --plan "$plan" --out "$dir" --no-bundle "${ff[@]}" "${sets[@]}" >"$log" 2>&1
  fi
  rc=$?
  set -e
  t1=$(date +%s.%N)
  python3 - "$name" "$rc" "$dir" "$log" "$t0" "$t1" >"$out/$name.row" <<'EOF'
import json, re, sys
name, rc, d, log, t0, t1 = sys.argv[1:7]
def clean(s):
    return re.sub(r'[\t\r\n]+', ' ', str(s)).strip()[:300] or '-'
verdict, rec, checks, reason, nfail = 'no-results', '-', '-', '-', 0
try:
    with open(d + '/results.json') as f:
        res = json.load(f)
    verdict = res.get('verdict') or '?'
    bad = [r for r in res.get('records', []) if r.get('status') in ('fail', 'error')]
    nfail = len(bad)
    if bad:
        r = bad[0]
        rec = '%s/%s [%s]' % (r.get('suite'), r.get('case_id'), r.get('status'))
        checks = ','.join(c.get('name', '?') for c in r.get('checks', []) if not c.get('ok')) or '-'
        reason = r.get('reason') or '-'
except (OSError, ValueError) as e:
    reason = 'results.json unreadable: %s' % e
step = '-'
try:
    with open(log, errors='replace') as f:
        text = f.read()
    m = re.search(r'vouch run: step (\d+) \(([^)]*)\) exited (\d+)', text)
    if m:
        step = 'step %s (%s) exit %s' % m.groups()
        cmd = re.search(r'vouch run: step %s: vouch (.*)' % m.group(1), text)
        if cmd: step += ': ' + cmd.group(1)
    if rc in ('124', '137'):
        step = 'timed out' + ('' if step == '-' else '; ' + step)
except OSError:
    pass
print('\t'.join([name, rc, verdict, clean(step), clean(rec), clean(checks), clean(reason), str(nfail),
                 '%.1f' % (float(t1) - float(t0))]))
EOF
}

cmd_run() {
  [ $# -ge 2 ] || usage
  local bins out only='*' gpus='' control=1
  plan=pr timeout_s=900 sets=() # read by run_one
  bins=$(abspath "${1%/}"); out=$(abspath "${2%/}"); shift 2
  while [ $# -gt 0 ]; do
    case $1 in
      --plan) plan=$2; shift 2 ;;
      --set) sets+=(--set "$2"); shift 2 ;;
      --only) only=$2; shift 2 ;;
      --timeout) timeout_s=$2; shift 2 ;;
      --gpus) gpus=$2; shift 2 ;;
      --no-control) control=0; shift ;;
      *) usage ;;
    esac
  done
  command -v python3 >/dev/null || die "python3 not found"
  mkdir -p "$out"
  if [ -f "$bins" ]; then # a tarball from `build`: unpack it under OUT
    mkdir -p "$out/bin"
    tar -C "$out/bin" -xJf "$bins"
    bins=$(find "$out/bin" -name 'vouch-00-main' -printf '%h\n' | head -1)
    [ -n "$bins" ] || die "$1: no vouch-00-main inside"
  fi
  [ -x "$bins/vouch-00-main" ] || die "$bins/vouch-00-main: missing (the unpatched binary is the control)"
  local list=()
  [ $control = 1 ] && list=("$bins/vouch-00-main")
  for b in "$bins"/vouch-[0-9]*; do
    [ -x "$b" ] || continue
    local n=${b##*/vouch-}
    [ "$n" != 00-main ] && matches "$n" "$only" && list+=("$b")
  done
  [ ${#list[@]} -gt 0 ] || die "no binary to run (--only '$only' matched none and --no-control)"
  if [ "$gpus" = all ]; then
    command -v nvidia-smi >/dev/null || die "--gpus all: nvidia-smi not found"
    gpus=$(nvidia-smi -L | awk '/^GPU [0-9]+:/ {sub(":", "", $2); printf "%s%s", sep, $2; sep = ","}')
    [ -n "$gpus" ] || die "--gpus all: nvidia-smi lists no GPU"
  fi
  # one worker per GPU, each taking every n-th binary in turn (one worker without --gpus)
  local ws=() w i
  IFS=, read -r -a ws <<<"$gpus"
  [ ${#ws[@]} -gt 0 ] || ws=("")
  local nw=${#ws[@]} pids=() p
  for b in "${list[@]}"; do rm -f "$out/${b##*/vouch-}.row"; done
  for ((w = 0; w < nw; w++)); do
    (
      for ((i = w; i < ${#list[@]}; i += nw)); do run_one "${list[$i]}" "$out" "${ws[$w]}"; done
    ) &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || true; done
  local tsv="$out/detection.tsv"
  printf 'defect\texit\tverdict\tfirst_failing_step\tfirst_failing_record\tfailed_checks\treason\tfailing_records\twall_s\n' >"$tsv"
  # this call's binaries, and the rows earlier calls left in OUT (a corpus split over calls)
  for b in "${list[@]}"; do
    local name=${b##*/vouch-}
    [ -s "$out/$name.row" ] || printf '%s\t?\tnot-run\t-\t-\t-\t-\t0\t0\n' "$name" >"$out/$name.row"
  done
  local r
  for r in "$out"/*.row; do cat "$r"; done | sort -t$'\t' -k1,1 >>"$tsv"
  python3 - "$tsv" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter='\t'))
main = rows[0] if rows[0]['defect'] == '00-main' else None
defects = [r for r in rows if r is not main]
caught = [r for r in defects if r['verdict'] != 'pass' or r['exit'] != '0']
w = max(len(r['defect']) for r in rows)
print('\n%-*s  exit  verdict  wall_s  caught by' % (w, 'defect'))
for r in rows:
    by = r['first_failing_record'] if r['first_failing_record'] != '-' else r['first_failing_step']
    if r['failed_checks'] != '-': by += ' {' + r['failed_checks'] + '}'
    print('%-*s  %4s  %-7s  %6s  %s' % (w, r['defect'], r['exit'], r['verdict'], r['wall_s'], by if by != '-' else ''))
print('\ncaught %d / %d defects' % (len(caught), len(defects)))
if main is None:
    print('(control vouch-00-main not run in this call: --no-control)')
elif main['verdict'] != 'pass' or main['exit'] != '0':
    print('\n!!! UNMODIFIED MAIN DOES NOT PASS (exit %s, verdict %s): %s — detections above are not evidence !!!'
          % (main['exit'], main['verdict'], main['first_failing_record']))
    sys.exit(1)
EOF
}

cmd_clean() {
  [ $# -eq 1 ] || usage
  local work; work="$(abspath "${1%/}").work"
  [ -d "$work" ] || exit 0
  [ -e "$work/src/.git" ] && git -C "$repo" worktree remove --force "$work/src"
  rm -rf "$work"
}

[ $# -ge 1 ] || usage
sub=$1; shift
case $sub in
  build) cmd_build "$@" ;;
  run) cmd_run "$@" ;;
  clean) cmd_clean "$@" ;;
  -h|--help|help) usage ;;
  *) usage ;;
esac
