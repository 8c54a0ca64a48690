#!/usr/bin/env python3
"""Normalizer of scripts/golden-cli.sh: turns one vouch invocation (command line, exit code, stdout,
stderr and the files it wrote) into a text file that is byte-identical between two runs of the same
vouch binary on the same machine, so that `diff -r` of two harness outputs shows only what changed.

Masked (replaced by a <TAG>), because it legitimately varies between two runs of one binary:
  <T>        timing figures: wall/step/prefill/decode times, tok/s, req/s, GB/s, speed-ups and their
             intervals, CV %, % of roofline, goodput, TTFT/TPOT/ITL/E2E, and the verdicts that
             `vouch compare` and `sweep --repeat` derive from timings only
  <DATE>     ISO dates and the date stamp of default result directories
  <COMMIT>   the git commit compiled into the binary (full or abbreviated)
  <SCRATCH>  the harness's temporary directory, <VOUCH> the binary's path, <PORT> server ports
  <HASH>     sha256 of files that contain times or the commit (bundles, manifest.json, results.json/.sqlite,
             replay.sh)
  <CREATED>  the `created` Unix time of OpenAI API replies
Everything else is kept: record ids, statuses, reasons, metric values of deterministic
computations, samples, thresholds, checks, traces, usage and error texts, exit codes.

Modes:
  inv OUT NAME RC STDOUT STDERR CREATED [ART...] -- CMD...
                                                   write OUT for one invocation of CMD; ART is
                                                   KIND:PATH with KIND one of file, run (a result
                                                   directory), bundle, model
  http OUT URL METHOD PATH [BODY]                  one HTTP request to a vouch server, normalized
Context from the environment: GOLDEN_SCRATCH, GOLDEN_VOUCH, GOLDEN_COMMIT.
"""
import json
import os
import re
import sys

# hashlib, sqlite3, tarfile and urllib are imported where used: this runs once per invocation and
# their import time would add up

SCRATCH = os.environ.get("GOLDEN_SCRATCH", "")
VOUCH = os.environ.get("GOLDEN_VOUCH", "")
COMMIT = os.environ.get("GOLDEN_COMMIT", "")

T = "<T>"

# ---------------------------------------------------------------- what counts as a timing figure

TIMING_UNITS = {"ms", "s", "us", "ns", "tok/s", "req/s", "GB/s", "x"}
# metric names whose value comes from a clock even when their unit is neutral (%, "")
TIMING_NAME = re.compile(
    r"(^|_)(ms|s|sec|seconds|cv|cv_pct|roofline|roofline_pct|speedup|membw|membw_gbs|gbs|goodput|"
    r"interactivity|duration|wall|ttft|tpot|itl|e2e|per_s|tok_s|latency|spread)(_|$)")
# JSON keys whose whole value is a timing (or a wall-clock time)
TIMING_KEYS = {"seconds", "wall_s", "prefill_s", "decode_s", "prefill_tok_s", "decode_tok_s", "timing",
               "elapsed_s", "duration_s", "created", "rounds_s", "model_open_s", "sweep_wall_s"}
# under "agreement" (sweep --repeat): the verdicts that compare the rounds' timings
AGREEMENT_KEYS = {"failed", "passed", "verdict", "why", "worst", "worst_spread", "worst_cv"}


def is_timing(name, unit):
    """True when a metric named NAME with UNIT holds a clock-derived figure."""
    if unit in TIMING_UNITS:
        return True
    return bool(TIMING_NAME.search(name or ""))


# ---------------------------------------------------------------- text

RE_DATE = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?")
RE_STAMP = re.compile(r"(?<![0-9])\d{8}[-T_]?\d{6}Z?(?![0-9])")
RE_PORT = re.compile(r"(127\.0\.0\.1|localhost|0\.0\.0\.0|\[::1\]):\d+")
NUM = r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
RE_UNIT = re.compile(r"(?<![\w.-])(-?" + NUM + r")(\s?)(ms|us|µs|ns|s|tok/s|GB/s|req/s)(?![\w])")
RE_SPEEDUP_CELL = re.compile(r"\d+\.\d+x \[\d+\.\d+, \d+\.\d+\]( · \d+(\.\d+)?%\*?)?")
RE_FLOATTOK = re.compile(r"(?<![\w.-])-?\d+\.\d+(x|\*|%)?(?![\w.])")
RE_ROUNDS = re.compile(r"\(rounds:[^)]*\)")
RE_GOODPUT = re.compile(r"goodput \d+(\.\d+)?%")
RE_BUNDLE_SHA = re.compile(r"^(sha256:?\s+)[0-9a-f]{64}\b")
# `vouch compare` metric line: CASE [PATH] NAME (DERIVE): BASE -> CAND UNIT  xRATIO INTERVAL  VERDICT
RE_CMP = re.compile(r"^(\s*(?:\S+ )?\S+ \[[^\]]*\] (\S+) \(\w+\)): (\S+) -> (\S+) ?(\S*)\s+x(\S+) "
                    r"(\(no interval\)|\[[^\]]*\])\s+(.*)$")


