#!/usr/bin/env bash
# vouch eval aime --dataset --server --ref-server: AIME-format rows ("What is A plus B?", made here)
# asked of a fake server (tests/cli/aime_fake.py, loopback) whose URL path picks its behaviour. A/A
# (the same behaviour on both sides, whole or streamed, one repeat or three sampled ones) passes;
# each planted misbehaviour of the candidate is caught by the check named for it (wrong answers on
# some items, answers truncated at max_tokens, answers without \boxed, prompts refused as too long
# where the reference answers, failing requests); a pair that is not the same model (root,
# max_model_len) is refused before any request; a malformed dataset line is a one-line usage error
# naming the file, line and field, before any request. The records verify in a `vouch run` bundle
# whose manifest names both servers, and the API key is sent but written nowhere.
. "$VOUCH_SRC/tests/cli/counters.sh"
servers=()
trap 'for p in "${servers[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$t"' EXIT
python3 - "$t" <<'PY'
import json, sys
rows = []
for i in range(24):
    a, b = 17 * i % 400 + 3, 29 * i % 500 + 11
    pad = "Think about it carefully. " * (40 if i % 4 == 3 else 0)  # every fourth problem is long
    rows.append({"id": i, "problem": pad + "What is %d plus %d?" % (a, b), "answer": str(a + b)})
open(sys.argv[1] + "/d.jsonl", "w").write("\n".join(json.dumps(r) for r in rows) + "\n")
# the AIME 1983-2024 / 2024 field names, integer answers
open(sys.argv[1] + "/d24.jsonl", "w").write("\n".join(json.dumps({"ID": r["id"], "Problem": r["problem"],
    "Answer": int(r["answer"])}) for r in rows[:6]) + "\n\n")
PY
PYTHONPATH="$VOUCH_SRC/tests/cli" python3 "$VOUCH_SRC/tests/cli/aime_fake.py" "$t/port" "$t/reqs.jsonl" 2>"$t/fake.log" &
servers+=("$!")
for _ in $(seq 1 100); do [ -s "$t/port" ] && break; sleep 0.1; done
[ -s "$t/port" ] || { echo "FAIL: the fake server did not start: $(cat "$t/fake.log")"; exit 1; }
U="http://127.0.0.1:$(cat "$t/port")"

# aime NAME CANDIDATE [ARGS]: the eval of the candidate mode against /good; stdout, stderr, records in $t/NAME.*
aime() {
  local name=$1 cand=$2; shift 2
  "$VOUCH" eval aime --dataset "$t/d.jsonl" --server "$U/$cand" --ref-server "$U/good" --json "$t/$name.json" "$@" \
    >"$t/$name.out" 2>"$t/$name.err"
}
# check NAME WANT_RC RC PATTERN...: the exit code, and each pattern in the report
check() {
  local name=$1 want=$2 rc=$3; shift 3
  [ "$rc" -eq "$want" ] && ok || bad "$name: exit $rc, want $want: $(cat "$t/$name.err" "$t/$name.out")"
  for p in "$@"; do grep -qE -- "$p" "$t/$name.out" "$t/$name.err" && ok || bad "$name: no '$p' in: $(cat "$t/$name.out")"; done
}

export VOUCH_SERVER_API_KEY=sk-test-SECRET-4242
# A/A: whole answers, streamed, and three sampled repeats; every answer right, nothing differs, exit 0
aime aa good; check aa 0 $? "^$U/good: score 1\.0000 over 24 items \(pass@1, 95% interval \[1\.0000, 1\.0000\]; 24 answers: 0 truncated" \
  "0 differ, one-sided sign-flip p 1 " "^verdict: pass"
aime aas good --stream --concurrency 3; check aas 0 $? "^$U/good: score 1\.0000 over 24 items" "streamed"
aime rep good --repeats 3 --temperature 0.7 --top-p 0.95 --seed 5; check rep 0 $? "^$U/good: score 1\.0000 over 24 items .*72 answers" \
  "a seed per repeat"
