/* vouch sweep --server URL: served throughput of an OpenAI-compatible server (vLLM, SGLang,
 * vouch serve, ...). For each --concurrency level, --num-prompts streamed completions of
 * --input-len random token ids and --output-len generated tokens (ignore_eos), sent at once up to
 * the concurrency (closed loop) or at a constant / Poisson --rate (open loop, still capped), or
 * replayed from a Mooncake trace, vouch's sessions or an AgentX trace (server_agentx.h). Per level:
 * TTFT, TPOT, ITL and end-to-end latency (mean, p50, p90, p99), output tokens/s (prefill + decode)
 * and decode_tokens_per_s (pure decode), tokens/s per user (1000 / TPOT ms, per request),
 * interactivity_p90 (1000 / TPOT p90) and e2e_norm_interactivity_p90 (InferenceX's: 1000 / p90 of
 * E2E ms per output token), request rate, goodput under --slo, and speculative-decoding acceptance
 * from /metrics before and after.
 * One record per level (suite "serve", path "server"), emitted as every suite does (and --json).
 *
 * Definitions (as vLLM's benchmark_serving): TTFT = first token event - send; TPOT = (end - first
 * token) / (tokens - 1); ITL = gaps between consecutive token events; E2E = end - send. The
 * duration of a level runs from its first send to its last end. Goodput counts requests that meet
 * every SLO given. Acceptance: rate = accepted / draft tokens, mean acceptance length
 * = 1 + accepted / drafts (tokens kept per verify step), per position = accepted at p / drafts.
 * Against vouch serve, /metrics also gives the path's own forward time per decode-only step
 * (server_decode_step_ms, the mean over the level), and serving overhead = TPOT p50 - that step
 * (divided by the measured mean acceptance length under speculative decoding)
 * (HTTP, JSON, SSE, scheduling, sampling, and steps slowed by other requests' prefill chunks).
 *
 * Mooncake trace (--trace FILE): JSON lines {"timestamp": ms, "input_length": N, "output_length": N,
 * "hash_ids": [..]}; request i is sent at (timestamp_i - timestamp_0) / --trace-speed; its prompt
 * is block after block of --trace-block tokens, block j drawn from hash_ids[j] (so equal hash ids
 * give equal prefixes), the rest of the input from the request's own line. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic_file.h"
#include "common/clock.h"
#include "common/interrupt.h"
#include "suites/engine/cli.h"
#include "suites/sweep/sweep_suite.h"
#include "suites/engine/record.h"
#include "suites/engine/sink.h"
#include "suites/sweep/server_agentx.h"
#include "suites/sweep/server_replay.h"
#include "suites/sweep/server_trace.h"
#include "suites/sweep/sweep_prompt.h"
#include "suites/served/served.h"
#include "suites/served/served_pair.h"
#include "vouch_git_commit.h"

static const char USAGE[] =
    "usage: vouch sweep --server URL [--server-model NAME] [--concurrency 1,4,16] [--input-len N]\n"
    "                   [--output-len N] [--num-prompts N] [--rate R|poisson:R] [--slo ttft:MS,tpot:MS,e2e:MS]\n"
    "                   [--trace FILE [--trace-speed X] [--trace-block N]] [--warmup N] [--vocab N]\n"
    "                   [--sessions FILE|gen:KEY=V,.. [--sessions-out FILE]] [--timeout S] [--seed S] [--json FILE]\n"
    "                   [--send-times FILE] [--trace-format auto|mooncake|agentx]\n"
    "  Served throughput of an OpenAI-compatible server: streamed /v1/completions with token-id prompts,\n"
    "  timed per SSE event. Per concurrency level: TTFT, TPOT, ITL, E2E (mean, p50, p90, p99), output\n"
    "  tok/s, tok/s per user (1000/TPOT), req/s, goodput under --slo, spec-decode acceptance from the\n"
    "  server's /metrics (vLLM names) before and after; against vouch serve also the path's forward\n"
    "  time per step and the serving overhead (TPOT - step). One record per level (suite serve).\n"
    "  --rate R sends R requests/s evenly, poisson:R with exponential gaps (seeded); without it all\n"
    "  requests start at once, at most --concurrency in flight. --trace replays a Mooncake JSONL trace\n"
    "  (timestamp ms, input_length, output_length, hash_ids; see suites/sweep/server_trace.h).\n"
    "  --sessions replays multi-turn sessions (the same lines plus session_id and pause_ms: each turn's\n"
    "  prompt is the previous prompt + its output + the turn's new tokens, sent pause_ms after the previous\n"
    "  turn ended), from a file or generated: gen:sessions=N,turns=T,input=I,delta=D,output=O,pause=MS,\n"
    "  gap=MS,system=S (seeded by --seed; --sessions-out writes them). Reports per-turn TTFT/TPOT,\n"
    "  session times and interactivity_p90 = 1000 / TPOT p90 (docs/serving.md). --sessions also replays\n"
    "  AgentX traces (AIPerf's weka_trace: objects with block_size and requests of t, in, out, hash_ids,\n"
    "  think_time, subagents; suites/sweep/server_agentx.h), told by the file's shape or --trace-format:\n"
    "  a parent turn waits for the subagents that ended before it (join), and --concurrency counts session\n"
    "  trees (a trace with its subagents), not turns.\n"
    "  Every record: e2e_norm_interactivity_p90 = 1000 / p90 of E2E ms per output token (InferenceX),\n"
    "  decode_tokens_per_s (tokens after each first / time some request was decoding) beside tokens_per_s.\n"
    "  --send-times FILE writes one line per request sent: concurrency, index, intended and actual send\n"
    "  time in s after the level's first send (bench/loadgen_bench.c checks the rate and Poisson gaps).\n"
    "  API key: $VOUCH_SERVER_API_KEY, else $OPENAI_API_KEY, sent as a bearer token, never recorded.\n"
    "  The server must return token ids (choices[].token_ids; vLLM: return_token_ids). Exit 1 when a\n"
    "  request failed (each failure listed), 2 on usage errors.\n"
    "  --ref-server URL|launch:CMD [--rounds N] [--threshold T] [--out DIR]: this sweep on two servers,\n"
    "  rounds interleaved per level and the head (--server) gated against the base as vouch ab gates\n"
    "  (vouch sweep --server x --ref-server y --help).\n"
    "  defaults: --concurrency 1 --input-len 32 --output-len 32 --num-prompts 4 x concurrency --warmup 1\n"
    "            --vocab (the server's vocab_size, else 1000) --timeout 600 --trace-speed 1 --trace-block 512\n";

typedef struct {
  double ttft, tpot, e2e; /* ms; <= 0: not set */
} slo;

