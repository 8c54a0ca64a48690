/* vouch: evaluation runner for LLM decode paths. Dispatches subcommands (runner/cli/commands.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "suites/engine/cli.h"
#include "runner/cli/commands.h"
#include "suites/paths/paths.h"
#include "vouch_git_commit.h" /* VOUCH_GIT_COMMIT (build dir, cmake/git_commit.cmake) */

static void usage(FILE *f) {
  fprintf(f, "vouch %s (%s): evaluation runner for LLM decode paths\n\nusage: vouch <command> [options]\n\n",
          VOUCH_VERSION, VOUCH_GIT_COMMIT);
  for (int i = 0; i < vcommands_n; i++) fprintf(f, "  %-10s %s\n", vcommands[i].name, vcommands[i].help);
  fprintf(f, "\n`vouch <command> --help` describes each command.\n");
}

int main(int argc, char **argv) {
  /* OpenMP's default busy-wait turns a shared or oversubscribed machine (CI, a laptop running a
   * build) into a 20-50x slowdown of the CPU path. libgomp reads the policy when it loads, before
   * main, so set it and re-execute once when the user has not chosen one. */
  if (!getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execv("/proc/self/exe", argv);
    /* exec failed (no /proc): carry on with the default policy */
  }
  /* line-buffered even into a pipe or file: a run that is killed keeps every line it printed */
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) { usage(stderr); return EXIT_USAGE; }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) { usage(stdout); return EXIT_OK; }
  if (!strcmp(argv[1], "--version")) {
    printf("vouch %s %s\npaths: %s\n", VOUCH_VERSION, VOUCH_GIT_COMMIT, vpaths_names());
    return EXIT_OK;
  }
  const vcommand *c = vcommand_find(argv[1]);
  if (c) return vcommand_run(c, argc - 1, argv + 1, NULL); /* on its own: no run sink */
  fprintf(stderr, "vouch: error: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return EXIT_USAGE;
}
