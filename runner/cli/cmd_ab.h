/* `vouch ab --base REV [--head REV] --plan P [--rounds N] [--out DIR]`: base vs head on one
 * machine. Checks both commits out into git worktrees (libgit2), builds each with the same
 * cmake options, runs the plan with both builds alternating base, head, base, head, and
 * compares the two sides with the samples of every round pooled. Layout of DIR and the exit
 * codes: `vouch ab --help` and docs/contributing-results.md. */
#ifndef VOUCH_RUNNER_CLI_CMD_AB_H
#define VOUCH_RUNNER_CLI_CMD_AB_H

/* argv[0] is the command name; returns the exit code (0 no regression, 1 regression,
 * 2 usage, unknown revision, worktree collision, build or run failure). */
int cmd_ab(int argc, char **argv);

#endif
