#!/usr/bin/env bash
# Structured outputs in vouch serve over real HTTP (loopback): constraints over token ids
# (structured_outputs.token_dfa, and choice as token-id lists) are enforced, sampled and greedy,
# streamed and not, through the K+1 verify steps of --spec; the features suite's automaton (ids by
# class mod 3) is one of them, and the same seeded request without it breaks it (so the check sees a
# constraint ignored); every text constraint and unknown field is refused with 400 naming it.
. "$VOUCH_SRC/tests/cli/counters.sh"
. "$VOUCH_SRC/tests/cli/serve_lib.sh"
command -v curl >/dev/null || { echo "curl missing"; exit 77; }

start_server a --max-seqs 4 --max-ctx 256
A=$url A_PID=$spid
start_server c --max-seqs 4 --max-ctx 256 --spec K=3,AL=3
C=$url C_PID=$spid

post() { curl -s -X POST "$1/v1/completions" -H 'Content-Type: application/json' -d "$2"; }
# the features suite's automaton: 0 -[id%3==0]-> 1; 1 -[id%3==1]-> 1; 1 -[id%3==2]-> 0
mod3='{"start":0,"accept":[0,1],"edges":[{"from":0,"to":1,"mod":3,"rem":0},{"from":1,"to":1,"mod":3,"rem":1},{"from":1,"to":0,"mod":3,"rem":2}]}'
base='"prompt":[5,6,7,8,9],"max_tokens":32,"temperature":1.0,"seed":3,"ignore_eos":true'
post "$A" "{$base,\"structured_outputs\":{\"token_dfa\":$mod3}}" >"$t/dfa.json"
post "$A" "{$base}" >"$t/free.json"
post "$A" "{$base,\"stream\":true,\"structured_outputs\":{\"token_dfa\":$mod3}}" >"$t/dfa.sse"
post "$C" "{$base,\"structured_outputs\":{\"token_dfa\":$mod3}}" >"$t/spec.json"
post "$C" "{$base,\"temperature\":0,\"structured_outputs\":{\"token_dfa\":$mod3}}" >"$t/spec0.json"
python3 - "$t" <<'PY' && ok || bad "token_dfa: $(cat "$t/dfa.json" "$t/free.json" "$t/spec.json")"
import json, sys
d = sys.argv[1]
def walk(ids):  # the number of ids the automaton accepts before the first it refuses
    s = 0
    for k, t in enumerate(ids):
        c = t % 3
        if s == 0 and c == 0: s = 1
        elif s == 1 and c in (1, 2): s = 1 if c == 1 else 0
        else: return k
    return len(ids)
ids = lambda f: json.load(open(f))["choices"][0]["token_ids"]
a, free = ids(d + "/dfa.json"), ids(d + "/free.json")
assert len(a) == 32 and walk(a) == 32, a
assert walk(free) < 32, ("the unconstrained request obeys the automaton too: the check could not fail", free)
ev = [json.loads(l[6:]) for l in open(d + "/dfa.sse").read().split("\n") if l.startswith("data: {")]
assert [t for e in ev if e["choices"] for t in e["choices"][0]["token_ids"]] == a, ev
for f in ("spec.json", "spec0.json"):  # drafts (the last id repeated) that the automaton refuses are not kept
    s = ids(d + "/" + f)
    assert len(s) == 32 and walk(s) == 32, (f, s)
PY
# a repeated id in state 1 (class 1) is a draft the automaton admits: some were accepted
curl -s "$C/metrics" | grep -q '^vllm:spec_decode_num_accepted_tokens_total{model_name="synth:tiny"} [1-9]' \
  && ok || bad "no draft accepted under the constraint: $(curl -s "$C/metrics" | grep accepted_tokens_total)"

# choice as token-id lists: exactly one of them, then "stop"; a choice that is a prefix of another
post "$A" '{"prompt":[5,6,7],"max_tokens":16,"temperature":0,"structured_outputs":{"choice":[[10,11,12],[20,21]]}}' >"$t/ch.json"
post "$A" '{"prompt":[5,6,7],"max_tokens":16,"temperature":0.9,"seed":1,"ignore_eos":true,"structured_outputs":{"choice":[[7],[7,8,9]]}}' >"$t/ch2.json"
ids='"structured_outputs":{"token_dfa":{"accept":[0],"edges":[{"from":0,"to":0,"ids":[3,4]}]}}'
post "$A" "{\"prompt\":[5,6,7],\"max_tokens\":16,\"temperature\":0,\"ignore_eos\":true,$ids}" >"$t/ids.json"
post "$A" "{\"prompt\":[5,6,7],\"max_tokens\":16,\"temperature\":0,$ids}" >"$t/eos.json"
post "$A" '{"prompt":[5,6,7],"max_tokens":4,"temperature":0,"response_format":{"type":"text"}}' >"$t/text.json"
python3 - "$t" <<'PY' && ok || bad "choice: $(cat "$t/ch.json" "$t/ch2.json" "$t/ids.json" "$t/eos.json" "$t/text.json")"
import json, sys
d = sys.argv[1]
c = json.load(open(d + "/ch.json"))["choices"][0]
assert c["token_ids"] in ([10, 11, 12], [20, 21]) and c["finish_reason"] == "stop", c
c = json.load(open(d + "/ch2.json"))["choices"][0]
assert c["token_ids"] == [7, 8, 9] and c["finish_reason"] == "stop", c  # ignore_eos: EOS cannot end it after [7]
c = json.load(open(d + "/ids.json"))["choices"][0]
assert len(c["token_ids"]) == 16 and set(c["token_ids"]) <= {3, 4} and c["finish_reason"] == "length", c
assert len(json.load(open(d + "/text.json"))["choices"][0]["token_ids"]) == 4
# EOS (id 1) may end the output in an accepting state (greedy picks it at once on this model)
c = json.load(open(d + "/eos.json"))["choices"][0]
assert c["token_ids"][-1] == 1 and set(c["token_ids"][:-1]) <= {3, 4} and c["finish_reason"] == "stop", c
PY

