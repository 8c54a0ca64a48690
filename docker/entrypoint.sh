#!/bin/sh
# Entrypoint of the vouch evaluation image (docker/Dockerfile).
#   no arguments, or arguments starting with '-':
#     vouch run --plan "${VOUCH_PLAN:-smoke}" --out "$VOUCH_RESULTS/<name>" [ARGS...]
#     (vouch run bundles the directory to <name>.vouch.tar.gz), then vouch verify on the bundle.
#   any other arguments: run them as a command (e.g. `vouch compare A B`, `bash`).
# Environment: VOUCH_PLAN (smoke, h200 or a plan file), VOUCH_RESULTS (default /results),
#   VOUCH_RESULT_NAME (default <plan>-<UTC time>), VOUCH_IMAGE_DIGEST (lands in the manifest).
# Exit code: vouch run's (0 pass, 1 fail or incomplete, 2 usage), or 1 when verify fails.
set -eu
if [ "$#" -gt 0 ]; then
  case "$1" in
    -*) ;;
    *) exec "$@" ;;
  esac
fi
plan=${VOUCH_PLAN:-smoke}
results=${VOUCH_RESULTS:-/results}
name=${VOUCH_RESULT_NAME:-$(basename "$plan" .json)-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$results"
if [ -z "${VOUCH_IMAGE_DIGEST:-}" ]; then
  echo "entrypoint: warning: VOUCH_IMAGE_DIGEST is empty: the manifest will not name this image" >&2
fi
rc=0
vouch run --plan "$plan" --out "$results/$name" "$@" || rc=$?
bundle="$results/$name.vouch.tar.gz"
if [ ! -f "$bundle" ]; then
  echo "entrypoint: vouch run exited $rc and made no bundle at $bundle" >&2
  [ "$rc" -ne 0 ] || rc=2
  exit "$rc"
fi
vouch verify "$bundle" || { echo "entrypoint: vouch verify failed on $bundle" >&2; exit 1; }
echo "entrypoint: bundle $bundle (run exit code $rc)"
exit "$rc"
