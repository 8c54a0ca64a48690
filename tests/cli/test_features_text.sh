#!/usr/bin/env bash
# vouch features --server --ref-server (suites/features/features_text.c) against a real engine no one
# here wrote: scripts/peers/llamacpp/server.mjs over llama.cpp, serving one tiny checkpoint exported with
# DeepSeek-V3's tokenizer as f32, twice (the reference and its twin: the A/A pair, every check pass or
# undecided with a reason, exit 0), then the twin behind tests/cli/feature_defect_proxy.py, whose URL
# path prefix plants one misbehaviour each (stop strings ignored, schema ignored, max_tokens off by one,
# stream differs, logprobs shifted, n ignored): the check named for it must fail, exit 1. Then bad
# input. Set-up as tests/cli/test_diverge_text.sh (skipped, 77, without node/npm; FAILS in CI).
. "$VOUCH_SRC/tests/cli/counters.sh"
. "$VOUCH_SRC/tests/cli/llamacpp_text_lib.sh"
"$VOUCH" model synth --preset tiny --seed 1 --out "$t/m" --set vocab_size=129280 --set hidden_size=128 >/dev/null || bad "synth"
"$VOUCH" model export --gguf "$t/m" --dtype f32 --tokenizer "$tok" -o "$t/f32.gguf" >/dev/null && ok || bad "export f32"

start ref "$t/f32.gguf"
start twin "$t/f32.gguf"
R=$(url ref) && W=$(url twin) && ok || { bad "servers did not start"; finish test_features_text; exit; }
python3 "$VOUCH_SRC/tests/cli/feature_defect_proxy.py" "$t/proxy.port" "$W" &
pids+=($!)
for _ in $(seq 1 100); do [ -s "$t/proxy.port" ] && break; sleep 0.1; done
P="http://127.0.0.1:$(cat "$t/proxy.port")"

# run NAME URL [ARGS]: features of URL against the reference, exit code in $rc, stdout in $t/NAME.out
run() {
  local n=$1 u=$2; shift 2
  "$VOUCH" features --server "$u" --ref-server "$R" --json "$t/$n.json" "$@" >"$t/$n.out" 2>"$t/$n.err"
  rc=$?
}
# status NAME CHECK: the status of check CHECK's record in $t/NAME.json
status() {
  python3 -c 'import json,sys; print([r["status"] for r in json.load(open(sys.argv[1]))["records"] if r["case_id"] == sys.argv[2]][0])' \
    "$t/$1.json" "$2" 2>/dev/null
}
# A/A: the twin; every check pass, or undecided / not_supported with its reason; none fails, none is missing
run aa "$W"
[ "$rc" -eq 0 ] && ok || bad "A/A exit $rc, want 0: $(tail -3 "$t/aa.err") $(grep -E 'FAIL|error' "$t/aa.out")"
python3 - "$t/aa.json" <<'PY' && ok || bad "A/A: records"
import json, sys
rs = json.load(open(sys.argv[1]))["records"]
assert len(rs) == 14, len(rs)
for r in rs:
    assert r["status"] in ("pass", "undecided", "not_supported"), (r["case_id"], r["status"])
    assert r["status"] == "pass" or r.get("reason"), r["case_id"]
PY
sed 's/^/aa: /' "$t/aa.out"
# each planted defect: the check named for it fails (only the checks named run: --checks)
for d in stop:stop_strings schema:json_schema schema:regex schema:choice maxtok:max_tokens stream:stream \
         lpshift:logprobs n:n_choices; do
  def=${d%%:*} check=${d#*:}
  if [ ! -f "$t/$def.rc" ]; then
    [ "$def" = schema ] && checks=json_schema,regex,choice || checks=$check
    run "$def" "$P/$def" --checks "$checks"
    echo "$rc" >"$t/$def.rc"
  fi
  [ "$(status "$def" "$check")" = fail ] && ok || bad "defect $def: $check is $(status "$def" "$check"), want fail: $(grep " $check " "$t/$def.out")"
  [ "$(cat "$t/$def.rc")" = 1 ] && ok || bad "defect $def: exit $(cat "$t/$def.rc"), want 1"
  grep " $check " "$t/$def.out" | sed "s/^/$def: /"
done

# bad input: one line, the usage exit code (2) or 1
expect_error 2 "option --server URL is required" "$VOUCH" features --ref-server "$R"
expect_error 2 "--struct-style" "$VOUCH" features --server "$W" --ref-server "$R" --struct-style x
expect_error 2 "'bogus' is not a check" "$VOUCH" features --server "$W" --ref-server "$R" --checks stop_strings,bogus
expect_error 2 "--timeout" "$VOUCH" features --server "$W" --ref-server "$R" --timeout 0
expect_error 1 "nope" "$VOUCH" features --server "$W" --ref-server "$R" --server-model nope
expect_error 1 "--ref-server" "$VOUCH" features --server "$W" --ref-server http://127.0.0.1:9
# under vouch run: both servers' identities in the run's manifest
run_manifest inrun "$W" "$R" features --server "$W" --ref-server "$R" --checks max_tokens
for n in ref twin; do kill -0 "$(cat "$t/$n.pid")" 2>/dev/null && ok || bad "server $n died: $(tail -3 "$t/$n.log")"; done
finish test_features_text
