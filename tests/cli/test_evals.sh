#!/usr/bin/env bash
# vouch diverge / eval mrcr / eval chain / features end to end on the CPU: passing runs exit 0
# with the figures printed and records written; a failing eval exits 1; bad input is a
# one-line error with exit 2. Skipped (77) until runner/cli/main.c dispatches the commands.
. "$VOUCH_SRC/tests/cli/counters.sh"
if ! "$VOUCH" eval --help >/dev/null 2>&1; then echo "vouch eval is not wired into main.c: skipped"; exit 77; fi

"$VOUCH" diverge --paths cpu-ref,cpu-ref --batch 1,2 --context 0,64 --tokens 4 --threads 2 --json "$t/d.json" >"$t/out" \
  && ok || bad "diverge cpu-ref vs itself: $(cat "$t/out")"
grep -q "mean KLD" "$t/out" && [ "$(grep -c ' pass$' "$t/out")" -eq 4 ] && ok || bad "diverge table: $(cat "$t/out")"
python3 -c "import json,sys; r=json.load(open('$t/d.json'))['records']; assert len(r)==4 and all(x['status']=='pass' for x in r)" \
  && ok || bad "diverge --json records"
# --json is written whole or not at all (common/atomic_file.h): a write that fails part-way (over the
# file size limit, SIGXFSZ ignored so write() says EFBIG) leaves no file under the name, nor a
# temporary one beside it, and an existing file stays as it was; a directory in the way is an error
small=(diverge --paths cpu-ref,cpu-ref --tokens 4 --threads 2)
cp "$t/d.json" "$t/d0.json"
for f in big.json d.json; do
  (trap '' XFSZ; ulimit -f 1; exec "$VOUCH" "${small[@]}" --json "$t/$f") >/dev/null 2>"$t/err"; rc=$?
  [ $rc -eq 1 ] && grep -q "$f: cannot write: File too large" "$t/err" && ok || bad "--json $f over the size limit: exit $rc: $(cat "$t/err")"
done
[ ! -e "$t/big.json" ] && cmp -s "$t/d.json" "$t/d0.json" && ok || bad "a failed --json write left a part of a file under its name"
mkdir "$t/dir.json"
expect_error 1 "dir.json: cannot rename into place" "$VOUCH" "${small[@]}" --json "$t/dir.json"
[ -z "$(find "$t" -name '*.tmp*')" ] && ok || bad "failed --json writes left temporary files: $(find "$t" -name '*.tmp*')"
# a baseline (the floor) between the reference and the path, ragged K+1-token steps, skewed routing:
# every bound says where it came from
"$VOUCH" diverge --paths cpu-ref,cpu-ref:tp2,cpu-ref:tp4 --baseline cpu-ref:tp2 --batch 3 --context 48 --ragged --spec 2 \
  --routing zipf:1.5 --tokens 2 --threads 2 --json "$t/b.json" >"$t/out" && grep -q " base$" "$t/out" \
  && ok || bad "diverge --baseline: $(cat "$t/out")"
python3 -c "
import json; r=json.load(open('$t/b.json'))['records']
t=[x for x in r if x['path']=='cpu-ref:tp4'][0]
assert t['status']=='pass' and 'floor: baseline cpu-ref:tp2' in t['params']['bound_source'], t
assert t['case_id']=='b3_c48_t2_ragged_k2_forced_vs_cpu-ref', t['case_id']
# both arms of the KLD rule are on the record: the mean arm as the threshold, the bulk arm as a check
assert t['threshold']['metric']=='kld' and {'name': 'kld_bulk_within_floor', 'ok': True} in t['checks'], t
m={x['name']: x['value'] for x in t['metrics']}
assert m['kld_excess_trimmed'] <= 3 * m['kld_excess_trimmed_se'], m" && ok || bad "diverge --baseline records"
# --skew: sequence 0 holds the context, the others none; on the record and in the case id, and it
# excludes --ragged
"$VOUCH" diverge --paths cpu-ref,cpu-ref:tp2 --batch 3 --context 48 --skew --tokens 2 --threads 2 --json "$t/s.json" \
  >"$t/out" && grep -q "skewed contexts (sequence 0 holds the context)" "$t/out" && python3 -c "
import json; t=json.load(open('$t/s.json'))['records'][0]
assert t['case_id']=='b3_c48_t2_skew_vs_cpu-ref' and t['params']['skew']==1 and t['params']['ragged']==0, t
assert t['status']=='pass', t" && ok || bad "diverge --skew: $(cat "$t/out")"
expect_error 2 "option --skew: --ragged and --skew exclude each other" \
  "$VOUCH" diverge --paths cpu-ref,cpu-ref:tp2 --batch 3 --context 48 --ragged --skew --tokens 2
# a --baseline that is not a compared path (a typo, the reference itself) would leave the bounds
# uncalibrated: a usage error naming the compared paths
expect_error 2 "option --baseline: 'cpu-ref:tp3' is not one of the compared paths (--paths after the reference: cpu-ref:tp2,cpu-ref:tp4)" \
  "$VOUCH" diverge --paths cpu-ref,cpu-ref:tp2,cpu-ref:tp4 --baseline cpu-ref:tp3 --batch 1 --tokens 2
