/* The one suite driver (suites/engine/suite.h). */
#include "suites/engine/suite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/interrupt.h"
#include "model/spec_config.h"
#include "suites/engine/cli.h"
#include "suites/engine/record.h"
#include "suites/engine/sink.h"
#include "suites/paths/paths.h"
#include "suites/paths/spec.h"

/* Splits "a,b,c" into names (pointers into a malloc'ed copy held in *buf; *out malloc'ed). Error
 * names option `opt` when the list is empty. */
static vstatus split_names(const char *opt, const char *s, char **buf, const char ***out, int *n) {
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

/* True when one of the paths reads host weights (vpath_caps.host_weights). */
static bool any_host(const vpath_spec *paths, int n) {
  for (int i = 0; i < n; i++)
    if (paths[i].caps.host_weights) return true;
  return false;
}

/* Opens synth:recall-* through the constructor (knobs NULL, or a cos < 0, gap <= 0, answer_logit
 * <= 0: the preset's value) with its layout in *L, anything else through ds_model_open (a host copy
 * when `host`), then with `need_layout` reads its layout into *L. `layers` > 0 keeps that many layers. */
static vstatus open_model(ds_model *m, const char *spec, uint64_t seed, int layers, bool host, const construct_opts *knobs,
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
    return construct_model_open(m, spec + 6, &o, seed, L);
  }
  VTRY(ds_model_open(m, spec, seed, layers, host));
  if (need_layout) {
    vstatus s = construct_layout_of(m, L);
    if (s) { ds_model_close(m); return s; }
  }
  return V_OK;
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
  bool expect_fallback;  /* --expect-fallback */
  long layers;           /* --layers (vsuite.layers; 0: every layer) */
  construct_opts knobs;  /* --cos, --gap, --answer-logit (constructed suites; -1: the preset's) */
} shared_opts;

/* If argv[*i] is an option of the driver's for suite s, stores it in o and returns true (a bad value
 * in *err, naming the option). */
static bool shared_option(const vsuite *s, shared_opts *o, int argc, char **argv, int *i, vstatus *err) {
  const char *v;
  if (cli_opt(argc, argv, i, "--json", &v, err)) { if (v) o->json = v; }
  else if (cli_opt(argc, argv, i, "--seed", &v, err)) { if (v) *err = cli_u64("--seed", v, &o->seed); }
  else if (s->no_model) return false;
  else if (cli_opt(argc, argv, i, "--model", &v, err)) { if (v) o->model = v; }
  else if (!s->paths && cli_opt(argc, argv, i, "--paths", &v, err)) { if (v) { o->paths = v; o->paths_given = true; } }
  else if (cli_opt(argc, argv, i, "--path-lib", &v, err)) { if (v) *err = vpaths_load_lib(v); }
  else if (cli_opt(argc, argv, i, "--threads", &v, err)) { if (v) *err = cli_int("--threads", v, 0, 4096, &o->threads); }
  else if (!strcmp(argv[*i], "--expect-fallback")) o->expect_fallback = true;
  else if (s->layers && cli_opt(argc, argv, i, "--layers", &v, err)) { if (v) *err = cli_int("--layers", v, 1, 1000, &o->layers); }
  else if (!s->constructed) return false;
  else if (cli_opt(argc, argv, i, "--model-seed", &v, err)) { if (v) *err = cli_u64("--model-seed", v, &o->model_seed); }
  else if (cli_opt(argc, argv, i, "--cos", &v, err)) { if (v) *err = cli_double("--cos", v, &o->knobs.cos); }
  else if (cli_opt(argc, argv, i, "--gap", &v, err)) { if (v) *err = cli_double("--gap", v, &o->knobs.gap); }
  else if (cli_opt(argc, argv, i, "--answer-logit", &v, err)) {
    if (v) *err = cli_double("--answer-logit", v, &o->knobs.answer_logit);
  } else return false;
  return true;
}

/* The verdict: no record of the invocation failed or errored (a case that is not supported, or
 * undecided, neither passes nor fails; undecided ones are counted after the verdict line). */
static bool records_pass(const veng *recs) {
  for (int i = 0; i < recs->n; i++)
    if (recs->v[i]->status == REC_FAIL || recs->v[i]->status == REC_ERROR) return false;
  return true;
}

/* The planned records of every case (vsuite.plan). */
typedef struct {
  veng recs;  /* every case's planned records, case by case */
  int *at;    /* [n_cases + 1]: case c's records are recs.v[at[c] .. at[c + 1]) */
} planned;

