/* libFuzzer target: what an OpenAI-compatible server sends back to the suites run with --server
 * (suites/served/served.c): the first byte picks the reply, the rest is its body. 0: a completions stream
 * (SSE "data:" events: token ids, top logprobs by "token_id:N", finish_reason, errors), read as
 * served_run reads it, then its logprobs judged as diverge and features judge them; 1: /v1/models
 * (the model, vocab_size, max_model_len, vouch_synth); 2: /metrics (Prometheus text). Properties:
 * no crash, leak or undefined behaviour; every kept logprob list is sorted most likely first with
 * ids >= 0 and at most the asked count + 1 entries; an error is one line naming the server; counts
 * and positions stay in range. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "suites/served/served.h"

static void stream(const uint8_t *d, size_t n) {
  const int asked = n ? 1 + d[0] % 24 : 5; /* top logprobs asked, 1..24 (SERVED_TOP_MAX - 1 at most) */
  served_req r = {.max_tokens = 16, .keep_ids = true, .logprobs = asked < SERVED_TOP_MAX ? asked : SERVED_TOP_MAX - 1};
  if (n) d++, n--;
  served_stream_parse(&r, (const char *)d, n);
  fz_assert(r.n_tokens >= 0 && r.n_chunks >= 0 && r.n_chunks <= r.n_tokens, "token and chunk counts in range");
  for (const char *p = r.error; *p; p++) fz_assert((unsigned char)*p >= 0x20, "a request's error is one line of text");
  for (int i = 0; i < r.n_tokens && r.top; i++) {
    const served_top *t = &r.top[i];
    fz_assert(t->n >= 0 && t->n <= r.logprobs + 1 && t->n <= SERVED_TOP_MAX, "top list within the asked count");
    for (int k = 0; k < t->n; k++) {
      fz_assert(t->id[k] >= 0, "top ids are token ids");
      fz_assert(k == 0 || !(t->lp[k] > t->lp[k - 1]), "top list sorted most likely first");
    }
    char buf[160];
    const char *why = served_top_problem(t, 1000, buf, sizeof buf);
    fz_assert(!why || (why[0] && !strchr(why, '\n')), "a logprob problem is one line");
  }
  served_req_free(&r);
}

static void models(const char *body) {
  char model[128] = "";
  int vocab = -1, max_len = -1;
  served_synth syn;
  if (served_models_parse(body, "http://fuzz", model, sizeof model, &vocab, &max_len, &syn) != V_OK) {
    const char *m = verr_msg();
    fz_assert(m[0] && strstr(m, "http://fuzz") && !strchr(m, '\n'), "a /v1/models error is one line naming the server");
    return;
  }
  fz_assert(vocab >= 0 && max_len >= 0, "vocab_size and max_model_len are counts or 0");
  fz_assert(!syn.given || (syn.layers >= 1 && syn.layers <= 1000), "vouch_synth layers in range");
  /* asked by name: the same model is found again */
  char again[128];
  snprintf(again, sizeof again, "%s", model);
  fz_assert(served_models_parse(body, "http://fuzz", again, sizeof again, &vocab, &max_len, NULL) == V_OK &&
                !strcmp(again, model), "the served model is found by its name");
}

static void metrics(const char *body) {
  served_metrics m;
  served_metrics_parse(body, &m);
  fz_assert(m.n_pos >= 0 && m.n_pos <= SERVED_MAX_POS, "accepted-per-position count in range");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  if (n == 0) return 0;
  const int which = data[0] % 3;
  if (which == 0) {
    stream(data + 1, n - 1);
    return 0;
  }
  char *body = fz_cstr(data + 1, n - 1);
  if (which == 1) models(body);
  else metrics(body);
  free(body);
  return 0;
}
