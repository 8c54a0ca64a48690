/* `vouch generate` (and `vouch trace`, which is generate --trace): decode a batch of prompts on a
 * path (runner/cli/cmd_generate.c). */
#ifndef VOUCH_RUNNER_CLI_CMD_GENERATE_H
#define VOUCH_RUNNER_CLI_CMD_GENERATE_H

#include "common/vstatus.h"
#include "suites/engine/sink.h"
#include "suites/engine/estimate.h"

/* `vouch generate ARGS` (argv[0] "generate"): the process exit code. With a sink (a plan step of
 * `vouch run`) the decode is also one record there, with its path trace; NULL: only printed. */
int cmd_generate(int argc, char **argv, const vrec_sink *sink);
/* vouch generate's plan-step check (runner/cli/commands.h vcommand.check): parses and checks argv,
 * opening nothing. Error: the usage error, naming the option. */
vstatus generate_check_args(int argc, char **argv);
/* vouch generate's plan-step estimate (runner/cli/commands.h vcommand.estimate): parses argv as
 * generate does (the path not checked against the registry), reads the model's config and prices
 * the step (suites/engine/estimate.h). Error: a usage error naming the option, or the model's
 * config that cannot be read ("generate: --model SPEC: ..."). */
vstatus generate_estimate_args(int argc, char **argv, const dry_env *env, dry_step *out);

#endif
