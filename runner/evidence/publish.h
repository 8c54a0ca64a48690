/* `vouch publish`: one comment on the pull request (found again by REPORT_MARKER and
 * updated in place), optionally a commit status, through GitHub's REST API (libcurl).
 * The token comes from GITHUB_TOKEN; it is sent only in the Authorization header, to
 * the API host, and never printed, logged or stored (dry runs show "Bearer ***").
 * Retries: 5xx, 429, and 403 with Retry-After or x-ratelimit-remaining: 0, with
 * exponential backoff from 1 s, honouring Retry-After; the total wait is capped by
 * VOUCH_PUBLISH_MAX_WAIT seconds (default 120). */
#ifndef VOUCH_RUNNER_EVIDENCE_PUBLISH_H
#define VOUCH_RUNNER_EVIDENCE_PUBLISH_H

#include <stdbool.h>
#include <stdio.h>

#include "common/vstatus.h"

typedef struct {
  const char *api_url;     /* "https://api.github.com" unless given */
  const char *repo;        /* "OWNER/REPO" */
  int pr;                  /* pull request number */
  const char *body;        /* the comment (Markdown, contains REPORT_MARKER) */
  bool status;             /* also POST a commit status */
  const char *head_sha;    /* commit the status is for */
  const char *verdict;     /* "pass" -> success; anything else -> failure */
  const char *target_url;  /* link of the status (the bundle), may be NULL */
  bool dry_run;            /* print the requests instead of sending them */
  FILE *out;               /* progress and dry-run listing */
} publish_opts;

/* Parses "OWNER/REPO#N". */
vstatus publish_parse_pr(const char *spec, char *repo, size_t cap, int *pr);
/* Does the work; on success the comment's html_url (if any) is in url_out. */
vstatus publish_run(const publish_opts *o, char *url_out, size_t cap);

#endif
