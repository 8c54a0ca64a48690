/* vouch serve's HTTP front on libmicrohttpd (thread per connection): /v1/completions (JSON or
 * SSE), /v1/models, /health, /metrics. Errors are OpenAI-shaped:
 *   {"error": {"message": "...", "type": "BadRequestError", "param": "max_tokens", "code": 400}} */
#include <arpa/inet.h>
#include <stdarg.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "runner/serve/serve.h"
#include "runner/serve/serve_constraint.h"

#define MAX_BODY (16u << 20)

struct serve_http {
  struct MHD_Daemon *d;
  serve_sched *s;
  uint64_t seed_counter; /* default sampling seed of requests that give none */
};

typedef struct {
  char *body;  /* request body so far (NUL-terminated) */
  size_t len, cap;
  bool too_big;
} conn_state;

/* ---- responses ---- */

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned code, const char *type, const char *text) {
  struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, "Content-Type", type);
  const enum MHD_Result q = MHD_queue_response(c, code, r);
  MHD_destroy_response(r);
  return q;
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned code, cJSON *j) {
  char *txt = cJSON_PrintUnformatted(j);
  cJSON_Delete(j);
  if (!txt) return MHD_NO;
  const enum MHD_Result q = send_text(c, code, "application/json", txt);
  free(txt);
  return q;
}

static const char *error_type(unsigned code) {
  switch (code) {
    case 400: return "BadRequestError";
    case 404: return "NotFoundError";
    case 405: return "MethodNotAllowed";
    case 413: return "RequestTooLarge";
    case 503: return "ServiceUnavailable";
    default: return "InternalServerError";
  }
}

static cJSON *error_json(unsigned code, const char *param, const char *msg) {
  cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
  cJSON_AddStringToObject(e, "message", msg);
  cJSON_AddStringToObject(e, "type", error_type(code));
  if (param) cJSON_AddStringToObject(e, "param", param);
  else cJSON_AddNullToObject(e, "param");
  cJSON_AddNumberToObject(e, "code", code);
  return o;
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static enum MHD_Result send_error(struct MHD_Connection *c, unsigned code, const char *param, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return send_json(c, code, error_json(code, param, msg));
}

/* ---- request parsing ---- */

typedef struct {
  unsigned code;   /* 0: fine */
  char param[96];
  char msg[400];
} bad;

static bool fail(bad *b, unsigned code, const char *param, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static bool fail(bad *b, unsigned code, const char *param, const char *fmt, ...) {
  b->code = code;
  snprintf(b->param, sizeof b->param, "%s", param ? param : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b->msg, sizeof b->msg, fmt, ap);
  va_end(ap);
  return false;
}

static bool present(const cJSON *j) { return j && !cJSON_IsNull(j); }

/* Integer field in [lo, hi]; absent or null keeps *out. */
static bool get_int(const cJSON *o, const char *key, double lo, double hi, long long *out, bad *b) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!present(j)) return true;
  if (!cJSON_IsNumber(j) || j->valuedouble != floor(j->valuedouble) || j->valuedouble < lo || j->valuedouble > hi)
    return fail(b, 400, key, "'%s' must be an integer in [%.0f, %.0f]", key, lo, hi);
  *out = (long long)j->valuedouble;
  return true;
}

static bool get_num(const cJSON *o, const char *key, double lo, double hi, bool lo_open, double *out, bad *b) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!present(j)) return true;
  if (!cJSON_IsNumber(j) || !(lo_open ? j->valuedouble > lo : j->valuedouble >= lo) || !(j->valuedouble <= hi))
    return fail(b, 400, key, "'%s' must be a number in %s%g, %g]", key, lo_open ? "(" : "[", lo, hi);
  *out = j->valuedouble;
  return true;
}

static bool get_bool(const cJSON *o, const char *key, bool *out, bad *b) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!present(j)) return true;
  if (!cJSON_IsBool(j)) return fail(b, 400, key, "'%s' must be true or false", key);
  *out = cJSON_IsTrue(j);
  return true;
}

