#!/usr/bin/env bash
# The CLI end to end on the CPU: synth -> info -> generate, and bad input giving one-line
# errors naming the file and field with a non-zero exit (never a crash: exit codes > 2 fail).
. "$VOUCH_SRC/tests/cli/counters.sh"


"$VOUCH" model synth --preset tiny --seed 5 --out "$t/m" >/dev/null && ok || bad "synth tiny"
[ -f "$t/m/config.json" ] && [ -f "$t/m/model.safetensors" ] && ok || bad "synth wrote config + safetensors"
"$VOUCH" model synth --preset tiny --seed 5 --shard-size 1m --out "$t/sharded" >/dev/null && ok || bad "sharded synth"
[ -f "$t/sharded/model.safetensors.index.json" ] && ok || bad "sharded synth wrote an index"
"$VOUCH" model info "$t/m" | grep -q "4 groups keep 2" && ok || bad "model info"
"$VOUCH" model info --json "$t/sharded" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["params"]["total"] > 1e6' && ok || bad "info --json"

# the same tokens from the directory, the sharded directory and synth: (same seed)
a=$("$VOUCH" generate --model "$t/m" --tokens 5,6,7 -n 8 | grep '^seq')
b=$("$VOUCH" generate --model "$t/sharded" --tokens 5,6,7 -n 8 | grep '^seq')
c=$("$VOUCH" generate --model synth:tiny --seed 5 --tokens 5,6,7 -n 8 | grep '^seq')
[ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ] && ok || bad "disk, sharded and synth decode alike: '$a' '$b' '$c'"
# batch: sequence 0 of a batch equals the same sequence alone
s0=$("$VOUCH" generate --model synth:tiny --seed 5 --tokens 5,6,7 -n 8 --batch 4 | grep '^seq 0')
[ "$s0" = "$a" ] && ok || bad "batched seq 0 '$s0' != alone '$a'"
# sampling is reproducible with a seed and differs across seeds
x=$("$VOUCH" generate --temperature 1 --top-p 0.9 --top-k 40 --sample-seed 3 -n 16 | grep '^seq')
y=$("$VOUCH" generate --temperature 1 --top-p 0.9 --top-k 40 --sample-seed 3 -n 16 | grep '^seq')
z=$("$VOUCH" generate --temperature 1 --top-p 0.9 --top-k 40 --sample-seed 4 -n 16 | grep '^seq')
[ "$x" = "$y" ] && [ "$x" != "$z" ] && ok || bad "seeded sampling"

# the binary names the commit it was built from (written at build time, cmake/git_commit.cmake:
# a tree configured once and rebuilt after new commits recorded the old one in every manifest)
if head=$(git -C "$VOUCH_SRC" rev-parse HEAD 2>/dev/null); then
  v=$("$VOUCH" --version | head -1)
  [ "$v" = "vouch $("$VOUCH" --version | head -1 | cut -d' ' -f2) $head" ] && ok || bad "--version '$v' does not name HEAD $head"
fi

# bad input
expect_error 2 "unknown preset 'huge'" "$VOUCH" model synth --preset huge --out "$t/x"
expect_error 2 "unknown option" "$VOUCH" generate --bogus
expect_error 2 "outside the vocabulary" "$VOUCH" generate --tokens 1,99999
expect_error 2 "unknown path" "$VOUCH" generate --path warp-drive
cp -r "$t/m" "$t/badcfg"
sed -i 's/"hidden_size":[^,]*,/"hidden_size": "wide",/' "$t/badcfg/config.json"
expect_error 1 "badcfg/config.json: field 'hidden_size' must be an integer" "$VOUCH" model info "$t/badcfg"
cp -r "$t/m" "$t/badarch"
sed -i 's/"model_type":[^,]*,/"model_type": "llama",/' "$t/badarch/config.json"
expect_error 1 "field 'model_type' is 'llama'" "$VOUCH" generate --model "$t/badarch"
echo '{"architectures": ["DeepseekV3ForCausalLM"], ' > "$t/trunc.json"
mkdir -p "$t/badjson" && cp "$t/trunc.json" "$t/badjson/config.json" && cp "$t/m/model.safetensors" "$t/badjson/"
expect_error 1 "config.json: not valid JSON" "$VOUCH" model info "$t/badjson"
cp -r "$t/m" "$t/truncst"
truncate -s 100000 "$t/truncst/model.safetensors"
expect_error 1 "model.safetensors" "$VOUCH" model info "$t/truncst"
cp -r "$t/m" "$t/missing"
python3 - "$t/missing" <<'PY'
import json, struct, sys
d = sys.argv[1]
raw = open(d + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n])
hdr["model.norm.weight_renamed"] = hdr.pop("model.norm.weight")
h = json.dumps(hdr).encode()
h += b" " * ((8 - len(h) % 8) % 8)
open(d + "/model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + raw[8 + n:])
PY
expect_error 1 "tensor 'model.norm.weight' is missing" "$VOUCH" model info "$t/missing"
expect_error 1 "cannot open model" "$VOUCH" model info "$t/does-not-exist"
finish
