#!/usr/bin/env bash
# Installs what vouch needs to build and test, from Debian/Ubuntu packages (Debian 12,
# Ubuntu 24.04). CUDA (nvcc, cuBLAS, NCCL) is optional and not installed here: the build
# picks it up from /usr/local/cuda when present. Nothing is downloaded at build or run time.
set -euo pipefail
pkgs=(build-essential cmake pkg-config git ca-certificates
      libcjson-dev libsqlite3-dev sqlite3 libcurl4-openssl-dev libmicrohttpd-dev libgit2-dev libarchive-dev
      zlib1g-dev libssl-dev python3 python3-jsonschema shellcheck yamllint debootstrap curl
      clang libclang-rt-dev libomp-dev) # clang + libFuzzer + its OpenMP: the fuzz targets
pkgs+=(chromium fonts-dejavu-core)  # headless Chromium renders the HTML report (tests/cli/test_report_browser.sh)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
