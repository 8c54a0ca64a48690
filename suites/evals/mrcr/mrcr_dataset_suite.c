/* vouch eval mrcr --dataset FILE --server URL [--ref-server URL]: OpenAI's public MRCR rows asked of a
 * real engine as chat completions at temperature 0 and graded as the public grader does
 * (suites/evals/mrcr/grade.h); with --ref-server the candidate is compared with its reference build
 * item by item (suites/evals/served_eval.h). A suite on the driver with no model (suites/engine/suite.h);
 * suites/evals/eval_cmd.c runs it for `vouch eval mrcr` when --dataset is given. docs/evals.md says
 * what is binned, averaged and decided. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/interrupt.h"
#include "suites/engine/cli.h"
#include "suites/engine/record.h"
#include "suites/engine/stats_tests.h"
#include "suites/evals/evals_suite.h"
#include "suites/evals/mrcr/grade.h"
#include "suites/evals/mrcr/mrcr_rows.h"
#include "suites/evals/served_eval.h"
#include "suites/served/served_launch.h"
#include "suites/served/served_refusal.h"

static const char USAGE[] =
    "usage: vouch eval mrcr --dataset FILE.jsonl --server URL [--ref-server URL] [--server-model NAME]\n"
    "                       [--max-tokens N] [--concurrency C] [--limit N] [--bins 8k,16k,..,1m] [--alpha A]\n"
    "                       [--stream] [--timeout S] [--seed S] [--json FILE]\n" SERVED_LAUNCH_HELP
    "  OpenAI's MRCR rows (openai/mrcr, one JSON row per line: prompt, answer, random_string_to_prepend,\n"
    "  n_needles, desired_msg_index, total_messages, n_chars) asked of an OpenAI-compatible server as chat\n"
    "  completions at temperature 0, graded as the public grader: 0 unless the response starts with the\n"
    "  random string, else difflib's SequenceMatcher ratio of the rest with the answer. Scores per\n"
    "  prompt-token bin (usage.prompt_tokens; bin k holds (edge k-1, edge k], the first (0, 8k], one more\n"
    "  bin past the last edge) x needle count, an AUC over log2 of the bins, and one line per server:\n"
    "  '<server>: score S over N items'. Answers cut at --max-tokens (finish_reason length) are counted.\n"
    "  --ref-server URL: the reference build of the same model (same id, root and max_model_len in\n"
    "  /v1/models, else refused before any request); exit 1 when the candidate (--server) is\n"
    "  significantly worse (one-sided paired sign-flip test on the per-item score differences, p <\n"
    "  --alpha) or truncates significantly more answers (the same test on the truncation marks).\n"
    "  No --model: the servers hold the model. API key: $VOUCH_SERVER_API_KEY, else $OPENAI_API_KEY.\n"
    "  defaults: --max-tokens 4096 --concurrency 8 --alpha 0.05 --timeout 1800 --bins\n"
    "            8k,16k,32k,64k,128k,256k,512k,1m; every row of the file (--limit N: the first N)\n";

enum { MD_OK = 0, MD_FAILED, MD_PAST_CONTEXT, MD_NOT_SENT };

/* One row's outcome on one server. */
typedef struct {
  unsigned char state;     /* MD_OK (answered and graded), MD_FAILED (request or answer failed), MD_PAST_CONTEXT
                              (the server refused the prompt as longer than its context), MD_NOT_SENT (interrupted) */
  bool truncated;          /* finish_reason "length": cut at --max-tokens */
  double score;            /* the public grade in [0, 1] (MD_OK) */
  long prompt_tokens;      /* usage.prompt_tokens (MD_OK) */
} md_item;

typedef struct {
  /* options */
  seval_opts o;            /* --dataset, --server, --ref-server, ... (suites/evals/served_eval.h) */
  const char *bins_s;      /* --bins */
  long *edges;             /* [n_edges] bin upper edges, ascending (options_done) */
  int n_edges;
  /* state */
  mrcr_rows rows;          /* the dataset (check) */
  served_side sv[2];        /* [n_sv] sv[0] the candidate (--server), sv[1] the reference (prepare) */
  int n_sv;
  md_item *items[2];       /* [n_sv][rows.n] each server's outcomes (run) */
  int n_failed[2];         /* requests that failed, per server */
  char first_error[2][480]; /* the first failure's message, per server */
  double wall_s[2];        /* the server's requests' wall time */
  int needles[16];         /* the distinct needle counts, ascending (check) */
  int n_needles;
  seval_paired pr;          /* the candidate's paired findings (record) */
  int tok_mismatch;         /* paired rows whose usage.prompt_tokens differ */
} md_state;