/* A list of token ids in [0, vocab): count in *n (ids written when out != NULL). */
static bool token_list(const cJSON *a, const char *key, int vocab, int32_t *out, int *n, bad *b) {
  if (!cJSON_IsArray(a)) return fail(b, 400, key, "'%s' must be a list of token ids", key);
  int i = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, a) {
    if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble))
      return fail(b, 400, key, "'%s'[%d] is not a token id (an integer)%s", key, i,
                  cJSON_IsString(e) ? ": this server has no tokenizer, send token ids" : "");
    if (e->valuedouble < 0 || e->valuedouble >= vocab)
      return fail(b, 400, key, "'%s'[%d] = %.0f is outside the vocabulary [0, %d)", key, i, e->valuedouble, vocab);
    if (out) out[i] = (int32_t)e->valuedouble;
    i++;
  }
  *n = i;
  return true;
}

/* Parses a /v1/completions body into a request (NULL with *b set on a bad request). */
static serve_req *parse_completion(serve_http *h, const char *body, bool *include_usage, bad *b) {
  serve_sched *s = h->s;
  cJSON *o = cJSON_Parse(body);
  serve_req *r = NULL;
  if (!cJSON_IsObject(o)) {
    fail(b, 400, NULL, "the request body is not a JSON object");
    goto out;
  }
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(o, "model");
  if (present(model) && (!cJSON_IsString(model) || strcmp(model->valuestring, s->model_name))) {
    fail(b, 404, "model", "The model `%s` does not exist (this server serves `%s`)",
         cJSON_IsString(model) ? model->valuestring : "(not a string)", s->model_name);
    goto out;
  }
  const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(o, "prompt");
  if (cJSON_IsArray(prompt) && cJSON_GetArraySize(prompt) >= 1 && cJSON_IsArray(cJSON_GetArrayItem(prompt, 0))) {
    if (cJSON_GetArraySize(prompt) != 1) {
      fail(b, 400, "prompt", "send one prompt per request (got %d)", cJSON_GetArraySize(prompt));
      goto out;
    }
    prompt = cJSON_GetArrayItem(prompt, 0);
  }
  if (!present(prompt)) { fail(b, 400, "prompt", "'prompt' is required (a list of token ids)"); goto out; }
  if (cJSON_IsString(prompt)) {
    fail(b, 400, "prompt", "this server has no tokenizer: send 'prompt' as a list of token ids");
    goto out;
  }
  int n_prompt = 0, n_stop = 0;
  if (!token_list(prompt, "prompt", s->vocab, NULL, &n_prompt, b)) goto out;
  if (n_prompt == 0) { fail(b, 400, "prompt", "'prompt' is empty"); goto out; }
  const cJSON *stop_ids = cJSON_GetObjectItemCaseSensitive(o, "stop_token_ids");
  if (present(stop_ids) && !token_list(stop_ids, "stop_token_ids", s->vocab, NULL, &n_stop, b)) goto out;
  const cJSON *stop = cJSON_GetObjectItemCaseSensitive(o, "stop");
  if (present(stop) && !(cJSON_IsArray(stop) && cJSON_GetArraySize(stop) == 0)) {
    fail(b, 400, "stop", "stop strings need a tokenizer, which this server has not: use 'stop_token_ids'");
    goto out;
  }
  if (present(cJSON_GetObjectItemCaseSensitive(o, "suffix"))) {
    fail(b, 400, "suffix", "'suffix' is not supported by vouch serve (it would not be honoured)");
    goto out;
  }
  tdfa *dfa = NULL;
  if (!serve_constraint_parse(o, s->vocab, &dfa, b->param, sizeof b->param, b->msg, sizeof b->msg)) {
    b->code = 400;
    goto out;
  }
  long long max_tokens = 16, min_tokens = 0, top_k = 0, logprobs = -1, n = 1, seed = -1;
  double temperature = 1.0, top_p = 1.0;
  bool ignore_eos = false, stream = false, echo = false;
  if (!get_int(o, "max_tokens", 1, s->max_ctx, &max_tokens, b) || !get_int(o, "min_tokens", 0, s->max_ctx, &min_tokens, b) ||
      !get_int(o, "top_k", -1, 1 << 30, &top_k, b) || !get_int(o, "logprobs", 0, SERVE_MAX_LOGPROBS, &logprobs, b) ||
      !get_int(o, "n", 1, 1, &n, b) || !get_int(o, "best_of", 1, 1, &n, b) ||
      !get_int(o, "seed", 0, 9007199254740991.0, &seed, b) || !get_num(o, "temperature", 0, 100, false, &temperature, b) ||
      !get_num(o, "top_p", 0, 1, true, &top_p, b) || !get_bool(o, "ignore_eos", &ignore_eos, b) ||
      !get_bool(o, "stream", &stream, b) || !get_bool(o, "echo", &echo, b))
    goto out_dfa;
  if (echo) { fail(b, 400, "echo", "'echo' is not supported"); goto out_dfa; }
  if (min_tokens > max_tokens) {
    fail(b, 400, "min_tokens", "'min_tokens' (%lld) exceeds 'max_tokens' (%lld)", min_tokens, max_tokens);
    goto out_dfa;
  }
  if (n_prompt + max_tokens > s->max_ctx) {
    fail(b, 400, "max_tokens", "this server's context is %d tokens, but the prompt (%d) plus max_tokens (%lld) is %lld",
         s->max_ctx, n_prompt, max_tokens, n_prompt + max_tokens);
    goto out_dfa;
  }
  *include_usage = false;
  const cJSON *so = cJSON_GetObjectItemCaseSensitive(o, "stream_options");
  if (present(so) && (!cJSON_IsObject(so) || !get_bool(so, "include_usage", include_usage, b))) {
    if (!b->code) fail(b, 400, "stream_options", "'stream_options' must be an object");
    goto out_dfa;
  }
  r = serve_req_new(n_prompt, (int)max_tokens, n_stop, (int)logprobs);
  if (!r) { fail(b, 500, NULL, "out of memory"); goto out_dfa; }
  r->dfa = dfa;
  r->dfa_state = dfa ? dfa->start : 0;
  dfa = NULL;
  token_list(prompt, "prompt", s->vocab, r->prompt, &n_prompt, b);
  if (n_stop) token_list(stop_ids, "stop_token_ids", s->vocab, r->stop_ids, &n_stop, b);
  r->min_tokens = (int)min_tokens;
  r->ignore_eos = ignore_eos;
  r->stream = stream;
  r->smp = (vsampling){.temperature = (float)temperature, .top_k = top_k > 0 ? (int)top_k : 0, .top_p = (float)top_p,
                       .seed = seed >= 0 ? (uint64_t)seed : __atomic_fetch_add(&h->seed_counter, 1, __ATOMIC_RELAXED)};
out_dfa:
  if (dfa) tdfa_free(dfa);
  free(dfa);
out:
  cJSON_Delete(o);
  return r;
}

