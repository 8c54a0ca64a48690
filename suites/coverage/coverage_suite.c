/* vouch coverage: what each path's own selection rules can pick (vpath_ops.selectable) over an envelope
 * of step shapes, recorded into the run, so the report can join it with what the other steps' records
 * say ran (runner/evidence/report_coverage.c; issue 37). A case is one path; it opens the path on the
 * model at the envelope (max_seq = --batch, max_ctx = --context + the verification tokens), asks it for
 * its choices, closes it, and makes one record per (op, variant) ("coverage", "OP/VARIANT" as a
 * record's `ran` key, path). No step runs: seconds, whatever the envelope. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites/coverage/coverage_suite.h"
#include "suites/engine/cli.h"
#include "suites/engine/estimate_cost.h"
#include "suites/engine/record.h"
#include "suites/paths/paths.h"

static const char COVERAGE_USAGE[] =
    "usage: vouch coverage --paths A,B [--model DIR|synth:PRESET] [--batch N] [--context C] [--spec K]\n"
    "                      [--path-lib FILE] [--expect-fallback] [--json FILE]\n"
    "  What each path's own selection rules can pick, in its trace names: every (op, variant) the\n"
    "  path would run for steps of 1..--batch sequences (default 64) at contexts up to --context\n"
    "  (default 128k, capped at the model's positions), decode and K+1-token verification steps\n"
    "  (--spec K, default 7; 0: decode only), on the model, TP degree and variant words of each path\n"
    "  name. One record per (path, op, variant) with the first step shape that selects it. No step\n"
    "  runs. `vouch report` joins these records with the `ran` of every other record of the run: the\n"
    "  coverage table names each choice that no step ran (docs/verdicts.md). A path that does not\n"
    "  enumerate its choices (vpath_ops.selectable NULL) gets one not_supported record saying so.\n"
    VSUITE_EXPECT_FALLBACK_HELP
    "  defaults: --model synth:tiny --batch 64 --context 128k --spec 7\n";

typedef struct {
  long batch, context, spec; /* --batch, --context, --spec */
  vpath_envelope env;        /* the envelope asked of every path (check: --context capped by the model) */
  vtrace *sel;               /* [n_paths] each path's choices (a tally; run) */
  char (*why)[512];          /* [n_paths] why path c has no choices ("" when it has: run) */
  rec_status *st;            /* [n_paths] the status of a path without choices (not_supported, error) */
  int n;                     /* n_paths (prepare) */
} coverage_state;

static void coverage_init(void *st) {
  coverage_state *s = st;
  s->batch = 64;
  s->context = 128 * 1024;
  s->spec = 7;
}

static bool coverage_option(void *st, int argc, char **argv, int *i, vstatus *err) {
  coverage_state *s = st;
  const char *v;
  if (cli_opt(argc, argv, i, "--batch", &v, err)) { if (v) *err = cli_int("--batch", v, 1, 4096, &s->batch); }
  else if (cli_opt(argc, argv, i, "--context", &v, err)) { if (v) *err = cli_size("--context", v, &s->context); }
  else if (cli_opt(argc, argv, i, "--spec", &v, err)) { if (v) *err = cli_int("--spec", v, 0, 63, &s->spec); }
  else return false;
  return true;
}

static vstatus coverage_options_done(void *st) {
  coverage_state *s = st;
  if (s->context < 0) return VERR("option --context: must be >= 0");
  return V_OK;
}

/* The envelope on the model: contexts up to --context, capped so the last verification token stays
 * within max_position_embeddings. */
static vpath_envelope envelope_on(const coverage_state *s, long max_pos) {
  vpath_envelope e = {.max_batch = (int)s->batch, .max_tokens = (int)s->spec + 1};
  long c = s->context;
  if (c + e.max_tokens > max_pos) c = max_pos - e.max_tokens;
  e.max_context = c > 0 ? (int)c : 0;
  return e;
}

static vstatus coverage_check(void *st, const vsuite_ctx *x) {
  coverage_state *s = st;
  s->env = envelope_on(s, x->model->cfg.max_position_embeddings);
  return V_OK;
}

