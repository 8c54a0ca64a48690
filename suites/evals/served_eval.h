/* What the evals on real text over servers share (eval mrcr --dataset; AIME next): the candidate
 * (--server) and its reference build (--ref-server) opened as a pair, and the paired decision rule
 * "the candidate is significantly worse than its reference" (docs/verdicts.md). */
#ifndef VOUCH_SUITES_EVALS_SERVED_EVAL_H
#define VOUCH_SUITES_EVALS_SERVED_EVAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/vstatus.h"
#include "suites/engine/record.h"
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


/* ---- what the text evals' suites share ---- */

/* One row of a JSONL dataset: text[len] (NUL-terminated, without its newline), its 1-based line in
 * the file and the offset of its first byte. An error stops the reading. */
typedef vstatus (*seval_row_fn)(void *ctx, const char *text, size_t len, long line, off_t offset);
/* Calls row() on each of the first `limit` rows of file (limit <= 0: all), a row being a line that is
 * not blank (spaces, tabs, CR); *n gets how many. Error: the file cannot be read ("--dataset FILE:
 * cannot read: ..."), a line holds a NUL byte ("FILE:LINE: ..."), a read error, row()'s error, or no
 * row at all. */
vstatus seval_rows_each(const char *file, long limit, seval_row_fn row, void *ctx, int *n);

/* The options every text eval takes (eval mrcr --dataset, eval aime). */
typedef struct {
  const char *dataset, *server, *ref_server, *server_model; /* --dataset, --server, --ref-server, --server-model */
  long max_tokens, concurrency, limit;  /* --max-tokens, --concurrency, --limit (0: every row) */
  double alpha, timeout_s;              /* --alpha, --timeout */
  bool stream;                          /* --stream */
} seval_opts;

/* The defaults: --max-tokens max_tokens, --concurrency 8, --alpha 0.05, --timeout 1800. */
void seval_opts_init(seval_opts *o, long max_tokens);
/* Takes argv[*i] when it is one of the options above (the driver's option hook; *err set on a bad value). */
bool seval_option(seval_opts *o, int argc, char **argv, int *i, vstatus *err);
/* Error (naming the option): no --dataset, no --server, a malformed URL, --alpha outside (0, 1), a
 * --timeout not above 0. */
vstatus seval_options_done(const seval_opts *o);

/* The candidate's paired findings against its reference over the items both answered. */
typedef struct {
  int n_paired, n_differ;  /* items both answered; of those, items whose scores differ */
  int trunc_c, trunc_r;    /* truncated answers: the candidate's, the reference's */
  double mean_diff;        /* candidate - reference mean score over the paired items */
  double p_worse, p_trunc; /* seval_worse_p of the score differences, of the truncation differences */
  bool worse, more_truncated, lost_context; /* p_worse < alpha, p_trunc < alpha, refused past its context
                                               a prompt the reference answered (set by the caller) */
} seval_paired;

/* Fills n_paired, n_differ, mean_diff, the p values and the decisions from d[m] (reference - candidate
 * scores) and t[m] (candidate - reference truncation); the caller sets trunc_c, trunc_r, lost_context. */
void seval_paired_decide(seval_paired *p, const double *d, const double *t, int m, uint64_t seed, double alpha);
/* The paired metrics of the candidate's summary record: paired_items, paired_differ, paired_diff,
 * worse_p, reference_truncated, truncated_p. */
void seval_paired_metrics(const seval_paired *p, vrecord *r);
/* Its param alpha and checks not_worse_than_reference, not_more_truncated_than_reference,
 * context_as_reference. */
void seval_paired_checks(const seval_paired *p, double alpha, vrecord *r);
/* The report's two paired lines: items names what was paired ("rows"), score what was compared
 * ("score"), answers is appended to the truncation counts ("" or " answers"). */
void seval_paired_print(const seval_paired *p, double alpha, const char *items, const char *score, const char *answers);
/* The report's FAIL lines of the candidate `path` (none when it passed). */
void seval_paired_print_fails(const seval_paired *p, const char *path, double alpha, const char *score);

#endif