static bool same_key(const vrecord *a, const vrecord *b) {
  return !strcmp(a->suite, b->suite) && !strcmp(a->case_id, b->case_id) && !strcmp(a->path, b->path);
}

/* The planned records of cases 0..n-1 into p (s->plan NULL: none). Error: the suite's, or out of
 * memory naming the suite. */
static vstatus plan_cases(const vsuite *s, void *st, const vsuite_ctx *x, int n, planned *p) {
  p->at = calloc((size_t)n + 1, sizeof *p->at);
  if (!p->at) return VERR("%s: out of memory for %d cases", s->name, n);
  for (int c = 0; c < n; c++) {
    p->at[c] = p->recs.n;
    if (s->plan) VTRY(s->plan(st, x, c, &p->recs));
  }
  p->at[n] = p->recs.n;
  return V_OK;
}

/* True when the run (sink, resumed) holds every planned record of case c; false when none is planned. */
static bool case_stored(const vrec_sink *sink, const planned *p, int c) {
  if (p->at[c] == p->at[c + 1]) return false;
  for (int i = p->at[c]; i < p->at[c + 1]; i++)
    if (!rec_stored(sink, p->recs.v[i]->suite, p->recs.v[i]->case_id, p->recs.v[i]->path)) return false;
  return true;
}

/* True when recs->v[from..n) holds a record of every planned record's key of case c. */
static bool case_made(const planned *p, int c, const veng *recs, int from) {
  for (int i = p->at[c]; i < p->at[c + 1]; i++) {
    bool found = false;
    for (int k = from; k < recs->n && !found; k++) found = same_key(recs->v[k], p->recs.v[i]);
    if (!found) return false;
  }
  return true;
}

/* Parses argv[1..argc) into o (the driver's options) and st (the suite's; init done). *help: --help
 * was given (what follows it is not parsed). Error: a usage error naming the option. */
static vstatus parse_options(const vsuite *s, int argc, char **argv, shared_opts *o, void *st, bool *help) {
  vstatus err = V_OK;
  *help = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { *help = true; return V_OK; }
    if (!shared_option(s, o, argc, argv, &i, &err) && !s->option(st, argc, argv, &i, &err))
      err = VERR("unknown option '%s' (see vouch %s --help)", a, s->name);
    if (err) return err;
  }
  return V_OK;
}

/* After parse_options: the paths into x (--paths split, or the suite's own), parsed once into *specs
 * (malloc'ed; x->paths points at them): with `registry` by vpath_spec_parse, which checks each against
 * the registry, then the suite's options_done and paths_done; without it (the dry run prices paths a
 * build may lack) by their syntax alone (vpath_spec_split), then options_done. *missing: a required
 * path is not given (x->n_paths 0; no error set). Error: a usage error naming the option. */
static vstatus settle_options(const vsuite *s, const shared_opts *o, void *st, vsuite_ctx *x, vpath_spec **specs,
                              bool registry, bool *missing) {
  *missing = false;
  if (s->no_model) return s->options_done(st); /* no paths, no model */
  char *pbuf = NULL;
  const char **split = NULL; /* --paths split (malloc'ed; names in pbuf) */
  const char *const *names = NULL;
  int n = 0;
  vstatus err = s->paths ? s->paths(st, &names, &n)
                         : o->paths ? split_names("--paths", o->paths, &pbuf, &split, &n) : V_OK;
  if (!s->paths) names = split;
  if (!err && n > 0) {
    *specs = calloc((size_t)n, sizeof **specs);
    if (!*specs) err = VERR("out of memory");
    else if (registry) err = vpath_specs_parse(names, n, "option --paths", *specs);
    for (int i = 0; !err && !registry && i < n; i++)
      if (!vpath_spec_split(names[i], &(*specs)[i])) err = VERR("option --paths: unknown path '%s'", names[i]);
  }
  free(pbuf);
  free(split);
  if (err) return err;
  x->paths = *specs;
  x->n_paths = n;
  if (n == 0) { *missing = true; return V_OK; }
  VTRY(s->options_done(st));
  return registry && s->paths_done ? s->paths_done(st, x->paths, x->n_paths) : V_OK;
}

static shared_opts shared_defaults(const vsuite *s) {
  return (shared_opts){.model = s->default_model, .paths = s->default_paths, .seed = s->seed_zero ? 0 : 1,
                       .knobs = {.cos = -1, .gap = -1, .answer_logit = -1}};
}

