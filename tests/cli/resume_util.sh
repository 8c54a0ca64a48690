# Sourced by the resume tests (after counters.sh): signal_when, a plan run interrupted by a signal
# once its output reaches a count.
# signal_when SIG PLAN DIR COUNT N [ARGS...]: `vouch run --plan PLAN --out DIR ARGS` in the background
# (stdout in DIR.out), sent signal SIG as soon as `COUNT DIR.out` reaches N; $rc: its exit code
signal_when() {
  local sig=$1 plan=$2 dir=$3 count=$4 n=$5 pid
  shift 5
  "$VOUCH" run --plan "$plan" --out "$dir" --no-bundle "$@" >"$dir.out" 2>"$dir.err" &
  pid=$!
  for _ in $(seq 1 1200); do
    [ "$($count "$dir.out")" -ge "$n" ] && break
    sleep 0.02
  done
  kill "$sig" $pid
  wait $pid 2>/dev/null
  rc=$?
}
