/* vouch eval SUITE: the ground-truth evals, each a suite on the driver (suites/engine/suite.h). */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "suites/engine/cli.h"
#include "suites/evals/eval_cmd.h"
#include "suites/evals/evals_suite.h"

/* Every eval, named by the word after `vouch eval` (the end of its vsuite.name). Adding an eval:
 * its file (a const vsuite named "eval WORD") and one line here. */
static const vsuite *const evals[] = {
    &vsuite_mrcr,
    &vsuite_chain,
};
enum { N_EVALS = sizeof evals / sizeof evals[0] };

/* The evals on real text over servers (no model: --server [--ref-server] --dataset FILE). One whose
 * word is also a constructed eval's runs when --dataset is given; one whose word is its own is found
 * by that word. Adding one: its folder (a const vsuite named "eval WORD", no_model) and one line here. */
extern const vsuite vsuite_mrcr_dataset, vsuite_aime;
static const vsuite *const text_evals[] = {
    &vsuite_mrcr_dataset,
    &vsuite_aime,
};
enum { N_TEXT_EVALS = sizeof text_evals / sizeof text_evals[0] };

/* The text eval for `word` when argv[1..argc) holds --dataset, else s (the constructed one). */
static const vsuite *dataset_mode(const vsuite *s, int argc, char **argv) {
  bool dataset = false;
  for (int i = 2; i < argc; i++) dataset |= !strcmp(argv[i], "--dataset") || !strncmp(argv[i], "--dataset=", 10);
  for (int i = 0; s && dataset && i < N_TEXT_EVALS; i++)
    if (!strcmp(text_evals[i]->name, s->name)) return text_evals[i];
  return s;
}

static const char *eval_word(const vsuite *s) { return s->name + strlen("eval "); }

/* The i-th word of `vouch eval`: the constructed evals' words, then the text evals' that are their own
 * (no constructed eval of that name); NULL past the last. *s gets its suite. */
static const char *nth_word(int i, const vsuite **s) {
  for (int j = 0; j < N_EVALS; j++)
    if (i-- == 0) return eval_word(*s = evals[j]);
  for (int j = 0; j < N_TEXT_EVALS; j++) {
    bool own = true;
    for (int k = 0; k < N_EVALS; k++) own &= strcmp(text_evals[j]->name, evals[k]->name) != 0;
    if (own && i-- == 0) return eval_word(*s = text_evals[j]);
  }
  return NULL;
}

/* The eval named `word`, NULL when there is none (with the known words in known[n]). */
static const vsuite *find_eval(const char *word, char *known, size_t n) {
  known[0] = 0;
  const vsuite *s;
  const char *w;
  for (int i = 0; (w = nth_word(i, &s)); i++) {
    if (!strcmp(word, w)) return s;
    snprintf(known + strlen(known), n - strlen(known), "%s%s", i ? ", " : "", w);
  }
  return NULL;
}

/* The eval `vouch eval ARGS` runs into *s (NULL: --help, which cmd_eval answers with the usage).
 * Error: no eval named, or an unknown one (the known words listed). */
static vstatus pick_eval(int argc, char **argv, const vsuite **s) {
  char known[128];
  *s = NULL;
  if (argc < 2) return VERR("vouch eval: which eval? (%s)", (find_eval("", known, sizeof known), known));
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) return V_OK;
  *s = dataset_mode(find_eval(argv[1], known, sizeof known), argc, argv);
  if (!*s) return VERR("unknown subcommand 'eval %s' (%s)", argv[1], known);
  return V_OK;
}

vstatus eval_check_args(int argc, char **argv) {
  const vsuite *s;
  VTRY(pick_eval(argc, argv, &s));
  return s ? vsuite_check_args(s, argc - 1, argv + 1) : V_OK;
}

vstatus eval_estimate_args(int argc, char **argv, const dry_env *env, dry_step *out) {
  const vsuite *s;
  vest_clear(out);
  VTRY(pick_eval(argc, argv, &s));
  if (!s) return VUNSUPPORTED("eval %s: nothing to estimate", argv[1]);
  return vsuite_estimate(s, argc - 1, argv + 1, env, out);
}

int cmd_eval(int argc, char **argv, const vrec_sink *sink) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    FILE *f = argc < 2 ? stderr : stdout;
    fputs("usage: vouch eval ", f);
    const vsuite *t;
    const char *w;
    for (int i = 0; (w = nth_word(i, &t)); i++) fprintf(f, "%s%s", i ? "|" : "", w);
    fprintf(f, " ...   (vouch eval %s --help)\n"
               "  Ground-truth evals on constructed checkpoints (vouch model synth --preset recall-mrcr|recall-chain).\n"
               "  vouch eval mrcr --dataset FILE --server URL [--ref-server URL]: public MRCR rows asked of a server.\n",
            eval_word(evals[0]));
    for (int i = N_EVALS; (w = nth_word(i, &t)); i++)
      fprintf(f, "  vouch eval %s --dataset FILE --server URL [--ref-server URL] ...   (vouch eval %s --help)\n", w, w);
    return argc < 2 ? EXIT_USAGE : EXIT_OK;
  }
  char known[128];
  const vsuite *s = dataset_mode(find_eval(argv[1], known, sizeof known), argc, argv);
  if (s) return vsuite_main(s, argc - 1, argv + 1, sink);
  VERR("unknown subcommand 'eval %s' (%s)", argv[1], known);
  cli_print_error(NULL);
  return EXIT_USAGE;
}
