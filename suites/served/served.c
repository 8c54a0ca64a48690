/* Client of an OpenAI-compatible server over libcurl (suites/served/served.h). */
#include "suites/served/served.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "model/model.h"

static void curl_once(void) {
  static bool done;
  if (!done) curl_global_init(CURL_GLOBAL_DEFAULT), done = true;
}

/* served_conn_init with the option the URL came from named in its errors. */
static vstatus conn_init(served_conn *c, const char *url, double timeout_s, const char *option) {
  memset(c, 0, sizeof *c);
  if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8))
    return VERR("%s '%s': expected an http:// or https:// URL", option, url);
  if (strlen(url) >= sizeof c->base) return VERR("%s: URL longer than %zu characters", option, sizeof c->base - 1);
  snprintf(c->base, sizeof c->base, "%s", url);
  size_t n = strlen(c->base);
  while (n > 0 && c->base[n - 1] == '/') c->base[--n] = 0;
  if (n >= 3 && !strcmp(c->base + n - 3, "/v1")) c->base[n -= 3] = 0; /* "http://h:8000/v1" as OpenAI clients take it */
  const char *sep = strstr(c->base, "://");
  if (!sep || !sep[3]) return VERR("%s: no host after the scheme", option); /* "http://", "http:///v1" */
  /* shown: without user:password@ and ?query */
  const char *scheme_end = sep + 3, *at = strchr(scheme_end, '@'), *slash = strchr(scheme_end, '/');
  const char *host = at && (!slash || at < slash) ? at + 1 : scheme_end;
  snprintf(c->shown, sizeof c->shown, "%.*s%s", (int)(scheme_end - c->base), c->base, host);
  char *q = strchr(c->shown, '?');
  if (q) *q = 0;
  const char *key = getenv("VOUCH_SERVER_API_KEY");
  if (!key || !*key) key = getenv("OPENAI_API_KEY");
  if (key && *key) {
    if (strlen(key) > 1000 || strpbrk(key, "\r\n")) return VERR("the API key in the environment is malformed");
    snprintf(c->auth, sizeof c->auth, "Authorization: Bearer %s", key);
  }
  c->timeout_s = timeout_s;
  curl_once();
  return V_OK;
}

vstatus served_conn_init(served_conn *c, const char *url, double timeout_s) {
  return conn_init(c, url, timeout_s, "--server");
}

vstatus served_url_check(const char *option, const char *url) {
  served_conn c;
  return url ? conn_init(&c, url, 0, option) : V_OK;
}

typedef struct {
  char *p;
  size_t n, cap;
} growbuf;

static bool grow_add(growbuf *b, const char *d, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t cap = (b->n + n + 1) * 2;
    char *nb = realloc(b->p, cap);
    if (!nb) return false;
    b->p = nb, b->cap = cap;
  }
  memcpy(b->p + b->n, d, n);
  b->n += n;
  b->p[b->n] = 0;
  return true;
}

static size_t on_body(char *d, size_t sz, size_t nm, void *u) {
  return grow_add(u, d, sz * nm) ? sz * nm : 0;
}

/* The message of a failed transfer, naming the URL. */
static void transfer_error(char *out, size_t n, CURLcode rc, const char *errbuf, const char *shown, const char *path) {
  /* a message longer than n - 1 characters is cut there (snprintf), still one terminated line */
  if (rc == CURLE_COULDNT_CONNECT)
    snprintf(out, n, "cannot connect to %s%s: %s (is the server running there?)", shown, path,
             errbuf[0] ? errbuf : "connection refused");
  else if (rc == CURLE_OPERATION_TIMEDOUT)
    snprintf(out, n, "%s%s: no complete answer within the timeout (%s)", shown, path, errbuf);
  else
    snprintf(out, n, "%s%s: %s%s%s", shown, path, curl_easy_strerror(rc), errbuf[0] ? ": " : "", errbuf);
  vtext_one_line(out);
}

/* The message of an HTTP error body: OpenAI's error.message (or vLLM's/others' "message",
 * "detail"), else the body's first 200 characters. */
