/* One text position of two servers' prompt logprobs, compared (suites/diverge/diverge_text.c).
 *
 * A server gives, per prompt position, the logprob of the token that is there and of its top-K
 * alternatives (vLLM's prompt_logprobs, or echo + logprobs): a piece of its next-token distribution,
 * not the whole. Two servers' pieces are compared on the partition they share: each token listed by
 * BOTH at that position is a cell of its own, every other token falls in one cell "the rest". Both
 * distributions coarsened to the same partition have a KL divergence no larger than the full one's
 * (the data-processing inequality), so a KLD above a bound here is above it in full, and the figure
 * is the same whichever server is asked first. */
#ifndef VOUCH_SUITES_DIVERGE_DIVERGE_TEXT_SCORE_H
#define VOUCH_SUITES_DIVERGE_DIVERGE_TEXT_SCORE_H

#include <stdbool.h>
#include <stddef.h>

#include "suites/served/served_text.h"

/* The comparison of one position: reference r against candidate c. */
typedef struct {
  double kld;          /* KL(r || c) on the shared partition, nats (>= 0 up to the servers' rounding) */
  bool same_top;       /* the most likely token each lists is the same token */
  double margin;       /* the reference's top-1 minus top-2 logprob (+inf when it lists one token) */
  double top_err;      /* max |c - r| logprob over the reference's top two tokens that c lists too
                          (0 when c lists neither) */
  double dp;           /* exp(c) - exp(r) of the token at the position (probability units) */
  int shared;          /* tokens both list (cells before "the rest") */
} dtext_pos;

/* True when r and c name the same token (by id when both give one, else by its text). */
bool dtext_same_token(const char *rt, int rid, const char *ct, int cid);
/* Compares position r (the reference's) with c (the candidate's) into *out. False with a one-line
 * reason in why[cap] when they cannot be compared: the token at the position differs (the servers
 * tokenized the text differently), or a logprob is not finite or above 0.001 (not a logprob). */
bool dtext_compare(const served_pos *r, const served_pos *c, dtext_pos *out, char *why, size_t cap);
/* dtext_compare of the distributions alone (the KLD, same top token, margin, top_err; dp NaN), for
 * positions that carry no token of their own: a token-id prompt's next-token distribution, one
 * max_tokens 1 request per row (diverge_ids.h), whose chosen token is each server's own greedy pick.
 * False with the reason in why[cap] when an alternative's logprob is not a logprob. */
bool dtext_compare_dist(const served_pos *r, const served_pos *c, dtext_pos *out, char *why, size_t cap);

#endif
