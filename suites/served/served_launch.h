/* A server vouch starts itself: `--server 'launch:CMD'` (and `--ref-server`) in place of a URL. CMD
 * runs under /bin/sh in its own process group with {port} replaced by a free local port; vouch waits
 * until GET /v1/models answers 200 on http://127.0.0.1:PORT, copies the server's output (stdout and
 * stderr, redacted line by line) to a log (the run directory's logs/ under `vouch run`), and stops
 * the whole group at the end (SIGTERM, then SIGKILL after 10 s). A server that exits before it
 * answers fails the suite with the tail of its log. */
#ifndef VOUCH_SUITES_SERVED_SERVED_LAUNCH_H
#define VOUCH_SUITES_SERVED_SERVED_LAUNCH_H

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "common/vstatus.h"
#include "suites/engine/sink.h"

#define SERVED_LAUNCH_PREFIX "launch:"
/* The help line of every suite that takes --server / --ref-server pairs. */
#define SERVED_LAUNCH_HELP                                                                                          \
  "  --server / --ref-server 'launch:CMD': vouch runs CMD (sh; {port} becomes a free local port), waits for\n"     \
  "  /v1/models, keeps its output (redacted) as logs/server.log or logs/ref-server.log of the run, and stops\n"   \
  "  its process group at the end (docs/serving.md).\n"
/* How long a launched server may take to answer /v1/models (a big checkpoint loading): every launcher's wait. */
#define SERVED_LAUNCH_WAIT_S 900.0
#define SERVED_LAUNCH_TAIL 1024 /* bytes of the server's last output kept for an error message */

typedef struct {
  pid_t pid;               /* /bin/sh running CMD, leader of its process group; 0: not started or reaped */
  pid_t pgid;              /* that group (= the leader's first pid): signalled at stop even after the
                            * leader exits, since what CMD started may outlive the shell; 0: none */
  int port;                /* the port {port} became */
  char url[64];            /* http://127.0.0.1:PORT */
  int out_fd;              /* read end of the server's stdout + stderr (-1: closed) */
  FILE *log;               /* redacting stream onto the log file (common/redact.h) */
  char log_path[512];      /* where the log is, for messages */
  pthread_t copier;        /* copies out_fd to log and tail until EOF */
  bool copying;            /* copier was started (joined by served_launch_stop) */
  bool stopping;           /* set (under mu) by served_launch_stop: the copier returns within 200 ms even
                            * when a process that left the group still holds the pipe */
  bool live;               /* started (mu initialized) and not yet stopped */
  int exit_st;             /* the shell's wait status once reaped after start (served_launch_alive), else -1 */
  pthread_mutex_t mu;      /* guards tail */
  char tail[SERVED_LAUNCH_TAIL]; /* the last output bytes, a ring; tail_n bytes written in all */
  size_t tail_n;
} served_launch;

/* True when `spec` (a --server value) asks vouch to launch the server. */
bool served_launch_wanted(const char *spec);
/* Checks a launch spec as an option is parsed: "launch:" then a command holding "{port}". V_ERR naming
 * `option` otherwise. */
vstatus served_launch_check(const char *option, const char *spec);
/* Starts the server of `spec` ("launch:CMD"), logging to the run's logs/`name`.log under a sink that
 * keeps logs (sink->log_open), else to a file in $TMPDIR (its path printed on stderr), and waits up to
 * timeout_s seconds for GET /v1/models to answer 200. On error (the command cannot start, exits first,
 * or never answers) everything it started is stopped, and the message names the option, the exit
 * status and the log's last lines. */
vstatus served_launch_start(served_launch *L, const char *option, const char *spec, const vrec_sink *sink,
                            const char *name, double timeout_s);
/* V_OK while the launched server is running (its shell, or what it started in its group); after it
 * exited, V_ERR naming `option`, the exit status when vouch reaped it, the log and its last lines.
 * V_OK when nothing was launched. Reaps the shell when it has exited (no zombie). */
vstatus served_launch_alive(served_launch *L, const char *option);
/* Stops the server's process group and the log copy; nothing when nothing was started. */
void served_launch_stop(served_launch *L);

#endif
