/* vouch diverge --server URL --ref-server URL --prompts FILE: the candidate build of an engine against
 * its reference build, teacher-forced on real text, with no model of vouch's (the servers hold it).
 *
 * Each prompt of FILE is continued by the reference (greedy, --tokens tokens); the prompt and that
 * continuation, as one text, is then scored by both servers with prompt logprobs (vLLM's
 * prompt_logprobs, else echo + logprobs): the logprob of every token of the text and of its top-K
 * alternatives, from one forward over the whole text. Per position the two servers' distributions
 * are compared on the partition of the tokens both list plus one cell for the rest
 * (suites/diverge/diverge_text_score.h: a lower bound of the full KLD).
 *
 * The noise floor is measured in the same run: the reference scores every text a second time under
 * another batch composition (one request at a time, in the reverse order, where the first pass had
 * --concurrency in flight in file order), which is what a correct second build looks like: the same
 * weights and kernels, another batching. The candidate is judged against that floor by the rule of
 * `vouch diverge --baseline` (suites/diverge/diverge.h diverge_floor_judge: the paired mean arm and
 * the trimmed bulk arm, k = VOUCH_ACCURACY_RATIO) and by its argmax on the positions the floor decides
 * (McNemar, as diverge). docs/verdicts.md says why and what it measured. One case; two records: the
 * floor (the reference against itself, evidence) and the candidate (the subject). */
#include "suites/diverge/diverge_text.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/interrupt.h"
#include "common/read_file.h"
#include "suites/diverge/diverge.h"
#include "suites/diverge/diverge_ids.h"
#include "suites/diverge/diverge_prompts.h"
#include "suites/diverge/diverge_text_score.h"
#include "suites/engine/bounds.h"
#include "suites/engine/cli.h"
#include "suites/engine/record.h"
#include "suites/engine/stats_tests.h"
#include "suites/served/served_pair.h"
#include "suites/served/served_text.h"

static const char USAGE[] =
    "usage: vouch diverge --server URL --ref-server URL [--prompts FILE.jsonl] [--server-model NAME]\n"
    "                     [--tokens T] [--logprobs K] [--logprobs-api auto|prompt_logprobs|echo]\n"
    "                     [--concurrency C] [--limit N] [--timeout S] [--kld-budget B] [--json FILE]\n" SERVED_LAUNCH_HELP
    "  The candidate build (--server) against the reference build of the same model (--ref-server; same\n"
    "  id, root and max_model_len in /v1/models, else refused before any request), teacher-forced on real\n"
    "  text: each prompt of FILE (one JSON object per line with a string \"prompt\"; no --prompts: vouch's\n"
    "  own 32, mixed prose, code, arithmetic, tables, JSON and five languages) is continued by the\n"
    "  reference, greedy, T tokens; both servers then score prompt + continuation with the top-K logprobs\n"
    "  of every position (vLLM's prompt_logprobs, or echo + logprobs; auto: prompt_logprobs when the\n"
    "  reference gives them). Per position: KLD over the tokens both list plus one bucket for the rest (a\n"
    "  lower bound of the full KLD), same top token. The noise floor is the reference against itself under\n"
    "  another batch composition (one request at a time, reverse order); the candidate fails when its\n"
    "  mean KLD exceeds k^2 x the floor's by 3 standard errors of the paired difference, or that\n"
    "  difference's 20%-trimmed mean exceeds 3 of its standard errors, or its top token leaves the\n"
    "  reference's on decided positions more often than the floor's beyond chance (McNemar p < 0.01).\n"
    "  --kld-budget B: a precision change the reviewer accepts (bf16 against an fp32 reference, an fp8\n"
    "  KV cache): B nats are added to both KLD bounds and the top-token arm is reported, not gated; the\n"
    "  record keeps B (default 0: the floor's rule alone).\n"
    "  No --model: the servers hold the model. API key: $VOUCH_SERVER_API_KEY, else $OPENAI_API_KEY.\n"
    "  defaults: --tokens 64 --logprobs 20 --logprobs-api auto --concurrency 8 --timeout 600; every row\n"
    "  (--limit N: the first N)\n";

#define DT_MAX_PROMPTS 100000
/* The smallest mean KLD a served pair can resolve, nats: a server sends each logprob as a float of its
 * computation, so two builds that differ only in the order of float32 sums (a TP split of a
 * batch-invariant engine, vouch serve cpu-ref:tp2 against cpu-ref: 2.5e-14 nats measured) differ by
 * ~1e-7 per logprob, a KLD of ~1e-14. When the floor is 0 (a batch-invariant reference scores its rows
 * bit-identically) the rule's bound would be that rounding's 3 se; below this figure (logprobs ~1.4e-5
 * nats apart, far under any engine's batching floor) a difference is not judged one. */
#define DT_KLD_RESOLUTION 1e-10
enum { PASS_REF, PASS_FLOOR, PASS_CAND, N_PASS }; /* the scoring passes: reference, reference again, candidate */

