/* vouch eval chain: pointer chasing (suites/evals/evals.h) as a suite on the driver (suites/engine/suite.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "suites/engine/cli.h"
#include "suites/engine/record.h"
#include "suites/evals/evals_suite.h"

static const char CHAIN_USAGE[] =
    "usage: vouch eval chain [--model DIR|synth:recall-chain] [--paths P1,P2..] [--hops 64,256] [--samples N]\n"
    "                        [--batch B] [--temperature T] [--top-k K] [--top-p P] [--sample-seed S] [--seed S]\n"
    "                        [--threads N] [--min-score F] [--alpha A] [--cos C --gap G --answer-logit L]\n"
    "                        [--export-prompts FILE] [--server URL [--server-model NAME]] [--path-lib FILE]\n"
    "                        [--expect-fallback] [--json FILE]\n"
    "  Pointer chasing on a constructed checkpoint: the prompt lists a random cyclic permutation\n"
    "  of the keys as pairs, then a start key; each emitted token is the next query. One run to\n"
    "  the largest hop count; the token after each listed hop count is checked (exact match,\n"
    "  pass@1 = mean over --samples chains, each with its own permutation and sampling seed\n"
    "  stream), plus the first hop where the run left the true chain. Greedy by default;\n"
    "  --temperature > 0 samples through common/sampling.h with --sample-seed.\n"
    "  A (path, hops) case passes when pass@1 >= --min-score (default 0.99) and it is not\n"
    "  significantly worse than the first path (McNemar p < --alpha).\n"
    "  --server URL adds an OpenAI-compatible server of the same checkpoint as a path (server:MODEL):\n"
    "  one completion of the largest hop count per chain, --batch in flight. Sampled over a server\n"
    "  (its own sampler, seed --sample-seed + chain) it is scored against the true chain only.\n"
    VSUITE_EXPECT_FALLBACK_HELP
    "  defaults: --model synth:recall-chain --paths cpu-ref --hops 64,256 --samples 8 --batch 1\n";

/* The suite's state: its options, and the results of the paths (one case per path). */
typedef struct {
  eval_opts e;               /* --samples, --batch, --min-score, --alpha, --export-prompts */
  const char *hops_s;        /* --hops as given */
  double temperature, top_p; /* --temperature (0: greedy), --top-p: for the ids and parameters too */
  long top_k;                /* --top-k (0: off) */
  uint64_t sample_seed;      /* --sample-seed */
  long *hops;                /* [n_hops] hop counts scored (options_done) */
  int n_hops;
  eval_paths ep;             /* the paths run: --paths, then the --server (prepare) */
  chain_opts o;              /* what chain_run_path reads (prepare) */
  chain_result r;            /* every path's chains, filled path by path (run) */
  unsigned char *ok;         /* [ep.n][n_hops]: the hop count passed (record) */
} chain_state;

static void chain_init(void *st) {
  chain_state *s = st;
  s->e = (eval_opts){.samples = 8, .batch = 1, .min_score = 0.99, .alpha = 0.05};
  s->hops_s = "64,256";
  s->top_p = 1;
}

static bool chain_option(void *st, int argc, char **argv, int *i, vstatus *err) {
  chain_state *s = st;
  const char *v;
  if (eval_option(&s->e, argc, argv, i, err)) return true;
  if (cli_opt(argc, argv, i, "--hops", &v, err)) { if (v) s->hops_s = v; }
  else if (cli_opt(argc, argv, i, "--temperature", &v, err)) { if (v) *err = cli_double("--temperature", v, &s->temperature); }
  else if (cli_opt(argc, argv, i, "--top-p", &v, err)) { if (v) *err = cli_double("--top-p", v, &s->top_p); }
  else if (cli_opt(argc, argv, i, "--top-k", &v, err)) { if (v) *err = cli_int("--top-k", v, 0, 1 << 30, &s->top_k); }
  else if (cli_opt(argc, argv, i, "--sample-seed", &v, err)) { if (v) *err = cli_u64("--sample-seed", v, &s->sample_seed); }
  else return false;
  /* as soon as an option makes the sampling invalid */
  if (!*err && (s->temperature < 0 || s->top_p <= 0 || s->top_p > 1))
    *err = VERR("--temperature must be >= 0 and --top-p in (0, 1]");
  return true;
}

static vstatus chain_options_done(void *st) {
  chain_state *s = st;
  VTRY(eval_options_done(&s->e));
  VTRY(cli_size_list("--hops", s->hops_s, &s->hops, &s->n_hops));
  /* before --export-prompts reads truth[hops[i]] of a chain as long as the last value */
  for (int i = 0; i < s->n_hops; i++)
    if (s->hops[i] < 1 || (i && s->hops[i] <= s->hops[i - 1]))
      return VERR("chain: option 'hops': values must be >= 1 and ascending");
  return V_OK;
}

