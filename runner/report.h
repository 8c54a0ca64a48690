/* `vouch report`: Markdown that fits one GitHub comment (summary table, failures,
 * collapsible per-suite details) and a self-contained HTML page with inline SVG charts
 * drawn from whatever records exist (metric vs batch/context per path; bar charts for
 * headline metrics without a sweep axis). */
#ifndef VOUCH_RUNNER_REPORT_H
#define VOUCH_RUNNER_REPORT_H

#include <stddef.h>

#include "runner/bundle.h"

#define REPORT_MARKER "<!-- vouch-report -->"
#define REPORT_MD_LIMIT 65000 /* GitHub comment bodies stop at 65536 characters */

/* bundle_url may be NULL. The text starts with REPORT_MARKER; strlen(*out) < limit. */
vstatus report_markdown(const vresults *r, const char *bundle_url, size_t limit, char **out);
vstatus report_html(const vresults *r, char **out);

#endif
