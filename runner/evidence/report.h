/* `vouch report`: Markdown that fits one GitHub comment at any plan size (verdict, counts,
 * each failing check with its numbers, the speed-up per batch x context with its interval
 * and % of roofline, eval scores per bin, what did not run and why; links to the rest) and
 * a self-contained HTML page with one SVG chart per question (speed-up vs batch, a line per
 * context; tokens/s and % roofline vs batch; eval score vs bin; divergence per point) and
 * every record. */
#ifndef VOUCH_RUNNER_EVIDENCE_REPORT_H
#define VOUCH_RUNNER_EVIDENCE_REPORT_H

#include <stddef.h>

#include "runner/evidence/bundle.h"

#define REPORT_MARKER "<!-- vouch-report -->"
#define REPORT_MD_LIMIT 65000 /* GitHub comment bodies stop at 65536 characters */

/* Where the comment points for everything it leaves out (either may be NULL). */
typedef struct {
  const char *bundle_url; /* the bundle (.vouch.tar.gz) */
  const char *html_url;   /* the HTML report (an artifact or release asset) */
} report_links;

/* links may be NULL. The text starts with REPORT_MARKER; strlen(*out) < limit. */
vstatus report_markdown(const vresults *r, const report_links *links, size_t limit, char **out);
/* The HTML page; its script sets data-chart-check="ok N" on <body> once every chart has
 * drawn marks (or "empty: TITLE"), and data-script-error on a script error. */
vstatus report_html(const vresults *r, char **out);

#endif
