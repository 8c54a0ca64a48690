/* Ground-truth evals on constructed checkpoints (model/construct.h).
 *
 * mrcr: multi-needle retrieval. A context of `bin` tokens: a prompt of bin - N tokens (bos, filler, and N needles
 *   pair(k_i, v_i) whose keys are N distinct members of one near-duplicate family (cosine
 *   `cos` between any two) with distinct values, needle i at depth ~ (i + U[0.15,0.85]) / N of the prompt),
 *   then N queries query(k_i) in random order, each appended after the previous one
 *   (query tokens are inert as keys), and each scored by greedy next-token prediction:
 *   correct iff argmax == query(v_i). One prefill per prompt, N scored queries.
 * chain: pointer chasing. A random cyclic permutation pi over all keys; the prompt is bos,
 *   every pair(k, pi(k)) in random order, then query(k0). The model emits query(pi(k0)),
 *   which is fed back as the next query, for H hops (greedy, or seeded sampling through
 *   common/sampling.h keyed by (seed, sample, hop)). Exact match of the token at each hop
 *   count in `hops`, and the first hop where the run left the true chain.
 * Every path runs the same prompts and seeds; paths are compared pairwise with the first. */
#ifndef VOUCH_SUITES_EVALS_EVALS_H
#define VOUCH_SUITES_EVALS_EVALS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/sampling.h"
#include "common/vstatus.h"
#include "model/construct.h"
#include "model/model.h"
#include "suites/paths/paths.h"
#include "suites/paths/spec.h"

/* ---- mrcr ---- */
typedef struct {
  const vpath_spec *paths;  /* [n_paths] (suites/paths/spec.h); paths[0] is the reference of the pairwise comparison */
  int n_paths;
  const long *bins;         /* [n_bins] context lengths (prompt tokens before the queries) */
  int n_bins;
  const long *needles;      /* [n_needles] needle counts (<= the model's family size) */
  int n_needles;
  int samples;              /* prompts per (bin, needle count) */
  int batch;                /* prompts run side by side (sequences per step) */
  int chunk;                /* prefill tokens per sequence per step */
  uint64_t seed;            /* prompt seed */
  int n_threads;            /* CPU threads for host paths */
  bool expect_fallback;    /* --expect-fallback: a path that hands over to another path is accepted (vpath_opts) */
} mrcr_opts;

typedef struct {
  int bin, needles, sample; /* which prompt */
  int needle;               /* which needle is asked */
  double depth;             /* needle position / bin, in [0, 1) */
  int32_t query, answer;    /* token ids */
} mrcr_query;

typedef struct {
  char path[128];
  bool supported;           /* false: the path could not run (reason) */
  bool errored;             /* with !supported: it failed with an error rather than "not supported" */
  char reason[512];         /* why not supported, or errored; a server's first failed request */
  unsigned char *correct;   /* [n_queries] 1 = answered right */
  float *margin;            /* [n_queries] answer logit - best other logit */
  double wall_s;            /* seconds in forward() calls (a server: the requests' wall time) */
  /* What a path that is a server (suites/evals/evals_suite.h) adds; an in-process path leaves them 0. */
  unsigned char *skipped;   /* [n_queries] EVAL_RAN, EVAL_PAST_LIMIT or EVAL_FAILED; NULL: every query ran */
  int n_failed;             /* requests that failed (their queries EVAL_FAILED; reason: the first's message) */
  char limit_reason[160];   /* why the EVAL_PAST_LIMIT queries were not run (their cells: not supported) */
  bool margin_unknown;      /* a NaN margin means "not known" (the server gave no logprobs, or not the
                               answer's): left out of the margin samples rather than counted as broken */
  bool opened;              /* an in-process path that opened: `ran` is what it ran */
  vtrace ran;               /* what it ran over the whole eval (the eval's case is the path: its cells' prompts
                               run batched together) and every hand-over (vpath_close_keep; owned) */
} eval_path_result;

/* eval_path_result.skipped values. */
enum { EVAL_RAN = 0, EVAL_PAST_LIMIT = 1, EVAL_FAILED = 2 };

