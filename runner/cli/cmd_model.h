/* `vouch model synth | info | export | peer-diverge`: synthetic checkpoints and architecture facts
 * (runner/cli/cmd_model.c; the llama.cpp halves are runner/cli/cmd_llamacpp.h). */
#ifndef VOUCH_RUNNER_CLI_CMD_MODEL_H
#define VOUCH_RUNNER_CLI_CMD_MODEL_H

/* `vouch model WORD ARGS` (argv[0] "model"): the process exit code. */
int cmd_model(int argc, char **argv);

#endif
