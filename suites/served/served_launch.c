/* Launching a server for a suite (served_launch.h). The port is found by binding port 0 on the
 * loopback and releasing it just before the command starts (another process could take it in
 * between: the server then fails to bind and exits, and the error shows its log). */
#include "suites/served/served_launch.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/redact.h"
#include "suites/served/served.h"

#define PORT_MARK "{port}"

bool served_launch_wanted(const char *spec) {
  return spec && !strncmp(spec, SERVED_LAUNCH_PREFIX, strlen(SERVED_LAUNCH_PREFIX));
}

vstatus served_launch_check(const char *option, const char *spec) {
  const char *cmd = spec + strlen(SERVED_LAUNCH_PREFIX);
  if (!strstr(cmd, PORT_MARK))
    return VERR("%s 'launch:CMD': the command must hold {port} (where vouch tells the server to listen)", option);
  if (strlen(cmd) > 3000) return VERR("%s 'launch:CMD': the command is longer than 3000 characters", option);
  return V_OK;
}

/* A free loopback port (bound and released), 0 when none. */
static int free_port(void) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t n = sizeof a;
  int port = 0;
  if (!bind(fd, (struct sockaddr *)&a, sizeof a) && !getsockname(fd, (struct sockaddr *)&a, &n)) port = ntohs(a.sin_port);
  close(fd);
  return port;
}

/* cmd with every {port} replaced by `port`; NULL when out of memory. */
static char *with_port(const char *cmd, int port) {
  char num[16];
  snprintf(num, sizeof num, "%d", port);
  size_t n = 0;
  for (const char *p = strstr(cmd, PORT_MARK); p; p = strstr(p + 1, PORT_MARK)) n++;
  char *out = malloc(strlen(cmd) + n * strlen(num) + 1), *o = out;
  if (!out) return NULL;
  for (const char *p = cmd;;) {
    const char *m = strstr(p, PORT_MARK);
    const size_t k = m ? (size_t)(m - p) : strlen(p);
    memcpy(o, p, k);
    o += k;
    if (!m) break;
    memcpy(o, num, strlen(num));
    o += strlen(num);
    p = m + strlen(PORT_MARK);
  }
  *o = 0;
  return out;
}

/* Copies the server's output to the log and the tail ring until EOF or a stop. */
static void *copy_output(void *arg) {
  served_launch *L = arg;
  char buf[4096];
  for (;;) {
    pthread_mutex_lock(&L->mu);
    const bool stop = L->stopping;
    pthread_mutex_unlock(&L->mu);
    struct pollfd pf = {.fd = L->out_fd, .events = POLLIN};
    const int r = poll(&pf, 1, 200);
    if (r < 0 && errno != EINTR) return NULL;
    if (r <= 0) {
      if (stop) return NULL; /* nothing more within 200 ms of the stop */
      continue;
    }
    const ssize_t k = read(L->out_fd, buf, sizeof buf);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return NULL; /* EOF: every writer is gone */
    if (L->log) fwrite(buf, 1, (size_t)k, L->log), fflush(L->log);
    pthread_mutex_lock(&L->mu);
    for (ssize_t i = 0; i < k; i++) L->tail[L->tail_n++ % SERVED_LAUNCH_TAIL] = buf[i];
    pthread_mutex_unlock(&L->mu);
  }
}

/* The log's last lines, redacted and on one line, into out. */
static void tail_text(served_launch *L, char *out, size_t cap) {
  pthread_mutex_lock(&L->mu);
  const size_t n = L->tail_n < SERVED_LAUNCH_TAIL ? L->tail_n : SERVED_LAUNCH_TAIL;
  const size_t start = L->tail_n - n;
  size_t j = 0;
  for (size_t i = 0; i < n && j + 1 < cap; i++) {
    const char ch = L->tail[(start + i) % SERVED_LAUNCH_TAIL];
    out[j++] = ch == '\n' || ch == '\r' ? ' ' : (unsigned char)ch < 32 ? '.' : ch;
  }
  out[j] = 0;
  pthread_mutex_unlock(&L->mu);
  redact_text(out);
}

/* The log stream: the run's logs/NAME.log (redacting) under a sink that keeps logs, else a file in
 * $TMPDIR. NULL (error set) when neither opens. */
static FILE *open_log(served_launch *L, const vrec_sink *sink, const char *name) {
  if (sink && sink->log_open) {
    snprintf(L->log_path, sizeof L->log_path, "the run's logs/%s.log", name);
    return sink->log_open(sink->ctx, name);
  }
  const char *dir = getenv("TMPDIR");
  snprintf(L->log_path, sizeof L->log_path, "%s/vouch-%s-XXXXXX.log", dir && *dir ? dir : "/tmp", name);
  const int fd = mkstemps(L->log_path, 4);
  if (fd < 0) { VERR("%s: cannot create the server's log: %s", L->log_path, strerror(errno)); return NULL; }
  FILE *f = fdopen(fd, "w");
  if (!f) { close(fd); VERR("%s: cannot open the server's log", L->log_path); return NULL; }
  FILE *r = redact_stream(f);
  if (!r) fclose(f);
  else fprintf(stderr, "vouch: the launched server's output goes to %s\n", L->log_path);
  return r;
}

