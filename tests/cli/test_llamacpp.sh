#!/usr/bin/env bash
# llama.cpp as an independent engine (docs/llama-cpp.md), on the CPU, tiny checkpoints:
#   export -> the GGUF read back by @huggingface/gguf (keys, shapes, every tensor's bytes)
#   -> llama.cpp's teacher-forced logits scored against cpu-ref (a configuration where both
#   follow HF must pass) -> two findings reproduced (configurations where llama.cpp departs from
#   HF must FAIL) -> the constructed MRCR eval on llama.cpp's greedy tokens -> decode step times
#   merged into vouch sweep with --peer.
# Set-up (tests/cli/llamacpp_text_lib.sh): scripts/peers/llamacpp/install.sh from the npm registry
# into $VOUCH_LLAMACPP_DIR (default ~/.cache/vouch/llamacpp-peer; reused when its lockfile matches).
# Without node >= 20, npm or the registry this test is skipped (77) on a workstation and FAILS in CI.
. "$VOUCH_SRC/tests/cli/counters.sh"
. "$VOUCH_SRC/tests/cli/llamacpp_text_lib.sh" # the peer installed ($peer), the EXIT trap

# (bad input of the export and peer-diverge: tests/cli/test_gguf_export.sh, which needs no node)

# synth NAME SETS..: a tiny checkpoint in $t/NAME with the --set edits
synth() {
  local name=$1; shift
  local args=()
  for s in "$@"; do args+=(--set "$s"); done
  "$VOUCH" model synth --preset tiny --seed 1 --out "$t/$name" "${args[@]}" >/dev/null || bad "synth $name"
}
# diverge NAME DTYPE N: export, llama.cpp logits of N seeded tokens, vouch model peer-diverge; sets $rc
diverge() {
  local name=$1 dtype=$2 n=$3
  "$VOUCH" model export --gguf "$t/$name" --dtype "$dtype" -o "$t/$name.gguf" >/dev/null || bad "export $name"
  node "$peer/peer.mjs" logits --threads 1 --gguf "$t/$name.gguf" --random "$n" --vocab 1024 --seed 1 \
    --out "$t/$name-llama" >"$t/$name-llama.log" 2>&1 || bad "llama.cpp logits $name: $(tail -2 "$t/$name-llama.log")"
  "$VOUCH" model peer-diverge --threads 1 --model "$t/$name" --peer "$t/$name-llama" --json "$t/$name.json" >"$t/$name.txt" 2>&1
  rc=$?
}

# 1. the GGUF read back: bf16 of the default tiny (q LoRA, groups, YaRN, interleaved RoPE) and
#    f32 of a non-interleaved, q-LoRA-free, 2-shared-expert one (the permuted RoPE rows)
synth tiny
synth alt q_lora_rank=null rope_interleave=false n_shared_experts=2 norm_topk_prob=false rope_scaling=null
"$VOUCH" model export --gguf "$t/tiny" -o "$t/tiny-bf16.gguf" >/dev/null || bad "export tiny bf16"
"$VOUCH" model export --gguf "$t/alt" --dtype f32 -o "$t/alt-f32.gguf" >/dev/null || bad "export alt f32"
node "$peer/peer.mjs" check --gguf "$t/tiny-bf16.gguf" --model "$t/tiny" >"$t/check1" 2>&1 && ok || bad "gguf check tiny: $(cat "$t/check1")"
node "$peer/peer.mjs" check --gguf "$t/alt-f32.gguf" --model "$t/alt" >"$t/check2" 2>&1 && ok || bad "gguf check alt: $(cat "$t/check2")"
# the check is not vacuous: one flipped byte in the middle of the tensor data is found
cp "$t/tiny-bf16.gguf" "$t/flip.gguf"
printf '\x55' | dd of="$t/flip.gguf" bs=1 seek=$(( $(stat -c %s "$t/flip.gguf") / 2 )) conv=notrunc 2>/dev/null
node "$peer/peer.mjs" check --gguf "$t/flip.gguf" --model "$t/tiny" >"$t/check3" 2>&1 && bad "gguf check missed a flipped byte" ||
  { grep -q "elements differ" "$t/check3" && ok || bad "gguf check on a flipped byte: $(cat "$t/check3")"; }

