#!/bin/bash
# Lints the evaluation image recipe and the CI templates with real linters, the Debian packages
# of ShellCheck and yamllint. hadolint is not packaged in Debian, so the Dockerfile's RUN lines
# are extracted and shellchecked instead, plus a few structural checks done here:
#   ShellCheck on docker/entrypoint.sh (POSIX sh), docker/build-in-image.sh,
#     scripts/install-deps.sh, scripts/check-image-recipe.sh, scripts/ci/vouch-ci.sh, every
#     RUN line of docker/Dockerfile (as bash -o pipefail, the Dockerfile's SHELL), every
#     `run:` of the GitHub workflow and the `command:` of the Buildkite pipeline;
#   yamllint: scripts/ci/*.yml;
#   structure: FROM a CUDA 13 devel Ubuntu 24.04 base through ARG BASE_IMAGE, dependencies
#     through install-deps.sh, exec-form ENTRYPOINT, VOUCH_IMAGE_DIGEST from a build ARG;
#     the workflow runs on a self-hosted GPU runner on the `vouch` label and calls every
#     vouch-ci.sh stage.
# Exits 77 when shellcheck, yamllint or python3's yaml module is missing.
set -u
S=${VOUCH_SRC:?VOUCH_SRC is the source tree}
for tool in shellcheck yamllint python3; do
  command -v "$tool" >/dev/null || { echo "$tool is not installed; skipping"; exit 77; }
done
python3 -c 'import yaml' 2>/dev/null || { echo "python3 yaml module missing; skipping"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }

if shellcheck -s sh "$S/docker/entrypoint.sh"; then ok "shellcheck entrypoint.sh (sh)"; else bad "shellcheck entrypoint.sh"; fi
for f in docker/build-in-image.sh scripts/install-deps.sh scripts/check-image-recipe.sh scripts/ci/vouch-ci.sh; do
  if shellcheck -s bash "$S/$f"; then ok "shellcheck $f"; else bad "shellcheck $f"; fi
done

# RUN lines of the Dockerfile (continuations joined), one script each; exec-form RUN is skipped
python3 - "$S/docker/Dockerfile" "$T" <<'PY' || bad "cannot extract RUN lines"
import re, sys
text = open(sys.argv[1]).read()
lines, cur = [], ""
for raw in text.splitlines():
    if not cur and (not raw.strip() or raw.lstrip().startswith("#")):
        continue
    if raw.rstrip().endswith("\\"):
        cur += raw.rstrip()[:-1] + " "
        continue
    lines.append(cur + raw)
    cur = ""
n = 0
for l in lines:
    m = re.match(r"\s*RUN\s+(.*)", l, re.S)
    if m and not m.group(1).lstrip().startswith("["):
        n += 1
        with open(f"{sys.argv[2]}/run{n}.sh", "w") as f:
            f.write("#!/bin/bash\nset -o pipefail\n" + m.group(1) + "\n")
print(n, file=open(f"{sys.argv[2]}/run-count", "w"))
PY
nrun=$(cat "$T/run-count" 2>/dev/null || echo 0)
[ "$nrun" -ge 2 ] && ok "Dockerfile: $nrun RUN lines extracted" || bad "Dockerfile: $nrun RUN lines"
for f in "$T"/run*.sh; do
  [ -e "$f" ] || continue
  if shellcheck -s bash "$f"; then ok "shellcheck Dockerfile $(basename "$f" .sh)"; else bad "shellcheck Dockerfile $(basename "$f" .sh): $(tail -1 "$f")"; fi
done

