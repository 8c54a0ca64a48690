/* loadgen_bench: is vouch's served load generator (`vouch sweep --server URL --rate R`) ever the
 * bottleneck? Python clients skew the intended against the actual request rate once their event loop
 * saturates; this measures ours against a null server, so that the client is the only cost.
 *
 * The null server (forked from this program, one epoll thread, HTTP/1.1 keep-alive) answers
 * /v1/completions at once with a streamed body: max_tokens (at most 64) SSE token events with
 * token_ids, a finish_reason and `data: [DONE]`; /v1/models names model "null"; anything else
 * (/metrics, /health) is a 404, which the sweep takes as "no metrics". Its own CPU time per request
 * is measured (wait4 of its process) and printed, so a slow server would show.
 *
 * Per (rate, mode) level it runs `vouch sweep --server http://127.0.0.1:PORT --rate [poisson:]R
 * --num-prompts N --concurrency 256 --input-len 16 --output-len 4 --send-times FILE --json FILE`,
 * N = R x --seconds capped at --cap, and reports:
 *   sched req/s  the rate of the seeded schedule itself ((N-1) / its span; a Poisson draw of N gaps
 *                differs from R by about 1/sqrt(N), so the client is judged against its own schedule)
 *   record req/s the sweep record's requests_per_s (completed requests / first send to last end)
 *   ach/sched    record req/s over sched req/s: must be >= --min-ratio (0.99)
 *   lag p99/max  actual send time - due time (ms, both after the level's first send)
 *   KS D, p      one-sample Kolmogorov-Smirnov test that the actual send gaps are exponential with
 *                rate R (poisson levels; p >= --min-ks-p passes, asymptotic p, Stephens' correction)
 *   client us    the vouch process's user+system CPU time (wait4) over the requests it sent
 *                (start-up and warm-up included), and its share of one core over its wall time
 *   marginal us  the same less a start-up run's (one request, no rate), over the requests added:
 *                the client's own CPU time per request (building it, curl, parsing the stream,
 *                scheduling, and the spin of the last SPIN_S before each send, suites/served/served.c)
 *   server us/req the null server's CPU time over the same requests
 *
 *   loadgen_bench --vouch PATH [--rates 100,500,2000] [--modes poisson,const] [--seconds 10]
 *                 [--cap 20000] [--min-ratio 0.99] [--min-ks-p 0.01] [--keep DIR]
 * Exit 0 when every level passes, 1 when one misses, 2 on a usage or harness error. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

/* ---- the null server ---- */

#define NS_MAX_CONN 4096
typedef struct {
  char in[16384]; /* request bytes not yet answered */
  size_t n_in;
  char *out;      /* answer bytes not yet written (malloc'ed) */
  size_t n_out, off_out;
} ns_conn;

static volatile sig_atomic_t g_stop;
static void on_term(int sig) { (void)sig; g_stop = 1; }

/* The answer to one request (method + path, body) into a malloc'ed buffer; its length in *n. */
static char *ns_answer(const char *req, const char *body, size_t *n) {
  char b[8192], head[256];
  int bl = 0, code = 200;
  const char *type = "application/json";
  if (!strncmp(req, "POST /v1/completions", 20)) {
    const char *mt = strstr(body, "\"max_tokens\":");
    int k = mt ? atoi(mt + 13) : 4;
    if (k < 1) k = 1;
    if (k > 64) k = 64;
    type = "text/event-stream";
    for (int i = 0; i < k; i++)
      bl += snprintf(b + bl, sizeof b - (size_t)bl,
                     "data: {\"id\":\"n\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"\","
                     "\"token_ids\":[%d],\"finish_reason\":%s}]}\n\n",
                     i + 1, i == k - 1 ? "\"length\"" : "null");
    bl += snprintf(b + bl, sizeof b - (size_t)bl, "data: [DONE]\n\n");
  } else if (!strncmp(req, "GET /v1/models", 14)) {
    bl = snprintf(b, sizeof b, "{\"object\":\"list\",\"data\":[{\"id\":\"null\",\"object\":\"model\",\"vocab_size\":1000,"
                               "\"max_model_len\":1000000}]}");
  } else {
    code = 404;
    bl = snprintf(b, sizeof b, "{\"error\":{\"message\":\"not here\"}}");
  }
  const int hl = snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", code,
                          code == 200 ? "OK" : "Not Found", type, bl);
  char *o = malloc((size_t)(hl + bl));
  if (!o) return NULL;
  memcpy(o, head, (size_t)hl);
  memcpy(o + hl, b, (size_t)bl);
  *n = (size_t)(hl + bl);
  return o;
}