static void http_error(char *out, size_t n, long code, const char *body, const char *shown, const char *path) {
  const char *msg = NULL;
  cJSON *j = body ? cJSON_Parse(body) : NULL;
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
  const cJSON *m = cJSON_IsObject(e) ? cJSON_GetObjectItemCaseSensitive(e, "message") : e;
  if (!cJSON_IsString(m)) m = cJSON_GetObjectItemCaseSensitive(j, "message");
  if (!cJSON_IsString(m)) m = cJSON_GetObjectItemCaseSensitive(j, "detail");
  if (cJSON_IsString(m)) msg = m->valuestring;
  snprintf(out, n, "HTTP %ld from %s%s: %.200s", code, shown, path, msg ? msg : body && *body ? body : "(empty body)");
  vtext_one_line(out); /* an HTML error page spans lines */
  cJSON_Delete(j);
}

static struct curl_slist *headers(const served_conn *c, bool json) {
  struct curl_slist *h = NULL;
  if (json) h = curl_slist_append(h, "Content-Type: application/json");
  if (c->auth[0]) h = curl_slist_append(h, c->auth);
  return h;
}

vstatus served_get(const served_conn *c, const char *path, char **body, long *code) {
  char url[640], err[CURL_ERROR_SIZE] = "";
  snprintf(url, sizeof url, "%s%s", c->base, path);
  CURL *e = curl_easy_init();
  if (!e) return VERR("curl_easy_init failed");
  growbuf b = {0};
  struct curl_slist *h = headers(c, false);
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, err);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)((c->timeout_s > 0 ? c->timeout_s : 60) * 1000));
  if (h) curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
  const CURLcode rc = curl_easy_perform(e);
  vstatus s = V_OK;
  if (rc != CURLE_OK) {
    char msg[400];
    transfer_error(msg, sizeof msg, rc, err, c->shown, path);
    s = VERR("%s", msg);
  } else {
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, code);
  }
  curl_slist_free_all(h);
  curl_easy_cleanup(e);
  if (s == V_OK && !b.p) b.p = calloc(1, 1);
  if (s != V_OK || !b.p) {
    free(b.p);
    return s ? s : VERR("out of memory");
  }
  *body = b.p;
  return V_OK;
}

vstatus served_models(const served_conn *c, char *model, int model_cap, int *vocab, int *max_len, served_synth *synth) {
  char *body = NULL;
  long code = 0;
  VTRY(served_get(c, "/v1/models", &body, &code));
  if (code != 200) {
    char msg[400];
    http_error(msg, sizeof msg, code, body, c->shown, "/v1/models");
    free(body);
    return VERR("%s", msg);
  }
  vstatus s = served_models_parse(body, c->shown, model, model_cap, vocab, max_len, synth);
  free(body);
  return s;
}

vstatus served_models_parse(const char *body, const char *shown, char *model, int model_cap, int *vocab, int *max_len,
                            served_synth *synth) {
  cJSON *j = cJSON_Parse(body);
  const cJSON *data = cJSON_GetObjectItemCaseSensitive(j, "data"), *m;
  if (!cJSON_IsArray(data) || cJSON_GetArraySize(data) == 0) {
    cJSON_Delete(j);
    return VERR("%s/v1/models: no 'data' list of models in the answer", shown);
  }
  char names[400] = "";
  const cJSON *found = NULL;
  cJSON_ArrayForEach(m, data) {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "id");
    if (!cJSON_IsString(id)) continue;
    if (strlen(names) + strlen(id->valuestring) + 3 < sizeof names)
      snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? ", " : "", id->valuestring);
    if (!found && (!model[0] || !strcmp(model, id->valuestring))) found = m;
  }
  if (!found) {
    vstatus s = model[0] ? VERR("%s serves no model '%s' (it serves: %s): fix --server-model", shown, model, names)
                         : VERR("%s/v1/models: no model has an 'id'", shown);
    cJSON_Delete(j);
    return s;
  }
  const char *fid = cJSON_GetObjectItemCaseSensitive(found, "id")->valuestring;
  if (strlen(fid) >= (size_t)model_cap) { /* cut, it would name another model in every request */
    vstatus s = VERR("%s/v1/models: the model id '%.60s...' is longer than %d characters", shown, fid, model_cap - 1);
    cJSON_Delete(j);
    return s;
  }
  snprintf(model, (size_t)model_cap, "%s", fid);
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(found, "vocab_size");
  const cJSON *ml = cJSON_GetObjectItemCaseSensitive(found, "max_model_len");
  *vocab = cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble < 1e9 ? (int)v->valuedouble : 0;
  *max_len = cJSON_IsNumber(ml) && ml->valuedouble >= 1 && ml->valuedouble < 1e9 ? (int)ml->valuedouble : 0;
  if (synth) {
    const cJSON *vs = cJSON_GetObjectItemCaseSensitive(found, "vouch_synth");
    const cJSON *sd = cJSON_GetObjectItemCaseSensitive(vs, "seed"), *ly = cJSON_GetObjectItemCaseSensitive(vs, "layers");
    /* range first: a cast of a double outside the type's range is undefined */
    synth->given = cJSON_IsNumber(sd) && sd->valuedouble >= 0 && sd->valuedouble < 9007199254740992.0 &&
                   cJSON_IsNumber(ly) && ly->valuedouble >= 1 && ly->valuedouble <= 1000;
    synth->seed = synth->given ? (uint64_t)sd->valuedouble : 0;
    synth->layers = synth->given ? (int)ly->valuedouble : 0;
  }
  cJSON_Delete(j);
  return V_OK;
}