/* The candidate's verdict against the floor (record, print). */
typedef struct {
  diverge_floor fl;      /* the KLD rule's figures */
  bool kld_ok, bulk_ok, same_ok;
  bool same_gated;       /* the top-token arm decides (no --kld-budget: a declared precision change moves tops) */
  double eps;            /* margin above which a position is decided: 2k x the floor's largest top-2 error */
  int decided, flips;    /* decided positions, of which the candidate's top token differs */
  int only_c, only_f;    /* positions where only the candidate's top token left the reference's / only the floor's */
  double mcn_p;          /* McNemar's p of only_c against only_f */
  int shared_min;        /* fewest tokens both servers listed at a position */
} dt_verdict;

typedef struct {
  /* options */
  const char *file, *server, *ref_server, *server_model, *api_s;
  long tokens, logprobs, concurrency, limit;
  double timeout_s;
  double kld_budget;     /* --kld-budget B nats (0: none): the mean KLD and the trimmed excess the candidate may
                          * add to the floor's, a precision change the reviewer accepted; the top-token arm is
                          * then reported, not gated */
  /* state */
  char **prompts;        /* [n_prompts] the prompts' text (check; owned) */
  int n_prompts;
  served_side sv[2];     /* sv[0] the candidate, sv[1] the reference (prepare) */
  int n_sv;
  char **texts;          /* [n_prompts] prompt + the reference's continuation (run; owned) */
  served_call *pass[N_PASS]; /* [n_prompts] each pass's answers, in prompt order (run; owned) */
  bool echo;             /* the passes asked echo + logprobs (not prompt_logprobs) */
  bool ids;              /* no --prompts and the reference takes no text: built-in token-id prompts, one
                            request per row (diverge_ids.h), decided in prepare by dids_probe */
  char kind_why[400];    /* what the probe saw ("" with --prompts: no probe) */
  dids_set dids;         /* the token-id prompts (ids) */
  diverge_result floor, cand; /* the reference's second pass against its first; the candidate's */
  dt_verdict v;
  bool ran;              /* the case ran to its comparison */
  char error[600];       /* why the case could not be compared ("" when it was) */
  double wall_s[N_PASS + 1]; /* continuation, then each scoring pass */
} dt_state;

static void dt_init(void *st) {
  dt_state *s = st;
  s->tokens = 64;
  s->logprobs = 20;
  s->concurrency = 8;
  s->timeout_s = 600;
  s->api_s = "auto";
}

static bool dt_option(void *st, int argc, char **argv, int *i, vstatus *err) {
  dt_state *s = st;
  const char *v;
  if (cli_opt(argc, argv, i, "--prompts", &v, err)) { if (v) s->file = v; }
  else if (cli_opt(argc, argv, i, "--server", &v, err)) { if (v) s->server = v; }
  else if (cli_opt(argc, argv, i, "--ref-server", &v, err)) { if (v) s->ref_server = v; }
  else if (cli_opt(argc, argv, i, "--server-model", &v, err)) { if (v) s->server_model = v; }
  else if (cli_opt(argc, argv, i, "--logprobs-api", &v, err)) { if (v) s->api_s = v; }
  else if (cli_opt(argc, argv, i, "--tokens", &v, err)) { if (v) *err = cli_int("--tokens", v, 1, 1 << 20, &s->tokens); }
  else if (cli_opt(argc, argv, i, "--logprobs", &v, err)) { if (v) *err = cli_int("--logprobs", v, 1, SERVED_MAX_TOP - 1, &s->logprobs); }
  else if (cli_opt(argc, argv, i, "--concurrency", &v, err)) { if (v) *err = cli_int("--concurrency", v, 2, 4096, &s->concurrency); }
  else if (cli_opt(argc, argv, i, "--limit", &v, err)) { if (v) *err = cli_int("--limit", v, 1, DT_MAX_PROMPTS, &s->limit); }
  else if (cli_opt(argc, argv, i, "--timeout", &v, err)) { if (v) *err = cli_double("--timeout", v, &s->timeout_s); }
  else if (cli_opt(argc, argv, i, "--kld-budget", &v, err)) {
    if (v && (cli_double("--kld-budget", v, &s->kld_budget) || !(s->kld_budget >= 0 && s->kld_budget <= 100)))
      *err = VERR("--kld-budget %s: must be a number of nats in [0, 100] (0: no budget, the floor's rule alone)", v);
  }
  else return false;
  return true;
}

static vstatus dt_options_done(void *st) {
  dt_state *s = st;
  if (!s->server) return VERR("option --server URL is required with --ref-server (the candidate build)");
  VTRY(served_spec_check("--server", s->server));
  VTRY(served_spec_check("--ref-server", s->ref_server)); /* its errors name --ref-server */
  if (strcmp(s->api_s, "auto") && strcmp(s->api_s, "prompt_logprobs") && strcmp(s->api_s, "echo"))
    return VERR("option --logprobs-api: '%s' is not auto, prompt_logprobs or echo", s->api_s);
  if (!(s->timeout_s > 0)) return VERR("option --timeout: %g is not a positive number of seconds", s->timeout_s);
  return V_OK;
}

