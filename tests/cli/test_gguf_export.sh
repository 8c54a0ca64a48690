#!/usr/bin/env bash
# vouch model export --gguf and vouch model peer-diverge without node (so it also runs under the
# sanitizers, where test_llamacpp.sh, which needs npm, does not): the GGUF's header and counts,
# f32 vs bf16 sizes, bad input, and peer-diverge end to end on a synthetic peer with uniform
# logits (must fail; test_llamacpp.sh has the passing peer); q8_0 / q4_0 blocks byte for byte
# against an independent quantizer, and --tokenizer's keys and its bad input.
. "$VOUCH_SRC/tests/cli/counters.sh"

"$VOUCH" model export --gguf synth:tiny -o "$t/b.gguf" >/dev/null && ok || bad "export bf16"
"$VOUCH" model export --gguf synth:tiny --dtype f32 -o "$t/f.gguf" >/dev/null && ok || bad "export f32"
python3 - "$t/b.gguf" "$t/f.gguf" <<'PY' && ok || bad "GGUF header"
import struct, sys
b, f = (open(p, "rb").read() for p in sys.argv[1:3])
for d in (b, f):
    magic, ver, n_t, n_kv = struct.unpack_from("<4sIQQ", d)
    assert magic == b"GGUF" and ver == 3 and n_t == 52 and n_kv == 37, (magic, ver, n_t, n_kv)
    k = struct.unpack_from("<Q", d, 24)[0]
    assert d[32:32 + k] == b"general.architecture", d[32:32 + k]
# f32 holds the bf16 matrices at twice the size; 1-D tensors are f32 in both
assert 1.9 < len(f) / len(b) < 2.0, (len(f), len(b))
PY
expect_error 2 "option --dtype" "$VOUCH" model export --gguf synth:tiny -o "$t/x.gguf" --dtype f16
expect_error 1 "cannot create" "$VOUCH" model export --gguf synth:tiny -o "$t/no/such/dir/x.gguf"
expect_error 1 "unknown preset" "$VOUCH" model export --gguf synth:huge -o "$t/x.gguf"

# peer-diverge on a synthetic peer: uniform logits are about 0.5 nats from cpu-ref on tiny and
# must fail
"$VOUCH" model synth --preset tiny --seed 3 --out "$t/m" >/dev/null || bad "synth"
python3 - "$t" <<'PY' || bad "write synthetic peer files"
import json, struct, sys
t = sys.argv[1]
toks = [(37 * j + 11) % 1024 for j in range(12)]
for name in ("uniform",):
    json.dump({"engine": "uniform-peer", "tokens": toks, "shape": [12, 1024]}, open(f"{t}/{name}.json", "w"))
    open(f"{t}/{name}.f32", "wb").write(struct.pack("<%df" % (12 * 1024), *([0.0] * 12 * 1024)))
PY
"$VOUCH" model peer-diverge --model "$t/m" --peer "$t/uniform" --json "$t/u.json" >"$t/u.txt" 2>&1
[ $? -eq 1 ] && grep -q "FAIL" "$t/u.txt" && ok || bad "uniform peer must fail: $(cat "$t/u.txt")"
python3 - "$t/u.json" <<'PY' && ok || bad "uniform peer record"
import json, sys
r = json.load(open(sys.argv[1]))["records"][0]
m = {x["name"]: x for x in r["metrics"]}
assert r["suite"] == "diverge" and r["path"] == "uniform-peer" and r["status"] == "fail", r
assert len(m["kld"]["samples"]) == 11 and m["kld"]["value"] > 0.1, m["kld"]
PY
expect_error 1 "cannot read the peer's metadata" "$VOUCH" model peer-diverge --model synth:tiny --peer "$t/none"
echo '{"tokens":[1,2],"shape":[2,7]}' >"$t/badshape.json"
expect_error 1 "field 'shape'" "$VOUCH" model peer-diverge --model synth:tiny --peer "$t/badshape"
echo '{"tokens":[1,99999],"shape":[2,1024]}' >"$t/badtok.json"
expect_error 1 "field 'tokens" "$VOUCH" model peer-diverge --model synth:tiny --peer "$t/badtok"
echo '{"tokens":[1],"shape":[1,1024]}' >"$t/one.json"
expect_error 1 "at least 2 token ids" "$VOUCH" model peer-diverge --model synth:tiny --peer "$t/one"
echo '{"tokens":[1,2],"shape":[2,1024]}' >"$t/short.json"
head -c 100 /dev/zero >"$t/short.f32"
expect_error 1 "expected 2 x 1024 float32" "$VOUCH" model peer-diverge --model synth:tiny --peer "$t/short"
echo 'not json' >"$t/junk.json"
expect_error 1 "not valid JSON" "$VOUCH" model peer-diverge --model synth:tiny --peer "$t/junk"
# q8_0 / q4_0: llama.cpp's block formats, checked byte for byte against an independent Python
# quantizer (tests/cli/gguf_read.py) applied to the f32 export's values; the types per tensor as
# llama-quantize picks them (router and 1-D in f32, rows of 16 in f16, output.weight Q8_0)
for q in q8_0 q4_0; do
  "$VOUCH" model export --gguf synth:tiny --dtype $q -o "$t/$q.gguf" >/dev/null && ok || bad "export $q"