/* A suite's command line as read by every entry point (vsuite_main, vsuite_check_args,
 * vsuite_estimate): the driver's options, the suite's state, the paths. */
typedef struct {
  shared_opts o;       /* the driver's options */
  void *st;            /* the suite's state (calloc'ed, init; NULL: out of memory) */
  vsuite_ctx x;        /* paths, paths_given, seed, n_threads (the rest is the caller's) */
  vpath_spec *specs;   /* [x.n_paths] the paths, parsed once (malloc'ed; x.paths points at them) */
  const char **names;  /* [x.n_paths] their names, for an estimate (malloc'ed; into specs) */
  bool help;           /* --help given: nothing after it is read, nor the paths */
  bool missing;        /* a required path is not named (no error set) */
} suite_args;

/* Reads argv into a: s's state allocated and init'ed, the options (parse_options), then unless
 * --help the paths, options_done and, when `registry`, the paths checked against the registry and
 * paths_done. Error: a usage error naming the option, or out of memory (a->st NULL). free_args
 * frees a either way. */
static vstatus build_args(const vsuite *s, int argc, char **argv, bool registry, suite_args *a) {
  *a = (suite_args){.o = shared_defaults(s), .st = calloc(1, s->state_size)};
  if (!a->st) return VERR("%s: out of memory", s->name);
  s->init(a->st);
  VTRY(parse_options(s, argc, argv, &a->o, a->st, &a->help));
  if (a->help) return V_OK;
  a->x.paths_given = a->o.paths_given;
  a->x.seed = a->o.seed;
  a->x.n_threads = (int)a->o.threads;
  a->x.expect_fallback = a->o.expect_fallback;
  return settle_options(s, &a->o, a->st, &a->x, &a->specs, registry, &a->missing);
}

static void free_args(const vsuite *s, suite_args *a) {
  if (a->st) s->free(a->st);
  free(a->st);
  free(a->specs);
  free(a->names);
}

/* The suite that runs argv: s, or the one its mode names. */
static const vsuite *mode_of(const vsuite *s, int argc, char **argv) {
  const vsuite *m = s->mode ? s->mode(argc, argv) : NULL;
  return m ? m : s;
}

vstatus vsuite_check_args(const vsuite *s, int argc, char **argv) {
  s = mode_of(s, argc, argv);
  suite_args a;
  vstatus err = build_args(s, argc, argv, true, &a);
  if (!err && !a.help && a.missing) err = VERR("a path to run is not named (see vouch %s --help)", s->name);
  /* a suite with no model checks its options in `check` without one (kernels: --op, --path, --preset) */
  if (!err && !a.help && s->no_model && s->check) err = s->check(a.st, &a.x);
  free_args(s, &a);
  return err;
}

vstatus vsuite_estimate(const vsuite *s, int argc, char **argv, const dry_env *env, dry_step *out) {
  s = mode_of(s, argc, argv);
  vest_clear(out);
  if (!s->estimate) return VUNSUPPORTED("%s: no estimate for this suite", argv[0]);
  suite_args a;
  ds_config cfg;
  vstatus err = build_args(s, argc, argv, false, &a);
  if (!err && a.help) err = VUNSUPPORTED("%s: --help runs nothing to estimate", argv[0]);
  if (!err && a.missing) err = VERR("a path to run is not named (see vouch %s --help)", s->name);
  if (!err && a.x.n_paths > VEST_MAX_PATHS) err = VERR("--paths: more than %d paths", VEST_MAX_PATHS);
  if (!err && !s->no_model && ds_spec_config(a.o.model, (int)a.o.layers, &cfg)) {
    verr_prefix("%s: --model %s", argv[0], a.o.model);
    err = V_ERR;
  }
  if (!err && a.x.n_paths && !(a.names = malloc((size_t)a.x.n_paths * sizeof *a.names))) err = VERR("out of memory");
  for (int i = 0; !err && i < a.x.n_paths; i++) a.names[i] = a.specs[i].name;
  if (!err) {
    const vsuite_est_ctx ex = {.paths = a.names, .n_paths = a.x.n_paths, .model = s->no_model ? NULL : a.o.model,
                               .layers = (int)a.o.layers, .seed = a.o.seed};
    vest X = {.cfg = s->no_model ? NULL : &cfg, .env = env, .out = out};
    err = s->estimate(a.st, &ex, &X);
  }
  free_args(s, &a);
  return err;
}