/* Reads the prompts: one JSON object per non-blank line with a non-empty string "prompt". */
static vstatus read_prompts(dt_state *s) {
  char *data;
  VTRY(vfile_read(s->file, &data, NULL));
  vstatus e = V_OK;
  int line = 0, cap = 0;
  for (char *p = data, *nl; p && *p && !e; p = nl ? nl + 1 : NULL) {
    nl = strchr(p, '\n');
    if (nl) *nl = 0;
    line++;
    if (strspn(p, " \t\r") == strlen(p)) continue;
    if (s->limit && s->n_prompts == s->limit) break;
    cJSON *j = cJSON_Parse(p);
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(j, "prompt");
    if (!cJSON_IsObject(j)) e = VERR("%s:%d: not a JSON object", s->file, line);
    else if (!cJSON_IsString(pr) || !pr->valuestring[0]) e = VERR("%s:%d: field 'prompt': not a non-empty string", s->file, line);
    else if (s->n_prompts == DT_MAX_PROMPTS) e = VERR("%s:%d: more than %d prompts", s->file, line, DT_MAX_PROMPTS);
    else {
      if (s->n_prompts == cap) {
        cap = cap ? 2 * cap : 64;
        char **np = realloc(s->prompts, (size_t)cap * sizeof *np);
        if (!np) e = VERR("%s: out of memory", s->file);
        else s->prompts = np;
      }
      if (!e && !(s->prompts[s->n_prompts] = strdup(pr->valuestring))) e = VERR("%s: out of memory", s->file);
      if (!e) s->n_prompts++;
    }
    cJSON_Delete(j);
  }
  free(data);
  if (!e && !s->n_prompts) e = VERR("%s: no prompt in the file", s->file);
  return e;
}

/* Without --prompts: the built-in set (diverge_prompts.h), its first --limit. */
static vstatus builtin_prompts(dt_state *s) {
  const int n = s->limit && s->limit < dt_n_builtin_prompts ? s->limit : dt_n_builtin_prompts;
  if (!(s->prompts = calloc((size_t)n, sizeof *s->prompts))) return VERR("--prompts: out of memory");
  for (; s->n_prompts < n; s->n_prompts++)
    if (!(s->prompts[s->n_prompts] = strdup(dt_builtin_prompts[s->n_prompts]))) return VERR("--prompts: out of memory");
  return V_OK;
}

/* The prompts are read here, so a malformed file is a usage error before anything runs. */
static vstatus dt_check(void *st, const vsuite_ctx *x) {
  (void)x;
  dt_state *s = st;
  return s->n_prompts ? V_OK : s->file ? read_prompts(s) : builtin_prompts(s);
}

/* Opens the pair; without --prompts, asks the reference whether it takes text (dids_probe): a token-id
 * server gets the built-in token-id prompts instead of the text ones (so before the cases are planned:
 * the case id names the kind). */
static vstatus dt_prepare(void *st, const vsuite_ctx *x, bool *done) {
  (void)done;
  dt_state *s = st;
  VTRY(dt_check(st, x));
  VTRY(served_pair_open(x->sink, s->server, s->ref_server, s->server_model, s->timeout_s, s->sv, &s->n_sv));
  if (!s->file) {
    VTRY(dids_probe(&s->sv[1], s->prompts[0], &s->ids, s->kind_why, sizeof s->kind_why));
    if (s->ids) {
      const int n = s->limit && s->limit < DIDS_PROMPTS ? (int)s->limit : DIDS_PROMPTS;
      VTRY(dids_make(&s->dids, &s->sv[1], n, x->seed));
      for (int i = 0; i < s->n_prompts; i++) free(s->prompts[i]);
      free(s->prompts);
      s->prompts = NULL;
      s->n_prompts = n;
    }
  }
  return V_OK;
}

static int dt_n_cases(const void *st, const vsuite_ctx *x) {
  (void)st, (void)x;
  return 1;
}

static void case_id(const dt_state *s, char *id, size_t cap) {
  /* the built-in prompts are their own case: a plan may run them beside a file's */
  snprintf(id, cap, "%s%s_t%ld_k%ld", s->ids ? "ids" : "text", s->file ? "" : "_builtin", s->tokens, s->logprobs);
}