static vstatus parse_slo(const char *s, slo *o) {
  char buf[200];
  snprintf(buf, sizeof buf, "%s", s);
  char *save = NULL;
  for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    char *c = strchr(t, ':'), *end;
    if (!c) return VERR("--slo '%s': expected ttft:MS,tpot:MS,e2e:MS (any of them)", s);
    *c = 0;
    const double v = strtod(c + 1, &end);
    if (end == c + 1 || *end || !(v > 0)) return VERR("--slo '%s': '%s' needs a positive number of ms", s, t);
    if (!strcmp(t, "ttft")) o->ttft = v;
    else if (!strcmp(t, "tpot")) o->tpot = v;
    else if (!strcmp(t, "e2e") || !strcmp(t, "e2el")) o->e2e = v;
    else return VERR("--slo '%s': unknown target '%s' (ttft, tpot, e2e)", s, t);
  }
  return V_OK;
}

/* ---- one level's figures ---- */

typedef struct {
  double *ttft, *tpot, *itl, *e2e, *per_user; /* ms, ms, ms, ms, tok/s */
  double *e2e_tok;     /* [n_e2e_tok] E2E ms per output token of each request with one (InferenceX's r_i) */
  int n_ttft, n_tpot, n_itl, n_e2e, n_e2e_tok;
  int ok, failed, good;
  long tokens;
  long decode_tokens;  /* output tokens after each request's first */
  double duration_s;
  double decode_s;     /* time some request was past its first token (the union of [first, end]) */
} level_stats;

static void stats_free(level_stats *st) {
  free(st->ttft); free(st->tpot); free(st->itl); free(st->e2e); free(st->per_user); free(st->e2e_tok);
}

typedef struct {
  double a, b;
} span;

static int by_start(const void *x, const void *y) {
  const span *p = x, *q = y;
  return (p->a > q->a) - (p->a < q->a);
}

/* The length of the union of the spans (sorted here). */
static double union_length(span *v, int n) {
  qsort(v, (size_t)n, sizeof *v, by_start);
  double total = 0, lo = 0, hi = -INFINITY;
  for (int i = 0; i < n; i++) {
    if (v[i].a > hi) { total += hi > lo ? hi - lo : 0; lo = v[i].a, hi = v[i].b; }
    else hi = fmax(hi, v[i].b);
  }
  return total + (hi > lo ? hi - lo : 0);
}

static vstatus stats_compute(const served_req *r, int n, const slo *g, level_stats *st) {
  memset(st, 0, sizeof *st);
  long itl_cap = 0;
  for (int i = 0; i < n; i++) itl_cap += r[i].n_chunks;
  st->ttft = malloc((size_t)(n + 1) * sizeof(double));
  st->tpot = malloc((size_t)(n + 1) * sizeof(double));
  st->e2e = malloc((size_t)(n + 1) * sizeof(double));
  st->per_user = malloc((size_t)(n + 1) * sizeof(double));
  st->itl = malloc((size_t)(itl_cap + 1) * sizeof(double));
  st->e2e_tok = malloc((size_t)(n + 1) * sizeof(double));
  span *dec = malloc((size_t)(n + 1) * sizeof *dec);
  if (!st->ttft || !st->tpot || !st->e2e || !st->per_user || !st->itl || !st->e2e_tok || !dec) {
    free(dec);
    return VERR("out of memory for the statistics");
  }
  int n_dec = 0;
  double first = INFINITY, last = -INFINITY;
  for (int i = 0; i < n; i++) {
    const served_req *q = &r[i];
    if (q->t_send == 0) continue; /* never sent (interrupted) */
    first = fmin(first, q->t_send);
    last = fmax(last, q->t_end);
    if (!q->ok) { st->failed++; continue; }
    st->ok++;
    st->tokens += q->n_tokens;
    const double ttft = (q->t_first - q->t_send) * 1e3, e2e = (q->t_end - q->t_send) * 1e3;
    st->ttft[st->n_ttft++] = ttft;
    if (q->n_tokens > 0) st->e2e_tok[st->n_e2e_tok++] = e2e / q->n_tokens;
    st->e2e[st->n_e2e++] = e2e;
    double tpot = NAN;
    if (q->n_tokens > 1) {
      st->decode_tokens += q->n_tokens - 1;
      dec[n_dec++] = (span){q->t_first, q->t_end};
      tpot = (q->t_end - q->t_first) * 1e3 / (q->n_tokens - 1);
      st->per_user[st->n_tpot] = tpot > 0 ? 1e3 / tpot : NAN;
      st->tpot[st->n_tpot++] = tpot;
    }
    for (int k = 1; k < q->n_chunks; k++) st->itl[st->n_itl++] = (q->chunk_t[k] - q->chunk_t[k - 1]) * 1e3;
    const bool good = (!(g->ttft > 0) || ttft <= g->ttft) && (!(g->tpot > 0) || isnan(tpot) || tpot <= g->tpot) &&
                      (!(g->e2e > 0) || e2e <= g->e2e);
    st->good += good;
  }
  st->duration_s = last > first ? last - first : NAN;
  st->decode_s = union_length(dec, n_dec);
  free(dec);
  return V_OK;
}

