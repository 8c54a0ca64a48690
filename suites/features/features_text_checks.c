/* The checks of `vouch features --ref-server` that compare texts and counts (stop strings and stop
 * token ids, max_tokens, min_tokens, seeded sampling, a prompt near max_model_len, n, streaming),
 * and what every check shares (suites/features/features_text_checks.h). Every request is sent alone
 * (one in flight per server), so a server's batching cannot move a greedy token between two asks;
 * a text check is decided only when the reference's own greedy continuation reproduces itself. */
#include "suites/features/features_text_checks.h"
#include "suites/features/features_text_dist.h"
#include "suites/features/features_text_struct.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/interrupt.h"
#include "suites/served/served_refusal.h"

static const char *const NAMES[FT_N_CHECKS] = {
    "stop_strings", "stop_token_ids", "max_tokens", "min_tokens", "seeded_sampling", "temperature", "top_p",
    "json_schema", "regex", "choice", "max_model_len", "n_choices", "stream", "logprobs"};

const char *ft_check_name(int i) { return i >= 0 && i < FT_N_CHECKS ? NAMES[i] : NULL; }

#define MAX_TOKENS_N 8     /* max_tokens asked by the max_tokens check */
#define MIN_TOKENS_N 12    /* min_tokens asked by the min_tokens check (of FT_TOKENS) */
#define SEEDED_TOKENS 8    /* tokens of each seeded sample */
#define N_CHOICES 3        /* n asked by the n check */
#define CTX_MARGIN 8       /* the max_model_len check's prompt: max_model_len - this many tokens */

/* The reference's greedy text when it reproduces itself, else NULL with r undecided. */
static const served_choice *greedy_or_undecided(ft_ctx *c, ft_result *r) {
  const served_choice *g = ft_first(&c->greedy[0]);
  if (!g) ft_ref_failed(r, &c->greedy[0], "the greedy continuation");
  else if (!ft_first(&c->greedy[1])) ft_ref_failed(r, &c->greedy[1], "the greedy continuation");
  else if (!c->greedy_same) ft_set(r, FT_UNDECIDED, "the reference's greedy continuation differs between two asks");
  else return g;
  return NULL;
}

/* True when choices a and b have the same text and finish reason. */
static bool same_answer(const served_choice *a, const served_choice *b) {
  return a && b && a->text_len == b->text_len && !memcmp(a->text, b->text, a->text_len) &&
         !strcmp(a->finish_reason, b->finish_reason);
}

/* True when byte i of t starts a UTF-8 character (or is its end). */
static bool char_start(const char *t, size_t i) { return ((unsigned char)t[i] & 0xC0) != 0x80; }

/* A stop string from text t[n]: the first piece of up to 3 bytes, starting at byte from or later,
 * that is whole UTF-8 characters, not only blanks, and occurs first where it starts (so the answer
 * must end just before it). Into buf; its offset in *at. False when there is none. */
static bool pick_stop(const char *t, size_t n, size_t from, char *buf, size_t *at) {
  for (size_t o = from; o < n; o++) {
    if (!char_start(t, o)) continue;
    size_t L = n - o < 3 ? n - o : 3;
    while (L > 0 && !char_start(t, o + L)) L--;
    if (!L) continue;
    memcpy(buf, t + o, L);
    buf[L] = 0;
    if (strspn(buf, " \t\r\n") == L || strlen(buf) != L) continue;
    const char *f = strstr(t, buf);
    if (f && (size_t)(f - t) == o) {
      *at = o;
      return true;
    }
  }
  return false;
}

/* The candidate's answer against the reference's (text, finish reason, vLLM stop_reason when the
 * reference gives one). */
static void judge_same(ft_result *r, const served_call *cc, const served_choice *rc, const char *what) {
  const served_choice *ch = ft_first(cc);
  char a[64], b[64];
  if (!ch) { ft_set(r, FT_FAIL, "%s: the reference answers, the candidate fails: %s", what, cc->error); return; }
  const bool same = same_answer(ch, rc) && (!rc->stop_reason[0] || !strcmp(ch->stop_reason, rc->stop_reason));
  r->cand = (double)ch->text_len, r->ref = (double)rc->text_len, r->unit = "bytes";
  ft_set(r, same ? FT_PASS : FT_FAIL, "%s: candidate %zu bytes %s finish %s stop_reason '%s'; reference %zu bytes %s "
         "finish %s stop_reason '%s'", what, ch->text_len, ft_show(ch->text, a, sizeof a), ch->finish_reason,
         ch->stop_reason, rc->text_len, ft_show(rc->text, b, sizeof b), rc->finish_reason, rc->stop_reason);
}

