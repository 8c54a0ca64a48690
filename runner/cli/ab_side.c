/* The helpers the parts of `vouch ab` share (ab_side.h). */
#define _GNU_SOURCE
#include "runner/cli/ab_side.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/atomic_file.h"
#include "common/read_file.h"
#include "runner/evidence/manifest.h"

void ab_log(ab_opts *o, const char *fmt, const char *a, const char *b, const char *c) {
  char ts[32];
  manifest_time_iso(ts);
  a = a ? a : "";
  b = b ? b : "";
  c = c ? c : "";
  if (o->log) { /* written directly: paths may be as long as PATH_MAX */
    fprintf(o->log, "%s ", ts);
    fprintf(o->log, fmt, a, b, c);
    fputc('\n', o->log);
    fflush(o->log);
  }
  fputs("vouch ab: ", stderr);
  fprintf(stderr, fmt, a, b, c);
  fputc('\n', stderr);
}

int ab_spawn(char *const argv[], const char *cwd, const char *log, const char *const *unset) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    signal(SIGINT, SIG_DFL);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) _exit(126);
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
    int nul = open("/dev/null", O_RDONLY);
    if (nul >= 0) { dup2(nul, 0); close(nul); }
    if (cwd && chdir(cwd) != 0) { fprintf(stderr, "vouch ab: cannot enter %s: %s\n", cwd, strerror(errno)); _exit(126); }
    for (; unset && *unset; unset++) unsetenv(*unset);
    execv(argv[0], argv);
    fprintf(stderr, "vouch ab: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  /* Ctrl-C stops the child (the run keeps what finished and exits 130); this process then
   * reports it and removes the worktrees instead of dying with them registered */
  struct sigaction ign, old_int;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ign, &old_int);
  int st = 0;
  pid_t w;
  while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR) {}
  sigaction(SIGINT, &old_int, NULL);
  if (w < 0) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
}

void ab_manifest_field(const char *dir, const char *key, char *out, size_t cap) {
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  out[0] = 0;
  char *txt = NULL;
  size_t n;
  if (vfile_read(path, &txt, &n)) { verr_clear(); return; }
  cJSON *m = cJSON_Parse(txt);
  const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, key));
  snprintf(out, cap, "%s", v ? v : "");
  cJSON_Delete(m);
  free(txt);
}

vstatus ab_write_json(const char *dir, const char *name, const cJSON *j) {
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return vfile_write_json(path, j, true);
}

