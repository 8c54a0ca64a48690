/* Proof that the code under test ran (issue 37): the wrapper vpath_open puts around every path it
 * opens. It keeps the path's own tally of what ran (common/trace.h, memory O(distinct events)), teed
 * to the caller's trace, and refuses a hand-over to another path (a fallback event) that the caller's
 * vpath_opts.expect_fallback does not declare: at open (vpath_open fails) and in any step (that
 * forward fails). Every call of the path goes through the wrapper's ops, so no caller can bypass the
 * check. Internal to suites/paths/ (paths.c); callers read the tally through vpath_ran (paths.h). */
#ifndef VOUCH_SUITES_PATHS_RAN_H
#define VOUCH_SUITES_PATHS_RAN_H

#include "common/path.h"

/* A wrapper's state before the path opens: its tally (teed to o->trace), for the open to record into.
 * NULL on out of memory (error set). */
void *ran_new(const vpath_opts *o, const char *name);
/* The tally the path must record into (vpath_opts.trace of its open). */
vtrace *ran_tally(void *w);
/* After the path opened into p (p->ops, p->state its own): wraps it, so p->ops are the wrapper's and
 * p->state is w. Then, unless expect_fallback, a fallback the tally holds closes the path (p zeroed) and
 * is V_ERR "fell back to TO at OP (REASON): ... --expect-fallback". V_ERR on out of memory (the path
 * closed). w is freed on error. */
vstatus ran_wrap(void *w, vpath *p);
/* Frees a wrapper state that ran_wrap never took (the open failed). */
void ran_free(void *w);
/* The tally of p when p is wrapped (vpath_open), NULL otherwise. */
vtrace *ran_of(const vpath *p);

#endif