/* Writes what c still owes; false: the peer is gone. */
static bool ns_flush(ns_conn *c, int fd) {
  while (c->off_out < c->n_out) {
    const ssize_t w = write(fd, c->out + c->off_out, c->n_out - c->off_out);
    if (w < 0) return errno == EAGAIN;
    c->off_out += (size_t)w;
  }
  free(c->out);
  c->out = NULL, c->n_out = c->off_out = 0;
  return true;
}

/* Answers every complete request in c->in; false: a malformed or oversized one (the connection closes). */
static bool ns_serve(ns_conn *c, int fd) {
  for (;;) {
    if (c->out) return true; /* one answer at a time: the rest waits for EPOLLOUT */
    c->in[c->n_in] = 0;
    char *eoh = strstr(c->in, "\r\n\r\n");
    if (!eoh) return c->n_in < sizeof c->in - 1;
    const char *cl = strcasestr(c->in, "\r\ncontent-length:");
    const size_t blen = cl && cl < eoh ? (size_t)atol(cl + 17) : 0, hlen = (size_t)(eoh + 4 - c->in);
    if (hlen + blen >= sizeof c->in) return false;
    if (c->n_in < hlen + blen) return true;
    char body[sizeof c->in];
    memcpy(body, eoh + 4, blen);
    body[blen] = 0;
    c->out = ns_answer(c->in, body, &c->n_out);
    if (!c->out) return false;
    memmove(c->in, c->in + hlen + blen, c->n_in - hlen - blen);
    c->n_in -= hlen + blen;
    if (!ns_flush(c, fd)) return false;
  }
}

/* The null server's loop on listening socket ls, until SIGTERM. Exits the process. */
static void null_server(int ls) {
  signal(SIGTERM, on_term);
  static ns_conn conns[NS_MAX_CONN];
  const int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = ls}, evs[64];
  epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
  while (!g_stop) {
    const int k = epoll_wait(ep, evs, 64, 200);
    for (int i = 0; i < k; i++) {
      const int fd = evs[i].data.fd;
      if (fd == ls) {
        int cfd;
        while ((cfd = accept4(ls, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
          if (cfd >= NS_MAX_CONN) { close(cfd); continue; }
          const int one = 1;
          setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          memset(&conns[cfd], 0, sizeof conns[cfd]);
          struct epoll_event ce = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.fd = cfd};
          epoll_ctl(ep, EPOLL_CTL_ADD, cfd, &ce);
        }
        continue;
      }
      ns_conn *c = &conns[fd];
      bool alive = !c->out || ns_flush(c, fd);
      while (alive && c->n_in < sizeof c->in - 1) {
        const ssize_t r = read(fd, c->in + c->n_in, sizeof c->in - 1 - c->n_in);
        if (r == 0 || (r < 0 && errno != EAGAIN)) alive = false;
        if (r <= 0) break;
        c->n_in += (size_t)r;
        alive = ns_serve(c, fd);
      }
      if (alive) alive = ns_serve(c, fd);
      if (!alive) {
        free(c->out);
        memset(c, 0, sizeof *c);
        close(fd);
      }
    }
  }
  _exit(0);
}

/* ---- one level ---- */

