/* Token-id prompts of `vouch diverge --ref-server` for a reference that takes no text
 * (suites/diverge/diverge_ids.h). */
#include "suites/diverge/diverge_ids.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/interrupt.h"
#include "suites/engine/record.h"

vstatus dids_probe(const served_side *ref, const char *text, bool *ids, char *why, size_t cap) {
  static const int32_t probe_ids[4] = {1, 2, 3, 4};
  *ids = false;
  served_call c[2] = {{.path = SERVED_COMPLETIONS}, {.path = SERVED_COMPLETIONS}};
  served_gen g = served_gen_default();
  g.model = ref->id.id, g.max_tokens = 1, g.temperature = 0, g.prompt = text;
  VTRY(served_build_completion(&g, &c[0].body));
  vstatus e = served_calls_run(&ref->conn, &c[0], 1, 1, vinterrupted, NULL, NULL);
  if (!e && c[0].ok) snprintf(why, cap, "the reference answers a text prompt");
  else if (!e && !(c[0].http >= 400 && c[0].http < 500))
    snprintf(why, cap, "the reference failed a text prompt, not refused it (%.300s)", c[0].error);
  else if (!e) {
    g.prompt = NULL, g.prompt_ids = probe_ids, g.n_prompt_ids = 4;
    e = served_build_completion(&g, &c[1].body);
    if (!e) e = served_calls_run(&ref->conn, &c[1], 1, 1, vinterrupted, NULL, NULL);
    *ids = !e && c[1].ok;
    if (!e)
      snprintf(why, cap, "the reference refuses a text prompt (HTTP %ld: %.200s) and %s", c[0].http,
               c[0].err_message ? c[0].err_message : c[0].error, *ids ? "answers token ids" : "fails token ids too");
  }
  served_calls_free(c, 2);
  return e;
}

vstatus dids_make(dids_set *d, const served_side *ref, int n, uint64_t seed) {
  memset(d, 0, sizeof *d);
  char model[256];
  int max_len = 0;
  snprintf(model, sizeof model, "%s", ref->id.id);
  VTRY(served_models_parse(ref->id.models_raw ? ref->id.models_raw : "{}", ref->conn.shown, model, sizeof model,
                           &d->vocab, &max_len, NULL));
  if (d->vocab < 2) d->vocab = 1000; /* as the served sweep draws its prompts */
  d->ids = calloc((size_t)n, sizeof *d->ids);
  d->len = calloc((size_t)n, sizeof *d->len);
  if (!d->ids || !d->len) return VERR("diverge: out of memory for %d token-id prompts", n);
  d->n = n;
  uint64_t st = seed ^ 0x9e3779b97f4a7c15ull; /* the prompts of seed S are the same on every machine */
  for (int i = 0; i < n; i++) {
    if (!(d->ids[i] = malloc(DIDS_PREFIX * sizeof **d->ids))) return VERR("diverge: out of memory for the prompts");
    for (int j = 0; j < DIDS_PREFIX; j++) d->ids[i][j] = (int32_t)(rec_rng_next(&st) % (uint64_t)d->vocab);
    d->len[i] = DIDS_PREFIX;
  }
  return V_OK;
}

/* The body hook of the continuation: prompt i, greedy, `tokens` ids. */
typedef struct {
  const dids_set *d;
  const served_side *sv;
  int tokens, logprobs;  /* continuation length; a scoring pass's top-K */
  const int *row_p, *row_j; /* scoring: row r is prompt row_p[r]'s first row_j[r] ids */
  bool reverse;          /* scoring: call k is row n_rows-1-k */
  int n_rows;
} body_ctx;

static vstatus cont_body(void *vctx, served_call *calls, int i) {
  const body_ctx *b = vctx;
  served_gen g = served_gen_default();
  g.model = b->sv->id.id, g.temperature = 0, g.max_tokens = b->tokens, g.ignore_eos = 1;
  g.prompt_ids = b->d->ids[i], g.n_prompt_ids = b->d->len[i];
  g.return_token_ids = true;
  return served_build_completion(&g, &calls[i].body);
}

vstatus dids_continue(dids_set *d, const served_side *ref, int tokens, int conc, char *err, size_t cap) {
  served_call *c = calloc((size_t)d->n, sizeof *c);
  if (!c) return VERR("diverge: out of memory for %d requests", d->n);
  for (int i = 0; i < d->n; i++) c[i].path = SERVED_COMPLETIONS;
  body_ctx b = {.d = d, .sv = ref, .tokens = tokens};
  vstatus e = served_calls_run(&ref->conn, c, d->n, conc, vinterrupted, cont_body, &b);
  for (int i = 0; !e && i < d->n; i++) {
    const served_choice *ch = c[i].ok ? served_reply_choice(&c[i].reply, 0) : NULL;
    if (!ch || !ch->has_token_ids || ch->n_token_ids < 1) {
      if (!err[0]) snprintf(err, cap, "reference, token-id prompt %d: %.300s", i + 1,
                            !c[i].sent ? "not sent (interrupted)" : !c[i].ok ? c[i].error : "the answer has no token_ids");
      continue;
    }
    int32_t *grown = realloc(d->ids[i], (size_t)(d->len[i] + ch->n_token_ids) * sizeof *grown);
    if (!grown) { e = VERR("diverge: out of memory for the continuations"); break; }
    memcpy(grown + d->len[i], ch->token_ids, (size_t)ch->n_token_ids * sizeof *grown);
    d->ids[i] = grown;
    d->len[i] += ch->n_token_ids;
  }
  served_calls_free(c, d->n);
  free(c);
  return e;
}

