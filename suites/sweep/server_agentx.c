/* AgentX traces into vouch's sessions (suites/sweep/server_agentx.h). */
#include "suites/sweep/server_agentx.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

vstatus trace_format_parse(const char *s, trace_format *f) {
  if (!strcmp(s, "auto")) *f = TRACE_FMT_AUTO;
  else if (!strcmp(s, "mooncake")) *f = TRACE_FMT_MOONCAKE;
  else if (!strcmp(s, "agentx")) *f = TRACE_FMT_AGENTX;
  else return VERR("--trace-format '%s': expected auto, mooncake or agentx", s);
  return V_OK;
}

const char *trace_format_name(trace_format f) {
  return f == TRACE_FMT_AGENTX ? "agentx" : f == TRACE_FMT_MOONCAKE ? "mooncake" : "auto";
}

/* The whole of f (named `file` in errors), NUL-terminated, in *buf (*len bytes); f is closed.
 * Error: cannot read it, or past 1 GiB. */
static vstatus slurp_fp(FILE *f, const char *file, char **buf, size_t *len) {
  size_t cap = 1 << 16, n = 0;
  char *b = malloc(cap);
  while (b) {
    n += fread(b + n, 1, cap - 1 - n, f);
    if (n < cap - 1) break;
    char *nb = cap < ((size_t)1 << 30) ? realloc(b, cap * 2) : NULL;
    if (!nb) { free(b); b = NULL; break; }
    b = nb, cap *= 2;
  }
  const bool err = ferror(f);
  fclose(f);
  if (!b || err) { free(b); return VERR("%s: cannot read the trace (or it is larger than 1 GiB)", file); }
  b[n] = 0;
  *buf = b, *len = n;
  return V_OK;
}

static vstatus slurp(const char *file, char **buf, size_t *len) {
  FILE *f = fopen(file, "rb");
  if (!f) return VERR("%s: cannot open the trace", file);
  return slurp_fp(f, file, buf, len);
}

static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool has_requests(const cJSON *j) {
  return cJSON_IsObject(j) && cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(j, "requests"));
}

vstatus trace_format_detect(const char *file, trace_format *f) {
  if (is_dir(file)) { /* a directory of trace files, as AIPerf reads them: only AgentX comes so */
    *f = TRACE_FMT_AGENTX;
    return V_OK;
  }
  /* the first non-blank line alone: a Mooncake line, or a trace written one per line */
  FILE *fp = fopen(file, "r");
  if (!fp) return VERR("%s: cannot open the trace", file);
  char *line = NULL;
  size_t cap = 0;
  cJSON *j = NULL;
  bool whole = false;
  while (getline(&line, &cap, fp) > 0) {
    const char *p = line + strspn(line, " \t\r\n");
    if (!*p || *p == '#') continue;
    j = cJSON_Parse(p);
    whole = !j; /* not one line's JSON: a pretty-printed object, or a broken line */
    break;
  }
  free(line);
  fclose(fp);
  if (whole) {
    char *buf;
    size_t len;
    VTRY(slurp(file, &buf, &len));
    const char *p = buf + strspn(buf, " \t\r\n");
    j = cJSON_ParseWithLengthOpts(p, len - (size_t)(p - buf), NULL, false);
    free(buf);
  }
  *f = has_requests(j) ? TRACE_FMT_AGENTX : TRACE_FMT_MOONCAKE;
  cJSON_Delete(j);
  return V_OK;
}

/* ---- reading ---- */

typedef struct {
  const char *file;
  long lno;           /* the line the trace object starts on */
  uint64_t scope;     /* the trace's index: hash ids are scoped to it */
  int limit;          /* > 0: keep the first `limit` sessions */
  trace_line *v;      /* [n] the lines so far (cap allocated) */
  int n, cap;
  int sessions;       /* sessions started so far */
  int trees;          /* traces that gave lines so far: the tree index of the next trace's lines */
  bool dir;           /* reading a directory of trace files: each trace's "id" must be new */
  char **ids;         /* [n_ids] the ids read so far (dir only; owned) */
  int n_ids, cap_ids;
} reader;