const char *served_top_problem(const served_top *t, int V, char *buf, size_t cap) {
  double mass = 0;
  for (int k = 0; k < t->n; k++) {
    if (t->id[k] >= V) snprintf(buf, cap, "logprobs.top_logprobs names token_id:%d, outside the vocabulary of %d", t->id[k], V);
    else if (t->lp[k] > 1e-6) snprintf(buf, cap, "logprobs.top_logprobs gives token_id:%d the logprob %g, above 0", t->id[k], t->lp[k]);
    else {
      mass += exp(t->lp[k]);
      continue;
    }
    return buf;
  }
  if (mass > 1 + 1e-4) {
    snprintf(buf, cap, "logprobs.top_logprobs hold a mass of %.6f, above 1", mass);
    return buf;
  }
  return NULL;
}

vstatus served_target_open(served_target *t, const char *url, const char *model, double timeout_s, int vocab,
                           const struct ds_model_s *m) {
  memset(t, 0, sizeof *t);
  VTRY(served_conn_init(&t->conn, url, timeout_s));
  snprintf(t->model, sizeof t->model, "%s", model ? model : "");
  VTRY(served_models(&t->conn, t->model, sizeof t->model, &t->vocab, &t->max_len, &t->synth));
  if (t->vocab && t->vocab != vocab)
    return VERR("server %s: model '%s' has vocab_size %d, the model %s has %d: it does not serve that checkpoint",
                t->conn.shown, t->model, t->vocab, m->source, vocab);
  if (t->synth.given && m->is_synthetic &&
      (t->synth.seed != m->seed || t->synth.layers != m->cfg.num_hidden_layers))
    return VERR("server %s: model '%s' is synthesized with seed %llu and %d layers, this suite opened %s: not the same "
                "checkpoint (give both sides the same seed and layers: vouch serve --seed / --layers)", t->conn.shown,
                t->model, (unsigned long long)t->synth.seed, t->synth.layers, m->source);
  snprintf(t->path, sizeof t->path, "server:%.150s", t->model);
  return V_OK;
}

/* Value of the series starting at line p ("name{labels} value" or "name value"), its labels in lab. */
static bool series(const char *p, const char *name, const char **lab, size_t *lab_n, double *v) {
  const size_t n = strlen(name);
  if (strncmp(p, name, n) || (p[n] != '{' && p[n] != ' ')) return false;
  const char *q = p + n;
  *lab = q, *lab_n = 0;
  if (*q == '{') {
    const char *e = strchr(q, '}');
    if (!e) return false;
    *lab_n = (size_t)(e - q);
    q = e + 1;
  }
  char *end;
  *v = strtod(q, &end);
  return end != q;
}

double served_prom_sum(const char *text, const char *name) {
  double sum = NAN;
  for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
    const char *lab;
    size_t ln;
    double v;
    if (*p != '#' && series(p, name, &lab, &ln, &v)) sum = isnan(sum) ? v : sum + v;
  }
  return sum;
}

vstatus served_metrics_read(const served_conn *c, served_metrics *m) {
  memset(m, 0, sizeof *m);
  char *body = NULL;
  long code = 0;
  VTRY(served_get(c, "/metrics", &body, &code));
  if (code != 200) {
    free(body);
    return V_OK;
  }
  served_metrics_parse(body, m);
  free(body);
  return V_OK;
}