static vstatus row_body(void *vctx, served_call *calls, int k) {
  const body_ctx *b = vctx;
  const int r = b->reverse ? b->n_rows - 1 - k : k;
  served_gen g = served_gen_default();
  g.model = b->sv->id.id, g.temperature = 0, g.max_tokens = 1;
  g.prompt_ids = b->d->ids[b->row_p[r]], g.n_prompt_ids = b->row_j[r];
  g.logprobs = b->logprobs;
  g.tokens_as_ids = true; /* vLLM names the alternatives by id only when asked */
  return served_build_completion(&g, &calls[k].body);
}

vstatus dids_pass(const dids_set *d, const served_side *sv, int logprobs, bool reverse, int conc, served_call **out,
                  double *wall, char *err, size_t cap) {
  int n_rows = 0;
  for (int i = 0; i < d->n; i++) n_rows += d->len[i] - 1;
  int *row_p = malloc((size_t)n_rows * sizeof *row_p), *row_j = malloc((size_t)n_rows * sizeof *row_j);
  served_call *rows = calloc((size_t)n_rows, sizeof *rows), *res = calloc((size_t)d->n, sizeof *res);
  vstatus e = row_p && row_j && rows && res ? V_OK : VERR("diverge: out of memory for %d rows", n_rows);
  for (int i = 0, r = 0; !e && i < d->n; i++)
    for (int j = 1; j < d->len[i]; j++, r++) row_p[r] = i, row_j[r] = j;
  for (int k = 0; !e && k < n_rows; k++) rows[k].path = SERVED_COMPLETIONS;
  body_ctx b = {.d = d, .sv = sv, .logprobs = logprobs, .row_p = row_p, .row_j = row_j, .reverse = reverse, .n_rows = n_rows};
  const double t0 = vclock_now();
  if (!e) e = served_calls_run(&sv->conn, rows, n_rows, conc, vinterrupted, row_body, &b);
  *wall = vclock_now() - t0;
  /* per prompt, its rows' first generated positions as its prompt_lp (moved out of the rows) */
  for (int i = 0, r = 0; !e && i < d->n; i++) {
    served_reply *rep = &res[i].reply;
    if (!(rep->prompt_lp = calloc((size_t)d->len[i], sizeof *rep->prompt_lp))) { e = VERR("diverge: out of memory"); break; }
    rep->n_prompt_lp = d->len[i];
    rep->prompt_lp[0] = (served_pos){.id = -1, .logprob = NAN, .text_offset = -1};
    rep->prompt_lp_from = "rows";
    res[i].sent = res[i].ok = true;
    for (int j = 1; j < d->len[i]; j++, r++) {
      served_call *q = &rows[reverse ? n_rows - 1 - r : r];
      served_choice *ch = q->ok ? (served_choice *)served_reply_choice(&q->reply, 0) : NULL;
      const char *why = !q->sent ? "not sent (interrupted)" : !q->ok ? q->error
                        : !ch || ch->n_lp < 1 || ch->lp[0].n_top < 1 ? "the answer has no top logprobs" : NULL;
      if (why) {
        if (res[i].ok) snprintf(res[i].error, sizeof res[i].error, "%.390s", why);
        res[i].ok = false;
        if (!err[0]) snprintf(err, cap, "%s, token-id prompt %d, position %d: %.300s", sv->role, i + 1, j, why);
        rep->prompt_lp[j] = (served_pos){.id = -1, .logprob = NAN, .text_offset = -1};
        continue;
      }
      rep->prompt_lp[j] = ch->lp[0];
      memset(&ch->lp[0], 0, sizeof ch->lp[0]); /* moved: the row's reply frees nothing of it */
      rep->prompt_lp[j].id = d->ids[i][j]; /* the position's token: the one teacher-forced next */
    }
  }
  if (rows) served_calls_free(rows, n_rows);
  free(rows), free(row_p), free(row_j);
  if (e) {
    if (res) served_calls_free(res, d->n);
    free(res);
    return e;
  }
  *out = res;
  return V_OK;
}

void dids_free(dids_set *d) {
  for (int i = 0; d->ids && i < d->n; i++) free(d->ids[i]);
  free(d->ids);
  free(d->len);
  memset(d, 0, sizeof *d);
}