static vstatus coverage_prepare(void *st, const vsuite_ctx *x, bool *done) {
  coverage_state *s = st;
  *done = false;
  s->n = x->n_paths;
  s->sel = vcalloc((size_t)s->n, sizeof *s->sel, "coverage tallies");
  s->why = vcalloc((size_t)s->n, sizeof *s->why, "coverage reasons");
  s->st = vcalloc((size_t)s->n, sizeof *s->st, "coverage statuses");
  if (!s->sel || !s->why || !s->st) return V_ERR;
  for (int c = 0; c < s->n; c++) vtrace_init_tally(&s->sel[c]);
  return V_OK;
}

static int coverage_n_cases(const void *st, const vsuite_ctx *x) {
  (void)st;
  return x->n_paths;
}

/* Opens path c at the envelope and asks for its choices. A path that does not open or enumerate is a
 * result (its record says why), not an error. */
static vstatus coverage_run(void *st, const vsuite_ctx *x, int c) {
  coverage_state *s = st;
  const vpath_spec *sp = &x->paths[c];
  if (!sp->ops->selectable) {
    snprintf(s->why[c], sizeof s->why[c], "the path does not enumerate its choices (vpath_ops.selectable is NULL): "
             "no coverage table for it");
    s->st[c] = REC_NOT_SUPPORTED;
    return V_OK;
  }
  vpath_opts o = {.max_seq = s->env.max_batch, .max_ctx = s->env.max_context + s->env.max_tokens,
                  .n_threads = x->n_threads, .expect_fallback = x->expect_fallback};
  vpath p = {0};
  vstatus r = vpath_open(&p, sp, x->model, &o);
  if (r == V_OK) {
    r = p.ops->selectable(p.state, &s->env, &s->sel[c]);
    if (r != V_OK) verr_prefix("path %s: selectable", sp->name);
    vpath_close(&p);
  }
  if (r != V_OK) {
    snprintf(s->why[c], sizeof s->why[c], "%s", verr_msg());
    s->st[c] = r == V_UNSUPPORTED ? REC_NOT_SUPPORTED : REC_ERROR;
  }
  return V_OK;
}

/* The model and the envelope's parameters on a record (the report joins a choice with the records of the
 * same path on the same model). */
static vstatus env_params(vrecord *r, const vsuite_ctx *x, const vpath_envelope *e) {
  VTRY(rec_param_str(r, "model", x->model->source));
  VTRY(rec_param_int(r, "max_batch", e->max_batch));
  VTRY(rec_param_int(r, "max_context", e->max_context));
  return rec_param_int(r, "max_tokens", e->max_tokens);
}

/* The model's spec in a case id (rec_model_spec_len), at most 90 bytes. */
static int spec_len(const char *source) {
  const int n = rec_model_spec_len(source);
  return n < 90 ? n : 90;
}

static vstatus coverage_record(void *st, const vsuite_ctx *x, int c, veng *recs) {
  coverage_state *s = st;
  const char *path = x->paths[c].name;
  if (s->why[c][0]) {
    char id[100];
    snprintf(id, sizeof id, "- on %.*s", spec_len(x->model->source), x->model->source);
    vrecord *r = eng_new(recs, "coverage", id, path);
    if (!r) return V_ERR;
    VTRY(env_params(r, x, &s->env));
    rec_set_status(r, s->st[c], s->why[c]);
    return V_OK;
  }
  const vtrace *t = &s->sel[c];
  for (int i = 0; i < t->n; i++) {
    const vtrace_event *e = &t->ev[i];
    if (e->kind != TR_RAN && e->kind != TR_FALLBACK) continue;
    char key[REC_RAN_KEY_MAX], id[REC_RAN_KEY_MAX + 100];
    rec_ran_key(key, sizeof key, path, e->path, e->op, e->variant);
    /* the model in the case id: a plan covers one path on several models (pr: small and k2-lite) */
    snprintf(id, sizeof id, "%s on %.*s", e->kind == TR_RAN ? key : "-", spec_len(x->model->source), x->model->source);
    vrecord *r = eng_new(recs, "coverage", id, path);
    if (!r) return V_ERR;
    VTRY(env_params(r, x, &s->env));
    if (e->kind == TR_RAN) VTRY(rec_param_str(r, "choice", key)); /* the `ran` key the report joins on */
    if (e->kind == TR_FALLBACK) { /* the path hands its steps to another: nothing of its own to cover */
      char why[256];
      snprintf(why, sizeof why, "the path hands its steps to %.40s at %.32s: %.150s", e->variant, e->op, e->detail);
      rec_set_status(r, REC_NOT_SUPPORTED, why);
      continue;
    }
    VTRY(rec_param_str(r, "op", e->op));
    VTRY(rec_param_str(r, "variant", e->variant));
    VTRY(rec_param_str(r, "when", e->detail));
  }
  if (t->dropped) return VERR("coverage: path %s: more than %d distinct choices", path, t->max_events);
  return V_OK;
}