done
PYTHONPATH="$VOUCH_SRC/tests/cli" python3 - "$t" <<'PY' && ok || bad "q8_0 / q4_0 blocks"
import sys, gguf_read as g
t = sys.argv[1]
_, ref = g.read(f"{t}/f.gguf")
for q, qt, ft in (("q8_0", g.Q8_0, 7), ("q4_0", g.Q4_0, 2)):
    meta, ts = g.read(f"{t}/{q}.gguf")
    assert meta["general.file_type"] == ft and set(ts) == set(ref), (q, meta.get("general.file_type"))
    for name, (typ, ne, raw) in ts.items():
        want = (g.F32 if len(ne) == 1 or "ffn_gate_inp" in name else g.F16 if ne[0] % 32 else
                g.Q8_0 if name == "output.weight" else qt)
        assert typ == want and ne == ref[name][1], (q, name, typ, want, ne)
    for name in ("blk.0.attn_q_a.weight", "output.weight", "blk.1.attn_k_b.weight", "blk.2.attn_norm.weight"):
        typ, ne, raw = ts[name]
        x = g.floats(g.F32, ref[name][2])
        exp = (g.quant_q8_0(x) if typ == g.Q8_0 else g.quant_q4_0(x) if typ == g.Q4_0 else
               b"".join(g.struct.pack("<e", v) for v in x) if typ == g.F16 else ref[name][2])
        assert raw == exp, (q, name, "bytes differ")
        err = max(abs(a - b) for a, b in zip(g.floats(typ, raw), x))
        amax = max(abs(v) for v in x)
        assert err <= amax * (0.01 if typ == g.Q8_0 else 0.2), (q, name, err, amax)
PY

