/* `vouch ab --launch` (ab_launch.h). */
#define _GNU_SOURCE
#include "runner/cli/ab_launch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "runner/evidence/sha256.h"
#include "suites/engine/cli.h"

/* --launch: runs --build in the side's worktree (when given). */
vstatus ab_launch_build(ab_opts *o, side *s) {
  if (!o->build_cmd) return V_OK;
  ab_log(o, "build %s %s: --build in its worktree, log %s", s->role, s->sha, s->build_log);
  char *argv[] = {"/bin/sh", "-c", (char *)o->build_cmd, NULL};
  const double t = vclock_now();
  const int rc = ab_spawn(argv, s->wt_path, s->build_log, NULL);
  s->build_s = vclock_now() - t;
  if (rc != 0) return VERR("--build in the %s worktree (%s = %.12s) failed (exit %d): see %s", s->role, s->rev, s->sha, rc,
                           s->build_log);
  return V_OK;
}

/* The plan variable of one side under --launch: "VAR=launch:cd 'WORKTREE' && CMD" (the worktree quoted
 * for sh: ' becomes '\''). Error when it does not fit cap. */
static vstatus launch_set(const char *var, const side *s, const char *cmd, char *out, size_t cap) {
  size_t n = (size_t)snprintf(out, cap, "%s=launch:cd '", var);
  for (const char *c = s->wt_path; *c && n + 5 < cap; c++) {
    if (*c == '\'') n += (size_t)snprintf(out + n, cap - n, "'\\''");
    else out[n++] = *c, out[n] = 0;
  }
  if (n + 5 + strlen(cmd) >= cap) return VERR("--launch: the command with the worktree's path is too long");
  snprintf(out + n, cap - n, "' && %s", cmd);
  return V_OK;
}

/* --launch: one run of the plan with this vouch, head's server as `server`, base's as `ref`, into
 * DIR/served (log logs/served.log); its exit code into *plan_rc and its entry into ab. Error when the
 * run could not start or wrote no result directory. */
vstatus ab_launch_run(ab_opts *o, const side *b, const side *h, cJSON *ab, int *plan_rc) {
  char self[PATH_MAX], out[PATH_MAX + 16], log[PATH_MAX + 32], bundle[PATH_MAX + 32];
  const ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
  if (k <= 0) return VERR("--launch: cannot find this vouch binary (/proc/self/exe): %s", strerror(errno));
  self[k] = 0;
  snprintf(out, sizeof out, "%s/served", o->dir);
  snprintf(log, sizeof log, "%s/logs/served.log", o->dir);
  snprintf(bundle, sizeof bundle, "%s/served.vouch.tar.gz", o->dir);
  static char server[2 * PATH_MAX + 3200], ref[2 * PATH_MAX + 3200];
  char rounds[32];
  VTRY(launch_set("server", h, o->launch, server, sizeof server));
  VTRY(launch_set("ref", b, o->launch, ref, sizeof ref));
  snprintf(rounds, sizeof rounds, "ab_rounds=%d", o->rounds);
  char *argv[16 + 2 * AB_MAX_SETS];
  int n = 0;
  argv[n++] = self, argv[n++] = "run", argv[n++] = "--plan", argv[n++] = (char *)o->plan, argv[n++] = "--out";
  argv[n++] = out;
  argv[n++] = "--set", argv[n++] = server, argv[n++] = "--set", argv[n++] = ref;
  if (o->rounds_given) argv[n++] = "--set", argv[n++] = rounds;
  for (int i = 0; i < o->n_sets; i++) argv[n++] = "--set", argv[n++] = (char *)o->sets[i];
  argv[n] = NULL;
  ab_log(o, "run %s: head %s as server, base %s as ref", o->plan, h->sha, b->sha);
  const double t = vclock_now();
  const int rc = ab_spawn(argv, NULL, log, NULL);
  const double secs = vclock_now() - t;
  char probe[PATH_MAX + 32];
  snprintf(probe, sizeof probe, "%s/manifest.json", out);
  if (access(probe, F_OK) != 0) return VERR("the %s run exited %d and wrote no result directory: see %s", o->plan, rc, log);
  if (rc != EXIT_OK && rc != EXIT_CHECK_FAILED)
    return VERR("the %s run exited %d%s: see %s", o->plan, rc, rc == EXIT_INTERRUPTED ? " (interrupted)" : "", log);
  char verdict[32], hex[65] = "";
  ab_manifest_field(out, "verdict", verdict, sizeof verdict);
  if (access(bundle, F_OK) == 0) VTRY(sha256_file_hex(bundle, hex));
  cJSON *r = cJSON_AddObjectToObject(ab, "served");
  cJSON_AddStringToObject(r, "launch", o->launch);
  if (o->build_cmd) cJSON_AddStringToObject(r, "build", o->build_cmd);
  else cJSON_AddNullToObject(r, "build");
  cJSON_AddStringToObject(r, "dir", "served");
  cJSON_AddNumberToObject(r, "exit_code", rc);
  cJSON_AddStringToObject(r, "verdict", verdict);
  cJSON_AddNumberToObject(r, "seconds", secs);
  cJSON_AddStringToObject(r, "bundle", hex[0] ? "served.vouch.tar.gz" : "");
  cJSON_AddStringToObject(r, "bundle_sha256", hex);
  cJSON_AddStringToObject(r, "log", "logs/served.log");
  char rcs[16];
  snprintf(rcs, sizeof rcs, "%d", rc);
  ab_log(o, "done served exit=%s verdict=%s (%s)", rcs, verdict, out);
  *plan_rc = rc;
  return V_OK;
}

