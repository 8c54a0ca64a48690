/* vouch serve's scheduler: continuous batching over one decode path (runner/serve/serve.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "runner/serve/serve.h"

const char *serve_finish_name(serve_finish f) {
  static const char *n[] = {NULL, "stop", "length", "abort", "error"};
  return f >= FIN_NONE && f <= FIN_ERROR ? n[f] : "error";
}

/* Upper bounds in seconds: 1 ms .. 80 s, roughly x2 apart (vLLM's TTFT buckets are similar). */
static const double HIST_BOUNDS[SERVE_HIST_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                                       0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 20.0, 80.0};

void serve_hist_add(serve_hist *h, double seconds) {
  int b = 0;
  while (b < SERVE_HIST_BUCKETS && seconds > HIST_BOUNDS[b]) b++;
  h->count[b]++;
  h->sum += seconds;
  h->n++;
}

const double *serve_hist_bounds(void) { return HIST_BOUNDS; }

serve_req *serve_req_new(int n_prompt, int max_tokens, int n_stop, int logprobs) {
  serve_req *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  const int nl = logprobs > 0 ? logprobs : 0;
  r->prompt = malloc((size_t)(n_prompt > 0 ? n_prompt : 1) * sizeof *r->prompt);
  r->stop_ids = malloc((size_t)(n_stop > 0 ? n_stop : 1) * sizeof *r->stop_ids);
  r->out = malloc((size_t)max_tokens * sizeof *r->out);
  r->out_lp = malloc((size_t)max_tokens * sizeof *r->out_lp);
  r->top_ids = malloc((size_t)max_tokens * (size_t)(nl ? nl : 1) * sizeof *r->top_ids);
  r->top_lp = malloc((size_t)max_tokens * (size_t)(nl ? nl : 1) * sizeof *r->top_lp);
  if (!r->prompt || !r->stop_ids || !r->out || !r->out_lp || !r->top_ids || !r->top_lp) {
    r->refs = 1;
    serve_req_release(NULL, r);
    return NULL;
  }
  r->n_prompt = n_prompt;
  r->max_tokens = max_tokens;
  r->n_stop = n_stop;
  r->logprobs = logprobs;
  r->slot = -1;
  r->stop_reason = -1;
  r->refs = 1;
  return r;
}

static void req_free(serve_req *r) {
  if (r->dfa) tdfa_free(r->dfa);
  free(r->dfa);
  free(r->prompt); free(r->stop_ids); free(r->out); free(r->out_lp); free(r->top_ids); free(r->top_lp);
  free(r);
}

void serve_req_release(serve_sched *s, serve_req *r) {
  if (!r) return;
  if (s) pthread_mutex_lock(&s->mu);
  const bool last = --r->refs == 0;
  if (s) pthread_mutex_unlock(&s->mu);
  if (last) req_free(r);
}

void serve_cancel(serve_sched *s, serve_req *r) {
  pthread_mutex_lock(&s->mu);
  if (r->finish == FIN_NONE) r->cancelled = true;
  pthread_cond_broadcast(&s->work_cv);
  pthread_mutex_unlock(&s->mu);
}

vstatus serve_submit(serve_sched *s, serve_req *r) {
  pthread_mutex_lock(&s->mu);
  vstatus st = V_OK;
  if (s->stopping) st = VERR("the server is shutting down");
  else if (s->failed) st = VERR("the server's decode path failed: %s", s->fail_msg);
  else {
    snprintf(r->id, sizeof r->id, "cmpl-%llu", (unsigned long long)++s->next_id);
    r->created = (int64_t)time(NULL);
    r->t_arrive = vclock_now();
    r->refs++;
    r->next = NULL;
    if (s->waiting_tail) s->waiting_tail->next = r;
    else s->waiting = r;
    s->waiting_tail = r;
    s->n_waiting++;
    pthread_cond_broadcast(&s->work_cv);
  }
  pthread_mutex_unlock(&s->mu);
  return st;
}