typedef struct {
  double rate;         /* R, requests/s */
  bool poisson;        /* poisson:R, else evenly spaced */
  int n;               /* requests asked */
  int sent;            /* lines in --send-times */
  double sched_rps, sent_rps, record_rps; /* the schedule's, the actual sends', the record's requests_per_s */
  double lag_p99_ms, lag_max_ms;
  double ks_d, ks_p;   /* NaN for evenly spaced levels */
  double client_us, client_core, server_us; /* CPU us per request; client CPU / wall */
  double cpu_s;        /* the vouch process's CPU time (s) */
  double marginal_us;  /* (cpu_s - the start-up run's) / (n - 1): the client's CPU per added request */
  int vouch_rc;
} level;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* P(D_n >= d) for the one-sample KS statistic: the Kolmogorov distribution at (sqrt(n) + 0.12 +
 * 0.11/sqrt(n)) d (Stephens 1970; Numerical Recipes' probks). */
static double ks_pvalue(double d, int n) {
  const double en = sqrt((double)n), lam = (en + 0.12 + 0.11 / en) * d;
  if (lam < 0.2) return 1;
  double sum = 0, sign = 1;
  for (int j = 1; j <= 100; j++) {
    const double term = sign * exp(-2 * lam * lam * j * j);
    sum += term;
    if (fabs(term) < 1e-12) break;
    sign = -sign;
  }
  const double p = 2 * sum;
  return p < 0 ? 0 : p > 1 ? 1 : p;
}

/* The sweep record's requests_per_s from the --json file (NaN when absent). */
static double record_rps(const char *path) {
  FILE *f = fopen(path, "rb");
  struct stat sb;
  if (!f || fstat(fileno(f), &sb)) {
    if (f) fclose(f);
    return NAN;
  }
  char *buf = malloc((size_t)sb.st_size + 1); /* every request's samples: MBs at 20,000 requests */
  const size_t n = buf ? fread(buf, 1, (size_t)sb.st_size, f) : 0;
  fclose(f);
  if (!buf) return NAN;
  buf[n] = 0;
  cJSON *j = cJSON_Parse(buf);
  free(buf);
  double v = NAN;
  const cJSON *recs = cJSON_GetObjectItemCaseSensitive(j, "records"), *m;
  const cJSON *ms = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(recs, 0), "metrics");
  cJSON_ArrayForEach(m, ms) {
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(m, "name"), *val = cJSON_GetObjectItemCaseSensitive(m, "value");
    if (cJSON_IsString(nm) && !strcmp(nm->valuestring, "requests_per_s") && cJSON_IsNumber(val)) v = val->valuedouble;
  }
  cJSON_Delete(j);
  return v;
}

/* Reads the --send-times file into L: rates, lags, KS. False: unreadable or under 2 lines. */
static bool read_sends(const char *path, level *L) {
  FILE *f = fopen(path, "r");
  if (!f) return false;
  int cap = 1024, n = 0, cc, idx;
  double *due = malloc((size_t)cap * sizeof *due), *sent = malloc((size_t)cap * sizeof *sent), a, b;
  while (due && sent && fscanf(f, "%d %d %lf %lf", &cc, &idx, &a, &b) == 4) {
    if (n == cap) {
      cap *= 2;
      double *nd = realloc(due, (size_t)cap * sizeof *due), *ns = nd ? realloc(sent, (size_t)cap * sizeof *sent) : NULL;
      if (nd) due = nd;
      if (ns) sent = ns;
      if (!nd || !ns) break;
    }
    due[n] = a, sent[n] = b, n++;
  }
  fclose(f);
  L->sent = n;
  if (n < 2) { free(due); free(sent); return false; }
  L->sched_rps = (n - 1) / (due[n - 1] - due[0]);
  L->sent_rps = (n - 1) / (sent[n - 1] - sent[0]);
  double *lag = malloc((size_t)n * sizeof *lag), *gap = malloc((size_t)(n - 1) * sizeof *gap);
  if (!lag || !gap) { free(due); free(sent); free(lag); free(gap); return false; }
  for (int i = 0; i < n; i++) lag[i] = 1e3 * ((sent[i] - sent[0]) - (due[i] - due[0]));
  for (int i = 0; i + 1 < n; i++) gap[i] = sent[i + 1] - sent[i];
  qsort(lag, (size_t)n, sizeof *lag, cmp_d);
  L->lag_p99_ms = lag[(int)(0.99 * (n - 1))], L->lag_max_ms = lag[n - 1];
  L->ks_d = L->ks_p = NAN;
  if (L->poisson) {
    qsort(gap, (size_t)(n - 1), sizeof *gap, cmp_d);
    double d = 0;
    for (int i = 0; i < n - 1; i++) {
      const double F = 1 - exp(-L->rate * gap[i]);
      d = fmax(d, fmax((i + 1.0) / (n - 1) - F, F - (double)i / (n - 1)));
    }
    L->ks_d = d, L->ks_p = ks_pvalue(d, n - 1);
  }
  free(due); free(sent); free(lag); free(gap);
  return true;
}