static void judge_own_stop_at(ft_result *r, const served_call *cc, const served_choice *cg, size_t end, size_t common,
                              const char *what);

/* The stop judged on the candidate's own greedy text cg, which leaves the reference's at byte
 * `common` before the stop (the reference has shown it honours the stop): the candidate's answer
 * with a stop must be cg up to that stop's first occurrence, finish "stop". The stop is the
 * reference's when cg holds it, else one picked from cg as from the reference's text (one more
 * request); undecided when cg holds none. */
static vstatus judge_own_stop(ft_ctx *c, ft_result *r, const served_call *cc, const served_choice *cg, const char *stop,
                              size_t common, const char *what) {
  const char *f = strstr(cg->text, stop);
  if (f) return judge_own_stop_at(r, cc, cg, (size_t)(f - cg->text), common, what), V_OK;
  char own[8], what2[120], sh[32];
  size_t at;
  if (!pick_stop(cg->text, cg->text_len, cg->text_len / 3 ? cg->text_len / 3 : 1, own, &at)) {
    ft_set(r, FT_UNDECIDED, "%s: the candidate's own greedy text leaves the reference's at byte %zu, never holds the "
           "stop and offers none of its own (its numerics differ: logprobs and diverge judge those)", what, common);
    return V_OK;
  }
  served_gen q = ft_greedy_gen(c);
  const char *stops[1] = {own};
  q.stop = stops, q.n_stop = 1;
  served_call oc;
  VTRY(ft_ask(c, 0, q, &oc));
  snprintf(what2, sizeof what2, "stop %s (byte %zu of the candidate's greedy text; the reference's stop is not in it)",
           ft_show(own, sh, sizeof sh), at);
  judge_own_stop_at(r, &oc, cg, at, common, what2);
  served_calls_free(&oc, 1);
  return V_OK;
}

static void judge_own_stop_at(ft_result *r, const served_call *cc, const served_choice *cg, size_t end, size_t common,
                              const char *what) {
  const served_choice *ch = ft_first(cc);
  char a[64], b[64];
  if (!ch) { ft_set(r, FT_FAIL, "%s: the reference answers, the candidate fails: %s", what, cc->error); return; }
  const bool ok = ch->text_len == end && !memcmp(ch->text, cg->text, end) && !strcmp(ch->finish_reason, "stop");
  r->cand = (double)ch->text_len, r->ref = (double)end, r->unit = "bytes";
  ft_set(r, ok ? FT_PASS : FT_FAIL, "%s, on the candidate's own greedy text (it leaves the reference's at byte %zu): "
         "candidate %zu bytes %s finish %s; its greedy text holds the stop first at byte %zu %s", what, common,
         ch->text_len, ft_show(ch->text, a, sizeof a), ch->finish_reason, end, ft_show(cg->text, b, sizeof b));
}

static vstatus check_stop_strings(ft_ctx *c, ft_result *r) {
  const served_choice *g = greedy_or_undecided(c, r);
  if (!g) return V_OK;
  char stop[8];
  size_t at;
  if (!pick_stop(g->text, g->text_len, g->text_len / 3 ? g->text_len / 3 : 1, stop, &at)) {
    ft_set(r, FT_UNDECIDED, "no stop string occurs first past a third of the reference's continuation (%zu bytes)", g->text_len);
    return V_OK;
  }
  VTRY(ft_need_cand_greedy(c)); /* before the asks below: nothing of theirs to free on an error */
  served_gen q = ft_greedy_gen(c);
  const char *stops[1] = {stop};
  q.stop = stops, q.n_stop = 1;
  served_call rc, cc;
  VTRY(ft_ask(c, 1, q, &rc));
  VTRY(ft_ask(c, 0, q, &cc));
  const served_choice *rch = ft_first(&rc);
  char what[80], sh[32];
  vstatus st = V_OK;
  snprintf(what, sizeof what, "stop %s (byte %zu of the greedy text)", ft_show(stop, sh, sizeof sh), at);
  if (!rch) ft_ref_failed(r, &rc, "stop");
  else if (rch->text_len != at || memcmp(rch->text, g->text, at) || strcmp(rch->finish_reason, "stop"))
    ft_set(r, FT_UNDECIDED, "%s: the reference does not stop there itself (%zu bytes, finish %s)", what, rch->text_len,
           rch->finish_reason);
  else {
    const served_choice *cg = ft_first(&c->cand_greedy);
    const size_t common = ft_common_prefix(cg, g);
    if (!cg || common >= at + strlen(stop)) judge_same(r, &cc, rch, what); /* the same text up to the stop */
    else st = judge_own_stop(c, r, &cc, cg, stop, common, what);
  }
  served_calls_free(&rc, 1);
  served_calls_free(&cc, 1);
  return st;
}