# --tokenizer: a small byte-level BPE folder with DeepSeek-V3's pre-tokenizer, written here
mkdir -p "$t/tok"
python3 - "$t/tok" <<'PY' || bad "write tokenizer"
import json, sys
d = sys.argv[1]
pre = json.loads(r"""{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": false}, {"type": "Split", "pattern": {"Regex": "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"}, "behavior": "Isolated", "invert": false}, {"type": "Split", "pattern": {"Regex": "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]}""")
vocab = {"a": 3, "b": 4, "ab": 5, "\u0120": 6, "\u0120ab": 8}
added = [{"id": 0, "content": "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "special": True},
         {"id": 1, "content": "<\uff5cend\u2581of\u2581sentence\uff5c>", "special": True},
         {"id": 2, "content": "<\uff5cUser\uff5c>", "special": False},
         {"id": 7, "content": "x\u2581y", "special": False}]
json.dump({"model": {"type": "BPE", "vocab": vocab, "merges": ["a b", ["\u0120", "ab"]], "byte_fallback": False},
           "added_tokens": added, "pre_tokenizer": pre, "decoder": {"type": "ByteLevel"}},
          open(f"{d}/tokenizer.json", "w"))
json.dump({"bos_token": {"content": added[0]["content"]}, "eos_token": added[1]["content"], "pad_token": None,
           "add_bos_token": True, "add_eos_token": False, "chat_template": "{{ bos_token }}{{ messages[0]['content'] }}"},
          open(f"{d}/tokenizer_config.json", "w"))
PY
"$VOUCH" model export --gguf synth:tiny --dtype f32 --tokenizer "$t/tok" -o "$t/tok.gguf" >/dev/null && ok || bad "export with tokenizer"
PYTHONPATH="$VOUCH_SRC/tests/cli" python3 - "$t" <<'PY' && ok || bad "tokenizer keys"
import sys, gguf_read as g
t = sys.argv[1]
m, ts = g.read(f"{t}/tok.gguf")
m0, ts0 = g.read(f"{t}/f.gguf")
tok, typ = m["tokenizer.ggml.tokens"], m["tokenizer.ggml.token_type"]
assert m["tokenizer.ggml.model"] == "gpt2" and m["tokenizer.ggml.pre"] == "deepseek-v3"
assert len(tok) == len(typ) == 1024 and tok[:9] == ["<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>",
    "<\uff5cUser\uff5c>", "a", "b", "ab", "\u0120", "x y", "\u0120ab"], tok[:9]
assert typ[:9] == [3, 3, 3, 1, 1, 1, 1, 4, 1] and tok[9] == "[PAD9]" and typ[9] == 5 and tok[1023] == "[PAD1023]", typ[:10]
assert m["tokenizer.ggml.merges"] == ["a b", "\u0120 ab"]
assert m["tokenizer.ggml.bos_token_id"] == 0 and m["tokenizer.ggml.eos_token_id"] == 1
assert "tokenizer.ggml.padding_token_id" not in m and "tokenizer.ggml.unknown_token_id" not in m
assert m["tokenizer.ggml.add_bos_token"] is True and m["tokenizer.ggml.add_eos_token"] is False
assert m["tokenizer.chat_template"] == "{{ bos_token }}{{ messages[0]['content'] }}"
# the rest of the file is the tokenizer-free export's
assert {k: v for k, v in m.items() if not k.startswith("tokenizer.")} == {k: v for k, v in m0.items() if not k.startswith("tokenizer.")}
assert ts == ts0
PY
# bad tokenizer input: one line naming the file and field
tokcase() { # NAME PYTHON-EDIT: a copy of $t/tok edited by python (d: tokenizer.json, c: tokenizer_config.json)
  rm -rf "$t/$1"; cp -r "$t/tok" "$t/$1"
  python3 -c "import json,sys; p=sys.argv[1]; d=json.load(open(p+'/tokenizer.json')); c=json.load(open(p+'/tokenizer_config.json')); $2; json.dump(d,open(p+'/tokenizer.json','w')); json.dump(c,open(p+'/tokenizer_config.json','w'))" "$t/$1"
}
tokcase big "d['model']['vocab']['zz'] = 5000"
expect_error 1 "vocab_size is 1024" "$VOUCH" model export --gguf synth:tiny --tokenizer "$t/big" -o "$t/x.gguf"
tokcase pre "d['pre_tokenizer']['pretokenizers'][0]['pattern']['Regex'] = r'\\p{N}+'"
expect_error 1 "field 'pre_tokenizer'" "$VOUCH" model export --gguf synth:tiny --tokenizer "$t/pre" -o "$t/x.gguf"
tokcase uni "d['model']['type'] = 'Unigram'"
expect_error 1 "field 'model.type'" "$VOUCH" model export --gguf synth:tiny --tokenizer "$t/uni" -o "$t/x.gguf"
tokcase dup "d['model']['vocab']['ba'] = 3"
expect_error 1 "id 3 is both" "$VOUCH" model export --gguf synth:tiny --tokenizer "$t/dup" -o "$t/x.gguf"
tokcase merge "d['model']['merges'].append('abc')"
expect_error 1 'got "abc"' "$VOUCH" model export --gguf synth:tiny --tokenizer "$t/merge" -o "$t/x.gguf"
tokcase bos "c['bos_token'] = '<s>'"
expect_error 1 "field 'bos_token'" "$VOUCH" model export --gguf synth:tiny --tokenizer "$t/bos" -o "$t/x.gguf"
tokcase flag "c['add_bos_token'] = 'yes'"
expect_error 1 "field 'add_bos_token'" "$VOUCH" model export --gguf synth:tiny --tokenizer "$t/flag" -o "$t/x.gguf"
tokcase tmpl "c['chat_template'] = 7"
expect_error 1 "field 'chat_template'" "$VOUCH" model export --gguf synth:tiny --tokenizer "$t/tmpl" -o "$t/x.gguf"
tokcase neg "d['added_tokens'][3]['id'] = -4"
expect_error 1 "field 'added_tokens'" "$VOUCH" model export --gguf synth:tiny --tokenizer "$t/neg" -o "$t/x.gguf"
rm -rf "$t/junk"; mkdir "$t/junk"; echo '{"model": ' >"$t/junk/tokenizer.json"
expect_error 1 "tokenizer.json: not a JSON object" "$VOUCH" model export --gguf synth:tiny --tokenizer "$t/junk" -o "$t/x.gguf"
expect_error 1 "cannot open" "$VOUCH" model export --gguf synth:tiny --tokenizer "$t/none" -o "$t/x.gguf"
[ ! -e "$t/x.gguf" ] && ok || bad "a failed export left $t/x.gguf"
finish test_gguf_export