static void add_params(const dt_state *s, const vsuite_ctx *x, vrecord *r) {
  rec_param_str(r, "prompts", s->file ? s->file : "built-in"); /* built-in: diverge_prompts.c, diverge_ids.c */
  rec_param_str(r, "prompt_kind", s->ids ? "token_ids" : "text");
  if (s->kind_why[0]) rec_param_str(r, "prompt_kind_probe", s->kind_why);
  if (s->ids) {
    char d[160];
    snprintf(d, sizeof d, "%d prompts of %d ids drawn below %d from the seed, continued greedily by the reference; "
             "one max_tokens 1 request per position", s->dids.n, DIDS_PREFIX, s->dids.vocab);
    rec_param_str(r, "token_id_prompts", d);
  }
  rec_param_int(r, "n_prompts", s->n_prompts);
  rec_param_int(r, "tokens", s->tokens);
  rec_param_int(r, "logprobs", s->logprobs);
  rec_param_int(r, "concurrency", s->concurrency);
  rec_param_int(r, "seed", (int64_t)x->seed);
  rec_param_str(r, "server", s->sv[0].conn.shown);
  rec_param_str(r, "ref_server", s->sv[1].conn.shown);
  rec_param_str(r, "model", s->sv[1].id.id);
}

/* The two records: the floor (path "<ref path>@floor") and the candidate. */
static vstatus make_records(dt_state *s, const vsuite_ctx *x, veng *recs, vrecord **fl, vrecord **cand) {
  char id[64], fpath[320];
  case_id(s, id, sizeof id);
  snprintf(fpath, sizeof fpath, "%.300s@floor", s->sv[1].path);
  if (!(*fl = eng_new(recs, "diverge", id, fpath)) || !(*cand = eng_new(recs, "diverge", id, s->sv[0].path)))
    return V_ERR;
  add_params(s, x, *fl);
  add_params(s, x, *cand);
  return V_OK;
}

static vstatus dt_plan(void *st, const vsuite_ctx *x, int c, veng *recs) {
  (void)c;
  vrecord *fl, *cand;
  return make_records(st, x, recs, &fl, &cand);
}

/* ---- the requests ---- */

typedef struct {
  dt_state *s;
  int side;              /* 0 the candidate, 1 the reference */
  bool continue_;        /* the continuation pass (greedy tokens), else a scoring pass */
  bool reverse;          /* call i is prompt n-1-i */
} body_ctx;

static vstatus make_body(void *vctx, served_call *calls, int i) {
  const body_ctx *b = vctx;
  const dt_state *s = b->s;
  const int p = b->reverse ? s->n_prompts - 1 - i : i;
  served_gen g = served_gen_default();
  g.model = s->sv[b->side].id.id;
  g.temperature = 0;
  if (b->continue_) {
    g.prompt = s->prompts[p];
    g.max_tokens = (int)s->tokens;
  } else {
    g.prompt = s->texts[p];
    g.max_tokens = 1;
    /* the prompt's ids name the token at each position: without them a prompt_logprobs entry is read
     * as vLLM orders it (the position's token first), which a JSON encoder that sorts integer keys
     * (node's) does not keep */
    g.return_token_ids = true;
    if (s->echo) g.echo = true, g.logprobs = (int)s->logprobs;
    else g.prompt_logprobs = (int)s->logprobs;
  }
  return served_build_completion(&g, &calls[i].body);
}

/* Sends one pass: n completions to side `side` into *out (in prompt order), at most conc in flight.
 * The first failed call's message goes to s->error. */
static vstatus send_pass(dt_state *s, int side, bool cont, bool reverse, int conc, served_call **out, double *wall) {
  const int n = s->n_prompts;
  served_call *calls = calloc((size_t)n, sizeof *calls);
  if (!calls) return VERR("diverge: out of memory for %d requests", n);
  for (int i = 0; i < n; i++) calls[i] = (served_call){.path = SERVED_COMPLETIONS, .echo = !cont && s->echo};
  body_ctx b = {s, side, cont, reverse};
  const double t0 = vclock_now();
  vstatus e = served_calls_run(&s->sv[side].conn, calls, n, conc, vinterrupted, make_body, &b);
  *wall = vclock_now() - t0;
  if (e) { served_calls_free(calls, n); free(calls); return e; }
  if (reverse) /* back to prompt order */
    for (int i = 0; i < n / 2; i++) {
      served_call t = calls[i];
      calls[i] = calls[n - 1 - i];
      calls[n - 1 - i] = t;
    }
  for (int i = 0; i < n && !s->error[0]; i++)
    if (!calls[i].ok)
      snprintf(s->error, sizeof s->error, "%s, prompt %d: %s", s->sv[side].role, i + 1,
               calls[i].sent ? calls[i].error : "not sent (interrupted)");
  *out = calls;
  return V_OK;
}

/* True when every answer of a scoring pass carries the prompt's logprobs. */
static bool has_prompt_lp(const served_call *calls, int n) {
  for (int i = 0; i < n; i++)
    if (!calls[i].ok || calls[i].reply.n_prompt_lp < 2) return false;
  return true;
}

/* ---- the comparison ---- */