static double pct(const double *x, int n, double p) { return n ? rec_stat_percentile(x, n, p) : NAN; }

/* Adds name (median), name_mean, name_p90, name_p99 from samples. */
static vstatus add_dist(vrecord *r, const char *name, const char *unit, rec_better b, const double *x, int n) {
  if (n == 0) return V_OK;
  char nm[48];
  VTRY(rec_metric_samples(r, name, unit, RD_MEDIAN, b, x, n, 0));
  snprintf(nm, sizeof nm, "%s_mean", name);
  VTRY(rec_metric_samples(r, nm, unit, RD_MEAN, b, x, n, 0));
  snprintf(nm, sizeof nm, "%s_p90", name);
  VTRY(rec_metric_samples(r, nm, unit, RD_P90, b, x, n, 0));
  snprintf(nm, sizeof nm, "%s_p99", name);
  return rec_metric_samples(r, nm, unit, RD_P99, b, x, n, 0);
}

typedef struct {
  const char *case_id;
  const served_conn *conn;
  const char *model, *rate, *trace;
  int concurrency, input_len, output_len, n_prompts;
  uint64_t seed;
  const slo *g;
  const served_metrics *before, *after;
  const replay_ctx *replay; /* session replay: per-turn figures; NULL otherwise */
  const char *format;       /* "agentx" for an AgentX trace's sessions, else NULL (Mooncake, generated) */
} level_info;

static vrecord *level_record(const level_info *L, const level_stats *st, const served_req *reqs, int n, vstatus *err) {
  vrecord *r = rec_new("serve", L->case_id, "server");
  if (!r) { *err = V_ERR; return NULL; }
  vstatus s = V_OK;
  s = s ? s : rec_param_str(r, "server", L->conn->shown);
  s = s ? s : rec_param_str(r, "model", L->model);
  s = s ? s : rec_param_int(r, "concurrency", L->concurrency);
  s = s ? s : rec_param_int(r, "num_prompts", L->n_prompts);
  if (L->replay) s = s ? s : rec_param_str(r, "sessions", L->trace);
  else if (L->trace) s = s ? s : rec_param_str(r, "trace", L->trace);
  else {
    s = s ? s : rec_param_int(r, "input_len", L->input_len);
    s = s ? s : rec_param_int(r, "output_len", L->output_len);
    s = s ? s : rec_param_str(r, "rate", L->rate);
  }
  if (L->format) s = s ? s : rec_param_str(r, "trace_format", L->format);
  if (L->format && L->replay) { /* AgentX: concurrency counts these trees; turns that waited for subagents,
                                   subagents that waited for the turn that spawned them */
    s = s ? s : rec_param_int(r, "trees", L->replay->n_trees);
    s = s ? s : rec_param_int(r, "joins", L->replay->n_joins);
    s = s ? s : rec_param_int(r, "spawns", L->replay->n_spawns);
  }
  s = s ? s : rec_param_int(r, "seed", (int64_t)L->seed);
  if (L->g->ttft > 0) s = s ? s : rec_param_num(r, "slo_ttft_ms", L->g->ttft);
  if (L->g->tpot > 0) s = s ? s : rec_param_num(r, "slo_tpot_ms", L->g->tpot);
  if (L->g->e2e > 0) s = s ? s : rec_param_num(r, "slo_e2e_ms", L->g->e2e);
  s = s ? s : add_dist(r, "ttft_ms", "ms", RB_LOWER, st->ttft, st->n_ttft);
  s = s ? s : add_dist(r, "tpot_ms", "ms", RB_LOWER, st->tpot, st->n_tpot);
  s = s ? s : add_dist(r, "itl_ms", "ms", RB_LOWER, st->itl, st->n_itl);
  s = s ? s : add_dist(r, "e2e_ms", "ms", RB_LOWER, st->e2e, st->n_e2e);
  if (st->n_tpot) s = s ? s : rec_metric_samples(r, "tokens_per_s_per_user", "tok/s", RD_MEDIAN, RB_HIGHER, st->per_user, st->n_tpot, 0);
  /* the interactivity 90% of requests reach or beat: 1000 / the TPOT p90 above (docs/serving.md) */
  if (st->n_tpot) s = s ? s : rec_metric_value(r, "interactivity_p90", "tok/s", RB_HIGHER, 1e3 / pct(st->tpot, st->n_tpot, 90));
  /* InferenceX's E2E normalized interactivity: 1 / the p90 over requests of E2E / output tokens, so
   * TTFT (queueing, prefill) counts against it (docs/serving.md) */
  if (st->n_e2e_tok)
    s = s ? s : rec_metric_value(r, "e2e_norm_interactivity_p90", "tok/s", RB_HIGHER, 1e3 / pct(st->e2e_tok, st->n_e2e_tok, 90));
  if (L->replay) s = s ? s : replay_metrics(r, L->replay, reqs);
  const double dur = st->duration_s;
  s = s ? s : rec_metric_value(r, "tokens_per_s", "tok/s", RB_HIGHER, dur > 0 ? st->tokens / dur : NAN);
  /* pure decode: the tokens after each first over the time some request was decoding (prefill + decode: tokens_per_s) */
  if (st->decode_s > 0) s = s ? s : rec_metric_value(r, "decode_tokens_per_s", "tok/s", RB_HIGHER, st->decode_tokens / st->decode_s);
  s = s ? s : rec_metric_value(r, "requests_per_s", "req/s", RB_HIGHER, dur > 0 ? st->ok / dur : NAN);
  s = s ? s : rec_metric_value(r, "duration_s", "s", RB_NONE, dur);
  s = s ? s : rec_metric_value(r, "requests_ok", "", RB_HIGHER, st->ok);
  s = s ? s : rec_metric_value(r, "requests_failed", "", RB_LOWER, st->failed);
  s = s ? s : rec_metric_value(r, "output_tokens", "", RB_NONE, (double)st->tokens);
  if (L->g->ttft > 0 || L->g->tpot > 0 || L->g->e2e > 0) {
    s = s ? s : rec_metric_value(r, "goodput_requests_per_s", "req/s", RB_HIGHER, dur > 0 ? st->good / dur : NAN);
    s = s ? s : rec_metric_value(r, "goodput_pct", "%", RB_HIGHER, st->ok + st->failed ? 100.0 * st->good / (st->ok + st->failed) : NAN);
  }
  const served_metrics *a = L->after, *b = L->before;
  if (a->have_spec && b->have_spec && a->drafts - b->drafts > 0) {
    const double dr = a->drafts - b->drafts, dt = a->draft_tokens - b->draft_tokens, ac = a->accepted - b->accepted;
    s = s ? s : rec_metric_value(r, "spec_drafts", "", RB_NONE, dr);
    s = s ? s : rec_metric_value(r, "spec_acceptance_rate", "", RB_HIGHER, dt > 0 ? ac / dt : NAN);
    s = s ? s : rec_metric_value(r, "spec_mean_acceptance_length", "tok", RB_HIGHER, 1 + ac / dr);
    for (int p = 0; p < a->n_pos && s == V_OK; p++) {
      char nm[48];
      snprintf(nm, sizeof nm, "spec_acceptance_pos%d", p);
      s = rec_metric_value(r, nm, "", RB_HIGHER, (a->per_pos[p] - b->per_pos[p]) / dr);
    }
  }
  if (a->have_forward && b->have_forward && a->forward_steps - b->forward_steps > 0) {
    const double step_ms = 1e3 * (a->forward_s - b->forward_s) / (a->forward_steps - b->forward_steps);
    s = s ? s : rec_metric_value(r, "server_decode_step_ms", "ms", RB_LOWER, step_ms);
    /* a step keeps AL tokens per sequence under speculative decoding: its share per token is step / AL */
    const double al = a->have_spec && b->have_spec && a->drafts - b->drafts > 0
                          ? 1 + (a->accepted - b->accepted) / (a->drafts - b->drafts) : 1;
    /* a difference near zero (negative on a fast server): its ratio is no speed figure, so it is listed and
     * never gated; TPOT and the step time it is made of are gated on their own */
    if (st->n_tpot) s = s ? s : rec_metric_value(r, "serve_overhead_ms", "ms", RB_NONE, pct(st->tpot, st->n_tpot, 50) - step_ms / al);
  }
  s = s ? s : rec_check_add(r, "all_requests_ok", st->failed == 0 && st->ok > 0);
  if (s == V_OK && st->failed) {
    for (int i = 0; i < n; i++)
      if (reqs[i].t_send != 0 && !reqs[i].ok) {
        char why[300];
        snprintf(why, sizeof why, "%d of %d requests failed; first: %.220s", st->failed, st->ok + st->failed, reqs[i].error);
        rec_set_status(r, REC_FAIL, why);
        break;
      }
  }
  s = s ? s : rec_finalize(r);
  if (s) { rec_free(r); *err = s; return NULL; }
  return r;
}

