#!/usr/bin/env bash
# Builds vouch inside the evaluation image (docker/Dockerfile) and inside the chroot of
# scripts/check-image-recipe.sh, and installs it as /usr/local/bin/vouch.
#   build-in-image.sh [SRC]        SRC: the source tree (default /opt/vouch/src)
#   VOUCH_CUDA=ON|OFF|AUTO         CUDA paths (default AUTO; the image passes ON)
#   VOUCH_CUDA_ARCHS="90a;100a"    CMAKE_CUDA_ARCHITECTURES when CUDA is built
#   VOUCH_WERROR=ON|OFF            warnings as errors (default OFF)
#   VOUCH_BUILD_DIR=DIR            build tree (default SRC/build)
set -euo pipefail
src=${1:-/opt/vouch/src}
build=${VOUCH_BUILD_DIR:-$src/build}
cuda=${VOUCH_CUDA:-AUTO}
archs=${VOUCH_CUDA_ARCHS:-90a;100a}
opts=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DVOUCH_CUDA=$cuda" "-DVOUCH_WERROR=${VOUCH_WERROR:-OFF}")
if [ "$cuda" != OFF ]; then
  opts+=("-DCMAKE_CUDA_ARCHITECTURES=$archs")
fi
echo "build-in-image: cmake ${opts[*]}"
cmake -S "$src" -B "$build" "${opts[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)"
install -m 0755 "$build/vouch" /usr/local/bin/vouch
vouch --version