static vstatus alloc_result(diverge_result *r, const char *path, int rows) {
  memset(r, 0, sizeof *r);
  snprintf(r->path, sizeof r->path, "%.120s", path); /* for messages only: the records name the side in full */
  r->supported = true;
  const size_t n = (size_t)(rows > 0 ? rows : 1);
  r->kld = calloc(n, sizeof *r->kld), r->dp = calloc(n, sizeof *r->dp), r->margin = calloc(n, sizeof *r->margin);
  r->top_err = calloc(n, sizeof *r->top_err), r->same = calloc(n, 1);
  if (!r->kld || !r->dp || !r->margin || !r->top_err || !r->same) return VERR("diverge: out of memory for %d positions", rows);
  return V_OK;
}

/* Compares pass `other` with the reference's first pass, position by position, into r. False with
 * the reason in s->error when a text's positions cannot be paired. */
static vstatus compare_pass(dt_state *s, int other, diverge_result *r, int *shared_min, bool *ok) {
  int rows = 0;
  *ok = true;
  for (int i = 0; i < s->n_prompts; i++) {
    const served_reply *a = &s->pass[PASS_REF][i].reply, *b = &s->pass[other][i].reply;
    if (a->n_prompt_lp != b->n_prompt_lp) {
      snprintf(s->error, sizeof s->error, "prompt %d: the reference scored %d positions, the %s %d: the servers "
               "tokenize the text differently", i + 1, a->n_prompt_lp, other == PASS_CAND ? "candidate" : "reference again",
               b->n_prompt_lp);
      *ok = false;
      return V_OK;
    }
    rows += a->n_prompt_lp - 1; /* position 0 has no logprob: nothing precedes it */
  }
  VTRY(alloc_result(r, other == PASS_CAND ? s->sv[0].path : s->sv[1].path, rows));
  r->rows = rows;
  int row = 0;
  for (int i = 0; i < s->n_prompts; i++) {
    const served_reply *a = &s->pass[PASS_REF][i].reply, *b = &s->pass[other][i].reply;
    for (int j = 1; j < a->n_prompt_lp; j++, row++) {
      dtext_pos d;
      char why[300];
      const bool cmp_ok = s->ids ? dtext_compare_dist(&a->prompt_lp[j], &b->prompt_lp[j], &d, why, sizeof why)
                                 : dtext_compare(&a->prompt_lp[j], &b->prompt_lp[j], &d, why, sizeof why);
      if (!cmp_ok) {
        snprintf(s->error, sizeof s->error, "prompt %d, position %d: %s", i + 1, j, why);
        *ok = false;
        return V_OK;
      }
      r->kld[row] = d.kld, r->dp[row] = d.dp, r->margin[row] = d.margin, r->top_err[row] = d.top_err;
      r->same[row] = d.same_top;
      r->same_top_pct += d.same_top;
      if (row == 0 || d.shared < *shared_min) *shared_min = d.shared;
    }
  }
  return diverge_summarize(r);
}

/* The candidate against the floor, as `vouch diverge --baseline` judges a path (diverge_record). */
static vstatus judge(dt_state *s) {
  dt_verdict *v = &s->v;
  const double k = VOUCH_ACCURACY_RATIO;
  VTRY(diverge_floor_judge(&s->cand, &s->floor, k, &v->fl));
  v->fl.bound = fmax(v->fl.bound, DT_KLD_RESOLUTION) + s->kld_budget; /* NaN (no paired row) stays NaN: fails */
  if (isnan(v->fl.base_mean)) v->fl.bound = NAN;
  v->kld_ok = s->cand.kld_mean <= v->fl.bound;
  v->bulk_ok = !(v->fl.bulk > fmax(3 * v->fl.bulk_se, DT_KLD_RESOLUTION) + s->kld_budget);
  v->same_gated = s->kld_budget == 0;
  double ftop = 0;
  for (int i = 0; i < s->floor.rows; i++)
    if (s->floor.top_err[i] > ftop) ftop = s->floor.top_err[i];
  v->eps = 2 * k * ftop;
  int dec_f = 0; /* decided positions where the floor's top token left the reference's */
  for (int i = 0; i < s->cand.rows; i++) {
    if (s->cand.margin[i] > v->eps) {
      v->decided++;
      v->flips += !s->cand.same[i];
      dec_f += !s->floor.same[i];
    }
    v->only_c += !s->cand.same[i] && s->floor.same[i];
    v->only_f += s->cand.same[i] && !s->floor.same[i];
  }
  v->mcn_p = stat_mcnemar_p(v->only_c, v->only_f);
  v->same_ok = !(v->flips > dec_f && v->only_c > v->only_f && v->mcn_p < 0.01);
  if (!v->same_gated) v->same_ok = true; /* reported (metrics), not a check: the budget accepted the change */
  return V_OK;
}

