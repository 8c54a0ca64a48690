/* vouch eval mrcr: multi-needle retrieval (suites/evals/evals.h) as a suite on the driver (suites/engine/suite.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites/engine/cli.h"
#include "suites/evals/evals_suite.h"
#include "suites/engine/stats_tests.h"

static const char MRCR_USAGE[] =
    "usage: vouch eval mrcr [--model DIR|synth:recall-mrcr] [--paths P1,P2..] [--bins 1k,4k] [--needles 2,4,8]\n"
    "                       [--samples N] [--batch B] [--chunk C] [--seed S] [--threads N] [--min-score F]\n"
    "                       [--alpha A] [--cos C --gap G --answer-logit L] [--export-prompts FILE]\n"
    "                       [--server URL [--server-model NAME]] [--path-lib FILE] [--expect-fallback]\n"
    "                       [--json FILE]\n"
    "  Multi-needle retrieval on a constructed checkpoint: per context bin (total tokens, the\n"
    "  last N are the queries) and needle count N, --samples prompts with N near-duplicate keys\n"
    "  (cosine --cos) at spread depths; each needle is queried once (greedy next token).\n"
    "  Prints scores per bin x needles, an AUC over log2(bin), a depth x context table and the\n"
    "  answer-logit margins; compares every path with the first (paired difference, McNemar).\n"
    "  A (path, bin, needles) case passes when its score >= --min-score (default 0.99) and it is\n"
    "  not significantly worse than the first path (McNemar p < --alpha, default 0.05).\n"
    "  --export-prompts FILE writes the prompts (for scripts/peers/hf_eval.py) and exits unless\n"
    "  --paths is given. --cos/--gap/--answer-logit rebuild synth:recall-* with other difficulty.\n"
    "  --server URL adds an OpenAI-compatible server of the same checkpoint as a path (server:MODEL):\n"
    "  one greedy token-id completion per query, --batch in flight; alone (no --paths) it is scored\n"
    "  against the constructed answers only. API key: $VOUCH_SERVER_API_KEY, else $OPENAI_API_KEY.\n"
    VSUITE_EXPECT_FALLBACK_HELP
    "  defaults: --model synth:recall-mrcr --paths cpu-ref --bins 1k,4k --needles 2,4,8 --samples 4\n"
    "            --batch 1 --chunk 2048\n";

static const char *mrcr_depth_label[5] = {"0-20%", "20-40%", "40-60%", "60-80%", "80-100%"};

/* The suite's state: its options, and the results of the paths (one case per path). */
typedef struct {
  eval_opts e;                      /* --samples, --batch, --min-score, --alpha, --export-prompts */
  const char *bins_s, *needles_s;   /* --bins, --needles as given */
  long chunk;                       /* --chunk: prefill tokens per sequence per step */
  long *bins, *needles;             /* [n_bins], [n_needles]: the cells (options_done) */
  int n_bins, n_needles;
  eval_paths ep;                    /* the paths run: --paths, then the --server (prepare) */
  mrcr_opts o;                      /* what mrcr_run_path reads (prepare) */
  mrcr_result r;                    /* every path's answers, filled path by path (run) */
  unsigned char *ok;                /* [ep.n][n_bins][n_needles]: the cell passed (record) */
} mrcr_state;

static void mrcr_init(void *st) {
  mrcr_state *s = st;
  s->e = (eval_opts){.samples = 4, .batch = 1, .min_score = 0.99, .alpha = 0.05};
  s->bins_s = "1k,4k";
  s->needles_s = "2,4,8";
  s->chunk = 2048;
}

static bool mrcr_option(void *st, int argc, char **argv, int *i, vstatus *err) {
  mrcr_state *s = st;
  const char *v;
  if (eval_option(&s->e, argc, argv, i, err)) {}
  else if (cli_opt(argc, argv, i, "--bins", &v, err)) { if (v) s->bins_s = v; }
  else if (cli_opt(argc, argv, i, "--needles", &v, err)) { if (v) s->needles_s = v; }
  else if (cli_opt(argc, argv, i, "--chunk", &v, err)) { if (v) *err = cli_int("--chunk", v, 1, 1 << 20, &s->chunk); }
  else return false;
  return true;
}

static vstatus mrcr_options_done(void *st) {
  mrcr_state *s = st;
  VTRY(eval_options_done(&s->e));
  VTRY(cli_size_list("--bins", s->bins_s, &s->bins, &s->n_bins));
  return cli_size_list("--needles", s->needles_s, &s->needles, &s->n_needles);
}