/* ---- one request's tokens ---- */

static bool is_stop(const serve_sched *s, const serve_req *r, int32_t t) {
  for (int i = 0; i < r->n_stop; i++)
    if (r->stop_ids[i] == t) return true;
  return !r->ignore_eos && t == s->eos;
}

/* Records token t (its logprobs from the raw logits row) and decides whether r is done. */
static void emit(serve_sched *s, serve_req *r, int32_t t, const float *row, double now) {
  const int i = r->n_out;
  if (r->logprobs >= 0) {
    double mx = -INFINITY, z = 0;
    for (int v = 0; v < s->vocab; v++) mx = fmax(mx, row[v]);
    for (int v = 0; v < s->vocab; v++) z += exp((double)row[v] - mx);
    const double lse = mx + log(z);
    r->out_lp[i] = (float)(row[t] - lse);
    /* top alternatives: repeated selection of the largest not yet taken (n <= 20) */
    int32_t *ids = r->top_ids + (size_t)i * r->logprobs;
    for (int k = 0; k < r->logprobs; k++) {
      int best = -1;
      for (int v = 0; v < s->vocab; v++) {
        bool taken = false;
        for (int q = 0; q < k && !taken; q++) taken = ids[q] == v;
        if (!taken && (best < 0 || row[v] > row[best])) best = v;
      }
      ids[k] = best;
      r->top_lp[(size_t)i * r->logprobs + k] = (float)(row[best] - lse);
    }
  }
  r->out[r->n_out++] = t;
  s->c.generation_tokens++;
  if (r->dfa) {
    const int ns = tdfa_next(r->dfa, r->dfa_state, t);
    if (ns >= 0) r->dfa_state = ns; /* else a stop id or EOS the accepting state let end it */
  }
  if (i == 0) {
    r->t_first = now;
    serve_hist_add(&s->c.ttft, now - r->t_arrive);
  }
  r->t_last = now;
  if (is_stop(s, r, t)) {
    r->finish = FIN_STOP;
    r->stop_reason = t == s->eos && !r->ignore_eos ? -1 : t;
    for (int q = 0; q < r->n_stop; q++)
      if (r->stop_ids[q] == t) r->stop_reason = t;
  } else if (r->n_out >= r->max_tokens) {
    r->finish = FIN_LENGTH;
  } else if (r->dfa && r->dfa->accept[r->dfa_state] && !tdfa_has_exit(r->dfa, r->dfa_state, s->vocab)) {
    r->finish = FIN_STOP; /* the constraint is complete and admits nothing more */
  }
}

/* Samples the next token of r from logits row `row`: under a structured output only the ids its
 * automaton admits (and stop ids / EOS where it accepts); stop tokens masked before min_tokens. */
static int32_t sample_next(serve_sched *s, serve_req *r, const float *row, float *masked, unsigned char *allowed,
                           void *work) {
  const float *l = row;
  if (r->dfa) {
    memset(allowed, 0, (size_t)s->vocab);
    tdfa_mark(r->dfa, r->dfa_state, s->vocab, allowed);
    if (r->dfa->accept[r->dfa_state]) {
      for (int q = 0; q < r->n_stop; q++) allowed[r->stop_ids[q]] = 1;
      if (!r->ignore_eos && s->eos >= 0 && s->eos < s->vocab) allowed[s->eos] = 1;
    }
    for (int v = 0; v < s->vocab; v++) masked[v] = allowed[v] ? row[v] : -INFINITY;
    l = masked;
  }
  if (r->n_out < r->min_tokens) {
    if (l != masked) memcpy(masked, row, (size_t)s->vocab * sizeof *masked);
    bool left = false; /* under a constraint that admits only stop ids here, the constraint wins */
    for (int q = 0; q < r->n_stop; q++) masked[r->stop_ids[q]] = -INFINITY;
    if (!r->ignore_eos && s->eos >= 0 && s->eos < s->vocab) masked[s->eos] = -INFINITY;
    for (int v = 0; v < s->vocab && !left && r->dfa; v++) left = masked[v] > -INFINITY;
    if (r->dfa && !left) {
      for (int v = 0; v < s->vocab; v++) masked[v] = allowed[v] ? row[v] : -INFINITY;
    }
    l = masked;
  }
  return (int32_t)vsample(l, s->vocab, &r->smp, 0, r->n_out, work);
}