/* The token-id passes (diverge_ids.h): the reference's continuation, then the reference, the floor (the
 * reference again, one request at a time, reverse order) and the candidate, one request per row. A
 * failure's message goes to s->error. */
static vstatus run_ids(dt_state *s) {
  const int conc = (int)s->concurrency;
  const long L = s->sv[1].id.max_model_len;
  fprintf(stderr, "diverge: the reference takes no text (%s): %d built-in token-id prompts of %d ids, %ld greedy "
          "tokens each from the reference %s, one request per position\n", s->kind_why, s->dids.n, DIDS_PREFIX,
          s->tokens, s->sv[1].conn.shown);
  if (L && DIDS_PREFIX + s->tokens > L) {
    snprintf(s->error, sizeof s->error, "a token-id prompt of %d ids and %ld tokens exceeds the reference's "
             "max_model_len %ld (--tokens)", DIDS_PREFIX, s->tokens, L);
    return V_OK;
  }
  VTRY(dids_continue(&s->dids, &s->sv[1], (int)s->tokens, conc, s->error, sizeof s->error));
  if (s->error[0]) return V_OK;
  VTRY(dids_pass(&s->dids, &s->sv[1], (int)s->logprobs, false, conc, &s->pass[PASS_REF], &s->wall_s[1], s->error, sizeof s->error));
  VTRY(dids_pass(&s->dids, &s->sv[1], (int)s->logprobs, true, 1, &s->pass[PASS_FLOOR], &s->wall_s[2], s->error, sizeof s->error));
  VTRY(dids_pass(&s->dids, &s->sv[0], (int)s->logprobs, false, conc, &s->pass[PASS_CAND], &s->wall_s[3], s->error, sizeof s->error));
  return V_OK;
}

/* The text passes: the reference's continuation, then the three scoring passes with prompt logprobs
 * (or echo). A failure's message goes to s->error. */
static vstatus run_text(dt_state *s) {
  const int n = s->n_prompts, conc = (int)s->concurrency;
  fprintf(stderr, "diverge: %d prompts, %ld greedy tokens each from the reference %s\n", n, s->tokens, s->sv[1].conn.shown);
  served_call *cont = NULL;
  VTRY(send_pass(s, 1, true, false, conc, &cont, &s->wall_s[0]));
  s->texts = calloc((size_t)n, sizeof *s->texts);
  for (int i = 0; s->texts && i < n && !s->error[0]; i++) {
    const served_choice *ch = served_reply_choice(&cont[i].reply, 0);
    const char *t = ch ? ch->text : "";
    const size_t a = strlen(s->prompts[i]), b = strlen(t);
    if ((s->texts[i] = malloc(a + b + 1))) memcpy(s->texts[i], s->prompts[i], a), memcpy(s->texts[i] + a, t, b + 1);
    else snprintf(s->error, sizeof s->error, "out of memory for the texts");
  }
  served_calls_free(cont, n);
  free(cont);
  if (!s->texts) return VERR("diverge: out of memory for %d texts", n);
  if (s->error[0]) return V_OK;
  /* the reference's first pass decides how logprobs are asked (auto: prompt_logprobs when it gives them) */
  s->echo = !strcmp(s->api_s, "echo");
  VTRY(send_pass(s, 1, false, false, conc, &s->pass[PASS_REF], &s->wall_s[1]));
  if (!s->echo && !strcmp(s->api_s, "auto") && !has_prompt_lp(s->pass[PASS_REF], n)) {
    served_calls_free(s->pass[PASS_REF], n);
    free(s->pass[PASS_REF]);
    s->error[0] = 0;
    s->echo = true;
    VTRY(send_pass(s, 1, false, false, conc, &s->pass[PASS_REF], &s->wall_s[1]));
  }
  fprintf(stderr, "diverge: texts scored with %s; the floor: the reference again, one at a time, reverse order\n",
          s->echo ? "echo + logprobs" : "prompt_logprobs");
  VTRY(send_pass(s, 1, false, true, 1, &s->pass[PASS_FLOOR], &s->wall_s[2]));
  VTRY(send_pass(s, 0, false, false, conc, &s->pass[PASS_CAND], &s->wall_s[3]));
  return V_OK;
}

static vstatus dt_run(void *st, const vsuite_ctx *x, int c) {
  (void)x, (void)c;
  dt_state *s = st;
  const int n = s->n_prompts;
  VTRY(s->ids ? run_ids(s) : run_text(s));
  if (s->error[0]) return V_OK;
  for (int p = 0; p < N_PASS; p++)
    if (!has_prompt_lp(s->pass[p], n)) {
      snprintf(s->error, sizeof s->error, "the %s gave no prompt logprobs (asked with %s)",
               p == PASS_CAND ? "candidate" : "reference", s->ids ? "one request per position" : s->echo ? "echo + logprobs" : "prompt_logprobs");
      return V_OK;
    }
  bool ok;
  int smin_f = 0, smin_c = 0;
  VTRY(compare_pass(s, PASS_FLOOR, &s->floor, &smin_f, &ok));
  if (ok) VTRY(compare_pass(s, PASS_CAND, &s->cand, &smin_c, &ok));
  if (!ok) return V_OK;
  s->v.shared_min = smin_c;
  VTRY(judge(s));
  s->ran = true;
  return V_OK;
}

