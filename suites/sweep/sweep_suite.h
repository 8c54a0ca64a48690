/* vouch sweep: throughput sweeps over batch x context (x TP) of one or more decode paths. */
#ifndef VOUCH_SUITES_SWEEP_SWEEP_SUITE_H
#define VOUCH_SUITES_SWEEP_SWEEP_SUITE_H

#include "common/vstatus.h"
#include "suites/engine/estimate.h"
#include "suites/engine/record.h"
#include "suites/engine/sink.h"

/* `vouch sweep ARGS` (argv[0] "sweep"): the in-process sweep (a suite on the driver) or, with --server,
 * cmd_sweep_server; records go to `sink` (NULL: a sweep on its own). Returns the exit code. */
int cmd_sweep(int argc, char **argv, const vrec_sink *sink);
/* vouch sweep's plan-step check (runner/cli/commands.h vcommand.check): the in-process sweep's options,
 * or with --server the served sweep's (sweep_server_check_args; no request is sent). */
vstatus sweep_check_args(int argc, char **argv);
/* vouch sweep's plan-step estimate (runner/cli/commands.h vcommand.estimate): the in-process sweep's
 * (vsuite_estimate); a served sweep (--server) is not estimated (unsupported). */
vstatus sweep_estimate_args(int argc, char **argv, const dry_env *env, dry_step *out);
/* "K=7,AL=6" (or lower case): K draft tokens verified per step, AL kept; 0 <= K <= 64, 1 <= AL <= K+1. */
vstatus sweep_spec_parse(const char *s, int *k, int *al);
/* `vouch sweep --server URL ...`: served throughput of an OpenAI-compatible server (sweep_server.c); each
 * level's record goes to `sink` as it finishes (NULL: only --json). Returns the exit code. */
int cmd_sweep_server(int argc, char **argv, const vrec_sink *sink);
vstatus sweep_server_check_args(int argc, char **argv);
/* Appends the records of a --peer file ({"records": [...]}, the --json format) to *recs
 * ([*n] used of [*cap], grown as needed); errors name the file and the record. */
vstatus sweep_read_peer(const char *file, vrecord ***recs, int *n, int *cap);

#endif
