/* A suite on the one driver (issue 20; the shape of nccl-tests' testEngine/testColl): a struct of
 * data and functions per suite, plugged into one driver, vsuite_main (suites/engine/driver.c).
 *
 * The suite provides its name and usage, parses its own options into its own typed state, and
 * says what its cases are, how to run one, the records of a finished case and its report. The
 * driver owns what every suite repeats: --help, --model, --paths, --path-lib, --seed, --threads,
 * --expect-fallback, --json (and, for a suite of constructed checkpoints, --model-seed, --cos, --gap,
 * --answer-logit; with vsuite.layers, --layers), checking the paths, opening the model (with a
 * host copy when a path reads host weights), running the cases in order with each case's records
 * stored in the run sink before the next case starts (veng, eng_flush to vsuite_ctx.sink), the verdict
 * and the exit code.
 * A suite with no_model (kernels) gets only --seed and --json; one with its own --json format
 * (kernels, sweep) writes it (write_json).
 *
 * vsuite_main(s, argc, argv, sink) (argv[0]: the suite's last command word; sink: the run's, NULL on its own):
 *   init; option for each argument that is not the driver's; the paths (--paths split, or the
 *   suite's own `paths`) parsed once into specs (vpath_spec_parse: registered paths, errors naming
 *   --paths); options_done; paths_done; the model opens;
 *   check; prepare; the planned records of every case (plan: under `vouch run` stored as not_run);
 *   for each case c: kept(c) when a resumed run holds all of its planned records (skip_stored),
 *   else run(c), record(c), flush (its records replace their not_run ones), print_case(c);
 *   finish (records made of every case, flushed); print; the verdict (the records', and passed);
 *   "verdict: pass|FAIL" (unless quiet_verdict); every record to --json FILE (or write_json); free.
 * Exit codes (suites/engine/cli.h): EXIT_USAGE for a bad option (found up to paths_done, or by check), and
 * with the usage text on stderr when no path is given (default_paths NULL, or `paths` names none);
 * EXIT_CHECK_FAILED when the model does not open, prepare, run, record or finish fails, a record of
 * the invocation has status fail or error, a case made none or only part of its planned records, or
 * passed says no (the verdict), or --json cannot be written; EXIT_INTERRUPTED when SIGINT/SIGTERM stopped it between
 * cases (no report, no --json); else EXIT_OK.
 * A resumed run (`vouch run --resume`) runs the cases again, and eng_flush does not store a record
 * the run already holds; a suite with skip_stored (its cases do not feed each other: not the evals,
 * which compare every path with the first) has the cases the run holds left out before they run.
 * vsuite_estimate(s, argc, argv, env, out) (`vouch run --dry-run` and the check before a plan runs):
 *   the same option parsing as vsuite_main (init; option; the paths, not checked against the
 *   registry, since a dry run plans for a GPU the build may lack; options_done), the model's config
 *   read (ds_spec_config of --model and --layers; no weights), then estimate prices the suite's own
 *   parsed state with the cost model of suites/engine/estimate.h.
 * Adding a suite: one file defining its `const vsuite`, one table line (runner/cli/commands.c for a
 * command of its own, suites/evals/eval_cmd.c for an eval), and its estimate function beside its
 * options in that file (how it opens its paths, with what max_seq and max_ctx, and how many steps it
 * runs): the dry run has no other knowledge of a suite. */
#ifndef VOUCH_SUITES_ENGINE_SUITE_H
#define VOUCH_SUITES_ENGINE_SUITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/vstatus.h"
#include "model/construct.h"
#include "model/model.h"
#include "suites/engine/engine.h"
#include "suites/engine/sink.h"
#include "suites/engine/estimate.h"
#include "suites/paths/spec.h"

/* What the driver hands the suite's functions from check on: the shared options and the model. */
typedef struct {
  const vpath_spec *paths;        /* [n_paths] --paths (or the suite's own paths), parsed once (vpath_spec_parse):
                                   * each a registered path; .name the text as given, for records */
  int n_paths;
  bool paths_given;               /* --paths was on the command line */
  uint64_t seed;                  /* --seed (default 1, or 0 with vsuite.seed_zero): the suite's prompts and draws */
  int n_threads;                  /* --threads (default 0: the path's own choice): CPU threads of host paths */
  bool expect_fallback;           /* --expect-fallback: a path under test that hands over to another path is
                                   * accepted (vpath_opts.expect_fallback; the records still name it); a suite
                                   * copies it into the vpath_opts of every path it opens */
  const ds_model *model;          /* --model, open (NULL for a suite with no_model) */
  double open_s;                  /* seconds the model took to open (for print) */
  const construct_layout *layout; /* the constructed model's layout (vsuite.constructed), else NULL */
  double wall_s;                  /* seconds from the first case's start to the last one's end (for print) */
  const vrec_sink *sink;          /* the run the records go to (`vouch run`), NULL: a suite on its own
                                     (records only in --json); a suite hands it on (rec_note_server) */
} vsuite_ctx;