void served_metrics_parse(const char *body, served_metrics *m) {
  memset(m, 0, sizeof *m);
  m->have = true;
  m->drafts = served_prom_sum(body, "vllm:spec_decode_num_drafts_total");
  m->draft_tokens = served_prom_sum(body, "vllm:spec_decode_num_draft_tokens_total");
  m->accepted = served_prom_sum(body, "vllm:spec_decode_num_accepted_tokens_total");
  m->have_spec = !isnan(m->drafts) && !isnan(m->draft_tokens) && !isnan(m->accepted);
  const char *pp = "vllm:spec_decode_num_accepted_tokens_per_pos_total";
  for (const char *p = body; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
    const char *lab, *ps;
    size_t ln;
    double v;
    if (*p == '#' || !series(p, pp, &lab, &ln, &v)) continue;
    ps = strstr(lab, "position=\"");
    if (!ps || ps > lab + ln) continue;
    char *end;
    const long pos = strtol(ps + 10, &end, 10); /* atoi's overflow is undefined */
    if (end == ps + 10 || pos < 0 || pos >= SERVED_MAX_POS) continue;
    m->per_pos[pos] += v;
    if (pos + 1 > m->n_pos) m->n_pos = pos + 1;
  }
  m->forward_s = served_prom_sum(body, "vouch:decode_seconds_total");
  m->forward_steps = served_prom_sum(body, "vouch:decode_steps_total");
  m->have_forward = !isnan(m->forward_s) && !isnan(m->forward_steps);
}

/* ---- streamed completions on curl multi ---- */

typedef struct {
  served_req *r;
  CURL *e;
  struct curl_slist *h;
  char *body;            /* request JSON */
  growbuf line;          /* SSE bytes not yet split into lines */
  growbuf err_body;      /* the body of an HTTP error */
  long http;             /* status, once known */
  bool done_seen, finish_seen, failed;
  char errbuf[CURL_ERROR_SIZE];
} xfer;

static void req_fail(served_req *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void req_fail(served_req *r, const char *fmt, ...) {
  if (r->error[0]) return; /* the first reason stays */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->error, sizeof r->error, fmt, ap);
  va_end(ap);
  vtext_one_line(r->error); /* it quotes the server */
}

/* The id of a logprobs token name "token_id:N" (vLLM's return_tokens_as_token_ids, vouch serve);
 * -1 for anything else (a token named by its text). */
static int32_t lp_token_id(const char *name) {
  if (!name || strncmp(name, "token_id:", 9)) return -1;
  char *end;
  const long v = strtol(name + 9, &end, 10);
  return end != name + 9 && !*end && v >= 0 && v < 2147483647L ? (int32_t)v : -1;
}

/* Adds (id, lp) to t, which stays sorted most likely first, without repeats, at most cap entries. */
static void top_add(served_top *t, int32_t id, double lp, int cap) {
  if (isnan(lp)) return;
  for (int k = 0; k < t->n; k++)
    if (t->id[k] == id) return;
  int k = t->n;
  if (k == cap) {
    if (!(lp > t->lp[k - 1])) return;
    k--;
  } else {
    t->n++;
  }
  for (; k > 0 && t->lp[k - 1] < lp; k--) t->id[k] = t->id[k - 1], t->lp[k] = t->lp[k - 1];
  t->id[k] = id, t->lp[k] = (float)lp;
}

/* The logprobs (OpenAI completions shape: tokens, token_logprobs, top_logprobs) of the n tokens an
 * event carried, into r->top[at .. at + n). A position whose names are not all token ids is left
 * unknown (n = 0): an alternative named by text could be the most likely one. */
static void keep_logprobs(served_req *r, const cJSON *lp, int at, int n) {
  const cJSON *toks = cJSON_GetObjectItemCaseSensitive(lp, "tokens");
  const cJSON *tlp = cJSON_GetObjectItemCaseSensitive(lp, "token_logprobs");
  const cJSON *top = cJSON_GetObjectItemCaseSensitive(lp, "top_logprobs");
  const int cap = r->logprobs + 1 < SERVED_TOP_MAX ? r->logprobs + 1 : SERVED_TOP_MAX;
  for (int i = 0; i < n; i++) {
    served_top *t = &r->top[at + i];
    memset(t, 0, sizeof *t);
    t->chosen_lp = NAN;
    bool named = true; /* every name is a token id */
    const cJSON *d = cJSON_IsArray(top) ? cJSON_GetArrayItem(top, i) : NULL, *e;
    if (cJSON_IsObject(d)) cJSON_ArrayForEach(e, d) {
        const int32_t id = lp_token_id(e->string);
        t->given++;
        if (id < 0 || !cJSON_IsNumber(e)) named = false;
        else top_add(t, id, e->valuedouble, cap);
      }
    const cJSON *nm = cJSON_IsArray(toks) ? cJSON_GetArrayItem(toks, i) : NULL;
    const cJSON *v = cJSON_IsArray(tlp) ? cJSON_GetArrayItem(tlp, i) : NULL;
    if (cJSON_IsString(nm) && cJSON_IsNumber(v)) {
      const int32_t id = lp_token_id(nm->valuestring);
      if (id < 0) named = false;
      else top_add(t, id, v->valuedouble, cap), t->chosen_lp = (float)v->valuedouble;
    }
    if (!named) t->n = 0;
  }
}