def norm_common(s):
    """Masks what varies in any text: scratch and binary paths, commit, dates, ports."""
    if SCRATCH:
        s = s.replace(os.path.realpath(SCRATCH), "<SCRATCH>").replace(SCRATCH, "<SCRATCH>")
    if VOUCH:
        s = s.replace(VOUCH, "<VOUCH>")
    if re.fullmatch(r"[0-9a-f]{40}", COMMIT or ""):
        s = re.sub(COMMIT[:7] + r"[0-9a-f]*", "<COMMIT>", s)
    s = RE_DATE.sub("<DATE>", s)
    s = RE_STAMP.sub("<DATE>", s)
    s = RE_PORT.sub(lambda m: m.group(1) + ":<PORT>", s)
    return s


def mask_floats(line):
    return RE_FLOATTOK.sub(lambda m: T + (m.group(1) or ""), line)


def norm_text(s):
    """Normalizes the text of stdout, stderr or a text file, line by line. Timing tables (sweep,
    served sweep, repeat agreement) are recognized by their headers and masked to the blank line
    that ends them; elsewhere a number is masked only when a time or rate unit follows it."""
    s = norm_common(s)
    out = []
    table = None  # None, "timed" (sweep/served tables) or "agree" (sweep --repeat agreement)
    for line in s.split("\n"):
        orig = line
        if not line.strip():
            table = None
        elif re.match(r"^path\s+TP\s+batch\s+ctx\s", line) or re.match(r"^\s*conc\s+ok/sent", line):
            table = table or "timed"  # the agreement table's header starts the same way
        elif line.startswith("repeat-run agreement"):
            table = "agree"
        elif table == "timed":
            line = mask_floats(line)
        elif table == "agree":
            line = re.sub(r"\b(PASS|FAIL)\b( \([^)]*\))?", T, mask_floats(line))
        if line.startswith("agreement: "):
            line = "agreement: " + T
        m = RE_CMP.match(line)
        if m and is_timing(m.group(2), m.group(5)):
            line = "%s: %s -> %s %s  x%s %s  %s" % (m.group(1), T, T, m.group(5), T, T, T)
        line = RE_SPEEDUP_CELL.sub(T, line)
        line = RE_ROUNDS.sub("(rounds: " + T + ")", line)
        line = RE_GOODPUT.sub("goodput " + T, line)
        line = RE_BUNDLE_SHA.sub(lambda m: m.group(1) + "<HASH>", line)
        if not line.startswith("expected total:"):  # the dry run's estimate is arithmetic, not a clock
            line = RE_UNIT.sub(lambda m: T + m.group(2) + m.group(3), line)
        if line != orig:  # a masked figure's width moved the columns after it: align nothing
            line = re.sub(r"(?<=\S)  +", " ", line).rstrip()
        out.append(line)
    return "\n".join(out)


# ---------------------------------------------------------------- JSON

def rec_key(d):
    return tuple(str(d.get(k, "")) for k in ("suite", "case_id", "case", "path", "metric", "name", "op", "variant"))


def mask_all(v):
    if isinstance(v, dict):
        return {k: mask_all(x) for k, x in v.items()}
    if isinstance(v, list):
        return [mask_all(x) for x in v]
    if v is None or isinstance(v, bool):
        return v
    return T


def numeric(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) or (
        isinstance(v, list) and v and all(numeric(x) for x in v))


