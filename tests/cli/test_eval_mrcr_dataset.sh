#!/usr/bin/env bash
# vouch eval mrcr --dataset --server --ref-server: public-format MRCR rows (made here by
# scripts/mrcr_synth.py) asked of a fake text server (tests/cli/serve_text_fake.py, loopback) that
# answers by reading the conversation. A/A (the same behaviour on both sides, whole or streamed)
# passes with every grade 1; each planted misbehaviour of the candidate is caught by the check named
# for it (random prefix dropped, answers truncated at max_tokens, wrong needle past a context length,
# prompts refused as too long where the reference answers, failing requests); a pair that is not the
# same model (root, max_model_len) is refused before any request; a malformed dataset line is a
# one-line usage error naming the file, line and field. The records verify in a `vouch run` bundle
# whose manifest names both servers, and the API key is sent but written nowhere.
. "$VOUCH_SRC/tests/cli/counters.sh"
servers=()
trap 'for p in "${servers[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$t"' EXIT
python3 "$VOUCH_SRC/scripts/mrcr_synth.py" --out "$t/d.jsonl" --rows 24 --seed 3 || { echo "FAIL: generator"; exit 1; }
PYTHONPATH="$VOUCH_SRC/tests/cli" python3 "$VOUCH_SRC/tests/cli/serve_text_fake.py" "$t/port" "$t/reqs.jsonl" \
  2>"$t/fake.log" &
servers+=("$!")
for _ in $(seq 1 100); do [ -s "$t/port" ] && break; sleep 0.1; done
[ -s "$t/port" ] || { echo "FAIL: the fake server did not start: $(cat "$t/fake.log")"; exit 1; }
U="http://127.0.0.1:$(cat "$t/port")"
BINS=(--bins 1k,2k,4k,8k,16k)

# mrcr NAME CANDIDATE [ARGS]: the eval of the candidate mode against /good; stdout, stderr, records in $t/NAME.*
mrcr() {
  local name=$1 cand=$2; shift 2
  "$VOUCH" eval mrcr --dataset "$t/d.jsonl" --server "$U/$cand" --ref-server "$U/good" "${BINS[@]}" \
    --json "$t/$name.json" "$@" >"$t/$name.out" 2>"$t/$name.err"
}
# check NAME WANT_RC PATTERN...: the exit code, and each pattern in the report
check() {
  local name=$1 want=$2 rc=$3; shift 3
  [ "$rc" -eq "$want" ] && ok || bad "$name: exit $rc, want $want: $(cat "$t/$name.err" "$t/$name.out")"
  for p in "$@"; do grep -qE -- "$p" "$t/$name.out" "$t/$name.err" && ok || bad "$name: no '$p' in: $(cat "$t/$name.out")"; done
}

# A/A: whole answers, then streamed; every grade 1, nothing differs, exit 0
export VOUCH_SERVER_API_KEY=sk-test-SECRET-4242
mrcr aa good; check aa 0 $? "^$U/good: score 1\.0000 over 24 items \(0 truncated" "0 differ, one-sided sign-flip p 1 " \
  "^verdict: pass"
mrcr aas good --stream --concurrency 3; check aas 0 $? "^$U/good: score 1\.0000 over 24 items" "streamed"
python3 - "$t/aa.json" "$t/aas.json" <<'PY' && ok || bad "A/A records"
import json, sys
a, s = (json.load(open(f))["records"] for f in sys.argv[1:3])
key = lambda r: (r["case_id"], r["path"])
assert sorted(map(key, a)) == sorted(map(key, s)), "whole and streamed make the same records"
by = {key(r): r for r in a}
m = lambda r: {x["name"]: x for x in r["metrics"]}
allc, allr = by[("mrcr_dataset_all", "server:fake-mrcr")], by[("mrcr_dataset_all", "ref-server:fake-mrcr")]
assert allc["status"] == allr["status"] == "pass", (allc, allr)
mc = m(allc)
assert mc["score"]["samples"] == [1.0] * 24 and mc["worse_p"]["value"] == 1 and mc["paired_diff"]["value"] == 0, mc
assert {c["name"]: c["ok"] for c in allc["checks"]} == {"not_worse_than_reference": True,
        "not_more_truncated_than_reference": True, "context_as_reference": True}, allc["checks"]
cells = [r for r in a if r["case_id"] != "mrcr_dataset_all"]
assert len(cells) == 2 * 5 * 3, len(cells)  # 5 bins x 3 needle counts, both servers
assert sum(len(m(r)["score"]["samples"]) for r in cells) == 48, "every row in one cell per server"
assert all(r["params"]["server"].endswith("/good") and r["params"]["max_tokens"] == 4096 for r in a)
PY
# what was asked: chat completions at temperature 0 with max_tokens, the row's messages, the stream flag
python3 - "$t/reqs.jsonl" "$t/d.jsonl" <<'PY' && ok || bad "requests"
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
rows = [json.loads(l) for l in open(sys.argv[2])]
assert len(reqs) == 4 * 24, len(reqs)
prompts = sorted(json.dumps(json.loads(r["prompt"])) for r in rows)
for q in reqs:
    assert q["model"] == "fake-mrcr" and q["temperature"] == 0 and q["max_tokens"] == 4096, q.keys()
