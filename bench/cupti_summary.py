#!/usr/bin/env python3
"""Summarizes a cupti_trace TSV (bench/cupti_trace.c): for every CUDA graph, the replay of median
span, kernel by kernel in start order: duration, the idle time before it (gap since the previous
kernel of the replay ended; negative = overlap, e.g. programmatic dependent launch), grid, name.
  cupti_summary.py k.tsv [--graph N] [--top 0]"""
import subprocess
import sys
from collections import defaultdict


def demangle(names):
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
        return {n: (out[i] if i < len(out) and out[i] else n) for i, n in enumerate(names)}
    except OSError:
        return {n: n for n in names}


def short(name):
    s = name.split("(")[0]
    return s[:70]


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 2
    only = None
    if "--graph" in args:
        only = int(args[args.index("--graph") + 1])
    rows = []
    with open(args[0]) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if len(p) < 7:
                continue
            rows.append((int(p[0]), int(p[1]), int(p[2]), int(p[3]), int(p[4]), p[5], p[6]))
    graphs = defaultdict(list)
    for r in rows:
        if r[2]:
            graphs[r[2]].append(r)
    names = demangle(sorted({r[6] for r in rows}))
    for gid in sorted(graphs):
        if only is not None and gid != only:
            continue
        ks = sorted(graphs[gid])
        first = ks[0][3]
        reps, cur = [], []
        for k in ks:  # a replay starts where the first node appears again
            if k[3] == first and cur:
                reps.append(cur)
                cur = []
            cur.append(k)
        if cur:
            reps.append(cur)
        spans = sorted((r[-1][1] - r[0][0], i) for i, r in enumerate(reps) if max(x[1] for x in r) >= r[0][0])
        if not spans:
            continue
        span, mi = spans[len(spans) // 2]
        rep = sorted(reps[mi])
        t0 = rep[0][0]
        end = max(k[1] for k in rep)
        busy = sum(k[1] - k[0] for k in rep)
        print(f"graph {gid}: {len(reps)} replays, {len(rep)} kernels, median span {(end - t0) / 1e3:.1f} us, "
              f"kernel time {busy / 1e3:.1f} us")
        prev_end = None
        agg = defaultdict(lambda: [0.0, 0.0, 0])
        for k in rep:
            dur = (k[1] - k[0]) / 1e3
            gap = (k[0] - prev_end) / 1e3 if prev_end is not None else 0.0
            nm = short(names[k[6]])
            print(f"  {(k[0] - t0) / 1e3:8.1f} {dur:8.1f} {gap:7.1f}  s{k[4]:<3} {k[5]:>12}  {nm}")
            a = agg[nm]
            a[0] += dur
            a[1] += gap
            a[2] += 1
            prev_end = k[1] if prev_end is None else max(prev_end, k[1])
        print("  by kernel: total us, gaps before it, count")
        for nm, a in sorted(agg.items(), key=lambda x: -x[1][0]):
            print(f"  {a[0]:9.1f} {a[1]:8.1f} x{a[2]:<3} {nm}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