/* Appends a received id to r->ids (and an empty r->top entry when logprobs are asked). */
static bool keep_id(served_req *r, double d) {
  if (r->n_tokens == r->cap_ids) {
    const int cap = r->cap_ids ? r->cap_ids * 2 : 64;
    int32_t *ni = cap < (1 << 26) ? realloc(r->ids, (size_t)cap * sizeof *ni) : NULL;
    if (!ni) return false;
    r->ids = ni;
    if (r->logprobs > 0) {
      served_top *nt = realloc(r->top, (size_t)cap * sizeof *nt);
      if (!nt) return false;
      r->top = nt;
    }
    r->cap_ids = cap;
  }
  r->ids[r->n_tokens] = d >= 0 && d < 2147483647.0 ? (int32_t)d : -1; /* judged by the caller */
  if (r->logprobs > 0) r->top[r->n_tokens] = (served_top){.chosen_lp = NAN};
  return true;
}

static void on_event(xfer *x, const char *data, double now) {
  served_req *r = x->r;
  if (!strcmp(data, "[DONE]")) {
    x->done_seen = true;
    return;
  }
  cJSON *j = cJSON_Parse(data);
  const cJSON *err = cJSON_GetObjectItemCaseSensitive(j, "error");
  const cJSON *ch = cJSON_GetObjectItemCaseSensitive(j, "choices");
  const cJSON *c0 = cJSON_IsArray(ch) ? cJSON_GetArrayItem(ch, 0) : NULL;
  if (!cJSON_IsObject(j)) {
    req_fail(r, "a stream event is not JSON: %.80s", data);
  } else if (err) {
    const cJSON *m = cJSON_IsObject(err) ? cJSON_GetObjectItemCaseSensitive(err, "message") : err;
    req_fail(r, "the server reported an error mid-stream: %.200s", cJSON_IsString(m) ? m->valuestring : "(no message)");
  } else if (c0) {
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(c0, "token_ids");
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(c0, "text");
    const cJSON *fin = cJSON_GetObjectItemCaseSensitive(c0, "finish_reason");
    if (cJSON_IsArray(ids)) {
      const int at = r->n_tokens; /* this event's first position */
      const cJSON *t;
      cJSON_ArrayForEach(t, ids) {
        if (!cJSON_IsNumber(t)) { req_fail(r, "token_ids holds a non-number"); break; }
        if (r->n_tokens < 8 && r->n_tokens >= 0)
          r->first_tokens[r->n_tokens] = t->valuedouble >= 0 && t->valuedouble < 2147483647.0 ? (int32_t)t->valuedouble : -1;
        if (r->keep_ids && !keep_id(r, t->valuedouble)) { req_fail(r, "out of memory for the token ids"); break; }
        r->n_tokens++;
      }
      const cJSON *lp = cJSON_GetObjectItemCaseSensitive(c0, "logprobs");
      const int n = r->n_tokens - at; /* the ids taken (a non-number stops them) */
      if (r->keep_ids && r->logprobs > 0 && cJSON_IsObject(lp)) keep_logprobs(r, lp, at, n);
      if (n > 0) {
        if (r->n_chunks == r->cap_chunks) {
          const int cap = r->cap_chunks ? r->cap_chunks * 2 : 64;
          double *nt = realloc(r->chunk_t, (size_t)cap * sizeof *nt);
          if (nt) r->chunk_t = nt;
          int *nn = realloc(r->chunk_n, (size_t)cap * sizeof *nn);
          if (nn) r->chunk_n = nn;
          if (!nt || !nn) { req_fail(r, "out of memory"); cJSON_Delete(j); return; }
          r->cap_chunks = cap;
        }
        r->chunk_t[r->n_chunks] = now;
        r->chunk_n[r->n_chunks++] = n;
        if (r->n_chunks == 1) r->t_first = now;
      }
    } else if (cJSON_IsString(text) && text->valuestring[0]) {
      req_fail(r, "the server returned text, not token ids (vLLM: it needs 'return_token_ids'; a server that cannot "
                  "return token ids cannot be measured per token here)");
    }
    if (cJSON_IsString(fin)) {
      x->finish_seen = true;
      snprintf(r->finish, sizeof r->finish, "%s", fin->valuestring);
    }
  }
  cJSON_Delete(j);
}