static void result_metrics(vrecord *r, const diverge_result *d) {
  double *k = malloc((size_t)(d->rows > 0 ? d->rows : 1) * sizeof *k);
  int n = 0;
  for (int i = 0; k && i < d->rows; i++)
    if (isfinite(d->kld[i])) k[n++] = d->kld[i];
  rec_metric_samples(r, "kld", "nats", RD_MEAN, RB_LOWER, k, n, 0);
  free(k);
  rec_metric_value(r, "kld_se", "nats", RB_LOWER, d->kld_se);
  rec_metric_value(r, "kld_p99", "nats", RB_LOWER, d->kld_p99);
  rec_metric_value(r, "kld_median", "nats", RB_LOWER, d->kld_median);
  rec_metric_value(r, "same_top_pct", "%", RB_HIGHER, d->same_top_pct);
  if (isfinite(d->rms_dp)) rec_metric_value(r, "rms_dp", "", RB_LOWER, d->rms_dp);
  rec_metric_value(r, "positions", "", RB_NONE, d->rows);
}

static vstatus dt_record(void *st, const vsuite_ctx *x, int c, veng *recs) {
  (void)c;
  dt_state *s = st;
  vrecord *fl, *cand;
  VTRY(make_records(s, x, recs, &fl, &cand));
  const char *api = s->ids ? "logprobs, one request per position" : s->echo ? "echo" : "prompt_logprobs";
  rec_param_str(fl, "logprobs_api", api);
  rec_param_str(cand, "logprobs_api", api);
  if (!s->ran) {
    char why[640];
    snprintf(why, sizeof why, "not compared: %s", s->error[0] ? s->error : "the run stopped");
    rec_set_status(fl, REC_ERROR, why);
    rec_set_status(cand, REC_ERROR, why);
  } else {
    const dt_verdict *v = &s->v;
    result_metrics(fl, &s->floor);
    rec_metric_value(fl, "wall_s", "s", RB_LOWER, s->wall_s[2]);
    rec_param_str(fl, "floor", "the reference's texts scored again one request at a time in reverse order, against "
                               "its first pass (--concurrency in flight, file order)");
    result_metrics(cand, &s->cand);
    rec_metric_value(cand, "wall_s", "s", RB_LOWER, s->wall_s[3]);
    rec_metric_value(cand, "shared_tokens_min", "", RB_HIGHER, v->shared_min);
    rec_metric_value(cand, "floor_kld", "nats", RB_NONE, s->floor.kld_mean);
    rec_metric_value(cand, "decided_positions", "", RB_NONE, v->decided);
    rec_metric_value(cand, "decided_flips", "", RB_LOWER, v->flips);
    rec_metric_value(cand, "positions_only_candidate_missed", "", RB_LOWER, v->only_c);
    rec_metric_value(cand, "positions_only_floor_missed", "", RB_NONE, v->only_f);
    rec_metric_value(cand, "same_top_mcnemar_p", "", RB_HIGHER, v->mcn_p);
    rec_metric_value(cand, "kld_excess_trimmed", "nats", RB_NONE, v->fl.bulk);
    rec_metric_value(cand, "kld_excess_trimmed_se", "nats", RB_NONE, v->fl.bulk_se);
    char src[560];
    snprintf(src, sizeof src, "floor: the reference against itself under another batch composition (k=%g): mean KLD "
             "%.3g, k^2 x that + 3 se of the paired difference (se %.2g); its %g%%-trimmed mean <= 3 of its se (%.2g); "
             "either at least %g nats (the logprobs' resolution); KLD over the tokens both list + the rest, a lower bound",
             VOUCH_ACCURACY_RATIO, v->fl.base_mean, v->fl.diff_se, 100 * DIVERGE_BULK_TRIM, v->fl.bulk_se, DT_KLD_RESOLUTION);
    if (s->kld_budget > 0) {
      const size_t n = strlen(src);
      snprintf(src + n, sizeof src - n, "; plus --kld-budget %g nats on both (a declared precision change; the top "
               "token reported, not gated)", s->kld_budget);
    }
    rec_param_str(cand, "bound_source", src);
    rec_param_num(cand, "kld_budget", s->kld_budget);
    rec_param_num(cand, "margin_eps", v->eps);
    rec_param_num(cand, "kld_resolution", DT_KLD_RESOLUTION);
    rec_set_threshold(cand, "kld", "<=", v->fl.bound);
    rec_check_add(cand, "kld_bulk_within_floor", v->bulk_ok);
    if (v->same_gated) rec_check_add(cand, "same_top_on_decided_positions", v->same_ok);
    /* undecided only when nothing failed: a KLD or bulk check that failed decided the case; under a budget
     * the KLD arms decide (the top-token arm does not gate) */
    if (v->same_gated && v->decided == 0 && v->kld_ok && v->bulk_ok)
      rec_set_status(cand, REC_UNDECIDED, "no position's reference margin exceeds the floor's "
                                          "2k x top-2 error: the top-token check decided nothing");
  }
  rec_finalize(fl);
  rec_finalize(cand);
  return V_OK;
}