/* The dry run: one path at a time, max_seq = --batch, max_ctx = the largest bin; each forward is
 * min(batch, samples) prompts x min(chunk, bin) tokens (mrcr.c); every cell's prompts are prefilled. */
static vstatus mrcr_estimate(const void *st, const vsuite_est_ctx *x, vest *X) {
  const mrcr_state *s = st;
  const long B = s->e.batch, samples = s->e.samples, chunk = s->chunk, maxbin = vest_list_max(s->bins, s->n_bins);
  vest_name_paths(X, x->paths, x->n_paths, false);
  X->rows = vest_rows((B < samples ? B : samples) * (chunk < maxbin ? chunk : maxbin));
  for (int p = 0; p < x->n_paths; p++) {
    vest_open_set(X, &x->paths[p], 1, (int)B, (int)maxbin, true);
    X->out->seconds += vest_open_s(X, x->paths[p], X->wbytes[0]);
    for (int b = 0; b < s->n_bins; b++)
      X->out->seconds += (double)s->n_needles * samples * vest_prefill_s(X, x->paths[p], s->bins[b], s->bins[b]);
  }
  return V_OK;
}

static vstatus mrcr_check(void *st, const vsuite_ctx *x) {
  const mrcr_state *s = st;
  for (int i = 0; i < s->n_needles; i++)
    if (s->needles[i] < 1 || s->needles[i] > x->layout->o.family)
      return VERR("option --needles: %ld outside [1, %d] (the model's near-duplicate family size)", s->needles[i],
                  x->layout->o.family);
  return V_OK;
}

/* --export-prompts: every prompt, with its queries, answers and needle depths. */
static vstatus mrcr_export(const mrcr_state *s, const vsuite_ctx *x) {
  cJSON *root = eval_export_root("mrcr", x), *cases = cJSON_AddArrayToObject(root, "cases");
  vstatus st = V_OK;
  for (int bi = 0; bi < s->n_bins && !st; bi++)
    for (int ni = 0; ni < s->n_needles && !st; ni++)
      for (int sm = 0; sm < s->e.samples && !st; sm++) {
        int bin = (int)s->bins[bi], N = (int)s->needles[ni];
        int32_t *tok = malloc((size_t)bin * sizeof *tok), q[128], an[128];
        double dp[128];
        st = tok ? mrcr_prompt(x->layout, bin, N, sm, x->seed, tok, q, an, dp) : VERR("out of memory");
        if (!st) {
          cJSON *c = cJSON_CreateObject();
          cJSON_AddNumberToObject(c, "bin", bin);
          cJSON_AddNumberToObject(c, "needles", N);
          cJSON_AddNumberToObject(c, "sample", sm);
          cJSON_AddItemToObject(c, "prompt", eval_ints_json(tok, bin - N));
          cJSON_AddItemToObject(c, "queries", eval_ints_json(q, N));
          cJSON_AddItemToObject(c, "answers", eval_ints_json(an, N));
          cJSON *d = cJSON_AddArrayToObject(c, "depths");
          for (int i = 0; i < N; i++) cJSON_AddItemToArray(d, cJSON_CreateNumber(dp[i]));
          cJSON_AddItemToArray(cases, c);
        }
        free(tok);
      }
  if (!st) st = eval_export_write(s->e.export_f, root);
  cJSON_Delete(root);
  VTRY(st);
  printf("wrote %s: %d bins x %d needle counts x %ld samples\n", s->e.export_f, s->n_bins, s->n_needles, s->e.samples);
  return V_OK;
}

static vstatus mrcr_prepare(void *st, const vsuite_ctx *x, bool *done) {
  mrcr_state *s = st;
  if (s->e.export_f) {
    VTRY(mrcr_export(s, x));
    if (!x->paths_given && !s->e.server) { *done = true; return V_OK; }
  }
  VTRY(eval_paths_open(&s->ep, &s->e, x));
  s->ok = calloc((size_t)s->ep.n * s->n_bins * s->n_needles, 1);
  if (!s->ok) return VERR("eval mrcr: out of memory");
  s->o = (mrcr_opts){.paths = s->ep.paths, .n_paths = s->ep.n, .bins = s->bins, .n_bins = s->n_bins,
                     .needles = s->needles, .n_needles = s->n_needles, .samples = (int)s->e.samples,
                     .batch = (int)s->e.batch, .chunk = (int)s->chunk, .seed = x->seed, .n_threads = x->n_threads,
                     .expect_fallback = x->expect_fallback};
  return mrcr_begin(x->model, x->layout, &s->o, &s->r);
}

static int mrcr_n_cases(const void *st, const vsuite_ctx *x) { return ((const mrcr_state *)st)->ep.n; }

