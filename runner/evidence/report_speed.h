/* The report's served A/B table (runner/evidence/report_speed.c, issue 38): the records of
 * `vouch sweep --server A --ref-server B` as a plan step (suite sweep, case ids sweep-ab/LEVEL/FIGURE,
 * runner/cli/sweep_ab_records.c) as one row per level: head / base of the key figures with their
 * intervals, the named regressions, and each side's spec-decode acceptance. */
#ifndef VOUCH_RUNNER_EVIDENCE_REPORT_SPEED_H
#define VOUCH_RUNNER_EVIDENCE_REPORT_SPEED_H

#include "runner/evidence/report_text.h"

/* The Markdown section (a fixed row cap for the comment); nothing without sweep-ab records. b->oom on
 * allocation failure. */
void served_ab_md(sbuf *b, const vresults *r);
/* The HTML section: every row; nothing without sweep-ab records. */
void served_ab_html(sbuf *b, const vresults *r);

#endif