/* The dry run: one path at a time, max_seq = --batch, max_ctx = the keys + 2 + the largest hop
 * count; per batch of samples a prompt of keys + 2 tokens, then that many decode steps. */
static vstatus chain_estimate(const void *st, const vsuite_est_ctx *x, vest *X) {
  const chain_state *s = st;
  construct_opts co;
  const long B = s->e.batch, keys = construct_preset_opts("recall-chain", &co) == V_OK ? co.n_keys : 32;
  const long H = vest_list_max(s->hops, s->n_hops), need = keys + 2 + H;
  vest_name_paths(X, x->paths, x->n_paths, false);
  const double runs = ceil((double)s->e.samples / B);
  for (int p = 0; p < x->n_paths; p++) {
    vest_open_set(X, &x->paths[p], 1, (int)B, (int)need, true);
    X->out->seconds += vest_open_s(X, x->paths[p], X->wbytes[0]) +
                       runs * (vest_prefill_s(X, x->paths[p], (double)B * (keys + 2), keys + 2) +
                               H * vest_step_s(X, x->paths[p], (int)B, need / 2.0));
  }
  return V_OK;
}

/* --export-prompts: every chain's prompt and its greedy answers at the hop counts. */
static vstatus chain_export(const chain_state *s, const vsuite_ctx *x) {
  const construct_layout *L = x->layout;
  const int nh = s->n_hops;
  cJSON *root = eval_export_root("chain", x);
  cJSON *hj = cJSON_AddArrayToObject(root, "hops");
  for (int i = 0; i < nh; i++) cJSON_AddItemToArray(hj, cJSON_CreateNumber((double)s->hops[i]));
  cJSON *cases = cJSON_AddArrayToObject(root, "cases");
  const int H = (int)s->hops[nh - 1], plen = L->o.n_keys + 2;
  int32_t *tok = malloc((size_t)plen * sizeof *tok), *truth = malloc((size_t)(H + 1) * sizeof *truth);
  vstatus st = tok && truth ? V_OK : VERR("out of memory");
  for (int sm = 0; sm < s->e.samples && !st; sm++) {
    st = chain_prompt(L, sm, x->seed, H, tok, truth);
    if (st) break;
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "sample", sm);
    cJSON_AddItemToObject(c, "prompt", eval_ints_json(tok, plen));
    cJSON *ans = cJSON_AddArrayToObject(c, "answers");
    for (int i = 0; i < nh; i++) cJSON_AddItemToArray(ans, cJSON_CreateNumber(truth[s->hops[i]]));
    cJSON_AddItemToArray(cases, c);
  }
  free(tok);
  free(truth);
  if (!st) st = eval_export_write(s->e.export_f, root);
  cJSON_Delete(root);
  VTRY(st);
  printf("wrote %s: %ld chains, hops up to %ld (greedy answers)\n", s->e.export_f, s->e.samples, s->hops[nh - 1]);
  return V_OK;
}

static vstatus chain_prepare(void *st, const vsuite_ctx *x, bool *done) {
  chain_state *s = st;
  if (s->e.export_f) {
    VTRY(chain_export(s, x));
    if (!x->paths_given && !s->e.server) { *done = true; return V_OK; }
  }
  VTRY(eval_paths_open(&s->ep, &s->e, x));
  s->ok = calloc((size_t)s->ep.n * s->n_hops, 1);
  if (!s->ok) return VERR("eval chain: out of memory");
  s->o = (chain_opts){.paths = s->ep.paths, .n_paths = s->ep.n, .hops = s->hops, .n_hops = s->n_hops,
                      .samples = (int)s->e.samples, .batch = (int)s->e.batch,
                      .sampling = {.temperature = (float)s->temperature, .top_k = (int)s->top_k,
                                   .top_p = (float)s->top_p, .seed = s->sample_seed},
                      .seed = x->seed, .n_threads = x->n_threads,
                      .expect_fallback = x->expect_fallback};
  return chain_begin(x->model, x->layout, &s->o, &s->r);
}

static int chain_n_cases(const void *st, const vsuite_ctx *x) { return ((const chain_state *)st)->ep.n; }

static vstatus chain_run_case(void *st, const vsuite_ctx *x, int p) {
  chain_state *s = st;
  if (p != s->ep.server) return chain_run_path(x->model, x->layout, &s->o, &s->r, p);
  VTRY(chain_run_server(&s->ep.sv, x->layout, &s->o, &s->r, p));
  eval_server_warn(vsuite_chain.name, &s->r.pr[p]);
  return V_OK;
}

