/* vouch serve: an OpenAI-compatible HTTP server over any vouch decode path.
 *
 * Three parts share the structures below:
 * - serve_sched.c: the scheduler thread, the only one that touches the path. Continuous
 *   batching: each loop admits waiting requests into free KV slots, builds one forward step
 *   from the decode steps of running sequences (1 token, or K+1 under synthetic speculative
 *   decoding) and prefill chunks of new ones within a token budget, checks the step with the
 *   path's supports() (an unsupported mixed step falls back to one step per sequence), samples
 *   with common/sampling.c, and retires finished requests.
 * - serve_http.c: libmicrohttpd handlers (one thread per connection): request validation,
 *   JSON and SSE responses, /v1/models, /health, /metrics.
 * - serve_metrics.c: Prometheus text with vLLM's metric names.
 *
 * Synthetic speculative decoding (--spec K=..,AL=..), as suites/sweep does: each decode step of
 * a sequence verifies K+1 tokens (the last emitted token and K draft tokens, the drafter's guess
 * being the last token repeated) and accepts AL-1 drafts by rule plus the token sampled after
 * them, so AL tokens are kept per step. The accepted drafts are synthetic: output differs from
 * plain decoding whenever AL > 1 (throughput figures, not evals). AL = 1 emits exactly what plain
 * decoding emits. Counters follow vLLM (drafts, draft tokens, accepted tokens, per position). */
#ifndef VOUCH_RUNNER_SERVE_SERVE_H
#define VOUCH_RUNNER_SERVE_SERVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/path.h"
#include "common/sampling.h"
#include "common/token_dfa.h"
#include "model/model.h"

#define SERVE_MAX_LOGPROBS 20

typedef enum { FIN_NONE = 0, FIN_STOP, FIN_LENGTH, FIN_ABORT, FIN_ERROR } serve_finish;
const char *serve_finish_name(serve_finish f); /* NULL, "stop", "length", "abort", "error" */

typedef struct serve_req {
  /* --- what was asked (set before submit, read-only afterwards) --- */
  char id[40];            /* "cmpl-<n>" */
  int64_t created;        /* unix seconds */
  int32_t *prompt;        /* [n_prompt] token ids (owned) */
  int n_prompt;
  int max_tokens;         /* tokens to generate at most, >= 1 */
  int min_tokens;         /* stop/EOS tokens are masked until this many were generated */
  bool ignore_eos;        /* EOS is an ordinary token */
  int32_t *stop_ids;      /* [n_stop] tokens that end the request (owned) */
  int n_stop;
  vsampling smp;          /* temperature, top-k, top-p, seed */
  int logprobs;           /* -1: none; 0..SERVE_MAX_LOGPROBS: chosen token's logprob plus that many top */
  bool stream;
  tdfa *dfa;              /* structured output: the ids allowed next (owned; NULL: unconstrained) */
  /* --- state, guarded by serve_sched.mu --- */
  int dfa_state;          /* where the generated ids so far left dfa */
  int slot;               /* KV slot, -1 while waiting */
  int n_prefilled;        /* prompt tokens in the cache */
  int32_t *out;           /* [max_tokens] generated ids */
  float *out_lp;          /* [max_tokens] logprob of each generated id (when logprobs >= 0) */
  int32_t *top_ids;       /* [max_tokens][logprobs] top alternatives per generated token */
  float *top_lp;          /* [max_tokens][logprobs] their logprobs */
  int n_out;              /* generated so far */
  serve_finish finish;    /* FIN_NONE while running */
  int32_t stop_reason;    /* the stop token that ended it, -1 otherwise */
  char error[256];        /* FIN_ERROR: why */
  bool cancelled;         /* the client went away: retire at the next step */
  int refs;               /* holders (HTTP side, scheduler); freed at 0 */
  double t_arrive, t_first, t_last; /* vclock_now() seconds: submitted, first token, last token */
  struct serve_req *next; /* waiting queue / running list */
} serve_req;

/* Histogram with fixed upper bounds (seconds), cumulative on output as Prometheus wants. */
#define SERVE_HIST_BUCKETS 18
typedef struct {
  uint64_t count[SERVE_HIST_BUCKETS + 1]; /* [buckets + 1] per bucket (last: above the top bound) */
  double sum;                             /* seconds */
  uint64_t n;
} serve_hist;
void serve_hist_add(serve_hist *h, double seconds);