static double mval(const vrecord *r, const char *name) {
  const rec_metric *m = rec_metric_find(r, name);
  return m ? m->value : NAN;
}

/* Per-turn lines of a session replay. */
static void print_turns(const vrecord *r) {
  printf("  sessions %.0f (%.0f complete), session p50 %.0f ms p90 %.0f ms, interactivity p90 %.1f tok/s/user"
         " (E2E-normalized %.1f)\n", mval(r, "sessions"), mval(r, "sessions_ok"), mval(r, "session_ms"),
         mval(r, "session_ms_p90"), mval(r, "interactivity_p90"), mval(r, "e2e_norm_interactivity_p90"));
  for (int k = 1; k <= 16; k++) {
    char a[32], b[32], c[40];
    snprintf(a, sizeof a, "turn%d_ttft_ms", k);
    snprintf(b, sizeof b, "turn%d_tpot_ms", k);
    snprintf(c, sizeof c, "turn%d_prompt_tokens", k);
    if (!rec_metric_find(r, a)) break;
    printf("  turn %2d: prompt %7.0f tok, TTFT p50 %8.1f ms, TPOT p50 %7.2f ms\n", k, mval(r, c), mval(r, a), mval(r, b));
  }
}

static void print_row(const vrecord *r, int conc) {
  printf("%5d %4.0f/%-4.0f %9.1f %8.1f %7.2f %8.1f %8.1f %8.1f %8.2f %8.2f %8.2f %8.2f %9.1f %9.1f", conc,
         mval(r, "requests_ok"), mval(r, "requests_ok") + mval(r, "requests_failed"), mval(r, "tokens_per_s"),
         mval(r, "tokens_per_s_per_user"), mval(r, "requests_per_s"), mval(r, "ttft_ms"), mval(r, "ttft_ms_p90"),
         mval(r, "ttft_ms_p99"), mval(r, "tpot_ms"), mval(r, "tpot_ms_p90"), mval(r, "itl_ms"), mval(r, "itl_ms_p99"),
         mval(r, "e2e_ms"), mval(r, "e2e_ms_p99"));
  const double gp = mval(r, "goodput_pct"), al = mval(r, "spec_mean_acceptance_length"), st = mval(r, "server_decode_step_ms");
  if (!isnan(gp)) printf("  goodput %.0f%%", gp);
  if (!isnan(al)) printf("  AL %.2f (rate %.2f)", al, mval(r, "spec_acceptance_rate"));
  if (!isnan(st)) printf("  decode step %.2f ms, overhead %.2f ms", st, mval(r, "serve_overhead_ms"));
  printf("\n");
}

