#!/usr/bin/env bash
# vouch eval mrcr / eval chain --server: a server as one more path of the ground-truth evals.
# `vouch serve --path cpu-ref` on the constructed checkpoints (loopback only) is scored next to
# in-process cpu-ref: the same score and the same per-query correctness (the records' raw samples),
# margins equal within MARGIN_TOL, the pairwise comparison with the reference; alone it is scored
# against the constructed answers; a hop count past its --max-ctx is not supported. Bad servers
# (refused, wrong model, other vocabulary, HTTP 500, text without ids, truncated or malformed
# streams, fewer tokens than asked, every second request failing) give a one-line error naming
# the server and exit 1; bad options exit 2.
#
# MARGIN_TOL: served margins are logprob(answer) - best other logprob, and log-softmax subtracts
# one constant from every logit, so they are the logit margins of the same cpu-ref computation in
# fp32. vouch serve rounds each logprob to float: at |logprob| < 32 that is 2^-19 (1.9e-6) each,
# 3.8e-6 on a difference (measured 1.9e-6). 1e-4 leaves room for a server that batches or chunks
# the prefill differently (other fp32 summation orders) and is still far below any real change
# (a wrong answer moves a margin by nats).
. "$VOUCH_SRC/tests/cli/counters.sh"
. "$VOUCH_SRC/tests/cli/serve_lib.sh"
command -v curl >/dev/null || { echo "curl missing"; exit 77; }
MARGIN_TOL=1e-4

start_server m --path cpu-ref --model synth:recall-mrcr --max-seqs 4
M=$url
# the chain prompt is 34 tokens: 16 and 64 hops fit a 100-token context, 96 do not
start_server c --path cpu-ref --model synth:recall-chain --max-seqs 4 --max-ctx 100
C=$url
python3 "$VOUCH_SRC/tests/cli/serve_fake.py" "$t/fake.port" "$t/fake.ids" "$C" 2>"$t/fake.log" &
servers+=("$!")
for _ in $(seq 1 100); do [ -s "$t/fake.port" ] && break; sleep 0.1; done
F="http://127.0.0.1:$(cat "$t/fake.port")"

# compare FILE REF SERVER [HOPS_NOT_SUPPORTED]: every case of REF has the server's twin with the same
# score samples (per-query correctness) and margins within MARGIN_TOL, paired with REF (McNemar), the
# server's URL and model in its params; a case id ending in HOPS_NOT_SUPPORTED is not supported.
compare() {
  python3 - "$1" "$2" "$3" "$MARGIN_TOL" "${4:-}" <<'PY'
import json, math, sys
f, ref, srv, tol, ns = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
rs = json.load(open(f))["records"]
by = {(r["case_id"], r["path"]): r for r in rs}
m = lambda r: {x["name"]: x for x in r["metrics"]}
cases = [c for (c, p) in by if p == ref and "first_wrong" not in c]
assert cases, rs
for c in cases:
    a, b = by[(c, ref)], by[(c, srv)]
    assert b["params"]["server"].startswith("http://127.0.0.1:") and b["params"]["server_model"] == srv[7:], b["params"]
    assert b["params"]["reference"] == ref, b["params"]
    if ns and c.endswith(ns):
        assert a["status"] == "pass" and b["status"] == "not_supported" and "max_model_len 100" in b["reason"], b
        continue
    ma, mb = m(a), m(b)
    assert a["status"] == b["status"] == "pass", (a, b)
    assert ma["score"]["samples"] == mb["score"]["samples"] and len(ma["score"]["samples"]) > 0, (c, ma["score"], mb["score"])
    for k in ("margin_min", "margin_median"):
        sa, sb = ma[k]["samples"], mb[k]["samples"]
        assert len(sa) == len(sb) and all(abs(x - y) <= tol for x, y in zip(sa, sb)), (c, k, sa, sb)
        assert all(x > 5 for x in sa), (c, sa)
    assert mb["mcnemar_p"]["value"] == 1 and mb["ref_only_right"]["value"] == 0 and mb["paired_diff"]["value"] == 0, mb
fw = [(by[(c, ref)], by[(c, srv)]) for (c, p) in by if p == ref and "first_wrong" in c]
for a, b in fw:
    assert m(a)["first_wrong_hop"]["samples"] == m(b)["first_wrong_hop"]["samples"], (a, b)
PY
}

# mrcr: cpu-ref in process and served, one token-id completion per query, 4 in flight
"$VOUCH" eval mrcr --bins 256,1k --needles 2,4 --samples 2 --batch 4 --threads 1 --paths cpu-ref --server "$M" \
  --json "$t/m.json" >"$t/m.out" 2>"$t/m.err" && ok || bad "mrcr --server: $(cat "$t/m.err" "$t/m.out")"
