# Sourced by the vouch serve tests: start_server NAME ARGS... starts `vouch serve --port 0 ARGS` in
# the background (log $t/NAME.log), waits until it listens and sets $url (http://127.0.0.1:PORT)
# and $spid; stop_server PID sends SIGTERM and checks the exit status. Servers still running at
# exit are stopped by the EXIT trap (their ids only).
servers=()
trap 'for p in "${servers[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$t"' EXIT
start_server() {
  local name=$1; shift
  "$VOUCH" serve --model synth:tiny --threads 1 --port 0 "$@" 2>"$t/$name.log" &
  spid=$!
  servers+=("$spid")
  url=""
  for _ in $(seq 1 300); do
    url=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$t/$name.log" | sed 's/listening on //')
    [ -n "$url" ] && return 0
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.1
  done
  echo "FAIL: vouch serve $* did not start: $(cat "$t/$name.log")" >&2
  exit 1
}
stop_server() {
  kill -TERM "$1"
  wait "$1"
}