expect_error 2 "option --baseline: 'cpu-ref' is not one of the compared paths" \
  "$VOUCH" diverge --paths cpu-ref,cpu-ref:tp2 --baseline cpu-ref --batch 1 --tokens 2
# two chain steps in one run (greedy and sampled) keep apart records
"$VOUCH" eval chain --hops 16 --samples 1 --threads 2 --json "$t/c1.json" >/dev/null &&
  "$VOUCH" eval chain --hops 16 --samples 1 --threads 2 --temperature 0.5 --json "$t/c2.json" >/dev/null &&
  python3 -c "
import json; a={x['case_id'] for x in json.load(open('$t/c1.json'))['records']}; b={x['case_id'] for x in json.load(open('$t/c2.json'))['records']}
assert not a & b, a & b" && ok || bad "chain record ids collide across temperatures"

"$VOUCH" eval mrcr --bins 256 --needles 2,8 --samples 2 --threads 2 --json "$t/m.json" >"$t/out" && ok || bad "mrcr: $(cat "$t/out")"
grep -q "verdict: pass" "$t/out" && grep -q "depth x context" "$t/out" && ok || bad "mrcr report: $(cat "$t/out")"
python3 -c "import json; r=json.load(open('$t/m.json'))['records']; assert len(r)==2 and all(x['status']=='pass' for x in r)" \
  && ok || bad "mrcr --json records"
# two paths: the pairwise comparison is printed
"$VOUCH" eval mrcr --paths cpu-ref,cpu-ref --bins 256 --needles 4 --samples 1 --threads 2 >"$t/out" && grep -q "McNemar p" "$t/out" \
  && ok || bad "mrcr pairwise: $(cat "$t/out")"
# prompts export for the HF peer
"$VOUCH" eval mrcr --bins 300 --needles 2 --samples 2 --export-prompts "$t/p.json" >/dev/null && \
  python3 -c "import json; d=json.load(open('$t/p.json')); c=d['cases']; assert d['kind']=='mrcr' and len(c)==2 and len(c[0]['prompt'])==298" \
  && ok || bad "mrcr --export-prompts"

"$VOUCH" eval chain --hops 16,48 --samples 2 --threads 2 >"$t/out" && grep -q "pass@1 1.0000" "$t/out" && ok || bad "chain: $(cat "$t/out")"
# very hot sampling leaves the chain: the eval fails with exit 1
"$VOUCH" eval chain --hops 48 --samples 2 --threads 2 --temperature 5 --sample-seed 1 >"$t/out"; rc=$?
[ "$rc" -eq 1 ] && grep -q "verdict: FAIL" "$t/out" && ok || bad "hot chain should fail (rc $rc): $(cat "$t/out")"

"$VOUCH" features --path cpu-ref --full-ctx 1k --threads 2 >"$t/out" && [ "$(grep -c ' pass ' "$t/out")" -eq 5 ] \
  && ok || bad "features: $(cat "$t/out")"

# standalone --json holds each check's status: TP2 against TP1 (KLD ~1e-13 from the summation order)
# under --kld-tol 1e-300 fails full_context (exit 1), and its record says fail, as the printed table
# does (the records were once left at rec_new's "pass")
"$VOUCH" features --path cpu-ref:tp2 --full-ctx 256 --threads 2 --kld-tol 1e-300 --json "$t/feat.json" >"$t/out"; rc=$?
[ "$rc" -eq 1 ] && python3 - "$t/feat.json" "$t/out" <<'PY' && ok || bad "features --json statuses (rc $rc): $(cat "$t/out")"
import json, re, sys
recs = {r["case_id"]: r["status"] for r in json.load(open(sys.argv[1]))["records"]}
table = dict(re.findall(r"^  (\w+) +(pass|fail|not_supported) ", open(sys.argv[2]).read(), re.M))
assert recs["full_context"] == "fail" and len(recs) == 5, recs
assert recs == table, (recs, table)
PY
"$VOUCH" eval chain --hops 8,4 --export-prompts "$t/x.json" >"$t/out" 2>"$t/err"; rc=$?
[ "$rc" -eq 2 ] && [ ! -e "$t/x.json" ] && grep -q "ascending" "$t/err" && ok || bad "chain --export-prompts with descending hops (rc $rc): $(cat "$t/err")"

# bad input: one-line errors, exit 2
for args in "eval mrcr --needles 9" "eval mrcr --bins x" "eval chain --hops 5,3" "diverge --paths cpu-ref" \
            "diverge --paths cpu-ref,nope" "eval nope" "features --path nope"; do
  # shellcheck disable=SC2086
  "$VOUCH" $args >/dev/null 2>"$t/err"; rc=$?
  if [ "$rc" -eq 2 ] || { [ "$rc" -eq 1 ] && [ "$args" = "eval chain --hops 5,3" ]; }; then
    [ "$(wc -l <"$t/err")" -eq 1 ] && ok || bad "'$args': error not one line: $(cat "$t/err")"
  else bad "'$args' -> exit $rc: $(cat "$t/err")"; fi
done

finish
