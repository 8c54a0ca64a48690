#!/usr/bin/env bash
# The vouch CI job, shared by the GitHub Actions workflow (github-vouch.yml) and the Buildkite
# pipeline (buildkite-vouch.yml). Runs on a self-hosted GPU machine with Docker and the NVIDIA
# container toolkit; everything vouch does happens inside the evaluation image.
#
#   vouch-ci.sh build      docker build docker/Dockerfile -> $IMAGE
#   vouch-ci.sh run        the image's entrypoint: vouch run --plan $VOUCH_PLAN, bundle, verify;
#                          the bundle is copied to $OUT/<name>.vouch.tar.gz (exit code kept)
#   vouch-ci.sh baseline   the base branch's latest bundle -> $OUT/baseline.vouch.tar.gz: the
#                          history store on this machine (same plan content and hardware, a
#                          non-PR run at the base commit or its nearest ancestor; says why),
#                          else $VOUCH_BASELINE_BUNDLE (e.g. a downloaded artifact), else the
#                          artifact of the newest successful run on the base branch (GitHub, gh)
#   vouch-ci.sh compare    vouch compare baseline bundle -> $OUT/compare.txt, compare.md (verdict
#                          first), compare.json; exit 1 also when the run is incomplete or lacks
#                          cases the baseline has (timings of one run a side are listed, not gated:
#                          vouch ab --rounds 3 gates them)
#   vouch-ci.sh publish    vouch publish: PR comment and commit status (GITHUB_TOKEN)
#   vouch-ci.sh gate       exit 1 when the run failed or the comparison found a regression
#
# Environment: VOUCH_PLAN (default smoke), CUDA_ARCHS (default "90a;100a"), VOUCH_STORE (a
# directory kept on this machine between jobs: history.sqlite and results/; default
# /var/lib/vouch), OUT (default ./vouch-out), HEAD_SHA, BASE_SHA, PR_REPO (owner/repo),
# PR_NUMBER, BUNDLE_URL and REPORT_URL (links in the comment: the bundle, $OUT/report/report.html),
# GITHUB_TOKEN (publish), GITHUB_EVENT_PATH.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
plan=${VOUCH_PLAN:-smoke}
store=${VOUCH_STORE:-/var/lib/vouch}
out=${OUT:-$PWD/vouch-out}
head_sha=${HEAD_SHA:-$(git -C "$root" rev-parse HEAD)}
image=${IMAGE:-vouch-eval:${head_sha:0:12}}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# vouch inside the image, with the store and $OUT mounted
vouch_in_image() {
  docker run --rm -v "$store:/store" -v "$out:/out" -e VOUCH_HISTORY_DB=/store/history.sqlite \
    -e GITHUB_TOKEN "$image" vouch "$@"
}

bundle_name() { cat "$out/name"; }

