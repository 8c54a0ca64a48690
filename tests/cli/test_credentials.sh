#!/usr/bin/env bash
# No credential reaches a result: values that look like credentials are planted under neutral
# environment names (and under allow-listed ones), on the command line, in a plan's text and
# variables, and in a file name that becomes a record parameter; a short `vouch run` then must
# not hold any of them in any file of its result directory (SQLite included), of its bundle, or
# in the PR comment `vouch publish --dry-run` would post. The planted values are made up.
# (The console output of the run is not checked: it echoes the user's own command and paths.)
. "$VOUCH_SRC/tests/cli/counters.sh"
export VOUCH_HISTORY_DB=off
cd "$t" || exit 2

planted=(
  ghp_Zx8Qw2Er4Ty6Ui8Op0As2Df4Gh6Jk8Lz0Xc         # GitHub classic PAT
  github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz  # GitHub fine-grained PAT
  gho_Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78        # GitHub OAuth
  hf_QwErTyUiOpAsDfGhJkLzXcVbNm123456             # Hugging Face
  sk-proj-Aa1Bb2Cc3Dd4Ee5Ff6Gg7Hh8Ii9Jj0          # API key
  AKIAIOSFODNN7EXAMPLE                            # AWS key id
  wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY        # AWS secret key (high entropy)
  eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U  # JWT
  hunter2pw                                       # a URL's password
)
# environment: neutral names (left out of the manifest) and allow-listed names (recorded, redacted)
export GH_PAT=${planted[0]} MY_FINE=${planted[1]} DEPLOY_ID=${planted[5]} BLOB=${planted[6]}
export CUDA_EXTRA_ARGS="--auth ${planted[2]}" VOUCH_NOTE=${planted[3]} NCCL_COMMENT=${planted[7]}
export OMP_PROXY_URL="https://bob:${planted[8]}@proxy.example.com:3128/"
# a routing trace whose file name holds a token: the path becomes a sweep record's parameter
printf '[[0,1,2,3],[4,5,6,7]]\n' >"${planted[0]}.jsonl"
cat >plan.json <<EOF
{"name": "cred", "description": "planted ${planted[6]}",
 "vars": {"trace": "$t/${planted[0]}.jsonl", "note": "${planted[4]}"},
 "steps": [{"suite": "generate", "args": ["--model", "synth:tiny", "--tokens", "1,2,3", "-n", "2"]},
           {"suite": "sweep", "args": ["--model", "synth:tiny", "--paths", "cpu-ref", "--batch", "1", "--context", "0",
                                       "--steps", "2", "--warmup", "1", "--routing", "trace:\${trace}"]}]}
EOF
"$VOUCH" run --plan plan.json --out r --set "label=${planted[4]}" --set "key=${planted[1]}" >run.out 2>run.err; rc=$?
[ $rc -eq 0 ] && ok || bad "run exit $rc: $(tail -5 run.err)"
[ -f r.vouch.tar.gz ] && ok || bad "no bundle"
"$VOUCH" verify r.vouch.tar.gz >verify.out 2>&1 && ok || bad "the redacted bundle does not verify: $(tail -3 verify.out)"
mkdir x && tar -xzf r.vouch.tar.gz -C x && ok || bad "bundle does not extract"
"$VOUCH" publish r.vouch.tar.gz --pr octo/widget#7 --dry-run >comment.out 2>&1 && ok || bad "publish --dry-run: $(tail -3 comment.out)"
[ "$(find r -type f | wc -l)" -ge 5 ] && ok || bad "run directory has too few files to check"

for v in "${planted[@]}"; do
  hits=$(grep -rlaF -- "$v" r x comment.out 2>/dev/null)
  [ -z "$hits" ] && ok || bad "planted value ${v:0:12}... found in: $hits"
done
# what is recorded: allow-listed variables (redacted), not the neutral names
python3 - r/manifest.json <<'PY' && ok || bad "manifest environment"
import json, sys
m = json.load(open(sys.argv[1]))
env = m["environment"]
for name in ("GH_PAT", "MY_FINE", "DEPLOY_ID", "BLOB", "HOME", "PATH"):
    assert name not in env, name
assert env["CUDA_EXTRA_ARGS"] == "--auth ***", env["CUDA_EXTRA_ARGS"]
assert env["VOUCH_NOTE"] == "***" and env["NCCL_COMMENT"] == "***", env
assert env["OMP_PROXY_URL"] == "https://proxy.example.com:3128/", env["OMP_PROXY_URL"]
assert any(a == "label=***" for a in m["command_line"]), m["command_line"]
PY
grep -q 'trace:.*\*\*\*\.jsonl' r/results.json && ok || bad "the record parameter holding the token is not redacted"
finish credentials