static vstatus check_stop_token_ids(ft_ctx *c, ft_result *r) {
  const served_choice *g = greedy_or_undecided(c, r);
  if (!g) return V_OK;
  if (!g->has_token_ids || g->n_token_ids < 3) {
    ft_set(r, FT_UNDECIDED, "the reference gives no token ids of its continuation (return_token_ids): no stop id to pick");
    return V_OK;
  }
  int p = -1; /* the first position past a third whose id does not occur before it */
  for (int i = g->n_token_ids / 3; i < g->n_token_ids - 1 && p < 0; i++) {
    bool seen = false;
    for (int k = 0; k < i && !seen; k++) seen = g->token_ids[k] == g->token_ids[i];
    if (!seen) p = i;
  }
  if (p < 0) { ft_set(r, FT_UNDECIDED, "no token id of the reference's continuation occurs first past a third"); return V_OK; }
  VTRY(ft_need_cand_greedy(c)); /* before the asks below: nothing of theirs to free on an error */
  served_gen q = ft_greedy_gen(c);
  const int32_t id = g->token_ids[p];
  q.stop_token_ids = &id, q.n_stop_token_ids = 1;
  served_call rc, cc;
  VTRY(ft_ask(c, 1, q, &rc));
  VTRY(ft_ask(c, 0, q, &cc));
  const served_choice *rch = ft_first(&rc);
  char what[80];
  snprintf(what, sizeof what, "stop_token_ids [%d] (token %d of the greedy continuation)", id, p + 1);
  if (!rch) ft_ref_failed(r, &rc, "stop_token_ids");
  else if (strcmp(rch->finish_reason, "stop") || ft_ntokens(&rc) > p + 1 || rch->text_len > g->text_len ||
           memcmp(rch->text, g->text, rch->text_len))
    ft_set(r, FT_NOT_SUPPORTED, "%s: the reference does not honour it (%ld tokens, finish %s)", what, ft_ntokens(&rc),
           rch->finish_reason);
  else {
    const served_choice *cg = ft_first(&c->cand_greedy);
    int same = 0; /* the candidate's greedy ids that are the reference's, from the first */
    while (cg && cg->has_token_ids && same < cg->n_token_ids && same <= p && cg->token_ids[same] == g->token_ids[same])
      same++;
    if (cg && cg->has_token_ids && same <= p) /* its own text reaches the stop id elsewhere or never */
      ft_set(r, FT_UNDECIDED, "%s: the candidate's own greedy continuation leaves the reference's at token %d, before "
             "the stop id (its numerics differ: logprobs and diverge judge those)", what, same + 1);
    else judge_same(r, &cc, rch, what);
  }
  served_calls_free(&rc, 1);
  served_calls_free(&cc, 1);
  return V_OK;
}

static vstatus check_max_tokens(ft_ctx *c, ft_result *r) {
  served_gen q = ft_greedy_gen(c);
  q.max_tokens = MAX_TOKENS_N;
  served_call rc, cc;
  VTRY(ft_ask(c, 1, q, &rc));
  VTRY(ft_ask(c, 0, q, &cc));
  const served_choice *rch = ft_first(&rc), *cch = ft_first(&cc);
  const long nr = ft_ntokens(&rc), nc = ft_ntokens(&cc);
  r->cand = (double)nc, r->ref = (double)nr, r->unit = "tokens";
  if (!rch) ft_ref_failed(r, &rc, "max_tokens");
  else if (nr != MAX_TOKENS_N || strcmp(rch->finish_reason, "length"))
    ft_set(r, FT_UNDECIDED, "max_tokens %d: the reference gives %ld tokens, finish %s (it stopped first)", MAX_TOKENS_N, nr,
           rch->finish_reason);
  else if (!cch) ft_set(r, FT_FAIL, "max_tokens %d: the reference answers, the candidate fails: %s", MAX_TOKENS_N, cc.error);
  else if (nc < 0) ft_set(r, FT_UNDECIDED, "max_tokens %d: the candidate gives no token count (usage, token ids)", MAX_TOKENS_N);
  else
    ft_set(r, nc == MAX_TOKENS_N && !strcmp(cch->finish_reason, "length") ? FT_PASS : FT_FAIL,
           "max_tokens %d: candidate %ld tokens finish %s; reference %ld tokens finish %s", MAX_TOKENS_N, nc,
           cch->finish_reason, nr, rch->finish_reason);
  served_calls_free(&rc, 1);
  served_calls_free(&cc, 1);
  return V_OK;
}