/* SSE: events are "data: ..." lines; other fields and comments are skipped. */
static bool stream_bytes(xfer *x, const char *d, size_t n);

static size_t on_stream(char *d, size_t sz, size_t nm, void *u) {
  xfer *x = u;
  const size_t n = sz * nm;
  if (!x->http) curl_easy_getinfo(x->e, CURLINFO_RESPONSE_CODE, &x->http);
  if (x->http >= 300) return grow_add(&x->err_body, d, n) ? n : 0;
  return stream_bytes(x, d, n) ? n : 0;
}

/* n more bytes of a 2xx stream: each complete line that is an event goes to on_event. False: out of
 * memory. */
static bool stream_bytes(xfer *x, const char *d, size_t n) {
  if (!grow_add(&x->line, d, n)) return false;
  const double now = vclock_now();
  char *start = x->line.p, *nl;
  while ((nl = memchr(start, '\n', x->line.n - (size_t)(start - x->line.p)))) {
    *nl = 0;
    if (nl > start && nl[-1] == '\r') nl[-1] = 0;
    if (!strncmp(start, "data:", 5)) on_event(x, start[5] == ' ' ? start + 6 : start + 5, now);
    start = nl + 1;
  }
  const size_t rest = x->line.n - (size_t)(start - x->line.p);
  memmove(x->line.p, start, rest);
  x->line.n = rest;
  x->line.p[rest] = 0;
  return true;
}

void served_stream_parse(served_req *r, const char *body, size_t n) {
  xfer x = {.r = r, .http = 200};
  if (!stream_bytes(&x, body, n)) req_fail(r, "out of memory");
  free(x.line.p);
}

static vstatus xfer_start(const served_conn *c, const char *model, xfer *x, CURLM *multi) {
  served_req *r = x->r;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "model", model);
  cJSON *p = cJSON_AddArrayToObject(o, "prompt");
  for (int i = 0; i < r->n_prompt; i++) cJSON_AddItemToArray(p, cJSON_CreateNumber(r->prompt[i]));
  cJSON_AddNumberToObject(o, "max_tokens", r->max_tokens);
  const vsampling *sm = r->sampling;
  cJSON_AddNumberToObject(o, "temperature", sm ? sm->temperature : 0);
  if (sm && sm->top_k > 0) cJSON_AddNumberToObject(o, "top_k", sm->top_k);
  if (sm && sm->top_p < 1) cJSON_AddNumberToObject(o, "top_p", sm->top_p);
  if (sm) cJSON_AddNumberToObject(o, "seed", (double)(sm->seed & ((1ull << 53) - 1))); /* exact in JSON */
  if (r->logprobs > 0) {
    cJSON_AddNumberToObject(o, "logprobs", r->logprobs);
    cJSON_AddBoolToObject(o, "return_tokens_as_token_ids", true);
  }
  cJSON_AddBoolToObject(o, "ignore_eos", true);
  cJSON_AddBoolToObject(o, "stream", true);
  cJSON_AddBoolToObject(o, "return_token_ids", true);
  cJSON_AddItemToObject(o, "stream_options", cJSON_CreateObject());
  cJSON_AddBoolToObject(cJSON_GetObjectItem(o, "stream_options"), "include_usage", true);
  if (r->extra) { /* the caller's fields replace the ones above */
    cJSON *ex = cJSON_Parse(r->extra), *f;
    if (!cJSON_IsObject(ex)) {
      cJSON_Delete(ex);
      cJSON_Delete(o);
      return VERR("served request: 'extra' is not a JSON object: %.80s", r->extra);
    }
    cJSON_ArrayForEach(f, ex) {
      cJSON_DeleteItemFromObjectCaseSensitive(o, f->string);
      cJSON_AddItemToObject(o, f->string, cJSON_Duplicate(f, true));
    }
    cJSON_Delete(ex);
  }
  x->body = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  x->e = curl_easy_init();
  x->h = headers(c, true);
  if (!x->body || !x->e || !x->h) return VERR("out of memory for a request");
  char url[640];
  snprintf(url, sizeof url, "%s/v1/completions", c->base);
  curl_easy_setopt(x->e, CURLOPT_URL, url);
  curl_easy_setopt(x->e, CURLOPT_POSTFIELDS, x->body);
  curl_easy_setopt(x->e, CURLOPT_HTTPHEADER, x->h);
  curl_easy_setopt(x->e, CURLOPT_WRITEFUNCTION, on_stream);
  curl_easy_setopt(x->e, CURLOPT_WRITEDATA, x);
  curl_easy_setopt(x->e, CURLOPT_PRIVATE, x);
  curl_easy_setopt(x->e, CURLOPT_ERRORBUFFER, x->errbuf);
  curl_easy_setopt(x->e, CURLOPT_NOSIGNAL, 1L);
  if (c->timeout_s > 0) curl_easy_setopt(x->e, CURLOPT_TIMEOUT_MS, (long)(c->timeout_s * 1000));
  r->t_send = vclock_now();
  if (curl_multi_add_handle(multi, x->e) != CURLM_OK) return VERR("curl_multi_add_handle failed");
  return V_OK;
}

