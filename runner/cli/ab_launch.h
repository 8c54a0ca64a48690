/* `vouch ab --launch 'CMD {port}' [--build CMD]`: the repository is a server's (an inference engine's);
 * each side's worktree runs --build, then one `vouch run` of the plan (default served) judges the
 * server started from the head's worktree (`server`) against the base's (`ref`), both started once
 * for the plan (runner/plan/plan_servers.h). */
#ifndef VOUCH_RUNNER_CLI_AB_LAUNCH_H
#define VOUCH_RUNNER_CLI_AB_LAUNCH_H

#include "runner/cli/ab_side.h"

/* Runs o->build_cmd (sh) in s's worktree, its output to s->build_log; nothing when there is none.
 * Error naming the side and the log when it exits non-zero. */
vstatus ab_launch_build(ab_opts *o, side *s);
/* One run of o->plan with this vouch into o->dir/served (log logs/served.log): server = head's launch,
 * ref = base's, o->sets after them, ab_rounds=o->rounds when --rounds was given. Adds the run's entry
 * ("served": command, exit code, verdict, bundle sha256) to ab and its exit code to *plan_rc. Error
 * when the run could not start, wrote no result directory, or exited other than 0 or 1. */
vstatus ab_launch_run(ab_opts *o, const side *b, const side *h, cJSON *ab, int *plan_rc);

#endif