/* min_tokens with a stop string that the reference meets before min_tokens without it. */
static vstatus check_min_tokens(ft_ctx *c, ft_result *r) {
  const served_choice *g = greedy_or_undecided(c, r);
  if (!g) return V_OK;
  char stop[8];
  size_t at;
  if (!pick_stop(g->text, g->text_len, 1, stop, &at)) {
    ft_set(r, FT_UNDECIDED, "no stop string in the reference's continuation");
    return V_OK;
  }
  served_gen q = ft_greedy_gen(c);
  const char *stops[1] = {stop};
  q.stop = stops, q.n_stop = 1;
  served_call r0, rc, cc;
  VTRY(ft_ask(c, 1, q, &r0));
  q.min_tokens = MIN_TOKENS_N;
  VTRY(ft_ask(c, 1, q, &rc));
  VTRY(ft_ask(c, 0, q, &cc));
  const long n0 = ft_ntokens(&r0), nr = ft_ntokens(&rc), nc = ft_ntokens(&cc);
  char what[80], sh[32];
  snprintf(what, sizeof what, "min_tokens %d with stop %s", MIN_TOKENS_N, ft_show(stop, sh, sizeof sh));
  r->cand = (double)nc, r->ref = (double)nr, r->unit = "tokens";
  if (!ft_first(&r0)) ft_ref_failed(r, &r0, "stop");
  else if (n0 < 0 || n0 >= MIN_TOKENS_N)
    ft_set(r, FT_UNDECIDED, "%s: without min_tokens the reference stops after %ld tokens, not before %d", what, n0, MIN_TOKENS_N);
  else if (!ft_first(&rc)) ft_ref_failed(r, &rc, "min_tokens");
  else if (nr < MIN_TOKENS_N)
    ft_set(r, FT_NOT_SUPPORTED, "%s: the reference ignores min_tokens (%ld tokens; %ld without it)", what, nr, n0);
  else if (!ft_first(&cc)) ft_set(r, FT_FAIL, "%s: the reference answers, the candidate fails: %s", what, cc.error);
  else if (nc < 0) ft_set(r, FT_UNDECIDED, "%s: the candidate gives no token count (usage, token ids)", what);
  else ft_set(r, nc >= MIN_TOKENS_N ? FT_PASS : FT_FAIL, "%s: candidate %ld tokens; reference %ld (%ld without min_tokens)",
              what, nc, nr, n0);
  served_calls_free(&r0, 1);
  served_calls_free(&rc, 1);
  served_calls_free(&cc, 1);
  return V_OK;
}

/* The same seed twice gives the same text on the candidate, when it does on the reference. */
static vstatus check_seeded(ft_ctx *c, ft_result *r) {
  served_gen q = ft_greedy_gen(c);
  q.temperature = 1, q.max_tokens = SEEDED_TOKENS, q.has_seed = true, q.seed = c->seed % (1ull << 53);
  served_call a[2][2]; /* [side][ask] */
  for (int side = 1; side >= 0; side--)
    for (int k = 0; k < 2; k++) VTRY(ft_ask(c, side, q, &a[side][k]));
  const served_choice *r0 = ft_first(&a[1][0]), *r1 = ft_first(&a[1][1]);
  const served_choice *c0 = ft_first(&a[0][0]), *c1 = ft_first(&a[0][1]);
  char x[64], y[64];
  if (!r0 || !r1) ft_ref_failed(r, r0 ? &a[1][1] : &a[1][0], "a seeded sample");
  else if (!same_answer(r0, r1))
    ft_set(r, FT_UNDECIDED, "seed %llu, temperature 1: the reference does not reproduce itself (%s, then %s)",
           (unsigned long long)q.seed, ft_show(r0->text, x, sizeof x), ft_show(r1->text, y, sizeof y));
  else if (!c0 || !c1) ft_set(r, FT_FAIL, "seed %llu: the candidate fails: %s", (unsigned long long)q.seed,
                              c0 ? a[0][1].error : a[0][0].error);
  else
    ft_set(r, same_answer(c0, c1) ? FT_PASS : FT_FAIL, "seed %llu, temperature 1, %d tokens: candidate %s then %s; "
           "reference %s twice", (unsigned long long)q.seed, SEEDED_TOKENS, ft_show(c0->text, x, sizeof x),
           ft_show(c1->text, y, sizeof y), ft_show(r0->text, (char[64]){0}, 64));
  for (int side = 0; side < 2; side++) served_calls_free(a[side], 2);
  return V_OK;
}