static void retire(serve_sched *s, serve_req *r, serve_finish f, double now) {
  if (r->finish == FIN_NONE) r->finish = f;
  if (r->slot >= 0) {
    s->running[r->slot] = NULL;
    s->n_running--;
  }
  r->slot = -1;
  s->c.finished[r->finish]++;
  serve_hist_add(&s->c.e2e, now - r->t_arrive);
  if (r->n_out > 1) serve_hist_add(&s->c.tpot, (r->t_last - r->t_first) / (r->n_out - 1));
  r->refs--; /* the scheduler's reference; the HTTP side holds the other */
  if (r->refs == 0) req_free(r);
}

/* ---- the loop ---- */

typedef struct {
  int *seq, *ntok, *spos;   /* [max_seq] */
  serve_req **req;          /* [max_seq] */
  bool *decode;             /* [max_seq] decode step (else a prefill chunk) */
  int32_t *tokens;          /* [rows] */
  float *logits;            /* [rows][vocab] */
  float *masked;            /* [vocab] */
  unsigned char *allowed;   /* [vocab] ids a structured output admits next */
  void *work;               /* vsample scratch */
  int rows;
} step_buf;

/* Admits waiting requests into free slots (FIFO). */
static void admit(serve_sched *s) {
  for (int slot = 0; slot < s->max_seq && s->waiting; slot++) {
    if (s->running[slot]) continue;
    serve_req *r = s->waiting;
    s->waiting = r->next;
    if (!s->waiting) s->waiting_tail = NULL;
    s->n_waiting--;
    r->next = NULL;
    if (r->cancelled) {
      s->c.finished[FIN_ABORT]++;
      r->finish = FIN_ABORT;
      if (--r->refs == 0) req_free(r);
      slot--;
      continue;
    }
    if (s->path->ops->reset) s->path->ops->reset(s->path->state, slot);
    r->slot = slot;
    s->running[slot] = r;
    s->n_running++;
    s->c.prompt_tokens += (uint64_t)r->n_prompt;
  }
}

/* Builds the next step from the running requests: every decode first, then prefill chunks in
 * slot order while the token budget lasts. Returns the number of sequences. */
static int build_step(serve_sched *s, step_buf *b, int *n_tokens) {
  const double now = vclock_now();
  int n = 0, t = 0;
  for (int slot = 0; slot < s->max_seq; slot++) {
    serve_req *r = s->running[slot];
    if (!r) continue;
    if (r->cancelled) { retire(s, r, FIN_ABORT, now); continue; }
    if (r->n_prefilled < r->n_prompt) continue;
    const int p = r->n_prompt + r->n_out - 1; /* position of the last emitted token */
    int k = s->spec_k;
    if (k > s->max_ctx - 1 - p) k = s->max_ctx - 1 - p;
    if (k < 0) k = 0;
    b->req[n] = r, b->seq[n] = slot, b->spos[n] = p, b->ntok[n] = 1 + k, b->decode[n] = true;
    const int32_t last = r->out[r->n_out - 1];
    for (int j = 0; j <= k; j++) b->tokens[t + j] = last; /* drafts: the last token repeated */
    t += 1 + k;
    n++;
  }
  int budget = s->max_batched_tokens - t;
  for (int slot = 0; slot < s->max_seq && budget > 0; slot++) {
    serve_req *r = s->running[slot];
    if (!r || r->n_prefilled >= r->n_prompt) continue;
    int c = r->n_prompt - r->n_prefilled;
    if (c > budget) c = budget;
    b->req[n] = r, b->seq[n] = slot, b->spos[n] = r->n_prefilled, b->ntok[n] = c, b->decode[n] = false;
    memcpy(b->tokens + t, r->prompt + r->n_prefilled, (size_t)c * sizeof *b->tokens);
    t += c;
    budget -= c;
    n++;
  }
  *n_tokens = t;
  return n;
}