python3 - "$t/aa.json" "$t/rep.json" <<'PY' && ok || bad "A/A records"
import json, sys
a, rep = (json.load(open(f))["records"] for f in sys.argv[1:3])
by = {(r["case_id"], r["path"]): r for r in a}
m = lambda r: {x["name"]: x for x in r["metrics"]}
assert sorted(by) == [("aime_all", "ref-server:fake-aime"), ("aime_all", "server:fake-aime")], sorted(by)
c = by[("aime_all", "server:fake-aime")]
assert c["suite"] == "evals" and c["status"] == "pass", c
mc = m(c)
assert mc["pass_at_1"]["samples"] == [1.0] * 24 and mc["worse_p"]["value"] == 1 and mc["paired_diff"]["value"] == 0, mc
assert {k["name"]: k["ok"] for k in c["checks"]} == {"not_worse_than_reference": True,
        "not_more_truncated_than_reference": True, "context_as_reference": True}, c["checks"]
assert c["params"]["repeats"] == 1 and c["params"]["max_tokens"] == 32768 and c["params"]["temperature"] == 0
ids = sorted((r["case_id"], r["path"]) for r in rep)
assert ids == sorted((i, p) for i in ("aime_all", "aime_repeat0", "aime_repeat1", "aime_repeat2")
                     for p in ("server:fake-aime", "ref-server:fake-aime")), ids
assert all(r["status"] == "pass" and r["params"]["top_p"] == 0.95 for r in rep)
PY
# what was asked: one user message (the problem, a blank line, the \boxed instruction); temperature 0
# without a seed; sampled repeats with one seed per repeat, the same on both servers
python3 - "$t/reqs.jsonl" "$t/d.jsonl" <<'PY' && ok || bad "requests"
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
rows = [json.loads(l) for l in open(sys.argv[2])]
assert len(reqs) == 2 * 24 + 2 * 24 + 2 * 72, len(reqs)
want = sorted(r["problem"] + "\n\nPlease reason step by step, and put your final answer within \\boxed{}." for r in rows)
for q in reqs[:48]:
    assert q["model"] == "fake-aime" and q["temperature"] == 0 and q["max_tokens"] == 32768 and "seed" not in q, q
    assert len(q["messages"]) == 1 and q["messages"][0]["role"] == "user", q["messages"]
assert sorted(q["messages"][0]["content"] for q in reqs[:24]) == want
rep = reqs[96:]
assert all(q["temperature"] == 0.7 and q["top_p"] == 0.95 for q in rep)
ref, cand = rep[:72], rep[72:]
seeds = lambda qs: sorted(set(q["seed"] for q in qs))
assert len(seeds(ref)) == 3 and seeds(ref) == seeds(cand), (seeds(ref), seeds(cand))
for qs in (ref, cand):  # each problem asked once under each seed
    assert len(set((q["messages"][0]["content"], q["seed"]) for q in qs)) == 72
PY

# planted misbehaviours of the candidate, each caught by its check
aime wrong wrongmod3; check wrong 1 $? "^$U/wrongmod3: score 0\.[0-9]+ over 24 items" \
  "FAIL server:fake-aime: significantly worse than its reference \(mean pass@1 difference -0\.[0-9]+"
python3 - "$t/wrong.json" <<'PY' && ok || bad "wrong: records"
import json, sys
by = {(r["case_id"], r["path"]): r for r in json.load(open(sys.argv[1]))["records"]}
c = by[("aime_all", "server:fake-aime")]
m = {x["name"]: x for x in c["metrics"]}
assert c["status"] == "fail" and c["reason"] == "check 'not_worse_than_reference' failed", c
assert 0 < m["paired_differ"]["value"] == 24 - sum(m["pass_at_1"]["samples"]) and m["worse_p"]["value"] < 0.05, m
assert m["pass_at_1_lo95"]["value"] < sum(m["pass_at_1"]["samples"]) / 24 < m["pass_at_1_hi95"]["value"], m
PY
aime trunc trunc; check trunc 1 $? "^$U/trunc: score 0\.0000 over 24 items .*24 answers: 24 truncated at max_tokens" \
  "FAIL server:fake-aime: truncated 24 answers at max_tokens where the reference truncated 0"
