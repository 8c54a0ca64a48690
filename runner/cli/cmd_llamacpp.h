/* vouch model export --gguf and vouch model peer-diverge (runner/cli/cmd_llamacpp.c). */
#ifndef VOUCH_RUNNER_CLI_CMD_LLAMACPP_H
#define VOUCH_RUNNER_CLI_CMD_LLAMACPP_H

int cmd_model_export(int argc, char **argv);
int cmd_model_peer_diverge(int argc, char **argv);

#endif
