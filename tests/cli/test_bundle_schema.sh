#!/bin/bash
# Validates manifest.json, results.json and every record of the fixture runs and of a
# bundle against results-schema/ with a real JSON Schema (2020-12) validator.
set -u
python3 -c 'import jsonschema; jsonschema.Draft202012Validator' 2>/dev/null || { echo "python3 jsonschema (2020-12) not available"; exit 77; }
[ -n "${VOUCH_SRC:-}" ] || exit 77
GEN=${VOUCH_GEN:-./test_bundle}
[ -x "$GEN" ] || GEN="$(dirname "${VOUCH:-.}")/tests/test_bundle"
[ -x "$GEN" ] || { echo "no fixture generator"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export VOUCH_HISTORY_DB=off
"$GEN" --write "$T/base" base && "$GEN" --write "$T/broken" broken || exit 1
dirs="$T/base $T/broken"
if [ -n "${VOUCH:-}" ] && "$VOUCH" bundle --help >/dev/null 2>&1; then
  "$VOUCH" bundle "$T/base" --out "$T/b.tar.gz" >/dev/null && mkdir "$T/x" && tar xzf "$T/b.tar.gz" -C "$T/x" && dirs="$dirs $T/x/base"
fi
[ -d "$VOUCH_SRC/results-schema/example" ] && dirs="$dirs $VOUCH_SRC/results-schema/example"
python3 - "$VOUCH_SRC/results-schema" $dirs <<'PY'
import json, sys, pathlib
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
sd = pathlib.Path(sys.argv[1])
schemas = {n: json.load(open(sd / n)) for n in ("manifest.schema.json", "record.schema.json", "results.schema.json")}
for s in schemas.values():
    Draft202012Validator.check_schema(s)
reg = Registry().with_resources([(s["$id"], Resource.from_contents(s)) for s in schemas.values()])
V = {n: Draft202012Validator(s, registry=reg) for n, s in schemas.items()}
bad = 0
for d in sys.argv[2:]:
    d = pathlib.Path(d)
    for fname, schema in (("manifest.json", "manifest.schema.json"), ("results.json", "results.schema.json")):
        doc = json.load(open(d / fname))
        errs = list(V[schema].iter_errors(doc))
        for e in errs[:5]:
            print("FAIL %s/%s: %s at %s" % (d, fname, e.message, list(e.absolute_path)))
        bad += len(errs)
        if fname == "results.json":
            n = 0
            for r in doc["records"]:
                for e in V["record.schema.json"].iter_errors(r):
                    print("FAIL record %s: %s" % (r.get("case_id"), e.message)); bad += 1
                n += 1
            print("ok   %s: manifest + %d records valid" % (d.name, n) if not bad else "")
# a broken document must be rejected (the validator is real)
doc = json.load(open(pathlib.Path(sys.argv[2]) / "results.json"))
doc["records"][0]["status"] = "maybe"
if not list(V["results.schema.json"].iter_errors(doc)):
    print("FAIL validator accepted status 'maybe'"); bad += 1
sys.exit(1 if bad else 0)
PY
