#!/usr/bin/env python3
"""Replays diverge's KLD rule with a baseline on stored runs (docs/verdicts.md, "the KLD rule").

usage: bench/floor_bound_replay.py RUN_DIR... [--bootstrap N]

For every diverge point of the runs (results.sqlite) that has the baseline cuda-ref, prints each other
path's mean KLD against the bounds computed from the stored per-row KLD samples:
  before  k^2 x (baseline mean + 3 se of the baseline)           (main before 2026-12-02)
  paired  k^2 x baseline mean + 3 se of (path - k^2 x baseline)  (suites/diverge/diverge.c, the plain-mean arm)
  bulk    the 20%-trimmed mean of (path - k^2 x baseline) <= 3 of its Yuen se  (the bulk arm, 2026-12-03)
(the rule in force fails a path when either arm does), and the points where the verdicts of "before"
and "paired" differ or the bulk arm fails. With --bootstrap N it estimates each rule's false-alarm
rate on correct code: from the points of 64 or more sequences (one token a step, equal contexts) it
draws 1 and 8 whole sequences (their rows, in step order: row = step * sequences + sequence) N times,
both engines' rows of a sequence together, and counts how often the path fails.
"""
import json
import math
import random
import sqlite3
import sys

K = 2.0  # VOUCH_ACCURACY_RATIO (suites/engine/bounds.h)


def mean_se(x):
    n = len(x)
    m = sum(x) / n
    v = sum((a - m) ** 2 for a in x) / (n - 1) if n > 1 else 0.0
    return m, math.sqrt(v / n)


def trimmed_mean_se(x, trim=0.2):
    """Yuen's trimmed mean and its se from the winsorized variance (stat_trimmed_mean_se)."""
    s = sorted(x)
    n = len(s)
    g = int(trim * n)
    h = n - 2 * g
    w = [s[g]] * g + s[g:n - g] + [s[n - g - 1]] * g
    mw = sum(w) / n
    v = sum((a - mw) ** 2 for a in w)
    return sum(s[g:n - g]) / h, math.sqrt(v / (h * (h - 1))) if h > 1 else 0.0


def bounds(base, path):
    """(before, paired) bounds and the bulk arm's verdict (True: fails) for rows paired by index;
    NaN rows are left out of all three."""
    pairs = [(b, p) for b, p in zip(base, path) if b is not None and p is not None]
    b = [x for x, _ in pairs]
    mb, seb = mean_se(b)
    d = [p - K * K * x for x, p in pairs]
    _, sed = mean_se(d)
    tm, tse = trimmed_mean_se(d)
    return K * K * (mb + 3 * seb), K * K * mb + 3 * sed, tm > 3 * tse


def points(db):
    """{case_id: {path: (kld samples, params)}} for the diverge records of one run."""
    out = {}
    for cid, path, js in sqlite3.connect(db).execute("select case_id, path, json from records where suite = 'diverge'"):
        r = json.loads(js)
        kld = [m for m in r.get("metrics", []) if m["name"] == "kld"]
        if kld:
            out.setdefault(cid, {})[path] = (kld[0]["samples"], r["params"])
    return out


def main(argv):
    runs, boot = [], 0
    it = iter(argv)
    for a in it:
        if a == "--bootstrap":
            boot = int(next(it))
        else:
            runs.append(a)
    if not runs:
        sys.exit(__doc__)
    seqs = {}
    for run in runs:
        for cid, by_path in sorted(points(run.rstrip("/") + "/results.sqlite").items()):
            if "cuda-ref" not in by_path:
                continue
            base = by_path["cuda-ref"][0]
            for path, (kld, prm) in sorted(by_path.items()):
                if path == "cuda-ref" or len(kld) != len(base):
                    continue
                before, paired, bulk_fails = bounds(base, kld)
                m = sum(kld) / len(kld)
                flag = "" if (m <= before) == (m <= paired) else "   <- the verdicts differ"
                flag += "   <- the bulk arm fails" if bulk_fails else ""
                print(f"{run} {cid} {path}: rows {len(kld)} mean {m:.3g} before {before:.3g} paired {paired:.3g}{flag}")
                nseq = prm["batch"]
                if nseq >= 64 and not prm.get("spec_k") and not prm.get("ragged"):
                    key = (prm["model"].split()[0], prm["routing"], prm["context"], prm.get("spec_k", 0), path)
                    steps = len(kld) // nseq
                    for s in range(nseq):
                        seqs.setdefault(key, []).append([(base[t * nseq + s], kld[t * nseq + s]) for t in range(steps)])
    rng = random.Random(1)
    for key, ss in sorted(seqs.items()) if boot else []:
        line = []
        for take in (1, 8):
            fails = [0, 0, 0, 0]  # before, paired, bulk, paired or bulk (the rule in force)
            for _ in range(boot):
                pick = [rng.choice(ss) for _ in range(take)]
                rows = [s[t] for t in range(len(ss[0])) for s in pick]
                m = sum(p for _, p in rows) / len(rows)
                before, paired, bulk_fails = bounds([b for b, _ in rows], [p for _, p in rows])
                fails[0] += m > before
                fails[1] += m > paired
                fails[2] += bulk_fails
                fails[3] += m > paired or bulk_fails
            line.append(f"{take} seq ({take * len(ss[0])} rows): before {fails[0] / boot:.4f} paired {fails[1] / boot:.4f} "
                        f"bulk {fails[2] / boot:.4f} in force {fails[3] / boot:.4f}")
        print("false alarms", key, "|", " | ".join(line))


if __name__ == "__main__":
    main(sys.argv[1:])