static vstatus mrcr_run_case(void *st, const vsuite_ctx *x, int p) {
  mrcr_state *s = st;
  if (p != s->ep.server) return mrcr_run_path(x->model, x->layout, &s->o, &s->r, p);
  VTRY(mrcr_run_server(&s->ep.sv, x->layout, &s->o, &s->r, p));
  eval_server_warn(vsuite_mrcr.name, &s->r.pr[p]);
  return V_OK;
}

/* The case id of the record of (bins[bi], needles[ni]). */
static void cell_id(const mrcr_state *s, int bi, int ni, char *id, size_t n) {
  snprintf(id, n, "mrcr_bin%ld_n%ld", s->bins[bi], s->needles[ni]);
}

/* Path p's records as they will be made (one per (bin, needles)), for the run's not_run. */
static vstatus mrcr_plan(void *st, const vsuite_ctx *x, int p, veng *recs) {
  const mrcr_state *s = st;
  for (int bi = 0; bi < s->n_bins; bi++)
    for (int ni = 0; ni < s->n_needles; ni++) {
      char id[96];
      cell_id(s, bi, ni, id, sizeof id);
      vrecord *r = eng_new(recs, "evals", id, s->r.pr[p].path);
      if (!r) return V_ERR;
      rec_param_str(r, "model", x->model->source);
      rec_param_int(r, "bin", s->bins[bi]);
      rec_param_int(r, "needles", s->needles[ni]);
    }
  return V_OK;
}

/* Path p's records, one per (bin, needles). */
static vstatus mrcr_record(void *st, const vsuite_ctx *x, int p, veng *recs) {
  mrcr_state *s = st;
  const mrcr_result *r = &s->r;
  unsigned char *mask = calloc((size_t)r->n_queries, 1);
  if (!mask) return VERR("eval mrcr: out of memory");
  for (int bi = 0; bi < s->n_bins; bi++)
    for (int ni = 0; ni < s->n_needles; ni++) {
      for (int i = 0; i < r->n_queries; i++) mask[i] = r->q[i].bin == s->bins[bi] && r->q[i].needles == s->needles[ni];
      char id[96];
      cell_id(s, bi, ni, id, sizeof id);
      cJSON *params = cJSON_CreateObject();
      cJSON_AddStringToObject(params, "model", x->model->source);
      cJSON_AddNumberToObject(params, "bin", (double)s->bins[bi]);
      cJSON_AddNumberToObject(params, "needles", (double)s->needles[ni]);
      cJSON_AddNumberToObject(params, "samples", (double)s->e.samples);
      cJSON_AddNumberToObject(params, "seed", (double)x->seed);
      cJSON_AddNumberToObject(params, "cos", x->layout->o.cos);
      cJSON_AddNumberToObject(params, "gap", x->layout->o.gap);
      cJSON_AddStringToObject(params, "reference", r->pr[0].path);
      eval_server_params(&s->ep, p, params);
      s->ok[((size_t)p * s->n_bins + bi) * s->n_needles + ni] =
          eval_record(recs, "evals", id, &r->pr[0], &r->pr[p], p == 0, mask, r->n_queries, s->e.min_score, s->e.alpha,
                      params);
      cJSON_Delete(params);
    }
  free(mask);
  return V_OK;
}

/* A score in a table; "-" where there is none (no query ran there: NaN). */
static void print_cell(double v) {
  if (isnan(v)) printf(" %8s", "-");
  else printf(" %8.3f", v);
}