/* ---- completion JSON ---- */

static cJSON *logprobs_json(const serve_req *r, int from, int to) {
  cJSON *lp = cJSON_CreateObject();
  cJSON *toks = cJSON_AddArrayToObject(lp, "tokens"), *tlp = cJSON_AddArrayToObject(lp, "token_logprobs");
  cJSON *top = cJSON_AddArrayToObject(lp, "top_logprobs"), *off = cJSON_AddArrayToObject(lp, "text_offset");
  char name[32];
  for (int i = from; i < to; i++) {
    snprintf(name, sizeof name, "token_id:%d", r->out[i]);
    cJSON_AddItemToArray(toks, cJSON_CreateString(name));
    cJSON_AddItemToArray(tlp, cJSON_CreateNumber(r->out_lp[i]));
    cJSON *t = cJSON_CreateObject();
    for (int k = 0; k < r->logprobs; k++) {
      snprintf(name, sizeof name, "token_id:%d", r->top_ids[(size_t)i * r->logprobs + k]);
      cJSON_AddNumberToObject(t, name, r->top_lp[(size_t)i * r->logprobs + k]);
    }
    cJSON_AddItemToArray(top, t);
    cJSON_AddItemToArray(off, cJSON_CreateNumber(0));
  }
  return lp;
}