def norm_json(v, key=None, sort_records=True):
    """Returns a normalized copy of the parsed JSON value V (under KEY in its parent)."""
    if isinstance(v, dict):
        name = v.get("name") if isinstance(v.get("name"), str) else v.get("metric")
        timing = "unit" in v and isinstance(name, str) and is_timing(name, v.get("unit"))
        out = {}
        for k, x in v.items():
            if k in TIMING_KEYS or (numeric(x) and TIMING_NAME.search(k)):
                out[k] = mask_all(x)
            elif key == "agreement" and k in AGREEMENT_KEYS or key == "points" and k in AGREEMENT_KEYS:
                out[k] = mask_all(x)
            elif timing and k == "samples":
                out[k] = T  # how many: ITLs per SSE event can vary too
            elif timing and k in ("value", "base", "cand", "ratio", "ci95", "verdict", "too_noisy", "regression"):
                out[k] = mask_all(x)
            elif k == "sha256" and ("bundle" in v or key in ("SHA256SUMS",)):
                out[k] = "<HASH>"
            else:
                out[k] = norm_json(x, k, sort_records)
        return out
    if isinstance(v, list):
        items = [norm_json(x, key, sort_records) for x in v]
        # records (a "records" list, or a top-level list of cases such as kernels --json writes) are
        # sorted; every other list keeps its order (plan steps, compare's findings, samples)
        if sort_records and items and all(isinstance(x, dict) and "suite" in x for x in items) and (
                key == "records" or key is None and all("case_id" in x or "case" in x for x in items)):
            items.sort(key=rec_key)
        return items
    if isinstance(v, str):
        return norm_text(v) if "\n" in v else norm_common_str(v)
    return v


def norm_common_str(s):
    s = norm_common(s)
    return RE_UNIT.sub(lambda m: T + m.group(2) + m.group(3), s) if RE_UNIT.search(s) and "tok/s" in s else s


def dump_json(v):
    return json.dumps(v, indent=1, sort_keys=True, ensure_ascii=False)


def json_text(raw):
    """Normalized JSON text of RAW (a JSON document), or None when RAW is not JSON."""
    try:
        v = json.loads(raw)
    except ValueError:
        return None
    return dump_json(norm_json(v))


# ---------------------------------------------------------------- artifacts

# replay.sh names the commit it rebuilds (masked in its text), so its hash varies with the build too
VARYING_FILES = {"manifest.json", "results.json", "results.sqlite", "SHA256SUMS", "replay.sh"}


def sha(path):
    import hashlib
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def read(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "replace")


def section(title, body):
    return "==== %s\n%s%s" % (title, body, "" if body.endswith("\n") or not body else "\n")


def art_file(path, label=None):
    label = label or rel(path)
    if not os.path.exists(path):
        return section("file %s" % label, "(missing)\n")
    if os.path.isdir(path):
        return art_tree(path)
    data = open(path, "rb").read()
    name = os.path.basename(path)
    if name.endswith(".jsonl"):
        lines = []
        for ln in data.decode("utf-8", "replace").splitlines():
            try:
                lines.append(json.dumps(norm_json(json.loads(ln)), sort_keys=True))
            except ValueError:
                lines.append(norm_text(ln))
        return section("file %s (JSON lines, normalized)" % label, "\n".join(lines))
    if name.endswith(".json"):
        txt = json_text(data.decode("utf-8", "replace"))
        if txt is not None:
            return section("file %s (JSON, normalized, records sorted)" % label, txt)
    if b"\0" in data[:4096] or name.endswith((".gguf", ".safetensors", ".f32", ".sqlite", ".gz")):
        return section("file %s (binary)" % label, "%d bytes, sha256 %s\n" % (len(data), sha(path)))
    return section("file %s (text, normalized)" % label, norm_text(data.decode("utf-8", "replace")))


def art_tree(path):
    """Files under a model or other directory: size and sha256 (their bytes are deterministic),
    and the normalized text of small JSON files."""
    lines, parts = [], []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(root, f)
            lines.append("%s  %d bytes  sha256 %s" % (os.path.relpath(p, path), os.path.getsize(p), sha(p)))
            if f.endswith(".json") and os.path.getsize(p) < 200000:
                parts.append(art_file(p, rel(p)))
    return section("directory %s" % rel(path), "\n".join(lines)) + "".join(parts)


def art_results_json(path):
    raw = json.loads(read(path))
    parts = []
    recs = raw.get("records", []) if isinstance(raw, dict) else []
    order = "\n".join("%s | %s | %s" % (r.get("suite"), r.get("case_id"), r.get("path")) for r in recs)
    parts.append(section("results.json: record order as written (suite | case_id | path)", order))
    parts.append(section("results.json (normalized, records sorted by suite, case_id, path)",
                         dump_json(norm_json(raw))))
    return "".join(parts)


