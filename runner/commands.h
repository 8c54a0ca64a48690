/* Entry points of the vouch subcommands: argv[0] is the command name; they return the
 * process exit code (runner/cli.h). */
#ifndef VOUCH_RUNNER_COMMANDS_H
#define VOUCH_RUNNER_COMMANDS_H

int cmd_model(int argc, char **argv);
int cmd_generate(int argc, char **argv);

#endif