static void add_usage(cJSON *o, const serve_req *r, int n_out) {
  cJSON *u = cJSON_AddObjectToObject(o, "usage");
  cJSON_AddNumberToObject(u, "prompt_tokens", r->n_prompt);
  cJSON_AddNumberToObject(u, "completion_tokens", n_out);
  cJSON_AddNumberToObject(u, "total_tokens", r->n_prompt + n_out);
}

/* One completion object over tokens [from, to); fin: the finish (FIN_NONE while streaming). */
static cJSON *completion_json(serve_sched *s, const serve_req *r, int from, int to, serve_finish fin) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "id", r->id);
  cJSON_AddStringToObject(o, "object", "text_completion");
  cJSON_AddNumberToObject(o, "created", (double)r->created);
  cJSON_AddStringToObject(o, "model", s->model_name);
  cJSON *ch = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
  cJSON_AddItemToArray(ch, c);
  cJSON_AddNumberToObject(c, "index", 0);
  cJSON_AddStringToObject(c, "text", "");
  cJSON *ids = cJSON_AddArrayToObject(c, "token_ids");
  for (int i = from; i < to; i++) cJSON_AddItemToArray(ids, cJSON_CreateNumber(r->out[i]));
  if (r->logprobs >= 0) cJSON_AddItemToObject(c, "logprobs", logprobs_json(r, from, to));
  else cJSON_AddNullToObject(c, "logprobs");
  if (fin == FIN_NONE) cJSON_AddNullToObject(c, "finish_reason");
  else cJSON_AddStringToObject(c, "finish_reason", serve_finish_name(fin));
  if (fin == FIN_STOP && r->stop_reason >= 0) cJSON_AddNumberToObject(c, "stop_reason", r->stop_reason);
  else cJSON_AddNullToObject(c, "stop_reason");
  return o;
}

/* ---- streaming ---- */

typedef struct {
  serve_sched *s;
  serve_req *r;
  int sent;            /* tokens already in a chunk */
  bool include_usage;
  bool ended;          /* data: [DONE] queued */
  char *pend;          /* bytes not yet handed to MHD */
  size_t plen, poff;
} stream_state;

static bool pend_add(stream_state *st, const char *txt) {
  const size_t n = strlen(txt);
  char *nb = realloc(st->pend, st->plen + n + 1);
  if (!nb) return false;
  memcpy(nb + st->plen, txt, n + 1);
  st->pend = nb;
  st->plen += n;
  return true;
}

static bool pend_event(stream_state *st, cJSON *j) {
  char *txt = cJSON_PrintUnformatted(j);
  cJSON_Delete(j);
  if (!txt) return false;
  const bool ok = pend_add(st, "data: ") && pend_add(st, txt) && pend_add(st, "\n\n");
  free(txt);
  return ok;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
  stream_state *st = cls;
  while (st->poff == st->plen) {
    if (st->ended) return MHD_CONTENT_READER_END_OF_STREAM;
    free(st->pend);
    st->pend = NULL;
    st->plen = st->poff = 0;
    serve_sched *s = st->s;
    serve_req *r = st->r;
    pthread_mutex_lock(&s->mu);
    while (r->n_out == st->sent && r->finish == FIN_NONE) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += 200 * 1000000L;
      if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
      pthread_cond_timedwait(&s->out_cv, &s->mu, &ts);
    }
    const int n_out = r->n_out;
    const serve_finish fin = r->finish;
    pthread_mutex_unlock(&s->mu);
    bool ok = true;
    if (fin == FIN_ERROR || fin == FIN_ABORT) {
      ok = pend_event(st, error_json(fin == FIN_ERROR ? 500 : 503, NULL,
                                     fin == FIN_ERROR ? r->error : "the server shut down before the request finished"));
    } else if (n_out > st->sent || fin != FIN_NONE) {
      ok = pend_event(st, completion_json(s, r, st->sent, n_out, fin));
    }
    st->sent = n_out;
    if (ok && fin != FIN_NONE) {
      if (st->include_usage && fin != FIN_ERROR && fin != FIN_ABORT) {
        cJSON *u = cJSON_CreateObject();
        cJSON_AddStringToObject(u, "id", r->id);
        cJSON_AddStringToObject(u, "object", "text_completion");
        cJSON_AddNumberToObject(u, "created", (double)r->created);
        cJSON_AddStringToObject(u, "model", s->model_name);
        cJSON_AddArrayToObject(u, "choices");
        add_usage(u, r, n_out);
        ok = pend_event(st, u);
      }
      ok = ok && pend_add(st, "data: [DONE]\n\n");
      st->ended = true;
    }
    if (!ok) return MHD_CONTENT_READER_END_WITH_ERROR;
  }
  size_t n = st->plen - st->poff;
  if (n > max) n = max;
  memcpy(buf, st->pend + st->poff, n);
  st->poff += n;
  return (ssize_t)n;
}

