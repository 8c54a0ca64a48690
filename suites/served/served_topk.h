/* Two servers' top-K alternatives at one position, compared (suites/served/served_text.h served_pos).
 * A server lists a piece of its next-token distribution, not the whole: the two pieces are compared
 * on the partition they share (each token both list is a cell, every other token falls in one cell
 * "the rest"), whose KL divergence is no larger than the full one's (the data-processing
 * inequality). features --ref-server and diverge --ref-server (suites/diverge/diverge_text_score.h) use it. */
#ifndef VOUCH_SUITES_SERVED_SERVED_TOPK_H
#define VOUCH_SUITES_SERVED_SERVED_TOPK_H

#include <stdbool.h>
#include <stddef.h>

#include "suites/served/served_text.h"

/* True when two tokens are the same token: by id when both give one, else by their text. */
bool served_same_token(const char *rt, int rid, const char *ct, int cid);
/* KL(r || c) over the partition of r's and c's alternatives into *kld (nats); *shared (may be NULL)
 * gets the tokens both list (the cells before "the rest"). False with a one-line reason in why[cap]
 * when an alternative's logprob is not finite or above 0.001 (not a logprob). */
bool served_topk_kld(const served_pos *r, const served_pos *c, double *kld, int *shared, char *why, size_t cap);

#endif