/* Turns the logits of sequences [i0, i1) of the step into tokens. `row0` is the first logits
 * row of sequence i0 in b->logits. */
static void consume(serve_sched *s, step_buf *b, int i0, int i1, bool all_logits, double now) {
  int row = 0;
  for (int i = i0; i < i1; i++) {
    serve_req *r = b->req[i];
    const int nrows = all_logits ? b->ntok[i] : 1;
    const float *L = b->logits + (size_t)row * s->vocab; /* first row of this sequence */
    row += nrows;
    if (r->finish != FIN_NONE) continue;
    if (!b->decode[i]) {
      r->n_prefilled += b->ntok[i];
      if (r->n_prefilled < r->n_prompt) continue;
      const float *last = L + (size_t)(nrows - 1) * s->vocab;
      emit(s, r, sample_next(s, r, last, b->masked, b->allowed, b->work), last, now);
    } else {
      const int k = b->ntok[i] - 1, want = s->spec_al - 1 < k ? s->spec_al - 1 : k;
      const double prev = r->t_last;
      int a = 0;
      /* accepted drafts by rule (synthetic acceptance), each scored by the row before it; the
       * draft is the last token repeated (build_step), which emitting it keeps true */
      for (a = 0; a < want && r->finish == FIN_NONE; a++) {
        const int32_t d = r->out[r->n_out - 1]; /* the draft: last token repeated */
        if (r->n_out < r->min_tokens && is_stop(s, r, d)) break;
        if (r->dfa && tdfa_next(r->dfa, r->dfa_state, d) < 0) break; /* a draft the constraint refuses */
        emit(s, r, d, L + (size_t)a * s->vocab, now);
        s->c.spec_accepted_pos[a]++;
      }
      if (k > 0) {
        s->c.spec_drafts++;
        s->c.spec_draft_tokens += (uint64_t)k;
        s->c.spec_accepted += (uint64_t)a;
      }
      if (r->finish == FIN_NONE) {
        const float *bonus = L + (size_t)a * s->vocab;
        emit(s, r, sample_next(s, r, bonus, b->masked, b->allowed, b->work), bonus, now);
      }
      serve_hist_add(&s->c.itl, now - prev);
    }
    if (r->finish != FIN_NONE) retire(s, r, r->finish, now);
  }
}