static void stream_free(void *cls) {
  stream_state *st = cls;
  serve_cancel(st->s, st->r); /* no-op when it finished */
  serve_req_release(st->s, st->r);
  free(st->pend);
  free(st);
}

/* ---- endpoints ---- */

static enum MHD_Result completions(serve_http *h, struct MHD_Connection *c, conn_state *cs) {
  serve_sched *s = h->s;
  if (cs->too_big) return send_error(c, 413, NULL, "the request body exceeds %u bytes", MAX_BODY);
  bad b = {0};
  bool include_usage = false;
  serve_req *r = parse_completion(h, cs->body ? cs->body : "", &include_usage, &b);
  if (!r) return send_error(c, b.code, b.param[0] ? b.param : NULL, "%s", b.msg);
  if (serve_submit(s, r) != V_OK) {
    serve_req_release(NULL, r);
    return send_error(c, 503, NULL, "%s", verr_msg());
  }
  if (r->stream) {
    stream_state *st = calloc(1, sizeof *st);
    if (!st) {
      serve_cancel(s, r);
      serve_req_release(s, r);
      return send_error(c, 500, NULL, "out of memory");
    }
    *st = (stream_state){.s = s, .r = r, .include_usage = include_usage};
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_free);
    if (!resp) {
      stream_free(st);
      return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    const enum MHD_Result q = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    return q;
  }
  pthread_mutex_lock(&s->mu);
  while (r->finish == FIN_NONE) pthread_cond_wait(&s->out_cv, &s->mu);
  const serve_finish fin = r->finish;
  const int n_out = r->n_out;
  pthread_mutex_unlock(&s->mu);
  enum MHD_Result q;
  if (fin == FIN_ERROR) q = send_error(c, 500, NULL, "%s", r->error);
  else if (fin == FIN_ABORT) q = send_error(c, 503, NULL, "the server shut down before the request finished");
  else {
    cJSON *o = completion_json(s, r, 0, n_out, fin);
    add_usage(o, r, n_out);
    q = send_json(c, 200, o);
  }
  serve_req_release(s, r);
  return q;
}