assert sorted(json.dumps(q["messages"]) for q in reqs[:24]) == prompts
assert sum(bool(q.get("stream")) for q in reqs) == 48 and all(q["stream_options"]["include_usage"] for q in reqs if q.get("stream"))
PY

# planted misbehaviours of the candidate, each caught by its check
mrcr noprefix noprefix; check noprefix 1 $? "^$U/noprefix: score 0\.0000 over 24 items" \
  "FAIL server:fake-mrcr: significantly worse than its reference \(mean score difference -1\.0000"
mrcr trunc trunc --max-tokens 64; check trunc 1 $? "^$U/trunc: score 0\.[0-9]+ over 24 items \(24 truncated at max_tokens" \
  "FAIL server:fake-mrcr: truncated 24 answers at max_tokens where the reference truncated 0"
mrcr wrong wrongpast3000; check wrong 1 $? "FAIL server:fake-mrcr: significantly worse than its reference"
python3 - "$t/wrong.json" <<'PY' && ok || bad "wrong past 3000: per-bin figures"
import json, sys
by = {(r["case_id"], r["path"]): r for r in json.load(open(sys.argv[1]))["records"]}
m = lambda r: {x["name"]: x["value"] for x in r["metrics"]}
for n in (2, 4, 8):  # short prompts untouched, the longest bin wrong (the fake's tokens: chars / 4)
    assert m(by[("mrcr_dataset_bin1k_n%d" % n, "server:fake-mrcr")])["paired_diff"] == 0
assert any(m(by[(c, "server:fake-mrcr")])["paired_diff"] < 0 for c in ("mrcr_dataset_bin16k_n2", "mrcr_dataset_bin16k_n4", "mrcr_dataset_bin16k_n8") if (c, "server:fake-mrcr") in by)
assert by[("mrcr_dataset_all", "server:fake-mrcr")]["reason"] == "check 'not_worse_than_reference' failed"
PY
mrcr ctx ctx4000; check ctx 1 $? "past the server's context" "FAIL server:fake-mrcr: refused prompts as longer than its context"
mrcr flaky flaky --concurrency 1; check flaky 1 $? "error: server $U/flaky: 8 of 24 requests failed \(not retried\), the first \(line [0-9]+: HTTP 500"
# the candidate refusing what the reference refuses too is a limit, not a failure
"$VOUCH" eval mrcr --dataset "$t/d.jsonl" --server "$U/ctx4000" --ref-server "$U/ctx4000" "${BINS[@]}" >"$t/ctx2.out" 2>&1 &&
  grep -q "^$U/ctx4000: score 1.0000 over [0-9]* items (0 truncated at max_tokens, [1-9][0-9]* past the server's context" \
  "$t/ctx2.out" && ok || bad "both past the context: $(cat "$t/ctx2.out")"

# alone: scored, no pairing, exit 0 when every request was answered
"$VOUCH" eval mrcr --dataset "$t/d.jsonl" --server "$U/wrongpast3000" --limit 6 >"$t/alone.out" 2>&1 &&
  grep -q "^$U/wrongpast3000: score 1.0000 over 6 items" "$t/alone.out" && ! grep -q paired "$t/alone.out" && ok ||
  bad "alone: $(cat "$t/alone.out")"

# not a pair: refused before any chat request
n0=$(wc -l <"$t/reqs.jsonl")
expect_error 1 "field 'root' of model 'fake-mrcr': --server $U/other has '/models/another-checkpoint', --ref-server $U/good" \
  "$VOUCH" eval mrcr --dataset "$t/d.jsonl" --server "$U/other" --ref-server "$U/good"
expect_error 1 "field 'max_model_len' of model 'fake-mrcr': --server $U/otherlen has 16384, --ref-server $U/good has 32768" \
  "$VOUCH" eval mrcr --dataset "$t/d.jsonl" --server "$U/otherlen" --ref-server "$U/good"
[ "$(wc -l <"$t/reqs.jsonl")" -eq "$n0" ] && ok || bad "a refused pair sent requests"
expect_error 1 "cannot connect to http://127.0.0.1:9" "$VOUCH" eval mrcr --dataset "$t/d.jsonl" --server http://127.0.0.1:9

# malformed datasets: one line naming the file, the line and the field, exit 2, nothing sent
head -3 "$t/d.jsonl" >"$t/bad1.jsonl"; echo '{"prompt": "[]", "answer": "x"}' >>"$t/bad1.jsonl"
expect_error 2 "bad1.jsonl:4: field 'random_string_to_prepend': missing" "$VOUCH" eval mrcr --dataset "$t/bad1.jsonl" --server "$U/good"
python3 - "$t/d.jsonl" "$t" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])][:3]
def put(name, k, f):
    r = [dict(x) for x in rows]
    f(r[k])
    open(sys.argv[2] + "/" + name, "w").write("\n".join(json.dumps(x) for x in r) + "\n")
