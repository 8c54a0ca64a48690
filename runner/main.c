/* vouch: evaluation runner for LLM decode paths. Dispatches subcommands. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner/cli.h"
#include "runner/cmd_ab.h"
#include "runner/cmd_evals.h"
#include "runner/cmd_evidence.h"
#include "runner/cmd_kernels.h"
#include "runner/cmd_run.h"
#include "runner/cmd_serve.h"
#include "runner/cmd_sweep.h"
#include "runner/commands.h"
#include "suites/paths.h"
#include "vouch_git_commit.h" /* VOUCH_GIT_COMMIT (build dir, cmake/git_commit.cmake) */

typedef struct {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *help;
} command;

/* `vouch trace ARGS` is `vouch generate --trace ARGS`: the per-step op variants and fallbacks. */
static int cmd_trace(int argc, char **argv) {
  char *args[256];
  if (argc > 254) argc = 254;
  args[0] = argv[0];
  args[1] = "--trace";
  for (int i = 1; i < argc; i++) args[i + 1] = argv[i];
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: vouch trace [generate options]\n  Runs `vouch generate --trace` and prints, per step, which op "
             "variant ran on which path and every fallback with its reason.\n");
      return EXIT_OK;
    }
  return cmd_generate(argc + 1, args);
}

static const command COMMANDS[] = {
    {"model", cmd_model, "synth | info: synthetic checkpoints and architecture facts"},
    {"generate", cmd_generate, "decode a batch of prompts on a path (cpu-ref, cuda-ref, ...)"},
    {"trace", cmd_trace, "generate, printing which op variants ran per step and every fallback"},
    {"kernels", cmd_kernels, "op numerics: every op variant on every path against float64 oracles"},
    {"diverge", cmd_diverge, "teacher-forced divergence of paths: KLD, top-token agreement, max |dlogit|"},
    {"eval", cmd_eval, "mrcr | chain: ground-truth evals on constructed checkpoints"},
    {"features", cmd_features, "full context, sampling, structured output, speculative verify, stop tokens"},
    {"sweep", cmd_sweep, "throughput sweeps over batch x context (x TP) of decode paths, or of a server (--server)"},
    {"serve", cmd_serve, "OpenAI-compatible HTTP server over a path, with continuous batching"},
    {"run", cmd_run, "run a plan's suites (default: smoke) into a result directory and bundle it"},
    {"bundle", cmd_bundle, "pack a result directory into a deterministic NAME.vouch.tar.gz"},
    {"verify", cmd_verify, "check a bundle's hashes, schema and every derived figure"},
    {"compare", cmd_compare, "baseline vs candidate: ratios, confidence intervals, verdicts"},
    {"report", cmd_report, "Markdown (one GitHub comment) and HTML with SVG charts"},
    {"publish", cmd_publish, "post or update the PR comment and commit status"},
    {"history", cmd_history, "past runs in the local store; baseline lookup"},
    {"ab", cmd_ab, "base vs head: worktrees, same-option builds, interleaved runs, one comparison"},
};

static void usage(FILE *f) {
  fprintf(f, "vouch %s (%s): evaluation runner for LLM decode paths\n\nusage: vouch <command> [options]\n\n",
          VOUCH_VERSION, VOUCH_GIT_COMMIT);
  for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
    fprintf(f, "  %-10s %s\n", COMMANDS[i].name, COMMANDS[i].help);
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
  for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
    if (!strcmp(argv[1], COMMANDS[i].name)) return COMMANDS[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "vouch: error: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return EXIT_USAGE;
}
