/* A served system under test (suites/served/served.h) as the candidate of `vouch diverge --server`
 * (suites/diverge/diverge_served.c; docs/serving.md says what it decides and where its bound comes
 * from). */
#ifndef VOUCH_SUITES_DIVERGE_DIVERGE_SERVED_H
#define VOUCH_SUITES_DIVERGE_DIVERGE_SERVED_H

#include <stdint.h>

#include "common/vstatus.h"
#include "suites/diverge/diverge.h"
#include "suites/served/served.h"

/* The server is teacher-forced on the reference's stream: row (step t, sequence b) is one greedy
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

#endif