/* One request of a chain, checked. */
typedef struct {
  double t, think, api; /* s; think, api < 0: not given */
  int in, out;
  const cJSON *hash;    /* NULL or the list */
} req;

/* A request of the trace's own list as the join and spawn rules read it (read_chain checked it). */
typedef struct {
  double t;   /* recorded start, s from the trace's start */
  double api; /* recorded answer time, s; 0 when not given */
  int line;   /* its line index */
} own_req;

static bool is_count(const cJSON *j) {
  return cJSON_IsNumber(j) && j->valuedouble >= 1 && j->valuedouble <= 1e7 && j->valuedouble == floor(j->valuedouble);
}

/* An optional number of seconds >= 0 (absent and null: -1). */
static bool opt_secs(const cJSON *j, double *v) {
  *v = -1;
  if (!j || cJSON_IsNull(j)) return true;
  if (!cJSON_IsNumber(j) || !(j->valuedouble >= 0) || j->valuedouble > 1e9) return false;
  *v = j->valuedouble;
  return true;
}

/* Checks request `e` (named `path`, e.g. requests[3]) into *q. */
static vstatus check_req(const reader *R, const char *path, const cJSON *e, req *q) {
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "t"), *in = cJSON_GetObjectItemCaseSensitive(e, "in");
  const cJSON *out = cJSON_GetObjectItemCaseSensitive(e, "out"), *h = cJSON_GetObjectItemCaseSensitive(e, "hash_ids");
  if (!cJSON_IsNumber(t) || !(t->valuedouble >= 0) || t->valuedouble > 1e9)
    return VERR("%s:%ld: %s.t must be a number of s >= 0", R->file, R->lno, path);
  if (!is_count(in)) return VERR("%s:%ld: %s.in must be an integer in [1, 1e7]", R->file, R->lno, path);
  if (!is_count(out)) return VERR("%s:%ld: %s.out must be an integer in [1, 1e7]", R->file, R->lno, path);
  if (h && !cJSON_IsArray(h)) return VERR("%s:%ld: %s.hash_ids must be a list of integers", R->file, R->lno, path);
  *q = (req){.t = t->valuedouble, .in = (int)in->valuedouble, .out = (int)out->valuedouble, .hash = h};
  if (!opt_secs(cJSON_GetObjectItemCaseSensitive(e, "think_time"), &q->think))
    return VERR("%s:%ld: %s.think_time must be a number of s >= 0", R->file, R->lno, path);
  if (!opt_secs(cJSON_GetObjectItemCaseSensitive(e, "api_time"), &q->api))
    return VERR("%s:%ld: %s.api_time must be a number of s >= 0", R->file, R->lno, path);
  const cJSON *x;
  int k = 0;
  cJSON_ArrayForEach(x, h) {
    if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || fabs(x->valuedouble) > 9e18)
      return VERR("%s:%ld: %s.hash_ids[%d] is not an integer", R->file, R->lno, path, k);
    k++;
  }
  return V_OK;
}

/* A block id scoped to its trace (splitmix64 of id and scope): equal ids of one trace stay equal,
 * two traces never share. */
static int64_t scoped(uint64_t scope, int64_t id) {
  uint64_t x = (uint64_t)id ^ (scope + 1) * 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return (int64_t)((x ^ (x >> 31)) >> 1);
}

/* Appends a line with the hash ids of q past the first `skip`. Error: out of memory. */
static vstatus push(reader *R, const req *q, int skip, trace_line t) {
  if (R->n == R->cap) {
    const int cap = R->cap ? R->cap * 2 : 256;
    trace_line *nv = cap < (1 << 24) ? realloc(R->v, (size_t)cap * sizeof *nv) : NULL;
    if (!nv) return VERR("%s: out of memory (or more than %d turns)", R->file, 1 << 23);
    R->v = nv, R->cap = cap;
  }
  const int nh = q->hash ? cJSON_GetArraySize(q->hash) : 0;
  t.hash = malloc((size_t)(nh > skip ? nh - skip : 1) * sizeof *t.hash);
  if (!t.hash) return VERR("%s: out of memory", R->file);
  int k = 0, m = 0;
  const cJSON *x;
  cJSON_ArrayForEach(x, q->hash) if (k++ >= skip) t.hash[m++] = scoped(R->scope, (int64_t)x->valuedouble);
  t.n_hash = m;
  t.tree = R->trees;
  R->v[R->n++] = t;
  return V_OK;
}

