#!/bin/bash
# The HTML report in a real browser: a short run with every chart kind (sweep of two paths
# over batch x context, divergence, both evals) is rendered by headless Chromium; the page's
# own script marks each chart that drew nothing and any script error on <body>, and the test
# reads the rendered DOM. Two broken copies of the page (a chart with no points, a script
# that throws) must be caught, so the check itself is checked. Skipped (77) without chromium.
# VOUCH_SCREENSHOT_DIR=DIR also saves a PNG of the page there.
set -u
[ -n "${VOUCH:-}" ] || exit 77
CHROME=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROME" ] || { echo "chromium not installed (scripts/install-deps.sh installs it); skipping"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export VOUCH_HISTORY_DB=off HOME="$T"
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
render() { # the DOM after the page's scripts ran
  timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$T/profile" \
    --virtual-time-budget=5000 --dump-dom "file://$1" 2>"$T/chrome.err"
}
cat > "$T/plan.json" <<'PJ'
{"name": "charts", "steps": [
 {"suite": "sweep", "args": ["--model", "synth:tiny", "--paths", "cpu-ref,cpu-ref:tp2", "--batch", "1,2,4",
  "--context", "32,64", "--steps", "6", "--membw-bytes", "16m", "--no-progress"]},
 {"suite": "diverge", "args": ["--model", "synth:tiny", "--paths", "cpu-ref,cpu-ref:tp2", "--batch", "1",
  "--context", "0,32", "--tokens", "4", "--max-kld=0.01"]},
 {"suite": "eval", "args": ["mrcr", "--model", "synth:recall-mrcr", "--paths", "cpu-ref", "--bins", "256,512",
  "--needles", "2", "--samples", "1"]},
 {"suite": "eval", "args": ["chain", "--model", "synth:recall-chain", "--paths", "cpu-ref", "--hops", "8,16",
  "--samples", "1"]}]}
PJ
"$VOUCH" run --plan "$T/plan.json" --out "$T/run" > "$T/run.log" 2>&1 || { echo "run failed: $(tail -5 "$T/run.log")"; exit 1; }
"$VOUCH" report "$T/run" --html "$T/r.html" > "$T/r.md" || { echo "report failed"; exit 1; }
render "$T/r.html" > "$T/dom.html"
body=$(grep -o '<body[^>]*>' "$T/dom.html" | head -1)
echo "$body" | grep -qE 'data-chart-check="ok ([6-9]|[1-9][0-9])"' && ok "every chart drew marks: $body" || bad "chart check: '$body' $(tail -3 "$T/chrome.err")"
echo "$body" | grep -q 'data-script-error' && bad "script error: $body" || ok "no script error"
for title in "Speed-up of cpu-ref:tp2 over cpu-ref" "Tokens/s vs batch" "% of roofline vs batch" "Eval mrcr: score vs bin" \
             "Eval chain: score vs hops" "Divergence per point"; do
  grep -qF "$title" "$T/dom.html" && ok "chart: $title" || bad "missing chart: $title"
done
# one line per context in the speed-up chart: one legend entry per context, not per path
grep -o 'data-title="Speed-up[^"]*".*' "$T/dom.html" | head -c 20000 | grep -o '>ctx [0-9]*<' | sort -u | tr '\n' ' ' > "$T/ctx"
[ "$(wc -w < "$T/ctx")" -ge 2 ] && ok "speed-up lines per context: $(cat "$T/ctx")" || bad "speed-up series: $(cat "$T/ctx")"
[ -n "${VOUCH_SCREENSHOT_DIR:-}" ] && timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --user-data-dir="$T/profile" --window-size=1360,1500 --screenshot="$VOUCH_SCREENSHOT_DIR/charts-test.png" "file://$T/r.html" 2>/dev/null

# the checker catches what it is for: a chart with no points, and a script that throws
python3 - "$T/r.html" "$T/empty.html" "$T/throw.html" <<'PY'
import re, sys
page = open(sys.argv[1]).read()
first = page.index('<svg class="chart"')
end = page.index('</svg>', first)
chart = re.sub(r'<polyline[^>]*/>|<circle[^>]*>.*?</circle>|<rect class="bar"[^>]*/>|<line [^>]*class="ci"/>', '', page[first:end])
open(sys.argv[2], "w").write(page[:first] + chart + page[end:])
open(sys.argv[3], "w").write(page.replace("<script>(function(){", "<script>(function(){null.x();", 1))
PY
render "$T/empty.html" | grep -o '<body[^>]*>' | grep -q 'data-chart-check="empty: Speed-up' && ok "an empty chart is caught" || bad "empty chart not caught"
render "$T/throw.html" | grep -o '<body[^>]*>' | grep -q 'data-script-error=' && ok "a script error is caught" || bad "script error not caught"
exit $fail