static void md_init(void *st) {
  md_state *s = st;
  seval_opts_init(&s->o, 4096);
  s->bins_s = "8k,16k,32k,64k,128k,256k,512k,1m";
}

static bool md_option(void *st, int argc, char **argv, int *i, vstatus *err) {
  md_state *s = st;
  const char *v;
  if (seval_option(&s->o, argc, argv, i, err)) return true;
  if (cli_opt(argc, argv, i, "--bins", &v, err)) { if (v) s->bins_s = v; }
  else return false;
  return true;
}

static vstatus md_options_done(void *st) {
  md_state *s = st;
  VTRY(seval_options_done(&s->o));
  VTRY(cli_size_list("--bins", s->bins_s, &s->edges, &s->n_edges));
  for (int i = 0; i < s->n_edges; i++)
    if (s->edges[i] < 1 || (i && s->edges[i] <= s->edges[i - 1]))
      return VERR("option --bins: the edges must be ascending token counts >= 1");
  return V_OK;
}

/* The dataset is read and checked here, so a malformed row is a usage error before anything runs
 * (and `vouch run` finds it before its first step). */
static vstatus md_check(void *st, const vsuite_ctx *x) {
  (void)x;
  md_state *s = st;
  if (s->rows.n) return V_OK; /* read already */
  VTRY(mrcr_rows_read(s->o.dataset, s->o.limit, &s->rows));
  s->n_needles = 0;
  for (int i = 0; i < s->rows.n; i++) {
    const int nn = s->rows.rows[i].n_needles;
    int k = 0;
    while (k < s->n_needles && s->needles[k] < nn) k++;
    if (k < s->n_needles && s->needles[k] == nn) continue;
    if (s->n_needles == 16) return VERR("%s: more than 16 distinct n_needles values", s->o.dataset);
    memmove(s->needles + k + 1, s->needles + k, (size_t)(s->n_needles - k) * sizeof *s->needles);
    s->needles[k] = nn;
    s->n_needles++;
  }
  return V_OK;
}

static vstatus md_prepare(void *st, const vsuite_ctx *x, bool *done) {
  (void)done;
  md_state *s = st;
  VTRY(md_check(st, x));
  VTRY(served_pair_open(x->sink, s->o.server, s->o.ref_server, s->o.server_model, s->o.timeout_s, s->sv, &s->n_sv));
  for (int k = 0; k < s->n_sv; k++) {
    s->items[k] = calloc((size_t)s->rows.n, sizeof *s->items[k]);
    if (!s->items[k]) return VERR("eval mrcr: out of memory for %d rows", s->rows.n);
  }
  return V_OK;
}

/* Case c's server: the reference runs first (the candidate's records pair with it). */
static int case_server(const md_state *s, int c) { return s->n_sv == 2 ? 1 - c : 0; }

static int md_n_cases(const void *st, const vsuite_ctx *x) {
  (void)x;
  return ((const md_state *)st)->n_sv;
}

/* The body hook: row i's messages read again from the file, as a chat request. */
typedef struct {
  md_state *s;
  int k;                   /* the server */
} body_ctx;

static vstatus make_body(void *vctx, served_call *calls, int i) {
  body_ctx *b = vctx;
  cJSON *msgs = NULL;
  VTRY(mrcr_rows_messages(&b->s->rows, i, &msgs));
  served_gen g = served_gen_default();
  g.model = b->s->sv[b->k].id.id;
  g.messages = msgs;
  g.max_tokens = (int)b->s->o.max_tokens;
  g.temperature = 0;
  g.stream = b->s->o.stream;
  vstatus st = served_build_chat(&g, &calls[i].body);
  cJSON_Delete(msgs);
  return st;
}

