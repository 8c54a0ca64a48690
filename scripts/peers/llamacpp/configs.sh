#!/usr/bin/env bash
# llama.cpp against cpu-ref per configuration of the family (docs/llama-cpp.md's findings table):
# for each configuration, synthesize tiny with the config's --set edits, export it as an f32 GGUF,
# let llama.cpp compute teacher-forced logits of N seeded tokens and score them against cpu-ref
# with vouch model peer-diverge. f32 on both sides (DTYPE=f32, the default), so agreement means
# KLD ~1e-7; DTYPE=bf16 exports bf16 matrices (llama.cpp then rounds activations to bf16 too).
#   usage: [DTYPE=bf16] configs.sh VOUCH OUT_DIR [NAME..]  (needs install.sh's folder in VOUCH_LLAMACPP_DIR)
# Prints one line per configuration: name, status, mean KLD, same-top %, max |dlogit|.
set -uo pipefail
vouch=${1:?usage: configs.sh VOUCH OUT_DIR [NAME..]}; out=${2:?usage: configs.sh VOUCH OUT_DIR [NAME..]}; shift 2
here=$(cd "$(dirname "$0")" && pwd)
# name | tokens | --set edits (space-separated) | bias shift (added to every e_score_correction_bias)
configs="
tiny|64|
groups-off|64|topk_group=1 n_group=1
yarn-off|64|rope_scaling=null
yarn-mscale|96|max_position_embeddings=512 rope_scaling.original_max_position_embeddings=32 rope_scaling.factor=8 rope_scaling.mscale=0.707 rope_scaling.mscale_all_dim=1.0
yarn-long|96|max_position_embeddings=512 rope_scaling.original_max_position_embeddings=32 rope_scaling.factor=8 rope_scaling.mscale=1.0 rope_scaling.mscale_all_dim=1.0
yarn-mscale-all|96|max_position_embeddings=512 rope_scaling.original_max_position_embeddings=32 rope_scaling.factor=8 rope_scaling.mscale=0.707 rope_scaling.mscale_all_dim=0.707
norm-off|64|norm_topk_prob=false
qlora-off|64|q_lora_rank=null
rope-noninterleaved|64|rope_interleave=false
shared-0|64|n_shared_experts=0
shared-2|64|n_shared_experts=2
groups-negative-bias|64||-0.9
groups-off-negative-bias|64|topk_group=1 n_group=1|-0.9
"
mkdir -p "$out"
rc=0
while IFS='|' read -r name n sets bias; do
  [ -z "$name" ] && continue
  if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx "$name"; then continue; fi
  args=()
  for s in $sets; do args+=(--set "$s"); done
  d="$out/$name"
  rm -rf "$d"
  "$vouch" model synth --preset tiny --seed 1 --out "$d" "${args[@]}" >"$out/$name.log" 2>&1 &&
    { [ -z "$bias" ] || python3 "$here/shift_bias.py" "$d" "$bias" >>"$out/$name.log"; } &&
    "$vouch" model export --gguf "$d" --dtype "${DTYPE:-f32}" -o "$d.gguf" >>"$out/$name.log" 2>&1 || {
      echo "$name: export failed: $(tail -1 "$out/$name.log")"; rc=1; continue; }
  vocab=$(python3 -c "import json;print(json.load(open('$d/config.json'))['vocab_size'])")
  if ! node "$here/peer.mjs" logits --threads 1 --gguf "$d.gguf" --random "$n" --vocab "$vocab" --seed 1 --out "$d-llama" \
      >>"$out/$name.log" 2>&1; then
    echo "$name: llama.cpp failed: $(grep -m1 -iE "error|assert|failed|throw" "$out/$name.log" | cut -c1-200)"
    rc=1
    continue
  fi
  "$vouch" model peer-diverge --threads 1 --model "$d" --peer "$d-llama" --json "$d-diverge.json" > "$d-diverge.txt" 2>&1
  st=$?
  line=$(tail -1 "$d-diverge.txt")
  echo "$name: $(echo "$line" | awk '{printf "status %s, mean KLD %s, same-top %s%%, max|dlogit| %s", $NF, $2, $8, $10}')"
  [ $st -eq 0 ] || rc=1
done <<< "$configs"
exit $rc
