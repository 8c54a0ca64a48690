/* The report's "What ran" section (runner/evidence/report_ran.c): per path, the (op, variant) pairs its
 * trace says ran, over the records that name them (`ran`), and the hand-overs to another path. */
#ifndef VOUCH_RUNNER_EVIDENCE_REPORT_RAN_H
#define VOUCH_RUNNER_EVIDENCE_REPORT_RAN_H

#include "runner/evidence/report_text.h"

/* Appends the section to b (nothing when no record names what ran; b->oom on allocation failure). */
void ran_md(sbuf *b, const vresults *r);

#endif