/* A sampled server is scored against the true chain only: its sampler is not vouch's, so its
 * draws are not paired with the reference's. */
static bool chain_unpaired(const chain_state *s, int p) { return p == s->ep.server && s->temperature > 0; }

/* Path p's records: one per hop count, and its first-wrong hops as raw samples. */
/* The case id of the record of hops[hi]. */
static void hops_id(const chain_state *s, int hi, char *id, size_t n) {
  snprintf(id, n, "chain_hops%ld_t%g", s->hops[hi], s->temperature);
}

/* Path p's records as they will be made (one per hop count; the first-wrong record only exists
 * where the path ran), for the run's not_run. */
static vstatus chain_plan(void *st, const vsuite_ctx *x, int p, veng *recs) {
  const chain_state *s = st;
  for (int hi = 0; hi < s->n_hops; hi++) {
    char id[64];
    hops_id(s, hi, id, sizeof id);
    vrecord *r = eng_new(recs, "evals", id, s->r.pr[p].path);
    if (!r) return V_ERR;
    rec_param_str(r, "model", x->model->source);
    rec_param_int(r, "hops", s->hops[hi]);
    rec_param_num(r, "temperature", s->temperature);
  }
  return V_OK;
}

static vstatus chain_record(void *st, const vsuite_ctx *x, int p, veng *recs) {
  chain_state *s = st;
  const chain_result *r = &s->r;
  const eval_path_result *pr = &r->pr[p];
  const int nh = s->n_hops, n = (int)s->e.samples * nh;
  unsigned char *mask = calloc((size_t)n, 1);
  if (!mask) return VERR("eval chain: out of memory");
  for (int hi = 0; hi < nh; hi++) {
    for (int i = 0; i < n; i++) mask[i] = i % nh == hi;
    char id[64];
    hops_id(s, hi, id, sizeof id);
    cJSON *params = cJSON_CreateObject();
    cJSON_AddStringToObject(params, "model", x->model->source);
    cJSON_AddNumberToObject(params, "hops", (double)s->hops[hi]);
    cJSON_AddNumberToObject(params, "samples", (double)s->e.samples);
    cJSON_AddNumberToObject(params, "temperature", s->temperature);
    cJSON_AddNumberToObject(params, "top_k", (double)s->top_k);
    cJSON_AddNumberToObject(params, "top_p", s->top_p);
    cJSON_AddNumberToObject(params, "sample_seed", (double)s->sample_seed);
    cJSON_AddNumberToObject(params, "seed", (double)x->seed);
    cJSON_AddStringToObject(params, "reference", chain_unpaired(s, p) ? "none (sampled server)" : r->pr[0].path);
    eval_server_params(&s->ep, p, params);
    s->ok[(size_t)p * nh + hi] = eval_record(recs, "evals", id, &r->pr[0], pr, p == 0 || chain_unpaired(s, p), mask, n,
                                             s->e.min_score, s->e.alpha, params);
    cJSON_Delete(params);
  }
  free(mask);
  if (!pr->supported) return V_OK;
  char fid[48]; /* per temperature: a plan runs the greedy and the sampled chain side by side */
  snprintf(fid, sizeof fid, "chain_first_wrong_t%g", s->temperature);
  vrecord *rec = eng_new(recs, "evals", fid, pr->path);
  if (rec) {
    if (pr->opened) VTRY(rec_ran(rec, pr->path, &pr->ran));
    double *fw = malloc((size_t)s->e.samples * sizeof *fw);
    int k = 0; /* a chain whose request failed (-1) has none */
    for (int i = 0; fw && i < s->e.samples; i++)
      if (r->first_wrong[p][i] >= 0) fw[k++] = r->first_wrong[p][i];
    rec_metric_samples(rec, "first_wrong_hop", "hop", RD_MEDIAN, RB_NONE, fw, k, 0);
    free(fw);
    rec_param_num(rec, "temperature", s->temperature);
    rec_finalize(rec);
  }
  return V_OK;
}

