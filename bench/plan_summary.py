#!/usr/bin/env python3
"""One line per failing (or erroring) record of a vouch result directory, then the counts.

usage: plan_summary.py RESULT_DIR [LOG [MEM]]   (RESULT_DIR/results.json; LOG: the run's stderr with each
line stamped by the epoch time it arrived, as bench/gpu_session.sh's plans phase writes it: the
wall seconds of every step; MEM: gpu_session.sh's gpumem samples, lines "EPOCH INDEX, MIB": each
step's peak memory.used on the fullest GPU, set beside the dry run's GPU GiB. It counts every process
and the CUDA context, and samples every ~0.3 s, so a briefer peak is missed.)"""
import json
import os
import re
import sys


def mem_samples(path):
    """[(epoch_s, MiB used on the fullest GPU at that sample)] from a gpumem file, [] when absent.
    One nvidia-smi call writes a line per GPU, index 0 first, all with its one stamp: a sample ends where
    the stamp changes or the index stops rising (files before the fifteenth session stamped by the
    whole second, so several calls share a stamp)."""
    if not path or not os.path.exists(path):
        return []
    out = []
    prev = None  # the last line's (stamp, GPU index)
    for line in open(path, errors="replace"):
        m = re.match(r"(\d+(?:\.\d+)?) (\d+), (\d+)\n$", line)  # a whole line: a copy of a live file may end mid-line
        if m:
            t, gpu, mib = float(m.group(1)), int(m.group(2)), int(m.group(3))
            if prev is not None and t == prev[0] and gpu > prev[1]:
                out[-1] = (out[-1][0], max(out[-1][1], mib))
            else:
                out.append((t, mib))
            prev = (t, gpu)
    return out


def stamp_of(word):
    """A log line's stamp (epoch seconds: whole in logs before 2026-12-03's fifteenth session, to the
    microsecond after), None when the line has none."""
    try:
        return float(word)
    except ValueError:
        return None


if len(sys.argv) > 2:
    mem = mem_samples(sys.argv[3] if len(sys.argv) > 3 else None)
    if mem:
        print(f"  GPU memory.used at the first sample: {mem[0][1] / 1024:.2f} GiB (the peaks below include what it holds)")
    # a step's time is the sum of its segments: a run that was stopped and resumed (a "vouch run: plan"
    # line starts each) ends the step in flight at the last line before the resume, so the time between
    # two device calls or sessions is not counted; GPU memory: the peak over the same segments
    steps = {}  # step -> [what, seconds, peak MiB or None]
    cur = None  # (step, segment start)
    last = None
    lines = []
    for line in open(sys.argv[2], errors="replace"):
        t, _, rest = line.partition(" ")
        ts = stamp_of(t)
        if ts is not None:
            lines.append((ts, rest))
    lines.append((lines[-1][0] if lines else 0, "vouch run: plan (end of the log)"))

    def close(t_end):
        n, t0 = cur
        # the samples after the step's line up to the next one's: a sample stamped in a step's first
        # whole second (older logs) is the step before's, still held then (h200 seed 4 measured it: at
        # the second step 7 began the GPU still held step 6's 14.7 GiB; step 7's own peak was 9.4)
        peak = [mib for ts, mib in mem if t0 < ts <= t_end]
        st = steps[n]
        st[1] += t_end - t0
        if peak:
            st[2] = max(st[2] or 0, max(peak))

    for t, rest in lines:
        m = re.match(r"vouch run: step (\d+)(?::| \((\w+)\) needs)", rest)
        if rest.startswith("vouch run: plan"):
            if cur:  # a step in flight has a line before this one
                close(last)
            cur = None
        elif m and (not cur or cur[0] != int(m.group(1))):
            if cur:
                close(t)
            n = int(m.group(1))
            steps.setdefault(n, [rest.strip()[:110], 0, None])
            cur = (n, t)
        last = t
    for n, (what, secs, peak) in sorted(steps.items()):
        if "skipped: " in what or "needs a" in what:  # "needs a": logs of older builds
            continue
        gib = f"{peak / 1024:7.2f} GiB  " if peak else ("      - GiB  " if mem else "")
        print(f"  step {n:2} {round(secs):5} s  {gib}{what}")

d = json.load(open(sys.argv[1] + "/results.json"))
bad = [r for r in d["records"] if r["status"] in ("fail", "error")]
for r in bad[:20]:
    print(f"  {r['status']:5} {r['suite']:9} {r['case_id'][:60]:60} {r.get('path', ''):18} {r.get('reason', '')[:160]}")
if len(bad) > 20:
    print(f"  ... {len(bad) - 20} more")
print(f"  verdict {d['verdict']}, complete {d['complete']}, counts {json.dumps(d['counts'])}")
