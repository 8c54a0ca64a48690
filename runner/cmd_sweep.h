/* vouch sweep: throughput sweeps over batch x context (x TP) of one or more decode paths. */
#ifndef VOUCH_RUNNER_CMD_SWEEP_H
#define VOUCH_RUNNER_CMD_SWEEP_H

int cmd_sweep(int argc, char **argv);

#endif
