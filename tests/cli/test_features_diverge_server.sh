#!/usr/bin/env bash
# vouch features --server and vouch diverge --server (issue 21): a served system under test as the
# subject of the feature checks and as a candidate of the divergence against an in-process reference.
# `vouch serve --path cpu-ref` on synth:tiny (the same seed as the suites' model, loopback only) must
# pass both: every feature check, and in diverge a KLD over its top-20 logprobs within 1e-10 of the
# in-process cpu-ref (float rounding of the logprobs: measured 1.4e-15) with the same greedy tokens.
# A proxy in front of it (tests/cli/serve_bad.py) plants one defect per URL prefix; each is caught
# by the check named for it, and only by the checks that read that feature. Bad servers (refused,
# a model it does not serve, HTTP 500, text without token ids) give a one-line error and exit 1;
# bad options exit 2; the API key and the URL's password appear nowhere.
. "$VOUCH_SRC/tests/cli/counters.sh"
. "$VOUCH_SRC/tests/cli/serve_lib.sh"
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }

# the suites open synth:tiny with --seed 1 (their default), so the server must too
start_server s --path cpu-ref --seed 1 --max-ctx 256 --max-seqs 4
S=$url
python3 "$VOUCH_SRC/tests/cli/serve_bad.py" "$t/bad.port" "$S" 2>"$t/bad.log" &
servers+=("$!")
for _ in $(seq 1 100); do [ -s "$t/bad.port" ] && break; sleep 0.1; done
B="http://127.0.0.1:$(cat "$t/bad.port")"
F=(features --threads 1)
D=(diverge --threads 1 --tokens 16)

# checks FILE WANT: every features record is of the server, with its URL and model, and its status is
# the one WANT gives by check name ("*" for the rest)
checks() {
  python3 - "$@" <<'PY'
import json, sys
rs = json.load(open(sys.argv[1]))["records"]
want = dict(kv.split("=") for kv in sys.argv[2].split(","))
names = ["max_tokens", "stop_tokens", "min_tokens", "seeded_sampling", "logprobs", "structured", "max_model_len"]
assert [r["case_id"] for r in rs] == names, [r["case_id"] for r in rs]
for r in rs:
    assert r["suite"] == "features" and r["path"] == "server:synth:tiny", r
    assert r["params"]["server"].startswith("http://127.0.0.1:") and r["params"]["server_model"] == "synth:tiny", r
    assert r["params"]["reference"] == "cpu-ref" and r["params"]["bound_source"], r
    st = want.get(r["case_id"], want["*"])
    assert r["status"] == st, (r["case_id"], r["status"], st, r["params"]["detail"])
PY
}

# the correct server: every check passes, directly and through the proxy that changes nothing
for u in "$S" "$B/ok"; do
  "$VOUCH" "${F[@]}" --server "$u" --json "$t/f.json" >"$t/f.out" 2>"$t/f.err" && checks "$t/f.json" "*=pass" \
    && ok || bad "features --server $u: $(cat "$t/f.err" "$t/f.out")"
done
grep -q "^  max_model_len   pass .*max_model_len 256: 255 prompt tokens + 1 served; 256 + 1 refused" "$t/f.out" \
  && ok || bad "features report: $(cat "$t/f.out")"

# diverge: served cpu-ref against in-process cpu-ref, 2 points; with a baseline (cpu-ref:tp2, the
# same fp32 computation in another reduction order) the bound is k^2 x its KLD: still passes
"$VOUCH" "${D[@]}" --paths cpu-ref --server "$S" --batch 1,2 --json "$t/d.json" >"$t/d.out" 2>"$t/d.err" \
  && "$VOUCH" "${D[@]}" --paths cpu-ref,cpu-ref:tp2 --baseline cpu-ref:tp2 --server "$S" --json "$t/db.json" >"$t/db.out" 2>&1 \
  && python3 - "$t/d.json" "$t/db.json" <<'PY' && ok || bad "diverge --server: $(cat "$t/d.err" "$t/d.out" "$t/db.out")"
import json, sys
rs = json.load(open(sys.argv[1]))["records"]
assert [(r["case_id"], r["path"]) for r in rs] == [("b1_c0_t16_vs_cpu-ref", "server:synth:tiny"),
                                                   ("b2_c0_t16_vs_cpu-ref", "server:synth:tiny")], rs
for r in rs:
    m = {x["name"]: x for x in r["metrics"]}
    assert r["status"] == "pass" and m["kld"]["value"] < 1e-10 and m["same_top_pct"]["value"] == 100, r
    assert m["logprobs_given_min"]["value"] == 20 and m["max_dlogprob_topk"]["value"] < 1e-5, m
    assert len(m["kld"]["samples"]) == 16 * int(r["params"]["batch"]), m["kld"]
    assert r["params"]["server"].startswith("http://127.0.0.1:") and r["params"]["server_logprobs"] == 20, r
    assert "lower bound" in r["params"]["bound_source"], r