grep -q "^path server:synth:recall-mrcr: score 1.0000 over 24 queries" "$t/m.out" && grep -q "McNemar p 1" "$t/m.out" \
  && ok || bad "mrcr --server report: $(cat "$t/m.out")"
compare "$t/m.json" cpu-ref server:synth:recall-mrcr && ok || bad "mrcr: server and cpu-ref records differ"

# chain, greedy: one completion of 96 tokens per chain; 96 hops do not fit the server's 100 tokens
"$VOUCH" eval chain --hops 16,64,96 --samples 4 --batch 4 --threads 1 --paths cpu-ref --server "$C" \
  --json "$t/c.json" >"$t/c.out" 2>"$t/c.err" && ok || bad "chain --server: $(cat "$t/c.err" "$t/c.out")"
grep -q "hops 96 *not run: a 34-token prompt and more than 66 hops exceed the server's max_model_len 100" "$t/c.out" \
  && ok || bad "chain --server report: $(cat "$t/c.out")"
compare "$t/c.json" cpu-ref server:synth:recall-chain hops96_t0 && ok || bad "chain: server and cpu-ref records differ"

# alone: scored against the constructed answers, the server its own reference
"$VOUCH" eval chain --hops 16 --samples 2 --server "$C" --json "$t/a.json" >"$t/a.out" 2>&1 && python3 - "$t/a.json" <<'PY' \
  && ok || bad "chain --server alone: $(cat "$t/a.out")"
import json, sys
rs = json.load(open(sys.argv[1]))["records"]
assert {r["path"] for r in rs} == {"server:synth:recall-chain"} and all(r["status"] == "pass" for r in rs), rs
r = [r for r in rs if r["case_id"] == "chain_hops16_t0"][0]
assert r["params"]["reference"] == "server:synth:recall-chain" and "mcnemar_p" not in {m["name"] for m in r["metrics"]}, r
PY
# a server that gives no logprobs (the fake passes $C on without them): the score stands, no margins
"$VOUCH" eval chain --hops 16 --samples 2 --server "$F/nolp" --json "$t/n.json" >"$t/n.out" 2>&1 \
  && grep -q "pass@1 1.0000 .*n/a (no logprobs)" "$t/n.out" && python3 - "$t/n.json" <<'PY' && ok || bad "no logprobs: $(cat "$t/n.out")"
import json, sys
r = [r for r in json.load(open(sys.argv[1]))["records"] if r["case_id"] == "chain_hops16_t0"][0]
names = {m["name"]: m for m in r["metrics"]}
assert r["status"] == "pass" and names["score"]["samples"] == [1, 1] and "margin_min" not in names, r
PY
# sampled by the server: its own sampler, scored against the true chain only (no pairing)
"$VOUCH" eval chain --hops 16 --samples 2 --threads 1 --temperature 0.5 --sample-seed 3 --paths cpu-ref --server "$C" \
  --json "$t/s.json" >"$t/s.out" 2>&1 && grep -q "scored against the true chain only" "$t/s.out" && python3 - "$t/s.json" <<'PY' \
  && ok || bad "sampled --server: $(cat "$t/s.out")"
import json, sys
r = [r for r in json.load(open(sys.argv[1]))["records"] if r["path"].startswith("server:") and "hops16" in r["case_id"]][0]
assert r["status"] == "pass" and "mcnemar_p" not in {m["name"] for m in r["metrics"]}, r
PY

# mrcr past the server's max_model_len (the fake's 100): that cell is not supported, the other runs
"$VOUCH" eval mrcr --bins 64,100 --needles 2 --samples 1 --server "$F/small" --json "$t/l.json" >"$t/l.out" 2>&1
python3 - "$t/l.json" <<'PY' && ok || bad "mrcr past max_model_len: $(cat "$t/l.out")"
import json, sys
st = {r["case_id"]: (r["status"], r["reason"]) for r in json.load(open(sys.argv[1]))["records"]}
assert st["mrcr_bin64_n2"][0] == "fail", st  # the fake's ids are wrong answers
assert st["mrcr_bin100_n2"] == ("not_supported", "a context of 100 tokens or more and its answer exceed the server's max_model_len"), st
PY

# what is sent (the fake logs every request): mrcr query k of a prompt is one greedy token after the
# prompt and queries 0..k, exactly the exported ones; a chain is one completion of the largest hop
# count after its prompt; both ask for ids, logprobs by id and ignore_eos; sampling goes as given
"$VOUCH" eval mrcr --bins 64 --needles 2,3 --samples 2 --server "$F/req" --batch 3 --export-prompts "$t/p.json" >/dev/null 2>&1
"$VOUCH" eval chain --hops 4,8 --samples 2 --server "$F/req" --export-prompts "$t/q.json" >/dev/null 2>&1
"$VOUCH" eval chain --hops 4 --samples 2 --server "$F/req" --temperature 0.5 --top-k 7 --sample-seed 9 >/dev/null 2>&1
python3 - "$t/fake.ids.req" "$t/p.json" "$t/q.json" <<'PY' && ok || bad "requests sent: $(head -c 600 "$t/fake.ids.req")"
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
for r in reqs:
    assert r["model"] == "fake" and r["stream"] and r["ignore_eos"] and r["logprobs"] == 5, r
    assert r["return_token_ids"] and r["return_tokens_as_token_ids"], r
