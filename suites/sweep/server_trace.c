/* Mooncake traces and vouch's multi-turn sessions (suites/sweep/server_trace.h). */
#include "suites/sweep/server_trace.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites/engine/record.h"

void trace_free(trace_line *v, int n) {
  for (int i = 0; i < n; i++) free(v[i].hash);
  free(v);
}

vstatus trace_sessions_fit(const char *src, const trace_line *v, int n, int max_len) {
  long total = 0;
  for (int i = 0; i < n; i++) {
    total = (v[i].turn == 0 ? 0 : total) + v[i].in + v[i].out;
    if (max_len > 0 && total > max_len)
      return VERR("%s: session %d needs %ld tokens by turn %d, more than the server's max_model_len %d", src, v[i].session,
                  total, v[i].turn + 1, max_len);
  }
  return V_OK;
}

vstatus trace_tree_counts(const trace_line *v, int n, int *trees, int *joins) {
  bool *waits = calloc((size_t)(n > 0 ? n : 1), sizeof *waits); /* [n] the line is a join turn */
  if (!waits) return VERR("out of memory for %d turns", n);
  *trees = *joins = 0;
  for (int i = 0; i < n; i++) {
    if (v[i].tree + 1 > *trees) *trees = v[i].tree + 1;
    const int j = v[i].joiner - 1;
    if (j >= 0 && j < n && !waits[j]) waits[j] = true, ++*joins;
  }
  free(waits);
  return V_OK;
}

/* Session ids seen so far: their text, index = position (linear probing on a power-of-two table). */
typedef struct {
  char **key;  /* [cap] NULL: free */
  int *idx;    /* [cap] */
  int cap, n;
} id_table;

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* The index of `key` (a new one when unseen), -1 on out of memory. */
static int id_lookup(id_table *t, const char *key) {
  if (2 * (t->n + 1) > t->cap) {
    const int cap = t->cap ? t->cap * 2 : 64;
    char **nk = calloc((size_t)cap, sizeof *nk);
    int *ni = calloc((size_t)cap, sizeof *ni);
    if (!nk || !ni) { free(nk); free(ni); return -1; }
    for (int i = 0; i < t->cap; i++) {
      if (!t->key[i]) continue;
      uint64_t h = hash_str(t->key[i]) & (uint64_t)(cap - 1);
      while (nk[h]) h = (h + 1) & (uint64_t)(cap - 1);
      nk[h] = t->key[i], ni[h] = t->idx[i];
    }
    free(t->key); free(t->idx);
    t->key = nk, t->idx = ni, t->cap = cap;
  }
  uint64_t h = hash_str(key) & (uint64_t)(t->cap - 1);
  while (t->key[h]) {
    if (!strcmp(t->key[h], key)) return t->idx[h];
    h = (h + 1) & (uint64_t)(t->cap - 1);
  }
  if (!(t->key[h] = strdup(key))) return -1;
  t->idx[h] = t->n;
  return t->n++;
}

static void id_free(id_table *t) {
  for (int i = 0; i < t->cap; i++) free(t->key[i]);
  free(t->key); free(t->idx);
}

static bool is_count(const cJSON *j) {
  return cJSON_IsNumber(j) && j->valuedouble >= 1 && j->valuedouble <= 1e7 && j->valuedouble == floor(j->valuedouble);
}

