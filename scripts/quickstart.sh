#!/usr/bin/env bash
# One command from a fresh Debian/Ubuntu machine to a first result: installs dependencies,
# builds vouch, synthesizes the default checkpoint (tiny) and decodes with it, then runs vouch's
# main job, the smoke plan (`vouch run`: numerics, divergence, evals, features, a sweep) into a
# verified bundle; on the GPU paths when a GPU is visible, else on the CPU.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
vouch="$root/build/vouch"
mkdir -p "$root/models"
[ -f "$root/models/tiny/config.json" ] || "$vouch" model synth --preset tiny --out "$root/models/tiny"
"$vouch" model info "$root/models/tiny"
path=cpu-ref
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && "$vouch" --version | grep -q "^paths: cpu-ref cuda-ref"; then
  path=cuda-ref
fi
"$vouch" generate --model "$root/models/tiny" --path "$path" --tokens 1,2,3 -n 32 --batch 4
mkdir -p "$root/vouch-results"
cd "$root"
"$vouch" run --out "vouch-results/quickstart-$(date +%Y%m%d-%H%M%S)"
