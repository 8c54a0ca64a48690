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

/* One server of a text eval. */
typedef struct {
  served_conn conn;      /* URL, its shown form, the API key (never recorded) */
  served_identity id;    /* what it said of itself before any request */
  const char *role;      /* "candidate", "reference", or "server" (--server alone) */
  char path[300];        /* the records' path: "server:<model>" (--server) or "ref-server:<model>" */
} seval_server;

/* Opens --server (and --ref-server when ref_url is not NULL) with model `model` (NULL: each server's
 * first): each identity is read, the pair checked (served_pair_check) before any request, and each
 * server noted in the manifest of the run `sink` (NULL: none, a suite on its own). sv[0] is the
 * candidate, sv[1] the reference; *n gets 1 or 2. Error (naming the server and the field):
 * unreachable, no such model, not a pair, or the run's store. */
vstatus seval_open(const vrec_sink *sink, const char *url, const char *ref_url, const char *model, double timeout_s,
                   seval_server sv[2], int *n);
void seval_close(seval_server *sv, int n);
/* One line naming the server and what it said of itself ("server URL: model M (root R, max_model_len L,
 * owned_by O, version V)") on stdout. */
void seval_print_identity(const seval_server *s);

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
