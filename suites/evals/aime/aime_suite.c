/* vouch eval aime --dataset FILE --server URL [--ref-server URL]: AIME problems asked of a real engine
 * as chat completions, R times each, graded as lm-eval's aime task grades (suites/evals/aime/aime_grade.h);
 * pass@1 per server with a bootstrap interval, and with --ref-server the candidate compared with its
 * reference build item by item (suites/evals/served_eval.h). A suite on the driver with no model
 * (suites/engine/suite.h), found by suites/evals/eval_cmd.c as a text eval. docs/evals.md says what is
 * asked, extracted, averaged and decided. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/interrupt.h"
#include "suites/engine/cli.h"
#include "suites/engine/record.h"
#include "suites/engine/suite.h"
#include "suites/engine/stats_tests.h"
#include "suites/evals/aime/aime_grade.h"
#include "suites/evals/aime/aime_rows.h"
#include "suites/evals/served_eval.h"
#include "suites/served/served_launch.h"
#include "suites/served/served_refusal.h"

/* The user message: the problem, a blank line, then this instruction (docs/evals.md). */
#define AIME_INSTRUCTION "Please reason step by step, and put your final answer within \\boxed{}."

static const char USAGE[] =
    "usage: vouch eval aime --dataset FILE.jsonl --server URL [--ref-server URL] [--server-model NAME]\n"
    "                       [--repeats R] [--temperature T] [--top-p P] [--max-tokens N] [--seed S]\n"
    "                       [--concurrency C] [--limit N] [--alpha A] [--stream] [--timeout S] [--json FILE]\n"
    SERVED_LAUNCH_HELP
    "  AIME problems (one JSON row per line: Problem, Question, problem or question; Answer or answer, an\n"
    "  integer) asked of an OpenAI-compatible server as chat completions, one user message: the problem,\n"
    "  a blank line, and \"" AIME_INSTRUCTION "\"\n"
    "  Each problem is asked R times (--temperature > 0: repeat r sends its own seed, derived from --seed,\n"
    "  the same on both servers). Graded as lm-eval's aime task: the last \\boxed{...} (else the text\n"
    "  between the first and last '$', else the whole answer), normalized as hendrycks_math's strip_string,\n"
    "  equal to the answer's decimal text. pass@1: the mean over items of each item's mean over repeats,\n"
    "  with a 95% bootstrap interval over items; one line per server: '<server>: score S over N items'.\n"
    "  Answers cut at --max-tokens (finish_reason length) are counted and shown as truncated.\n"
    "  --ref-server URL: the reference build of the same model (same id, root and max_model_len in\n"
    "  /v1/models, else refused before any request); exit 1 when the candidate (--server) is\n"
    "  significantly worse (one-sided paired sign-flip test on the per-item pass@1 differences, p <\n"
    "  --alpha) or truncates significantly more answers (the same test on the per-item truncated shares).\n"
    "  No --model: the servers hold the model. API key: $VOUCH_SERVER_API_KEY, else $OPENAI_API_KEY.\n"
    "  defaults: --repeats 1 --temperature 0 --max-tokens 32768 --concurrency 8 --alpha 0.05 --timeout 1800\n"
    "            --seed 1; top_p not sent; every row of the file (--limit N: the first N)\n";

enum { AI_OK = 0, AI_FAILED, AI_PAST_CONTEXT, AI_NOT_SENT };

/* One answer (an item's repeat) on one server. */
typedef struct {
  unsigned char state;     /* AI_OK (answered and graded), AI_FAILED (the request failed), AI_PAST_CONTEXT (the
                              server refused the prompt as longer than its context), AI_NOT_SENT (interrupted) */
  bool truncated;          /* finish_reason "length": cut at --max-tokens (graded as received) */
  bool boxed;              /* the answer came from a \boxed{} */
  bool correct;            /* graded right (AI_OK) */
} ai_answer;