aime nobox nobox; check nobox 1 $? "24 without \\\\boxed" "FAIL server:fake-aime: significantly worse"
aime ctx ctx200; check ctx 1 $? "6 past the server's context" "FAIL server:fake-aime: refused prompts as longer than its context"
aime flaky flaky --concurrency 1; check flaky 1 $? "error: server $U/flaky: 8 of 24 requests failed \(not retried\), the first \(line [0-9]+, repeat 0: HTTP 500"
python3 - "$t/flaky.json" <<'PY' && ok || bad "flaky: status error"
import json, sys
by = {(r["case_id"], r["path"]): r for r in json.load(open(sys.argv[1]))["records"]}
c = by[("aime_all", "server:fake-aime")]
assert c["status"] == "error" and "8 of 24 requests failed" in c["reason"], c
PY
# both refusing the long prompts is a limit, not a failure; every prompt refused is not supported
"$VOUCH" eval aime --dataset "$t/d.jsonl" --server "$U/ctx200" --ref-server "$U/ctx200" >"$t/ctx2.out" 2>&1 &&
  grep -q "^$U/ctx200: score 1.0000 over 18 items .*6 past the server's context" "$t/ctx2.out" && ok ||
  bad "both past the context: $(cat "$t/ctx2.out")"
"$VOUCH" eval aime --dataset "$t/d.jsonl" --server "$U/ctx10" --json "$t/ctx10.json" >"$t/ctx10.out" 2>&1
python3 - "$t/ctx10.json" <<'PY' && ok || bad "every prompt past the context: $(cat "$t/ctx10.out")"
import json, sys
r = json.load(open(sys.argv[1]))["records"]
assert [x["status"] for x in r] == ["not_supported"], r
PY

# alone, the AIME 2024 field names: scored, no pairing, exit 0
"$VOUCH" eval aime --dataset "$t/d24.jsonl" --server "$U/wrongmod3" >"$t/alone.out" 2>&1 &&
  grep -qE "^$U/wrongmod3: score 0\.[0-9]+ over 6 items" "$t/alone.out" && ! grep -q paired "$t/alone.out" && ok ||
  bad "alone: $(cat "$t/alone.out")"
"$VOUCH" eval aime --dataset "$t/d.jsonl" --server "$U/good" --limit 5 >"$t/lim.out" 2>&1 &&
  grep -q "^$U/good: score 1.0000 over 5 items" "$t/lim.out" && ok || bad "--limit: $(cat "$t/lim.out")"

# not a pair: refused before any chat request
n0=$(wc -l <"$t/reqs.jsonl")
expect_error 1 "field 'root' of model 'fake-aime': --server $U/other has '/models/another-checkpoint', --ref-server $U/good" \
  "$VOUCH" eval aime --dataset "$t/d.jsonl" --server "$U/other" --ref-server "$U/good"
expect_error 1 "field 'max_model_len' of model 'fake-aime': --server $U/otherlen has 16384, --ref-server $U/good has 32768" \
  "$VOUCH" eval aime --dataset "$t/d.jsonl" --server "$U/otherlen" --ref-server "$U/good"
[ "$(wc -l <"$t/reqs.jsonl")" -eq "$n0" ] && ok || bad "a refused pair sent requests"

