/* Production-feature checks of a decode path against a reference path on the same model:
 *  full_context  fill_cache to (max context - 4) on both paths, 4 teacher-forced decode
 *                steps at the last positions: max KLD <= kld_tol and the same top token.
 *  sampling      on 8 decode rows: (a) 256 seeded draws (T=1, top-k 40, top-p 0.95) per row
 *                from each path's logits: identical tokens wherever the draws' kept sets
 *                agree, required >= 99% when max |dlogit| <= 0.05; (b) 20000 draws from the
 *                path's logits at one row vs the reference's sampling distribution: Pearson
 *                chi-square goodness of fit (cells with expectation < 5 pooled), p >= 0.001.
 *  structured    a token-level DFA (3 token classes by id mod 3; state A admits class 0 -> B;
 *                B admits class 1 -> B or class 2 -> A) masks logits; 32 sampled tokens:
 *                100% accepted by the DFA, masked distributions KLD <= kld_tol.
 *  speculative   K+1 = 5 tokens verified in one step (all logits) vs the same 5 tokens as
 *                single steps in another slot: max KLD <= kld_tol and the same argmax per row.
 *  stop_tokens   greedy decode that stops at a stop token (the reference's 9th token): the
 *                path stops at the same step with the same tokens.
 * Each check is pass, fail, or not_supported (the path could not run it), with numbers. */
#ifndef VOUCH_SUITES_FEATURES_H
#define VOUCH_SUITES_FEATURES_H

#include <stdint.h>

#include "common/vstatus.h"
#include "model/model.h"

typedef enum { FEAT_PASS = 0, FEAT_FAIL = 1, FEAT_NOT_SUPPORTED = 2 } feat_status;

typedef struct {
  char name[24];          /* check name */
  feat_status status;
  char detail[320];       /* numbers or the reason */
  double value;           /* the check's main figure (see detail) */
  double bound;           /* its threshold */
} feat_check;

typedef struct {
  const char *path;       /* path under test */
  const char *ref;        /* reference path */
  int full_ctx;           /* context of the full-context check (0: max_position_embeddings) */
  double kld_tol;         /* KLD bound (nats) for "the same distribution" */
  uint64_t seed;
  int n_threads;
} feat_opts;

#define FEAT_N_CHECKS 5
/* Runs every check; out[FEAT_N_CHECKS]. An error only when the reference cannot run. */
vstatus features_run(const ds_model *m, const feat_opts *o, feat_check *out);
const char *feat_status_name(feat_status s);

#endif
