/* What `vouch publish` reads back from GitHub's REST API, parsed apart from the HTTP code so
 * that every byte of a reply goes through functions a fuzz target can call
 * (fuzz/fuzz_publish_reply.c): response headers (rate limits, pagination), the list of
 * comments, the error message and the new comment's URL. A reply is untrusted: numbers are
 * range-checked, a Link URL must be one line of printable characters. */
#ifndef VOUCH_RUNNER_EVIDENCE_PUBLISH_REPLY_H
#define VOUCH_RUNNER_EVIDENCE_PUBLISH_REPLY_H

#include <stddef.h>

#include "common/vstatus.h"

#define PUBLISH_MAX_RETRY_AFTER_S 86400.0 /* a larger Retry-After is ignored (treated as absent) */

typedef struct {
  char *data;            /* response body, NUL-terminated (owned) */
  size_t n, cap;         /* bytes used, allocated */
  double retry_after;    /* seconds from Retry-After, -1 when absent or out of [0, 86400] */
  long rl_remaining;     /* x-ratelimit-remaining, -1 when absent or not a non-negative integer */
  double rl_reset;       /* x-ratelimit-reset (epoch s), -1 when absent or not finite and >= 0 */
  char next[2048];       /* Link rel="next" URL, "" when none */
} publish_reply;

/* Sets the "absent" values (data untouched). */
void publish_reply_init(publish_reply *r);
/* Appends n body bytes; 0 on out of memory (libcurl then stops the transfer). */
size_t publish_reply_body(publish_reply *r, const char *p, size_t n);
/* Parses one header line (n bytes, maybe with CRLF, not NUL-terminated). */
void publish_reply_header(publish_reply *r, const char *p, size_t n);
/* In a JSON array of issue comments: the id of the first whose body contains `marker` and
 * that has a numeric id (*id = 0 when none). An error names `url` when the reply is not an array or an id is not a
 * positive integer below 2^53. */
vstatus publish_reply_find_comment(const char *body, const char *marker, const char *url, double *id);
/* Copies the string field `key` of a JSON object reply into out ("" when absent). */
void publish_reply_field(const char *body, const char *key, char *out, size_t cap);

#endif
