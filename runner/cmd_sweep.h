/* vouch sweep: throughput sweeps over batch x context (x TP) of one or more decode paths. */
#ifndef VOUCH_RUNNER_CMD_SWEEP_H
#define VOUCH_RUNNER_CMD_SWEEP_H

#include "runner/record.h"

int cmd_sweep(int argc, char **argv);
/* Appends the records of a --peer file ({"records": [...]}, the --json format) to *recs
 * ([*n] used of [*cap], grown as needed); errors name the file and the record. */
vstatus sweep_read_peer(const char *file, vrecord ***recs, int *n, int *cap);

#endif
