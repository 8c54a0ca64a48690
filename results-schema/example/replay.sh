#!/bin/sh
# Replays this run with the same plan and seeds, then compares the new results with
# these. Usage: sh replay.sh [OUT_DIR]   (VOUCH=/path/to/vouch to pick the binary)
# Original command line: 'vouch' 'run' '--plan' 'test' '--api-token=***' '--out' '/work/main/results-schema/example'
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-replay-$(date +%Y%m%d-%H%M%S)}
vouch=${VOUCH:-vouch}
"$vouch" run --plan "$here/plan.json" --out "$out"
"$vouch" compare "$here" "$out"