# malformed datasets: one line naming the file, the line and the field, exit 2, nothing sent
printf '%s\n' '{"problem": "What is 1 plus 2?", "answer": 3}' '{"problem": "What is 1 plus 3?"}' >"$t/bad1.jsonl"
printf '%s\n' '{"problem": "p", "answer": 3}' '' '{"problem": "p", "answer": "three"}' >"$t/bad2.jsonl"
printf '%s\n' '{"Problem": "p", "problem": "q", "Answer": 3}' >"$t/bad3.jsonl"
printf '%s\n' '{"question": ["p"], "answer": 3}' >"$t/bad4.jsonl"
printf '%s\n' '{"problem": "p", "answer": 2.5}' >"$t/bad5.jsonl"
printf '%s\n' '{"problem": "p", "answer": 3}' '{"problem": ' >"$t/bad6.jsonl"
: >"$t/empty.jsonl"
expect_error 2 "bad1.jsonl:2: field 'answer': missing" "$VOUCH" eval aime --dataset "$t/bad1.jsonl" --server "$U/good"
expect_error 2 "bad2.jsonl:3: field 'answer': not an integer" "$VOUCH" eval aime --dataset "$t/bad2.jsonl" --server "$U/good"
expect_error 2 "bad3.jsonl:1: field 'problem': given twice" "$VOUCH" eval aime --dataset "$t/bad3.jsonl" --server "$U/good"
expect_error 2 "bad4.jsonl:1: field 'question': not a non-empty string" "$VOUCH" eval aime --dataset "$t/bad4.jsonl" --server "$U/good"
expect_error 2 "bad5.jsonl:1: field 'answer': not an integer" "$VOUCH" eval aime --dataset "$t/bad5.jsonl" --server "$U/good"
expect_error 2 "bad6.jsonl:2: not a JSON object" "$VOUCH" eval aime --dataset "$t/bad6.jsonl" --server "$U/good" --ref-server "$U/good"
expect_error 2 "empty.jsonl: no rows" "$VOUCH" eval aime --dataset "$t/empty.jsonl" --server "$U/good"
expect_error 2 "missing.jsonl: cannot read" "$VOUCH" eval aime --dataset "$t/missing.jsonl" --server "$U/good"
expect_error 2 "option --server URL is required" "$VOUCH" eval aime --dataset "$t/d.jsonl"
expect_error 2 "option --dataset FILE is required" "$VOUCH" eval aime --server "$U/good"
expect_error 2 "option --top-p: 0 is not in (0, 1]" "$VOUCH" eval aime --dataset "$t/d.jsonl" --server "$U/good" --top-p 0
expect_error 2 "unknown option '--model'" "$VOUCH" eval aime --dataset "$t/d.jsonl" --server "$U/good" --model synth:tiny
[ "$(wc -l <"$t/reqs.jsonl")" -eq "$n0" ] && ok || bad "a malformed dataset sent requests"
"$VOUCH" eval aime --help | grep -q "lm-eval's aime task" && ok || bad "eval aime --help"
"$VOUCH" eval --help | grep -q "^usage: vouch eval mrcr|chain|aime " && ok || bad "eval --help lists aime"

# under vouch run: the records, both servers in the manifest, the bundle verifies; the key is nowhere
cat >"$t/plan.json" <<EOF2
{"name": "aime", "description": "test", "vars": {}, "steps": [
 {"suite": "eval", "args": ["aime", "--dataset", "$t/d.jsonl", "--server", "$U/wrongmod3", "--ref-server", "$U/good", "--repeats", "2"]}]}
EOF2
"$VOUCH" run --plan "$t/plan.json" --out "$t/r" >"$t/run.out" 2>&1; rc=$?
[ "$rc" -eq 1 ] && ok || bad "vouch run: exit $rc, want 1: $(cat "$t/run.out")"
python3 - "$t/r" "$U" <<'PY' && ok || bad "run manifest servers"
import json, sys
m = json.load(open(sys.argv[1] + "/manifest.json"))
s = m["servers"]
assert [(x["role"], x["url"]) for x in s] == [("candidate", sys.argv[2] + "/wrongmod3"), ("reference", sys.argv[2] + "/good")], s
r = json.load(open(sys.argv[1] + "/results.json"))
assert r["verdict"] == "fail" and len(r["records"]) == 2 * 3, len(r["records"])
PY
(cd "$t" && "$VOUCH" bundle r >/dev/null 2>&1 && "$VOUCH" verify r.vouch.tar.gz >"$t/verify.out" 2>&1) && ok ||
  bad "bundle/verify: $(cat "$t/verify.out")"
grep -rq "SECRET-4242" "$t/r" "$t/r.vouch.tar.gz" "$t"/*.out "$t"/*.err "$t"/*.json && bad "the API key was written" || ok
[ "$(sort -u "$t/reqs.jsonl.auth")" = "Bearer sk-test-SECRET-4242" ] && ok || bad "the key was not sent on every request"
finish test_eval_aime
