/* What the evals on real text over servers share (eval mrcr --dataset; AIME next): the candidate
 * (--server) and its reference build (--ref-server) opened as a pair, and the paired decision rule
 * "the candidate is significantly worse than its reference" (docs/verdicts.md). */
#ifndef VOUCH_SUITES_EVALS_SERVED_EVAL_H
#define VOUCH_SUITES_EVALS_SERVED_EVAL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/vstatus.h"
#include "suites/served/served.h"
#include "suites/served/served_pair.h"
#include "suites/served/served_text.h"

/* The one-sided paired sign-flip (randomization) test of "the mean of d is above 0": d[i] = reference's
 * score - candidate's on item i, so a small p says the candidate is worse. Items with d = 0 (equal
 * answers: every item of a deterministic A/A pair) carry no sign and are left out; over m non-zero
 * items the statistic is their sum, and p = P(sum of |d_i| with random signs >= the observed sum):
 * exact by the binomial when every |d_i| is equal (a 0/1 outcome: this is the one-sided sign test, and
 * McNemar's exact test for paired 0/1 outcomes), exact by enumerating the 2^m signs when m <= 16, else
 * from 20000 random sign draws (seeded: the same d give the same p) as (1 + hits) / (1 + draws), whose
 * Monte Carlo error near p = 0.05 is 0.0015.
 * Valid (false-alarm rate <= alpha) whenever the two builds are exchangeable item by item, which is
 * what a correct second build is; bounded scores need no normal approximation. 1 when m = 0.
 * *m_out (may be NULL) gets m. */
double seval_worse_p(const double *d, int n, uint64_t seed, int *m_out);

/* True when a failed call is the server refusing a prompt longer than its context (HTTP 400 whose
 * message speaks of the context length or size: vLLM "maximum context length", SGLang "context
 * length", llama.cpp "context size"): a limit of the server, not a failure of the build. */
bool seval_past_context(const served_call *c);

#endif
