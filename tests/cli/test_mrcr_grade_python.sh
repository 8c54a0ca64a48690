#!/usr/bin/env bash
# The MRCR grader's SequenceMatcher ratio (suites/evals/mrcr/grade.c) against Python's difflib
# itself: python3 draws 1200 pairs of strings (seeded; up to ~21k characters) meant to stress
# difflib's junk heuristic: small alphabets, texts of repeated words, near-duplicates with edits
# (inserts, deletes, duplicated and moved chunks), truncated and run-on copies, b lengths around
# 200/300/400 with code points at, just under and just over len(b)/100 + 1 occurrences, and
# non-ASCII (accents, a combining mark, CJK, Cyrillic, 4-byte emoji, U+10FFFF, NUL). The test
# binary's hidden mode (test_mrcr_grade --pairs) grades them in C; any |C - Python| > 1e-9 in the
# ratio, or any difference in the matching blocks, fails. The draw must keep its teeth: at least
# 100 pairs whose ratio the heuristic changes (checked with autojunk=False where that is cheap),
# 100 with non-ASCII text and one longer than 15k characters. Skipped (77) without python3.
. "$VOUCH_SRC/tests/cli/counters.sh"
command -v python3 >/dev/null || { echo "no python3: skipped"; exit 77; }
bin="$VOUCH_BUILD/tests/test_mrcr_grade"
if [ ! -x "$bin" ]; then bad "$bin: not built"; finish; exit; fi

python3 - "$bin" "$t" >"$t/summary" 2>"$t/err" <<'EOF'
import difflib, random, subprocess, sys, time
from multiprocessing import Pool

R = random.Random(20250611)
ASCII = [chr(c) for c in range(32, 127)] + ['\n', '\t']
NONASCII = (['é', 'è', 'ü', 'ß', 'ñ', 'ø', 'å', '\u0301', '—', '“', '”', '…', '€']
            + [chr(c) for c in range(0x4E00, 0x4E00 + 400)]          # CJK
            + [chr(c) for c in range(0x0410, 0x0450)]                # Cyrillic
            + [chr(c) for c in range(0x1F600, 0x1F650)]              # emoji (4-byte UTF-8)
            + ['\U0010FFFF', '\uFFFD', '\x00'])

def length(cap=20000):
    u = R.random()
    if u < 0.25: return R.randint(150, 260)            # around the autojunk boundary
    if u < 0.95: return int(10 ** R.uniform(0, 3.6))   # 1 .. ~4000
    return R.randint(8000, cap)                          # a few long ones

def alphabet(k):
    pool = ASCII if R.random() < 0.6 else ASCII + NONASCII
    return R.sample(pool, min(k, len(pool)))

def words(n_words, alpha):
    return [''.join(R.choice(alpha) for _ in range(R.randint(1, 9))) for _ in range(n_words)]

def text_from_vocab(vocab, L, zipf):
    cw, c = [], 0.0
    for r in range(len(vocab)):
        c += 1.0 / (r + 1) ** zipf
        cw.append(c)
    out, n = [], 0
    seps = [' '] * 12 + ['\n', ', ', '. ', '\n\n', '; ']
    while n < L:
        t = R.choices(vocab, cum_weights=cw)[0] + R.choice(seps)
        out.append(t)
        n += len(t)
    return ''.join(out)[:L]

def edit(s, n_edits, pool):
    s = list(s)
    for _ in range(n_edits):
        op, p = R.random(), R.randint(0, len(s))
        if op < 0.3: s[p:p] = [R.choice(pool) for _ in range(R.randint(1, 5))]
        elif op < 0.55: del s[p:p + R.randint(1, 20)]
        elif op < 0.75:
            if p < len(s): s[p] = R.choice(pool)
        elif op < 0.9:                                   # duplicate a chunk elsewhere
            q = R.randint(0, len(s)); s[q:q] = s[p:p + R.randint(1, 200)]
        else:                                            # move a chunk
            k = R.randint(1, 300); c = s[p:p + k]; del s[p:p + k]
            q = R.randint(0, len(s)); s[q:q] = c
    return ''.join(s)

def boundary_pair():
    n = R.choice([R.randint(195, 205), R.randint(295, 305), R.randint(395, 405)])
    t = n // 100 + 1
    s = []
    for c in R.sample('abcdefgh', R.randint(1, 4)):    # counts just under, at, just over the threshold
        s += [c] * max(1, t + R.choice([-1, 0, 1, 2]))
    s += R.sample(NONASCII[13:413] + ASCII, n)[:n - len(s)]
    R.shuffle(s)
    b = ''.join(s[:n])
    a = edit(b, R.randint(0, 10), 'abcdefgh') if R.random() < 0.7 else ''.join(R.sample(b, len(b)))
    return a, b

