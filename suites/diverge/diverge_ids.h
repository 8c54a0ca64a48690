/* Token-id prompts for `vouch diverge --server URL --ref-server URL` without --prompts when the
 * reference takes no text (a token-id server: vouch serve, which has no tokenizer): the built-in text
 * prompts cannot be sent, so the pair is teacher-forced on built-in token-id prompts instead
 * (suites/diverge/diverge_text.c decides which, by a probe: dids_probe).
 *
 * Each prompt is DIDS_PREFIX ids drawn below the reference's vocab_size (1000 when /v1/models gives
 * none) from the run's seed, continued by the reference greedily (--tokens ids). Every position j >= 1
 * of prompt + continuation is then one row: a completion of its first j ids, max_tokens 1, top-K
 * logprobs named by token id (vLLM's return_tokens_as_token_ids; vouch serve names them so always):
 * the server's next-token distribution there. A pass's rows of one prompt are gathered into that
 * prompt's served_reply.prompt_lp (position 0 empty), the shape the text mode's prompt logprobs have,
 * so the text mode's comparison, floor and verdict apply unchanged (compared with dtext_compare_dist:
 * a row has no token of its own, its chosen token being each server's greedy pick). */
#ifndef VOUCH_SUITES_DIVERGE_DIVERGE_IDS_H
#define VOUCH_SUITES_DIVERGE_DIVERGE_IDS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/vstatus.h"
#include "suites/served/served_pair.h"
#include "suites/served/served_text.h"

#define DIDS_PROMPTS 16 /* built-in token-id prompts (--limit: fewer) */
#define DIDS_PREFIX 16  /* ids per prompt before the reference's continuation */

/* The prompts and, once continued, prompt + continuation. */
typedef struct {
  int n;          /* prompts */
  int32_t **ids;  /* [n][len[i]] token ids (owned) */
  int *len;       /* [n] prompt ids, then prompt + continuation ids */
  int vocab;      /* the ids are below this (the reference's vocab_size, else 1000) */
} dids_set;

/* Whether the reference `ref` takes token ids only: it is asked for one greedy token of `text` (a
 * built-in text prompt); when it refuses that with an HTTP 4xx status, the same request with the
 * prompt as token ids [1, 2, 3, 4]; *ids true when the second is answered. why[cap] says what was seen
 * (for the record). Error: the request runner failed (not a refusal: that is an answer). */
vstatus dids_probe(const served_side *ref, const char *text, bool *ids, char *why, size_t cap);
/* n prompts of DIDS_PREFIX ids from `seed`, below the reference's vocab_size (from its /v1/models).
 * Error: out of memory, or /v1/models malformed (naming the server). */
vstatus dids_make(dids_set *d, const served_side *ref, int n, uint64_t seed);
/* Continues every prompt with the reference's `tokens` greedy ids (temperature 0, return_token_ids),
 * at most conc in flight. A prompt the reference fails or answers without token ids: its message in
 * err[cap] (d unchanged for the others), V_OK. Error: out of memory or the runner failed. */
vstatus dids_continue(dids_set *d, const served_side *ref, int tokens, int conc, char *err, size_t cap);
/* One scoring pass of side `sv`: every row (above) with top-`logprobs` logprobs, at most conc in flight,
 * in prompt order or (reverse) from the last row to the first; *out[d->n] (calloc'ed; served_calls_free
 * and free) holds per prompt its rows' positions as reply.prompt_lp, ok when every row was answered
 * with logprobs. The first failed row's message goes to err[cap] when err is "". *wall: seconds.
 * Error: out of memory or the runner failed. */
vstatus dids_pass(const dids_set *d, const served_side *sv, int logprobs, bool reverse, int conc, served_call **out,
                  double *wall, char *err, size_t cap);
void dids_free(dids_set *d);

#endif