case "${1:-}" in
  build)
    docker build -f "$root/docker/Dockerfile" -t "$image" \
      --build-arg CUDA_ARCHS="${CUDA_ARCHS:-90a;100a}" \
      --build-arg VOUCH_IMAGE_DIGEST="src:$(git -C "$root" rev-parse HEAD)" "$root"
    docker image inspect --format '{{.Id}}' "$image" > "$out/image-id"
    echo "vouch-ci: image $image $(cat "$out/image-id")"
    ;;
  run)
    name="${plan%.json}-${head_sha:0:12}-$(date -u +%Y%m%d-%H%M%S)"
    name=${name##*/}
    echo "$name" > "$out/name"
    mkdir -p "$store/results"
    event=()
    if [ -n "${GITHUB_EVENT_PATH:-}" ] && [ -f "$GITHUB_EVENT_PATH" ]; then
      event=(-v "$GITHUB_EVENT_PATH:/github/event.json:ro" -e GITHUB_EVENT_PATH=/github/event.json)
    fi
    rc=0
    # the exact image ID overrides the build-time VOUCH_IMAGE_DIGEST (see docker/Dockerfile)
    docker run --rm --gpus all --ipc=host -v "$store:/store" "${event[@]}" \
      -e VOUCH_IMAGE_DIGEST="$(docker image inspect --format '{{.Id}}' "$image")" \
      -e VOUCH_PLAN="$plan" -e VOUCH_RESULTS=/store/results -e VOUCH_RESULT_NAME="$name" \
      -e VOUCH_HISTORY_DB=/store/history.sqlite \
      -e GITHUB_REPOSITORY -e GITHUB_REF -e GITHUB_SHA -e GITHUB_BASE_REF \
      "$image" || rc=$?
    echo "$rc" > "$out/run-rc"
    if [ ! -f "$store/results/$name.vouch.tar.gz" ]; then
      echo "vouch-ci: the run (exit $rc) made no bundle" >&2
      exit 2
    fi
    cp "$store/results/$name.vouch.tar.gz" "$out/"
    # the full report (every chart and record) goes next to the bundle; the PR comment links it
    mkdir -p "$out/report"
    vouch_in_image report "/out/$name.vouch.tar.gz" --html /out/report/report.html --md /out/report/comment.md \
      || echo "vouch-ci: report failed (the comment will be made by publish)" >&2
    echo "vouch-ci: bundle $out/$name.vouch.tar.gz (run exit $rc)"
    ;;
  baseline)
    rm -f "$out/baseline.vouch.tar.gz"
    name=$(bundle_name)
    hw=$(docker run --rm -v "$out:/out:ro" "$image" python3 -c \
      'import json, sys, tarfile
t = tarfile.open(sys.argv[1])
m = next(x for x in t.getmembers() if x.name.endswith("/manifest.json") and x.name.count("/") == 1)
print(json.load(t.extractfile(m))["hardware"]["key"])' "/out/$name.vouch.tar.gz")
    found=""
    if [ -n "${BASE_SHA:-}" ] && [ -f "$store/history.sqlite" ]; then
      # the plan's identity is its content hash (vouch resolves a name or a file the way the run
      # did); ancestry of the base commit is checked in this checkout, mounted read-only
      found=$(docker run --rm -v "$store:/store" -v "$root:/src:ro" -e VOUCH_HISTORY_DB=/store/history.sqlite \
        "$image" vouch history baseline --plan "$plan" --hardware "$hw" --base "$BASE_SHA" --repo /src || true)
    fi
    if [ -n "$found" ] && [ "${found#/store/}" != "$found" ] && [ -f "$store/${found#/store/}" ]; then
      cp "$store/${found#/store/}" "$out/baseline.vouch.tar.gz"
      echo "vouch-ci: baseline from the history store: $found"
    elif [ -n "${VOUCH_BASELINE_BUNDLE:-}" ] && [ -f "$VOUCH_BASELINE_BUNDLE" ]; then
      cp "$VOUCH_BASELINE_BUNDLE" "$out/baseline.vouch.tar.gz"
      echo "vouch-ci: baseline from VOUCH_BASELINE_BUNDLE=$VOUCH_BASELINE_BUNDLE"
    elif [ -n "${GITHUB_ACTIONS:-}" ] && [ -n "${GITHUB_BASE_REF:-}" ] && command -v gh >/dev/null; then
      id=$(gh run list --repo "$GITHUB_REPOSITORY" --workflow "${VOUCH_WORKFLOW:-vouch.yml}" --branch "$GITHUB_BASE_REF" \
        --status success --limit 1 --json databaseId --jq '.[0].databaseId' || true)
      if [ -n "$id" ] && gh run download "$id" --repo "$GITHUB_REPOSITORY" --name vouch-bundle --dir "$out/base-artifact"; then
        f=$(find "$out/base-artifact" -name '*.vouch.tar.gz' | head -1)
        [ -n "$f" ] && mv "$f" "$out/baseline.vouch.tar.gz" && echo "vouch-ci: baseline from the artifact of run $id"
      fi
      rm -rf "$out/base-artifact"
    fi
    [ -f "$out/baseline.vouch.tar.gz" ] || echo "vouch-ci: no baseline bundle for plan ${plan%.json} on '$hw': comparison skipped"
    ;;
  compare)
    name=$(bundle_name)
    if [ ! -f "$out/baseline.vouch.tar.gz" ]; then
      echo "no baseline" > "$out/compare.txt"
      echo 0 > "$out/compare-rc"
      exit 0
    fi
    rc=0
    vouch_in_image compare /out/baseline.vouch.tar.gz "/out/$name.vouch.tar.gz" --md /out/compare.md > "$out/compare.txt" || rc=$?
    vouch_in_image compare --json /out/baseline.vouch.tar.gz "/out/$name.vouch.tar.gz" > "$out/compare.json" || true
    echo "$rc" > "$out/compare-rc"
    cat "$out/compare.txt"
    [ "$rc" -le 1 ] || { echo "vouch-ci: compare could not read its inputs (exit $rc)" >&2; exit 2; }
    ;;
  publish)
    name=$(bundle_name)
    : "${PR_REPO:?PR_REPO=owner/repo is needed}" "${PR_NUMBER:?PR_NUMBER is needed}" "${GITHUB_TOKEN:?GITHUB_TOKEN is needed}"
    args=("/out/$name.vouch.tar.gz" --pr "$PR_REPO#$PR_NUMBER" --status)
    [ -z "${BUNDLE_URL:-}" ] || args+=(--bundle-url "$BUNDLE_URL")
    [ -z "${REPORT_URL:-}" ] || args+=(--report-url "$REPORT_URL")
    vouch_in_image publish "${args[@]}"
    ;;
  gate)
    run_rc=$(cat "$out/run-rc" 2>/dev/null || echo 2)
    cmp_rc=$(cat "$out/compare-rc" 2>/dev/null || echo 0)
    echo "vouch-ci: run exit $run_rc, compare exit $cmp_rc"
    [ "$run_rc" -eq 0 ] && [ "$cmp_rc" -eq 0 ]
    ;;
  *)
    sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