/* The length of the common prefix of two hash id lists. */
static int common_prefix(const cJSON *a, const cJSON *b) {
  int n = 0;
  for (const cJSON *x = a ? a->child : NULL, *y = b ? b->child : NULL; x && y; x = x->next, y = y->next, n++)
    if (x->valuedouble != y->valuedouble) break;
  return n;
}

/* Slack when comparing recorded times, s (AIPerf's): a request at its subagent's start is not
 * "below" it, a parent turn 1 us before a subagent's end still joins it. */
#define T_SLACK 1e-6

/* A subagent request's time t on the trace's clock: below its subagent's start base_t it is
 * relative to that start (as AIPerf reads older captures); base_t 0: the trace's own requests. */
static double trace_time(double t, double base_t) { return base_t > 0 && t + T_SLACK < base_t ? t + base_t : t; }

/* Open chains a request is matched against: the most recently continued ones. */
#define CHAINS_SEEN 256
/* Slack of the overlap test, s: a recorded answer time rounded up by a millisecond does not make
 * the next turn "overlap" its own previous one. */
#define OVERLAP_SLACK 1e-3

/* A chain of a list being read: a session whose latest request a later one may continue. */
typedef struct {
  req last;    /* its latest request */
  int session; /* its session; -1: a session past the --num-prompts limit, its turns dropped */
  int turn;    /* its latest turn, 0.. */
  long used;   /* when it was last continued (the request's index in the list): the oldest is dropped first */
} chain;

/* The chain (index into ch[0..n)) that request q continues, -1: none, it starts a session. A chain
 * qualifies when q's prompt holds its history (q.in >= last in + out), q starts after its latest
 * answer ended (t + api_time, OVERLAP_SLACK; requests that overlapped in time are parallel chains,
 * as AIPerf splits a capture's flattened workers), and, where both have hash ids, q shares a leading
 * block with it. Of those, the longest shared prefix wins, then the latest continued. */
static int chain_of(const chain *ch, int n, const req *q) {
  int best = -1, best_lcp = -1;
  const bool qh = q->hash && q->hash->child; /* a non-empty list (not counted: it may be long) */
  for (int c = 0; c < n; c++) {
    const req *p = &ch[c].last;
    if (q->in < (long)p->in + p->out) continue;
    if (q->t + OVERLAP_SLACK < p->t + (p->api > 0 ? p->api : 0)) continue;
    const int lcp = common_prefix(q->hash, p->hash);
    if (qh && p->hash && p->hash->child && lcp == 0) continue;
    if (lcp > best_lcp || (lcp == best_lcp && ch[c].used > ch[best].used)) best = c, best_lcp = lcp;
  }
  return best;
}

/* Groups lines from .. R->n - 1 by session (stable: a session's turns keep their order; sessions
 * keep the order of their first turns), so that every session's turns are contiguous. pos[k] (k
 * < R->n - from), when given: line from + k's index after. Error: out of memory. */
static vstatus group_sessions(reader *R, int from, int *pos) {
  const int n = R->n - from;
  if (n == 0) return V_OK;
  /* the list's first line started its first session: every line's session is in [s0, R->sessions) */
  const int s0 = R->v[from].session, ns = R->sessions - s0;
  trace_line *tmp = malloc((size_t)n * sizeof *tmp);
  int *at = calloc((size_t)ns + 1, sizeof *at);
  if (!tmp || !at) { free(tmp); free(at); return VERR("%s: out of memory", R->file); }
  for (int k = 0; k < n; k++) at[R->v[from + k].session - s0 + 1]++;
  for (int x = 0; x < ns; x++) at[x + 1] += at[x];
  for (int k = 0; k < n; k++) {
    const int d = at[R->v[from + k].session - s0]++;
    tmp[d] = R->v[from + k];
    if (pos) pos[k] = from + d;
  }
  memcpy(R->v + from, tmp, (size_t)n * sizeof *tmp);
  free(tmp);
  free(at);
  return V_OK;
}