typedef struct {
  /* options */
  seval_opts o;            /* --dataset, --server, --ref-server, ... (suites/evals/served_eval.h) */
  long repeats;            /* --repeats */
  double temperature, top_p; /* --temperature, --top-p (NaN: not sent) */
  /* state */
  aime_rows rows;          /* the dataset (check) */
  uint64_t seed;           /* the driver's --seed (prepare) */
  served_side sv[2];       /* [n_sv] sv[0] the candidate (--server), sv[1] the reference (prepare) */
  int n_sv;
  ai_answer *ans[2];       /* [n_sv][repeats * rows.n]: repeat r of item i at r * rows.n + i (run) */
  int n_failed[2];         /* requests that failed, per server */
  char first_error[2][480]; /* the first failure's message, per server */
  double wall_s[2];        /* the server's requests' wall time */
  seval_paired pr;         /* the candidate's paired findings (record) */
} ai_state;

static void ai_init(void *st) {
  ai_state *s = st;
  seval_opts_init(&s->o, 32768); /* lm-eval's max_gen_toks for aime */
  s->repeats = 1;
  s->top_p = NAN;
}

static bool ai_option(void *st, int argc, char **argv, int *i, vstatus *err) {
  ai_state *s = st;
  const char *v;
  if (seval_option(&s->o, argc, argv, i, err)) return true;
  if (cli_opt(argc, argv, i, "--repeats", &v, err)) { if (v) *err = cli_int("--repeats", v, 1, 1024, &s->repeats); }
  else if (cli_opt(argc, argv, i, "--temperature", &v, err)) { if (v) *err = cli_double("--temperature", v, &s->temperature); }
  else if (cli_opt(argc, argv, i, "--top-p", &v, err)) { if (v) *err = cli_double("--top-p", v, &s->top_p); }
  else return false;
  return true;
}

static vstatus ai_options_done(void *st) {
  ai_state *s = st;
  VTRY(seval_options_done(&s->o));
  if (!(s->temperature >= 0 && s->temperature <= 100)) return VERR("option --temperature: %g is not in [0, 100]", s->temperature);
  if (!isnan(s->top_p) && !(s->top_p > 0 && s->top_p <= 1)) return VERR("option --top-p: %g is not in (0, 1]", s->top_p);
  if ((long long)s->repeats * s->o.limit > (1LL << 30)) return VERR("option --repeats: too many requests");
  return V_OK;
}

/* The dataset is read and checked here, so a malformed row is a usage error before anything runs
 * (and `vouch run` finds it before its first step). */
static vstatus ai_check(void *st, const vsuite_ctx *x) {
  (void)x;
  ai_state *s = st;
  if (s->rows.n) return V_OK; /* read already */
  VTRY(aime_rows_read(s->o.dataset, s->o.limit, &s->rows));
  if ((long long)s->rows.n * s->repeats > (1LL << 30)) return VERR("%s: %d rows x %ld repeats: too many requests", s->o.dataset, s->rows.n, s->repeats);
  return V_OK;
}

static vstatus ai_prepare(void *st, const vsuite_ctx *x, bool *done) {
  (void)done;
  ai_state *s = st;
  VTRY(ai_check(st, x));
  s->seed = x->seed;
  VTRY(served_pair_open(x->sink, s->o.server, s->o.ref_server, s->o.server_model, s->o.timeout_s, s->sv, &s->n_sv));
  for (int k = 0; k < s->n_sv; k++) {
    s->ans[k] = calloc((size_t)s->rows.n * (size_t)s->repeats, sizeof *s->ans[k]);
    if (!s->ans[k]) return VERR("eval aime: out of memory for %d rows x %ld repeats", s->rows.n, s->repeats);
  }
  return V_OK;
}

/* Case c's server: the reference runs first (the candidate's records pair with it). */
static int case_server(const ai_state *s, int c) { return s->n_sv == 2 ? 1 - c : 0; }

static int ai_n_cases(const void *st, const vsuite_ctx *x) {
  (void)x;
  return ((const ai_state *)st)->n_sv;
}

