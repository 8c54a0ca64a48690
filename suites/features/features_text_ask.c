/* What the checks of `vouch features --ref-server` share (suites/features/features_text_ask.h). */
#include "suites/features/features_text_ask.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/interrupt.h"

served_gen ft_greedy_gen(const ft_ctx *c) {
  served_gen g = served_gen_default();
  g.prompt = c->prompt;
  g.temperature = 0;
  g.max_tokens = FT_TOKENS;
  g.return_token_ids = true;
  return g;
}

vstatus ft_ask(ft_ctx *c, int side, served_gen g, served_call *out) {
  memset(out, 0, sizeof *out);
  g.model = c->sv[side].id.id;
  out->path = SERVED_COMPLETIONS;
  out->stream = g.stream;
  out->echo = g.echo;
  VTRY(served_build_completion(&g, &out->body));
  VTRY(served_calls_run(&c->sv[side].conn, out, 1, 1, vinterrupted, NULL, NULL));
  if (vinterrupted()) return VERR("features: interrupted");
  return V_OK;
}

const served_choice *ft_first(const served_call *call) {
  return call->ok ? served_reply_choice(&call->reply, 0) : NULL;
}

long ft_ntokens(const served_call *call) {
  const served_choice *ch = ft_first(call);
  if (!ch) return -1;
  if (call->reply.n_choices == 1 && call->reply.completion_tokens >= 0) return call->reply.completion_tokens;
  if (ch->has_token_ids) return ch->n_token_ids;
  if (ch->has_logprobs) return ch->n_lp;
  return -1;
}

void ft_set(ft_result *r, ft_status st, const char *fmt, ...) {
  r->status = st;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->detail, sizeof r->detail, fmt, ap);
  va_end(ap);
  vtext_one_line(r->detail);
}

void ft_ref_failed(ft_result *r, const served_call *call, const char *what) {
  if (call->http >= 400 && call->http < 500)
    ft_set(r, FT_NOT_SUPPORTED, "the reference refuses %s: %s", what, call->error);
  else ft_set(r, FT_UNDECIDED, "the reference failed %s: %s", what, call->error);
}

const char *ft_show(const char *t, char *buf, size_t cap) {
  size_t n = 0, i = 0;
  if (cap < 8) return "";
  buf[n++] = '\'';
  for (; t && t[i] && i < 40 && n + 5 < cap; i++) buf[n++] = (unsigned char)t[i] < 32 ? '.' : t[i];
  while (t && t[i] && i > 0 && ((unsigned char)t[i] & 0xC0) == 0x80) i--, n--; /* not inside a UTF-8 character */
  if (t && t[i]) buf[n++] = '.', buf[n++] = '.';
  buf[n++] = '\'';
  buf[n] = 0;
  return buf;
}

vstatus ft_need_greedy(ft_ctx *c) {
  if (c->have_greedy) return V_OK;
  for (int k = 0; k < 2; k++) VTRY(ft_ask(c, 1, ft_greedy_gen(c), &c->greedy[k]));
  c->have_greedy = true;
  const served_choice *a = ft_first(&c->greedy[0]), *b = ft_first(&c->greedy[1]);
  c->greedy_same = a && b && a->text_len == b->text_len && !memcmp(a->text, b->text, a->text_len) &&
                   !strcmp(a->finish_reason, b->finish_reason);
  return V_OK;
}

vstatus ft_need_cand_greedy(ft_ctx *c) {
  if (c->have_cand_greedy) return V_OK;
  VTRY(ft_ask(c, 0, ft_greedy_gen(c), &c->cand_greedy));
  c->have_cand_greedy = true;
  return V_OK;
}

size_t ft_common_prefix(const served_choice *a, const served_choice *b) {
  if (!a || !b) return 0;
  size_t n = 0;
  while (n < a->text_len && n < b->text_len && a->text[n] == b->text[n]) n++;
  return n;
}

void ft_ctx_free(ft_ctx *c) {
  if (c->have_greedy) served_calls_free(c->greedy, 2);
  c->have_greedy = false;
  if (c->have_cand_greedy) served_calls_free(&c->cand_greedy, 1);
  c->have_cand_greedy = false;
}