/* One list of requests (the trace's own, or a subagent's) into sessions. A request continues the
 * chain chain_of picks (a later turn: its new input, its pause from that chain's latest request);
 * else it starts a session at its recorded time: a first request, a context the agent cut (its
 * prompt shorter than every chain's history), or a parallel chain. The lines are then grouped by
 * session. base_t: a subagent's start (its requests' t below it are relative to it, as AIPerf reads
 * older captures), else 0. Subagent entries are skipped at the top (the caller reads them) and
 * refused inside one. own (top only, may be NULL): the list's requests in list order, each with its
 * line, *n_own of them. */
static vstatus read_chain(reader *R, const cJSON *list, const char *prefix, bool top, double base_t, own_req *own,
                          int *n_own) {
  chain ch[CHAINS_SEEN];
  int nch = 0, idx = -1, k = 0;
  const int from = R->n;
  const cJSON *e;
  cJSON_ArrayForEach(e, list) {
    idx++;
    char path[96];
    snprintf(path, sizeof path, "%srequests[%d]", prefix, idx);
    if (!cJSON_IsObject(e)) return VERR("%s:%ld: %s must be an object", R->file, R->lno, path);
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "type"));
    if (!type || (strcmp(type, "n") && strcmp(type, "s") && strcmp(type, "subagent")))
      return VERR("%s:%ld: %s.type must be \"n\", \"s\" or \"subagent\"", R->file, R->lno, path);
    if (!strcmp(type, "subagent")) {
      if (!top) return VERR("%s:%ld: %s: a subagent inside a subagent", R->file, R->lno, path);
      continue;
    }
    req q;
    VTRY(check_req(R, path, e, &q));
    q.t = trace_time(q.t, base_t);
    const int c = chain_of(ch, nch, &q);
    if (c >= 0 && ch[c].session < 0) { /* a later turn of a session past the limit: dropped with it */
      ch[c].last = q, ch[c].used = idx;
      continue;
    }
    if (c < 0) { /* a new session, in a chain of its own (the least recently continued one makes room) */
      /* past --num-prompts: not read, but kept as a dropped chain, so that its later turns are not
       * taken for turns of the sessions kept (parallel chains interleave) */
      const bool dropped = R->limit > 0 && R->sessions >= R->limit;
      if (!dropped) VTRY(push(R, &q, 0, (trace_line){.t_ms = q.t * 1e3, .in = q.in, .out = q.out, .session = R->sessions}));
      const bool full = nch == CHAINS_SEEN;
      int slot = full ? 0 : nch++;
      for (int x = 1; full && x < nch; x++)
        if (ch[x].used < ch[slot].used) slot = x;
      ch[slot] = (chain){.last = q, .session = dropped ? -1 : R->sessions++, .turn = 0, .used = idx};
      if (dropped) continue;
    } else {
      const req *prev = &ch[c].last;
      const double pause = q.think >= 0 ? q.think : prev->api >= 0 ? q.t - prev->t - prev->api : q.t - prev->t;
      const long fresh = q.in - ((long)prev->in + prev->out);
      VTRY(push(R, &q, common_prefix(q.hash, prev->hash),
                (trace_line){.t_ms = q.t * 1e3, .in = fresh > 1 ? (int)fresh : 1, .out = q.out, .session = ch[c].session,
                             .turn = ++ch[c].turn, .pause_ms = pause > 0 ? pause * 1e3 : 0}));
      ch[c].last = q, ch[c].used = idx;
    }
    if (own) own[k] = (own_req){q.t, q.api > 0 ? q.api : 0, 0};
    k++;
  }
  if (n_own) *n_own = k;
  int *pos = own && k ? malloc((size_t)k * sizeof *pos) : NULL;
  if (own && k && !pos) return VERR("%s: out of memory", R->file);
  const vstatus s = group_sessions(R, from, pos);
  for (int x = 0; s == V_OK && own && x < k; x++) own[x].line = pos[x];
  free(pos);
  return s;
}

/* A subagent's recorded end, s: its entry's t + duration_ms / 1000 when given, else the latest end
 * (t + api_time) of its requests (read_chain checked them; t below the entry's t is relative to it),
 * else its t (AIPerf's rule, weka_trace.py _sa_end_seconds). Error: duration_ms not a number of ms
 * >= 0 (null: not given, as AIPerf records a subagent launched in the background). */
