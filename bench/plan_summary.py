#!/usr/bin/env python3
"""One line per failing (or erroring) record of a vouch result directory, then the counts.

usage: plan_summary.py RESULT_DIR [LOG]   (RESULT_DIR/results.json; LOG: the run's stderr with each
line stamped by the epoch second it arrived, as bench/gpu_session.sh's plans phase writes it: the
wall seconds of every step)"""
import json
import re
import sys

if len(sys.argv) > 2:
    starts = []
    end = None
    for line in open(sys.argv[2], errors="replace"):
        t, _, rest = line.partition(" ")
        if not t.isdigit():
            continue
        end = int(t)
        m = re.match(r"vouch run: step (\d+)(?::| \((\w+)\) needs)", rest)
        if m and (not starts or starts[-1][0] != int(m.group(1))):
            starts.append((int(m.group(1)), int(t), rest.strip()[:110]))
    for i, (n, t, what) in enumerate(starts):
        nxt = starts[i + 1][1] if i + 1 < len(starts) else end
        if "needs a" not in what:
            print(f"  step {n:2} {nxt - t:5} s  {what}")

d = json.load(open(sys.argv[1] + "/results.json"))
bad = [r for r in d["records"] if r["status"] in ("fail", "error")]
for r in bad[:20]:
    print(f"  {r['status']:5} {r['suite']:9} {r['case_id'][:60]:60} {r.get('path', ''):18} {r.get('reason', '')[:160]}")
if len(bad) > 20:
    print(f"  ... {len(bad) - 20} more")
print(f"  verdict {d['verdict']}, complete {d['complete']}, counts {json.dumps(d['counts'])}")