/* One line per request of a level that was sent: concurrency, its index, when it was due and when
 * it was sent, both in s after the level's first send (arrival_s counts from the run's start, when
 * the first request of a --rate level is due). Error: the file cannot be written. */
static vstatus write_sends(FILE *f, const char *path, int cc, const served_req *r, int n) {
  double t0 = INFINITY;
  for (int i = 0; i < n; i++)
    if (r[i].t_send != 0) t0 = fmin(t0, r[i].t_send);
  for (int i = 0; i < n; i++)
    if (r[i].t_send != 0) fprintf(f, "%d\t%d\t%.9f\t%.9f\n", cc, i, r[i].arrival_s, r[i].t_send - t0);
  return fflush(f) || ferror(f) ? VERR("--send-times %s: cannot write", path) : V_OK;
}

/* The options of a sweep of a server, parsed and checked (srv_parse). */
typedef struct {
  const char *url, *model_opt, *conc_s, *rate_s, *slo_s, *trace_file, *json_file, *sess_s, *sess_out;
  const char *sends_file; /* --send-times: per-request intended and actual send times (NULL: none) */
  trace_format fmt;       /* --trace-format (AUTO: the file's shape decides) */
  bool block_given;       /* --trace-block given: it wins over an AgentX trace's block_size */
  long in_len, out_len, n_prompts, warmup, vocab_opt, trace_block;
  double timeout, trace_speed;
  uint64_t seed;
  slo g;          /* --slo parsed */
  long *conc;     /* [n_conc] --concurrency levels (malloc'ed) */
  int n_conc;
  double rate;    /* --rate in requests/s (INFINITY: all at once) */
  bool poisson;   /* --rate poisson:R */
  bool gen;       /* --sessions gen:...: sessions generated, their spec in sg */
  session_gen sg;
} srv_opts;

/* Parses argv into *o and checks everything that needs no server: values, the lists, the URL's
 * form, --sessions gen:'s spec. *help: --help given (nothing else parsed). Error: a usage error
 * naming the option; o holds nothing to free then. */
static vstatus srv_parse(int argc, char **argv, const char *url, srv_opts *o, served_conn *c, bool *help) {
  *o = (srv_opts){.model_opt = "", .conc_s = "1", .rate_s = "inf", .in_len = 32, .out_len = 32, .warmup = 1,
                  .trace_block = 512, .timeout = 600, .trace_speed = 1, .rate = INFINITY};
  const char *v;
  vstatus err = V_OK;
  *help = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { *help = true; return V_OK; }
    if (cli_opt(argc, argv, &i, "--server", &v, &err)) { if (v) o->url = v; }
    else if (cli_opt(argc, argv, &i, "--server-model", &v, &err)) { if (v) o->model_opt = v; }
    else if (cli_opt(argc, argv, &i, "--concurrency", &v, &err)) { if (v) o->conc_s = v; }
    else if (cli_opt(argc, argv, &i, "--rate", &v, &err)) { if (v) o->rate_s = v; }
    else if (cli_opt(argc, argv, &i, "--slo", &v, &err)) { if (v) o->slo_s = v; }
    else if (cli_opt(argc, argv, &i, "--trace", &v, &err)) { if (v) o->trace_file = v; }
    else if (cli_opt(argc, argv, &i, "--json", &v, &err)) { if (v) o->json_file = v; }
    else if (cli_opt(argc, argv, &i, "--sessions", &v, &err)) { if (v) o->sess_s = v; }
    else if (cli_opt(argc, argv, &i, "--sessions-out", &v, &err)) { if (v) o->sess_out = v; }
    else if (cli_opt(argc, argv, &i, "--send-times", &v, &err)) { if (v) o->sends_file = v; }
    else if (cli_opt(argc, argv, &i, "--input-len", &v, &err)) { if (v) err = cli_size("--input-len", v, &o->in_len); }
    else if (cli_opt(argc, argv, &i, "--output-len", &v, &err)) { if (v) err = cli_size("--output-len", v, &o->out_len); }
    else if (cli_opt(argc, argv, &i, "--num-prompts", &v, &err)) { if (v) err = cli_int("--num-prompts", v, 1, 1 << 20, &o->n_prompts); }
    else if (cli_opt(argc, argv, &i, "--warmup", &v, &err)) { if (v) err = cli_int("--warmup", v, 0, 1000, &o->warmup); }
    else if (cli_opt(argc, argv, &i, "--vocab", &v, &err)) { if (v) err = cli_int("--vocab", v, 1, 1 << 30, &o->vocab_opt); }
    else if (cli_opt(argc, argv, &i, "--trace-block", &v, &err)) {
      if (v) err = cli_int("--trace-block", v, 1, 1 << 20, &o->trace_block), o->block_given = true;
    }
    else if (cli_opt(argc, argv, &i, "--trace-format", &v, &err)) { if (v) err = trace_format_parse(v, &o->fmt); }
    else if (cli_opt(argc, argv, &i, "--trace-speed", &v, &err)) { if (v) err = cli_double("--trace-speed", v, &o->trace_speed); }
    else if (cli_opt(argc, argv, &i, "--timeout", &v, &err)) { if (v) err = cli_double("--timeout", v, &o->timeout); }
    else if (cli_opt(argc, argv, &i, "--seed", &v, &err)) { if (v) err = cli_u64("--seed", v, &o->seed); }
    else err = VERR("unknown option '%s' with --server (see vouch sweep --server URL --help)", a);
    if (err) return err;
  }
  if (!o->url) return VERR("--server URL is required");
  if (url) o->url = url; /* a side of --ref-server (the URL of a launched server) */
  if (o->in_len < 1 || o->out_len < 1 || o->in_len > (1 << 24) || o->out_len > (1 << 24))
    return VERR("--input-len and --output-len must be >= 1");
  if (!(o->trace_speed > 0) || !(o->timeout >= 0)) return VERR("--trace-speed must be > 0 and --timeout >= 0");
  if (o->trace_file && o->sess_s) return VERR("--trace and --sessions: give one of them");
  o->gen = o->sess_s && !strncmp(o->sess_s, "gen", 3);
  if (o->sess_out && !o->gen) return VERR("--sessions-out needs --sessions gen:...");
  if (o->fmt != TRACE_FMT_AUTO && !o->trace_file && !(o->sess_s && !o->gen))
    return VERR("--trace-format needs --trace FILE or --sessions FILE");
  if (o->slo_s) VTRY(parse_slo(o->slo_s, &o->g));
  /* the order of the checks as before srv_parse: the same message when several options are wrong */
  VTRY(cli_size_list("--concurrency", o->conc_s, &o->conc, &o->n_conc));
  if (strcmp(o->rate_s, "inf")) {
    o->poisson = !strncmp(o->rate_s, "poisson:", 8);
    const char *num = o->rate_s + (o->poisson ? 8 : 0);
    char *end;
    o->rate = strtod(num, &end);
    if (end == num || *end || !(o->rate > 0)) err = VERR("--rate '%s': expected R or poisson:R (requests/s > 0)", o->rate_s);
  }
  for (int i = 0; !err && i < o->n_conc; i++)
    if (o->conc[i] < 1 || o->conc[i] > 4096) err = VERR("--concurrency: %ld is outside [1, 4096]", o->conc[i]);
  if (!err) err = served_conn_init(c, o->url, o->timeout);
  if (!err && o->gen) err = session_gen_parse(o->sess_s, &o->sg);
  if (err) {
    free(o->conc);
    o->conc = NULL;
    return err;
  }
  return V_OK;
}

