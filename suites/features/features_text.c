/* vouch features --server URL --ref-server URL: the features users keep, checked on text over two
 * OpenAI-compatible servers (the candidate build and the reference build of the same model), with no
 * model of vouch's. One case per check (suites/features/features_text_checks.h), one record each
 * (suite "features", case the check's name, path "server:<model>"): pass or fail decided against the
 * reference's answer to the same request, undecided when the reference cannot decide it (docs/verdicts.md
 * "Undecided is not a pass"), not_supported when the reference refuses the feature. The pair is
 * opened and checked as diverge --ref-server opens it (suites/served/served_pair.h). */
#include "suites/features/features_text.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "suites/engine/cli.h"
#include "suites/engine/record.h"
#include "suites/features/features_text_checks.h"

static const char USAGE[] =
    "usage: vouch features --server URL --ref-server URL [--server-model NAME] [--checks LIST] [--struct-style S]\n"
    "                      [--timeout S] [--seed S] [--json FILE]\n" SERVED_LAUNCH_HELP
    "  The features users keep, on text, of the candidate build (--server) against the reference build of\n"
    "  the same model (--ref-server; same id, root and max_model_len in /v1/models, else refused before any\n"
    "  request): stop_strings, stop_token_ids, max_tokens, min_tokens, seeded_sampling, temperature (the\n"
    "  first token's top-20 logprobs, KLD against the reference's own repeat), top_p (draws inside the\n"
    "  reference's top-p set, chi-square alpha 0.001), json_schema, regex, choice (the answer validates),\n"
    "  max_model_len (a prompt 8 tokens short of it), n_choices, stream (streamed = whole) and logprobs\n"
    "  (sane, and the reference's within its own repeat). Each is decided against the reference's answer to\n"
    "  the same request: undecided when the reference cannot decide it (it does not reproduce itself, does\n"
    "  not do the feature), not_supported when it refuses the feature. One request at a time per server;\n"
    "  --seed picks the prompt and the sampling seed; --checks NAME,... runs those only. --struct-style:\n"
    "  how structured output is asked (auto: structured_outputs, else guided_*, else response_format, the\n"
    "  first the reference honours: not refused, and its answer validates).\n"
    "  No --model: the servers hold the model. API key: $VOUCH_SERVER_API_KEY, else $OPENAI_API_KEY.\n"
    "  defaults: --struct-style auto --timeout 600\n";

/* The prompts a seed picks from: short, ordinary text, so that a greedy continuation is text too. */
static const char *const PROMPTS[] = {
    "The committee met on a rainy Tuesday to decide whether the old bridge",
    "To bake a simple loaf of bread you need flour, water, salt and",
    "Prime numbers below twenty are 2, 3, 5, 7, 11, 13, 17 and",
    "Water boils at 100 degrees Celsius at sea level, but at higher altitudes",
    "The quick brown fox jumps over the lazy dog, and then the dog",
    "In 1969 the first people walked on the Moon; the mission was called",
};
#define N_PROMPTS ((int)(sizeof PROMPTS / sizeof *PROMPTS))

typedef struct {
  const char *server, *ref_server, *server_model, *style_s, *checks_s;
  double timeout_s;
  served_side sv[2];     /* sv[0] the candidate, sv[1] the reference (prepare) */
  int n_sv;
  ft_ctx c;              /* what the checks share (prepare) */
  int sel[FT_N_CHECKS];  /* [n_sel] the checks to run, in order (--checks, default all): case c is check sel[c] */
  int n_sel;
  ft_result res[FT_N_CHECKS]; /* [n_sel] case c's result */
  bool ran[FT_N_CHECKS]; /* res[c] holds case c's result */
  bool broken;           /* a check's client failed (reported): later checks do not run */
} fts_state;

static void fts_init(void *st) {
  fts_state *s = st;
  s->style_s = "auto";
  s->timeout_s = 600;
}

static bool fts_option(void *st, int argc, char **argv, int *i, vstatus *err) {
  fts_state *s = st;
  const char *v;
  if (cli_opt(argc, argv, i, "--server", &v, err)) { if (v) s->server = v; }
  else if (cli_opt(argc, argv, i, "--ref-server", &v, err)) { if (v) s->ref_server = v; }
  else if (cli_opt(argc, argv, i, "--server-model", &v, err)) { if (v) s->server_model = v; }
  else if (cli_opt(argc, argv, i, "--struct-style", &v, err)) { if (v) s->style_s = v; }
  else if (cli_opt(argc, argv, i, "--checks", &v, err)) { if (v) s->checks_s = v; }
  else if (cli_opt(argc, argv, i, "--timeout", &v, err)) { if (v) *err = cli_double("--timeout", v, &s->timeout_s); }
  else return false;
  return true;
}

/* --checks NAME,NAME,... into sel (in the suite's order; default every check). Error names the option
 * and the unknown name. */
static vstatus parse_checks(fts_state *s) {
  bool want[FT_N_CHECKS] = {0};
  if (!s->checks_s) {
    for (int i = 0; i < FT_N_CHECKS; i++) want[i] = true;
  } else {
    for (const char *p = s->checks_s; *p;) {
      const size_t n = strcspn(p, ",");
      int k = -1;
      for (int i = 0; i < FT_N_CHECKS && k < 0; i++)
        if (strlen(ft_check_name(i)) == n && !strncmp(p, ft_check_name(i), n)) k = i;
      if (k < 0) return VERR("option --checks: '%.*s' is not a check (stop_strings, ..., logprobs: see --help)", (int)n, p);
      want[k] = true;
      p += n + (p[n] == ',');
    }
  }
  s->n_sel = 0;
  for (int i = 0; i < FT_N_CHECKS; i++)
    if (want[i]) s->sel[s->n_sel++] = i;
  if (!s->n_sel) return VERR("option --checks: no check named");
  return V_OK;
}

