#!/bin/sh
# Replays this run: rebuilds vouch at the commit that made it with the same cmake options,
# reruns the same plan, variables and seeds, and compares the new results with these.
# Usage: sh replay.sh [OUT_DIR]
#   VOUCH_SRC=DIR  a git checkout of vouch holding that commit (default: the current directory)
#   VOUCH=BINARY   skip the rebuild and use this vouch
# Original command line: 'vouch' 'run' '--plan' 'test' '--api-token=***' '--out' '/work/main/results-schema/example'
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-replay-$(date +%Y%m%d-%H%M%S)}
commit=c623153d6eb53a69fe9245f4008b81363980aa72
cmake_options='-DCMAKE_BUILD_TYPE=RelWithDebInfo -DVOUCH_CUDA=AUTO -DCMAKE_CUDA_ARCHITECTURES='\''90a'\'''
if [ -z "${VOUCH:-}" ]; then
  src=${VOUCH_SRC:-.}
  wt="${TMPDIR:-/tmp}/vouch-replay-$commit"
  [ -d "$wt" ] || git -C "$src" worktree add --detach "$wt" "$commit"
  eval cmake -S "\$wt" -B "\$wt/build" $cmake_options
  cmake --build "$wt/build" -j"$(nproc)"
  VOUCH=$wt/build/vouch
fi
run_rc=0
"$VOUCH" run --plan "$here/plan.json" --out "$out" || run_rc=$?
# compared also when the rerun failed: that is when the comparison says what changed
"$VOUCH" compare "$here" "$out" || exit $?
exit $run_rc
