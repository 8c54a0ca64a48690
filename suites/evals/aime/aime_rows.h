/* AIME rows from a local JSONL file, one JSON object per line, with the field names of the public
 * sets lm-eval's aime tasks read:
 *   the problem   "Problem" (Maxwell-Jia/AIME_2024), "Question" (gneubig/aime-1983-2024),
 *                 "problem" (math-ai/aime25, math-ai/aime26), or "question": exactly one of these
 *   the answer    "Answer" or "answer" (lm-eval: the key whose lower case is "answer"): an integer, or a
 *                 string holding one (math-ai's sets give "70"), within +-10^15
 * Other fields (id, solution, url, year) are ignored. The file is untrusted: a bad row is an error
 * "FILE:LINE: field 'F': ..." before any request. Blank lines are skipped. */
#ifndef VOUCH_SUITES_EVALS_AIME_AIME_ROWS_H
#define VOUCH_SUITES_EVALS_AIME_AIME_ROWS_H

#include "common/vstatus.h"

typedef struct {
  long line;               /* 1-based line of the row in the file */
  char *problem;           /* the problem text (owned) */
  long long answer;        /* the integer answer */
} aime_row;

typedef struct {
  aime_row *rows;          /* [n] in file order (owned) */
  int n;
} aime_rows;

/* Checks one row's JSON text (line `line` of `file`, for errors) into *row (problem allocated). */
vstatus aime_row_parse(const char *text, const char *file, long line, aime_row *row);
/* Reads and checks the first `limit` rows of file (limit <= 0: all). Error: the file cannot be read,
 * holds no row, or a row is malformed. */
vstatus aime_rows_read(const char *file, long limit, aime_rows *out);
void aime_rows_free(aime_rows *d);

#endif
