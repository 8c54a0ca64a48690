#!/usr/bin/env bash
# Exercises the evaluation image's recipe (docker/Dockerfile) without a Docker engine: a clean
# Debian 12 root made by `debootstrap --variant=minbase bookworm`, the source copied in as the
# Dockerfile's COPY would (tracked and untracked-but-not-ignored files, plus .git), then inside
# `chroot` the same steps as the image: scripts/install-deps.sh, docker/build-in-image.sh, and
# docker/entrypoint.sh (vouch run --plan smoke, bundle, vouch verify). Finally checks that the
# bundle's manifest carries the image digest it was given.
#
# The image's base is NVIDIA's CUDA 13 devel image on Ubuntu 24.04; Ubuntu's and NVIDIA's
# mirrors cannot be reached from these machines, so this root is Debian 12 and CPU-only
# (VOUCH_CUDA=OFF): it checks the dependency script, the build script and the entrypoint,
# not nvcc or the CUDA paths. Nothing is cached between runs: every run starts from an
# empty directory. Needs root, debootstrap and network access to the Debian mirror.
#   DEBIAN_MIRROR=URL   (default http://deb.debian.org/debian)
#   KEEP=1              keep the root (printed) instead of deleting it
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
[ "$(id -u)" -eq 0 ] || { echo "check-image-recipe: needs root (debootstrap, chroot, mount)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "check-image-recipe: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 2; }

work=$(mktemp -d /tmp/vouch-recipe.XXXXXX)
chr=$work/root
mounts=()
cleanup() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount "${mounts[$i]}" 2>/dev/null || umount -l "${mounts[$i]}" 2>/dev/null || true
  done
  # never delete through a mount that is still there
  if findmnt -rn -o TARGET | grep "^$work/" >/dev/null; then # no -q: under pipefail an early exit can SIGPIPE findmnt and fail open
    echo "check-image-recipe: mounts remain under $work: not deleting it" >&2
  elif [ "${KEEP:-0}" = 1 ]; then
    echo "check-image-recipe: kept $chr"
  else
    rm -rf --one-file-system "$work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t0=$(date +%s)
phase_start=$t0
phase() {
  local now
  now=$(date +%s)
  printf 'check-image-recipe: %-28s %4d s\n' "$1" $((now - phase_start))
  phase_start=$now
}

echo "check-image-recipe: debootstrap bookworm (minbase) from $mirror into $chr"
debootstrap --variant=minbase bookworm "$chr" "$mirror" >"$work/debootstrap.log" 2>&1 || {
  tail -20 "$work/debootstrap.log" >&2
  echo "check-image-recipe: debootstrap failed (log above)" >&2
  exit 1
}
phase "debootstrap"

# what COPY . /opt/vouch/src sends with docker/Dockerfile.dockerignore: the tree git knows
# (tracked + untracked, not ignored) and .git itself
mkdir -p "$chr/opt/vouch/src"
(cd "$root" && git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf - && tar -cf - .git) | tar -xf - -C "$chr/opt/vouch/src" --ignore-zeros
cp /etc/resolv.conf "$chr/etc/resolv.conf"
mount -t proc proc "$chr/proc"
mounts+=("$chr/proc")
mount -t sysfs sysfs "$chr/sys"
mounts+=("$chr/sys")
mount --bind /dev "$chr/dev"
mounts+=("$chr/dev")
mount --bind /dev/pts "$chr/dev/pts"
mounts+=("$chr/dev/pts")
phase "copy source, mounts"

in_root() {
  chroot "$chr" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}

in_root /opt/vouch/src/scripts/install-deps.sh
phase "install-deps.sh"
in_root env VOUCH_CUDA=OFF VOUCH_WERROR=ON /opt/vouch/src/docker/build-in-image.sh /opt/vouch/src >"$work/build.log" 2>&1 || {
  tail -30 "$work/build.log" >&2
  echo "check-image-recipe: docker/build-in-image.sh failed (log above)" >&2
  exit 1
}
tail -1 "$work/build.log"
phase "build-in-image.sh"

# as `docker run` would: WORKDIR /opt/vouch/src, the ENV lines of the Dockerfile
digest="chroot-check:$(cd "$root" && git rev-parse HEAD 2>/dev/null || echo unknown)"
rc=0
chroot "$chr" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/root LANG=C.UTF-8 VOUCH_IMAGE_DIGEST="$digest" VOUCH_PLAN=smoke VOUCH_RESULTS=/results \
  VOUCH_HISTORY_DB=/results/history.sqlite VOUCH_RESULT_NAME=smoke \
  /bin/sh -c 'cd /opt/vouch/src && exec /opt/vouch/src/docker/entrypoint.sh' || rc=$?
phase "entrypoint (smoke, verify)"
[ "$rc" -eq 0 ] || { echo "check-image-recipe: FAIL: the entrypoint exited $rc" >&2; exit 1; }
[ -f "$chr/results/smoke.vouch.tar.gz" ] || { echo "check-image-recipe: FAIL: no bundle in /results" >&2; exit 1; }
got=$(sed -n 's/.*"image_digest":[[:space:]]*"\([^"]*\)".*/\1/p' "$chr/results/smoke/manifest.json" | head -1)
[ "$got" = "$digest" ] || { echo "check-image-recipe: FAIL: manifest build.image_digest is '$got', expected '$digest'" >&2; exit 1; }
echo "check-image-recipe: ok: image_digest in the manifest: $got"
echo "check-image-recipe: total $(( $(date +%s) - t0 )) s"