put("bad2.jsonl", 1, lambda r: r.update(prompt="not json"))
put("bad3.jsonl", 2, lambda r: r.update(n_needles=2.5))
put("bad4.jsonl", 0, lambda r: r.update(prompt=json.dumps([{"role": "user"}])))
open(sys.argv[2] + "/bad5.jsonl", "w").write(open(sys.argv[1]).readline() + "{\"prompt\": \n")
PY
expect_error 2 "bad2.jsonl:2: field 'prompt': not a JSON-encoded non-empty list of chat messages" \
  "$VOUCH" eval mrcr --dataset "$t/bad2.jsonl" --server "$U/good"
expect_error 2 "bad3.jsonl:3: field 'n_needles': not an integer" "$VOUCH" eval mrcr --dataset "$t/bad3.jsonl" --server "$U/good"
expect_error 2 "bad4.jsonl:1: field 'prompt': message 0 is not a" "$VOUCH" eval mrcr --dataset "$t/bad4.jsonl" --server "$U/good"
expect_error 2 "bad5.jsonl:2: not a JSON object" "$VOUCH" eval mrcr --dataset "$t/bad5.jsonl" --server "$U/good"
expect_error 2 "missing.jsonl: cannot read" "$VOUCH" eval mrcr --dataset "$t/missing.jsonl" --server "$U/good"
expect_error 2 "option --server URL is required with --dataset" "$VOUCH" eval mrcr --dataset "$t/d.jsonl"
expect_error 2 "unknown option '--model'" "$VOUCH" eval mrcr --dataset "$t/d.jsonl" --server "$U/good" --model synth:tiny
[ "$(wc -l <"$t/reqs.jsonl")" -eq "$n0" ] && ok || bad "a malformed dataset sent requests"
# without --dataset, eval mrcr is the constructed eval as before
"$VOUCH" eval mrcr --help | grep -q "constructed checkpoint" && ok || bad "eval mrcr --help (constructed)"
"$VOUCH" eval mrcr --dataset x --help | grep -q "OpenAI's MRCR rows" && ok || bad "eval mrcr --dataset --help"

# under vouch run: the records, both servers in the manifest, the bundle verifies; the key is nowhere
cat >"$t/plan.json" <<EOF
{"name": "mrcr-dataset", "description": "test", "vars": {}, "steps": [
 {"suite": "eval", "args": ["mrcr", "--dataset", "$t/d.jsonl", "--server", "$U/wrongpast3000", "--ref-server", "$U/good", "--bins", "2k,8k"]}]}
EOF
"$VOUCH" run --plan "$t/plan.json" --out "$t/r" >"$t/run.out" 2>&1; rc=$?
[ "$rc" -eq 1 ] && ok || bad "vouch run: exit $rc, want 1: $(cat "$t/run.out")"
python3 - "$t/r" "$U" <<'PY' && ok || bad "run manifest servers"
import json, sys
m = json.load(open(sys.argv[1] + "/manifest.json"))
s = m["servers"]
assert [(x["role"], x["url"]) for x in s] == [("candidate", sys.argv[2] + "/wrongpast3000"), ("reference", sys.argv[2] + "/good")], s
for x in s:
    assert x["model"] == "fake-mrcr" and x["root"] == "/models/fake-mrcr" and x["max_model_len"] == 32768, x
    assert x["version"] == "0.0.0-fake" and json.loads(x["v1_models"])["data"][0]["id"] == "fake-mrcr", x
r = json.load(open(sys.argv[1] + "/results.json"))
assert r["verdict"] == "fail" and len(r["records"]) == 2 * (3 * 3 + 1), len(r["records"])
PY
(cd "$t" && "$VOUCH" bundle r >/dev/null 2>&1 && "$VOUCH" verify r.vouch.tar.gz >"$t/verify.out" 2>&1) && ok ||
  bad "bundle/verify: $(cat "$t/verify.out")"
# the report's eval table: a row per side, scored per bin (the bins' lower edges)
"$VOUCH" report "$t/r" --md "$t/r.md" >/dev/null 2>&1 && grep -q '^| mrcr | path | bin from 0 | bin from 2k | bin from 8k |' "$t/r.md" \
  && grep -Eq '^\| mrcr \| server:fake-mrcr( \| [0-9.]+( ❌)?){3} \|' "$t/r.md" && grep -Eq '^\| mrcr \| ref-server:fake-mrcr( \| [0-9.]+( ❌)?){3} \|' "$t/r.md" \
  && ok || bad "report: the served eval per bin: $(grep -A4 'Eval scores' "$t/r.md")"
grep -rq "SECRET-4242" "$t/r" "$t/r.vouch.tar.gz" "$t"/*.out "$t"/*.err "$t"/*.json && bad "the API key was written" || ok
[ "$(sort -u "$t/reqs.jsonl.auth")" = "Bearer sk-test-SECRET-4242" ] && ok || bad "the key was not sent on every request"
finish test_eval_mrcr_dataset
