/* The report's AIME table (runner/evidence/report_aime.c, issues 36 and 38): the "aime_all" records
 * of `vouch eval aime` (one per server, pass@1 over every repeat) as one row per server: pass@1 with
 * its bootstrap interval, answers and truncated answers, and on the candidate's row the paired
 * difference against the reference with its one-sided p. Markdown (the PR comment) and HTML (the
 * full report) read the same rows. */
#ifndef VOUCH_RUNNER_EVIDENCE_REPORT_AIME_H
#define VOUCH_RUNNER_EVIDENCE_REPORT_AIME_H

#include "runner/evidence/report_text.h"

/* The Markdown section; nothing without aime_all records. b->oom on allocation failure. */
void aime_md(sbuf *b, const vresults *r);
/* The HTML section; nothing without aime_all records. */
void aime_html(sbuf *b, const vresults *r);

#endif