static vstatus subagent_end(const reader *R, int idx, const cJSON *e, double t, double *end) {
  const cJSON *d = cJSON_GetObjectItemCaseSensitive(e, "duration_ms");
  if (d && !cJSON_IsNull(d)) {
    if (!cJSON_IsNumber(d) || !(d->valuedouble >= 0) || d->valuedouble > 1e12)
      return VERR("%s:%ld: requests[%d].duration_ms must be a number of ms >= 0", R->file, R->lno, idx);
    *end = t + d->valuedouble / 1e3;
    return V_OK;
  }
  *end = t;
  const cJSON *x;
  cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(e, "requests")) {
    const cJSON *qt = cJSON_GetObjectItemCaseSensitive(x, "t"), *api = cJSON_GetObjectItemCaseSensitive(x, "api_time");
    if (!cJSON_IsNumber(qt)) continue; /* past a --num-prompts cut: not read, not checked */
    const double start = trace_time(qt->valuedouble, t);
    *end = fmax(*end, start + (cJSON_IsNumber(api) && api->valuedouble > 0 ? api->valuedouble : 0));
  }
  return V_OK;
}


/* The join turn of a subagent that ended at `end` s: 1 + the index k into own[0..n_own) (the trace's
 * own requests in list order) of the first whose t is at or after it (T_SLACK), 0 when none is (the
 * subagent runs on beside its parent). */
static int join_turn(const own_req *own, int n_own, double end) {
  for (int k = 0; k < n_own; k++)
    if (own[k].t + T_SLACK >= end) return 1 + k;
  return 0;
}

/* The spawning turn of a subagent that started at `start` s: 1 + the index into own[] of the last
 * own request (in list order, as in join_turn) whose t is at or before it (T_SLACK), 0 when none is
 * (the subagent precedes every parent request: it starts at its recorded time). *gap: the recorded s
 * from that request's end (t + api_time, or t when api_time is absent) to `start`, >= 0. */
static int spawn_turn(const own_req *own, int n_own, double start, double *gap) {
  int found = 0;
  for (int k = 0; k < n_own; k++)
    if (own[k].t <= start + T_SLACK) found = 1 + k, *gap = fmax(0, start - own[k].t - own[k].api);
  return found;
}

/* Each subagent of `list` into sessions of its own (read_chain: its parallel chains are sessions
 * too), joined by the parent's turn at or after its end, every session's first turn spawned by the
 * parent's turn at or before its start: the first chain after the recorded gap, a later chain (a
 * parallel worker, or a context the subagent cut) that gap plus its own offset from the first
 * chain's start. own[n_own]: the trace's own requests in list order, each with its line. A spawner
 * at or after the join turn in list order (requests out of time order, or one request at both the
 * start and the end) would wait for the subagent that waits for it: then none. Every wait goes from
 * a later request of the list to an earlier one, so none is circular. */
static vstatus read_subagents(reader *R, const cJSON *list, int n_own, const own_req *own) {
  int idx = -1;
  const cJSON *e;
  cJSON_ArrayForEach(e, list) {
    idx++;
    const char *type = cJSON_IsObject(e) ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "type")) : NULL;
    if (!type || strcmp(type, "subagent")) continue;
    char prefix[48];
    snprintf(prefix, sizeof prefix, "requests[%d].", idx);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "t"), *inner = cJSON_GetObjectItemCaseSensitive(e, "requests");
    if (!cJSON_IsNumber(t) || !(t->valuedouble >= 0) || t->valuedouble > 1e9)
      return VERR("%s:%ld: requests[%d].t must be a number of s >= 0", R->file, R->lno, idx);
    if (!cJSON_IsArray(inner)) return VERR("%s:%ld: requests[%d].requests must be a list", R->file, R->lno, idx);
    const int from = R->n;
    VTRY(read_chain(R, inner, prefix, false, t->valuedouble, NULL, NULL));
    double end = t->valuedouble;
    VTRY(subagent_end(R, idx, e, t->valuedouble, &end));
    const int jk = join_turn(own, n_own, end);
    const int joiner = jk ? 1 + own[jk - 1].line : 0;
    for (int k = from; k < R->n; k++) R->v[k].joiner = joiner;
    double gap = 0;
    const int sk = from < R->n ? spawn_turn(own, n_own, t->valuedouble, &gap) : 0;
    if (!sk || (jk && sk >= jk)) continue;
    const double t_first = R->v[from].t_ms; /* the first chain's start (lines grouped: it leads) */
    for (int k = from; k < R->n; k++)
      if (R->v[k].turn == 0)
        R->v[k].spawner = 1 + own[sk - 1].line, R->v[k].pause_ms = gap * 1e3 + fmax(0, R->v[k].t_ms - t_first);
  }
  return V_OK;
}