/* Starts /bin/sh -c cmd in its own process group, output into a pipe. */
static vstatus spawn(served_launch *L, const char *option, const char *cmd) {
  int p[2];
  if (pipe(p)) return VERR("%s: cannot make a pipe: %s", option, strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) {
    close(p[0]), close(p[1]);
    return VERR("%s: cannot fork: %s", option, strerror(errno));
  }
  if (pid == 0) {
    setpgid(0, 0);
    const int nul = open("/dev/null", O_RDONLY);
    if (nul >= 0) dup2(nul, 0);
    dup2(p[1], 1), dup2(p[1], 2);
    close(p[0]), close(p[1]);
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  setpgid(pid, pid); /* also here: no window in which a stop signal would miss the group */
  close(p[1]);
  L->pid = pid;
  L->pgid = pid;
  L->out_fd = p[0];
  return V_OK;
}

/* Waits until GET /v1/models answers 200, the server exits, or timeout_s passes. */
static vstatus wait_ready(served_launch *L, const char *option, double timeout_s) {
  served_conn c;
  VTRY(served_conn_init(&c, L->url, 2.0));
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    int st;
    if (waitpid(L->pid, &st, WNOHANG) == L->pid) {
      L->pid = 0; /* reaped: nothing to stop but what it left in its group */
      usleep(100 * 1000); /* let the copier take its last output */
      char tail[SERVED_LAUNCH_TAIL + 1];
      tail_text(L, tail, sizeof tail);
      return VERR("%s: the launched server exited (%s %d) before it answered; log %s: ...%s", option,
                  WIFEXITED(st) ? "status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), L->log_path,
                  tail);
    }
    char *body = NULL;
    long code = 0;
    vstatus s = served_get(&c, "/v1/models", &body, &code);
    free(body);
    if (s == V_OK && code == 200) return V_OK;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) * 1e-9 > timeout_s) {
      char tail[SERVED_LAUNCH_TAIL + 1];
      tail_text(L, tail, sizeof tail);
      return VERR("%s: the launched server did not answer GET /v1/models with 200 on %s within %.0f s; log %s: ...%s",
                  option, L->url, timeout_s, L->log_path, tail);
    }
    usleep(200 * 1000);
  }
}

vstatus served_launch_start(served_launch *L, const char *option, const char *spec, const vrec_sink *sink,
                            const char *name, double timeout_s) {
  memset(L, 0, sizeof *L);
  L->out_fd = -1;
  L->exit_st = -1;
  VTRY(served_launch_check(option, spec));
  if (pthread_mutex_init(&L->mu, NULL)) return VERR("%s: cannot make a mutex", option);
  L->live = true;
  L->port = free_port();
  if (!L->port) return VERR("%s: no free local port for the launched server", option);
  snprintf(L->url, sizeof L->url, "http://127.0.0.1:%d", L->port);
  char *cmd = with_port(spec + strlen(SERVED_LAUNCH_PREFIX), L->port);
  if (!cmd) return VERR("%s: out of memory", option);
  L->log = open_log(L, sink, name);
  vstatus s = L->log ? spawn(L, option, cmd) : V_ERR;
  free(cmd);
  if (s == V_OK) {
    L->copying = !pthread_create(&L->copier, NULL, copy_output, L);
    if (!L->copying) s = VERR("%s: cannot start the log copy", option);
  }
  if (s == V_OK) s = wait_ready(L, option, timeout_s);
  if (s != V_OK) {
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", verr_msg());
    served_launch_stop(L);
    return VERR("%s", msg);
  }
  return V_OK;
}

/* True while any process is left in group g (the leader reaped or not). */
static bool group_alive(pid_t g) { return kill(-g, 0) == 0 || errno == EPERM; }

vstatus served_launch_alive(served_launch *L, const char *option) {
  if (!L->live || L->pgid <= 0) return V_OK;
  int st;
  if (L->pid > 0 && waitpid(L->pid, &st, WNOHANG) == L->pid) L->pid = 0, L->exit_st = st;
  if (L->pid > 0 || group_alive(L->pgid)) return V_OK; /* a shell that started the server and left is fine */
  usleep(100 * 1000); /* let the copier take its last output */
  char tail[SERVED_LAUNCH_TAIL + 1], how[48] = "";
  tail_text(L, tail, sizeof tail);
  if (L->exit_st >= 0)
    snprintf(how, sizeof how, " (%s %d)", WIFEXITED(L->exit_st) ? "status" : "signal",
             WIFEXITED(L->exit_st) ? WEXITSTATUS(L->exit_st) : WTERMSIG(L->exit_st));
  return VERR("%s: the launched server on %s exited%s; log %s: ...%s", option, L->url, how, L->log_path, tail);
}

void served_launch_stop(served_launch *L) {
  if (!L->live) return;
  if (L->pgid > 0) {
    /* SIGTERM to the whole group, then up to 10 s for the leader to be reaped and every member to
     * leave; SIGKILL to whatever is left. The group is signalled even when the shell already exited
     * (reaped by wait_ready or here): a server started by a non-exec command outlives it. */
    kill(-L->pgid, SIGTERM);
    int st;
    for (int i = 0; i < 100; i++) {
      if (L->pid > 0 && waitpid(L->pid, &st, WNOHANG) == L->pid) L->pid = 0;
      if (L->pid == 0 && !group_alive(L->pgid)) break;
      usleep(100 * 1000);
    }
    if (L->pid > 0 || group_alive(L->pgid)) kill(-L->pgid, SIGKILL);
    if (L->pid > 0) waitpid(L->pid, &st, 0);
    L->pid = 0;
    L->pgid = 0;
  }
  if (L->copying) { /* the group is gone: EOF, or the stop flag for a process that left the group */
    pthread_mutex_lock(&L->mu);
    L->stopping = true;
    pthread_mutex_unlock(&L->mu);
    pthread_join(L->copier, NULL);
    L->copying = false;
  }
  if (L->out_fd >= 0) close(L->out_fd), L->out_fd = -1;
  if (L->log) fclose(L->log), L->log = NULL;
  pthread_mutex_destroy(&L->mu);
  L->live = false;
}
