/* `vouch generate` (and `vouch trace`, which is generate --trace): decode a batch of prompts on a
 * path (runner/cli/cmd_generate.c). */
#ifndef VOUCH_RUNNER_CLI_CMD_GENERATE_H
#define VOUCH_RUNNER_CLI_CMD_GENERATE_H

#include "common/vstatus.h"

/* `vouch generate ARGS` (argv[0] "generate"): the process exit code. */
int cmd_generate(int argc, char **argv);
/* vouch generate's plan-step check (runner/cli/commands.h vcommand.check): parses and checks argv,
 * opening nothing. Error: the usage error, naming the option. */
vstatus generate_check_args(int argc, char **argv);

#endif