/* One line into *t (session: its index when sessions, else -1). */
static vstatus parse_line(const char *file, long lno, const char *p, bool sessions, id_table *ids, trace_line *t) {
  cJSON *j = cJSON_Parse(p);
  const cJSON *ts = cJSON_GetObjectItemCaseSensitive(j, "timestamp");
  const cJSON *in = cJSON_GetObjectItemCaseSensitive(j, "input_length");
  const cJSON *ou = cJSON_GetObjectItemCaseSensitive(j, "output_length");
  const cJSON *h = cJSON_GetObjectItemCaseSensitive(j, "hash_ids");
  const cJSON *sid = cJSON_GetObjectItemCaseSensitive(j, "session_id");
  const cJSON *pause = cJSON_GetObjectItemCaseSensitive(j, "pause_ms");
  vstatus s = V_OK;
  if (!cJSON_IsObject(j)) s = VERR("%s:%ld: not a JSON object", file, lno);
  else if (!cJSON_IsNumber(ts) || !(ts->valuedouble >= 0) || ts->valuedouble > 1e15)
    s = VERR("%s:%ld: 'timestamp' must be a number of ms >= 0", file, lno);
  else if (!is_count(in)) s = VERR("%s:%ld: 'input_length' must be an integer >= 1", file, lno);
  else if (!is_count(ou)) s = VERR("%s:%ld: 'output_length' must be an integer >= 1", file, lno);
  else if (h && !cJSON_IsArray(h)) s = VERR("%s:%ld: 'hash_ids' must be a list of integers", file, lno);
  else if (pause && (!cJSON_IsNumber(pause) || !(pause->valuedouble >= 0) || pause->valuedouble > 1e9))
    s = VERR("%s:%ld: 'pause_ms' must be a number of ms >= 0", file, lno);
  else if (sid && !(cJSON_IsString(sid) && strlen(sid->valuestring) <= 200) &&
           !(cJSON_IsNumber(sid) && sid->valuedouble == floor(sid->valuedouble) && fabs(sid->valuedouble) < 1e15))
    s = VERR("%s:%ld: 'session_id' must be a string (at most 200 characters) or an integer", file, lno);
  if (s) { cJSON_Delete(j); return s; }
  *t = (trace_line){.t_ms = ts->valuedouble, .in = (int)in->valuedouble, .out = (int)ou->valuedouble, .session = -1,
                    .pause_ms = pause ? pause->valuedouble : 0};
  if (sessions) {
    char key[224];
    if (cJSON_IsString(sid)) snprintf(key, sizeof key, "s:%s", sid->valuestring);
    else if (sid) snprintf(key, sizeof key, "n:%.0f", sid->valuedouble);
    else snprintf(key, sizeof key, "line:%ld", lno); /* no id: a session of its own */
    if ((t->session = id_lookup(ids, key)) < 0) s = VERR("%s: out of memory", file);
  }
  const int nh = h ? cJSON_GetArraySize(h) : 0;
  t->hash = s ? NULL : malloc((size_t)(nh ? nh : 1) * sizeof *t->hash);
  if (!s && !t->hash) s = VERR("%s: out of memory", file);
  const cJSON *e;
  int k = 0;
  if (!s && h) cJSON_ArrayForEach(e, h) {
    if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || fabs(e->valuedouble) > 9e18) {
      s = VERR("%s:%ld: 'hash_ids'[%d] is not an integer", file, lno, k);
      break;
    }
    t->hash[k++] = (int64_t)e->valuedouble;
  }
  t->n_hash = k;
  if (s) { free(t->hash); t->hash = NULL; }
  cJSON_Delete(j);
  return s;
}

typedef struct {
  trace_line t;
  long seq; /* line order */
} keyed;

static int by_session(const void *a, const void *b) {
  const keyed *x = a, *y = b;
  if (x->t.session != y->t.session) return x->t.session < y->t.session ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

vstatus trace_read(const char *file, int limit, bool sessions, trace_line **out, int *n_out) {
  FILE *f = fopen(file, "r");
  if (!f) return VERR("%s: cannot open the trace", file);
  keyed *v = NULL;
  int n = 0, cap = 0;
  char *line = NULL;
  size_t lcap = 0;
  long lno = 0;
  id_table ids = {0};
  vstatus s = V_OK;
  while (s == V_OK && (sessions || limit <= 0 || n < limit) && getline(&line, &lcap, f) > 0) {
    lno++;
    const char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (!*p || *p == '\n' || *p == '\r' || *p == '#') continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 256;
      keyed *nv = cap < (1 << 24) ? realloc(v, (size_t)cap * sizeof *nv) : NULL;
      if (!nv) { s = VERR("%s: out of memory (or more than %d lines)", file, 1 << 23); break; }
      v = nv;
    }
    if ((s = parse_line(file, lno, p, sessions, &ids, &v[n].t)) != V_OK) break;
    v[n].seq = n;
    if (!sessions && n && v[n].t.t_ms < v[n - 1].t.t_ms) {
      free(v[n].t.hash);
      s = VERR("%s:%ld: 'timestamp' goes backwards", file, lno);
      break;
    }
    n++;
  }
  free(line);
  fclose(f);
  id_free(&ids);
  if (s == V_OK && n == 0) s = VERR("%s: no requests in the trace", file);
  trace_line *o = s ? NULL : malloc((size_t)n * sizeof *o);
  if (s == V_OK && !o) s = VERR("%s: out of memory", file);
  if (s != V_OK) {
    for (int i = 0; i < n; i++) free(v[i].t.hash);
    free(v);
    return s;
  }
  int m = 0;
  if (sessions) {
    qsort(v, (size_t)n, sizeof *v, by_session);
    for (int i = 0; i < n; i++) {
      if (limit > 0 && v[i].t.session >= limit) { free(v[i].t.hash); continue; }
      v[i].t.turn = i > 0 && v[i - 1].t.session == v[i].t.session ? o[m - 1].turn + 1 : 0;
      o[m++] = v[i].t;
    }
  } else {
    for (int i = 0; i < n; i++) o[m] = v[i].t, o[m].session = m, m++;
  }
  free(v);
  *out = o;
  *n_out = m;
  return V_OK;
}

/* ---- synthetic sessions ---- */

