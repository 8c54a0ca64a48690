/* vouch eval SUITE: the ground-truth evals, each a suite on the driver (runner/suite.h). */
#include <stdio.h>
#include <string.h>

#include "runner/cli.h"
#include "runner/cmd_evals.h"
#include "runner/suite_evals.h"

/* Every eval, named by the word after `vouch eval` (the end of its vsuite.name). Adding an eval:
 * its file (a const vsuite named "eval WORD") and one line here. */
static const vsuite *const evals[] = {
    &vsuite_mrcr,
    &vsuite_chain,
};
enum { N_EVALS = sizeof evals / sizeof evals[0] };

static const char *eval_word(const vsuite *s) { return s->name + strlen("eval "); }

int cmd_eval(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    FILE *f = argc < 2 ? stderr : stdout;
    fputs("usage: vouch eval ", f);
    for (int i = 0; i < N_EVALS; i++) fprintf(f, "%s%s", i ? "|" : "", eval_word(evals[i]));
    fprintf(f, " ...   (vouch eval %s --help)\n"
               "  Ground-truth evals on constructed checkpoints (vouch model synth --preset recall-mrcr|recall-chain).\n",
            eval_word(evals[0]));
    return argc < 2 ? EXIT_USAGE : EXIT_OK;
  }
  char known[128] = "";
  for (int i = 0; i < N_EVALS; i++) {
    if (!strcmp(argv[1], eval_word(evals[i]))) return vsuite_main(evals[i], argc - 1, argv + 1);
    snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", eval_word(evals[i]));
  }
  VERR("unknown subcommand 'eval %s' (%s)", argv[1], known);
  cli_print_error(NULL);
  return EXIT_USAGE;
}
