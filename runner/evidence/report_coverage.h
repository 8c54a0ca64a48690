/* The report's coverage table (runner/evidence/report_coverage.c, issue 37): the choices each path's
 * rules can pick (records of suite coverage, suites/coverage/) against the decode steps whose records
 * say they ran them (`ran`); a choice no step ran is a gap. */
#ifndef VOUCH_RUNNER_EVIDENCE_REPORT_COVERAGE_H
#define VOUCH_RUNNER_EVIDENCE_REPORT_COVERAGE_H

#include "runner/evidence/report_text.h"

/* The gaps of r: choices no decode step ran; -1 when r has no choices (no coverage records, or only
 * paths that do not enumerate) or on out of memory. */
int coverage_gaps(const vresults *r);
/* One summary line: the choices and the gaps, or that the run has no coverage records (an older run, or a
 * plan without a coverage step). b->oom on allocation failure. */
void coverage_summary_md(sbuf *b, const vresults *r);
/* The Markdown table (gaps first, a fixed row cap for the comment); nothing without coverage records. */
void coverage_md(sbuf *b, const vresults *r);
/* The HTML section: every row, or that the run has no coverage records. */
void coverage_html(sbuf *b, const vresults *r);

#endif
