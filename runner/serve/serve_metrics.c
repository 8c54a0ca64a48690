/* vouch serve's /metrics: Prometheus text exposition (version 0.0.4) with vLLM's metric names,
 * so clients written for vLLM (dashboards, `vouch sweep --server`) read vouch serve the same way.
 * Every series carries model_name="<served id>" as vLLM's do. vouch:* series are vouch's own:
 * the path's forward time, which the served sweep sets against its measured latencies. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/serve/serve.h"

const double *serve_hist_bounds(void);

typedef struct {
  char *buf;
  size_t len, cap;
  bool oom;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
  if (b->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(b->buf + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0) { b->oom = true; return; }
    if ((size_t)n < b->cap - b->len) { b->len += (size_t)n; return; }
    size_t cap = b->cap * 2 + (size_t)n + 1;
    char *nb = realloc(b->buf, cap);
    if (!nb) { b->oom = true; return; }
    b->buf = nb, b->cap = cap;
  }
}

static void head(sbuf *b, const char *name, const char *type, const char *help) {
  put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void scalar(sbuf *b, const char *model, const char *name, const char *type, const char *help, double v) {
  head(b, name, type, help);
  put(b, "%s{model_name=\"%s\"} %.17g\n", name, model, v);
}

static void hist(sbuf *b, const char *model, const char *name, const char *help, const serve_hist *h) {
  head(b, name, "histogram", help);
  const double *bounds = serve_hist_bounds();
  uint64_t cum = 0;
  for (int i = 0; i < SERVE_HIST_BUCKETS; i++) {
    cum += h->count[i];
    put(b, "%s_bucket{le=\"%g\",model_name=\"%s\"} %llu\n", name, bounds[i], model, (unsigned long long)cum);
  }
  put(b, "%s_bucket{le=\"+Inf\",model_name=\"%s\"} %llu\n", name, model, (unsigned long long)h->n);
  put(b, "%s_sum{model_name=\"%s\"} %.17g\n", name, model, h->sum);
  put(b, "%s_count{model_name=\"%s\"} %llu\n", name, model, (unsigned long long)h->n);
}

char *serve_metrics_text(serve_sched *s) {
  sbuf b = {.buf = malloc(8192), .cap = 8192};
  if (!b.buf) return NULL;
  b.buf[0] = 0;
  pthread_mutex_lock(&s->mu);
  const serve_counters c = s->c;
  const int running = s->n_running, waiting = s->n_waiting, K = s->spec_k;
  pthread_mutex_unlock(&s->mu);
  const char *m = s->model_name;
  scalar(&b, m, "vllm:num_requests_running", "gauge", "Requests in the running batch.", running);
  scalar(&b, m, "vllm:num_requests_waiting", "gauge", "Requests waiting for a KV slot.", waiting);
  scalar(&b, m, "vllm:prompt_tokens_total", "counter", "Prompt tokens admitted.", (double)c.prompt_tokens);
  scalar(&b, m, "vllm:generation_tokens_total", "counter", "Tokens generated.", (double)c.generation_tokens);
  head(&b, "vllm:request_success_total", "counter", "Finished requests by finish reason.");
  for (int f = FIN_STOP; f <= FIN_ERROR; f++)
    put(&b, "vllm:request_success_total{finished_reason=\"%s\",model_name=\"%s\"} %llu\n", serve_finish_name(f), m,
        (unsigned long long)c.finished[f]);
  hist(&b, m, "vllm:time_to_first_token_seconds", "Time to first token.", &c.ttft);
  hist(&b, m, "vllm:inter_token_latency_seconds", "Time between a request's consecutive steps.", &c.itl);
  hist(&b, m, "vllm:request_time_per_output_token_seconds", "Per request: (last - first token) / (tokens - 1).",
       &c.tpot);
  hist(&b, m, "vllm:e2e_request_latency_seconds", "Arrival to finish.", &c.e2e);
  scalar(&b, m, "vllm:spec_decode_num_drafts_total", "counter", "Draft proposals verified.", (double)c.spec_drafts);
  scalar(&b, m, "vllm:spec_decode_num_draft_tokens_total", "counter", "Draft tokens verified.",
         (double)c.spec_draft_tokens);
  scalar(&b, m, "vllm:spec_decode_num_accepted_tokens_total", "counter", "Draft tokens accepted.",
         (double)c.spec_accepted);
  head(&b, "vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter", "Draft tokens accepted per position.");
  for (int p = 0; p < K; p++)
    put(&b, "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"%s\",position=\"%d\"} %llu\n", m, p,
        (unsigned long long)c.spec_accepted_pos[p]);
  scalar(&b, m, "vouch:forward_steps_total", "counter", "Forward steps the path ran.", (double)c.steps);
  scalar(&b, m, "vouch:forward_tokens_total", "counter", "Tokens in those steps.", (double)c.step_tokens);
  scalar(&b, m, "vouch:forward_seconds_total", "counter", "Wall seconds inside the path's forward().", c.forward_s);
  scalar(&b, m, "vouch:decode_steps_total", "counter", "Forward steps with decodes only (no prefill chunk).",
         (double)c.decode_steps);
  scalar(&b, m, "vouch:decode_seconds_total", "counter", "Wall seconds of those inside forward().", c.decode_s);
  scalar(&b, m, "vouch:scheduler_seconds_total", "counter", "Wall seconds of scheduler iterations that ran a step "
         "(forward included; the rest is admission, lock waits, sampling, retiring).", c.loop_s);
  scalar(&b, m, "vouch:sample_seconds_total", "counter", "Wall seconds turning logits into tokens (sampling, "
         "logprobs, stop checks).", c.consume_s);
  scalar(&b, m, "vouch:fallback_steps_total", "counter", "Steps run one sequence at a time because supports() "
         "refused the mixed step.", (double)c.fallback_steps);
  if (b.oom) {
    free(b.buf);
    return NULL;
  }
  return b.buf;
}
