#!/usr/bin/env bash
# Configures and builds vouch into BUILD_DIR (default build/). Extra arguments go to cmake,
# e.g. -DVOUCH_CUDA=OFF or -DCMAKE_CUDA_ARCHITECTURES="90a;100a".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