/* The --help lines of the driver's --expect-fallback, for a suite's usage text that opens paths. */
#define VSUITE_EXPECT_FALLBACK_HELP                                                                     \
  "  --expect-fallback: accept a path under test that hands its work over to another path (latency on\n" \
  "  a config its kernels cannot run: cuda-ref); without it such a path's cases are errors. Records name\n" \
  "  what each path ran and every fallback (docs/verdicts.md).\n"

/* What the driver hands a suite's estimate function: the shared options as parsed, no model open. */
typedef struct {
  const char *const *paths;       /* [n_paths] --paths (or the suite's default, or its own `paths`), not
                                     checked against the registry; n_paths <= VEST_MAX_PATHS */
  int n_paths;
  const char *model;              /* --model as given (or the suite's default); NULL with no_model */
  int layers;                     /* --layers (0: every layer) */
  uint64_t seed;                  /* --seed */
} vsuite_est_ctx;

typedef struct vsuite vsuite;
struct vsuite {
  const char *name;          /* the command words after `vouch` ("eval mrcr"): usage, errors */
  const char *usage;         /* --help text (stdout) */
  const char *default_model; /* --model when not given */
  const char *default_paths; /* --paths when not given (NULL: --paths is required) */
  bool constructed;          /* reads a constructed checkpoint (model/construct.h): the driver takes
                                --model-seed (default 0) and --cos/--gap/--answer-logit, and opens the
                                model with its layout (vsuite_ctx.layout) */
  size_t state_size;         /* bytes of the suite's state, its typed options and results (zeroed) */
  /* Sets the option defaults in st. */
  void (*init)(void *st);
  /* If argv[*i] is one of the suite's options (cli_opt), stores it in st, advances *i past its
   * value and returns true; a bad value goes to *err (it names the option). */
  bool (*option)(void *st, int argc, char **argv, int *i, vstatus *err);
  /* After every option: parses what waited for the last value (lists). Error names the option. */
  vstatus (*options_done)(void *st);
  /* Checks the options against the open model (a usage error); NULL: nothing to check. */
  vstatus (*check)(void *st, const vsuite_ctx *x);
  /* Before the first case: what the run needs (the results' storage). *done = true: the work is
   * done without cases (exit 0, no report). */
  vstatus (*prepare)(void *st, const vsuite_ctx *x, bool *done);
  /* How many cases prepare set up. */
  int (*n_cases)(const void *st, const vsuite_ctx *x);
  /* Runs case c (0-based, in order) into st. An error ends the invocation; a case that cannot
   * run on its path is a result (a record of status not_supported or error), not an error. A suite
   * that goes on after a case broke (diverge, features) prints the error itself, returns V_OK and
   * makes no records for it: its planned records stay not_run and the verdict is FAIL. */
  vstatus (*run)(void *st, const vsuite_ctx *x, int c);
  /* Makes case c's records in recs (eng_new, finalized); the driver stores them. */
  vstatus (*record)(void *st, const vsuite_ctx *x, int c, veng *recs);
  /* The report, after the last case and finish (before the verdict line), from st and recs (every
   * record of the invocation, finish's included); NULL: none. */
  void (*print)(const void *st, const vsuite_ctx *x, const veng *recs);
  /* Frees what st holds (st itself is the driver's); called on every exit after init. */
  void (*free)(void *st);