/* Repeat r's sampling seed: a splitmix64 step of (--seed, r), below 2^53 (a JSON number). */
static uint64_t repeat_seed(uint64_t seed, long r) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (uint64_t)(r + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (z ^ (z >> 31)) & ((1ull << 53) - 1);
}

typedef struct {
  ai_state *s;
  int k;                   /* the server */
} body_ctx;

/* The body hook: call q is repeat q / n of item q % n. */
static vstatus make_body(void *vctx, served_call *calls, int q) {
  body_ctx *b = vctx;
  const ai_state *s = b->s;
  const int n = s->rows.n, i = q % n, r = q / n;
  const char *p = s->rows.rows[i].problem;
  char *content = malloc(strlen(p) + sizeof AIME_INSTRUCTION + 2);
  cJSON *msgs = cJSON_CreateArray(), *m = cJSON_CreateObject();
  vstatus st = V_OK;
  if (!content || !msgs || !m) st = VERR("eval aime: out of memory");
  if (!st) {
    sprintf(content, "%s\n\n%s", p, AIME_INSTRUCTION);
    cJSON_AddItemToArray(msgs, m), m = NULL;
    cJSON *last = cJSON_GetArrayItem(msgs, 0);
    if (!cJSON_AddStringToObject(last, "role", "user") || !cJSON_AddStringToObject(last, "content", content))
      st = VERR("eval aime: out of memory");
  }
  if (!st) {
    served_gen g = served_gen_default();
    g.model = s->sv[b->k].id.id;
    g.messages = msgs;
    g.max_tokens = (int)s->o.max_tokens;
    g.temperature = s->temperature;
    if (!isnan(s->top_p)) g.top_p = s->top_p;
    if (s->temperature > 0) g.has_seed = true, g.seed = repeat_seed(s->seed, r);
    g.stream = s->o.stream;
    st = served_build_chat(&g, &calls[q].body);
  }
  cJSON_Delete(m);
  cJSON_Delete(msgs);
  free(content);
  return st;
}

static vstatus ai_run(void *st, const vsuite_ctx *x, int c) {
  (void)x;
  ai_state *s = st;
  const int k = case_server(s, c), n = s->rows.n, nq = n * (int)s->repeats;
  served_call *calls = calloc((size_t)nq, sizeof *calls);
  if (!calls) return VERR("eval aime: out of memory for %d requests", nq);
  for (int q = 0; q < nq; q++) calls[q] = (served_call){.path = SERVED_CHAT, .stream = s->o.stream};
  body_ctx b = {s, k};
  fprintf(stderr, "eval aime: %d rows x %ld repeats to %s (%s), %ld in flight\n", n, s->repeats, s->sv[k].conn.shown,
          s->sv[k].role, s->o.concurrency);
  const double t0 = vclock_now();
  vstatus e = served_calls_run(&s->sv[k].conn, calls, nq, (int)s->o.concurrency, vinterrupted, make_body, &b);
  s->wall_s[k] = vclock_now() - t0;
  for (int q = 0; q < nq && !e; q++) {
    ai_answer *a = &s->ans[k][q];
    const served_call *call = &calls[q];
    const aime_row *row = &s->rows.rows[q % n];
    char why[480] = "";
    if (!call->sent && !call->ok && vinterrupted()) { a->state = AI_NOT_SENT; continue; }
    if (!call->ok) {
      if (served_refused_context(call)) { a->state = AI_PAST_CONTEXT; continue; }
      snprintf(why, sizeof why, "%s", call->error);
    } else {
      const served_choice *ch = served_reply_choice(&call->reply, 0);
      if (!ch) ch = &call->reply.choices[0];
      aime_grade g;
      if (aime_grade_response(ch->text, ch->text_len, row->answer, &g)) { e = V_ERR; break; }
      a->correct = g.correct;
      a->boxed = g.boxed;
      a->truncated = !strcmp(ch->finish_reason, "length");
    }
    if (why[0]) {
      a->state = AI_FAILED;
      if (s->n_failed[k]++ == 0)
        snprintf(s->first_error[k], sizeof s->first_error[k], "line %ld, repeat %d: %.400s", row->line, q / n, why);
    }
  }
  served_calls_free(calls, nq);
  free(calls);
  if (s->n_failed[k])
    fprintf(stderr, "vouch eval aime: error: server %s: %d of %d requests failed (not retried), the first (%s)\n",
            s->sv[k].conn.shown, s->n_failed[k], nq, s->first_error[k]);
  return e;
}