/* Path pr's score, its bins x needles table with the AUC, and its depth x context table. */
static void print_path(const mrcr_state *s, const eval_path_result *pr, unsigned char *mask) {
  const mrcr_result *r = &s->r;
  int n_ran = 0;
  double s_all = eval_score(pr, NULL, r->n_queries, &n_ran);
  double *mg = malloc((size_t)r->n_queries * sizeof *mg);
  const int nm = mg ? eval_margins(pr, NULL, r->n_queries, mg) : 0;
  printf("\npath %s: score %.4f over %d queries, answer margin ", pr->path, s_all, n_ran);
  if (nm)
    printf("min %.2f median %.2f%s", stat_percentile(mg, nm, 0), stat_percentile(mg, nm, 50),
           nm == n_ran ? "" : " (of the margins known)");
  else
    printf("n/a (no logprobs)");
  printf(", %s %.2f s\n", pr->skipped ? "requests' wall time" : "forward time", pr->wall_s);
  if (pr->n_failed) printf("  %s\n", pr->reason);
  free(mg);
  printf("  %-8s", "needles");
  for (int bi = 0; bi < s->n_bins; bi++) printf(" %8ld", s->bins[bi]);
  printf("  %8s\n", "AUC");
  for (int ni = 0; ni < s->n_needles; ni++) {
    printf("  %-8ld", s->needles[ni]);
    double xs[64], ys[64];
    for (int bi = 0; bi < s->n_bins; bi++) {
      for (int i = 0; i < r->n_queries; i++) mask[i] = r->q[i].bin == s->bins[bi] && r->q[i].needles == s->needles[ni];
      ys[bi < 64 ? bi : 63] = eval_score(pr, mask, r->n_queries, NULL);
      xs[bi < 64 ? bi : 63] = log2((double)s->bins[bi]);
      print_cell(ys[bi < 64 ? bi : 63]);
    }
    printf(" ");
    print_cell(stat_auc_normalized(xs, ys, s->n_bins < 64 ? s->n_bins : 64));
    printf("\n");
  }
  printf("  depth x context (all needle counts):\n  %-8s", "depth");
  for (int bi = 0; bi < s->n_bins; bi++) printf(" %8ld", s->bins[bi]);
  printf("\n");
  for (int d = 0; d < 5; d++) {
    printf("  %-8s", mrcr_depth_label[d]);
    for (int bi = 0; bi < s->n_bins; bi++) {
      for (int i = 0; i < r->n_queries; i++) mask[i] = r->q[i].bin == s->bins[bi] && (int)(r->q[i].depth * 5) == d;
      print_cell(eval_score(pr, mask, r->n_queries, NULL));
    }
    printf("\n");
  }
}

static void mrcr_print(const void *st, const vsuite_ctx *x, const veng *recs) {
  (void)recs; /* the report is made of the suite's own results */
  const mrcr_state *s = st;
  const mrcr_result *r = &s->r;
  const construct_layout *L = x->layout;
  printf("eval mrcr: model %s\n  difficulty: near-duplicate cosine %.3f, score gap %.2f nats (alpha %.1f), nominal answer "
         "logit %.1f; %ld samples per cell, seed %llu; wall %.1f s\n",
         x->model->source, L->o.cos, L->o.gap, L->alpha, L->o.answer_logit, s->e.samples, (unsigned long long)x->seed,
         x->wall_s);
  unsigned char *mask = calloc((size_t)r->n_queries, 1);
  for (int p = 0; p < s->ep.n && mask; p++) {
    const eval_path_result *pr = &r->pr[p];
    if (p == s->ep.server) printf("\nserver %s, model %s\n", s->ep.sv.conn.shown, s->ep.sv.model);
    if (!pr->supported)
      printf("\npath %s: %s: %s\n", pr->path, pr->errored ? "error" : "not supported", pr->reason);
    else
      print_path(s, pr, mask);
    if (p > 0) {
      printf("  vs %s:\n", r->pr[0].path);
      eval_print_pairwise("all", &r->pr[0], pr, NULL, r->n_queries, s->e.alpha);
    }
    for (int bi = 0; bi < s->n_bins; bi++)
      for (int ni = 0; ni < s->n_needles; ni++) {
        for (int i = 0; i < r->n_queries; i++) mask[i] = r->q[i].bin == s->bins[bi] && r->q[i].needles == s->needles[ni];
        int ran = 0;
        const double sc = eval_score(pr, mask, r->n_queries, &ran);
        if (!s->ok[((size_t)p * s->n_bins + bi) * s->n_needles + ni] && pr->supported && ran)
          printf("  FAIL %s: bin %ld, %ld needles: score %.4f < %.2f or significantly worse than %s\n", pr->path,
                 s->bins[bi], s->needles[ni], sc, s->e.min_score, r->pr[0].path);
      }
  }
  free(mask);
}

static void mrcr_free(void *st) {
  mrcr_state *s = st;
  mrcr_result_free(&s->r);
  eval_paths_free(&s->ep);
  free(s->bins);
  free(s->needles);
  free(s->ok);
}

const vsuite vsuite_mrcr = {
    .name = "eval mrcr",
    .usage = MRCR_USAGE,
    .default_model = "synth:recall-mrcr",
    .default_paths = "cpu-ref",
    .constructed = true,
    .state_size = sizeof(mrcr_state),
    .init = mrcr_init,
    .option = mrcr_option,
    .options_done = mrcr_options_done,
    .check = mrcr_check,
    .prepare = mrcr_prepare,
    .n_cases = mrcr_n_cases,
    .run = mrcr_run_case,
    .record = mrcr_record,
    .plan = mrcr_plan,
    .print = mrcr_print,
    .free = mrcr_free,
    .estimate = mrcr_estimate,
};
