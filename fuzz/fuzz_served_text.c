/* libFuzzer target: what an OpenAI-compatible server sends to the text client
 * (suites/served/served_text.h, served_pair.h). The first byte picks the reader and its options, the
 * rest is the body: 0-3 a whole answer (completions or chat, echo or not), 4-7 an SSE stream of the
 * same kinds fed in pieces whose sizes come from the input, 8 /v1/models (identity, then the pair
 * check against itself), 9 /version. Properties: no crash, leak or undefined behaviour; a rejected
 * answer gives a non-empty one-line error; counts stay in range (choices <= SERVED_MAX_CHOICES,
 * alternatives <= SERVED_MAX_TOP, texts as long as their length says, prompt positions resolved to
 * one of their alternatives or none); a stream's event times are as many as its timed events; an
 * identity pairs with itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "suites/served/served_pair.h"
#include "suites/served/served_text.h"

static void check_pos(const served_pos *p) {
  fz_assert(p->n_top >= 0 && p->n_top <= SERVED_MAX_TOP, "alternatives within the cap");
  fz_assert(p->n_bytes >= 0 && (p->n_bytes == 0 || p->bytes), "bytes held");
  for (int k = 0; k < p->n_top; k++) fz_assert(p->top[k].token != NULL, "every alternative named");
}

static void check_reply(const served_reply *r, bool ok, const char *err) {
  if (!ok) {
    fz_assert(err[0] && !strchr(err, '\n'), "a rejected answer gives a one-line error");
    return;
  }
  fz_assert(r->n_choices >= 1 && r->n_choices <= SERVED_MAX_CHOICES, "choices in range");
  for (int i = 0; i < r->n_choices; i++) {
    const served_choice *c = &r->choices[i];
    fz_assert(c->text && strlen(c->text) == c->text_len, "text length as said");
    fz_assert(c->index >= 0 && c->index < SERVED_MAX_CHOICES, "choice index in range");
    fz_assert(served_reply_choice(r, c->index) == c, "choice indices unique");
    for (int k = 0; k < c->n_lp; k++) check_pos(&c->lp[k]);
  }
  for (int k = 0; k < r->n_prompt_lp; k++) {
    check_pos(&r->prompt_lp[k]);
    fz_assert(!r->prompt_lp[k].n_top || r->prompt_lp[k].token || !strcmp(r->prompt_lp_from, "echo"),
              "a prompt position with alternatives has its chosen token");
  }
  fz_assert(r->prompt_tokens >= -1 && r->completion_tokens >= -1, "usage counts or -1");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  if (n == 0) return 0;
  const int which = data[0] % 10;
  const served_parse_opts o = {.chat = which & 1, .echo = (which >> 1) & 1};
  char err[320] = "";
  if (which < 4) {
    char *body = fz_cstr(data + 1, n - 1);
    served_reply r;
    const bool ok = served_reply_parse(body, &o, &r, err, sizeof err);
    check_reply(&r, ok, err);
    served_reply_free(&r);
    free(body);
  } else if (which < 8) {
    served_sse s;
    served_sse_init(&s, &o);
    size_t at = 1, step = 1 + data[0] / 10; /* piece sizes 1..26 */
    while (at < n) {
      const size_t k = n - at < step ? n - at : step;
      served_sse_feed(&s, (const char *)data + at, k, (double)at);
      at += k;
    }
    const bool ok = served_sse_finish(&s);
    fz_assert(s.n_event_t >= 0 && s.n_event_t <= s.r.n_events, "timed events among the events");
    check_reply(&s.r, ok, s.err);
    served_reply_free(&s.r);
    served_sse_free(&s);
  } else if (which == 8) {
    char *body = fz_cstr(data + 1, n - 1);
    served_identity id = {0};
    snprintf(id.url, sizeof id.url, "http://fuzz");
    if (served_identity_parse_models(body, "http://fuzz", NULL, &id) != V_OK) {
      const char *m = verr_msg();
      fz_assert(m[0] && strstr(m, "http://fuzz") && !strchr(m, '\n'), "a /v1/models error is one line naming the server");
    } else {
      fz_assert(id.max_model_len >= 0, "max_model_len a count or 0");
      fz_assert(served_pair_check(&id, &id) == V_OK, "an identity pairs with itself");
      id.models_raw = body, body = NULL;
      cJSON *j = served_identity_json(&id, "candidate");
      fz_assert(j != NULL, "the manifest entry is made");
      cJSON_Delete(j);
    }
    served_identity_free(&id);
    free(body);
  } else {
    char *body = fz_cstr(data + 1, n - 1);
    served_identity id = {0};
    served_identity_parse_version(body, &id);
    fz_assert(!strchr(id.version, '\n'), "the version is one line");
    free(body);
  }
  return 0;
}