/* Runs one level: a fresh null server, the sweep, both processes' CPU time. False: a harness error. */
static bool run_level(const char *vouch, const char *dir, level *L) {
  const int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t sl = sizeof sa;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof sa) || listen(ls, 1024) ||
      getsockname(ls, (struct sockaddr *)&sa, &sl)) {
    perror("loadgen_bench: listen");
    return false;
  }
  const pid_t srv = fork();
  if (srv == 0) null_server(ls);
  close(ls);
  char url[64], rate[48], np[24], json[600], sends[600];
  snprintf(url, sizeof url, "http://127.0.0.1:%d", ntohs(sa.sin_port));
  snprintf(rate, sizeof rate, "%s%g", L->poisson ? "poisson:" : "", L->rate);
  snprintf(np, sizeof np, "%d", L->n);
  snprintf(json, sizeof json, "%s/sweep.json", dir);
  snprintf(sends, sizeof sends, "%s/sends.tsv", dir);
  const double t0 = now_s();
  const pid_t cli = fork();
  if (cli == 0) {
    char log[620];
    snprintf(log, sizeof log, "%s/sweep.log", dir);
    const int lf = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (lf >= 0) dup2(lf, 1), dup2(lf, 2);
    char *av[] = {(char *)vouch, "sweep", "--server", url, "--num-prompts", np, "--concurrency", "256", "--input-len",
                  "16", "--output-len", "4", "--warmup", "1", "--seed", "1", "--send-times", sends, "--json", json,
                  "--rate", rate, NULL};
    if (!(L->rate > 0)) av[20] = NULL; /* the start-up run: one request, no rate */
    execv(vouch, av);
    _exit(127);
  }
  int st = 0;
  struct rusage ru_c, ru_s;
  wait4(cli, &st, 0, &ru_c);
  const double wall = now_s() - t0;
  kill(srv, SIGTERM);
  int sst;
  wait4(srv, &sst, 0, &ru_s);
  L->vouch_rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  const double cpu_c = (double)ru_c.ru_utime.tv_sec + 1e-6 * (double)ru_c.ru_utime.tv_usec +
                       (double)ru_c.ru_stime.tv_sec + 1e-6 * (double)ru_c.ru_stime.tv_usec;
  const double cpu_s = (double)ru_s.ru_utime.tv_sec + 1e-6 * (double)ru_s.ru_utime.tv_usec +
                       (double)ru_s.ru_stime.tv_sec + 1e-6 * (double)ru_s.ru_stime.tv_usec;
  const int reqs = L->n + 1; /* and the warm-up */
  L->client_us = 1e6 * cpu_c / reqs, L->client_core = cpu_c / wall, L->server_us = 1e6 * cpu_s / reqs;
  L->cpu_s = cpu_c;
  L->record_rps = record_rps(json);
  if (!(L->rate > 0)) return L->vouch_rc == 0;
  if (!read_sends(sends, L)) {
    fprintf(stderr, "loadgen_bench: %s: no send times (vouch exit %d; its output in %s/sweep.log)\n", sends,
            L->vouch_rc, dir);
    return false;
  }
  return true;
}