typedef struct {
  int n_queries;
  mrcr_query *q;            /* [n_queries] */
  int n_paths;
  eval_path_result *pr;     /* [n_paths] */
} mrcr_result;

/* The prompt of (bin, needles, sample): tokens[bin - needles], and for each needle its query,
 * answer and depth ([needles] each), in the order the queries are asked. */
vstatus mrcr_prompt(const construct_layout *L, int bin, int needles, int sample, uint64_t seed, int32_t *tokens,
                    int32_t *queries, int32_t *answers, double *depths);
/* Checks o against the model and allocates r for o's paths (every path supported until it runs); runs
 * nothing. Error names the option. */
vstatus mrcr_begin(const ds_model *m, const construct_layout *L, const mrcr_opts *o, mrcr_result *r);
/* Runs every prompt on path p into r->pr[p] (r from mrcr_begin; path 0 first: the others are compared with
 * it). A path that cannot run is marked in r->pr[p] (not supported, or errored); an error is returned only
 * when path 0, the reference, fails. */
vstatus mrcr_run_path(const ds_model *m, const construct_layout *L, const mrcr_opts *o, mrcr_result *r, int p);
/* mrcr_begin, then every path in order; r is freed on error. */
vstatus mrcr_run(const ds_model *m, const construct_layout *L, const mrcr_opts *o, mrcr_result *r);
void mrcr_result_free(mrcr_result *r);

/* ---- what both in-process evals do with one path ---- */

/* Opens spec with po, runs run(path, ctx) on it and closes it keeping what ran (pr->opened, pr->ran).
 * A path that says unsupported, or any path but the reference (p > 0) that fails, is marked on pr
 * (supported false, errored when it failed, reason the message) and V_OK returned, so the other paths
 * still run; the reference's error returns, prefixed "EVAL: path NAME". */
vstatus eval_on_path(const char *eval, const vpath_spec *spec, const ds_model *m, const vpath_opts *po, int p,
                     eval_path_result *pr, vstatus (*run)(vpath *path, void *ctx), void *ctx);

/* ---- chain ---- */
typedef struct {
  const vpath_spec *paths;  /* [n_paths] (suites/paths/spec.h); paths[0] is the reference */
  int n_paths;
  const long *hops;         /* [n_hops] hop counts scored (ascending); the run goes to the largest */
  int n_hops;
  int samples;              /* chains (different permutations and start keys) */
  int batch;                /* chains side by side */
  vsampling sampling;       /* temperature 0: greedy */
  uint64_t seed;            /* permutation seed */
  int n_threads;
  bool expect_fallback; /* --expect-fallback: a path that hands over to another path is accepted (vpath_opts) */
} chain_opts;

typedef struct {
  int samples, n_hops;
  int n_paths;
  eval_path_result *pr;     /* [n_paths]; correct/margin are [samples * n_hops] (sample-major);
                               margin: smallest (true-next logit - best other) while on the chain */
  int **first_wrong;        /* [n_paths][samples] first hop (1-based) off the chain, 0 = never */
} chain_result;

/* Prompt of chain `sample`: tokens[n_keys + 2] (bos, pairs, query(k0)) and the true chain
 * truth[max_hop + 1] (truth[h] = token expected after h hops; truth[0] = query(k0)). */
vstatus chain_prompt(const construct_layout *L, int sample, uint64_t seed, int max_hop, int32_t *tokens,
                     int32_t *truth);
/* Checks o against the model and allocates r for o's paths; runs nothing. Error names the option. */
vstatus chain_begin(const ds_model *m, const construct_layout *L, const chain_opts *o, chain_result *r);
/* Runs every chain on path p into r (from chain_begin; path 0 first). A path that cannot run is marked in
 * r->pr[p]; an error is returned only when path 0, the reference, fails. */
vstatus chain_run_path(const ds_model *m, const construct_layout *L, const chain_opts *o, chain_result *r, int p);
/* chain_begin, then every path in order; r is freed on error. */
vstatus chain_run(const ds_model *m, const construct_layout *L, const chain_opts *o, chain_result *r);
void chain_result_free(chain_result *r);

#endif
