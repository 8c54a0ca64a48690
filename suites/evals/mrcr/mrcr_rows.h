/* Rows of OpenAI's public MRCR dataset (openai/mrcr) from a local JSONL file, one row per line:
 *   prompt                    a JSON-encoded string: the chat messages [{"role", "content"}, ...]
 *   answer                    the expected response (it starts with the random string)
 *   random_string_to_prepend  the string the response must start with
 *   n_needles                 2, 4 or 8 identical asks hidden in the conversation
 *   desired_msg_index         the index of the needle asked for, in the conversation
 *   total_messages            messages in the conversation
 *   n_chars                   characters of the conversation
 * The file is untrusted: every row is checked when the file is read (each field's type and range,
 * the prompt decoded into a non-empty list of {role, content} strings, the strings valid UTF-8), and
 * a bad row is an error naming the file, the line and the field. Only what grading needs is kept in
 * memory; a row's prompt is read again from the file when its request is made (the public rows
 * average ~1 MB of text each). Blank lines are skipped. */
#ifndef VOUCH_SUITES_EVALS_MRCR_MRCR_ROWS_H
#define VOUCH_SUITES_EVALS_MRCR_MRCR_ROWS_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/vstatus.h"

typedef struct {
  long line;               /* 1-based line of the row in the file */
  off_t offset;            /* the line's first byte in the file */
  size_t len;              /* the line's bytes (without the newline) */
  char *answer;            /* answer (UTF-8, owned) */
  char *prefix;            /* random_string_to_prepend (UTF-8, owned) */
  int n_needles;           /* n_needles (>= 1) */
  int desired_msg_index;   /* desired_msg_index (>= 0) */
  int total_messages;      /* total_messages (>= 1) */
  long n_chars;            /* n_chars (>= 0) */
  int n_messages;          /* messages in the decoded prompt */
} mrcr_row;

typedef struct {
  char file[512];          /* the file as given */
  mrcr_row *rows;          /* [n] in file order (owned) */
  int n;
} mrcr_rows;

/* Reads and checks the first `limit` rows of file (limit <= 0: all). Error: the file cannot be read,
 * holds no row, or a row is malformed ("FILE:LINE: field 'F': ..."). */
vstatus mrcr_rows_read(const char *file, long limit, mrcr_rows *out);
/* The chat messages of row i (a JSON array, *messages owned by the caller), read again from the file.
 * Error (naming the file and line): the file changed since it was read. */
vstatus mrcr_rows_messages(const mrcr_rows *d, int i, cJSON **messages);
/* Checks one row's JSON text (line `line` of `file`, for errors) and fills *row (answer and prefix
 * allocated; offset and len left to the caller) and, when messages is not NULL, *messages. */
vstatus mrcr_row_parse(const char *text, const char *file, long line, mrcr_row *row, cJSON **messages);
void mrcr_rows_free(mrcr_rows *d);

#endif