int main(int argc, char **argv) {
  const char *vouch = NULL, *rates_s = "100,500,2000", *modes_s = "poisson,const", *keep = NULL;
  double seconds = 10, min_ratio = 0.99, min_ks_p = 0.01;
  int cap = 20000;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) { fprintf(stderr, "loadgen_bench: %s needs a value (see the head of bench/loadgen_bench.c)\n", a); return 2; }
    if (!strcmp(a, "--vouch")) vouch = v;
    else if (!strcmp(a, "--rates")) rates_s = v;
    else if (!strcmp(a, "--modes")) modes_s = v;
    else if (!strcmp(a, "--seconds")) seconds = atof(v);
    else if (!strcmp(a, "--cap")) cap = atoi(v);
    else if (!strcmp(a, "--min-ratio")) min_ratio = atof(v);
    else if (!strcmp(a, "--min-ks-p")) min_ks_p = atof(v);
    else if (!strcmp(a, "--keep")) keep = v;
    else { fprintf(stderr, "loadgen_bench: unknown option %s\n", a); return 2; }
    i++;
  }
  if (!vouch || !(seconds > 0) || cap < 2) {
    fprintf(stderr, "usage: loadgen_bench --vouch PATH [--rates 100,500,2000] [--modes poisson,const] [--seconds 10]\n"
                    "                     [--cap 20000] [--min-ratio 0.99] [--min-ks-p 0.01] [--keep DIR]\n");
    return 2;
  }
  char dir[512];
  if (keep) {
    snprintf(dir, sizeof dir, "%s", keep);
    mkdir(dir, 0755);
  } else {
    snprintf(dir, sizeof dir, "/tmp/loadgen_bench.XXXXXX");
    if (!mkdtemp(dir)) { perror("loadgen_bench: mkdtemp"); return 2; }
  }
  printf("loadgen_bench: vouch sweep --server against a null server (streamed, 4 tokens), %g s per level (cap %d), "
         "%ld CPUs online\n", seconds, cap, sysconf(_SC_NPROCESSORS_ONLN));
  level L0 = {.n = 1};
  if (!run_level(vouch, dir, &L0)) {
    fprintf(stderr, "loadgen_bench: the start-up run failed (vouch exit %d; its output in %s/sweep.log)\n", L0.vouch_rc, dir);
    return 2;
  }
  printf("start-up run (1 request + warm-up): %.1f ms CPU of the vouch process\n", 1e3 * L0.cpu_s);
  printf("%7s %7s %6s %9s %9s %9s %10s %8s %8s %7s %8s %9s %8s %6s %9s  %s\n", "R", "mode", "n", "sched/s", "record/s",
         "sent/s", "ach/sched", "lag p99", "lag max", "KS D", "KS p", "client us", "marg us", "core", "server us", "verdict");
  int rc = 0;
  char rates[200], modes[200], *s1 = NULL, *s2 = NULL;
  snprintf(rates, sizeof rates, "%s", rates_s);
  for (char *r = strtok_r(rates, ",", &s1); r; r = strtok_r(NULL, ",", &s1)) {
    snprintf(modes, sizeof modes, "%s", modes_s);
    for (char *m = strtok_r(modes, ",", &s2); m; m = strtok_r(NULL, ",", &s2)) {
      level L = {.rate = atof(r), .poisson = !strcmp(m, "poisson")};
      const double want = L.rate * seconds;
      L.n = want > cap ? cap : want < 2 ? 2 : (int)want;
      if (!(L.rate > 0) || !run_level(vouch, dir, &L)) { rc = 2; continue; }
      L.marginal_us = 1e6 * (L.cpu_s - L0.cpu_s) / (L.n - 1);
      const double ratio = L.record_rps / L.sched_rps;
      const bool ok = L.vouch_rc == 0 && L.sent == L.n && ratio >= min_ratio && (!L.poisson || L.ks_p >= min_ks_p);
      char goal[64];
      if (L.poisson) snprintf(goal, sizeof goal, "ach/sched >= %.2f, KS p >= %g", min_ratio, min_ks_p);
      else snprintf(goal, sizeof goal, "ach/sched >= %.2f", min_ratio);
      printf("%7g %7s %6d %9.1f %9.1f %9.1f %10.4f %8.3f %8.3f %7.4f %8.3f %9.1f %8.1f %5.0f%% %9.1f  %s (%s)\n",
             L.rate, L.poisson ? "poisson" : "const", L.n, L.sched_rps, L.record_rps, L.sent_rps, ratio, L.lag_p99_ms,
             L.lag_max_ms, L.ks_d, L.ks_p, L.client_us, L.marginal_us, 100 * L.client_core, L.server_us,
             ok ? "PASS" : "MISS", goal);
      fflush(stdout);
      if (!ok && rc == 0) rc = 1;
    }
  }
  printf("columns: sched/s the seeded schedule's own rate; record/s the record's requests_per_s; lag = actual - due\n"
         "send (ms); client/server us: CPU time per request of the vouch process / the null server (wait4)\n");
  return rc;
}