/* Server k's item i over repeats [r0, r1): *score the mean correct and *trunc the truncated share over
 * the answered repeats; returns how many were answered. */
static int item_mean(const ai_state *s, int k, int i, int r0, int r1, double *score, double *trunc) {
  int m = 0, c = 0, t = 0;
  for (int r = r0; r < r1; r++) {
    const ai_answer *a = &s->ans[k][(size_t)r * (size_t)s->rows.n + (size_t)i];
    if (a->state != AI_OK) continue;
    m++, c += a->correct, t += a->truncated;
  }
  *score = m ? (double)c / m : NAN;
  *trunc = m ? (double)t / m : NAN;
  return m;
}

/* What server k did over repeats [r0, r1): the item means of the items with an answer into v (room for
 * rows.n; returns how many), and the answers' counts. */
typedef struct {
  int truncated, unboxed, past, failed, answered;
} ai_counts;

static int server_items(const ai_state *s, int k, int r0, int r1, double *v, ai_counts *cnt) {
  memset(cnt, 0, sizeof *cnt);
  int m = 0;
  for (int i = 0; i < s->rows.n; i++) {
    for (int r = r0; r < r1; r++) {
      const ai_answer *a = &s->ans[k][(size_t)r * (size_t)s->rows.n + (size_t)i];
      cnt->past += a->state == AI_PAST_CONTEXT, cnt->failed += a->state == AI_FAILED;
      if (a->state != AI_OK) continue;
      cnt->answered++, cnt->truncated += a->truncated, cnt->unboxed += !a->boxed;
    }
    double sc, tr;
    if (item_mean(s, k, i, r0, r1, &sc, &tr)) v[m++] = sc;
  }
  return m;
}

/* The 95% percentile bootstrap interval of the mean of v[m] over items (2000 resamples, seeded). */
static void bootstrap_ci(const double *v, int m, uint64_t seed, double *lo, double *hi) {
  enum { B = 2000 };
  *lo = *hi = NAN;
  double *means = m ? malloc(B * sizeof *means) : NULL;
  if (!means) return;
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  for (int b = 0; b < B; b++) {
    double sum = 0;
    for (int j = 0; j < m; j++) {
      z = z * 6364136223846793005ull + 1442695040888963407ull;
      sum += v[(z >> 33) % (uint64_t)m];
    }
    means[b] = sum / m;
  }
  *lo = stat_percentile(means, B, 2.5);
  *hi = stat_percentile(means, B, 97.5);
  free(means);
}

static double mean_of(const double *v, int m) {
  double sum = 0;
  for (int i = 0; i < m; i++) sum += v[i];
  return m ? sum / m : NAN;
}

/* The paired findings of the candidate against the reference over the items both answered: per-item
 * pass@1 differences and truncated shares, tested one-sided (seval_worse_p). */