def art_sqlite(path, results_json):
    """results.sqlite: meta rows, records (id order) checked against results.json, metrics."""
    import sqlite3
    c = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    out = []
    try:
        tables = [r[0] for r in c.execute("select name from sqlite_master where type='table' order by name")]
        out.append("tables: " + ", ".join(tables))
        for k, v in c.execute("select key, value from meta order by key"):
            t = json_text(v) if v and v.lstrip().startswith(("{", "[")) else None
            out.append("meta %s = %s" % (k, t if t is not None else norm_common(v)))
        by_key = {}
        if results_json and os.path.exists(results_json):
            for r in json.loads(read(results_json)).get("records", []):
                by_key[(r.get("suite"), r.get("case_id"), r.get("path"))] = r
        same, diff = 0, []
        for rid, suite, case, p, status, reason, js in c.execute(
                "select id, suite, case_id, path, status, reason, json from records order by id"):
            out.append("record %d | %s | %s | %s | %s | %s" % (rid, suite, case, p, status, norm_common(reason)))
            if json.loads(js) == by_key.get((suite, case, p)):
                same += 1
            else:
                diff.append("%s/%s [%s]" % (suite, case, p))
        out.append("records whose json column equals their results.json record: %d; differing: %s"
                   % (same, ", ".join(diff) if diff else "none"))
        q = ("select r.suite, r.case_id, r.path, m.name, m.unit, m.value, m.derive, m.better, m.n_samples "
             "from metrics m join records r on r.id = m.record_id order by r.suite, r.case_id, r.path, m.name")
        for suite, case, p, name, unit, value, derive, better, n in c.execute(q):
            v = T if is_timing(name, unit) else repr(value)
            out.append("metric %s | %s | %s | %s | %s | %s | %s | %s | n=%d" % (suite, case, p, name, unit, v,
                                                                                derive, better, n))
    finally:
        c.close()
    return section("results.sqlite (dump)", "\n".join(out))


def art_sums(text):
    lines = []
    for ln in text.splitlines():
        m = re.match(r"^([0-9a-f]{64})  (.*)$", ln)
        if m and m.group(2) in VARYING_FILES:
            ln = "<HASH>  " + m.group(2)
        lines.append(ln)
    return "\n".join(lines)


def art_run(path):
    """A result directory: file list, manifest, plan, replay.sh, results.json, results.sqlite,
    SHA256SUMS, logs and traces."""
    if not os.path.isdir(path):
        return section("result directory %s" % rel(path), "(missing)\n")
    files = []
    for root, dirs, fs in os.walk(path):
        dirs.sort()
        files += [os.path.relpath(os.path.join(root, f), path) for f in sorted(fs)]
    parts = [section("result directory %s: files" % rel(path), "\n".join(files))]
    for f in ("manifest.json", "plan.json"):
        p = os.path.join(path, f)
        if os.path.exists(p):
            parts.append(art_file(p, "%s/%s" % (rel(path), f)))
    p = os.path.join(path, "replay.sh")
    if os.path.exists(p):
        parts.append(section("%s/replay.sh" % rel(path), norm_text(read(p))))
    p = os.path.join(path, "SHA256SUMS")
    if os.path.exists(p):
        parts.append(section("%s/SHA256SUMS (hashes of files with times masked)" % rel(path), art_sums(read(p))))
    rj = os.path.join(path, "results.json")
    if os.path.exists(rj):
        parts.append(art_results_json(rj))
    p = os.path.join(path, "results.sqlite")
    if os.path.exists(p):
        parts.append(art_sqlite(p, rj))
    for sub in ("logs", "traces"):
        d = os.path.join(path, sub)
        if os.path.isdir(d):
            body = []
            for f in sorted(os.listdir(d)):
                txt = read(os.path.join(d, f))
                j = None
                try:
                    j = json.dumps(norm_json(json.loads(txt)), sort_keys=True)
                except ValueError:
                    pass
                body.append("-- %s\n%s" % (f, j if j is not None else norm_text(txt)))
            parts.append(section("%s/%s/" % (rel(path), sub), "\n".join(body)))
    return "".join(parts)


def art_bundle(path):
    """A bundle: its members' names and tar metadata (sizes of files that hold times masked), and
    SHA256SUMS with those files' hashes masked. The members' contents are the result directory's."""
    import tarfile
    if not os.path.exists(path):
        return section("bundle %s" % rel(path), "(missing)\n")
    lines = []
    try:
        with tarfile.open(path, "r:gz") as t:
            for m in t.getmembers():
                base = m.name.split("/", 1)[-1]
                size = "<SIZE>" if base in VARYING_FILES - {"SHA256SUMS"} else str(m.size)
                lines.append("%s  type=%s mode=%o uid=%d gid=%d uname=%r gname=%r mtime=%d size=%s" % (
                    m.name, m.type.decode(), m.mode, m.uid, m.gid, m.uname, m.gname, m.mtime, size))
                if base == "SHA256SUMS":
                    sums = t.extractfile(m).read().decode()
            lines.append("-- SHA256SUMS (hashes of files with times masked)")
            lines.append(art_sums(sums))
    except (tarfile.TarError, OSError, UnboundLocalError) as e:
        lines.append("cannot read: %s" % type(e).__name__)
    return section("bundle %s" % rel(path), "\n".join(lines))