/* Runs sequences [i0, i1) of b as one forward step (unlocked); V_UNSUPPORTED from supports(). */
static vstatus run_step(serve_sched *s, step_buf *b, int i0, int i1, bool all_logits, double *secs) {
  int off = 0;
  for (int i = 0; i < i0; i++) off += b->ntok[i];
  vstep st = {.n_seq = i1 - i0, .seq = b->seq + i0, .n_tokens = b->ntok + i0, .start_pos = b->spos + i0,
              .tokens = b->tokens + off, .all_logits = all_logits, .forced_experts = NULL};
  const vpath_ops *ops = s->path->ops;
  if (ops->supports) VTRY(ops->supports(s->path->state, &st));
  const double t0 = vclock_now();
  /* logits of this sub-step go to the front of the buffer: consume() reads them from there */
  vstatus r = ops->forward(s->path->state, &st, b->logits);
  *secs = vclock_now() - t0;
  if (s->test_logit_scale != 0 && r == V_OK) { /* --test-logit-scale: a planted numerics change */
    size_t rows = 0;
    for (int i = i0; i < i1; i++) rows += all_logits ? (size_t)b->ntok[i] : 1;
    const float f = (float)(1 + s->test_logit_scale);
    for (size_t e = 0; e < rows * (size_t)s->vocab; e++) b->logits[e] *= f;
  }
  bool decode = s->test_slowdown > 0;
  for (int i = i0; decode && i < i1; i++) decode = b->decode[i];
  if (decode && r == V_OK) { /* --test-slowdown: the step takes (1 + F) times as long, as a slower path would */
    /* a spin, not a sleep: it keeps the CPU as a slower path's work would, where a sleep gives the CPU
     * up and, on a loaded machine, gets it back milliseconds late (measured: 1.3 to 1.7 x instead of
     * 1.2 x on a step of half a millisecond with load 8 on 2 cores) */
    const double until = t0 + *secs * (1 + s->test_slowdown);
    while (vclock_now() < until) {}
    *secs = vclock_now() - t0;
  }
  return r;
}

static void fail_seqs(serve_sched *s, step_buf *b, int i0, int i1, const char *msg, double now) {
  for (int i = i0; i < i1; i++) {
    serve_req *r = b->req[i];
    if (r->finish != FIN_NONE) continue;
    snprintf(r->error, sizeof r->error, "%s", msg);
    retire(s, r, FIN_ERROR, now);
  }
}

static void *sched_main(void *arg) {
  serve_sched *s = arg;
  const int rows = s->max_seq * (s->spec_k + 1) + s->max_batched_tokens;
  step_buf b = {0};
  b.seq = calloc((size_t)s->max_seq, sizeof(int));
  b.ntok = calloc((size_t)s->max_seq, sizeof(int));
  b.spos = calloc((size_t)s->max_seq, sizeof(int));
  b.req = calloc((size_t)s->max_seq, sizeof(serve_req *));
  b.decode = calloc((size_t)s->max_seq, sizeof(bool));
  b.tokens = calloc((size_t)rows, sizeof(int32_t));
  b.logits = malloc((size_t)rows * (size_t)s->vocab * sizeof(float));
  b.masked = malloc((size_t)s->vocab * sizeof(float));
  b.allowed = malloc((size_t)s->vocab);
  b.work = malloc(VSAMPLE_WORK_BYTES(s->vocab));
  b.rows = rows;
  pthread_mutex_lock(&s->mu);
  if (!b.seq || !b.ntok || !b.spos || !b.req || !b.decode || !b.tokens || !b.logits || !b.masked || !b.allowed || !b.work) {
    s->failed = true;
    snprintf(s->fail_msg, sizeof s->fail_msg, "out of memory for %d logits rows of %d", rows, s->vocab);
  }
  const bool all_logits = s->spec_k > 0;
  while (!s->stopping && !s->failed) {
    const double t_iter = vclock_now();
    admit(s);
    int n_tokens = 0;
    const int n = build_step(s, &b, &n_tokens);
    if (n == 0) {
      pthread_cond_broadcast(&s->out_cv); /* retired (cancelled) requests */
      pthread_cond_wait(&s->work_cv, &s->mu);
      continue;
    }
    pthread_mutex_unlock(&s->mu);
    double secs = 0;
    vstatus st = run_step(s, &b, 0, n, all_logits, &secs);
    if (st == V_OK) {
      pthread_mutex_lock(&s->mu);
      s->c.steps++;
      s->c.step_tokens += (uint64_t)n_tokens;
      s->c.forward_s += secs;
      bool pure = true;
      for (int i = 0; i < n; i++) pure &= b.decode[i];
      if (pure) s->c.decode_steps++, s->c.decode_s += secs;
      const double t_c = vclock_now();
      consume(s, &b, 0, n, all_logits, t_c);
      s->c.consume_s += vclock_now() - t_c;
    } else {
      /* the path's fallback: one step per sequence (a path that refuses mixed steps) */
      char msg[256];
      snprintf(msg, sizeof msg, "%s: %s", s->path->ops->name, verr_msg());
      pthread_mutex_lock(&s->mu);
      if (st == V_UNSUPPORTED && n > 1) {
        for (int i = 0; i < n; i++) {
          pthread_mutex_unlock(&s->mu);
          vstatus si = run_step(s, &b, i, i + 1, all_logits, &secs);
          snprintf(msg, sizeof msg, "%s: %s", s->path->ops->name, verr_msg());
          pthread_mutex_lock(&s->mu);
          if (si == V_OK) {
            s->c.steps++;
            s->c.fallback_steps++;
            s->c.step_tokens += (uint64_t)b.ntok[i];
            s->c.forward_s += secs;
            consume(s, &b, i, i + 1, all_logits, vclock_now());
          } else {
            fail_seqs(s, &b, i, i + 1, msg, vclock_now());
          }
        }
      } else {
        fail_seqs(s, &b, 0, n, msg, vclock_now());
      }
    }
    pthread_cond_broadcast(&s->out_cv);
    s->c.loop_s += vclock_now() - t_iter;
  }
  /* stopping (or broken): every request still here ends as "abort" */
  const double now = vclock_now();
  for (int slot = 0; slot < s->max_seq; slot++)
    if (s->running[slot]) retire(s, s->running[slot], s->failed ? FIN_ERROR : FIN_ABORT, now);
  while (s->waiting) {
    serve_req *r = s->waiting;
    s->waiting = r->next;
    r->finish = s->failed ? FIN_ERROR : FIN_ABORT;
    if (s->failed) snprintf(r->error, sizeof r->error, "%s", s->fail_msg);
    s->c.finished[r->finish]++;
    if (--r->refs == 0) req_free(r);
  }
  s->waiting_tail = NULL;
  s->n_waiting = 0;
  pthread_cond_broadcast(&s->out_cv);
  pthread_mutex_unlock(&s->mu);
  free(b.seq); free(b.ntok); free(b.spos); free(b.req); free(b.decode); free(b.tokens); free(b.logits);
  free(b.masked); free(b.allowed); free(b.work);
  return NULL;
}

