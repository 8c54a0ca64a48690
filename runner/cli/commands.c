/* The table of vouch commands (runner/cli/commands.h). */
#include "runner/cli/commands.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "suites/engine/cli.h"
#include "runner/cli/cmd_ab.h"
#include "suites/coverage/coverage_suite.h"
#include "suites/diverge/diverge_suite.h"
#include "suites/evals/eval_cmd.h"
#include "suites/features/features_suite.h"
#include "runner/cli/cmd_evidence.h"
#include "runner/cli/cmd_generate.h"
#include "runner/cli/cmd_model.h"
#include "suites/kernels/kernels_suite.h"
#include "runner/plan/cmd_run.h"
#include "runner/serve/cmd_serve.h"
#include "suites/sweep/sweep_suite.h"
#include "runner/cli/cmd_sweep_ab.h"

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
  return cmd_generate(argc + 1, args, NULL); /* trace is no plan step: a decode on its own */
}

/* `vouch run`: the plan runner (runner/plan/cmd_run.h) with this table's plan steps. */
static int cmd_run_steps(int argc, char **argv) { return cmd_run(argc, argv, &vcommands_plan_steps); }

/* {name, fn (no plan step), step (a plan step's own entry point), suite (a plan step on the driver), help,
 * check (a step's own option check)} */
const vcommand vcommands[] = {
    {"model", cmd_model, NULL, NULL, "synth | info: synthetic checkpoints and architecture facts", NULL, NULL},
    {"generate", NULL, cmd_generate, NULL, "decode a batch of prompts on a path (cpu-ref, cuda-ref, ...)",
     generate_check_args, generate_estimate_args},
    {"trace", cmd_trace, NULL, NULL, "generate, printing which op variants ran per step and every fallback", NULL, NULL},
    {"kernels", NULL, NULL, &vsuite_kernels, "op numerics: every op variant on every path against float64 oracles", NULL,
     NULL},
    {"diverge", NULL, NULL, &vsuite_diverge, "teacher-forced divergence of paths: KLD, top-token agreement, max |dlogit|",
     NULL, NULL},
    {"eval", NULL, cmd_eval, NULL, "mrcr | chain: ground-truth evals on constructed checkpoints", eval_check_args,
     eval_estimate_args},
    {"features", NULL, NULL, &vsuite_features, "full context, sampling, structured output, speculative verify, stop tokens",
     NULL, NULL},
    {"sweep", NULL, cmd_sweep_any, NULL, "throughput sweeps over batch x context (x TP) of decode paths, or of a server (--server)",
     sweep_any_check_args, sweep_estimate_args},
    {"coverage", NULL, NULL, &vsuite_coverage, "the (op, variant) pairs each path's own rules can pick, for the report's coverage table",
     NULL, NULL},
    {"serve", cmd_serve, NULL, NULL, "OpenAI-compatible HTTP server over a path, with continuous batching", NULL, NULL},
    {"run", cmd_run_steps, NULL, NULL, "run a plan's suites (default: smoke) into a result directory and bundle it", NULL,
     NULL},
    {"bundle", cmd_bundle, NULL, NULL, "pack a result directory into a deterministic NAME.vouch.tar.gz", NULL, NULL},
    {"verify", cmd_verify, NULL, NULL, "check a bundle's hashes, schema and every derived figure", NULL, NULL},
    {"compare", cmd_compare, NULL, NULL, "baseline vs candidate: ratios, confidence intervals, verdicts", NULL, NULL},
    {"report", cmd_report, NULL, NULL, "Markdown (one GitHub comment) and HTML with SVG charts", NULL, NULL},
    {"publish", cmd_publish, NULL, NULL, "post or update the PR comment and commit status", NULL, NULL},
    {"history", cmd_history, NULL, NULL, "past runs in the local store; baseline lookup", NULL, NULL},
    {"ab", cmd_ab, NULL, NULL, "base vs head: worktrees, same-option builds, interleaved runs, one comparison", NULL, NULL},
};
const int vcommands_n = (int)(sizeof vcommands / sizeof vcommands[0]);

const vcommand *vcommand_find(const char *name) {
  assert(name);
  for (int i = 0; i < vcommands_n; i++)
    if (!strcmp(vcommands[i].name, name)) return &vcommands[i];
  return NULL;
}

vstatus vcommand_check(const vcommand *c, int argc, char **argv) {
  assert(c);
  return c->suite ? vsuite_check_args(c->suite, argc, argv) : c->check ? c->check(argc, argv) : V_OK;
}

vstatus vcommand_estimate(const vcommand *c, int argc, char **argv, const dry_env *env, dry_step *out) {
  assert(c);
  if (c->suite) return vsuite_estimate(c->suite, argc, argv, env, out);
  if (c->estimate) return c->estimate(argc, argv, env, out);
  vest_clear(out);
  return VUNSUPPORTED("%s: no estimate for this suite", c->name);
}

int vcommand_run(const vcommand *c, int argc, char **argv, const vrec_sink *sink) {
  assert(c && (c->fn != NULL) + (c->step != NULL) + (c->suite != NULL) == 1);
  return c->fn ? c->fn(argc, argv) : c->step ? c->step(argc, argv, sink) : vsuite_main(c->suite, argc, argv, sink);
}

/* vplan_steps over the table: a plan step is a command with a step entry point or a suite. */
static bool step_known(const char *suite) {
  const vcommand *c = vcommand_find(suite);
  return c && (c->step || c->suite);
}
static vstatus step_check(const char *suite, int argc, char **argv) {
  return vcommand_check(vcommand_find(suite), argc, argv);
}
static int step_run(const char *suite, int argc, char **argv, const vrec_sink *sink) {
  return vcommand_run(vcommand_find(suite), argc, argv, sink);
}
static vstatus step_estimate(const char *suite, int argc, char **argv, const dry_env *env, dry_step *out) {
  return vcommand_estimate(vcommand_find(suite), argc, argv, env, out);
}

const vplan_steps vcommands_plan_steps = {.known = step_known, .check = step_check, .run = step_run,
                                          .estimate = step_estimate};