static vstatus md_run(void *st, const vsuite_ctx *x, int c) {
  (void)x;
  md_state *s = st;
  const int k = case_server(s, c), n = s->rows.n;
  served_call *calls = calloc((size_t)n, sizeof *calls);
  if (!calls) return VERR("eval mrcr: out of memory for %d requests", n);
  for (int i = 0; i < n; i++) calls[i] = (served_call){.path = SERVED_CHAT, .stream = s->o.stream};
  body_ctx b = {s, k};
  fprintf(stderr, "eval mrcr: %d rows to %s (%s), %ld in flight\n", n, s->sv[k].conn.shown, s->sv[k].role, s->o.concurrency);
  const double t0 = vclock_now();
  vstatus e = served_calls_run(&s->sv[k].conn, calls, n, (int)s->o.concurrency, vinterrupted, make_body, &b);
  s->wall_s[k] = vclock_now() - t0;
  for (int i = 0; i < n && !e; i++) {
    md_item *it = &s->items[k][i];
    const served_call *q = &calls[i];
    const mrcr_row *row = &s->rows.rows[i];
    char why[480] = "";
    if (!q->sent && !q->ok && vinterrupted()) { it->state = MD_NOT_SENT; continue; }
    if (!q->ok) {
      if (served_refused_context(q)) { it->state = MD_PAST_CONTEXT; continue; }
      snprintf(why, sizeof why, "%s", q->error);
    } else {
      const served_choice *ch = served_reply_choice(&q->reply, 0);
      if (!ch) ch = &q->reply.choices[0];
      if (q->reply.prompt_tokens < 0)
        snprintf(why, sizeof why, "%s%s: usage.prompt_tokens missing: the item cannot be binned", s->sv[k].conn.shown,
                 SERVED_CHAT);
      else if (mrcr_grade(ch->text, row->answer, row->prefix, &it->score))
        snprintf(why, sizeof why, "%s%s: the answer cannot be graded: %s", s->sv[k].conn.shown, SERVED_CHAT, verr_msg());
      it->truncated = !strcmp(ch->finish_reason, "length");
      it->prompt_tokens = q->reply.prompt_tokens;
    }
    if (why[0]) {
      it->state = MD_FAILED;
      if (s->n_failed[k]++ == 0) snprintf(s->first_error[k], sizeof s->first_error[k], "line %ld: %.400s", row->line, why);
    }
  }
  served_calls_free(calls, n);
  free(calls);
  if (s->n_failed[k])
    fprintf(stderr, "vouch eval mrcr: error: server %s: %d of %d requests failed (not retried), the first (%s)\n",
            s->sv[k].conn.shown, s->n_failed[k], n, s->first_error[k]);
  return e;
}

/* The prompt tokens row i is binned by: the reference's count where it answered, else the server's own. */
static long item_tokens(const md_state *s, int i) {
  if (s->n_sv == 2 && s->items[1][i].state == MD_OK) return s->items[1][i].prompt_tokens;
  return s->items[0][i].state == MD_OK ? s->items[0][i].prompt_tokens : -1;
}

/* The bin of a token count: k for (edge k-1, edge k] (the first from 0), n_edges past the last edge. */
static int bin_of(const md_state *s, long tokens) {
  int b = 0;
  while (b < s->n_edges && tokens > s->edges[b]) b++;
  return b;
}

/* A bin's label: its upper edge ("8k", "1m"), or ">1m" past the last. */
static void bin_label(const md_state *s, int b, char *out, size_t n) {
  const long v = b < s->n_edges ? s->edges[b] : s->edges[s->n_edges - 1];
  const char *gt = b < s->n_edges ? "" : ">";
  if (v % (1024 * 1024) == 0) snprintf(out, n, "%s%ldm", gt, v / (1024 * 1024));
  else if (v % 1024 == 0) snprintf(out, n, "%s%ldk", gt, v / 1024);
  else snprintf(out, n, "%s%ld", gt, v);
}

/* The x of bin b in the AUC: log2 of its upper edge (twice the last edge for the open bin). */
static double bin_x(const md_state *s, int b) {
  return log2(b < s->n_edges ? (double)s->edges[b] : 2.0 * (double)s->edges[s->n_edges - 1]);
}

/* Row i counts in the cell (bin b, needles nn; b < 0 or nn < 0: any). */
static bool in_cell(const md_state *s, int i, int b, int nn) {
  const long t = item_tokens(s, i);
  if (b >= 0 && (t < 0 || bin_of(s, t) != b)) return false;
  return nn < 0 || s->rows.rows[i].n_needles == nn;
}