vstatus sweep_srv_check(int argc, char **argv, const char *url) {
  srv_opts o;
  served_conn c;
  bool help;
  VTRY(srv_parse(argc, argv, url, &o, &c, &help));
  free(o.conc);
  return V_OK;
}

vstatus sweep_server_check_args(int argc, char **argv) { return sweep_srv_check(argc, argv, NULL); }

/* A served sweep ready to run its levels (sweep_suite.h). */
struct sweep_srv {
  srv_opts o;          /* the options (o.conc owned) */
  served_conn c;       /* the server */
  char model[256];     /* the served model asked (--server-model) or the server's first */
  int vocab, max_len;  /* token ids drawn below vocab; the server's context (0: not given) */
  int block;           /* tokens per hash id: --trace-block, else an AgentX trace's block_size, else 512 */
  trace_format fmt;    /* the lines' format (AUTO: random prompts or generated sessions) */
  trace_line *tr;      /* [n_tr] the request lines of --trace / --sessions (owned; NULL: random prompts) */
  int n_tr;
  const char *replay;  /* the lines' source, NULL: random prompts */
  FILE *sends;         /* --send-times (NULL: none) */
  int *passes;         /* [o.n_conc] passes over each level so far (the next pass's salt, sweep_prompt.h) (owned) */
};

void sweep_srv_close(sweep_srv *w) {
  if (!w) return;
  if (w->sends) fclose(w->sends);
  trace_free(w->tr, w->n_tr);
  free(w->passes);
  free(w->o.conc);
  free(w);
}

vstatus sweep_srv_open(int argc, char **argv, const char *url, const vrec_sink *sink, sweep_srv **out, int *code) {
  *out = NULL;
  *code = EXIT_USAGE;
  sweep_srv *w = calloc(1, sizeof *w);
  if (!w) return VERR("out of memory");
  bool help;
  if (srv_parse(argc, argv, url, &w->o, &w->c, &help)) { free(w); return V_ERR; }
  if (help) { free(w); *code = EXIT_OK; return V_OK; }
  const srv_opts *o = &w->o;
  *code = EXIT_CHECK_FAILED;
  if (!(w->passes = calloc((size_t)o->n_conc, sizeof *w->passes))) {
    (void)VERR("out of memory");
    sweep_srv_close(w);
    return V_ERR;
  }
  w->sends = o->sends_file ? fopen(o->sends_file, "w") : NULL; /* before anything is sent */
  if (o->sends_file && !w->sends) {
    (void)VERR("--send-times %s: cannot open for writing", o->sends_file);
    sweep_srv_close(w);
    return V_ERR;
  }
  snprintf(w->model, sizeof w->model, "%s", o->model_opt);
  const char *sess_s = o->sess_s, *file = o->trace_file ? o->trace_file : o->gen ? NULL : sess_s;
  w->replay = o->trace_file ? o->trace_file : sess_s;
  w->block = (int)o->trace_block;
  w->fmt = o->fmt;
  int block = 0;
  if ((file && w->fmt == TRACE_FMT_AUTO && trace_format_detect(file, &w->fmt)) ||
      (o->trace_file && w->fmt == TRACE_FMT_AGENTX &&
       VERR("--trace %s: an AgentX trace holds multi-turn sessions: replay it with --sessions", file)) ||
      (sess_s && w->fmt == TRACE_FMT_AGENTX && agentx_read(sess_s, (int)o->n_prompts, &w->tr, &w->n_tr, &block))) {
    sweep_srv_close(w);
    return V_ERR;
  }
  if (block && !o->block_given) w->block = block;
  if (served_models(&w->c, w->model, sizeof w->model, &w->vocab, &w->max_len, NULL) ||
      served_conn_note(sink, &w->c, w->model, "server") || /* its identity in the manifest */
      (o->trace_file && trace_read(o->trace_file, (int)o->n_prompts, false, &w->tr, &w->n_tr)) ||
      (sess_s && w->fmt == TRACE_FMT_MOONCAKE && trace_read(sess_s, (int)o->n_prompts, true, &w->tr, &w->n_tr)) ||
      (o->gen && session_generate(&o->sg, o->seed, (int)o->trace_block, &w->tr, &w->n_tr)) ||
      (o->sess_out && trace_write(o->sess_out, w->tr, w->n_tr)) ||
      (sess_s && trace_sessions_fit(sess_s, w->tr, w->n_tr, w->max_len))) {
    sweep_srv_close(w);
    return V_ERR;
  }
  if (o->vocab_opt) w->vocab = (int)o->vocab_opt;
  if (!w->vocab) w->vocab = 1000;
  *out = w;
  *code = EXIT_OK;
  return V_OK;
}