static void pair_findings(ai_state *s, uint64_t seed) {
  const int n = s->rows.n, R = (int)s->repeats;
  double *d = malloc((size_t)n * sizeof *d), *t = malloc((size_t)n * sizeof *t);
  int m = 0;
  s->pr.trunc_c = s->pr.trunc_r = 0;
  s->pr.lost_context = false;
  for (int i = 0; d && t && i < n; i++) {
    for (int r = 0; r < R; r++) {
      const size_t q = (size_t)r * (size_t)n + (size_t)i;
      if (s->ans[0][q].state == AI_PAST_CONTEXT && s->ans[1][q].state == AI_OK) s->pr.lost_context = true;
      s->pr.trunc_c += s->ans[0][q].state == AI_OK && s->ans[0][q].truncated;
      s->pr.trunc_r += s->ans[1][q].state == AI_OK && s->ans[1][q].truncated;
    }
    double sc, tc, sr, tr;
    if (!item_mean(s, 0, i, 0, R, &sc, &tc) || !item_mean(s, 1, i, 0, R, &sr, &tr)) continue;
    d[m] = sr - sc;
    t[m] = tc - tr;
    m++;
  }
  const double none = 0;
  seval_paired_decide(&s->pr, d && t ? d : &none, d && t ? t : &none, d && t ? m : 0, seed, s->o.alpha);
  free(d);
  free(t);
}

/* The params every record of server k carries. */
static void add_params(const ai_state *s, int k, vrecord *r) {
  rec_param_str(r, "dataset", s->o.dataset);
  rec_param_int(r, "rows", s->rows.n);
  rec_param_int(r, "repeats", s->repeats);
  rec_param_str(r, "server", s->sv[k].conn.shown);
  rec_param_str(r, "server_model", s->sv[k].id.id);
  rec_param_str(r, "role", s->sv[k].role);
  rec_param_int(r, "max_tokens", s->o.max_tokens);
  rec_param_num(r, "temperature", s->temperature);
  if (!isnan(s->top_p)) rec_param_num(r, "top_p", s->top_p);
  if (s->n_sv == 2) rec_param_str(r, "reference", s->sv[1].path);
}

static vstatus ai_plan(void *st, const vsuite_ctx *x, int c, veng *recs) {
  (void)x;
  ai_state *s = st;
  const int k = case_server(s, c);
  vrecord *r = eng_new(recs, "evals", "aime_all", s->sv[k].path);
  if (!r) return V_ERR;
  add_params(s, k, r);
  return V_OK;
}

/* The record of server k over repeats [r0, r1) (all: "aime_all" with the paired findings). */
static vstatus add_record(ai_state *s, const vsuite_ctx *x, int k, int r0, int r1, double *v, veng *recs) {
  const bool all = r1 - r0 == s->repeats, cand = all && s->n_sv == 2 && k == 0;
  char id[48];
  if (all) snprintf(id, sizeof id, "aime_all");
  else snprintf(id, sizeof id, "aime_repeat%d", r0);
  vrecord *r = eng_new(recs, "evals", id, s->sv[k].path);
  if (!r) return V_ERR;
  add_params(s, k, r);
  if (!all) rec_param_int(r, "repeat", r0);
  ai_counts cnt;
  const int m = server_items(s, k, r0, r1, v, &cnt);
  double lo, hi;
  bootstrap_ci(v, m, x->seed + (uint64_t)k, &lo, &hi);
  rec_metric_samples(r, "pass_at_1", "", RD_MEAN, RB_HIGHER, v, m, 0);
  rec_metric_value(r, "pass_at_1_lo95", "", RB_NONE, lo);
  rec_metric_value(r, "pass_at_1_hi95", "", RB_NONE, hi);
  rec_metric_value(r, "answers", "", RB_NONE, cnt.answered);
  rec_metric_value(r, "truncated", "", RB_LOWER, cnt.truncated);
  rec_metric_value(r, "unboxed", "", RB_LOWER, cnt.unboxed);
  rec_metric_value(r, "past_context", "", RB_LOWER, cnt.past);
  rec_metric_value(r, "failed", "", RB_LOWER, cnt.failed);
  if (all) rec_metric_value(r, "wall_s", "s", RB_LOWER, s->wall_s[k]);
  if (cand) {
    const int mr = server_items(s, 1, r0, r1, v, &cnt);
    rec_metric_value(r, "reference_pass_at_1", "", RB_HIGHER, mean_of(v, mr));
    seval_paired_metrics(&s->pr, r);
    seval_paired_checks(&s->pr, s->o.alpha, r);
    server_items(s, k, r0, r1, v, &cnt); /* the counts below are the candidate's */
  }
  if (cnt.failed) {
    char why[256];
    snprintf(why, sizeof why, "%d of %d requests failed (not retried; the first: %.170s)", cnt.failed,
             s->rows.n * (r1 - r0), s->first_error[k]);
    rec_set_status(r, REC_ERROR, why);
  } else if (!m && cnt.past) {
    rec_set_status(r, REC_NOT_SUPPORTED, "every prompt is longer than the server's context");
  }
  rec_finalize(r);
  return V_OK;
}

