/* The client side of a served system under test: an OpenAI-compatible server (vLLM, SGLang,
 * llama.cpp, vouch serve) reached over HTTP with libcurl. Token ids go in (`prompt` as a list of
 * ids), token ids come back (`choices[].token_ids`, which vLLM gives with `return_token_ids`);
 * streams are SSE `data:` events ending with `data: [DONE]`, timed as each event arrives.
 *
 * The API key comes from VOUCH_SERVER_API_KEY, else OPENAI_API_KEY, and is sent as a bearer
 * token; it is held in memory only and never written to a record, a log or an error message.
 * Requests are never retried: a completion that reached the server may have run, so a retry
 * would count it twice; every finished request is kept, failed ones with their reason. */
#ifndef VOUCH_SUITES_SERVED_SERVED_H
#define VOUCH_SUITES_SERVED_SERVED_H

#include <stdbool.h>
#include <stdint.h>

#include "common/sampling.h"
#include "common/vstatus.h"

struct ds_model_s; /* model/model.h */

typedef struct {
  char base[512];      /* server URL without a trailing slash ("http://127.0.0.1:8000") */
  char shown[512];     /* the same without user:password@ and query, for records and messages */
  char auth[1100];     /* "Authorization: Bearer <key>" or "" (never recorded) */
  double timeout_s;    /* per request, 0: none */
} served_conn;

/* Checks the URL (http:// or https://) and picks up the API key from the environment; errors name the
 * URL as --server's. */
vstatus served_conn_init(served_conn *c, const char *url, double timeout_s);
/* The same checks for the value of `option` ("--server", "--ref-server") before anything runs (a plan's
 * steps, a suite's options), its errors naming that option; NULL (no such option given) passes. */
vstatus served_url_check(const char *option, const char *url);

/* GET base+path: body (malloc'ed, NUL-terminated) and HTTP status. V_ERR with a clear message when
 * the server cannot be reached; HTTP errors are returned as *code for the caller to judge. */
vstatus served_get(const served_conn *c, const char *path, char **body, long *code);

/* What vouch serve says of a synthesized checkpoint in /v1/models ("vouch_synth": {seed, layers}, its
 * own field): the weights are a function of the preset, the seed and the layer count. */
typedef struct {
  bool given;      /* the server gave the field (a vouch serve of a synth: model) */
  uint64_t seed;   /* the synthesis seed (vouch serve --seed) */
  int layers;      /* layers kept (vouch serve --layers, else the preset's) */
} served_synth;

/* The served model: *model in/out ("" on input: take the server's first; else it must be listed,
 * or the error names the models served). vocab / max_len: the server's figures, 0 when it gives none;
 * synth (may be NULL): its "vouch_synth" identity, given false when absent or malformed. */
vstatus served_models(const served_conn *c, char *model, int model_cap, int *vocab, int *max_len, served_synth *synth);
/* The same from the body of /v1/models (untrusted): errors name `shown` (the server). */
vstatus served_models_parse(const char *body, const char *shown, char *model, int model_cap, int *vocab, int *max_len,
                            served_synth *synth);

/* A served system under test as a path of a suite (evals, diverge, features): the connection, the
 * model it serves and what it declares. */
typedef struct {
  served_conn conn;       /* the URL, its form without credentials (conn.shown) and the API key */
  char model[256];        /* the served model: --server-model, else the server's first */
  int vocab, max_len;     /* the server's vocab_size and max_model_len (0: it gives none) */
  served_synth synth;     /* vouch serve's synthesized checkpoint identity (synth.given false: none) */
  char path[160];         /* the records' path name: "server:<model>" */
} served_target;

/* Connects to url (model NULL or "": the server's first model) and reads /v1/models. Error (naming
 * the server) when it cannot be reached, answers an HTTP error, does not serve the model (the ones it
 * serves are listed), declares a vocab_size other than `vocab`, or (vouch serve of a synth: model,
 * m synthesized too) synthesized its checkpoint with another seed or layer count than m: the suite
 * would judge another checkpoint's answers against its own and fail correct code. */
vstatus served_target_open(served_target *t, const char *url, const char *model, double timeout_s, int vocab,
                           const struct ds_model_s *m);

/* Counters read from /metrics (vLLM names; vouch serve adds vouch:forward_* and vouch:decode_*). */
#define SERVED_MAX_POS 64
typedef struct {
  bool have;                 /* /metrics answered */
  bool have_spec;            /* the spec-decode counters are there */
  double drafts, draft_tokens, accepted; /* vllm:spec_decode_num_{drafts,draft_tokens,accepted_tokens}_total */
  double per_pos[SERVED_MAX_POS];        /* ..._num_accepted_tokens_per_pos_total by position */
  int n_pos;
  bool have_forward;         /* vouch:decode_* present (vouch serve) */
  double forward_s, forward_steps; /* vouch:decode_{seconds,steps}_total: steps with decodes only */
} served_metrics;
/* Reads /metrics; a server without it (404) gives have = false, not an error. */
vstatus served_metrics_read(const served_conn *c, served_metrics *m);
/* *m from the Prometheus text of a /metrics that answered (untrusted; unknown or malformed series
 * are left out). */
