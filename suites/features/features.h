/* Production-feature checks of a decode path against a reference path on the same model.
 *
 * Where the bounds come from (docs/verdicts.md). With a floor path (`floor`, e.g. cpu-ref: an
 * fp32 computation of the same rows) every short-context check also runs the floor on the same
 * tokens, and its bound is derived from the floor's distance to the reference on those rows: a
 * path passes when it is at most FEAT_ACCURACY_RATIO (k = 2) times as far from fp32 as the
 * reference engine is. By the triangle inequality the path is then within (k+1) x the floor's
 * distance of the reference (total variation), (k+1)^2 x in KLD (KLD grows with the square of a
 * logit error), and no logit of the top two moves by more than (k+1) x the floor's largest top-2
 * error d, so the reference's argmax can only change where its top-2 margin is below
 * eps = 2 (k+1) d (the margin rule). Without a floor (fp32 paths compared with each other on the
 * CPU) the bounds are --kld-tol and eps = --margin-eps.
 *  full_context  fill_cache to (max context - 4) on both paths, 4 teacher-forced decode steps at
 *                the last positions: max KLD <= kld_tol (the floor cannot reach such a context)
 *                and the same top token on every row whose reference margin exceeds eps.
 *  sampling      8 decode rows: the path's sampled distribution (T=1, top-k 40, top-p 0.95) is
 *                within the floor-derived total variation of the reference's; 20000 draws from the
 *                path's logits fit its own distribution (chi-square, p >= 0.001). Same-seed token
 *                agreement is reported (the sampler is shared code: it follows from the distance).
 *  structured    a token DFA (3 classes by id mod 3; state A admits class 0 -> B; B admits class 1
 *                -> B or class 2 -> A) masks logits; 32 sampled tokens: all accepted, masked KLD
 *                within the floor-derived bound.
 *  speculative   K+1 = 5 tokens verified in one step vs the same 5 as single steps in another slot
 *                (the path against itself): KLD within the floor-derived bound, the same argmax on
 *                every row whose margin exceeds eps.
 *  stop_tokens   greedy decode that stops at a stop token (the reference's 9th token): the path
 *                stops at the same step with the same tokens; sequences are compared only up to
 *                the first step whose reference margin is below eps (64 start tokens screened on the
 *                reference, the 4 most decided measured against the floor, the one decided longest
 *                used); undecided when none stays decided for 2 steps.
 * Every path runs with the same forced experts per position unless o->routing is natural.
 * Each check is pass, fail, undecided (it decided nothing) or not_supported (the path could not run
 * it), with its numbers, its bound and the bound's source. */
#ifndef VOUCH_SUITES_FEATURES_FEATURES_H
#define VOUCH_SUITES_FEATURES_FEATURES_H

#include <stdbool.h>
#include <stdint.h>

#include "common/vstatus.h"
#include "model/model.h"
#include "suites/engine/bounds.h"
#include "suites/engine/record.h"
#include "suites/engine/routing.h"
#include "suites/paths/spec.h"

/* undecided: the check ran and could decide nothing (stop_tokens: no start token whose reference sequence
 * stays decided): never a pass, never a fail, counted (docs/verdicts.md). */
typedef enum { FEAT_PASS = 0, FEAT_FAIL = 1, FEAT_NOT_SUPPORTED = 2, FEAT_UNDECIDED = 3 } feat_status;

/* How much farther from fp32 than the reference engine a path may be (the k above). */
#define FEAT_ACCURACY_RATIO VOUCH_ACCURACY_RATIO

typedef struct {
  char name[24];          /* check name */
  feat_status status;
  char detail[512];       /* numbers or the reason */
  double value;           /* the check's main figure (see detail) */
  double bound;           /* its threshold */
  char bound_source[160]; /* where the bound comes from */
} feat_check;

typedef struct {
  const vpath_spec *path;  /* path under test (suites/paths/spec.h) */
  const vpath_spec *ref;   /* reference path */
  const vpath_spec *floor; /* fp32 path computing the same short-context rows (NULL: none) */
  int full_ctx;           /* context of the full-context check (0: max_position_embeddings) */
  double kld_tol;         /* KLD bound (nats) where no floor applies */
  double margin_eps;      /* margin rule's epsilon (logits) where no floor applies */
  uint64_t seed;
  int n_threads;
  bool expect_fallback; /* --expect-fallback: a path that hands over to another path is accepted (vpath_opts) */
  const vrouting *routing;     /* experts forced per position on every path (prepared for the model;
                             suites/sweep/sweep.h), the combine weights the router's; NULL or natural: each
                             path's router decides. Forced by default: two correct bf16 engines pick another
                             expert at a router near-tie on some rows (a discrete jump in the logits), which no
                             check of these features is about; routing is judged by diverge and kernels */
} feat_opts;

#define FEAT_N_CHECKS 5
/* One invocation's checks, run one at a time in any subset, in order (a resumed run leaves out the
 * checks it holds): features_begin, features_check per check, features_end. */
typedef struct feat_session feat_session;

/* Checks o against the model (full_ctx in [16, max_position_embeddings], a floor other than the
 * reference) and makes the session in *out; opens no path yet (when every check is left out, none
 * is opened). o's paths must outlive the session. Error names the option. */
vstatus features_begin(const ds_model *m, const feat_opts *o, feat_session **out);
/* Runs check i (0 full_context, 1 sampling, 2 structured, 3 speculative, 4 stop_tokens) into *out.
 * The first call opens the paths; the sampling rows are decoded before the first of full_context
 * (its margin epsilon) and sampling that runs. A path under test that does not open fails (or is
 * not_supported for) every check. Error only when the reference or the floor cannot run (open or a
 * step) or out of memory; the session then runs no further check (each call is an error). */
vstatus features_check(feat_session *f, int i, feat_check *out);
/* Closes the paths and frees f (NULL: nothing). */
void features_end(feat_session *f);
/* Adds to rec what the session's open paths (the reference, the floor, the path under test) ran in the
 * last check, and their hand-overs (rec_ran: each path's tally starts afresh with every check). Error:
 * out of memory. */
vstatus features_rec_ran(const feat_session *f, vrecord *rec);
/* The name of check i ("full_context", ...; NULL outside [0, FEAT_N_CHECKS)). */
const char *features_check_name(int i);
const char *feat_status_name(feat_status s);
/* Fills check c: its name, status, main figure, bound, the bound's source (NULL: none) and detail
 * (printf; cut at the field's size). */
void feat_set(feat_check *c, const char *name, feat_status st, double value, double bound, const char *src,
              const char *fmt, ...) __attribute__((format(printf, 7, 8)));

#endif