int sweep_srv_levels(const sweep_srv *w) { return w->o.n_conc; }
int sweep_srv_concurrency(const sweep_srv *w, int li) { return (int)w->o.conc[li]; }
const char *sweep_srv_shown(const sweep_srv *w) { return w->c.shown; }
const char *sweep_srv_model(const sweep_srv *w) { return w->model; }
vstatus sweep_srv_note(const sweep_srv *w, const vrec_sink *sink) { return served_conn_note(sink, &w->c, w->model, "server"); }

void sweep_srv_print_intro(const sweep_srv *w) {
  const srv_opts *o = &w->o;
  printf("served sweep: %s, model %s, %s\n", w->c.shown, w->model,
         o->trace_file ? "Mooncake trace replay"
         : w->fmt == TRACE_FMT_AGENTX ? "multi-turn session replay of an AgentX trace"
         : o->sess_s ? "multi-turn session replay" : "random token-id prompts, ignore_eos");
  if (o->trace_file) printf("trace %s: %d requests, speed x%g, block %d tokens\n", o->trace_file, w->n_tr, o->trace_speed, w->block);
  else if (o->sess_s) {
    printf("sessions %s: %d sessions, %d turns, speed x%g, block %d tokens\n", o->sess_s, w->tr[w->n_tr - 1].session + 1,
           w->n_tr, o->trace_speed, w->block);
    int trees, joins;
    if (w->fmt == TRACE_FMT_AGENTX && trace_tree_counts(w->tr, w->n_tr, &trees, &joins) == V_OK) {
      int spawned = 0; /* subagent sessions (chains) sent after the parent turn that spawned them (trace_line.spawner) */
      for (int i = 0; i < w->n_tr; i++) spawned += w->tr[i].spawner > 0;
      printf("trees %d (--concurrency counts live trees), join turns %d (parent turns that wait for their subagents), "
             "spawned subagent sessions %d (each sent after the parent turn that spawned it)\n",
             trees, joins, spawned);
    }
  } else printf("input %ld, output %ld tokens, rate %s\n", o->in_len, o->out_len, o->rate_s);
}

void sweep_srv_print_columns(const char *lead) {
  printf("%s%5s %9s %9s %8s %7s %8s %8s %8s %8s %8s %8s %8s %9s %9s\n", lead, "conc", "ok/sent", "tok/s", "tok/s/u",
         "req/s", "TTFT p50", "p90", "p99", "TPOT p50", "p90", "ITL p50", "p99", "E2E p50", "p99");
}

vstatus sweep_srv_set_url(sweep_srv *w, const char *url) { return served_conn_init(&w->c, url, w->o.timeout); }

