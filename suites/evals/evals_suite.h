/* What the eval suites (suites/evals/mrcr/mrcr_suite.c, suites/evals/chain/chain_suite.c) share on top of the driver
 * (suites/engine/suite.h): their common options, the score and pairwise comparison of a path with the
 * first, the record of one (path, subset of queries), and the prompts' export file. */
#ifndef VOUCH_SUITES_EVALS_EVALS_SUITE_H
#define VOUCH_SUITES_EVALS_EVALS_SUITE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "suites/engine/engine.h"
#include "suites/served/served.h"
#include "suites/engine/suite.h"
#include "suites/evals/evals.h"

/* `vouch eval mrcr` and `vouch eval chain` (suites/evals/eval_cmd.c lists them). */
extern const vsuite vsuite_mrcr, vsuite_chain;

/* The options both evals take (defaults set by each suite's init). */
typedef struct {
  long samples;           /* --samples: prompts per cell (mrcr) / chains (chain) */
  long batch;             /* --batch: prompts run side by side */
  double min_score;       /* --min-score: a case passes at a score >= this */
  double alpha;           /* --alpha: ... and when not worse than the first path at McNemar p < alpha */
  const char *export_f;   /* --export-prompts FILE (NULL: none) */
  const char *server;     /* --server URL (NULL: none): an OpenAI-compatible server, one more path */
  const char *server_model; /* --server-model NAME (NULL: the server's first model) */
} eval_opts;

/* If argv[*i] is one of eval_opts' options, stores it and returns true (cli_opt). */
bool eval_option(eval_opts *o, int argc, char **argv, int *i, vstatus *err);
/* After every option: --server-model needs --server, and --server is an http(s) URL. Error names
 * the option. */
vstatus eval_options_done(const eval_opts *o);

/* ---- a server as one more path of the eval (suites/evals/evals_served.c) ----
 * The constructed prompts go to POST /v1/completions as token ids (temperature 0 unless the chain
 * samples, ignore_eos, return_token_ids, SERVED_TOP logprobs named by id); the returned ids are
 * scored against the constructed answers as an in-process path's argmax is, and the margin is
 * logprob(answer) - best other logprob, which is the logit margin (log-softmax subtracts one
 * constant from every logit); NaN (left out) where the server gives no logprobs or not the
 * answer's. A failed request is kept as a failed query (never retried: it may have run); a cell
 * whose prompt does not fit the server's max_model_len is not supported. */
typedef served_target eval_server; /* the server, its model and what it declares */

/* The paths of an eval: the in-process ones of --paths (none when --server comes without
 * --paths), then the server. */
typedef struct {
  vpath_spec *paths;      /* [n] the paths (copies of the driver's), then the server's: its name only (ops NULL) */
  int n;
  int server;             /* index of the server in paths, -1: no --server */
  eval_server sv;         /* the server, when server >= 0 */
} eval_paths;

/* Sets up ep from the driver's paths and --server; asks the server for its models. Error (naming
 * the server) when it cannot be reached, answers an HTTP error, does not serve --server-model
 * (the ones it serves are listed) or declares a vocab_size other than the constructed model's. */
vstatus eval_paths_open(eval_paths *ep, const eval_opts *e, const vsuite_ctx *x);
void eval_paths_free(eval_paths *ep);
/* Adds the server's URL (without credentials) and model to a record's params when p is the server. */
void eval_server_params(const eval_paths *ep, int p, cJSON *params);
/* After a server case: its one-line error on stderr ("vouch NAME: error: ...") when requests failed. */
void eval_server_warn(const char *name, const eval_path_result *pr);
/* What both evals' server halves share (suites/evals/evals_served.c), for mrcr/mrcr_served.c and
 * chain/chain_served.c: */
/* Allocates pr's per-query marks for n queries; margins from logprobs may be unknown. */
vstatus eval_server_result(eval_path_result *pr, int n);
/* The reason finished request q cannot be scored, or NULL: it failed, or it holds fewer tokens than
 * asked (ignore_eos was sent, so a server that stops early did not do what was asked); buf[cap]
 * holds the text when it is made here. */
const char *eval_request_problem(served_req *q, char *buf, size_t cap);
/* Counts a failed request of pr; the first failure's message is kept, with `what` the request was. */
void eval_request_failed(eval_path_result *pr, const served_req *q, const char *what);
/* logprob(want) - the best other logprob at position pos of q: the logit margin. NaN when q's
 * logprobs do not hold both (none given, or want not among the top ones). */
float eval_top_margin(const served_req *q, int pos, int32_t want);
/* Puts the server and the count of n_req requests in front of pr's first failure's message. */
void eval_failed_summary(eval_path_result *pr, const eval_server *sv, int n_req);
/* Every mrcr query on the server into r->pr[p] (r from mrcr_begin, r->q filled too): one greedy
 * completion of one token per query, its prompt the case's prompt and the queries up to it, at
 * most o->batch in flight. Error only when the client itself fails (out of memory). */
vstatus mrcr_run_server(const eval_server *sv, const construct_layout *L, const mrcr_opts *o, mrcr_result *r, int p);
/* Every chain on the server into r (from chain_begin): one completion of the largest hop count per
 * chain (the model's answer is the next query, so the server runs the chain itself; greedy, or
 * sampled with seed sample_seed + chain, which is not vouch's own draw), at most o->batch in
 * flight. Error only when the client itself fails. */
vstatus chain_run_server(const eval_server *sv, const construct_layout *L, const chain_opts *o, chain_result *r, int p);

/* The score of one path over the queries with mask[i] set (mask NULL: all n) that it ran
 * (pr->skipped); *count (may be NULL) gets how many. NaN over none. */
double eval_score(const eval_path_result *pr, const unsigned char *mask, int n, int *count);
/* The answer margins of pr over the mask's queries that ran, into out[] (room for n); returns how
 * many. A non-finite margin counts as -1e30 (a broken path), unless pr->margin_unknown says that NaN
 * means not known: then it is left out. */
int eval_margins(const eval_path_result *pr, const unsigned char *mask, int n, double *out);
/* Makes the record (suite, id, pr->path) of one (path, subset) in recs, params copied from
 * `params`: the score (threshold >= min_score) and answer margins as raw samples, and for a path
 * other than the reference (is_ref false) the paired comparison with `ref` (McNemar at alpha) over
 * the queries both ran. A subset with a query past the path's limit (EVAL_PAST_LIMIT) is not
 * supported; one with failed requests (EVAL_FAILED) has status error, its answered queries kept.
 * Returns true when the subset passes (a path that is not supported passes, an errored one not). */
bool eval_record(veng *recs, const char *suite, const char *id, const eval_path_result *ref, const eval_path_result *pr,
                 bool is_ref, const unsigned char *mask, int n, double min_score, double alpha, const cJSON *params);
/* Prints one line comparing pr with ref over the mask (nothing unless both ran). */
void eval_print_pairwise(const char *label, const eval_path_result *ref, const eval_path_result *pr,
                         const unsigned char *mask, int n, double alpha);

/* The export file's root: {"kind": kind, "model": ..., "layout": {...}} of the constructed model. */
cJSON *eval_export_root(const char *kind, const vsuite_ctx *x);
/* [n] ints as a JSON array. */
cJSON *eval_ints_json(const int32_t *v, int n);
/* Writes root (unformatted) to file, whole or not at all (common/atomic_file.h). Error names the file. */
vstatus eval_export_write(const char *file, const cJSON *root);

#endif