want = sorted(c["prompt"] + c["queries"][:k + 1] for c in json.load(open(sys.argv[2]))["cases"] for k in range(c["needles"]))
mrcr = [r for r in reqs if r["max_tokens"] == 1]
assert len(mrcr) == 10 and all(r["temperature"] == 0 and "seed" not in r for r in mrcr), mrcr
assert sorted(r["prompt"] for r in mrcr) == want
chain = [r for r in reqs if r["max_tokens"] == 8]
assert sorted(r["prompt"] for r in chain) == sorted(c["prompt"] for c in json.load(open(sys.argv[3]))["cases"]), chain
assert all(r["temperature"] == 0 for r in chain), chain
smp = sorted((r for r in reqs if r["max_tokens"] == 4), key=lambda r: r["seed"])
assert [(r["temperature"], r["top_k"], r["seed"]) for r in smp] == [(0.5, 7, 9), (0.5, 7, 10)], smp
PY

# credentials stay out: the key and the URL's user:password are in no output and no record
host=${F#http://}
VOUCH_SERVER_API_KEY=sekrit-key "$VOUCH" eval chain --hops 4 --samples 1 --server "http://u:pw-secret@$host/half" \
  --json "$t/k.json" >"$t/k.out" 2>&1
grep -q "server http://$host/half" "$t/k.out" && ! grep -q "sekrit-key\|pw-secret" "$t/k.out" "$t/k.json" \
  && ok || bad "credentials shown: $(cat "$t/k.out")"

# bad servers: one line naming the server, exit 1
free_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
ch=(eval chain --hops 4,8 --samples 2)
expect_error 1 "cannot connect to http://127.0.0.1:$free_port/v1/models" "$VOUCH" "${ch[@]}" --server "http://127.0.0.1:$free_port"
expect_error 1 "serves no model 'other' (it serves: synth:recall-chain)" "$VOUCH" "${ch[@]}" --server "$C" --server-model other
expect_error 1 "server $F/vocab: model 'fake' has vocab_size 1024, the model synth:recall-chain .* has 1216: it does not serve" \
  "$VOUCH" "${ch[@]}" --server "$F/vocab"
for mode in "500:HTTP 500 from $F/500/v1/completions: the engine is on fire" \
            "text:the server returned text, not token ids" \
            "trunc:the stream ended without 'data: \[DONE\]' after 2 tokens" \
            "badjson:a stream event is not JSON" \
            "short:the server returned 7 of the 8 tokens asked"; do
  expect_error 1 "server $F/${mode%%:*}: 2 of 2 requests failed (not retried), the first (chain 0): ${mode#*:}" \
    "$VOUCH" "${ch[@]}" --server "$F/${mode%%:*}"
done
expect_error 1 "server $F/500: 4 of 4 requests failed .*query 0): HTTP 500" \
  "$VOUCH" eval mrcr --bins 64 --needles 2 --samples 2 --server "$F/500"
# every second request refused: the record says error, and the answered chains are kept in it
"$VOUCH" "${ch[@]}" --samples 4 --server "$F/half" --json "$t/h.json" >"$t/h.out" 2>"$t/h.err"; rc=$?
[ "$rc" -eq 1 ] && grep -q "2 of 4 requests failed" "$t/h.err" && [ "$(wc -l <"$t/h.err")" -eq 1 ] && python3 - "$t/h.json" <<'PY' \
  && ok || bad "half the requests failing: rc $rc $(cat "$t/h.err" "$t/h.out")"
import json, sys
r = [r for r in json.load(open(sys.argv[1]))["records"] if r["case_id"] == "chain_hops4_t0"][0]
score = {m["name"]: m for m in r["metrics"]}["score"]
assert r["status"] == "error" and "2 of 4 requests failed" in r["reason"] and score["samples"] == [0, 0], r
PY

# bad options: exit 2
expect_error 2 "option --server-model needs --server URL" "$VOUCH" eval mrcr --server-model x
expect_error 2 "option --server needs a value" "$VOUCH" eval chain --server
expect_error 2 "expected an http:// or https:// URL" "$VOUCH" eval chain --server localhost:8000
# a URL with no host (found by fuzz_plan: the scheme's separator was looked for after it was stripped)
expect_error 2 "--server: no host after the scheme" "$VOUCH" eval chain --server http://
expect_error 2 "--server: no host after the scheme" "$VOUCH" sweep --server http:///v1

finish
