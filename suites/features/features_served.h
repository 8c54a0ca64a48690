/* A served system under test (suites/served/served.h) as the subject of `vouch features --server`
 * (suites/features/features_served.c; docs/serving.md says what each check decides). */
#ifndef VOUCH_SUITES_FEATURES_FEATURES_SERVED_H
#define VOUCH_SUITES_FEATURES_FEATURES_SERVED_H

#include <stdint.h>

#include "common/vstatus.h"
#include "model/model.h"
#include "suites/features/features.h"
#include "suites/served/served.h"

/* The server's checks, in the order they run and are stored. */
#define FEAT_SRV_N_CHECKS 7
/* The name of server check i ("max_tokens", ...; NULL outside [0, FEAT_SRV_N_CHECKS)). */
const char *features_served_check_name(int i);

/* What the server checks read: the server, the model and reference path on the same checkpoint
 * (its greedy sequences pick the stop and prompt tokens), the margin rule's epsilon and the seed. */
typedef struct {
  const served_target *t;
  const ds_model *m;
  const vpath_spec *ref;  /* reference path (in process; suites/paths/spec.h) */
  double margin_eps;      /* logits: the reference's greedy sequence is compared only while its top-2
                             margin exceeds this */
  uint64_t seed;
  int n_threads;
  bool expect_fallback; /* --expect-fallback: a path that hands over to another path is accepted (vpath_opts) */
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
