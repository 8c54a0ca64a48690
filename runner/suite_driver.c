/* The one suite driver (runner/suite.h). */
#include "runner/suite.h"

#include "common/interrupt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/interrupt.h"
#include "runner/cli.h"
#include "runner/record.h"
#include "suites/paths.h"

vstatus vsuite_split_names(const char *opt, const char *s, char **buf, const char ***out, int *n) {
  *buf = strdup(s);
  int cap = 1;
  for (const char *p = s; *p; p++) cap += *p == ',';
  const char **v = calloc((size_t)cap, sizeof *v);
  if (!*buf || !v) { free(v); return VERR("out of memory"); }
  int k = 0;
  char *save = NULL;
  for (char *t = strtok_r(*buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) v[k++] = t;
  if (k == 0) { free(v); return VERR("option %s: empty list", opt); }
  *out = v;
  *n = k;
  return V_OK;
}

vstatus vsuite_check_paths(const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (!vpaths_find(names[i])) return VERR("option --paths: unknown path '%s' (known: %s)", names[i], vpaths_names());
  return V_OK;
}

bool vsuite_any_host(const char *const *paths, int n) {
  for (int i = 0; i < n; i++)
    if (vpaths_host_weights(paths[i])) return true;
  return false;
}

vstatus vsuite_open_model(ds_model *m, const char *spec, uint64_t seed, int layers, bool host, const construct_opts *knobs,
                          construct_layout *L, bool need_layout) {
  if (!strncmp(spec, "synth:", 6) && construct_is_preset(spec + 6)) {
    construct_opts o;
    VTRY(construct_preset_opts(spec + 6, &o));
    if (knobs) {
      if (knobs->cos >= 0) o.cos = knobs->cos;
      if (knobs->gap > 0) o.gap = knobs->gap;
      if (knobs->answer_logit > 0) o.answer_logit = knobs->answer_logit;
    }
    if (layers > 0) o.layers = layers;
    construct_layout tmp;
    return construct_model_open(m, spec + 6, &o, seed, L ? L : &tmp);
  }
  VTRY(ds_model_open(m, spec, seed, layers, host));
  if (need_layout) {
    vstatus s = construct_layout_of(m, L);
    if (s) { ds_model_close(m); return s; }
  }
  return V_OK;
}

vstatus vsuite_emit_records(const char *file, veng *recs) {
  VTRY(eng_flush(recs));
  return eng_write_json(recs, file);
}

/* The options every suite shares, as given. */
typedef struct {
  const char *model;     /* --model */
  const char *paths;     /* --paths, comma-separated */
  bool paths_given;      /* --paths was given */
  const char *json;      /* --json FILE, NULL: none */
  uint64_t seed;         /* --seed */
  uint64_t model_seed;   /* --model-seed (constructed suites; the others open the model with --seed) */
  long threads;          /* --threads */
  construct_opts knobs;  /* --cos, --gap, --answer-logit (constructed suites; -1: the preset's) */
} shared_opts;

/* If argv[*i] is an option of the driver's, stores it in o and returns true. */
static bool shared_option(const vsuite *s, shared_opts *o, int argc, char **argv, int *i, vstatus *err) {
  const char *v;
  if (cli_opt(argc, argv, i, "--model", &v, err)) { if (v) o->model = v; }
  else if (cli_opt(argc, argv, i, "--paths", &v, err)) { if (v) { o->paths = v; o->paths_given = true; } }
  else if (cli_opt(argc, argv, i, "--json", &v, err)) { if (v) o->json = v; }
  else if (cli_opt(argc, argv, i, "--path-lib", &v, err)) { if (v) *err = vpaths_load_lib(v); }
  else if (cli_opt(argc, argv, i, "--seed", &v, err)) { if (v) *err = cli_u64("--seed", v, &o->seed); }
  else if (cli_opt(argc, argv, i, "--threads", &v, err)) { if (v) *err = cli_int("--threads", v, 0, 4096, &o->threads); }
  else if (!s->constructed) return false;
  else if (cli_opt(argc, argv, i, "--model-seed", &v, err)) { if (v) *err = cli_u64("--model-seed", v, &o->model_seed); }
  else if (cli_opt(argc, argv, i, "--cos", &v, err)) { if (v) *err = cli_double("--cos", v, &o->knobs.cos); }
  else if (cli_opt(argc, argv, i, "--gap", &v, err)) { if (v) *err = cli_double("--gap", v, &o->knobs.gap); }
  else if (cli_opt(argc, argv, i, "--answer-logit", &v, err)) {
    if (v) *err = cli_double("--answer-logit", v, &o->knobs.answer_logit);
  } else return false;
  return true;
}

/* The verdict: no record of the invocation failed or errored (a case that is not supported
 * neither passes nor fails). */
static bool records_pass(const veng *recs) {
  for (int i = 0; i < recs->n; i++)
    if (recs->v[i]->status == REC_FAIL || recs->v[i]->status == REC_ERROR) return false;
  return true;
}

int vsuite_main(const vsuite *s, int argc, char **argv) {
  shared_opts o = {.model = s->default_model, .paths = s->default_paths, .seed = 1,
                   .knobs = {.cos = -1, .gap = -1, .answer_logit = -1}};
  void *st = calloc(1, s->state_size);
  char *pbuf = NULL;
  const char **paths = NULL;
  ds_model m;
  construct_layout L;
  vsuite_ctx x = {.model = &m, .layout = s->constructed ? &L : NULL};
  bool model_open = false, done = false;
  double t0 = 0; /* when the first case started */
  veng recs = {0};
  vstatus err = V_OK;
  int rc = EXIT_OK;
  if (!st) { VERR("%s: out of memory", s->name); cli_print_error(s->name); return EXIT_CHECK_FAILED; }
  s->init(st);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(s->usage, stdout); goto out; }
    if (!shared_option(s, &o, argc, argv, &i, &err) && !s->option(st, argc, argv, &i, &err))
      err = VERR("unknown option '%s' (see vouch %s --help)", a, s->name);
    if (err) { cli_print_error(s->name); rc = EXIT_USAGE; goto out; }
  }
  x.paths_given = o.paths_given;
  x.seed = o.seed;
  x.n_threads = (int)o.threads;
  if (vsuite_split_names("--paths", o.paths, &pbuf, &paths, &x.n_paths) || vsuite_check_paths(paths, x.n_paths) ||
      s->options_done(st)) {
    cli_print_error(s->name);
    rc = EXIT_USAGE;
    goto out;
  }
  x.paths = paths;
  if (vsuite_open_model(&m, o.model, s->constructed ? o.model_seed : o.seed, 0, vsuite_any_host(paths, x.n_paths),
                        s->constructed ? &o.knobs : NULL, &L, s->constructed)) {
    cli_print_error(s->name);
    rc = EXIT_CHECK_FAILED;
    goto out;
  }
  model_open = true;
  if (s->check && s->check(st, &x)) { cli_print_error(s->name); rc = EXIT_USAGE; goto out; }
  if (s->prepare(st, &x, &done)) { cli_print_error(s->name); rc = EXIT_CHECK_FAILED; goto out; }
  if (done) goto out;
  /* each case's records are in the run before the next case starts */
  t0 = vclock_now();
  for (int c = 0, n = s->n_cases(st, &x); c < n; c++) {
    if (vinterrupted()) { /* SIGINT / SIGTERM under `vouch run`: the finished cases are stored; no report */
      fprintf(stderr, "%s: interrupted after %d of %d cases: the rest not run\n", s->name, c, n);
      rc = EXIT_INTERRUPTED;
      goto out;
    }
    if (s->run(st, &x, c) || s->record(st, &x, c, &recs) || eng_flush(&recs)) {
      cli_print_error(s->name);
      rc = EXIT_CHECK_FAILED;
      goto out;
    }
  }
  x.wall_s = vclock_now() - t0;
  s->print(st, &x);
  if (!records_pass(&recs)) rc = EXIT_CHECK_FAILED;
  printf("\nverdict: %s\n", rc == EXIT_OK ? "pass" : "FAIL");
  if (vsuite_emit_records(o.json, &recs)) { cli_print_error(s->name); rc = EXIT_CHECK_FAILED; }
out:
  s->free(st);
  free(st);
  eng_free(&recs);
  if (model_open) ds_model_close(&m);
  free(pbuf);
  free(paths);
  return rc;
}