  /* ---- optional: what diverge and features need (zero / NULL: as for the evals) ---- */
  bool layers;               /* the driver takes --layers N (1..1000; default all) and opens the model
                                with its first N layers */
  bool quiet_verdict;        /* no "verdict:" line: the report gives each case's status (the exit code
                                is the verdict as ever) */
  bool skip_stored;          /* a resumed run leaves out a case whose planned records it holds (kept);
                                only for cases that do not feed each other */
  const char *case_noun;     /* what the cases are called in messages ("points"); NULL: "cases" */
  /* The paths the suite opens, named by its own options (features: --ref, --path, --floor): the
   * driver then takes no --paths. *n = 0 when a required one is missing (the usage goes to stderr,
   * EXIT_USAGE). The array is st's. NULL: --paths (default_paths). */
  vstatus (*paths)(void *st, const char *const **paths, int *n);
  /* After options_done, before the model opens: checks the path list (how many; an error names
   * the option and is a usage error). */
  vstatus (*paths_done)(void *st, const vpath_spec *paths, int n);
  /* Case c's records as they will be made (suite, case_id, path and the parameters known before
   * the case runs), in recs (eng_new); called for every case after prepare. Under `vouch run` the
   * driver stores them with status not_run, so an interrupted run shows the cases it did not
   * finish; a case that finishes without making all of them fails the verdict (their not_run
   * copies stay). A case's records beyond these are stored as usual. NULL: no planned records. */
  vstatus (*plan)(void *st, const vsuite_ctx *x, int c, veng *recs);
  /* ---- optional: what kernels and sweep need (zero / NULL: as for the evals) ---- */
  bool no_model;             /* the suite runs no model (kernels): the driver takes no --model, --paths,
                                --path-lib or --threads, and opens nothing (vsuite_ctx.model NULL) */
  bool seed_zero;            /* --seed defaults to 0, not 1 (kernels, sweep: their seeds before the driver) */
  /* After the last case, before print: what is made of every case together (sweep: the peers'
   * records merged, speedups over the baseline, the rounds' agreement); records it adds to recs
   * are stored by the driver. Error: EXIT_CHECK_FAILED, no report. */
  vstatus (*finish)(void *st, const vsuite_ctx *x, veng *recs);
  /* The suite's part of the verdict, after print: false fails it (sweep --require-agreement) and
   * says why on stderr. NULL: the records alone. */
  bool (*passed)(const void *st, const vsuite_ctx *x);
  /* Writes --json FILE in the suite's own format (kernels, sweep); NULL: {"records": [...]}. */
  vstatus (*write_json)(const void *st, const vsuite_ctx *x, const veng *recs, const char *file);
  /* Case c is not run: a resumed run holds its planned records (skip_stored); e.g. prints a line. */
  void (*kept)(void *st, const vsuite_ctx *x, int c);
  /* After case c's records are stored (so a printed case is in the run): its lines of the report. */
  void (*print_case)(void *st, const vsuite_ctx *x, int c);
  /* The suite that runs these arguments when it is another one: one command word, two suites told
   * apart by an option (diverge --ref-server: suites/diverge/diverge_text.c, server against server on
   * text, no model). argv as vsuite_main's. NULL (or returning NULL): this suite. */
  const vsuite *(*mode)(int argc, char **argv);
  /* ---- the dry run ---- */
  /* What the invocation will need, from st as options_done left it (suites/engine/estimate.h): the
   * paths it opens (vest_open_set with each open's max_seq and max_ctx, vest_name_paths) and its
   * expected seconds (vest_step_s ...), into X->out. X->cfg is the model's config (NULL with
   * no_model). Error: an option the estimate cannot price, naming it. NULL: the suite is not
   * estimated (the plan's table says so; the step still runs). */
  vstatus (*estimate)(const void *st, const vsuite_est_ctx *x, vest *X);
};

/* Runs suite s as a command: argv[0] is its last command word; its records go to `sink` (the run
 * `vouch run` is executing) as each case finishes, or nowhere but --json when sink is NULL. Returns
 * the exit code. */
int vsuite_main(const vsuite *s, int argc, char **argv, const vrec_sink *sink);
/* Parses and checks argv as vsuite_main would up to opening the model (options, the paths against
 * the registry, options_done, paths_done; for a suite with no_model, check too), and runs nothing: what `vouch run` asks of every plan
 * step before the first one runs. A --path-lib is loaded (as the step would). Error: the usage
 * error vsuite_main would print, naming the option. */
vstatus vsuite_check_args(const vsuite *s, int argc, char **argv);
/* Estimates the invocation argv of suite s (argv[0]: its last command word) on env into out (zeroed
 * first, fits until shown otherwise): parses argv as vsuite_main does up to options_done, opens no
 * model (reads its config), and calls s->estimate. Error: a usage error naming the option, the
 * model's config that cannot be read ("WORD: --model SPEC: ..."), more than VEST_MAX_PATHS paths,
 * or unsupported when s has no estimate. */
vstatus vsuite_estimate(const vsuite *s, int argc, char **argv, const dry_env *env, dry_step *out);

#endif
