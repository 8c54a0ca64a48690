/* Starting a plan's launched servers once (plan_servers.h). */
#include "runner/plan/plan_servers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* True when step st asks to start its launched sides afresh (a sweep's --relaunch). */
static bool step_relaunches(const vplan_step *st) {
  for (int k = 1; k < st->argc; k++)
    if (!strcmp(st->argv[k], "--relaunch")) return true;
  return false;
}

/* The option an argument at k follows ("--server"), or "launch:" when none does. */
static const char *option_of(const vplan_step *st, int k) {
  return k > 1 && st->argv[k - 1][0] == '-' ? st->argv[k - 1] : "launch:";
}

/* The server of ps started for spec `arg` after option `opt`, or NULL. The option is part of the key: the
 * same command for --server and --ref-server (an A/A) is two processes, as it is when a step starts them. */
static plan_server *find_spec(plan_servers *ps, const char *arg, const char *opt) {
  for (int i = 0; i < ps->n; i++)
    if (!strcmp(ps->s[i].spec, arg) && !strncmp(ps->s[i].option, opt, sizeof ps->s[i].option - 1)) return &ps->s[i];
  return NULL;
}

/* Records a new spec `arg` that followed option `opt`, naming its log after the option
 * ("--ref-server" -> "ref-server"), numbered when two commands follow the same option. */
static vstatus add_spec(plan_servers *ps, const char *arg, const char *opt) {
  if (ps->n == PLAN_SERVERS_MAX)
    return VERR("plan: more than %d distinct 'launch:' commands in its steps", PLAN_SERVERS_MAX);
  plan_server *s = &ps->s[ps->n];
  memset(s, 0, sizeof *s);
  if (!(s->spec = strdup(arg))) return VERR("plan: out of memory");
  snprintf(s->option, sizeof s->option, "%s", opt);
  const char *base = !strncmp(opt, "--", 2) ? opt + 2 : "server";
  int same = 0;
  for (int i = 0; i < ps->n; i++)
    if (!strcmp(ps->s[i].option, s->option)) same++;
  if (same) snprintf(s->name, sizeof s->name, "%.28s-%d", base, same + 1);
  else snprintf(s->name, sizeof s->name, "%.28s", base);
  ps->n++;
  return V_OK;
}

vstatus plan_servers_start(vplan *p, const vrec_sink *sink, plan_servers *ps) {
  memset(ps, 0, sizeof *ps);
  vstatus s = V_OK;
  for (int i = 0; i < p->n_steps && s == V_OK; i++) {
    const vplan_step *st = &p->steps[i];
    if (!st->runs_here || !st->argv || step_relaunches(st)) continue;
    for (int k = 1; k < st->argc && s == V_OK; k++)
      if (served_launch_wanted(st->argv[k]) && !find_spec(ps, st->argv[k], option_of(st, k)))
        s = add_spec(ps, st->argv[k], option_of(st, k));
  }
  for (int i = 0; i < ps->n && s == V_OK; i++) {
    plan_server *v = &ps->s[i];
    fprintf(stderr, "vouch run: starting the server for %s once for the plan (log: logs/%s.log)\n", v->option,
            v->name);
    s = served_launch_start(&v->launch, v->option, v->spec, sink, v->name, SERVED_LAUNCH_WAIT_S);
    if (s == V_OK) fprintf(stderr, "vouch run: %s answers on %s\n", v->option, v->launch.url);
  }
  if (s != V_OK) {
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", verr_msg());
    plan_servers_stop(ps);
    return VERR("%s", msg);
  }
  /* every server answers: the steps get the URLs (each argv string is the plan's own, freed by free_plan) */
  for (int i = 0; i < p->n_steps; i++) {
    vplan_step *st = &p->steps[i];
    if (!st->runs_here || !st->argv || step_relaunches(st)) continue;
    for (int k = 1; k < st->argc; k++) {
      const plan_server *v = served_launch_wanted(st->argv[k]) ? find_spec(ps, st->argv[k], option_of(st, k)) : NULL;
      char *url = v ? strdup(v->launch.url) : NULL;
      if (v && !url) { /* the servers are stopped: no step may reach a URL it does not have */
        plan_servers_stop(ps);
        return VERR("plan: out of memory");
      }
      if (url) free(st->argv[k]), st->argv[k] = url;
    }
  }
  return V_OK;
}

vstatus plan_servers_alive(plan_servers *ps, const vplan_step *st) {
  for (int i = 0; i < ps->n; i++) {
    bool used = false;
    for (int k = 1; st->argv && k < st->argc && !used; k++) used = !strcmp(st->argv[k], ps->s[i].launch.url);
    if (used) VTRY(served_launch_alive(&ps->s[i].launch, ps->s[i].option));
  }
  return V_OK;
}

void plan_servers_stop(plan_servers *ps) {
  for (int i = 0; i < ps->n; i++) {
    served_launch_stop(&ps->s[i].launch);
    free(ps->s[i].spec);
  }
  ps->n = 0;
}