vstatus sweep_srv_level(sweep_srv *w, int li, bool warm, const vrec_sink *sink, const char *lead, vrecord **out, int *rc) {
  *out = NULL;
  const srv_opts *o = &w->o;
  const char *const rate_s = o->rate_s, *const trace_file = o->trace_file, *const sess_s = o->sess_s, *const replay = w->replay;
  const long in_len = o->in_len, out_len = o->out_len, n_prompts = o->n_prompts, trace_block = w->block;
  const double trace_speed = o->trace_speed, rate = o->rate;
  const uint64_t seed = o->seed;
  const bool poisson = o->poisson, gen = o->gen;
  const trace_line *tr = w->tr;
  const int n_tr = w->n_tr, vocab = w->vocab;
  const int cc = (int)o->conc[li];
  const int n = replay ? n_tr : (int)(n_prompts ? n_prompts : 4 * cc);
  const int nw = warm ? (int)o->warmup : 0;
  served_req *reqs = calloc((size_t)(n + nw), sizeof *reqs);
  int32_t **prompts = calloc((size_t)(n + nw), sizeof *prompts);
  if (!reqs || !prompts) { free(reqs); free(prompts); return VERR("out of memory"); }
  vstatus s = V_OK;
  /* this pass's own tokens (cache-busting, sweep_prompt.h): the level's pass count, kept per level */
  const sweep_prompt_key key = {.seed = seed, .level = li, .pass = w->passes[li]++, .block = (int)trace_block, .vocab = vocab};
  uint64_t rs = sweep_mix(seed, (uint64_t)li + 1);
  double t = 0;
  for (int i = 0; s == V_OK && i < n + nw; i++) {
    const trace_line *L = replay && i >= nw ? &tr[i - nw] : NULL;
    const int ilen = L ? L->in : (int)in_len, olen = L ? L->out : (int)out_len;
    prompts[i] = malloc((size_t)ilen * sizeof(int32_t));
    if (!prompts[i]) { s = VERR("out of memory"); break; }
    /* request i by its place among the level's measured requests (after --warmup of them, whether this
     * pass sent its warm-up or not: a relaunched side warms up again, the other side not), so the two
     * sides of an A/B draw the same prompts for the same measured request */
    sweep_prompt_fill(&key, L, i < nw ? i : (int)o->warmup + (i - nw), prompts[i], ilen);
    served_req *q = &reqs[i];
    q->prompt = prompts[i], q->n_prompt = ilen, q->max_tokens = olen;
    if (i < nw) continue;
    if (L && trace_file) q->arrival_s = (L->t_ms - tr[0].t_ms) / 1e3 / trace_speed;
    else if (isfinite(rate)) {
      q->arrival_s = t;
      const double u = (double)(rec_rng_next(&rs) >> 11) * 0x1.0p-53;
      t += poisson ? -log(1 - u) / rate : 1 / rate;
    }
  }
  served_metrics before, after;
  const served_conn *c = &w->c;
  const char *model = w->model;
  if (s == V_OK && nw) s = served_run(c, model, reqs, nw, 1, vinterrupted);
  for (int i = 0; s == V_OK && i < nw; i++)
    if (!reqs[i].ok) s = VERR("warm-up request failed: %s", reqs[i].error);
  if (s == V_OK) s = served_metrics_read(c, &before);
  replay_ctx rc_ = {0};
  /* AgentX: --concurrency counts live trees (replay_init holds the rest), the turns in flight are
   * whatever those trees send; elsewhere it caps the turns in flight */
  const bool trees = sess_s && w->fmt == TRACE_FMT_AGENTX;
  if (s == V_OK && sess_s) s = replay_init(&rc_, tr, prompts + nw, n, vocab, trace_speed, trees ? cc : 0, reqs + nw);
  if (s == V_OK)
    s = served_run_hooked(c, model, reqs + nw, n, trees ? n : cc, vinterrupted, sess_s ? replay_done : NULL, &rc_);
  if (s == V_OK) s = served_metrics_read(c, &after);
  if (s == V_OK && w->sends) s = write_sends(w->sends, o->sends_file, cc, reqs + nw, n);
  level_stats st = {0};
  if (s == V_OK) s = stats_compute(reqs + nw, n, &o->g, &st);
  if (s == V_OK) {
    char id[160], rate_txt[40];
    snprintf(rate_txt, sizeof rate_txt, "%s", isfinite(rate) ? rate_s : "inf");
    if (replay) {
      /* the source's last name: a file's, or a directory's (of AgentX trace files) without its trailing '/' */
      int end = (int)strlen(replay), at = 0;
      if (!gen) {
        while (end > 1 && replay[end - 1] == '/') end--;
        for (at = end; at > 0 && replay[at - 1] != '/'; at--) {}
      }
      snprintf(id, sizeof id, "%s/%.*s/c%d", trace_file ? "trace" : "sessions", end - at > 80 ? 80 : end - at, replay + at, cc);
    } else {
      snprintf(id, sizeof id, "served/c%d/in%ld/out%ld/rate-%.30s", cc, in_len, out_len, rate_txt);
    }
    level_info L = {.case_id = id, .conn = c, .model = model, .rate = rate_txt, .trace = replay, .concurrency = cc,
                    .input_len = (int)in_len, .output_len = (int)out_len, .n_prompts = n, .seed = seed, .g = &o->g,
                    .before = &before, .after = &after, .replay = sess_s ? &rc_ : NULL,
                    .format = w->fmt == TRACE_FMT_AGENTX ? "agentx" : NULL};
    vrecord *r = level_record(&L, &st, reqs + nw, n, &s);
    if (r) {
      *out = r;
      fputs(lead, stdout);
      print_row(r, cc);
      if (sess_s) print_turns(r);
      if (st.failed) {
        *rc = EXIT_CHECK_FAILED;
        int shown = 0;
        for (int i = 0; i < n && shown < 3; i++)
          if (reqs[nw + i].t_send != 0 && !reqs[nw + i].ok) printf("  request %d failed: %s\n", i, reqs[nw + i].error), shown++;
      }
      if (st.ok == 0) *rc = EXIT_CHECK_FAILED;
      s = rec_emit(sink, r, NULL);
    }
  }
  stats_free(&st);
  replay_free(&rc_);
  for (int i = 0; i < n + nw; i++) served_req_free(&reqs[i]), free(prompts[i]);
  free(reqs);
  free(prompts);
  return s;
}

int cmd_sweep_server(int argc, char **argv, const vrec_sink *sink) {
  sweep_srv *w;
  int rc;
  if (sweep_srv_open(argc, argv, NULL, sink, &w, &rc)) { cli_print_error("sweep"); return rc; }
  if (!w) { fputs(USAGE, stdout); return EXIT_OK; }
  vinterrupt_install();
  rc = EXIT_OK;
  const int n_conc = w->o.n_conc;
  vrecord **recs = calloc((size_t)n_conc, sizeof *recs);
  int n_recs = 0;
  vstatus s = recs ? V_OK : VERR("out of memory");
  sweep_srv_print_intro(w);
  sweep_srv_print_columns("");
  for (int li = 0; s == V_OK && li < n_conc && !vinterrupted(); li++) {
    vrecord *r = NULL;
    s = sweep_srv_level(w, li, li == 0, sink, "", &r, &rc);
    if (r) recs[n_recs++] = r;
  }
  if (s == V_OK && w->o.json_file) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "schema", "vouch-serve-sweep/1");
    cJSON_AddStringToObject(root, "tool", "vouch " VOUCH_VERSION " " VOUCH_GIT_COMMIT);
    cJSON_AddStringToObject(root, "server", w->c.shown);
    cJSON_AddStringToObject(root, "model", w->model);
    cJSON *arr = cJSON_AddArrayToObject(root, "records");
    for (int i = 0; i < n_recs; i++) cJSON_AddItemToArray(arr, rec_to_json(recs[i]));
    s = vfile_write_json(w->o.json_file, root, true);
    cJSON_Delete(root);
  }
  if (s != V_OK) { cli_print_error("sweep"); rc = EXIT_CHECK_FAILED; }
  if (vinterrupted() && rc == EXIT_OK) rc = EXIT_INTERRUPTED;
  for (int i = 0; i < n_recs; i++) rec_free(recs[i]);
  free(recs);
  sweep_srv_close(w);
  return rc;
}
