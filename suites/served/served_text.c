/* The request runner of the text client (suites/served/served_text.h): JSON POSTs on one curl multi
 * handle, whole answers or SSE streams, each call's failure kept in the call. */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "suites/served/served_text.h"

/* One transfer in flight. */
typedef struct {
  served_call *call;
  CURL *e;
  struct curl_slist *h;
  char *buf;            /* a whole answer's bytes, or an HTTP error's body (owned) */
  size_t n, cap;
  bool is_sse;          /* the answer is read as a stream (the call asked for one and the status is 2xx) */
  served_sse sse;       /* the stream being read */
  char errbuf[CURL_ERROR_SIZE];
} xfer;

static bool buf_add(xfer *x, const char *d, size_t n) {
  if (x->n + n + 1 > x->cap) {
    const size_t cap = (x->n + n + 1) * 2;
    if (cap > ((size_t)1 << 31)) return false; /* an answer past 2 GB is not an answer */
    char *nb = realloc(x->buf, cap);
    if (!nb) return false;
    x->buf = nb, x->cap = cap;
  }
  memcpy(x->buf + x->n, d, n);
  x->n += n;
  x->buf[x->n] = 0;
  return true;
}

static size_t on_data(char *d, size_t sz, size_t nm, void *u) {
  xfer *x = u;
  const size_t n = sz * nm;
  if (!x->call->http) curl_easy_getinfo(x->e, CURLINFO_RESPONSE_CODE, &x->call->http);
  const double now = vclock_now();
  if (x->call->stream && x->call->http < 300) {
    if (!x->is_sse) x->is_sse = true;
    const int before = x->sse.n_event_t;
    if (!served_sse_feed(&x->sse, d, n, now)) return 0;
    if (before == 0 && x->sse.n_event_t > 0) x->call->t_first = now;
    return n;
  }
  return buf_add(x, d, n) ? n : 0;
}

/* Sets the call's error (the first only), one line. */
static void call_fail(served_call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void call_fail(served_call *c, const char *fmt, ...) {
  if (c->error[0]) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->error, sizeof c->error, fmt, ap);
  va_end(ap);
  vtext_one_line(c->error);
}

/* An HTTP error: OpenAI's error.message (or "message", "detail") kept in err_message. */
static void http_failed(served_call *c, const char *body, const char *shown) {
  cJSON *j = body ? cJSON_Parse(body) : NULL;
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
  const cJSON *m = cJSON_IsObject(e) ? cJSON_GetObjectItemCaseSensitive(e, "message") : e;
  if (!cJSON_IsString(m)) m = cJSON_GetObjectItemCaseSensitive(j, "message");
  if (!cJSON_IsString(m)) m = cJSON_GetObjectItemCaseSensitive(j, "detail");
  if (cJSON_IsString(m)) {
    const size_t n = strlen(m->valuestring);
    c->err_message = malloc(n + 1);
    if (c->err_message) memcpy(c->err_message, m->valuestring, n + 1), vtext_one_line(c->err_message);
  }
  call_fail(c, "HTTP %ld from %s%s: %.240s", c->http, shown, c->path,
            c->err_message ? c->err_message : body && *body ? body : "(empty body)");
  cJSON_Delete(j);
}

static bool is_chat(const char *path) {
  const size_t n = strlen(path), k = strlen("/chat/completions");
  return n >= k && !strcmp(path + n - k, "/chat/completions");
}

/* Judges a finished transfer: transport, HTTP status, then the answer. */
static void xfer_end(const served_conn *conn, xfer *x, CURLcode rc) {
  served_call *c = x->call;
  c->t_end = vclock_now();
  if (!c->http) curl_easy_getinfo(x->e, CURLINFO_RESPONSE_CODE, &c->http);
  char what[600];
  snprintf(what, sizeof what, "%s%s", conn->shown, c->path);
  if (rc != CURLE_OK && !(c->http >= 300 && rc == CURLE_WRITE_ERROR)) {
    if (rc == CURLE_COULDNT_CONNECT)
      call_fail(c, "cannot connect to %s: %s (is the server running there?)", what, x->errbuf[0] ? x->errbuf : "refused");
    else if (rc == CURLE_OPERATION_TIMEDOUT)
      call_fail(c, "%s: no complete answer within the timeout of %.0f s (%s)", what, conn->timeout_s, x->errbuf);
    else if (rc == CURLE_WRITE_ERROR && x->sse.err[0])
      call_fail(c, "%s: %s", what, x->sse.err);
    else
      call_fail(c, "%s: %s%s%s", what, curl_easy_strerror(rc), x->errbuf[0] ? ": " : "", x->errbuf);
  } else if (c->http >= 300 || c->http < 200) {
    http_failed(c, x->buf, conn->shown);
  } else {
    const served_parse_opts o = {.chat = is_chat(c->path), .echo = c->echo};
    char err[320] = "";
    bool ok;
    if (c->stream) {
      if (!x->is_sse) served_sse_feed(&x->sse, "", 0, c->t_end); /* an empty stream */
      ok = served_sse_finish(&x->sse);
      snprintf(err, sizeof err, "%s", x->sse.err);
      c->reply = x->sse.r;
      memset(&x->sse.r, 0, sizeof x->sse.r);
      c->event_t = x->sse.event_t;
      c->n_event_t = x->sse.n_event_t;
      x->sse.event_t = NULL;
    } else {
      ok = served_reply_parse(x->buf ? x->buf : "", &o, &c->reply, err, sizeof err);
      c->t_first = c->t_end;
    }
    if (!ok) call_fail(c, "%s: %s", what, err);
  }
  c->ok = !c->error[0];
}