/* A prompt of max_model_len - CTX_MARGIN token ids (the reference's continuation's ids, repeated): the
 * candidate answers when the reference does, and refuses for the context when the reference does. */
static vstatus check_max_model_len(ft_ctx *c, ft_result *r) {
  const long L = c->sv[1].id.max_model_len;
  const served_choice *g = ft_first(&c->greedy[0]);
  if (L <= CTX_MARGIN + 1) { ft_set(r, FT_UNDECIDED, "the reference gives no max_model_len in /v1/models"); return V_OK; }
  /* no continuation to take ids from: the reference refused the text prompt (a token-id server: not
   * supported, as every other check says) or failed it */
  if (!g) { ft_ref_failed(r, &c->greedy[0], "the greedy continuation"); return V_OK; }
  if (!g->has_token_ids || !g->n_token_ids) {
    ft_set(r, FT_UNDECIDED, "the reference gives no token ids (return_token_ids) to make a prompt of %ld tokens", L - CTX_MARGIN);
    return V_OK;
  }
  const int n = (int)(L - CTX_MARGIN);
  int32_t *ids = malloc((size_t)n * sizeof *ids);
  if (!ids) return VERR("features: out of memory for a prompt of %d tokens", n);
  for (int i = 0; i < n; i++) ids[i] = g->token_ids[i % g->n_token_ids];
  served_gen q = served_gen_default();
  q.prompt_ids = ids, q.n_prompt_ids = n, q.max_tokens = 4, q.temperature = 0;
  served_call rc, cc;
  vstatus e = ft_ask(c, 1, q, &rc);
  if (!e) e = ft_ask(c, 0, q, &cc);
  free(ids);
  VTRY(e);
  const bool rok = rc.ok, cok = cc.ok, rctx = served_refused_context(&rc), cctx = served_refused_context(&cc);
  const char *rs = rok ? "answers" : rctx ? "refuses for the context" : "fails", *cs = cok ? "answers" : cctx ? "refuses for the context" : "fails";
  r->cand = (double)ft_ntokens(&cc), r->ref = (double)ft_ntokens(&rc), r->unit = "tokens";
  if (!rok && !rctx) ft_ref_failed(r, &rc, "the long prompt");
  else ft_set(r, (rok && cok) || (rctx && cctx) ? FT_PASS : FT_FAIL, "a prompt of %d tokens (max_model_len %ld - %d), "
              "max_tokens 4: the candidate %s%s%.200s; the reference %s", n, L, CTX_MARGIN, cs, cok ? "" : ": ",
              cok ? "" : cc.error, rs);
  served_calls_free(&rc, 1);
  served_calls_free(&cc, 1);
  return V_OK;
}

/* n greedy choices: n of them, each well-formed, each the candidate's own greedy text (decided when the
 * reference's n choices are all its greedy text). */