static vstatus fts_options_done(void *st) {
  fts_state *s = st;
  if (!s->server) return VERR("option --server URL is required with --ref-server (the candidate build)");
  VTRY(served_spec_check("--server", s->server));
  VTRY(served_spec_check("--ref-server", s->ref_server)); /* its errors name --ref-server */
  static const char *const styles[] = {"vllm", "guided", "openai"};
  s->c.style_auto = !strcmp(s->style_s, "auto");
  bool known = s->c.style_auto;
  for (int k = 0; k < 3; k++)
    if (!strcmp(s->style_s, styles[k])) s->c.style = (served_struct_style)k, known = true;
  if (!known) return VERR("option --struct-style: '%s' is not auto, vllm, guided or openai", s->style_s);
  if (!(s->timeout_s > 0)) return VERR("option --timeout: %g is not a positive number of seconds", s->timeout_s);
  return parse_checks(s);
}

static vstatus fts_prepare(void *st, const vsuite_ctx *x, bool *done) {
  (void)done;
  fts_state *s = st;
  VTRY(served_pair_open(x->sink, s->server, s->ref_server, s->server_model, s->timeout_s, s->sv, &s->n_sv));
  s->c.sv = s->sv;
  s->c.seed = x->seed;
  s->c.prompt = PROMPTS[x->seed % N_PROMPTS];
  return V_OK;
}

static int fts_n_cases(const void *st, const vsuite_ctx *x) {
  (void)x;
  return ((const fts_state *)st)->n_sel;
}

/* Check c's record with what is known before it runs; NULL on out of memory (error set). */
static vrecord *check_record(const fts_state *s, const vsuite_ctx *x, int c, veng *recs) {
  vrecord *rec = eng_new(recs, "features", ft_check_name(s->sel[c]), s->sv[0].path);
  if (!rec) return NULL;
  rec_param_str(rec, "server", s->sv[0].conn.shown);
  rec_param_str(rec, "ref_server", s->sv[1].conn.shown);
  rec_param_str(rec, "model", s->sv[1].id.id);
  rec_param_str(rec, "prompt", s->c.prompt);
  rec_param_int(rec, "seed", (int64_t)x->seed);
  return rec;
}

static vstatus fts_plan(void *st, const vsuite_ctx *x, int c, veng *recs) {
  return check_record(st, x, c, recs) ? V_OK : V_ERR;
}

static vstatus fts_run(void *st, const vsuite_ctx *x, int c) {
  (void)x;
  fts_state *s = st;
  if (s->broken) return V_OK;
  if (ft_check_run(&s->c, s->sel[c], &s->res[c])) {
    cli_print_error("features");
    s->broken = true;
    return V_OK;
  }
  s->ran[c] = true;
  return V_OK;
}

static vstatus fts_record(void *st, const vsuite_ctx *x, int c, veng *recs) {
  const fts_state *s = st;
  const ft_result *k = &s->res[c];
  if (!s->ran[c]) return V_OK;
  vrecord *rec = check_record(s, x, c, recs);
  if (!rec) return V_ERR;
  rec_param_str(rec, "detail", k->detail);
  if (k->bound_source) rec_param_str(rec, "bound_source", k->bound_source);
  if (isfinite(k->cand)) rec_metric_value(rec, "candidate", k->unit, RB_NONE, k->cand);
  if (isfinite(k->ref)) rec_metric_value(rec, "reference", k->unit, RB_NONE, k->ref);
  if (isfinite(k->bound)) rec_param_num(rec, "bound", k->bound);
  if (k->status == FT_NOT_SUPPORTED) rec_set_status(rec, REC_NOT_SUPPORTED, k->detail);
  else if (k->status == FT_UNDECIDED) rec_set_status(rec, REC_UNDECIDED, k->detail);
  else if (k->status == FT_ERROR) rec_set_status(rec, REC_ERROR, k->detail);
  else rec_check_add(rec, "feature_ok", k->status == FT_PASS);
  return rec_finalize(rec);
}

static const char *status_name(ft_status st) {
  static const char *const n[] = {"pass", "FAIL", "undecided", "not_supported", "error"};
  return n[st];
}

static void fts_print_case(void *st, const vsuite_ctx *x, int c) {
  (void)x;
  const fts_state *s = st;
  if (c == 0) {
    printf("features --ref-server: prompt '%s' (seed %llu)\n", s->c.prompt, (unsigned long long)x->seed);
    for (int k = 0; k < s->n_sv; k++) served_side_print(&s->sv[k]);
  }
  if (s->ran[c]) printf("  %-16s %-13s %s\n", ft_check_name(s->sel[c]), status_name(s->res[c].status), s->res[c].detail);
}

static void fts_free(void *st) {
  fts_state *s = st;
  ft_ctx_free(&s->c);
  served_pair_close(s->sv, s->n_sv);
}

const vsuite vsuite_features_text = {
    .name = "features",
    .usage = USAGE,
    .no_model = true,
    .state_size = sizeof(fts_state),
    .init = fts_init,
    .option = fts_option,
    .options_done = fts_options_done,
    .prepare = fts_prepare,
    .n_cases = fts_n_cases,
    .run = fts_run,
    .record = fts_record,
    .plan = fts_plan,
    .print_case = fts_print_case,
    .free = fts_free,
    .quiet_verdict = true,
    .case_noun = "checks",
};

const vsuite *features_text_mode(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--ref-server") || !strncmp(argv[i], "--ref-server=", 13)) return &vsuite_features_text;
  return NULL;
}