static void xfer_free(xfer *x, CURLM *multi) {
  if (x->e) {
    curl_multi_remove_handle(multi, x->e);
    curl_easy_cleanup(x->e);
  }
  curl_slist_free_all(x->h);
  free(x->buf);
  served_reply_free(&x->sse.r);
  served_sse_free(&x->sse);
  memset(x, 0, sizeof *x);
}

/* Starts call i. A call that cannot be made (the body hook failed) is finished with its error: false. */
static vstatus xfer_start(const served_conn *conn, xfer *x, served_call *c, CURLM *multi, bool *started) {
  *started = false;
  x->call = c;
  const served_parse_opts o = {.chat = is_chat(c->path), .echo = c->echo};
  served_sse_init(&x->sse, &o);
  x->e = curl_easy_init();
  x->h = curl_slist_append(NULL, "Content-Type: application/json");
  if (x->h && conn->auth[0]) x->h = curl_slist_append(x->h, conn->auth);
  if (!x->e || !x->h) return VERR("out of memory for a request");
  char url[700];
  snprintf(url, sizeof url, "%s%s", conn->base, c->path);
  curl_easy_setopt(x->e, CURLOPT_URL, url);
  curl_easy_setopt(x->e, CURLOPT_POSTFIELDS, c->body);
  curl_easy_setopt(x->e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(c->body));
  curl_easy_setopt(x->e, CURLOPT_HTTPHEADER, x->h);
  curl_easy_setopt(x->e, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(x->e, CURLOPT_WRITEDATA, x);
  curl_easy_setopt(x->e, CURLOPT_PRIVATE, x);
  curl_easy_setopt(x->e, CURLOPT_ERRORBUFFER, x->errbuf);
  curl_easy_setopt(x->e, CURLOPT_NOSIGNAL, 1L);
  if (conn->timeout_s > 0) curl_easy_setopt(x->e, CURLOPT_TIMEOUT_MS, (long)(conn->timeout_s * 1000));
  c->t_send = vclock_now();
  c->sent = true;
  if (curl_multi_add_handle(multi, x->e) != CURLM_OK) return VERR("curl_multi_add_handle failed");
  *started = true;
  return V_OK;
}

vstatus served_calls_run(const served_conn *c, served_call *calls, int n, int concurrency, bool (*stop)(void),
                         served_body_fn body, void *ctx) {
  if (concurrency < 1) concurrency = 1;
  CURLM *multi = curl_multi_init();
  xfer *xs = calloc((size_t)(n > 0 ? n : 1), sizeof *xs);
  if (!multi || !xs) {
    free(xs);
    if (multi) curl_multi_cleanup(multi);
    return VERR("out of memory for %d requests", n);
  }
  int next = 0, active = 0;
  vstatus s = V_OK;
  while (s == V_OK) {
    while (next < n && active < concurrency && !(stop && stop()) && s == V_OK) {
      served_call *call = &calls[next];
      const int i = next++;
      if (!call->path) call->path = SERVED_COMPLETIONS;
      if (!call->body && body && body(ctx, calls, i) != V_OK) {
        call_fail(call, "%s%s: the request could not be made: %s", c->shown, call->path, verr_msg());
        continue;
      }
      if (!call->body) {
        call_fail(call, "%s%s: the request has no body", c->shown, call->path);
        continue;
      }
      bool started;
      s = xfer_start(c, &xs[i], call, multi, &started);
      if (started) active++;
    }
    if (s || active == 0) break;
    int running = 0;
    curl_multi_perform(multi, &running);
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(multi, &left))) {
      if (m->msg != CURLMSG_DONE) continue;
      xfer *x = NULL;
      curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
      xfer_end(c, x, m->data.result);
      free(x->call->body); /* the body is sent: large prompts are not kept */
      x->call->body = NULL;
      xfer_free(x, multi);
      active--;
    }
    if (active > 0) curl_multi_poll(multi, NULL, 0, 50, NULL);
  }
  for (int i = 0; i < n; i++)
    if (xs[i].e) xfer_free(&xs[i], multi);
  for (int i = next; i < n && s == V_OK; i++) call_fail(&calls[i], "%s%s: not sent: the run stopped first", c->shown,
                                                        calls[i].path ? calls[i].path : SERVED_COMPLETIONS);
  free(xs);
  curl_multi_cleanup(multi);
  return s;
}

void served_calls_free(served_call *calls, int n) {
  for (int i = 0; calls && i < n; i++) {
    free(calls[i].body);
    free(calls[i].err_message);
    free(calls[i].event_t);
    served_reply_free(&calls[i].reply);
    calls[i].body = calls[i].err_message = NULL;
    calls[i].event_t = NULL;
  }
}