static void chain_print(const void *st, const vsuite_ctx *x, const veng *recs) {
  (void)recs; /* the report is made of the suite's own results */
  const chain_state *s = st;
  const chain_result *r = &s->r;
  const construct_layout *L = x->layout;
  const long samples = s->e.samples;
  const int nh = s->n_hops, n = (int)samples * nh;
  printf("eval chain: model %s\n  difficulty: %d keys in families of %d at cosine %.3f, score gap %.2f nats, nominal "
         "answer logit %.1f; %s; %ld chains, seed %llu; wall %.1f s\n",
         x->model->source, L->o.n_keys, L->o.family, L->o.cos, L->o.gap, L->o.answer_logit,
         s->temperature > 0 ? "sampled" : "greedy", samples, (unsigned long long)x->seed, x->wall_s);
  if (s->temperature > 0)
    printf("  sampling: temperature %.3g top-k %ld top-p %.3g sample-seed %llu\n", s->temperature, s->top_k, s->top_p,
           (unsigned long long)s->sample_seed);
  unsigned char *mask = calloc((size_t)n, 1);
  for (int p = 0; p < s->ep.n && mask; p++) {
    const eval_path_result *pr = &r->pr[p];
    if (p == s->ep.server)
      printf("\nserver %s, model %s%s\n", s->ep.sv.conn.shown, s->ep.sv.model,
             chain_unpaired(s, p) ? ": sampled by the server, scored against the true chain only" : "");
    if (!pr->supported) {
      printf("\npath %s: %s: %s\n", pr->path, pr->errored ? "error" : "not supported", pr->reason);
    } else {
      int left = 0, first = 0, failed = 0;
      for (int i = 0; i < samples; i++) {
        failed += r->first_wrong[p][i] < 0;
        if (r->first_wrong[p][i] > 0) {
          if (!left || r->first_wrong[p][i] < first) first = r->first_wrong[p][i];
          left++;
        }
      }
      printf("\npath %s: %d of %ld chains left the true chain%s", pr->path, left, samples - failed,
             left ? " (earliest at hop " : "");
      if (left) printf("%d)", first);
      if (failed) printf(", %d chains' requests failed", failed);
      printf(", %s %.2f s\n  first hop off the chain per sample:", pr->skipped ? "requests' wall time" : "forward time",
             pr->wall_s);
      for (int i = 0; i < samples && i < 32; i++)
        if (r->first_wrong[p][i] >= 0) printf(" %d", r->first_wrong[p][i]); else printf(" -");
      printf("%s\n", samples > 32 ? " ..." : "");
      if (pr->n_failed) printf("  %s\n", pr->reason);
    }
    for (int hi = 0; hi < nh; hi++) {
      for (int i = 0; i < n; i++) mask[i] = i % nh == hi;
      int ran = 0;
      const double sc = eval_score(pr, mask, n, &ran);
      if (pr->supported && !ran) {
        const bool limited = pr->skipped && pr->skipped[hi] == EVAL_PAST_LIMIT; /* sample 0 at this hop count */
        printf("  hops %-8ld not run: %s\n", s->hops[hi], limited ? pr->limit_reason : "every request failed");
      } else if (pr->supported) {
        double *mg = malloc((size_t)n * sizeof *mg);
        const int nm = mg ? eval_margins(pr, mask, n, mg) : 0;
        double mn = INFINITY;
        for (int i = 0; i < nm; i++) mn = fmin(mn, mg[i]);
        free(mg);
        printf("  hops %-8ld pass@1 %.4f   smallest true-next margin while on chain ", s->hops[hi], sc);
        if (nm) printf("%.2f%s\n", mn, nm == ran ? "" : " (of the margins known)");
        else printf("n/a (no logprobs)\n");
        if (p > 0 && !chain_unpaired(s, p)) {
          char lab[48];
          snprintf(lab, sizeof lab, "hops %ld vs first", s->hops[hi]);
          eval_print_pairwise(lab, &r->pr[0], pr, mask, n, s->e.alpha);
        }
      }
      if (!s->ok[(size_t)p * nh + hi] && pr->supported && ran)
        printf("  FAIL %s: hops %ld: pass@1 %.4f < %.2f%s%s\n", pr->path, s->hops[hi], sc, s->e.min_score,
               chain_unpaired(s, p) ? "" : " or significantly worse than ", chain_unpaired(s, p) ? "" : r->pr[0].path);
    }
  }
  free(mask);
}

static void chain_free(void *st) {
  chain_state *s = st;
  chain_result_free(&s->r);
  eval_paths_free(&s->ep);
  free(s->hops);
  free(s->ok);
}

const vsuite vsuite_chain = {
    .name = "eval chain",
    .usage = CHAIN_USAGE,
    .default_model = "synth:recall-chain",
    .default_paths = "cpu-ref",
    .constructed = true,
    .state_size = sizeof(chain_state),
    .init = chain_init,
    .option = chain_option,
    .options_done = chain_options_done,
    .check = NULL,
    .prepare = chain_prepare,
    .n_cases = chain_n_cases,
    .run = chain_run_case,
    .record = chain_record,
    .plan = chain_plan,
    .print = chain_print,
    .free = chain_free,
    .estimate = chain_estimate,
};