static vstatus ai_record(void *st, const vsuite_ctx *x, int c, veng *recs) {
  ai_state *s = st;
  const int k = case_server(s, c);
  if (s->n_sv == 2 && k == 0) pair_findings(s, x->seed);
  double *v = malloc((size_t)s->rows.n * sizeof *v);
  if (!v) return VERR("eval aime: out of memory");
  vstatus e = V_OK;
  for (int r = 0; r < s->repeats && s->repeats > 1 && !e; r++) e = add_record(s, x, k, r, r + 1, v, recs);
  if (!e) e = add_record(s, x, k, 0, (int)s->repeats, v, recs);
  free(v);
  return e;
}

static void ai_print(const void *st, const vsuite_ctx *x, const veng *recs) {
  (void)recs;
  const ai_state *s = st;
  printf("eval aime --dataset %s: %d rows x %ld repeats; chat completions at temperature %g", s->o.dataset, s->rows.n,
         s->repeats, s->temperature);
  if (!isnan(s->top_p)) printf(", top_p %g", s->top_p);
  printf("%s, max_tokens %ld, %ld in flight%s; wall %.1f s\n", s->temperature > 0 ? " (a seed per repeat)" : "",
         s->o.max_tokens, s->o.concurrency, s->o.stream ? ", streamed" : "", x->wall_s);
  for (int k = 0; k < s->n_sv; k++) served_side_print(&s->sv[k]);
  double *v = malloc((size_t)s->rows.n * sizeof *v);
  for (int k = 0; v && k < s->n_sv; k++) {
    ai_counts cnt;
    const int m = server_items(s, k, 0, (int)s->repeats, v, &cnt);
    double lo, hi;
    bootstrap_ci(v, m, x->seed + (uint64_t)k, &lo, &hi);
    printf("\n%s: score %.4f over %d items (pass@1, 95%% interval [%.4f, %.4f]; %d answers: %d truncated at max_tokens, "
           "%d without \\boxed, %d past the server's context, %d failed); %.1f s\n",
           s->sv[k].conn.shown, mean_of(v, m), m, lo, hi, cnt.answered, cnt.truncated, cnt.unboxed, cnt.past,
           cnt.failed, s->wall_s[k]);
    if (cnt.failed) printf("  %d requests failed, the first (%s)\n", cnt.failed, s->first_error[k]);
  }
  free(v);
  if (s->n_sv < 2) return;
  seval_paired_print(&s->pr, s->o.alpha, "items", "pass@1", " answers");
  seval_paired_print_fails(&s->pr, s->sv[0].path, s->o.alpha, "pass@1");
}

static void ai_free(void *st) {
  ai_state *s = st;
  aime_rows_free(&s->rows);
  served_pair_close(s->sv, s->n_sv);
  for (int k = 0; k < 2; k++) free(s->ans[k]);
}

const vsuite vsuite_aime = {
    .name = "eval aime",
    .usage = USAGE,
    .no_model = true,
    .state_size = sizeof(ai_state),
    .init = ai_init,
    .option = ai_option,
    .options_done = ai_options_done,
    .check = ai_check,
    .prepare = ai_prepare,
    .n_cases = ai_n_cases,
    .run = ai_run,
    .record = ai_record,
    .plan = ai_plan,
    .print = ai_print,
    .free = ai_free,
    .case_noun = "servers",
};
