/* The grader of OpenAI's public MRCR dataset (huggingface.co/datasets/openai/mrcr), exact to
 * Python.
 *
 * The rule, from the dataset card's `grade(response, answer, random_string_to_prepend)`
 * (section "Implementation details"; the same function is quoted unchanged by the public
 * harnesses that run MRCR):
 *   - if the response does not start with the row's random_string_to_prepend, the score is 0;
 *   - otherwise that prefix is removed from the start of the response AND from the start of the
 *     answer (Python's str.removeprefix: removed only where it is there; the dataset's answers
 *     all begin with it), and the score is
 *       difflib.SequenceMatcher(None, response, answer).ratio()
 *     with the response as `a` and the answer as `b` (the order matters: the junk heuristic
 *     looks at b only), isjunk None and autojunk on (the default).
 * An empty prefix is a prefix of everything: the score is then the plain ratio.
 *
 * mrcr_ratio is SequenceMatcher(None, a, b).ratio() written in C from the algorithm difflib's
 * documentation describes, over Unicode code points (the strings arrive as UTF-8 and are
 * decoded; Python's str indexes code points, so a non-ASCII character is one element):
 *   - b's index: where each code point occurs in b. When len(b) >= 200, a code point occurring
 *     more than len(b)/100 + 1 times (integer division) is "popular" and left out of the index;
 *   - the longest matching block of a[alo:ahi] and b[blo:bhi] among indexed elements, ties to the
 *     one starting earliest in a, then earliest in b; then grown by equal neighbours on both
 *     sides (which is how popular elements still match next to an anchored block);
 *   - the matching blocks: that search applied again to the pieces left and right of each block
 *     found, in difflib's last-in first-out order;
 *   - ratio = 2*M/T, M the matched elements, T = len(a) + len(b); 1.0 when T is 0.
 * The value is bit-identical to Python's (the same integer M and the same one division).
 * Cost: O(len(a) + len(b) log len(b)) memory; time as Python's algorithm, which visits each
 * indexed occurrence in b of each a element once per search. */
#ifndef VOUCH_SUITES_EVALS_MRCR_GRADE_H
#define VOUCH_SUITES_EVALS_MRCR_GRADE_H

#include <stddef.h>

#include "common/vstatus.h"

/* One matching block as difflib reports it: a[i:i+n] == b[j:j+n], indices in code points. */
typedef struct {
  size_t i; /* start in a, code points */
  size_t j; /* start in b, code points */
  size_t n; /* length, code points; 0 only in the closing (len(a), len(b), 0) block */
} mrcr_block;

/* SequenceMatcher(None, a, b).ratio() of the UTF-8 strings a_utf8[a_len] and b_utf8[b_len]
 * (not NUL-terminated; a NUL byte is an element like any other) into *out.
 * Fails (V_ERR, *out untouched) on invalid UTF-8 (a stray or missing continuation byte, an
 * overlong form, a surrogate, a code point past U+10FFFF: what Python's strict decoder refuses),
 * naming the string ("a"/"b") and the byte offset, or when memory runs out. */
vstatus mrcr_ratio(const char *a_utf8, size_t a_len, const char *b_utf8, size_t b_len, double *out);

/* The matching blocks of a and b as SequenceMatcher(None, a, b).get_matching_blocks() returns
 * them: sorted, adjacent blocks merged, closed by (len(a), len(b), 0). *blocks is allocated
 * (free() it) and holds *n_blocks entries (at least 1). For the cross-check against Python;
 * failures as mrcr_ratio's, with *blocks NULL and *n_blocks 0. */
vstatus mrcr_matching_blocks(const char *a_utf8, size_t a_len, const char *b_utf8, size_t b_len,
                             mrcr_block **blocks, size_t *n_blocks);

/* The public MRCR score of one row (the rule above) into *score: 0 when the response does not
 * start with random_prefix, else the ratio of the response and the answer with the prefix
 * removed from both. All three are NUL-terminated UTF-8. Fails (V_ERR, *score untouched) when
 * any of them is NULL or not valid UTF-8 (the message names "response", "answer" or
 * "random_prefix" and the byte offset), or when memory runs out. */
vstatus mrcr_grade(const char *response, const char *answer, const char *random_prefix, double *score);

#endif