# refused with 400, naming the field
code() { curl -s -o "$t/e.json" -w '%{http_code}' -X POST "$A/v1/completions" -d "$1"; }
check_err() {
  local param=$1 needle=$2 body=$3 got
  got=$(code "$body")
  [ "$got" = 400 ] && grep -q "\"message\":\"[^\"]*$needle" "$t/e.json" && grep -qF "\"param\":\"$param\"" "$t/e.json" \
    && ok || bad "$body -> $got $(cat "$t/e.json")"
}
P='"prompt":[1],"max_tokens":4'
for k in regex json grammar structural_tag; do
  check_err "structured_outputs.$k" "constrains text, and this server has no tokenizer" "{$P,\"structured_outputs\":{\"$k\":\"x\"}}"
done
check_err structured_outputs.json_object "constrains text" "{$P,\"structured_outputs\":{\"json_object\":true}}"
check_err response_format "type 'json_object' constrains text" "{$P,\"response_format\":{\"type\":\"json_object\"}}"
check_err response_format "type 'json_schema' constrains text" "{$P,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{}}}"
check_err response_format "unknown type 'yaml'" "{$P,\"response_format\":{\"type\":\"yaml\"}}"
check_err guided_choice "removed it in 0.12" "{$P,\"guided_choice\":[\"a\"]}"
check_err structured_outputs.whitespace_pattern "an option of text constraints" "{$P,\"structured_outputs\":{\"whitespace_pattern\":\" \"}}"
check_err structured_outputs.frobnicate "not a structured output vouch serve knows" "{$P,\"structured_outputs\":{\"frobnicate\":1}}"
check_err structured_outputs.choice "is a string: this server has no tokenizer" "{$P,\"structured_outputs\":{\"choice\":[\"yes\",\"no\"]}}"
check_err structured_outputs.choice "must be a non-empty list" "{$P,\"structured_outputs\":{\"choice\":[[]]}}"
check_err structured_outputs.choice "is not a token id in \\[0, 1024)" "{$P,\"structured_outputs\":{\"choice\":[[1,1024]]}}"
check_err structured_outputs "give one constraint" "{$P,\"structured_outputs\":{\"choice\":[[1]],\"token_dfa\":$mod3}}"
check_err "structured_outputs.token_dfa.edges[0]" "'from' and 'to' must be states" \
  "{$P,\"structured_outputs\":{\"token_dfa\":{\"edges\":[{\"from\":0,\"to\":-1,\"ids\":[3]}]}}}"
check_err "structured_outputs.token_dfa.edges[1]" "give 'ids' or lo/hi/mod/rem, not both" \
  "{$P,\"structured_outputs\":{\"token_dfa\":{\"accept\":[0],\"edges\":[{\"from\":0,\"to\":0,\"ids\":[3]},{\"from\":0,\"to\":0,\"ids\":[4],\"lo\":2}]}}}"
check_err "structured_outputs.token_dfa.edges[0]" "'rem' in \\[0, mod)" \
  "{$P,\"structured_outputs\":{\"token_dfa\":{\"accept\":[0],\"edges\":[{\"from\":0,\"to\":0,\"mod\":3,\"rem\":3}]}}}"
check_err "structured_outputs.token_dfa.edges[0]" "unknown key 'weight'" \
  "{$P,\"structured_outputs\":{\"token_dfa\":{\"accept\":[0],\"edges\":[{\"from\":0,\"to\":0,\"ids\":[3],\"weight\":1}]}}}"
check_err structured_outputs.token_dfa "state 1 is reachable, does not accept" \
  "{$P,\"structured_outputs\":{\"token_dfa\":{\"edges\":[{\"from\":0,\"to\":1,\"ids\":[3]}]}}}"
check_err structured_outputs.token_dfa "admits only the empty output" \
  "{$P,\"structured_outputs\":{\"token_dfa\":{\"accept\":[0],\"edges\":[{\"from\":1,\"to\":1,\"ids\":[3]}]}}}"
check_err structured_outputs "must be an object" "{$P,\"structured_outputs\":[1]}"

stop_server "$A_PID" && ok || bad "server a did not exit 0 on SIGTERM"
stop_server "$C_PID" && ok || bad "server c did not exit 0 on SIGTERM"
finish