/* Server k's mean score over the cell's answered rows (NaN over none); *cnt gets how many. */
static double cell_score(const md_state *s, int k, int b, int nn, int *cnt) {
  double sum = 0;
  int c = 0;
  for (int i = 0; i < s->rows.n; i++)
    if (in_cell(s, i, b, nn) && s->items[k][i].state == MD_OK) sum += s->items[k][i].score, c++;
  if (cnt) *cnt = c;
  return c ? sum / c : NAN;
}

/* Server k's AUC over the bins for needle count nn (< 0: all): the trapezoid area of the bins' mean
 * scores over log2 of their upper edges, divided by the x range (one bin: its score); bins without a
 * scored row are left out. NaN when none has one. */
static double auc(const md_state *s, int k, int nn) {
  double xs[64], ys[64];
  int m = 0;
  for (int b = 0; b <= s->n_edges && m < 64; b++) {
    int c;
    const double v = cell_score(s, k, b, nn, &c);
    if (c) xs[m] = bin_x(s, b), ys[m++] = v;
  }
  return m ? stat_auc_normalized(xs, ys, m) : NAN;
}

/* The paired findings of the candidate against the reference (both answered): score differences and
 * truncation marks, tested one-sided (seval_worse_p). */
static void pair_findings(md_state *s, uint64_t seed) {
  const int n = s->rows.n;
  double *d = malloc((size_t)(n > 0 ? n : 1) * sizeof *d), *t = malloc((size_t)(n > 0 ? n : 1) * sizeof *t);
  int m = 0;
  s->pr.trunc_c = s->pr.trunc_r = s->tok_mismatch = 0;
  s->pr.lost_context = false;
  for (int i = 0; d && t && i < n; i++) {
    const md_item *c = &s->items[0][i], *r = &s->items[1][i];
    if (c->state == MD_PAST_CONTEXT && r->state == MD_OK) s->pr.lost_context = true;
    if (c->state != MD_OK || r->state != MD_OK) continue;
    d[m] = r->score - c->score;
    t[m] = (double)c->truncated - (double)r->truncated;
    s->pr.trunc_c += c->truncated, s->pr.trunc_r += r->truncated;
    s->tok_mismatch += c->prompt_tokens != r->prompt_tokens;
    m++;
  }
  const double none = 0;
  seval_paired_decide(&s->pr, d && t ? d : &none, d && t ? t : &none, d && t ? m : 0, seed, s->o.alpha);
  free(d);
  free(t);
}

/* The params every record of server k carries. */
static void add_params(const md_state *s, int k, vrecord *r) {
  rec_param_str(r, "dataset", s->o.dataset);
  rec_param_int(r, "rows", s->rows.n);
  rec_param_str(r, "server", s->sv[k].conn.shown);
  rec_param_str(r, "server_model", s->sv[k].id.id);
  rec_param_str(r, "role", s->sv[k].role);
  rec_param_int(r, "max_tokens", s->o.max_tokens);
  rec_param_num(r, "temperature", 0);
  if (s->n_sv == 2) rec_param_str(r, "reference", s->sv[1].path);
}

static vstatus md_plan(void *st, const vsuite_ctx *x, int c, veng *recs) {
  (void)x;
  md_state *s = st;
  const int k = case_server(s, c);
  vrecord *r = eng_new(recs, "evals", "mrcr_dataset_all", s->sv[k].path);
  if (!r) return V_ERR;
  add_params(s, k, r);
  return V_OK;
}

/* Scores of server k over the cell's answered rows into v (room for rows.n); returns how many. */
static int cell_samples(const md_state *s, int k, int b, int nn, double *v, int *trunc, int *failed, int *past) {
  int c = 0;
  *trunc = *failed = *past = 0;
  for (int i = 0; i < s->rows.n; i++) {
    const md_item *it = &s->items[k][i];
    if (it->state == MD_FAILED && (b < 0 || in_cell(s, i, b, nn))) (*failed)++;
    if (!in_cell(s, i, b, nn)) continue;
    if (it->state == MD_PAST_CONTEXT) (*past)++;
    if (it->state != MD_OK) continue;
    v[c++] = it->score;
    *trunc += it->truncated;
  }
  return c;
}