/* Judges a finished transfer. */
static void xfer_end(const served_conn *c, xfer *x, CURLcode rc) {
  served_req *r = x->r;
  r->t_end = vclock_now();
  if (!x->http) curl_easy_getinfo(x->e, CURLINFO_RESPONSE_CODE, &x->http);
  r->http = x->http;
  char msg[400];
  if (rc != CURLE_OK && !(x->http >= 300 && rc == CURLE_WRITE_ERROR)) {
    transfer_error(msg, sizeof msg, rc, x->errbuf, c->shown, "/v1/completions");
    req_fail(r, "%s%s", msg, r->n_tokens ? " (the stream broke off)" : "");
  } else if (x->http >= 300) {
    http_error(msg, sizeof msg, x->http, x->err_body.p, c->shown, "/v1/completions");
    req_fail(r, "%s", msg);
  } else if (!x->done_seen) {
    req_fail(r, "the stream ended without 'data: [DONE]' after %d tokens (truncated)", r->n_tokens);
  } else if (!x->finish_seen) {
    req_fail(r, "the stream ended without a finish_reason after %d tokens", r->n_tokens);
  } else if (r->n_tokens == 0) {
    req_fail(r, "the server returned no token ids");
  }
  r->ok = !r->error[0];
}

static void xfer_free(xfer *x, CURLM *multi) {
  if (x->e) {
    curl_multi_remove_handle(multi, x->e);
    curl_easy_cleanup(x->e);
  }
  curl_slist_free_all(x->h);
  cJSON_free(x->body);
  free(x->line.p);
  free(x->err_body.p);
  memset(x, 0, sizeof *x);
}

vstatus served_run(const served_conn *c, const char *model, served_req *reqs, int n, int concurrency,
                   bool (*stop)(void)) {
  return served_run_hooked(c, model, reqs, n, concurrency, stop, NULL, NULL);
}

/* How long before a request is due served_run stops sleeping and spins: a wake-up from the timer
 * comes this late on a VM (about 50-100 us measured by bench/loadgen_bench.c), and a late wake-up
 * sends the requests due meanwhile back to back, which bunches Poisson gaps. */
#define SPIN_S 60e-6

