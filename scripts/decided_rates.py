#!/usr/bin/env python3
"""Per check (suite, check name): how many records passed, failed, decided nothing (undecided) or were not_supported,
over the results.json of several runs (vouch run at many seeds): the decided rates docs/verdicts.md reports.
usage: scripts/decided_rates.py RESULTS.json...  (one per run); prints a markdown table."""
import json, sys, collections
T = collections.defaultdict(lambda: collections.Counter())
runs = collections.defaultdict(set)
def records(f):
    try:
        with open(f) as fh:
            d = json.load(fh)
        recs = d['records']
        if not isinstance(recs, list) or not all(isinstance(r, dict) and isinstance(r.get('suite'), str) and
                                                 isinstance(r.get('case_id'), str) for r in recs):
            raise ValueError('records: not a list of records with suite and case_id')
        return recs
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f'decided_rates: {f}: {e}')

if len(sys.argv) < 2:
    sys.exit(__doc__)
for f in sys.argv[1:]:
    for r in records(f):
        if r['suite'] == 'run':
            continue
        st = r.get('status')
        checks = r.get('checks') or []
        if not checks or r['suite'] == 'features':  # the record's status is its check's decision
            name = r['case_id'] if r['suite'] == 'features' else r['case_id'].split('/')[0] if r['suite'] == 'kernels' else '(case)'
            checks = [{'name': name, 'ok': {'pass': True, 'fail': False}.get(st)}]
        for c in checks:
            k = (r['suite'], c['name'])
            if st in ('not_supported', 'not_run', 'error'):
                T[k][st] += 1
            elif c.get('ok') is True:
                T[k]['pass'] += 1
            elif c.get('ok') is False:
                T[k]['fail' if st == 'fail' else 'fail(check)'] += 1
            else:
                T[k]['undecided'] += 1
            runs[k].add(f)
print('| suite | check | runs | pass | fail | undecided | not_supported | error | decided rate |')
print('|---|---|---:|---:|---:|---:|---:|---:|---:|')
for k in sorted(T):
    c = T[k]; dec = c['pass'] + c['fail'] + c['fail(check)']; tot = dec + c['undecided']
    print(f"| {k[0]} | {k[1]} | {len(runs[k])} | {c['pass']} | {c['fail'] + c['fail(check)']} | {c['undecided']} | {c['not_supported']} | {c['error']} | {dec}/{tot} ({100.0 * dec / tot if tot else 0:.1f} %) |")