b = {r["path"]: r for r in json.load(open(sys.argv[2]))["records"]}
assert b["server:synth:tiny"]["status"] == "pass" and "floor: baseline cpu-ref:tp2" in b["server:synth:tiny"]["params"]["bound_source"], b
PY
# a point the API cannot express (a fill_cache context) is not supported for the server, with or
# without other compared paths
"$VOUCH" "${D[@]}" --paths cpu-ref,cpu-ref:tp2 --context 8 --server "$S" --json "$t/dc.json" >"$t/dc.out" 2>&1 \
  && "$VOUCH" "${D[@]}" --paths cpu-ref --context 0,8 --server "$S" --json "$t/dc1.json" >>"$t/dc.out" 2>&1 \
  && python3 - "$t/dc.json" "$t/dc1.json" <<'PY' && ok || bad "diverge --server --context: $(cat "$t/dc.out")"
import json, sys
st = {r["path"]: (r["status"], r.get("reason", "")) for r in json.load(open(sys.argv[1]))["records"]}
assert st["cpu-ref:tp2"][0] == "pass" and st["server:synth:tiny"][0] == "not_supported" and "context 0 only" in st["server:synth:tiny"][1], st
st = [(r["case_id"], r["status"]) for r in json.load(open(sys.argv[2]))["records"]]
assert st == [("b1_c0_t16_vs_cpu-ref", "pass"), ("b1_c8_t16_vs_cpu-ref", "not_supported")], st
PY

