/* vouch: evaluation runner for LLM decode paths. Dispatches subcommands. */
#include <stdio.h>
#include <string.h>

#include "runner/cli.h"
#include "runner/commands.h"

typedef struct {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *help;
} command;

static const command COMMANDS[] = {
    {"model", cmd_model, "synth | info: synthetic checkpoints and architecture facts"},
    {"generate", cmd_generate, "decode a batch of prompts on a path (cpu-ref, cuda-ref, ...)"},
};

static void usage(FILE *f) {
  fprintf(f, "vouch %s (%s): evaluation runner for LLM decode paths\n\nusage: vouch <command> [options]\n\n",
          VOUCH_VERSION, VOUCH_GIT_COMMIT);
  for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
    fprintf(f, "  %-10s %s\n", COMMANDS[i].name, COMMANDS[i].help);
  fprintf(f, "\n`vouch <command> --help` describes each command.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) { usage(stderr); return EXIT_USAGE; }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) { usage(stdout); return EXIT_OK; }
  if (!strcmp(argv[1], "--version")) { printf("vouch %s %s\n", VOUCH_VERSION, VOUCH_GIT_COMMIT); return EXIT_OK; }
  for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
    if (!strcmp(argv[1], COMMANDS[i].name)) return COMMANDS[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "vouch: error: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return EXIT_USAGE;
}