static void coverage_print_case(void *st, const vsuite_ctx *x, int c) {
  coverage_state *s = st;
  if (s->why[c][0]) {
    printf("coverage: %s: %s\n", x->paths[c].name, s->why[c]);
    return;
  }
  printf("coverage: %s: %d (op, variant) choices for batch 1-%d, contexts to %d, %d-token verification:\n",
         x->paths[c].name, s->sel[c].n, s->env.max_batch, s->env.max_context, s->env.max_tokens);
  for (int i = 0; i < s->sel[c].n; i++) {
    const vtrace_event *e = &s->sel[c].ev[i];
    printf("  %-24s %-22s %s\n", e->op, e->variant, e->detail);
  }
}

static vstatus coverage_paths_done(void *st, const vpath_spec *paths, int n) {
  (void)st;
  (void)paths;
  return n > 0 ? V_OK : VERR("option --paths: name at least one path");
}

/* The dry run: each path opens alone at the envelope (max_seq --batch, max_ctx --context + K+1), one
 * after the other; no step runs. */
static vstatus coverage_estimate(const void *st, const vsuite_est_ctx *x, vest *X) {
  const coverage_state *s = st;
  const vpath_envelope e = envelope_on(s, X->cfg->max_position_embeddings);
  for (int p = 0; p < x->n_paths; p++) {
    const double g0 = X->out->gpu_bytes, h0 = X->out->host_bytes;
    X->out->gpu_bytes = X->out->host_bytes = 0;
    vest_open_set(X, &x->paths[p], 1, e.max_batch, e.max_context + e.max_tokens, true);
    X->out->seconds += vest_open_s(X, x->paths[p], X->wbytes[0]) + COST_COVERAGE_S;
    if (g0 > X->out->gpu_bytes) X->out->gpu_bytes = g0; /* one at a time: the largest */
    if (h0 > X->out->host_bytes) X->out->host_bytes = h0;
  }
  vest_name_paths(X, x->paths, x->n_paths, false);
  return V_OK;
}

static void coverage_free(void *st) {
  coverage_state *s = st;
  for (int c = 0; s->sel && c < s->n; c++) vtrace_free(&s->sel[c]);
  free(s->sel);
  free(s->why);
  free(s->st);
}

const vsuite vsuite_coverage = {
    .name = "coverage",
    .usage = COVERAGE_USAGE,
    .default_model = "synth:tiny",
    .default_paths = NULL,
    .state_size = sizeof(coverage_state),
    .init = coverage_init,
    .option = coverage_option,
    .options_done = coverage_options_done,
    .check = coverage_check,
    .prepare = coverage_prepare,
    .n_cases = coverage_n_cases,
    .run = coverage_run,
    .record = coverage_record,
    .free = coverage_free,
    .quiet_verdict = true,
    .case_noun = "paths",
    .paths_done = coverage_paths_done,
    .print_case = coverage_print_case,
    .estimate = coverage_estimate,
};
