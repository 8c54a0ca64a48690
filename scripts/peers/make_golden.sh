#!/usr/bin/env bash
# Regenerates tests/golden/*.f32 from HF transformers on vouch's synthetic checkpoints.
# usage: make_golden.sh VOUCH_BINARY OUT_DIR     (needs python3 with torch + transformers)
# Checkpoints are synthesized with `vouch model synth` from tests/golden/cases.json; the token
# ids of a case are t_j = (37*j + 11*seed) mod vocab, which the C test recomputes.
set -euo pipefail
vouch=${1:?usage: make_golden.sh VOUCH OUT_DIR}; out=${2:?usage: make_golden.sh VOUCH OUT_DIR}
here=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
python3 - "$here/tests/golden/cases.json" > "$out/cases.tsv" <<'PY'
import json, sys
for c in json.load(open(sys.argv[1]))["cases"]:
    print("\t".join([c["name"], c["preset"], str(c["seed"]), str(c["n_tokens"]), " ".join(c["set"])]))
PY
while IFS=$'\t' read -r name preset seed n sets; do
  dir="$out/models/$name"
  args=()
  for s in $sets; do args+=(--set "$s"); done
  "$vouch" model synth --preset "$preset" --seed "$seed" --out "$dir" "${args[@]}"
  vocab=$(python3 -c "import json;print(json.load(open('$dir/config.json'))['vocab_size'])")
  toks=$(python3 -c "print(','.join(str((37*j+11*$seed)%$vocab) for j in range($n)))")
  python3 "$here/scripts/peers/hf_logits.py" --model "$dir" --tokens "$toks" --out "$out/$name"
done < "$out/cases.tsv"
