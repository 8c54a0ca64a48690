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

/* The served sweep a level at a time, for a driver that interleaves two servers (runner/cli/cmd_sweep_ab.c):
 * open, then sweep_srv_level for each level, close. cmd_sweep_server is this with one server. */
typedef struct sweep_srv sweep_srv;
/* sweep_server_check_args with `url` (not NULL) in place of --server's value. */
vstatus sweep_srv_check(int argc, char **argv, const char *url);
/* Parses cmd_sweep_server's argv (`url`, when not NULL, in place of --server's value: a launched
 * server's), opens --send-times, reads the server's /v1/models (noting it in `sink`'s manifest; NULL:
 * none) and makes the request lines of --trace / --sessions. *w NULL with V_OK: --help was asked.
 * Error (set): *code EXIT_USAGE for a usage error, EXIT_CHECK_FAILED when the server, a file or the
 * sessions fail (the message names it). */
vstatus sweep_srv_open(int argc, char **argv, const char *url, const vrec_sink *sink, sweep_srv **w, int *code);
void sweep_srv_close(sweep_srv *w);
int sweep_srv_levels(const sweep_srv *w);                /* --concurrency levels */
int sweep_srv_concurrency(const sweep_srv *w, int level); /* the concurrency of a level */
const char *sweep_srv_shown(const sweep_srv *w);         /* the server's URL as shown (no credentials) */
const char *sweep_srv_model(const sweep_srv *w);         /* the served model's id */
/* The server's identity into the run `sink`'s manifest (served_conn_note). Error: its. */
vstatus sweep_srv_note(const sweep_srv *w, const vrec_sink *sink);
/* The lines above the table (server, model, workload), and the table's column header after `lead`. */
void sweep_srv_print_intro(const sweep_srv *w);
void sweep_srv_print_columns(const char *lead);
/* Points w at another server (a relaunched one: `url`), the same options. Error: the URL's (served_conn_init). */
vstatus sweep_srv_set_url(sweep_srv *w, const char *url);
/* Runs level `level` once: --warmup requests first when `warm` (cmd_sweep_server: the first level), then its
 * requests (each pass over a level draws prompts of its own: cache-busting, sweep_prompt.h), its record (suite serve, one per level; emitted to `sink`, and
 * handed to *rec for the caller to rec_free), its row on stdout after `lead`. *rc becomes
 * EXIT_CHECK_FAILED when a request failed (each listed) or none succeeded. Error: the harness's (out of
 * memory, a warm-up request failed, /metrics, the sink's); *rec may still hold the record. */
vstatus sweep_srv_level(sweep_srv *w, int level, bool warm, const vrec_sink *sink, const char *lead, vrecord **rec,
                        int *rc);
/* Appends the records of a --peer file ({"records": [...]}, the --json format) to *recs
 * ([*n] used of [*cap], grown as needed); errors name the file and the record. */
vstatus sweep_read_peer(const char *file, vrecord ***recs, int *n, int *cap);

#endif
