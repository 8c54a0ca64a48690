/* A served system under test (suites/served/served.h) as the candidate of `vouch diverge --server` and
 * the subject of `vouch features --server` (docs/serving.md says what each decides and where its
 * bound comes from). */
#ifndef VOUCH_SUITES_SERVED_SERVED_SUITES_H
#define VOUCH_SUITES_SERVED_SERVED_SUITES_H

#include <stdint.h>

#include "common/vstatus.h"
#include "model/model.h"
#include "suites/served/served.h"
#include "suites/diverge/diverge.h"
#include "suites/features/features.h"

/* ---- diverge (suites/diverge/diverge_served.c) ----
 * The server is teacher-forced on the reference's stream: row (step t, sequence b) is one greedy
 * completion of one token whose prompt is the sequence's inputs 0..t, with `logprobs` top logprobs
 * named by id. Its returned token is its argmax there, its top-k logprobs are compared with the
 * reference's log-softmax of the same row. KLD is that of the two distributions coarsened to the
 * server's top-k tokens and one bucket for the rest (the reference's and the server's remaining
 * mass): by the data-processing inequality a lower bound of the full KLD, so a server above a KLD
 * bound is above it in full. */
typedef struct {
  int asked;              /* top logprobs asked per row */
  int given_min, given_max; /* entries the server's top_logprobs held, fewest and most over the rows */
  double tail_ref_max;    /* largest reference mass outside the server's top-k over the rows */
  double tail_srv_max;    /* largest server mass outside its top-k */
  double max_dlogprob;    /* max |server logprob - reference log-softmax| over the top-k entries */
  int n_req, n_failed;    /* requests sent, of which failed (connection, HTTP, no token ids, no logprobs) */
} served_div;

/* Runs the server's rows of one point into r (r->path set by the caller; allocated here, freed by
 * diverge_result_free) and d: `stream` and `ref_rows` as diverge_opts' stream_out and ref_rows_out of
 * a run of `batch` sequences x `tokens` steps at context 0. At most `concurrency` requests in flight.
 * A server that cannot run the point (the prompt past its max_model_len) or whose requests failed is
 * a result (r->supported false; errored for failures, the first reason and the count in r->reason);
 * error only when the client itself fails (out of memory). */
vstatus diverge_run_served(const served_target *t, int logprobs, int batch, int tokens, int V, const int32_t *stream,
                           const float *ref_rows, int concurrency, diverge_result *r, served_div *d);

/* ---- features (suites/features/features_served.c) ----
 * The server's checks, in the order they run and are stored. */
#define FEAT_SRV_N_CHECKS 7
/* The name of server check i ("max_tokens", ...; NULL outside [0, FEAT_SRV_N_CHECKS)). */
const char *features_served_check_name(int i);

/* What the server checks read: the server, the model and reference path on the same checkpoint
 * (its greedy sequences pick the stop and prompt tokens), the margin rule's epsilon and the seed. */
typedef struct {
  const served_target *t;
  const ds_model *m;
  const char *ref;        /* reference path (in process) */
  double margin_eps;      /* logits: the reference's greedy sequence is compared only while its top-2
                             margin exceeds this */
  uint64_t seed;
  int n_threads;
} feat_served_opts;

typedef struct feat_served feat_served;
/* Makes the session (opens nothing yet). o's pointers must outlive it. Error: out of memory. */
vstatus features_served_begin(const feat_served_opts *o, feat_served **out);
/* Runs server check i into *out (pass, fail with the reason, or not_supported where the server says
 * no to a feature with an HTTP 4xx). The first call opens the reference and decodes its greedy
 * sequences. Error only when the reference breaks or the client fails (out of memory); the session
 * then runs no further check. */
vstatus features_served_check(feat_served *f, int i, feat_check *out);
void features_served_end(feat_served *f);

#endif
