#!/bin/bash
# vouch ab on a tiny temporary git repository, with VOUCH_AB_PREBUILT=$VOUCH standing in for
# both builds (the worktrees are still made): the directory layout, the alternation order
# (ab.log), each run's manifest naming its side's commit, the pooled comparison and its exit
# code (0 for an unchanged checkpoint, 1 when head's checkpoint is broken), SHA256SUMS, that
# the repository keeps no worktree or branch, and the errors: unknown revision, missing
# --base, an --out that already holds a run, a worktree path in the way, a failing build
# (names its log), a bad VOUCH_AB_PREBUILT.
set -u
[ -n "${VOUCH:-}" ] || exit 77
"$VOUCH" ab --help >/dev/null 2>&1 || { echo "ab command not wired into this vouch; skipping"; exit 77; }
command -v git >/dev/null || { echo "git missing; skipping"; exit 77; }
command -v python3 >/dev/null || { echo "python3 missing; skipping"; exit 77; }
T=$(mktemp -d)
trap 'if [ -n "${KEEP_T:-}" ]; then echo "kept $T"; else rm -rf "$T"; fi' EXIT
export VOUCH_HISTORY_DB=off
unset GITHUB_EVENT_PATH GITHUB_SHA GITHUB_REF GITHUB_REPOSITORY GITHUB_BASE_REF VOUCH_AB_PREBUILT
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.invalid GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.invalid
export GIT_CONFIG_NOSYSTEM=1 HOME="$T"
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }

# the repository: base has a tiny checkpoint; "good" only edits a text file; "nan" sets the
# final norm's weights to NaN (the generate case fails its logits_finite check); "broken"
# breaks config.json (the generate step exits non-zero)
R=$T/repo
git init -q "$R" && git -C "$R" checkout -q -b main || exit 1
"$VOUCH" model synth --preset tiny --out "$R/m" >/dev/null || { echo "model synth failed"; exit 1; }
echo one > "$R/notes.txt"
git -C "$R" add -A && git -C "$R" commit -qm base || exit 1
git -C "$R" tag base
echo two >> "$R/notes.txt"
git -C "$R" commit -qam good && git -C "$R" tag good
cp "$R/m/model.safetensors" "$T/good.safetensors"
python3 - "$R/m/model.safetensors" <<'PY'
import json, struct, sys
with open(sys.argv[1], "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    t = json.loads(f.read(n))["model.norm.weight"]
    a, b = t["data_offsets"]
    f.seek(8 + n + a)
    f.write(b"\xc0\x7f" * ((b - a) // 2))
PY
git -C "$R" commit -qam nan && git -C "$R" tag nan
cp "$T/good.safetensors" "$R/m/model.safetensors"
python3 - "$R/m/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["model_type"] = "not_a_model"; json.dump(c, open(sys.argv[1], "w"))
PY
git -C "$R" commit -qam broken && git -C "$R" tag broken
git -C "$R" checkout -q good
BASE_SHA=$(git -C "$R" rev-parse base) GOOD_SHA=$(git -C "$R" rev-parse good)

# the plan: decode on the checkpoint of the worktree the run executes in
cat > "$T/plan.json" <<'PJ'
{"name": "abtest", "vars": {"model": "m"},
 "steps": [{"suite": "generate", "args": ["--model", "${model}", "--path", "cpu-ref", "--tokens", "1,2,3", "-n", "4", "--batch", "2"]}]}
PJ
export VOUCH_AB_PREBUILT=$VOUCH
cd "$T" || exit 1

# --- base vs good (head defaults to HEAD = good): no regression ---
O=$T/ab1
"$VOUCH" ab --repo "$R" --base base --plan plan.json --out "$O" --threshold 0.9 > "$T/ab1.out" 2> "$T/ab1.err"
rc=$?
[ $rc -eq 0 ] && ok "unchanged head: exit 0" || { bad "unchanged head: exit $rc"; cat "$T/ab1.err"; }
missing=""
for f in ab.json ab.log compare.json compare.md SHA256SUMS base-1/manifest.json head-1/manifest.json \
         base-2/results.json head-2/replay.sh base-1.vouch.tar.gz head-1.vouch.tar.gz base-2.vouch.tar.gz \
         head-2.vouch.tar.gz logs/base-1.log logs/head-2.log; do
  [ -e "$O/$f" ] || missing="$missing $f"
done
[ -z "$missing" ] && ok "layout: ab.json compare.* SHA256SUMS, base-K/head-K + bundles, logs/" || bad "layout: missing$missing"
[ ! -e "$O/work" ] && ok "worktrees and builds removed" || bad "work/ left behind"
[ -e "$O/head-3" ] && [ ! -e "$O/base-4" ] && ok "default 3 rounds" || bad "not 3 rounds"
order=$(sed -n 's/.* run \([a-z]*-[0-9]*\) .*/\1/p' "$O/ab.log" | tr '\n' ' ')
[ "$order" = "base-1 head-1 head-2 base-2 base-3 head-3 " ] && ok "alternation: $order" || bad "alternation order: '$order'"
grep -q "build base: skipped" "$O/ab.log" && ok "prebuilt: build skipped and logged" || bad "prebuilt not logged"
python3 - "$O" "$BASE_SHA" "$GOOD_SHA" <<'PY' && ok "manifests name each side's commit; ab.json runs and counts" || bad "manifests / ab.json"
import json, sys
o, b, h = sys.argv[1:4]
for name, sha in (("base-1", b), ("head-1", h), ("base-2", b), ("head-2", h), ("base-3", b), ("head-3", h)):
    m = json.load(open(f"{o}/{name}/manifest.json"))
    assert m["subject"]["git_head"] == sha, (name, m["subject"]["git_head"], sha)
    assert m["verdict"] == "pass", (name, m["verdict"])
a = json.load(open(f"{o}/ab.json"))
assert a["base"]["commit"] == b and a["head"]["commit"] == h and a["rounds"] == 3
assert [r["name"] for r in a["runs"]] == ["base-1", "head-1", "head-2", "base-2", "base-3", "head-3"]
assert all(r["exit_code"] == 0 for r in a["runs"]) and a["exit_code"] == 0 and a["compare"]["regressions"] == 0
PY
python3 - "$O/compare.json" <<'PY' && ok "all-rounds comparison: 3 values a side, a paired interval; per-round counts" || bad "compare.json"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["regressions"] == 0 and len(c["per_round"]) == 3 and c["ab"]["rounds"] == 3 and not c["failed"]
assert c["headline"].startswith("No regression"), c["headline"]
m = [x for x in c["metrics"] if x["metric"] == "decode_tokens_per_s"]
# one value per run, three paired runs a side: the median over runs, its interval the paired t interval of
# the runs' ratios (compare.h), and no regression between two builds of the same code
assert m and m[0]["n_base"] == 3 and m[0]["paired_rounds"] is True and m[0]["ci95"][0] is not None, m
assert not m[0]["regression"] and m[0]["verdict"] != "not enough samples", m
PY
(cd "$O" && sha256sum --quiet -c SHA256SUMS) && ok "SHA256SUMS holds" || bad "SHA256SUMS"
"$VOUCH" verify --quiet "$O/head-3.vouch.tar.gz" >/dev/null 2>&1 && ok "a run's bundle verifies" || bad "vouch verify head-2"
head -1 "$O/compare.md" | grep -q "^\*\*No regression" && grep -q "decode_tokens_per_s" "$O/compare.md" && ok "compare.md" || bad "compare.md"
grep -q "decode_tokens_per_s" "$T/ab1.out" && ok "comparison printed on stdout" || bad "stdout"
[ "$(git -C "$R" worktree list | wc -l)" -eq 1 ] && ok "no worktree left registered" || bad "worktrees: $(git -C "$R" worktree list)"
[ "$(git -C "$R" for-each-ref refs/heads | wc -l)" -eq 1 ] && ok "no temporary branch left" || bad "branches: $(git -C "$R" for-each-ref refs/heads)"
[ "$(git -C "$R" rev-parse HEAD)" = "$GOOD_SHA" ] && [ -z "$(git -C "$R" status --porcelain)" ] && ok "repository HEAD and work tree untouched" \
  || bad "repository changed"

# --- base vs nan, one round: correctness regression (a case now fails), exit 1 ---
O=$T/ab2
"$VOUCH" ab --repo "$R" --base base --head nan --rounds 1 --plan "$T/plan.json" --out "$O" --json > "$T/ab2.out" 2> "$T/ab2.err"
rc=$?
[ $rc -eq 1 ] && ok "NaN head: exit 1" || { bad "NaN head: exit $rc"; cat "$T/ab2.err"; }
python3 - "$T/ab2.out" <<'PY' && ok "--json: correctness regression reported" || bad "NaN head comparison"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["correctness_regressions"] == 1 and c["regressions"] >= 1, c
assert [x["kind"] for x in c["correctness"]] == ["regression"], c["correctness"]
PY
order=$(sed -n 's/.* run \([a-z]*-[0-9]*\) .*/\1/p' "$O/ab.log" | tr '\n' ' ')
[ "$order" = "base-1 head-1 " ] && ok "--rounds 1: $order" || bad "--rounds 1 order: '$order'"
head -1 "$O/compare.md" | grep -q "^\*\*REGRESSION" && grep -q "^\*\*REGRESSION: 1 correctness" "$O/compare.md" && ! grep -q "No regression" "$O/compare.md" && ok "compare.md names the regression" || bad "compare.md (NaN)"

# --- base vs broken: head's step exits non-zero: a run regression, exit 1 ---
O=$T/ab3
"$VOUCH" ab --repo "$R" --base base --head broken --rounds 1 --plan "$T/plan.json" --out "$O" > "$T/ab3.out" 2> "$T/ab3.err"
rc=$?
[ $rc -eq 1 ] && grep -q "run regression: head-1 exited" "$T/ab3.out" && ok "failing head step: exit 1, run regression named" \
  || { bad "failing head step: exit $rc"; cat "$T/ab3.out" "$T/ab3.err"; }

# --- errors ---
"$VOUCH" ab --repo "$R" --base no-such-rev --plan "$T/plan.json" --out "$T/e1" > /dev/null 2> "$T/e1.err"
rc=$?
[ $rc -eq 2 ] && grep -q "unknown revision" "$T/e1.err" && grep -q "no-such-rev" "$T/e1.err" && ok "unknown revision: exit 2, named" \
  || { bad "unknown revision: exit $rc"; cat "$T/e1.err"; }
"$VOUCH" ab --repo "$R" --plan "$T/plan.json" > /dev/null 2> "$T/e2.err"
[ $? -eq 2 ] && grep -q -- "--base" "$T/e2.err" && ok "missing --base: exit 2" || bad "missing --base"
"$VOUCH" ab --repo "$R" --base base --plan "$T/plan.json" --out "$T/ab1" > /dev/null 2> "$T/e3.err"
[ $? -eq 2 ] && grep -q "already holds" "$T/e3.err" && ok "reused --out: exit 2" || { bad "reused --out"; cat "$T/e3.err"; }
mkdir -p "$T/e4/work/base/stale"
"$VOUCH" ab --repo "$R" --base base --plan "$T/plan.json" --out "$T/e4" > /dev/null 2> "$T/e4.err"
[ $? -eq 2 ] && grep -q "work/base: already exists" "$T/e4.err" && [ -d "$T/e4/work/base/stale" ] \
  && ok "worktree path in the way: exit 2, left alone" || { bad "worktree collision"; cat "$T/e4.err"; }
[ "$(git -C "$R" worktree list | wc -l)" -eq 1 ] && [ "$(git -C "$R" for-each-ref refs/heads | wc -l)" -eq 1 ] \
  && ok "failed runs leave no worktree or branch" || bad "leftovers after errors: $(git -C "$R" worktree list; git -C "$R" for-each-ref refs/heads)"
if command -v cmake >/dev/null; then
  VOUCH_AB_PREBUILT="" "$VOUCH" ab --repo "$R" --base base --plan "$T/plan.json" --out "$T/e5" > /dev/null 2> "$T/e5.err"
  rc=$?
  [ $rc -eq 2 ] && grep -q "build of base" "$T/e5.err" && grep -q "logs/build-base.log" "$T/e5.err" && [ -s "$T/e5/logs/build-base.log" ] \
    && ok "build failure: exit 2, names logs/build-base.log" || { bad "build failure: exit $rc"; cat "$T/e5.err"; }
fi
VOUCH_AB_PREBUILT=$T/nope "$VOUCH" ab --repo "$R" --base base --out "$T/e6" > /dev/null 2> "$T/e6.err"
[ $? -eq 2 ] && grep -q "VOUCH_AB_PREBUILT" "$T/e6.err" && ok "bad VOUCH_AB_PREBUILT: exit 2" || bad "bad VOUCH_AB_PREBUILT"
exit $fail