def rel(p):
    if SCRATCH and os.path.abspath(p).startswith(os.path.abspath(SCRATCH) + "/"):
        return os.path.relpath(p, SCRATCH)
    return norm_common(p)


# ---------------------------------------------------------------- modes

def stream_text(path):
    """A captured stream: normalized as JSON (records sorted) when it is one JSON document."""
    raw = read(path) if os.path.exists(path) else ""
    if raw.lstrip().startswith(("{", "[")):
        j = json_text(raw)
        if j is not None:
            return "(JSON, normalized, records sorted)\n" + j
    return norm_text(raw)


def mode_inv(argv):
    out, name, rc, so, se, created = argv[:6]
    sep = argv.index("--")
    arts, cmd = argv[6:sep], argv[sep + 1:]
    parts = ["# %s\n" % name,
             section("command", " ".join(norm_common(shell_quote(a)) for a in cmd)),
             section("exit code", rc + "\n"),
             section("stdout", stream_text(so)),
             section("stderr", stream_text(se)),
             section("files created or removed in the scratch directory", norm_common(read(created)) if created else "")]
    for a in arts:
        kind, _, p = a.partition(":")
        p = os.path.join(SCRATCH, p) if not os.path.isabs(p) else p
        if kind == "run":
            parts.append(art_run(p))
        elif kind == "bundle":
            parts.append(art_bundle(p))
        elif kind == "model":
            parts.append(art_tree(p) if os.path.isdir(p) else section("directory %s" % rel(p), "(missing)\n"))
        else:
            parts.append(art_file(p))
    with open(out, "w", encoding="utf-8") as f:
        f.write("".join(parts))


def shell_quote(a):
    return a if re.fullmatch(r"[\w@%+=:,./-]+", a) else "'" + a.replace("'", "'\\''") + "'"


def mode_http(argv):
    import urllib.error
    import urllib.request
    out, url, method, path = argv[:4]
    body = argv[4] if len(argv) > 4 else None
    req = urllib.request.Request(url + path, method=method, data=body.encode() if body else None,
                                 headers={"Content-Type": "application/json"} if body else {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            status, ctype, data = r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        status, ctype, data = e.code, e.headers.get("Content-Type", ""), e.read()
    text = data.decode("utf-8", "replace")
    if path.startswith("/metrics"):  # counters and gauges only: histograms and sums are timings
        # forward and decode steps count how the scheduler batched requests that arrived when they did
        text = "\n".join(ln for ln in text.splitlines()
                          if "_seconds" not in ln and not re.search(r"_(bucket|sum|count)\{", ln)
                          and "time" not in ln.lower() and not re.match(r"vouch:(forward|decode)_steps_total", ln))
        text = norm_text(text)
    elif text.startswith("data:"):
        # SSE: how many tokens one event carries depends on how fast the client reads (the server
        # sends the tokens decoded since the last event), so the events' token_ids are joined per
        # choice and the events are listed without them, each distinct one once
        tokens, events, other = {}, [], []
        for ln in text.splitlines():
            payload = ln[5:].strip() if ln.startswith("data:") else None
            if payload is None:
                if ln.strip():
                    other.append(norm_text(ln))
                continue
            try:
                ev = norm_json(json.loads(payload))
            except ValueError:
                other.append(norm_text(ln))
                continue
            for ch in ev.get("choices", []) if isinstance(ev, dict) else []:
                tokens.setdefault(ch.get("index"), []).extend(ch.pop("token_ids", None) or [])
            e = "data: " + json.dumps(ev, sort_keys=True)
            if e not in events:
                events.append(e)
        text = "\n".join(["token_ids per choice, joined over the events: " + json.dumps(tokens, sort_keys=True),
                          "distinct events, token_ids removed:"] + events + other)
    else:
        j = json_text(text) if text.strip() else None
        text = j if j is not None else norm_text(text)
    with open(out, "w", encoding="utf-8") as f:
        f.write("# http %s %s\n" % (method, path))
        f.write(section("request", "%s <URL>%s\n%s" % (method, path, body or "")))
        f.write(section("status", "%d %s\n" % (status, ctype)))
        f.write(section("body (normalized)", text))


def main():
    mode, argv = sys.argv[1], sys.argv[2:]
    {"inv": mode_inv, "http": mode_http}[mode](argv)


if __name__ == "__main__":
    main()