python3 - "$S/docker/Dockerfile" <<'PY' && ok "Dockerfile structure" || bad "Dockerfile structure"
import re, sys
t = open(sys.argv[1]).read()
body = "\n".join(l for l in t.splitlines() if not l.lstrip().startswith("#"))
m = re.search(r"^ARG BASE_IMAGE=(\S+)", body, re.M)
assert m, "no ARG BASE_IMAGE"
assert re.match(r"nvidia/cuda:13\.\d+(\.\d+)?-devel-ubuntu24\.04$", m.group(1)), m.group(1)
assert re.search(r"^FROM \$\{BASE_IMAGE\}\s*$", body, re.M), "FROM must use ${BASE_IMAGE}"
assert ":latest" not in body, "no :latest tags"
assert "install-deps.sh" in body and "build-in-image.sh" in body
assert "apt-get install" not in body, "packages come from scripts/install-deps.sh only"
assert re.search(r'^ARG CUDA_ARCHS="90a;100a"', body, re.M), "CUDA_ARCHS default"
assert re.search(r"^ARG VOUCH_IMAGE_DIGEST", body, re.M) and "VOUCH_IMAGE_DIGEST=${VOUCH_IMAGE_DIGEST}" in body
assert re.search(r'^ENTRYPOINT \["[^"]+entrypoint\.sh"\]', body, re.M), "exec-form ENTRYPOINT"
PY

cat > "$T/yamllint.yml" <<'YL'
extends: default
rules:
  line-length: {max: 130}
  document-start: disable
  truthy: {check-keys: false}
YL
if yamllint -s -c "$T/yamllint.yml" "$S"/scripts/ci/*.yml; then ok "yamllint scripts/ci/*.yml"; else bad "yamllint"; fi

# shell inside the YAML: GitHub `run:` blocks and the Buildkite `command:` ($$ is Buildkite's escaped $)
python3 - "$S/scripts/ci/github-vouch.yml" "$S/scripts/ci/buildkite-vouch.yml" "$T" <<'PY' || bad "cannot read the CI YAML"
import sys, yaml
gh = yaml.safe_load(open(sys.argv[1]))
bk = yaml.safe_load(open(sys.argv[2]))
n = 0
for job in gh["jobs"].values():
    for st in job["steps"]:
        if "run" in st:
            n += 1
            open(f"{sys.argv[3]}/gh{n}.sh", "w").write("#!/bin/bash\nset -eo pipefail\n" + st["run"])
for i, st in enumerate(bk["steps"]):
    if "command" in st:
        open(f"{sys.argv[3]}/bk{i}.sh", "w").write("#!/bin/bash\n" + st["command"].replace("$$", "$"))
PY
for f in "$T"/gh*.sh "$T"/bk*.sh; do
  [ -e "$f" ] || { bad "no shell found in the CI YAML"; continue; }
  if shellcheck -s bash "$f"; then ok "shellcheck CI step $(basename "$f" .sh)"; else bad "shellcheck CI step $(basename "$f" .sh)"; fi
done

python3 - "$S/scripts/ci/github-vouch.yml" "$S/scripts/ci/buildkite-vouch.yml" <<'PY' && ok "CI structure: label trigger, GPU runner, every stage" || bad "CI structure"
import sys, yaml
gh = yaml.safe_load(open(sys.argv[1]))
on = gh.get("on", gh.get(True))
assert "labeled" in on["pull_request"]["types"], "pull_request: labeled"
job = gh["jobs"]["evaluate"]
assert "'vouch'" in job["if"] and "labels" in job["if"], job["if"]
assert {"self-hosted", "gpu"} <= set(job["runs-on"]), job["runs-on"]
runs = " ".join(s.get("run", "") for s in job["steps"])
uses = [s.get("uses", "") for s in job["steps"]]
for stage in ("build", "run", "baseline", "compare", "publish", "gate"):
    assert f"vouch-ci.sh {stage}" in runs, stage
assert any(u.startswith("actions/upload-artifact@") for u in uses)
assert gh["permissions"]["statuses"] == "write" and gh["permissions"]["pull-requests"] == "write"
bk = yaml.safe_load(open(sys.argv[2]))
cmd = bk["steps"][0]["command"]
for stage in ("build", "run", "baseline", "compare", "publish", "gate"):
    assert f"vouch-ci.sh {stage}" in cmd, stage
assert bk["steps"][0]["agents"]["queue"] == "gpu"
PY
exit $fail