int vsuite_main(const vsuite *s, int argc, char **argv, const vrec_sink *sink) {
  s = mode_of(s, argc, argv);
  suite_args a;
  ds_model m;
  construct_layout L;
  bool model_open = false, done = false, unmade = false; /* unmade: a case did not make its planned records */
  double t0 = 0; /* when the first case started */
  veng recs = {0};
  planned pl = {0};
  int rc = EXIT_OK;
  if (build_args(s, argc, argv, true, &a)) { cli_print_error(s->name); rc = a.st ? EXIT_USAGE : EXIT_CHECK_FAILED; goto out; }
  if (a.help) { fputs(s->usage, stdout); goto out; }
  if (a.missing) { fputs(s->usage, stderr); rc = EXIT_USAGE; goto out; } /* a required path is not named */
  void *st = a.st;
  const shared_opts o = a.o;
  vsuite_ctx x = a.x;
  x.model = s->no_model ? NULL : &m;
  x.layout = s->constructed ? &L : NULL;
  x.sink = sink;
  if (!s->no_model) {
    const double t_open = vclock_now();
    if (open_model(&m, o.model, s->constructed ? o.model_seed : o.seed, (int)o.layers, any_host(x.paths, x.n_paths),
                   s->constructed ? &o.knobs : NULL, &L, s->constructed)) {
      cli_print_error(s->name);
      rc = EXIT_CHECK_FAILED;
      goto out;
    }
    x.open_s = vclock_now() - t_open;
    model_open = true;
  }
  if (s->check && s->check(st, &x)) { cli_print_error(s->name); rc = EXIT_USAGE; goto out; }
  if (s->prepare(st, &x, &done)) { cli_print_error(s->name); rc = EXIT_CHECK_FAILED; goto out; }
  if (done) goto out;
  const int n = s->n_cases(st, &x);
  /* under `vouch run` every planned case is in the run as not_run until its records replace it */
  if (plan_cases(s, st, &x, n, &pl) ||
      rec_plan(sink, pl.recs.v, pl.recs.n, "not run: the step stopped before this case finished (vouch run --resume runs it)")) {
    cli_print_error(s->name);
    rc = EXIT_CHECK_FAILED;
    goto out;
  }
  /* each case's records are in the run before the next case starts */
  t0 = vclock_now();
  for (int c = 0; c < n; c++) {
    if (vinterrupted()) { /* SIGINT / SIGTERM under `vouch run`: the finished cases are stored; no report */
      fprintf(stderr, "%s: interrupted after %d of %d %s: the rest not run\n", s->name, c, n,
              s->case_noun ? s->case_noun : "cases");
      rc = EXIT_INTERRUPTED;
      goto out;
    }
    if (s->skip_stored && case_stored(sink, &pl, c)) { /* a resumed run holds it */
      if (s->kept) s->kept(st, &x, c);
      continue;
    }
    const int from = recs.n;
    if (s->run(st, &x, c) || s->record(st, &x, c, &recs) || eng_flush(&recs, sink)) {
      cli_print_error(s->name);
      rc = EXIT_CHECK_FAILED;
      goto out;
    }
    unmade |= !case_made(&pl, c, &recs, from);
    if (s->print_case) s->print_case(st, &x, c);
  }
  x.wall_s = vclock_now() - t0;
  if (s->finish && (s->finish(st, &x, &recs) || eng_flush(&recs, sink))) {
    cli_print_error(s->name);
    rc = EXIT_CHECK_FAILED;
    goto out;
  }
  if (s->print) s->print(st, &x, &recs);
  if (!records_pass(&recs) || unmade) rc = EXIT_CHECK_FAILED;
  if (s->passed && !s->passed(st, &x)) rc = EXIT_CHECK_FAILED;
  if (!s->quiet_verdict) printf("\nverdict: %s\n", rc == EXIT_OK ? "pass" : "FAIL");
  int undecided = 0;
  for (int i = 0; i < recs.n; i++) undecided += recs.v[i]->status == REC_UNDECIDED;
  if (undecided) printf("undecided: %d case%s decided nothing (not a pass)\n", undecided, undecided == 1 ? "" : "s");
  if (o.json && (s->write_json ? s->write_json(st, &x, &recs, o.json) : eng_write_json(&recs, o.json))) {
    cli_print_error(s->name);
    rc = EXIT_CHECK_FAILED;
  }
out:
  free_args(s, &a);
  eng_free(&recs);
  eng_free(&pl.recs);
  free(pl.at);
  if (model_open) ds_model_close(&m);
  return rc;
}