vstatus served_run_hooked(const served_conn *c, const char *model, served_req *reqs, int n, int concurrency,
                          bool (*stop)(void), served_done_fn done, void *ctx) {
  CURLM *multi = curl_multi_init();
  xfer *xs = calloc((size_t)(n > 0 ? n : 1), sizeof *xs);
  char *state = calloc((size_t)(n > 0 ? n : 1), 1); /* 0 pending, 1 in flight, 2 finished */
  if (!multi || !xs || !state) {
    free(xs);
    free(state);
    if (multi) curl_multi_cleanup(multi);
    return VERR("out of memory for %d requests", n);
  }
  /* Wakes the poll below when the next request is due: curl_multi_poll's timeout is whole ms, so a
   * sub-ms gap (Poisson at 2,000 requests/s) would be a busy spin, which a loaded machine's scheduler
   * answers with late sends (bench/loadgen_bench.c). -1: none, the ms timeout alone (coarser). */
  const int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  /* and to the us: the kernel's default 50 us slack on wake-ups would bunch sends 50 us apart */
  const int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  if (tfd >= 0 && slack > 1) prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  const double t0 = vclock_now();
  int lo = 0, active = 0, finished = 0; /* lo: every request below it left the pending state */
  vstatus s = V_OK;
  while (s == V_OK) {
    const double now = vclock_now();
    const bool stopping = stop && stop();
    double due_min = INFINITY; /* seconds until the next pending request is due */
    bool any_free = false;     /* a pending request not held */
    while (lo < n && state[lo]) lo++;
    for (int i = lo; i < n && s == V_OK; i++) {
      if (state[i] || reqs[i].held) continue;
      if (reqs[i].skip) {
        state[i] = 2, finished++;
        continue;
      }
      any_free = true;
      if (active >= concurrency || stopping) break;
      if (now - t0 < reqs[i].arrival_s) {
        due_min = fmin(due_min, reqs[i].arrival_s - (now - t0));
        /* without a hook arrivals never go down with the index (rates, traces): nothing later is due.
         * With one (sessions), a released turn may be due before a later first turn: scan on. */
        if (!done) break;
        continue;
      }
      xs[i].r = &reqs[i];
      if ((s = xfer_start(c, model, &xs[i], multi)) != V_OK) break;
      state[i] = 1, active++;
    }
    if (s) break;
    if (finished == n || (stopping && active == 0)) break;
    if (active == 0 && !any_free) { s = VERR("served_run: requests held that no finished request releases"); break; }
    int running = 0;
    curl_multi_perform(multi, &running);
    CURLMsg *m;
    int left;
    bool freed = false; /* a request finished: its slot, and any turn its done hook released, may take a
                           request due now */
    while ((m = curl_multi_info_read(multi, &left))) {
      if (m->msg != CURLMSG_DONE) continue;
      xfer *x = NULL;
      curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
      const CURLcode rc = m->data.result;
      xfer_end(c, x, rc);
      const int i = (int)(x->r - reqs);
      xfer_free(x, multi);
      state[i] = 2;
      active--, finished++;
      freed = true;
      if (done) done(ctx, reqs, i, t0);
    }
    /* due_min above predates the freed slot (a closed loop's next request: the scan stopped at the
     * concurrency limit) and what a hook released (a session's next turn with a short pause, a joined
     * parent turn, a newly admitted tree): scan again before sleeping, or they would wait for the next
     * traffic or up to 50 ms (at concurrency 1 every request did, 50 ms of idle server each) */
    if (freed) continue;
    /* wait for traffic, or until the next arrival is due (at most 50 ms) */
    const double wait_s = fmin(due_min, 0.05);
    if (tfd >= 0 && due_min <= SPIN_S) {
      curl_multi_poll(multi, NULL, 0, 0, NULL); /* due within the wake-up latency: spin */
    } else if (tfd >= 0) {
      /* armed SPIN_S before the due time, disarmed (and drained) when nothing is due */
      struct itimerspec its = {0};
      if (due_min <= 0.05) {
        const double w = wait_s - SPIN_S;
        its.it_value.tv_sec = (time_t)w;
        its.it_value.tv_nsec = (long)((w - (double)(time_t)w) * 1e9);
        if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;
      }
      timerfd_settime(tfd, 0, &its, NULL);
      struct curl_waitfd wfd = {.fd = tfd, .events = CURL_WAIT_POLLIN};
      curl_multi_poll(multi, &wfd, 1, (int)ceil(wait_s * 1000), NULL);
    } else if (active > 0) {
      curl_multi_poll(multi, NULL, 0, (int)(wait_s * 1000), NULL);
    } else if (wait_s > 0) {
      struct timespec ts = {.tv_sec = (time_t)wait_s, .tv_nsec = (long)((wait_s - (double)(time_t)wait_s) * 1e9)};
      nanosleep(&ts, NULL);
    }
  }
  if (tfd >= 0) close(tfd);
  if (tfd >= 0 && slack > 1) prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
  for (int i = 0; i < n; i++)
    if (xs[i].e) xfer_free(&xs[i], multi);
  free(xs);
  free(state);
  curl_multi_cleanup(multi);
  return s;
}

void served_req_free(served_req *r) {
  free(r->ids);
  free(r->top);
  r->ids = NULL;
  r->top = NULL;
  r->cap_ids = 0;
  free(r->chunk_t);
  free(r->chunk_n);
  r->chunk_t = NULL;
  r->chunk_n = NULL;
  r->n_chunks = r->cap_chunks = 0;
}
