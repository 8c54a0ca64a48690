/* CLI entry points for the evidence chain: argv[0] is the command name; each returns
 * the exit code (0 ok, 1 check failed / regression / publish failed, 2 usage or input). */
#ifndef VOUCH_RUNNER_CLI_CMD_EVIDENCE_H
#define VOUCH_RUNNER_CLI_CMD_EVIDENCE_H

int cmd_bundle(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_publish(int argc, char **argv);
int cmd_history(int argc, char **argv);

#endif
