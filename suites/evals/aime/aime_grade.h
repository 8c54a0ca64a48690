/* The grading of lm-eval's aime task (lm_eval/tasks/aime/utils.py, process_results), the same on the
 * same strings:
 *   1. answer = the response; with two or more '$', the text between the first and the last '$'.
 *   2. The last box: when the response holds "\boxed " (a space), the text after its last occurrence up
 *      to the next '$'; else from the last "\boxed" (none: the last "\fbox") up to the '}' that brings
 *      the brace count back to 0 (none: no box). A "\boxed{...}" box replaces answer with its content;
 *      a box that is not "\boxed{" ("\fbox{42}", "\boxed\n{42}") is found but refused, so answer stays.
 *   3. Correct iff strip_string(answer) == strip_string(target) (hendrycks_math's normalization:
 *      newlines, "\!", "\left", "\right", units after "\text{ ", "\%", "^\circ" and spaces removed,
 *      "\\" -> "\", tfrac/dfrac -> frac, " ." -> " 0.", a leading "." -> "0.", "k = v" -> "v" when the
 *      left side is at most 2 characters, \sqrt3 -> \sqrt{3}, \frac12 -> \frac{1}{2}, "0.5" ->
 *      \frac{1}{2}, "a/b" of integers -> \frac{a}{b}). Where Python raises inside it (an empty piece
 *      after "\sqrt" or "\frac", "\text{ " twice, "a/b" with a non-integer side), lm-eval compares the
 *      raw strings instead, and so does this.
 * No integer parsing: "\boxed{042}" is not 42 (lm-eval's rule: "042" != "42"). Lengths in step 3
 * ("at most 2 characters", the character after "\sqrt") count UTF-8 code points as Python does. */
#ifndef VOUCH_SUITES_EVALS_AIME_AIME_GRADE_H
#define VOUCH_SUITES_EVALS_AIME_AIME_GRADE_H

#include <stdbool.h>
#include <stddef.h>

#include "common/vstatus.h"

/* One graded response. */
typedef struct {
  bool correct;        /* matches the target under the rule above */
  bool boxed;          /* a "\boxed{...}" or "\boxed " box gave the answer (false: the whole response or
                          its $...$ part was compared) */
  char answer[64];     /* the extracted answer, normalized, cut to 63 bytes (for reports) */
} aime_grade;

/* Steps 1-2: the answer text of response[len] into *out (malloc'ed, NUL-terminated); *boxed as above.
 * Error: out of memory. */
vstatus aime_extract(const char *response, size_t len, char **out, bool *boxed);
/* Step 3's strip_string of s into *out (malloc'ed). Returns false (and *out NULL) where Python raises,
 * true otherwise; *out NULL with true: out of memory. */
bool aime_strip(const char *s, char **out);
/* lm-eval's is_equiv(answer, target). Error: out of memory. */
vstatus aime_equiv(const char *answer, const char *target, bool *eq);
/* Grades response[len] against the integer target (its decimal text is the target string).
 * Error: out of memory. */
vstatus aime_grade_response(const char *response, size_t len, long long target, aime_grade *g);

#endif