/* A directory's trace id (a string, or a number as written): refused when an earlier trace had it.
 * Error: that, an id of another type, or out of memory. Absent: nothing to check. */
static vstatus note_id(reader *R, const cJSON *id) {
  if (!id) return V_OK;
  char num[64];
  const char *v = cJSON_IsString(id) ? id->valuestring : NULL;
  if (cJSON_IsNumber(id)) snprintf(num, sizeof num, "%.17g", id->valuedouble), v = num;
  if (!v) return VERR("%s:%ld: id must be a string or a number", R->file, R->lno);
  for (int i = 0; i < R->n_ids; i++)
    if (!strcmp(R->ids[i], v)) return VERR("%s:%ld: id \"%.64s\" names an earlier trace of the directory too", R->file, R->lno, v);
  if (R->n_ids == R->cap_ids) {
    const int cap = R->cap_ids ? R->cap_ids * 2 : 64;
    char **nv = cap < (1 << 24) ? realloc(R->ids, (size_t)cap * sizeof *nv) : NULL;
    if (!nv) return VERR("%s: out of memory", R->file);
    R->ids = nv, R->cap_ids = cap;
  }
  if (!(R->ids[R->n_ids] = strdup(v))) return VERR("%s: out of memory", R->file);
  R->n_ids++;
  return V_OK;
}

/* One trace object: its own requests (their parallel chains and cut contexts sessions of their
 * own), then each subagent's. *block: set by the first trace, the
 * same for the rest. */
static vstatus read_trace(reader *R, const cJSON *j, int *block) {
  if (!cJSON_IsObject(j)) return VERR("%s:%ld: not a trace object", R->file, R->lno);
  const cJSON *bs = cJSON_GetObjectItemCaseSensitive(j, "block_size"), *list = cJSON_GetObjectItemCaseSensitive(j, "requests");
  const cJSON *scope = cJSON_GetObjectItemCaseSensitive(j, "hash_id_scope");
  if (!cJSON_IsArray(list)) return VERR("%s:%ld: requests must be a list", R->file, R->lno);
  if (!is_count(bs) || bs->valuedouble > (1 << 20)) return VERR("%s:%ld: block_size must be an integer in [1, 2^20]", R->file, R->lno);
  if (scope && !(cJSON_IsString(scope) && !strcmp(scope->valuestring, "local")))
    return VERR("%s:%ld: hash_id_scope must be \"local\" (ids scoped to their trace)", R->file, R->lno);
  if (*block && *block != (int)bs->valuedouble)
    return VERR("%s:%ld: block_size %d, but an earlier trace of the file has %d", R->file, R->lno, (int)bs->valuedouble, *block);
  *block = (int)bs->valuedouble;
  if (R->dir) VTRY(note_id(R, cJSON_GetObjectItemCaseSensitive(j, "id")));
  const int first = R->n, n_list = cJSON_GetArraySize(list);
  own_req *own = malloc((size_t)(n_list > 0 ? n_list : 1) * sizeof *own);
  if (!own) return VERR("%s:%ld: out of memory for %d requests", R->file, R->lno, n_list);
  int n_own = 0;
  vstatus s = read_chain(R, list, "", true, 0, own, &n_own);
  if (s == V_OK) s = read_subagents(R, list, n_own, own);
  free(own);
  if (s == V_OK && R->n > first) R->trees++;
  return s;
}