vstatus serve_sched_start(serve_sched *s, const vpath *p, const ds_model *m, const char *model_name, int max_seq,
                          int max_ctx, int max_batched_tokens, int spec_k, int spec_al, const serve_test_devices *td) {
  memset(s, 0, sizeof *s);
  s->test_slowdown = td ? td->slowdown : 0;
  s->test_logit_scale = td ? td->logit_scale : 0;
  s->path = p;
  s->model = m;
  s->model_name = model_name;
  s->vocab = m->cfg.vocab_size;
  s->max_seq = max_seq;
  s->max_ctx = max_ctx;
  s->max_batched_tokens = max_batched_tokens;
  s->spec_k = spec_k;
  s->spec_al = spec_al;
  s->eos = m->cfg.eos_token_id;
  s->running = calloc((size_t)max_seq, sizeof *s->running);
  if (!s->running) return VERR("serve: out of memory");
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->work_cv, NULL);
  pthread_cond_init(&s->out_cv, NULL);
  if (pthread_create(&s->thread, NULL, sched_main, s) != 0) return VERR("serve: cannot start the scheduler thread");
  s->started = true;
  return V_OK;
}

void serve_sched_stop(serve_sched *s) {
  if (!s->started) return;
  pthread_mutex_lock(&s->mu);
  s->stopping = true;
  pthread_cond_broadcast(&s->work_cv);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->thread, NULL);
  s->started = false;
}

void serve_sched_free(serve_sched *s) {
  serve_sched_stop(s);
  free(s->running);
  s->running = NULL;
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->work_cv);
  pthread_cond_destroy(&s->out_cv);
}
