#!/usr/bin/env bash
# Installs the llama.cpp peer's npm packages (node-llama-cpp with its prebuilt CPU binaries,
# @node-llama-cpp/linux-x64, and @huggingface/gguf) from the npm registry into DIR, pinned by
# package-lock.json. Nothing is downloaded from GitHub or compiled: the optional packages (the
# CUDA/Vulkan/other-platform binaries) are omitted, install scripts are not run (node-llama-cpp's
# postinstall would otherwise probe the binaries and may fetch llama.cpp's source to build it),
# and NODE_LLAMA_CPP_SKIP_DOWNLOAD=true keeps it from downloading if run later.
#   usage: install.sh [DIR]     (default $VOUCH_LLAMACPP_DIR, else ~/.cache/vouch/llamacpp-peer)
# Exits 0 when DIR already holds this exact lockfile's install. CUDA (on a GPU host): add
#   npm install --prefix DIR --no-save --ignore-scripts @node-llama-cpp/linux-x64-cuda@3.22.1
# and run peer.mjs with --gpu cuda (docs/llama-cpp.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-${VOUCH_LLAMACPP_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vouch/llamacpp-peer}}
command -v npm >/dev/null || { echo "install.sh: npm not found (apt-get install npm)" >&2; exit 1; }
mkdir -p "$dir"
if cmp -s "$here/package-lock.json" "$dir/package-lock.json" && [ -f "$dir/node_modules/.package-lock.json" ] &&
   [ -f "$dir/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/llama-addon.node" ]; then
  exit 0
fi
cp "$here/package.json" "$here/package-lock.json" "$dir/"
export NODE_LLAMA_CPP_SKIP_DOWNLOAD=true
# npm install (not ci): the lockfile holds only the linux-x64 optional packages, which npm ci
# reads as out of sync; install still takes every version and integrity from the lockfile
(cd "$dir" && npm install --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error)
[ -f "$dir/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/llama-addon.node" ] ||
  { echo "install.sh: $dir: the prebuilt llama-addon.node is missing after npm ci" >&2; exit 1; }
echo "installed the llama.cpp peer into $dir"