void served_metrics_parse(const char *body, served_metrics *m);
/* Sum of every series named `name` in Prometheus text (NaN when absent). For tests. */
double served_prom_sum(const char *text, const char *name);

/* The most likely tokens at one generated position, from the server's logprobs (an eval's
 * answer margin: logprob(answer) - best other logprob). */
#define SERVED_TOP 5
#define SERVED_TOP_MAX 21    /* the most entries kept per position: 20 top logprobs (vLLM's default
                                max_logprobs) and the chosen token */
typedef struct {
  int n;                     /* entries known (0: the server gave no logprobs for this token, or named
                                one by text) */
  int given;                 /* entries the server's top_logprobs held at this position (before the
                                chosen token was merged in) */
  float chosen_lp;           /* the chosen token's logprob (token_logprobs; NaN: not given) */
  int32_t id[SERVED_TOP_MAX]; /* token ids, most likely first */
  float lp[SERVED_TOP_MAX];  /* their logprobs */
} served_top;

/* Why t's entries are not part of a distribution over a vocabulary of V ids: an id outside it, a
 * logprob above 0 (1e-6 allows rounding), or a mass above 1 + 1e-4 (far above the ~1e-6 float
 * rounding of 20 logprobs: shifted or duplicated logprobs). The reason in buf[cap] (naming the
 * field), NULL when there is none. */
const char *served_top_problem(const served_top *t, int V, char *buf, size_t cap);

/* One streamed completion. */
typedef struct {
  /* in */
  const int32_t *prompt;     /* [n_prompt] token ids */
  int n_prompt;
  int max_tokens;            /* asked with ignore_eos, so the server should generate exactly this many */
  double arrival_s;          /* when to send, seconds after the run starts */
  bool held;                 /* not sent until a done hook clears it (the next turn of a session) */
  bool skip;                 /* never sent: counted as finished (its error says why) */
  bool keep_ids;             /* keep every received token id in ids (a session's next prompt needs them) */
  int logprobs;              /* > 0 (with keep_ids): ask for that many top logprobs per token (at most
                                SERVED_TOP_MAX - 1), named by id (vLLM's return_tokens_as_token_ids), kept
                                in top; 0: none asked */
  const vsampling *sampling; /* NULL: greedy (temperature 0); else its temperature, top_k, top_p, seed sent */
  const char *extra;         /* NULL, or a JSON object whose members are added to the request body, replacing
                                fields of the same name (stop_token_ids, min_tokens, "ignore_eos": false,
                                structured_outputs); must parse (else the run fails) */
  /* out */
  bool ok;
  char error[320];           /* why not ok */
  long http;                 /* the HTTP status (0: no answer) */
  char finish[24];           /* the last finish_reason the stream gave ("length", "stop"; "" none) */
  double t_send, t_first, t_end; /* vclock_now() seconds */
  double *chunk_t;           /* [n_chunks] arrival time of each event that carried tokens (owned) */
  int *chunk_n;              /* [n_chunks] tokens in it */
  int n_chunks, cap_chunks;
  int n_tokens;              /* tokens received */
  int32_t first_tokens[8];   /* the first (up to 8) token ids received */
  int32_t *ids;              /* [n_tokens] every id received, when keep_ids (owned) */
  served_top *top;           /* [n_tokens] with logprobs > 0: each token's top logprobs (owned) */
  int cap_ids;               /* entries allocated in ids (and top) */
} served_req;

/* Streams every request of reqs (at most `concurrency` in flight; each no earlier than its
 * arrival_s) on one curl multi handle. Per-request failures are in the requests; V_ERR only when
 * the harness itself fails. Stops starting requests once stop() says so (the ones in flight finish). */
vstatus served_run(const served_conn *c, const char *model, served_req *reqs, int n, int concurrency,
                   bool (*stop)(void));
/* The same with a hook called as each request finishes (ok or not), before the next is started:
 * it may fill in and release held requests (prompt, arrival_s relative to t0 = the run's start)
 * or mark them skip. Requests are started in index order among those due and not held. */
typedef void (*served_done_fn)(void *ctx, served_req *reqs, int i, double t0);
vstatus served_run_hooked(const served_conn *c, const char *model, served_req *reqs, int n, int concurrency,
                          bool (*stop)(void), served_done_fn done, void *ctx);
void served_req_free(served_req *r);
/* Reads n bytes of a 2xx completions stream (SSE "data:" events) into r as served_run does as they
 * arrive: token ids, logprobs, finish_reason, errors in r->error. For the fuzz target and tests. */
void served_stream_parse(served_req *r, const char *body, size_t n);

#endif