static vstatus md_record(void *st, const vsuite_ctx *x, int c, veng *recs) {
  md_state *s = st;
  const int k = case_server(s, c), n = s->rows.n;
  const bool cand = s->n_sv == 2 && k == 0;
  if (cand) pair_findings(s, x->seed);
  double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
  if (!v) return VERR("eval mrcr: out of memory");
  /* the cells: every (bin, needles) with a row that the bins place there */
  for (int b = 0; b <= s->n_edges; b++)
    for (int j = 0; j < s->n_needles; j++) {
      int rows_in = 0;
      for (int i = 0; i < n; i++) rows_in += in_cell(s, i, b, s->needles[j]);
      if (!rows_in) continue;
      char id[96], lab[24];
      bin_label(s, b, lab, sizeof lab);
      snprintf(id, sizeof id, "mrcr_dataset_bin%s_n%d", lab[0] == '>' ? lab + 1 : lab, s->needles[j]);
      if (lab[0] == '>') snprintf(id, sizeof id, "mrcr_dataset_binover%s_n%d", lab + 1, s->needles[j]);
      vrecord *r = eng_new(recs, "evals", id, s->sv[k].path);
      if (!r) { free(v); return V_ERR; }
      add_params(s, k, r);
      rec_param_str(r, "bin", lab);
      rec_param_int(r, "bin_lo", b ? s->edges[b - 1] : 0);
      if (b < s->n_edges) rec_param_int(r, "bin_hi", s->edges[b]);
      rec_param_int(r, "needles", s->needles[j]);
      int tr, fl, past;
      const int m = cell_samples(s, k, b, s->needles[j], v, &tr, &fl, &past);
      rec_metric_samples(r, "score", "", RD_MEAN, RB_HIGHER, v, m, 0);
      rec_metric_value(r, "truncated", "", RB_LOWER, tr);
      if (cand) {
        int mr = 0;
        rec_metric_value(r, "reference_score", "", RB_HIGHER, cell_score(s, 1, b, s->needles[j], &mr));
        double *d = malloc((size_t)(n > 0 ? n : 1) * sizeof *d);
        int md = 0;
        double sum = 0;
        for (int i = 0; d && i < n; i++)
          if (in_cell(s, i, b, s->needles[j]) && s->items[0][i].state == MD_OK && s->items[1][i].state == MD_OK)
            d[md] = s->items[1][i].score - s->items[0][i].score, sum -= d[md++];
        rec_metric_value(r, "paired_diff", "", RB_HIGHER, md ? sum / md : NAN);
        rec_metric_value(r, "worse_p", "", RB_HIGHER, d ? seval_worse_p(d, md, x->seed, NULL) : NAN); /* shown, not judged */
        free(d);
      }
      if (fl) {
        char why[256];
        snprintf(why, sizeof why, "%d of the cell's requests failed (the first: %.180s)", fl, s->first_error[k]);
        rec_set_status(r, REC_ERROR, why);
      } else if (!m && past) {
        rec_set_status(r, REC_NOT_SUPPORTED, "every prompt of the cell is longer than the server's context");
      }
      rec_finalize(r);
    }
  /* the summary record */
  vrecord *r = eng_new(recs, "evals", "mrcr_dataset_all", s->sv[k].path);
  if (!r) { free(v); return V_ERR; }
  add_params(s, k, r);
  int tr, fl, past;
  const int m = cell_samples(s, k, -1, -1, v, &tr, &fl, &past);
  rec_metric_samples(r, "score", "", RD_MEAN, RB_HIGHER, v, m, 0);
  rec_metric_value(r, "auc", "", RB_HIGHER, auc(s, k, -1));
  rec_metric_value(r, "truncated", "", RB_LOWER, tr);
  rec_metric_value(r, "past_context", "", RB_LOWER, past);
  rec_metric_value(r, "failed", "", RB_LOWER, fl);
  rec_metric_value(r, "wall_s", "s", RB_LOWER, s->wall_s[k]);
  if (cand) {
    rec_metric_value(r, "reference_score", "", RB_HIGHER, cell_score(s, 1, -1, -1, NULL));
    seval_paired_metrics(&s->pr, r);
    rec_metric_value(r, "prompt_tokens_differ", "", RB_LOWER, s->tok_mismatch);
    seval_paired_checks(&s->pr, s->o.alpha, r);
  }
  if (fl) {
    char why[256];
    snprintf(why, sizeof why, "%d of %d requests failed (not retried; the first: %.170s)", fl, n, s->first_error[k]);
    rec_set_status(r, REC_ERROR, why);
  }
  rec_finalize(r);
  free(v);
  return V_OK;
}