static vstatus check_n(ft_ctx *c, ft_result *r) {
  const served_choice *g = greedy_or_undecided(c, r);
  if (!g) return V_OK;
  VTRY(ft_need_cand_greedy(c)); /* before the asks below: nothing of theirs to free on an error */
  served_gen q = ft_greedy_gen(c);
  q.n = N_CHOICES;
  served_call rc, cc;
  VTRY(ft_ask(c, 1, q, &rc));
  VTRY(ft_ask(c, 0, q, &cc));
  r->cand = cc.ok ? cc.reply.n_choices : NAN, r->ref = rc.ok ? rc.reply.n_choices : NAN, r->unit = "choices";
  bool ref_same = rc.ok && rc.reply.n_choices == N_CHOICES;
  for (int i = 0; ref_same && i < N_CHOICES; i++) ref_same = same_answer(served_reply_choice(&rc.reply, i), g);
  /* each of the candidate's choices must be its own greedy text (the reference's when it asks none):
   * whether n copies come back is the feature; whether its text is the reference's is numerics */
  const served_choice *own = ft_first(&c->cand_greedy) ? ft_first(&c->cand_greedy) : g;
  int good = 0; /* the candidate's choices with index 0..n-1, a finish reason and its greedy text */
  for (int i = 0; cc.ok && i < N_CHOICES; i++) {
    const served_choice *ch = served_reply_choice(&cc.reply, i);
    good += ch && ch->finish_reason[0] && same_answer(ch, own);
  }
  if (!rc.ok) ft_ref_failed(r, &rc, "n");
  else if (!ref_same)
    ft_set(r, FT_UNDECIDED, "n %d at temperature 0: the reference's %d choices are not all its greedy text", N_CHOICES,
           rc.reply.n_choices);
  else if (!cc.ok) ft_set(r, FT_FAIL, "n %d: the reference answers, the candidate fails: %s", N_CHOICES, cc.error);
  else
    ft_set(r, cc.reply.n_choices == N_CHOICES && good == N_CHOICES ? FT_PASS : FT_FAIL,
           "n %d at temperature 0: candidate %d choices, %d of them its own greedy text (%s the reference's) with a "
           "finish reason; reference %d, all %d its greedy text", N_CHOICES, cc.reply.n_choices, good,
           own == g || same_answer(own, g) ? "which is" : "which is not", rc.reply.n_choices, N_CHOICES);
  served_calls_free(&rc, 1);
  served_calls_free(&cc, 1);
  return V_OK;
}

/* Streamed equals whole at temperature 0 on the candidate, when it does on the reference. */
static vstatus check_stream(ft_ctx *c, ft_result *r) {
  const served_choice *g = greedy_or_undecided(c, r);
  if (!g) return V_OK;
  served_gen q = ft_greedy_gen(c);
  served_call cw, rs, cs;
  VTRY(ft_ask(c, 0, q, &cw));
  q.stream = true;
  VTRY(ft_ask(c, 1, q, &rs));
  VTRY(ft_ask(c, 0, q, &cs));
  const served_choice *rsc = ft_first(&rs), *csc = ft_first(&cs), *cwc = ft_first(&cw);
  char x[64], y[64];
  if (!rsc) ft_ref_failed(r, &rs, "a stream");
  else if (!same_answer(rsc, g)) ft_set(r, FT_UNDECIDED, "the reference's stream differs from its whole answer");
  else if (!cwc || !csc) ft_set(r, FT_FAIL, "the reference streams, the candidate fails: %s", cwc ? cs.error : cw.error);
  else
    ft_set(r, same_answer(csc, cwc) ? FT_PASS : FT_FAIL, "temperature 0, %d tokens: candidate streamed %s finish %s, "
           "whole %s finish %s (%d events); the reference's stream is its whole answer", FT_TOKENS,
           ft_show(csc->text, x, sizeof x), csc->finish_reason, ft_show(cwc->text, y, sizeof y), cwc->finish_reason,
           cs.reply.n_events);
  served_calls_free(&cw, 1);
  served_calls_free(&rs, 1);
  served_calls_free(&cs, 1);
  return V_OK;
}

vstatus ft_check_run(ft_ctx *c, int i, ft_result *r) {
  memset(r, 0, sizeof *r);
  r->cand = r->ref = r->bound = NAN;
  r->unit = "";
  VTRY(ft_need_greedy(c));
  switch (i) {
  case FT_STOP_STRINGS: return check_stop_strings(c, r);
  case FT_STOP_TOKEN_IDS: return check_stop_token_ids(c, r);
  case FT_MAX_TOKENS: return check_max_tokens(c, r);
  case FT_MIN_TOKENS: return check_min_tokens(c, r);
  case FT_SEEDED: return check_seeded(c, r);
  case FT_TEMPERATURE: return ft_check_temperature(c, r);
  case FT_TOP_P: return ft_check_top_p(c, r);
  case FT_JSON_SCHEMA: return ft_check_structured(c, SERVED_STRUCT_JSON, r);
  case FT_REGEX: return ft_check_structured(c, SERVED_STRUCT_REGEX, r);
  case FT_CHOICE: return ft_check_structured(c, SERVED_STRUCT_CHOICE, r);
  case FT_MAX_MODEL_LEN: return check_max_model_len(c, r);
  case FT_N: return check_n(c, r);
  case FT_STREAM: return check_stream(c, r);
  case FT_LOGPROBS: return ft_check_logprobs(c, r);
  }
  return VERR("features: no check %d", i);
}