def pair():
    u = R.random()
    if u < 0.12: return boundary_pair()
    L = length()
    if u < 0.32:                                         # small alphabets
        alpha = alphabet(R.choice([1, 2, 3, 4, 6, 10, 20, 40, 80]))
        b = ''.join(R.choice(alpha) for _ in range(L))
        a = edit(b, R.randint(0, 40), alpha) if R.random() < 0.6 else ''.join(R.choice(alpha) for _ in range(length()))
        return a, b
    # repeated words: a response that is a near-copy of the answer, cut short, run on, or another piece
    alpha = alphabet(R.choice([8, 26, 60, 120, 300]))
    vocab = words(R.choice([3, 10, 50, 300, 2000]), alpha)
    b = text_from_vocab(vocab, L, R.uniform(0.5, 1.5))
    v = R.random()
    if v < 0.55: a = edit(b, R.choice([0, 1, 2, 5, 20, 100]), alpha + [' ', '\n'] + R.sample(NONASCII, 5))
    elif v < 0.7: a = b[:R.randint(0, len(b))]
    elif v < 0.8: a = b + text_from_vocab(vocab, R.randint(1, 500), 1.0)
    else: a = text_from_vocab(vocab, length(), R.uniform(0.5, 1.5))
    if R.random() < 0.5: a, b = b, a
    return a, b

def python_side(ab):
    a, b = ab
    m = difflib.SequenceMatcher(None, a, b)
    r, blocks = m.ratio(), [tuple(x) for x in m.get_matching_blocks()]
    changed = None                 # does the heuristic change the ratio? (only where cheap to ask)
    if m.bpopular and len(a) * len(b) <= 4e6:
        changed = difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() != r
    return r, blocks, changed

if __name__ == '__main__':
    binary, tmp = sys.argv[1], sys.argv[2]
    pairs = [('', ''), ('', 'x'), ('x', ''), ('abc', 'abc'), ('abc', 'xyz'), ('cbaab', 'bb')]
    while len(pairs) < 1200: pairs.append(pair())
    with open(tmp + '/pairs', 'wb') as f:
        for a, b in pairs:
            ea, eb = a.encode(), b.encode()
            f.write(b'%d %d\n' % (len(ea), len(eb)) + ea + eb)
    t0 = time.time()
    c = subprocess.run([binary, '--pairs', tmp + '/pairs'], capture_output=True, text=True)
    t_c = time.time() - t0
    if c.returncode != 0:
        sys.exit('C side exit %d: %s' % (c.returncode, c.stderr.strip()))
    lines = c.stdout.split('\n')
    t0 = time.time()
    with Pool(2) as p: res = p.map(python_side, pairs, chunksize=4)
    t_py = time.time() - t0
    bad, worst, pos = 0, 0.0, 0
    for k, ((a, b), (r, blocks, _)) in enumerate(zip(pairs, res)):
        line = lines[pos]; pos += 1
        if line.startswith('error'):
            print('pair %d (%d, %d chars): C refused: %s' % (k, len(a), len(b), line), file=sys.stderr); bad += 1; continue
        got = float(line)
        nums = list(map(int, lines[pos].split())); pos += 1
        got_blocks = [tuple(nums[q:q + 3]) for q in range(0, len(nums), 3)]
        worst = max(worst, abs(got - r))
        if abs(got - r) > 1e-9 or got_blocks != blocks:
            bad += 1
            if bad <= 5:
                print('pair %d (%d, %d chars): C %.17g Python %.17g; blocks %s' % (k, len(a), len(b), got, r,
                      'equal' if got_blocks == blocks else 'differ: C %d, Python %d' % (len(got_blocks), len(blocks))),
                      file=sys.stderr)
    changed = sum(1 for x in res if x[2])
    nonascii = sum(1 for a, b in pairs if any(ord(ch) > 127 for ch in a + b))
    longest = max(max(len(a), len(b)) for a, b in pairs)
    print('pairs %d, differing %d, max |C - Python| %.3g, heuristic changed the ratio in %d, non-ASCII %d, '
          'longest %d chars; C %.2f s, Python %.2f s' % (len(pairs), bad, worst, changed, nonascii, longest, t_c, t_py))
    if changed < 100 or nonascii < 100 or longest < 15000:
        sys.exit('the draw lost its teeth: heuristic changed %d (< 100?), non-ASCII %d (< 100?), longest %d (< 15000?)'
                 % (changed, nonascii, longest))
    sys.exit(1 if bad else 0)
EOF
rc=$?
cat "$t/summary"
[ $rc -eq 0 ] && ok || bad "C vs Python difflib (exit $rc): $(cat "$t/err")"
finish mrcr_grade_python