vstatus session_gen_parse(const char *spec, session_gen *g) {
  *g = (session_gen){.sessions = 8, .turns = 4, .input = 256, .delta = 64, .output = 64, .system = 0,
                     .pause_ms = 500, .gap_ms = 100};
  if (strncmp(spec, "gen", 3) || (spec[3] && spec[3] != ':'))
    return VERR("--sessions '%s': expected a file or gen:sessions=N,turns=T,input=I,delta=D,output=O,pause=MS,gap=MS,system=S", spec);
  char buf[400];
  snprintf(buf, sizeof buf, "%s", spec[3] ? spec + 4 : "");
  char *save = NULL;
  for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(t, '='), *end;
    if (!eq) return VERR("--sessions: '%s' is not KEY=VALUE", t);
    *eq = 0;
    const double v = strtod(eq + 1, &end);
    if (end == eq + 1 || *end || !(v >= 0) || v > 1e7) return VERR("--sessions: %s needs a number in [0, 1e7]", t);
    const bool whole = v == floor(v);
    if (!strcmp(t, "sessions") && whole && v >= 1) g->sessions = (int)v;
    else if (!strcmp(t, "turns") && whole && v >= 1 && v <= 1000) g->turns = (int)v;
    else if (!strcmp(t, "input") && whole && v >= 1) g->input = (int)v;
    else if (!strcmp(t, "delta") && whole && v >= 1) g->delta = (int)v;
    else if (!strcmp(t, "output") && whole && v >= 1) g->output = (int)v;
    else if (!strcmp(t, "system") && whole) g->system = (int)v;
    else if (!strcmp(t, "pause")) g->pause_ms = v;
    else if (!strcmp(t, "gap")) g->gap_ms = v;
    else return VERR("--sessions: '%s=%s' (keys: sessions, turns, input, delta, output >= 1 integers; turns <= 1000; "
                     "system integer; pause, gap ms)", t, eq + 1);
  }
  return V_OK;
}

static double unif(uint64_t *st) { return (double)(rec_rng_next(st) >> 11) * 0x1.0p-53; }
static int around(uint64_t *st, int mean) {
  const int v = (int)floor(mean * (0.5 + unif(st)));
  return v >= 1 ? v : 1;
}

vstatus session_generate(const session_gen *g, uint64_t seed, int block, trace_line **out, int *n_out) {
  assert(block >= 1);
  const long n = (long)g->sessions * g->turns;
  if (n > (1 << 22)) return VERR("--sessions: %d sessions x %d turns is too many", g->sessions, g->turns);
  trace_line *v = calloc((size_t)n, sizeof *v);
  if (!v) return VERR("--sessions: out of memory");
  uint64_t st = seed ^ 0x5E5510A5ull;
  const int sys_blocks = g->system / block;
  double t = 0;
  int m = 0;
  for (int s = 0; s < g->sessions; s++) {
    if (s) t += -log(1 - unif(&st)) * g->gap_ms;
    for (int k = 0; k < g->turns; k++, m++) {
      trace_line *L = &v[m];
      *L = (trace_line){.t_ms = floor(t), .in = around(&st, k ? g->delta : g->input), .out = around(&st, g->output),
                        .session = s, .turn = k, .pause_ms = k ? floor(-log(1 - unif(&st)) * g->pause_ms) : 0};
      const int nh = k == 0 && sys_blocks > 0 ? (sys_blocks < L->in / block ? sys_blocks : L->in / block) : 0;
      L->hash = malloc((size_t)(nh ? nh : 1) * sizeof *L->hash);
      if (!L->hash) { trace_free(v, m); return VERR("--sessions: out of memory"); }
      for (int b = 0; b < nh; b++) L->hash[b] = b; /* the shared system prompt's blocks */
      L->n_hash = nh;
    }
  }
  *out = v;
  *n_out = m;
  return V_OK;
}

vstatus trace_write(const char *file, const trace_line *v, int n) {
  FILE *f = fopen(file, "w");
  if (!f) return VERR("%s: cannot write", file);
  bool ok = true;
  for (int i = 0; i < n && ok; i++) {
    const trace_line *L = &v[i];
    ok = fprintf(f, "{\"session_id\": \"s%d\", \"timestamp\": %.0f, \"input_length\": %d, \"output_length\": %d, "
                    "\"pause_ms\": %.0f, \"hash_ids\": [", L->session, L->t_ms, L->in, L->out, L->pause_ms) > 0;
    for (int b = 0; b < L->n_hash && ok; b++) ok = fprintf(f, "%s%lld", b ? ", " : "", (long long)L->hash[b]) > 0;
    ok = ok && fputs("]}\n", f) >= 0;
  }
  if (fclose(f) != 0) ok = false;
  return ok ? V_OK : VERR("%s: cannot write", file);
}