typedef struct {
  uint64_t prompt_tokens, generation_tokens;       /* totals */
  uint64_t finished[5];                            /* by serve_finish */
  uint64_t spec_drafts, spec_draft_tokens, spec_accepted; /* vLLM's spec-decode counters */
  uint64_t spec_accepted_pos[65];                  /* [K] accepted drafts per draft position */
  uint64_t steps, step_tokens, fallback_steps;     /* forward steps run, tokens in them, steps split by supports() */
  double forward_s;                                /* wall seconds inside forward() */
  uint64_t decode_steps;                           /* steps with decodes only (no prefill chunk) */
  double decode_s;                                 /* wall seconds of those inside forward() */
  double loop_s;                                   /* wall seconds of scheduler iterations that ran a step: admission,
                                                    * forward, waiting for the lock, sampling, retiring */
  double consume_s;                                /* of which turning logits into tokens (sampling, logprobs) */
  serve_hist ttft, itl, tpot, e2e;                 /* seconds */
} serve_counters;

typedef struct serve_sched {
  /* configuration */
  const vpath *path;
  const ds_model *model;
  const char *model_name;  /* served model id */
  int vocab, max_seq, max_ctx;
  int max_batched_tokens;  /* tokens per forward step (decode + prefill chunks) */
  int spec_k, spec_al;     /* synthetic speculative decoding; 0, 1 when off */
  int eos;                 /* model EOS id, -1 when none */
  double test_slowdown;    /* vouch serve --test-slowdown F (a test device, 0: off): every pure decode step
                            * spins F x its forward time after it, and counts as that much longer */
  double test_logit_scale; /* vouch serve --test-logit-scale F (a test device, 0: off): every logits row the
                            * path returns is multiplied by 1 + F before sampling and logprobs, a planted
                            * numerics change (greedy tokens unchanged, distributions sharper or flatter) */
  /* state */
  pthread_mutex_t mu;
  pthread_cond_t work_cv;  /* scheduler waits for requests */
  pthread_cond_t out_cv;   /* HTTP threads wait for tokens / finish */
  serve_req *waiting, *waiting_tail; /* FIFO */
  serve_req **running;     /* [max_seq] by slot, NULL when free */
  int n_running, n_waiting;
  bool stopping;
  bool failed;             /* a forward() failed: the server answers 503 from then on */
  char fail_msg[256];
  uint64_t next_id;
  serve_counters c;
  pthread_t thread;
  bool started;
} serve_sched;

/* vouch serve's test devices (never on by default; on the command line, so in a launched side's spec and
 * the run's manifest): see serve_sched's test_slowdown and test_logit_scale. */
typedef struct {
  double slowdown;         /* --test-slowdown F, 0: off */
  double logit_scale;      /* --test-logit-scale F, 0: off */
} serve_test_devices;

/* Opens the scheduler over an open path (the path stays the caller's); td: the test devices (NULL: none). */
vstatus serve_sched_start(serve_sched *s, const vpath *p, const ds_model *m, const char *model_name, int max_seq,
                          int max_ctx, int max_batched_tokens, int spec_k, int spec_al, const serve_test_devices *td);
/* Aborts every request (finish "abort"), wakes all waiters and joins the thread. */
void serve_sched_stop(serve_sched *s);
void serve_sched_free(serve_sched *s);
/* New request with refs 1 (the caller's); NULL on out of memory. */
serve_req *serve_req_new(int n_prompt, int max_tokens, int n_stop, int logprobs);
/* Queues r (adds the scheduler's reference). V_ERR when the server is stopping or broken. */
vstatus serve_submit(serve_sched *s, serve_req *r);
/* Drops one reference (under s->mu when s is given); frees at 0. */
void serve_req_release(serve_sched *s, serve_req *r);
/* Marks r cancelled (client gone). */
void serve_cancel(serve_sched *s, serve_req *r);

/* Prometheus exposition of the counters (malloc'ed text). Takes s->mu. */
char *serve_metrics_text(serve_sched *s);

/* The HTTP front: binds host:port (port 0: any free one), returns the port bound. */
typedef struct serve_http serve_http;
vstatus serve_http_start(serve_http **out, serve_sched *s, const char *host, int port, int *bound_port);
void serve_http_stop(serve_http *h);

#endif
