#!/usr/bin/env bash
# diverge --ref-server --kld-budget: a declared precision change. The candidate is vouch serve with the
# test device --test-logit-scale 0.05 (every logits row x 1.05: greedy tokens unchanged, each
# distribution sharper, a mean KLD of ~5e-4 nats against the batch-invariant reference's floor of 0).
# Without a budget the floor's rule fails it; a budget of 0.01 nats passes it (the record keeps the
# budget, its bound says so, and the top-token arm is no check); a budget of 1e-5 nats, below the
# change, still fails it; a budget that is not a number in [0, 100] is a usage error.
. "$VOUCH_SRC/tests/cli/counters.sh"
export VOUCH_HISTORY_DB="$t/history.db" TMPDIR="$t"
srv="$VOUCH serve --model synth:tiny --threads 1 --port {port}"
pair=(--server "launch:$srv --test-logit-scale 0.05" --ref-server "launch:$srv" --limit 4 --tokens 8)

for b in 0 0.01 1e-5; do
  "$VOUCH" diverge "${pair[@]}" --kld-budget "$b" --json "$t/b$b.json" >"$t/b$b.out" 2>"$t/b$b.err"
  echo $? >"$t/b$b.rc"
done
[ "$(cat "$t/b0.rc")" -eq 1 ] && grep -q 'FAIL' "$t/b0.out" && ok || bad "no budget: exit $(cat "$t/b0.rc"), want 1: $(tail -4 "$t/b0.out")"
[ "$(cat "$t/b0.01.rc")" -eq 0 ] && grep -q -- '--kld-budget 0.01 nats: added to both KLD bounds' "$t/b0.01.out" && ok ||
  bad "budget 0.01: exit $(cat "$t/b0.01.rc"), want 0: $(tail -5 "$t/b0.01.out") $(tail -3 "$t/b0.01.err")"
[ "$(cat "$t/b1e-5.rc")" -eq 1 ] && ok || bad "budget 1e-5: exit $(cat "$t/b1e-5.rc"), want 1: $(tail -4 "$t/b1e-5.out")"
python3 - "$t" <<'PY' && ok || bad "the records (above)"
import json, sys
def cand(b):
    recs = json.load(open(f"{sys.argv[1]}/b{b}.json"))["records"]
    c = [r for r in recs if r["suite"] == "diverge" and not r["path"].endswith("@floor")]
    assert len(c) == 1, [r["path"] for r in recs]
    return c[0]
def checks(r): return {c["name"] for c in r.get("checks", [])}
strict, loose, tight = cand("0"), cand("0.01"), cand("1e-5")
assert strict["status"] == "fail" and "same_top_on_decided_positions" in checks(strict), (strict["status"], checks(strict))
assert strict["params"]["kld_budget"] == 0, strict["params"]
m = {x["name"]: x["value"] for x in strict["metrics"]}
assert 1e-4 < m["kld"] < 5e-3 and m["same_top_pct"] == 100, m
assert loose["status"] == "pass" and loose["params"]["kld_budget"] == 0.01, (loose["status"], loose["params"])
assert "same_top_on_decided_positions" not in checks(loose) and "--kld-budget 0.01" in loose["params"]["bound_source"], loose
assert tight["status"] == "fail", tight["status"]
PY
for bad_b in -1 abc 101; do
  "$VOUCH" diverge --server http://127.0.0.1:1 --ref-server http://127.0.0.1:2 --kld-budget "$bad_b" >"$t/u.out" 2>"$t/u.err"
  rc=$?
  [ "$rc" -eq 2 ] && grep -q -- "--kld-budget" "$t/u.err" && ok || bad "--kld-budget $bad_b: exit $rc, want 2: $(cat "$t/u.err")"
done
finish test_diverge_budget