# 2. agreement where both follow HF: f32 on both sides, so KLD ~1e-7 (bounds: --max-kld 0.01)
diverge tiny f32 48
[ "$rc" -eq 0 ] && ok || bad "llama.cpp vs cpu-ref on tiny: $(cat "$t/tiny.txt")"
python3 - "$t/tiny.json" <<'PY' && ok || bad "tiny diverge record"
import json, sys
r = json.load(open(sys.argv[1]))["records"][0]
m = {x["name"]: x["value"] for x in r["metrics"]}
assert r["suite"] == "diverge" and r["path"] == "llama.cpp-cpu" and r["status"] == "pass", r
assert m["kld"] < 1e-5 and m["same_top_pct"] == 100, m
PY

# 3. findings (docs/llama-cpp.md): llama.cpp departs from HF, so these must FAIL
#    YaRN with mscale != mscale_all_dim: llama.cpp assumes mscale = 1 for the RoPE cos/sin factor
synth yarn-mscale max_position_embeddings=512 rope_scaling.original_max_position_embeddings=32 \
  rope_scaling.factor=8 rope_scaling.mscale=0.707 rope_scaling.mscale_all_dim=1.0
diverge yarn-mscale f32 64
[ "$rc" -eq 1 ] && grep -q "FAIL" "$t/yarn-mscale.txt" && ok || bad "yarn mscale finding not reproduced: $(cat "$t/yarn-mscale.txt")"

#    group-limited routing with negative biased scores: HF fills the masked groups with 0.0, which
#    then outranks the kept groups' negative scores; llama.cpp fills -inf (DeepSeek's own rule).
#    The same bias shift without groups changes no choice and must still agree.
synth negbias
python3 "$peer/shift_bias.py" "$t/negbias" -0.9 >/dev/null || bad "shift the selection bias"
diverge negbias f32 32
[ "$rc" -eq 1 ] && grep -q "FAIL" "$t/negbias.txt" && ok || bad "group-fill finding not reproduced: $(cat "$t/negbias.txt")"
synth negbias-nogroups topk_group=1 n_group=1
python3 "$peer/shift_bias.py" "$t/negbias-nogroups" -0.9 >/dev/null || bad "shift the selection bias"
diverge negbias-nogroups f32 32
[ "$rc" -eq 0 ] && ok || bad "negative bias without groups should agree: $(cat "$t/negbias-nogroups.txt")"

# 4. the constructed MRCR eval scored on llama.cpp's greedy tokens
"$VOUCH" model synth --preset recall-mrcr --out "$t/mrcr" >/dev/null || bad "synth recall-mrcr"
"$VOUCH" model export --gguf "$t/mrcr" -o "$t/mrcr.gguf" >/dev/null || bad "export recall-mrcr"
"$VOUCH" eval mrcr --model "$t/mrcr" --bins 256 --needles 2 --samples 2 --export-prompts "$t/mrcr-p.json" >/dev/null ||
  bad "export mrcr prompts"
node "$peer/peer.mjs" eval --threads 1 --gguf "$t/mrcr.gguf" --prompts "$t/mrcr-p.json" --json "$t/mrcr-llama.json" \
  >"$t/mrcr.log" 2>&1 && ok || bad "llama.cpp mrcr eval: $(tail -3 "$t/mrcr.log")"
python3 - "$t/mrcr-llama.json" <<'PY' && ok || bad "llama.cpp mrcr records"
import json, sys
d = json.load(open(sys.argv[1]))
r = d["records"]
assert len(r) == 1 and r[0]["suite"] == "evals" and r[0]["case_id"] == "mrcr_bin256_n2", r
assert r[0]["status"] == "pass" and r[0]["metrics"][0]["value"] == 1.0, r[0]
PY

# 5. decode step times merged into the sweep
node "$peer/peer.mjs" decode --threads 1 --gguf "$t/tiny-bf16.gguf" --context 0,64 --steps 6 --warmup 2 \
  --out "$t/decode.json" >"$t/decode.log" 2>&1 && ok || bad "llama.cpp decode: $(tail -3 "$t/decode.log")"
"$VOUCH" sweep --model "$t/tiny" --paths cpu-ref --context 0,64 --steps 6 --warmup 2 --threads 1 --no-progress --membw-bytes 16m \
  --peer "$t/decode.json" >"$t/sweep.txt" 2>&1 && ok || bad "sweep with the llama.cpp peer: $(tail -3 "$t/sweep.txt")"
[ "$(grep -c '^llama.cpp-cpu ' "$t/sweep.txt")" -eq 2 ] && ok || bad "sweep lacks the peer's rows: $(cat "$t/sweep.txt")"
finish test_llamacpp
