#!/usr/bin/env python3
"""Replays diverge's KLD rule with a baseline on stored runs (docs/verdicts.md, "the KLD rule").

usage: bench/floor_bound_replay.py RUN_DIR... [--bootstrap N]

For every diverge point of the runs (results.sqlite) that has the baseline cuda-ref, prints each other
path's mean KLD against two bounds computed from the stored per-row KLD samples:
  before  k^2 x (baseline mean + 3 se of the baseline)           (main before 2026-12-02)
  paired  k^2 x baseline mean + 3 se of (path - k^2 x baseline)  (suites/diverge.c)
and the points where the verdicts differ. With --bootstrap N it estimates each rule's false-alarm
rate on correct code: from the points of 64 or more sequences (one token a step, equal contexts) it
draws 1 and 8 whole sequences (their rows, in step order: row = step * sequences + sequence) N times,
both engines' rows of a sequence together, and counts how often the path fails.
"""
import json
import math
import random
import sqlite3
import sys

K = 2.0  # VOUCH_ACCURACY_RATIO (suites/bounds.h)


def mean_se(x):
    n = len(x)
    m = sum(x) / n
    v = sum((a - m) ** 2 for a in x) / (n - 1) if n > 1 else 0.0
    return m, math.sqrt(v / n)


def bounds(base, path):
    """(before, paired) bounds for rows paired by index; NaN rows are left out of both."""
    pairs = [(b, p) for b, p in zip(base, path) if b is not None and p is not None]
    b = [x for x, _ in pairs]
    mb, seb = mean_se(b)
    _, sed = mean_se([p - K * K * x for x, p in pairs])
    return K * K * (mb + 3 * seb), K * K * mb + 3 * sed


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
                before, paired = bounds(base, kld)
                m = sum(kld) / len(kld)
                flag = "" if (m <= before) == (m <= paired) else "   <- the verdicts differ"
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
            fails = [0, 0]
            for _ in range(boot):
                pick = [rng.choice(ss) for _ in range(take)]
                rows = [s[t] for t in range(len(ss[0])) for s in pick]
                m = sum(p for _, p in rows) / len(rows)
                for i, bd in enumerate(bounds([b for b, _ in rows], [p for _, p in rows])):
                    fails[i] += m > bd
            line.append(f"{take} seq ({take * len(ss[0])} rows): before {fails[0] / boot:.4f} paired {fails[1] / boot:.4f}")
        print("false alarms", key, "|", " | ".join(line))


if __name__ == "__main__":
    main(sys.argv[1:])