/* The traces of one file's text (buf, len bytes, NUL-terminated) into R, R->file naming it. */
static vstatus read_text(reader *R, const char *buf, size_t len, int *block) {
  R->lno = 1;
  vstatus s = strlen(buf) == len ? V_OK : VERR("%s: a NUL byte in the trace", R->file);
  const char *p = buf;
  while (s == V_OK && (R->limit <= 0 || R->sessions < R->limit)) {
    for (; *p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'; p++) R->lno += *p == '\n';
    if (!*p) break;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(p, len - (size_t)(p - buf), &end, false);
    if (!j) {
      long at = R->lno;
      for (const char *q = p; end && q < end && *q; q++) at += *q == '\n';
      s = VERR("%s:%ld: not valid JSON (a trace object, or one per line)", R->file, at);
      break;
    }
    s = read_trace(R, j, block);
    cJSON_Delete(j);
    for (; p < end; p++) R->lno += *p == '\n';
    R->scope++;
  }
  return s;
}

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A directory of trace files, as AIPerf reads one: its own files named *.json (not its
 * subdirectories'), in byte order of their names, each holding traces as a file does. A symbolic
 * link or anything but a regular file under such a name is refused (nothing is opened outside the
 * directory), and two traces with the same "id" are (AIPerf refuses them too). Errors name the file. */
static vstatus read_dir(reader *R, const char *dir, int *block) {
  const int dfd = open(dir, O_RDONLY | O_DIRECTORY);
  DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
  if (!d) {
    if (dfd >= 0) close(dfd);
    return VERR("%s: cannot open the trace directory", dir);
  }
  char **names = NULL;
  int n = 0, cap = 0;
  vstatus s = V_OK;
  for (struct dirent *e; s == V_OK && (errno = 0, e = readdir(d));) {
    const size_t L = strlen(e->d_name);
    if (L < 6 || strcmp(e->d_name + L - 5, ".json") || e->d_name[0] == '.') continue;
    if (n == cap) {
      char **nn = cap < (1 << 20) ? realloc(names, (size_t)(cap ? cap * 2 : 64) * sizeof *nn) : NULL;
      if (!nn) { s = VERR("%s: out of memory (or more than 2^20 trace files)", dir); break; }
      names = nn, cap = cap ? cap * 2 : 64;
    }
    if (!(names[n] = strdup(e->d_name))) s = VERR("%s: out of memory", dir);
    else n++;
  }
  if (s == V_OK && errno) s = VERR("%s: cannot read the trace directory", dir); /* readdir's NULL on an error */
  if (s == V_OK && n == 0) s = VERR("%s: no *.json trace files in the directory", dir);
  if (s == V_OK) qsort(names, (size_t)n, sizeof *names, name_cmp);
  char path[4096];
  for (int i = 0; s == V_OK && i < n && (R->limit <= 0 || R->sessions < R->limit); i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    R->file = path;
    struct stat st;
    const int fd = openat(dfd, names[i], O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    FILE *f = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? fdopen(fd, "rb") : NULL;
    if (!f) {
      if (fd >= 0) close(fd);
      s = VERR("%s: not a regular file the directory holds (a link, or unreadable): not read", path);
      break;
    }
    char *buf;
    size_t len;
    if ((s = slurp_fp(f, path, &buf, &len))) break;
    s = read_text(R, buf, len, block);
    free(buf);
  }
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
  closedir(d);
  R->file = dir;
  return s;
}

vstatus agentx_read(const char *file, int limit, trace_line **out, int *n_out, int *block) {
  reader R = {.file = file, .lno = 1, .limit = limit, .dir = is_dir(file)};
  *block = 0;
  vstatus s;
  if (R.dir) {
    s = read_dir(&R, file, block);
  } else {
    char *buf;
    size_t len;
    VTRY(slurp(file, &buf, &len));
    s = read_text(&R, buf, len, block);
    free(buf);
  }
  if (s == V_OK && R.n == 0) s = VERR("%s: no requests in the trace", file);
  for (int i = 0; i < R.n_ids; i++) free(R.ids[i]);
  free(R.ids);
  if (s != V_OK) {
    trace_free(R.v, R.n);
    return s;
  }
  *out = R.v;
  *n_out = R.n;
  return V_OK;
}