# planted defects: each fails the check named for it, with a line naming it, exit 1; the rest pass
for d in "nostop:stop_tokens=fail,min_tokens=fail:stop_tokens" "nomin:min_tokens=fail:min_tokens" \
         "noseed:seeded_sampling=fail:seeded_sampling" "nostruct:structured=fail:structured" \
         "fewlp:logprobs=fail:logprobs" "bigid:logprobs=fail:logprobs" "shortlen:max_model_len=fail:max_model_len" \
         "badlp::"; do
  mode=${d%%:*} rest=${d#*:} want=${d#*:}; want=${want%:*} name=${rest#*:}
  "$VOUCH" "${F[@]}" --server "$B/$mode" --json "$t/p.json" >"$t/p.out" 2>"$t/p.err"; rc=$?
  [ "$rc" -eq "$([ -n "$name" ] && echo 1 || echo 0)" ] && checks "$t/p.json" "${want:+$want,}*=pass" \
    && { [ -z "$name" ] || grep -q "^  $name *fail " "$t/p.out"; } && ok || bad "features /$mode: rc $rc $(cat "$t/p.err" "$t/p.out")"
done
# wrong tokens (every id + 1) fail the greedy checks of features
"$VOUCH" "${F[@]}" --server "$B/wrongtok" >"$t/p.out" 2>&1; rc=$?
[ "$rc" -eq 1 ] && grep -q "^  max_tokens *fail .*tokens differ over the reference's decided prefix" "$t/p.out" \
  && ok || bad "features /wrongtok: rc $rc $(cat "$t/p.out")"
# wrong logprobs (every logprob x 1.25: a consistent distribution, so only the reference can tell),
# fewer than asked and wrong tokens fail diverge, each with a line naming the rule
for d in "badlp:mean KLD over its top-k .* > bound 0.01 (kld)" "fewlp:2 top logprobs given of 20 asked (server_logprobs_given)" \
         "wrongtok:its greedy token left the reference's argmax on 16 of 16 decided rows"; do
  "$VOUCH" "${D[@]}" --paths cpu-ref --server "$B/${d%%:*}" --json "$t/p.json" >"$t/p.out" 2>"$t/p.err"; rc=$?
  [ "$rc" -eq 1 ] && grep -q "server:synth:tiny FAIL: ${d#*:}" "$t/p.out" && python3 - "$t/p.json" <<'PY' \
    && ok || bad "diverge /${d%%:*}: rc $rc $(cat "$t/p.err" "$t/p.out")"
import json, sys
(r,) = json.load(open(sys.argv[1]))["records"]
assert r["status"] == "fail" and r["path"] == "server:synth:tiny", r
PY
done

# bad servers: one line on stderr, exit 1
free_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for cmd in "${F[*]}" "${D[*]} --paths cpu-ref"; do
  read -r -a c <<<"$cmd"
  expect_error 1 "cannot connect to http://127.0.0.1:$free_port/v1/models" "$VOUCH" "${c[@]}" --server "http://127.0.0.1:$free_port"
  expect_error 1 "serves no model 'other' (it serves: synth:tiny)" "$VOUCH" "${c[@]}" --server "$S" --server-model other
  # another synthesized checkpoint (the server's seed 1, the suite's 0): refused before any request,
  # instead of failing the correct server's answers as a different model's
  expect_error 1 "model 'synth:tiny' is synthesized with seed 1 and 3 layers, this suite opened synth:tiny (seed 0, 3 layers): not the same checkpoint" \
    "$VOUCH" "${c[@]}" --server "$S" --seed 0
done
expect_error 1 "server $B/500: check max_tokens: HTTP 500 from $B/500/v1/completions: the engine is on fire" \
  "$VOUCH" "${F[@]}" --server "$B/500"
expect_error 1 "server $B/text: check max_tokens: the server returned text, not token ids" "$VOUCH" "${F[@]}" --server "$B/text"
expect_error 1 "server $B/500: 16 of 16 requests failed (not retried), the first (step 0, sequence 0): HTTP 500" \
  "$VOUCH" "${D[@]}" --paths cpu-ref --server "$B/500"
expect_error 1 "server $B/text: 16 of 16 requests failed .*the server returned text, not token ids" \
  "$VOUCH" "${D[@]}" --paths cpu-ref --server "$B/text"
expect_error 1 "server $B/bigid: 16 of 16 requests failed .*logprobs.top_logprobs names token_id:99999, outside the vocabulary of 1024" \
  "$VOUCH" "${D[@]}" --paths cpu-ref --server "$B/bigid"
# logprobs that hold more than a distribution's mass (every one 2.5 nats high, the argmax intact): refused
# by name, where the partition KLD would have come out negative and passed
expect_error 1 "server $B/hotlp: 16 of 16 requests failed .*logprobs.top_logprobs hold a mass of [0-9.]*, above 1" \
  "$VOUCH" "${D[@]}" --paths cpu-ref --server "$B/hotlp"

# credentials stay out: the key and the URL's user:password are in no output and no record
host=${B#http://}
VOUCH_SERVER_API_KEY=sekrit-key "$VOUCH" "${F[@]}" --server "http://u:pw-secret@$host/ok" --json "$t/k.json" >"$t/k.out" 2>&1 \
  && VOUCH_SERVER_API_KEY=sekrit-key "$VOUCH" "${D[@]}" --paths cpu-ref --server "http://u:pw-secret@$host/ok" \
       --json "$t/k2.json" >>"$t/k.out" 2>&1 \
  && grep -q "server http://$host/ok" "$t/k.out" && ! grep -q "sekrit-key\|pw-secret" "$t/k.out" "$t/k.json" "$t/k2.json" \
  && ok || bad "credentials: $(cat "$t/k.out")"

# under vouch run: each server's identity (/v1/models, /version: 404 here) in the run's manifest
# (features through the proxy, diverge direct: two entries); the key and the URL's password nowhere,
# the console included (vouch run echoes each step's arguments there, redacted: CI logs are published)
cat >"$t/plan.json" <<EOF2
{"name": "srv", "description": "test", "vars": {}, "steps": [
 {"suite": "features", "args": ["--threads", "1", "--server", "http://u:pw-secret@$host/ok"]},
 {"suite": "diverge", "args": ["--threads", "1", "--tokens", "16", "--paths", "cpu-ref", "--server", "$S"]}]}
EOF2
VOUCH_SERVER_API_KEY=sekrit-key "$VOUCH" run --plan "$t/plan.json" --out "$t/run" >"$t/run.out" 2>&1 &&
  python3 - "$t/run/manifest.json" "http://$host/ok" "$S" <<'PY' && ! grep -rq "sekrit-key\|pw-secret" "$t/run" && ! grep -q "sekrit-key\|pw-secret" "$t/run.out" &&
import json, sys
s = json.load(open(sys.argv[1]))["servers"]
assert [(x["role"], x["url"], x["model"]) for x in s] == [("server", sys.argv[2], "synth:tiny"), ("server", sys.argv[3], "synth:tiny")], s
for x in s:
    assert json.loads(x["v1_models"])["data"][0]["id"] == "synth:tiny" and x["version"] is None and x["version_body"] is None, x
PY
  ok || bad "vouch run: the servers in the manifest: $(cat "$t/run.out" "$t/run/manifest.json")"

# bad options: exit 2
expect_error 2 "option --server-model needs --server URL" "$VOUCH" features --path cpu-ref --server-model x
expect_error 2 "option --server: the server is the subject: no --path" "$VOUCH" features --path cpu-ref --server "$S"
expect_error 2 "option --server-model needs --server URL" "$VOUCH" diverge --paths cpu-ref,cpu-ref:tp2 --server-model x
expect_error 2 "option --server-logprobs: 21 is out of range \[1, 20\]" "$VOUCH" diverge --paths cpu-ref --server "$S" --server-logprobs 21
expect_error 2 "or the reference and --server" "$VOUCH" diverge --paths cpu-ref
expect_error 2 "expected an http:// or https:// URL" "$VOUCH" diverge --paths cpu-ref --server localhost:8000
# a bad --ref-server is named as --ref-server (not "--ref-server: --server ...")
expect_error 2 "error: --ref-server 'ftp://x': expected an http" "$VOUCH" diverge --server http://127.0.0.1:9 --ref-server ftp://x
expect_error 2 "error: --ref-server: no host after the scheme" "$VOUCH" features --server http://127.0.0.1:9 --ref-server http://

finish
