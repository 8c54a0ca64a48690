/* The servers a plan's steps share. A step argument 'launch:CMD' (suites/served/served_launch.h: the
 * --server / --ref-server of the served suites, usually through a plan variable) is started once,
 * before the first step, and every step that runs here gets the server's URL in its place; the
 * servers stop after the last step. A served plan then loads each build once, not once per step (a
 * real engine takes minutes to load a checkpoint), and every step judges the same two processes. A
 * step with --relaunch keeps its 'launch:' arguments: it starts its sides afresh, as it asks. */
#ifndef VOUCH_RUNNER_PLAN_PLAN_SERVERS_H
#define VOUCH_RUNNER_PLAN_PLAN_SERVERS_H

#include "common/vstatus.h"
#include "runner/plan/plan.h"
#include "suites/engine/sink.h"
#include "suites/served/served_launch.h"

#define PLAN_SERVERS_MAX 8 /* distinct launch commands in one plan (a served plan has two) */

typedef struct {
  char *spec;            /* the 'launch:CMD' argument as the steps hold it (owned) */
  char option[32];       /* the option it first follows in a step ("--server"), for messages */
  char name[40];         /* its log: the run's logs/<name>.log ("server", "ref-server", "server-2") */
  served_launch launch;  /* the running server */
} plan_server;

typedef struct {
  plan_server s[PLAN_SERVERS_MAX]; /* [n] in the order the steps name them */
  int n;
} plan_servers;

/* Starts every distinct (option, 'launch:' argument) of p's steps that run here (but a --relaunch step's:
 * the same command after --server and after --ref-server is two servers, as a step would start),
 * each server's log through `sink` (the run's), and puts the server's URL in place of each such
 * argument. Nothing to start: V_OK with ps->n 0. On error (more than PLAN_SERVERS_MAX commands, a
 * command that does not start or never answers: served_launch_start's message, naming the option
 * and the log's last lines) whatever started is stopped, and p's steps must not run (out of memory
 * while the URLs go in leaves some arguments naming a stopped server). */
vstatus plan_servers_start(vplan *p, const vrec_sink *sink, plan_servers *ps);
/* V_OK when step st uses none of the servers or every one it uses is still running; else the error
 * of the first that exited (served_launch_alive: the option, exit status and log tail). */
vstatus plan_servers_alive(plan_servers *ps, const vplan_step *st);
/* Stops every server (served_launch_stop) and frees ps; nothing when ps->n is 0. */
void plan_servers_stop(plan_servers *ps);

#endif
