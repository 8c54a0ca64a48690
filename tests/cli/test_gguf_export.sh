#!/usr/bin/env bash
# vouch model export --gguf and vouch model peer-diverge without node (so it also runs under the
# sanitizers, where test_llamacpp.sh, which needs npm, does not): the GGUF's header and counts,
# f32 vs bf16 sizes, bad input, and peer-diverge end to end on a synthetic peer with uniform
# logits (must fail; test_llamacpp.sh has the passing peer).
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
finish test_gguf_export