static void print_cell(double v) {
  if (isnan(v)) printf(" %7s", "-");
  else printf(" %7.4f", v);
}

static void md_print(const void *st, const vsuite_ctx *x, const veng *recs) {
  (void)recs;
  const md_state *s = st;
  printf("eval mrcr --dataset %s: %d rows, needles", s->o.dataset, s->rows.n);
  for (int j = 0; j < s->n_needles; j++) printf("%s%d", j ? "," : " ", s->needles[j]);
  printf("; chat completions at temperature 0, max_tokens %ld, %ld in flight%s; wall %.1f s\n", s->o.max_tokens,
         s->o.concurrency, s->o.stream ? ", streamed" : "", x->wall_s);
  for (int k = 0; k < s->n_sv; k++) served_side_print(&s->sv[k]);
  bool used[64] = {0}; /* the bins that hold a row */
  for (int i = 0; i < s->rows.n; i++) {
    const long t = item_tokens(s, i);
    if (t >= 0 && bin_of(s, t) < 64) used[bin_of(s, t)] = true;
  }
  for (int k = 0; k < s->n_sv; k++) {
    double *v = malloc((size_t)(s->rows.n > 0 ? s->rows.n : 1) * sizeof *v);
    int tr = 0, fl = 0, past = 0;
    const int m = v ? cell_samples(s, k, -1, -1, v, &tr, &fl, &past) : 0;
    double sum = 0;
    for (int i = 0; i < m; i++) sum += v[i];
    free(v);
    printf("\n%s: score %.4f over %d items (%d truncated at max_tokens, %d past the server's context, %d failed); "
           "AUC %.4f; %.1f s\n",
           s->sv[k].conn.shown, m ? sum / m : NAN, m, tr, past, fl, auc(s, k, -1), s->wall_s[k]);
    printf("  %-8s", "needles");
    for (int b = 0; b <= s->n_edges && b < 64; b++) {
      if (!used[b]) continue;
      char lab[24];
      bin_label(s, b, lab, sizeof lab);
      printf(" %7s", lab);
    }
    printf(" %7s\n", "AUC");
    for (int j = 0; j <= s->n_needles; j++) {
      const int nn = j < s->n_needles ? s->needles[j] : -1;
      if (nn >= 0) printf("  %-8d", nn);
      else printf("  %-8s", "all");
      for (int b = 0; b <= s->n_edges && b < 64; b++)
        if (used[b]) print_cell(cell_score(s, k, b, nn, NULL));
      print_cell(auc(s, k, nn));
      printf("\n");
    }
    printf("  rows per bin:");
    for (int b = 0; b <= s->n_edges && b < 64; b++) {
      if (!used[b]) continue;
      int c = 0;
      for (int i = 0; i < s->rows.n; i++) c += in_cell(s, i, b, -1);
      char lab[24];
      bin_label(s, b, lab, sizeof lab);
      printf(" %s %d", lab, c);
    }
    printf("\n");
    if (fl) printf("  %d requests failed, the first (%s)\n", fl, s->first_error[k]);
  }
  if (s->n_sv < 2) return;
  seval_paired_print(&s->pr, s->o.alpha, "rows", "score", "");
  if (s->tok_mismatch)
    printf("note: usage.prompt_tokens differs on %d rows: the servers tokenize or template the prompts differently\n",
           s->tok_mismatch);
  seval_paired_print_fails(&s->pr, s->sv[0].path, s->o.alpha, "score");
}

static void md_free(void *st) {
  md_state *s = st;
  mrcr_rows_free(&s->rows);
  served_pair_close(s->sv, s->n_sv);
  for (int k = 0; k < 2; k++) free(s->items[k]);
  free(s->edges);
}

const vsuite vsuite_mrcr_dataset = {
    .name = "eval mrcr",
    .usage = USAGE,
    .no_model = true,
    .state_size = sizeof(md_state),
    .init = md_init,
    .option = md_option,
    .options_done = md_options_done,
    .check = md_check,
    .prepare = md_prepare,
    .n_cases = md_n_cases,
    .run = md_run,
    .record = md_record,
    .plan = md_plan,
    .print = md_print,
    .free = md_free,
    .case_noun = "servers",
};
