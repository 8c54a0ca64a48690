#!/usr/bin/env python3
"""Lines "NAME<TAB>COMMAND" for a plan's steps alone at fresh seeds, for bench/gpu_session.sh's prsteps phase.

usage: pr_step_jobs.py PLAN.json VOUCH SEED0 STEP:COUNT ...
Step STEP (its index in the plan's "steps") at seeds SEED0 .. SEED0 + COUNT - 1, round-robin over the
steps (seed k of every step before seed k + 1 of any), so a phase cut by its deadline leaves every step
with about as many seeds as the others. ${VAR} in a step's args is the plan's var, ${seed} the seed;
NAME is sSTEP_SEED. The command quotes every argument for bash.
"""
import json
import shlex
import sys


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    plan = json.load(open(sys.argv[1]))
    vouch, seed0 = sys.argv[2], int(sys.argv[3])
    want = []
    for a in sys.argv[4:]:
        st, n = (int(x) for x in a.split(":"))
        if not 0 <= st < len(plan["steps"]):
            sys.exit(f"pr_step_jobs.py: step {st}: the plan has steps 0..{len(plan['steps']) - 1}")
        want.append((st, n))
    for k in range(max(n for _, n in want)):
        for st, n in want:
            if k >= n:
                continue
            step, seed = plan["steps"][st], seed0 + k
            var = dict(plan.get("vars", {}), seed=str(seed))
            args = []
            for a in step["args"]:
                for key, val in var.items():
                    a = a.replace("${%s}" % key, val)
                args.append(shlex.quote(a))
            print(f"s{st}_{seed}\t{shlex.quote(vouch)} {step['suite']} {' '.join(args)}")


if __name__ == "__main__":
    main()