static void print_row(const char *name, const diverge_result *r, const char *status) {
  printf("%-40.40s %7d %10.3g %9.2g %10.3g %7.2f%%  %s\n", name, r->rows, r->kld_mean, r->kld_se, r->kld_p99,
         r->same_top_pct, status);
}

static void dt_print(const void *st, const vsuite_ctx *x, const veng *recs) {
  (void)recs;
  const dt_state *s = st;
  printf("diverge --ref-server: %d %sprompts from %s, %ld greedy tokens each from the reference, top-%ld logprobs (%s); "
         "wall %.1f s\n", s->n_prompts, s->ids ? "token-id " : "", s->file ? s->file : "built-in", s->tokens, s->logprobs,
         s->ids ? "one request per position" : s->echo ? "echo" : "prompt_logprobs", x->wall_s);
  if (s->kind_why[0]) printf("prompt kind: %s (%s)\n", s->ids ? "token ids" : "text", s->kind_why);
  for (int k = 0; k < s->n_sv; k++) served_side_print(&s->sv[k]);
  if (!s->ran) {
    printf("not compared: %s\n", s->error[0] ? s->error : "the run stopped");
    return;
  }
  const dt_verdict *v = &s->v;
  printf("%-40s %7s %10s %9s %10s %8s\n", "compared with the reference", "rows", "mean KLD", "se", "p99", "same-top");
  print_row("floor: the reference again (other batching)", &s->floor, "floor");
  const bool pass = v->kld_ok && v->bulk_ok && v->same_ok;
  print_row(s->sv[0].path, &s->cand, pass ? (v->decided || !v->same_gated ? "pass" : "undecided") : "FAIL");
  if (!v->same_gated)
    printf("--kld-budget %g nats: added to both KLD bounds below (a declared precision change); the top token is "
           "reported, not gated\n", s->kld_budget);
  printf("rule: mean KLD %.3g <= k^2 x floor %.3g + 3 se%s = %.3g: %s; trimmed excess %.3g <= 3 x %.3g%s: %s (either "
         "bound at least %.0e nats, the logprobs' resolution); "
         "top token on %d decided positions (margin > %.3g): %d differ, only the candidate's %d vs only the floor's %d, "
         "McNemar p %.3g: %s\n",
         s->cand.kld_mean, v->fl.base_mean, v->same_gated ? "" : " + budget", v->fl.bound, v->kld_ok ? "ok" : "FAIL",
         v->fl.bulk, v->fl.bulk_se, v->same_gated ? "" : " + budget", v->bulk_ok ? "ok" : "FAIL", DT_KLD_RESOLUTION, v->decided, v->eps, v->flips, v->only_c, v->only_f, v->mcn_p,
         v->same_ok ? "ok" : "FAIL");
  printf("ratio of the candidate's mean KLD to the floor's: %.3g (fewest tokens both listed at a position: %d)\n",
         s->floor.kld_mean > 0 ? s->cand.kld_mean / s->floor.kld_mean : INFINITY, v->shared_min);
}

static void dt_free(void *st) {
  dt_state *s = st;
  for (int p = 0; p < N_PASS; p++) {
    if (s->pass[p]) served_calls_free(s->pass[p], s->n_prompts);
    free(s->pass[p]);
  }
  for (int i = 0; i < s->n_prompts; i++) {
    if (s->prompts) free(s->prompts[i]);
    if (s->texts) free(s->texts[i]);
  }
  dids_free(&s->dids);
  free(s->prompts);
  free(s->texts);
  diverge_result_free(&s->floor);
  diverge_result_free(&s->cand);
  served_pair_close(s->sv, s->n_sv);
}

const vsuite vsuite_diverge_text = {
    .name = "diverge",
    .usage = USAGE,
    .no_model = true,
    .state_size = sizeof(dt_state),
    .init = dt_init,
    .option = dt_option,
    .options_done = dt_options_done,
    .check = dt_check,
    .prepare = dt_prepare,
    .n_cases = dt_n_cases,
    .run = dt_run,
    .record = dt_record,
    .plan = dt_plan,
    .print = dt_print,
    .free = dt_free,
    .case_noun = "texts",
};

const vsuite *diverge_text_mode(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--ref-server") || !strncmp(argv[i], "--ref-server=", 13)) return &vsuite_diverge_text;
  return NULL;
}