static enum MHD_Result models(serve_http *h, struct MHD_Connection *c) {
  serve_sched *s = h->s;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "object", "list");
  cJSON *d = cJSON_AddArrayToObject(o, "data"), *m = cJSON_CreateObject();
  cJSON_AddItemToArray(d, m);
  cJSON_AddStringToObject(m, "id", s->model_name);
  cJSON_AddStringToObject(m, "object", "model");
  cJSON_AddNumberToObject(m, "created", 0);
  cJSON_AddStringToObject(m, "owned_by", "vouch");
  cJSON_AddStringToObject(m, "root", s->model->source);
  cJSON_AddNumberToObject(m, "max_model_len", s->max_ctx);
  cJSON_AddNumberToObject(m, "vocab_size", s->vocab); /* vouch's own field: token ids are [0, vocab_size) */
  cJSON_AddStringToObject(m, "path", s->path->ops->name);
  if (s->model->is_synthetic) { /* vouch's own field: a client of a synth: model can check it has the same one */
    cJSON *vs = cJSON_AddObjectToObject(m, "vouch_synth");
    cJSON_AddNumberToObject(vs, "seed", (double)s->model->seed);
    cJSON_AddNumberToObject(vs, "layers", s->model->cfg.num_hidden_layers);
  }
  return send_json(c, 200, o);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
  serve_http *h = cls;
  conn_state *cs = *con_cls;
  if (!cs) {
    cs = calloc(1, sizeof *cs);
    if (!cs) return MHD_NO;
    *con_cls = cs;
    return MHD_YES;
  }
  if (*upload_size) {
    if (!cs->too_big && cs->len + *upload_size > MAX_BODY) cs->too_big = true;
    if (!cs->too_big) {
      if (cs->len + *upload_size + 1 > cs->cap) {
        size_t cap = (cs->len + *upload_size + 1) * 2;
        char *nb = realloc(cs->body, cap);
        if (!nb) return MHD_NO;
        cs->body = nb, cs->cap = cap;
      }
      memcpy(cs->body + cs->len, upload, *upload_size);
      cs->len += *upload_size;
      cs->body[cs->len] = 0;
    }
    *upload_size = 0;
    return MHD_YES;
  }
  const bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
  if (!strcmp(url, "/health")) {
    if (!get) return send_error(c, 405, NULL, "%s %s: use GET", method, url);
    pthread_mutex_lock(&h->s->mu);
    const bool failed = h->s->failed;
    pthread_mutex_unlock(&h->s->mu);
    return failed ? send_error(c, 503, NULL, "the decode path failed: %s", h->s->fail_msg)
                  : send_text(c, 200, "text/plain", "");
  }
  if (!strcmp(url, "/v1/models")) return get ? models(h, c) : send_error(c, 405, NULL, "%s %s: use GET", method, url);
  if (!strcmp(url, "/metrics")) {
    if (!get) return send_error(c, 405, NULL, "%s %s: use GET", method, url);
    char *txt = serve_metrics_text(h->s);
    if (!txt) return send_error(c, 500, NULL, "out of memory");
    const enum MHD_Result q = send_text(c, 200, "text/plain; version=0.0.4", txt);
    free(txt);
    return q;
  }
  if (!strcmp(url, "/v1/completions"))
    return post ? completions(h, c, cs) : send_error(c, 405, NULL, "%s %s: use POST", method, url);
  if (!strcmp(url, "/v1/chat/completions"))
    return send_error(c, 404, NULL, "%s: this server has no tokenizer or chat template: use /v1/completions with "
                      "token ids", url);
  return send_error(c, 404, NULL, "no such endpoint: %s %s", method, url);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
  conn_state *cs = *con_cls;
  if (cs) {
    free(cs->body);
    free(cs);
  }
  *con_cls = NULL;
}

vstatus serve_http_start(serve_http **out, serve_sched *s, const char *host, int port, int *bound_port) {
  struct sockaddr_in a4;
  struct sockaddr_in6 a6;
  memset(&a4, 0, sizeof a4);
  memset(&a6, 0, sizeof a6);
  const struct sockaddr *sa;
  unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
  if (inet_pton(AF_INET, host, &a4.sin_addr) == 1) {
    a4.sin_family = AF_INET;
    a4.sin_port = htons((uint16_t)port);
    sa = (const struct sockaddr *)&a4;
  } else if (inet_pton(AF_INET6, host, &a6.sin6_addr) == 1) {
    a6.sin6_family = AF_INET6;
    a6.sin6_port = htons((uint16_t)port);
    sa = (const struct sockaddr *)&a6;
    flags |= MHD_USE_IPv6;
  } else {
    return VERR("--host '%s': not an IPv4 or IPv6 address", host);
  }
  serve_http *h = calloc(1, sizeof *h);
  if (!h) return VERR("serve: out of memory");
  h->s = s;
  h->seed_counter = (uint64_t)time(NULL) << 20;
  h->d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, sa,
                          MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_END);
  if (!h->d) {
    const int e = errno;
    free(h);
    return VERR("cannot listen on %s port %d: %s", host, port, e ? strerror(e) : "libmicrohttpd refused");
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
  *bound_port = info ? info->port : port;
  *out = h;
  return V_OK;
}

void serve_http_stop(serve_http *h) {
  if (!h) return;
  MHD_stop_daemon(h->d);
  free(h);
}
