/* vouch run: executes a plan's suites in order and writes one result directory.
 *
 * The plan comes in typed (runner/plan/plan.h build_plan: its JSON parsed once, the variables
 * settled, every step's arguments expanded), and every stage below takes that vplan.
 * Each suite runs in-process (vplan_steps, runner/plan/plan.h: the steps a plan may name, handed in by
 * the command table of runner/cli/commands.c) and stores its records
 * in the run as each case finishes (suites/engine/engine.h), so Ctrl-C, a crash or kill -9 keeps every
 * finished case; the run is then "incomplete". The store also records how many steps finished
 * (meta 'steps_done') and the variables the run was given (meta 'run_args'), so --resume DIR
 * continues it: finished steps are kept, the interrupted step runs again without the cases
 * already stored (suites/engine/sink.h rec_stored), and the rest run as usual.
 * Before anything runs, every step is estimated (runner/plan/dryrun.h: the paths it opens, memory per GPU
 * and on the host, expected time) and a plan with a step that cannot fit the GPU is refused;
 * --dry-run prints the estimates and stops there. --fail-fast stops after the first failed step.
 * The stages, one function each: run_parse_opts (the command line), run_resume_opts (--resume: the
 * interrupted run's own), run_build_plan, plan_check_options (the check), plan_fit (the dry run),
 * run_open (the result directory), run_steps, run_close (the summary). */
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/interrupt.h"
#include "common/read_file.h"
#include "common/redact.h"
#include "suites/engine/cli.h"
#include "runner/plan/cmd_run.h"
#include "runner/plan/dryrun.h"
#include "runner/plan/plan.h"
#include "runner/plan/plan_servers.h"
#include "runner/evidence/bundle.h"
#include "runner/evidence/manifest.h"
#include "runner/evidence/rundir.h"
#include "suites/engine/record.h"
#include "runner/evidence/store.h"
#include "suites/paths/paths.h"
#include "suites/plans/plans.h"
#ifdef VOUCH_HAVE_CUDA
#include "reference/cuda/cuda_info.h"
#include "reference/cuda/cuda_ref.h"
#endif

static const char USAGE[] =
    "usage: vouch run [--plan smoke|h200|FILE] [--out DIR] [--model M] [--paths P] [--set VAR=VALUE]\n"
    "                 [--no-bundle] [--list] [--dry-run] [--gpu-mem SIZE] [--host-mem SIZE] [--cpus N] [--fail-fast]\n"
    "                 [--force] [--path-lib FILE] [--resume DIR]\n"
    "  Runs the suites a plan names and writes a result directory (default vouch-results/<plan>-<time>),\n"
    "  then bundles it to DIR.vouch.tar.gz. With no arguments: the smoke plan on the embedded default\n"
    "  (synthetic tiny checkpoint; GPU paths when a GPU is visible, else CPU).\n"
    "  Every step is estimated first (paths opened, GPU and host memory from the paths' own arithmetic,\n"
    "  expected seconds); a plan with a step that cannot fit the visible GPU is refused before anything runs.\n"
    "  --dry-run     print the estimates as a table and stop (exit 2 when a step does not fit)\n"
    "  --gpu-mem S   plan for a GPU with S bytes free (e.g. 141G, 80G, 1G; G = GiB), also on a machine\n"
    "                without one (then with --dry-run only); the plan's GPU variant is used\n"
    "  --host-mem S, --cpus N  with --dry-run: plan for a host with S bytes of memory and N cores (the GPU\n"
    "                machine's, e.g. 128G and 16) instead of this one: host memory is checked against S, and\n"
    "                the CPU paths' time is priced on N cores\n"
    "  --force       run even when a step is estimated not to fit (its paths then refuse or shrink it)\n"
    "  --fail-fast   stop after the first step that exits non-zero; later steps are recorded not_run\n"
    "  --path-lib F  load a decode path from the shared library F for every step (docs/plugins.md); the\n"
    "                manifest records its sha256 (path_libs)\n"
    "  --resume DIR  continue the interrupted run in DIR (crashed, killed or Ctrl-C) with its own plan,\n"
    "                variables and path libraries: finished steps and every stored case are kept, the rest\n"
    "                runs into DIR; only the build that started the run (same commit and CMake options)\n"
    "                may continue it\n"
    "  Exit code: 0 verdict pass, 1 fail or incomplete, 2 usage or plan error or a step that cannot fit,\n"
    "  130 interrupted.\n";

static int gpu_count(void) {
#ifdef VOUCH_HAVE_CUDA
  return cuda_device_count();
#else
  return 0;
#endif
}

/* A size such as 141G, 512M or 1e9 (bytes; K/M/G/T = powers of 1024) for option `opt` into *out. */
static vstatus parse_mem(const char *opt, const char *v, double *out) {
  char *end;
  double x = strtod(v, &end);
  double mul = 1;
  if (*end == 'k' || *end == 'K') mul = 1024.0, end++;
  else if (*end == 'm' || *end == 'M') mul = 1048576.0, end++;
  else if (*end == 'g' || *end == 'G') mul = 1073741824.0, end++;
  else if (*end == 't' || *end == 'T') mul = 1099511627776.0, end++;
  if (end == v || *end || !(x > 0) || !isfinite(x)) return VERR("%s '%s': expected a size such as 141G, 80G or 512M", opt, v);
  *out = x * mul;
  return V_OK;
}

/* The machine the plan is checked against: the first GPU's free memory, or --gpu-mem; this host's
 * memory and cores, or --host-mem / --cpus (0: this host's). */
static void machine_env(dry_env *env, int gpus, double gpu_mem, double host_mem, int cpus_opt) {
  memset(env, 0, sizeof *env);
  env->gpus = gpus;
  env->gpu = gpus > 0 || gpu_mem > 0;
#ifdef VOUCH_HAVE_CUDA
  if (gpus > 0 && cuda_gpu_mem(0, &env->gpu_free, &env->gpu_total, &env->sms, env->device, sizeof env->device))
    env->gpu_free = env->gpu_total = 0;
#endif
  if (gpu_mem > 0) {
    env->gpu_free = env->gpu_total = gpu_mem;
    if (!env->gpus) env->gpus = 1;
    snprintf(env->device, sizeof env->device, "a %.0f GiB GPU (--gpu-mem)", gpu_mem / 1073741824.0);
  }
  const long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE), cpus = sysconf(_SC_NPROCESSORS_ONLN);
  env->host_total = pages > 0 && psz > 0 ? (double)pages * psz : 0;
  env->cpu_threads = cpus > 0 ? (int)cpus : 1;
  if (host_mem > 0) env->host_total = host_mem;
  if (cpus_opt > 0) env->cpu_threads = cpus_opt;
}

/* A check that decided nothing is not a pass (docs/verdicts.md): after the verdict, how many records of
 * the run are undecided, from its results.json (nothing when none or the file cannot be read). */
static void print_undecided(const char *outdir) {
  char path[700], *txt = NULL;
  snprintf(path, sizeof path, "%s/results.json", outdir);
  if (vfile_read(path, &txt, NULL)) { verr_clear(); return; }
  cJSON *r = cJSON_Parse(txt);
  free(txt);
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "counts"), "undecided");
  if (cJSON_IsNumber(c) && c->valueint > 0)
    printf("undecided: %d check%s decided nothing (not a pass; listed in the report)\n", c->valueint,
           c->valueint == 1 ? "" : "s");
  cJSON_Delete(r);
}

/* The case id of step `step_i`'s own records ("step3-kernels"; rundir.c writes the same). */
static void step_id(char *buf, size_t n, int step_i, const char *suite) { snprintf(buf, n, "step%d-%s", step_i, suite); }

/* Records step `step_i` (suite) with status `st` (not run, or an error of the run) and the reason `why`
 * into the run `sink`. */
static void step_record(const vrec_sink *sink, int step_i, const char *suite, rec_status st, const char *why) {
  vrecord *r = rec_new("run", suite, "");
  if (!r) return;
  step_id(r->case_id, sizeof r->case_id, step_i, suite);
  rec_set_status(r, st, why);
  rec_emit(sink, r, NULL);
  rec_free(r);
}
static void not_run_record(const vrec_sink *sink, int step_i, const char *suite, const char *why) {
  step_record(sink, step_i, suite, REC_NOT_RUN, why);
}

/* What a run keeps of its command line for --resume: meta 'run_args' =
 * {"vars": ["VAR=VALUE", ...] (from --model, --paths, --set), "path_libs": [FILE, ...],
 * "fail_fast": bool}, credentials redacted (common/redact.h: a resumed run gets the redacted value,
 * as replay.sh does). */
static vstatus save_run_args(vrundir *rd, char (*over)[600], int n_over, char (*libs)[600], int n_libs, bool fail_fast) {
  cJSON *j = cJSON_CreateObject(), *vars = j ? cJSON_AddArrayToObject(j, "vars") : NULL;
  cJSON *pl = j ? cJSON_AddArrayToObject(j, "path_libs") : NULL;
  for (int i = 0; vars && i < n_over; i++) cJSON_AddItemToArray(vars, cJSON_CreateString(over[i]));
  for (int i = 0; pl && i < n_libs; i++) cJSON_AddItemToArray(pl, cJSON_CreateString(libs[i]));
  if (j) cJSON_AddBoolToObject(j, "fail_fast", fail_fast);
  char *raw = vars && pl ? cJSON_PrintUnformatted(j) : NULL;
  cJSON_Delete(j);
  char *txt = raw ? redact_dup(raw) : NULL; /* as the manifest's command line: no credential is stored */
  free(raw);
  vstatus s = txt ? rec_dir_meta_set(rd, "run_args", txt) : VERR("%s: meta 'run_args': out of memory", rec_dir_path(rd));
  free(txt);
  return s;
}

/* Copies the strings of run_args' list `field` into out[max][600]; errors name the store (path)
 * and the field. */
static vstatus run_args_list(const cJSON *j, const char *field, const char *path, char (*out)[600], int max, int *n) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, field), *v;
  *n = 0;
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > max)
    return VERR("%s: meta 'run_args': field '%s' must be a list of at most %d strings", path, field, max);
  cJSON_ArrayForEach(v, a) {
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= sizeof out[0])
      return VERR("%s: meta 'run_args': %s[%d] must be a string under %zu bytes", path, field, *n, sizeof out[0]);
    snprintf(out[(*n)++], sizeof out[0], "%s", v->valuestring);
  }
  return V_OK;
}

/* Reads back what save_run_args kept in DIR's store (txt: its meta 'run_args', rec_resume_check)
 * and loads its path libraries; every problem names the file and the field. */
static vstatus load_run_args(const char *dir, const char *txt, char (*over)[600], int *n_over, char (*libs)[600],
                             int *n_libs, bool *fail_fast) {
  char path[700];
  snprintf(path, sizeof path, "%s/results.sqlite", dir);
  cJSON *j = cJSON_Parse(txt);
  const cJSON *ff = cJSON_GetObjectItemCaseSensitive(j, "fail_fast");
  vstatus s = cJSON_IsBool(ff) ? V_OK : VERR("%s: meta 'run_args': field 'fail_fast' must be true or false", path);
  if (s == V_OK) s = run_args_list(j, "vars", path, over, 16, n_over);
  if (s == V_OK) s = run_args_list(j, "path_libs", path, libs, 8, n_libs);
  for (int i = 0; s == V_OK && i < *n_libs; i++) s = vpaths_load_lib(libs[i]);
  if (s == V_OK) *fail_fast = cJSON_IsTrue(ff);
  cJSON_Delete(j);
  return s;
}

/* Marks step `step_i` finished in the store (not when the user interrupted it: --resume runs it
 * again). False when the store refused (error printed). */
static bool step_finished(vrundir *rd, int step_i) {
  if (vinterrupted()) return true;
  if (rec_dir_step_done(rd, step_i) == V_OK) return true;
  cli_print_error("run");
  return false;
}

/* What the command line asks for (run_parse_opts), or for --resume what the run being continued was
 * given (run_resume_opts). */
typedef struct {
  const char *plan;       /* --plan: a built-in plan or a file (default smoke); --resume: DIR/plan.json */
  const char *out;        /* --out DIR, or NULL (vouch-results/<plan>-<time>) */
  const char *resume;     /* --resume DIR, or NULL */
  char resume_plan[700];  /* DIR/plan.json */
  int resume_done;        /* the steps a resumed run finished before: not checked or run again */
  bool bundle, list, dry, fail_fast, force, plan_given;
  double gpu_mem, host_mem; /* --gpu-mem, --host-mem bytes (0: not given) */
  int cpus;               /* --cpus (0: not given) */
  char over[16][600];     /* "VAR=VALUE" from --model, --paths, --set, in order (later ones dropped) */
  int n_over;
  char libs[8][600];      /* --path-lib files (absolute), for replay.sh and --resume */
  int n_libs;
} run_opts;

/* --path-lib v: loads it and keeps its absolute path (replay.sh and --resume load it again from
 * wherever they run). Fails when it does not load. */
static vstatus add_path_lib(run_opts *o, const char *v) {
  char full[PATH_MAX];
  VTRY(vpaths_load_lib(v));
  if (o->n_libs == 8) return V_OK;
  const char *keep = realpath(v, full) && strlen(full) < sizeof o->libs[0] ? full : v;
  size_t l = strlen(keep);
  if (l >= sizeof o->libs[0]) l = sizeof o->libs[0] - 1; /* a name that long fails to load again, with its error */
  memcpy(o->libs[o->n_libs], keep, l);
  o->libs[o->n_libs++][l] = 0;
  return V_OK;
}

/* --cpus v: a core count 1..4096 into *out. */
static vstatus parse_cpus(const char *v, int *out) {
  char *end;
  long n = strtol(v, &end, 10);
  if (end == v || *end || n < 1 || n > 4096) return VERR("--cpus '%s': expected a core count 1..4096", v);
  *out = (int)n;
  return V_OK;
}

/* Adds the override "VAR=VALUE" (fmt: "%s" or "model=%s") of value v; at most 16, later ones dropped. */
static void add_over(run_opts *o, const char *fmt, const char *v) {
  if (o->n_over < 16) snprintf(o->over[o->n_over++], sizeof o->over[0], fmt, v);
}

/* Reads argv into *o. -1 to go on, else the exit code to return (--help: 0; a bad option: the
 * error printed, EXIT_USAGE). */
static int run_parse_opts(int argc, char **argv, run_opts *o) {
  memset(o, 0, sizeof *o);
  o->plan = "smoke";
  o->bundle = true;
  vstatus err = V_OK;
  const char *v;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(USAGE, stdout); return EXIT_OK; }
    if (!strcmp(a, "--no-bundle")) o->bundle = false;
    else if (!strcmp(a, "--list")) o->list = true;
    else if (!strcmp(a, "--dry-run")) o->dry = true;
    else if (!strcmp(a, "--fail-fast")) o->fail_fast = true;
    else if (!strcmp(a, "--force")) o->force = true;
    else if (cli_opt(argc, argv, &i, "--gpu-mem", &v, &err)) { if (v) err = parse_mem("--gpu-mem", v, &o->gpu_mem); }
    else if (cli_opt(argc, argv, &i, "--host-mem", &v, &err)) { if (v) err = parse_mem("--host-mem", v, &o->host_mem); }
    else if (cli_opt(argc, argv, &i, "--cpus", &v, &err)) { if (v) err = parse_cpus(v, &o->cpus); }
    else if (cli_opt(argc, argv, &i, "--plan", &v, &err)) { if (v) o->plan = v, o->plan_given = true; }
    else if (cli_opt(argc, argv, &i, "--resume", &v, &err)) { if (v) o->resume = v; }
    else if (cli_opt(argc, argv, &i, "--out", &v, &err)) { if (v) o->out = v; }
    else if (cli_opt(argc, argv, &i, "--model", &v, &err)) { if (v) add_over(o, "model=%s", v); }
    else if (cli_opt(argc, argv, &i, "--paths", &v, &err)) { if (v) add_over(o, "paths=%s", v); }
    else if (cli_opt(argc, argv, &i, "--path-lib", &v, &err)) { if (v) err = add_path_lib(o, v); }
    else if (cli_opt(argc, argv, &i, "--set", &v, &err)) { if (v) add_over(o, "%s", v); }
    else err = VERR("unknown option '%s' (see vouch run --help)", a);
    if (!err && o->resume && (o->out || o->n_over || o->n_libs || o->list || o->dry || o->plan_given || o->fail_fast))
      err = VERR("--resume DIR continues DIR with its own plan, variables and path libraries: drop --plan, --out, "
                 "--model, --paths, --set, --path-lib, --fail-fast, --list and --dry-run");
    if (err) { cli_print_error("run"); return EXIT_USAGE; }
  }
  return -1;
}

/* --resume DIR: the plan, variables, path libraries (loaded) and --fail-fast of the run in DIR, and
 * the steps it finished, once DIR's store shows this build started it. Fails naming the file and
 * the field. */
static vstatus run_resume_opts(run_opts *o) {
  snprintf(o->resume_plan, sizeof o->resume_plan, "%s/plan.json", o->resume);
  o->plan = o->resume_plan;
  /* the build first: a newer build's option names must not hide that it is another build */
  char *args_txt = NULL;
  vstatus s = rec_resume_check(o->resume, &o->resume_done, &args_txt);
  if (!s) s = load_run_args(o->resume, args_txt, o->over, &o->n_over, o->libs, &o->n_libs, &o->fail_fast);
  free(args_txt);
  return s;
}

/* --list: each built-in plan's name and description. */
static int run_list(const vplan_steps *steps) {
  const vplan_opts po = {.steps = steps};
  for (const vplan_text *t = vouch_plans; t->name; t++) {
    vplan *p = NULL;
    if (build_plan_text(t->text, t->name, &po, &p)) verr_clear();
    printf("%-10s %s\n", t->name, p ? p->description : "");
    free_plan(p);
  }
  return EXIT_OK;
}

/* The plan o names, for this machine (gpu: its GPU variant), with o's variables; fails (error
 * recorded) on a machine option that needs --dry-run here, or a plan error. */
static vstatus run_build_plan(const run_opts *o, const vplan_steps *steps, bool gpu, int gpus, vplan **out) {
  *out = NULL;
  if ((o->host_mem > 0 || o->cpus > 0) && !o->dry)
    return VERR("--host-mem and --cpus describe another machine to plan for: use them with --dry-run");
  if (o->gpu_mem > 0 && gpus == 0 && !o->dry)
    return VERR("--gpu-mem plans for a GPU and this machine has none: use it with --dry-run");
  const char *sets[16];
  for (int i = 0; i < o->n_over; i++) sets[i] = o->over[i];
  const vplan_opts po = {.steps = steps, .sets = sets, .n_sets = o->n_over, .gpu = gpu};
  return build_plan(o->plan, &po, out);
}

/* Checks the options of every step from step `from` on (a resumed run's unfinished ones) that runs
 * on this machine with its suite's own parser (steps->check), running nothing, so a misspelled
 * option or an unknown path in step 12 refuses the plan before step 0 runs. Returns the number of
 * steps refused (each with one line on stderr naming the plan, the step and the option). */
static int plan_check_options(const vplan *p, const vplan_steps *steps, int from) {
  int bad = 0;
#ifndef VOUCH_HAVE_CUDA
  /* a GPU variant planned (--dry-run --gpu-mem) by a build without the GPU paths: their names are
   * unknown here, though the steps are right for a CUDA build */
  if (p->gpu) {
    fprintf(stderr, "vouch run: plan %s: the steps' options are not checked: this build has no CUDA paths\n", p->name);
    return 0;
  }
#endif
  for (int i = from; i < p->n_steps; i++) {
    const vplan_step *st = &p->steps[i];
    if (st->runs_here && steps->check(st->suite, st->argc, st->argv)) { /* build_plan: a step of this build */
      fprintf(stderr, "vouch run: plan %s: steps[%d] (%s): %s\n", p->name, i, st->suite, verr_msg());
      bad++;
    }
  }
  return bad;
}

/* The dry run's table header: the machine planned for and the columns. */
static void fit_header(const vplan *p, const dry_env *env) {
  printf("plan %s on %s%s, a host of %.1f GiB and %d cores\n", p->name,
         env->gpu ? (env->device[0] ? env->device : "a GPU") : "the CPU",
         env->gpu && env->gpu_free > 0 ? "" : env->gpu ? " (free memory unknown: not checked)" : "",
         env->host_total / 1073741824.0, env->cpu_threads);
  printf("%-4s %-9s %-44s %10s %10s %8s %-8s %s\n", "step", "suite", "paths (a+b: open together; a, b: one at a time)",
         "GPU GiB", "host GiB", "seconds", "fits", "peak at");
}

/* Estimates every step that runs on this machine; prints the table when `print`. Returns the number
 * of steps that cannot fit (each with one line on stderr). */
static int plan_fit(const vplan *p, const dry_env *env, bool print) {
  const double gib = 1073741824.0;
  int refused = 0;
  double total_s = 0;
  if (print) fit_header(p, env);
  for (int i = 0; i < p->n_steps; i++) {
    const vplan_step *st = &p->steps[i];
    if (!st->runs_here) {
      if (print) printf("%-4d %-9s (skipped: %s)\n", i, st->suite, st->skip_why);
      continue;
    }
    dry_step d;
    /* a step that cannot be estimated (an unreadable model; bad options were refused before, by
     * plan_check_options) is left to the suite, which records why it failed */
    vstatus e = dry_estimate(st->argc, st->argv, env, &d);
    char label[16];
    snprintf(label, sizeof label, "%s", e != V_OK ? "?" : d.fits ? (d.degrades && env->gpu_free > 0 &&
                                                                                   d.gpu_bytes > env->gpu_free ? "shrinks" : "yes")
                                                                         : "NO");
    if (!env->gpu && d.uses_gpu && d.fits) snprintf(label, sizeof label, "no GPU");
    if (print) {
      const char *suite_l = !strcmp(st->suite, "eval") && st->argc > 1 ? st->argv[1] : st->suite;
      if (e != V_OK) printf("%-4d %-9s not estimated: %s\n", i, suite_l, verr_msg());
      else
        printf("%-4d %-9s %-44s %10.2f %10.2f %8.0f %-8s %s\n", i, suite_l, d.paths, d.gpu_bytes / gib,
               d.host_bytes / gib, d.seconds, label, d.peak_at);
    }
    total_s += d.seconds;
    if (e == V_OK && !d.fits) {
      fprintf(stderr, "vouch run: plan %s: step %d (%s) cannot fit: %s\n", p->name, i, st->suite, d.why);
      refused++;
    }
  }
  if (print) printf("expected total: %.0f s (%.1f min)%s\n", total_s, total_s / 60.0,
                    refused ? "; refused: steps that cannot fit are listed on stderr" : "");
  return refused;
}

/* Before anything runs: every step's options checked (not overridden by --force), then every step
 * estimated on env (a step that cannot fit refuses the plan unless --force; --dry-run prints the
 * table and stops). -1 to run the plan, else the exit code. */
static int run_preflight(const vplan *p, const run_opts *o, const vplan_steps *steps, const dry_env *env) {
  const int bad_opts = plan_check_options(p, steps, o->resume_done);
  if (bad_opts > 0) {
    fprintf(stderr, "vouch run: plan %s refused: %d step%s with options the suite rejects (nothing ran)\n", p->name,
            bad_opts, bad_opts == 1 ? "" : "s");
    return EXIT_USAGE;
  }
  const int refused = plan_fit(p, env, o->dry);
  if (refused > 0 && o->force && !o->dry) {
    fprintf(stderr, "vouch run: --force: running plan %s although %d step%s may not fit\n", p->name, refused,
            refused == 1 ? "" : "s");
    return -1;
  }
  if (refused > 0)
    fprintf(stderr, "vouch run: plan %s refused: %d step%s cannot fit %s (nothing ran)\n", p->name, refused,
            refused == 1 ? "" : "s", env->gpu ? env->device : "this machine");
  return refused > 0 ? EXIT_USAGE : o->dry ? EXIT_OK : -1;
}

/* replay.sh's extra `vouch run` options: --set and --path-lib of each override and library (one
 * that cannot be single-quoted is left out). */
static void replay_args(const run_opts *o, char *replay, size_t cap) {
  replay[0] = 0;
  for (int i = 0; i < o->n_over; i++) {
    size_t k = strlen(replay);
    if (strchr(o->over[i], '\'')) continue; /* cannot be single-quoted; replay.sh then lacks it */
    snprintf(replay + k, cap - k, "%s--set '%.600s'", k ? " " : "", o->over[i]);
  }
  for (int i = 0; i < o->n_libs; i++) {
    size_t k = strlen(replay);
    if (strchr(o->libs[i], '\'')) continue;
    snprintf(replay + k, cap - k, "%s--path-lib '%.590s'", k ? " " : "", o->libs[i]);
  }
}

/* Opens the result directory outdir (the resumed one, --out, or vouch-results/<plan>-<time>) into
 * *rd: a new run's manifest, plan.json, replay.sh and run_args, or the resumed run reopened. False
 * when it cannot (error printed, nothing left open). */
static bool run_open(const vplan *p, run_opts *o, int argc, char **argv, char *outdir, size_t cap, vrundir **rd) {
  *rd = NULL;
  if (o->resume) snprintf(outdir, cap, "%s", o->resume);
  else if (o->out) snprintf(outdir, cap, "%s", o->out);
  else {
    char ts[32];
    time_t now = time(NULL);
    strftime(ts, sizeof ts, "%Y%m%d-%H%M%S", gmtime(&now));
    snprintf(outdir, cap, "vouch-results/%s-%s", p->name, ts);
    cli_mkdirs("vouch-results");
  }
#ifdef VOUCH_HAVE_CUDA
  char *gi = cuda_gpu_info_json();
  manifest_set_gpu_info(gi);
  free(gi);
#endif
  uint64_t seeds[1] = {0};
  const char *seed_s = plan_var(p, "seed");
  if (seed_s) seeds[0] = strtoull(seed_s, NULL, 0);
  char replay[16 * 620]; /* replay.sh passes the same variables again */
  replay_args(o, replay, sizeof replay);
  manifest_opts mo = {.plan_name = p->name, .plan_text = p->text, .argc = argc, .argv = argv, .seeds = seeds,
                      .n_seeds = 1, .replay_args = replay[0] ? replay : NULL};
  if (o->resume ? rec_resume_dir(rd, outdir) : rec_open_dir(rd, outdir, &mo)) {
    cli_print_error("run");
    return false;
  }
  if (!o->resume && save_run_args(*rd, o->over, o->n_over, o->libs, o->n_libs, o->fail_fast)) {
    cli_print_error("run");
    rec_abandon(*rd);
    *rd = NULL;
    return false;
  }
  return true;
}

/* Runs step i (it runs here) and, when it exits non-zero without a failing record of its own, adds
 * one: its exit code. */
static int run_step(const vplan_step *st, int i, const vplan_steps *steps, vrundir *rd) {
  fprintf(stderr, "vouch run: step %d: vouch", i);
  for (int k = 0; k < st->argc; k++) { /* redacted: a CI log is published (a server URL's user:password) */
    char *shown = redact_dup(st->argv[k]);
    fprintf(stderr, " %s", shown ? shown : REDACTED);
    free(shown);
  }
  fprintf(stderr, "\n");
  const int bad_before = rec_dir_count_bad(rd);
  const vrec_sink *sink = vrundir_sink(rd); /* handed to the step: where its records go */
  const int rc = steps->run(st->suite, st->argc, st->argv, sink); /* build_plan: a step of this build */
  if (rc == EXIT_INTERRUPTED && vinterrupted()) {
    /* stopped after its case in flight (SIGINT / SIGTERM): what finished is stored, the step is not
     * marked done, so --resume runs the rest of it; not a failure of the step */
    fprintf(stderr, "vouch run: step %d (%s) interrupted\n", i, st->suite);
  } else if (rc != EXIT_OK) {
    fprintf(stderr, "vouch run: step %d (%s) exited %d\n", i, st->suite, rc);
    /* A step that failed without recording why (bad arguments, an unreadable model, a store
     * error after some cases were kept) still leaves an error record, so the verdict cannot stay
     * "pass" (seen: a UNIQUE-constraint failure left a plan "pass" with exit 1). */
    if (rc == EXIT_USAGE || rec_dir_count_bad(rd) == bad_before)
      step_record(sink, i, st->suite, REC_ERROR, rc == EXIT_USAGE ? "the suite rejected its arguments (see the log above)"
                                                             : "the suite exited non-zero without a failing case (see the log above)");
  }
  return rc;
}

/* Runs the plan's steps in order into rd (the run sink): a resumed run's finished steps are kept,
 * a step for the other machine or after a --fail-fast stop is recorded not_run. Stops at an
 * interrupt. The worst exit code: EXIT_CHECK_FAILED for a failed step or a store that refused,
 * EXIT_USAGE when a resumed step's old record cannot be cleared (error printed). */
static int run_steps(const vplan *p, const run_opts *o, const vplan_steps *steps, vrundir *rd, plan_servers *ps) {
  int worst = EXIT_OK;
  char stop_why[160] = "";
  for (int i = 0; i < p->n_steps && !vinterrupted(); i++) {
    const vplan_step *st = &p->steps[i];
    if (i < o->resume_done) { /* resumed: this step finished before the interruption */
      fprintf(stderr, "vouch run: step %d (%s) finished before: its records are kept\n", i, st->suite);
      continue;
    }
    char sid[160];
    step_id(sid, sizeof sid, i, st->suite);
    if (o->resume && rec_dir_forget_not_run(rd, "run", sid, "")) { /* the crashed run's "not run" of this step */
      cli_print_error("run");
      return EXIT_USAGE;
    }
    if (stop_why[0]) { /* --fail-fast: a step failed; the rest are recorded, not run */
      not_run_record(vrundir_sink(rd), i, st->suite, stop_why);
    } else if (!st->runs_here) {
      fprintf(stderr, "vouch run: step %d (%s) skipped: %s\n", i, st->suite, st->skip_why);
      not_run_record(vrundir_sink(rd), i, st->suite, st->skip_why);
    } else if (plan_servers_alive(ps, st)) { /* a server the plan launched is gone: no step can reach it */
      fprintf(stderr, "vouch run: step %d (%s) not run: %s\n", i, st->suite, verr_msg());
      step_record(vrundir_sink(rd), i, st->suite, REC_ERROR, verr_msg());
      if (worst == EXIT_OK) worst = EXIT_CHECK_FAILED;
      snprintf(stop_why, sizeof stop_why, "a server launched for the plan exited before step %d (%s)", i, st->suite);
      verr_clear();
    } else {
      const int rc = run_step(st, i, steps, rd);
      if (rc != EXIT_OK && !(rc == EXIT_INTERRUPTED && vinterrupted())) {
        if (worst == EXIT_OK) worst = EXIT_CHECK_FAILED;
        if (o->fail_fast) {
          snprintf(stop_why, sizeof stop_why, "--fail-fast: step %d (%s) exited %d", i, st->suite, rc);
          fprintf(stderr, "vouch run: %s; the remaining steps are not run\n", stop_why);
        }
      }
    }
    if (!step_finished(rd, i)) return EXIT_CHECK_FAILED;
  }
  return worst;
}

/* The plan's launched servers did not start: one error record (run/servers, the message `why`) and
 * every step recorded not_run. EXIT_CHECK_FAILED. */
static int servers_failed(const vplan *p, vrundir *rd, const char *why) {
  vrecord *r = rec_new("run", "servers", "");
  if (r) {
    snprintf(r->case_id, sizeof r->case_id, "servers");
    rec_set_status(r, REC_ERROR, why);
    rec_emit(vrundir_sink(rd), r, NULL);
    rec_free(r);
  }
  for (int i = 0; i < p->n_steps; i++)
    not_run_record(vrundir_sink(rd), i, p->steps[i].suite, "the plan's launched servers did not start");
  return EXIT_CHECK_FAILED;
}

/* The summary: closes rd (incomplete when interrupted), bundles it unless --no-bundle, prints the
 * stored verdict. The exit code, from worst (run_steps') on. */
static int run_close(vrundir *rd, const char *outdir, bool bundle, int worst) {
  int n = rec_dir_count(rd);
  bool stopped = vinterrupted();
  vstatus cs = stopped ? rec_abandon(rd) : rec_close(rd);
  if (cs) cli_print_error("run");
  fprintf(stderr, "vouch run: %d records in %s%s\n", n, outdir, stopped ? " (interrupted: marked incomplete)" : "");
  if (bundle && !cs) {
    char used[PATH_MAX + 400], hex[65]; /* as `vouch bundle DIR` */
    if (bundle_pack(outdir, NULL, used, sizeof used, hex)) {
      cli_print_error("bundle");
      worst = EXIT_CHECK_FAILED;
    } else {
      printf("%s\nsha256 %s\n", used, hex);
    }
  }
  /* the verdict comes from the stored manifest */
  char mpath[700];
  snprintf(mpath, sizeof mpath, "%s/manifest.json", outdir);
  FILE *f = fopen(mpath, "rb");
  if (f) {
    char buf[1 << 16];
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    buf[got] = 0;
    fclose(f);
    cJSON *m = cJSON_Parse(buf);
    const cJSON *verdict = m ? cJSON_GetObjectItem(m, "verdict") : NULL;
    if (cJSON_IsString(verdict)) {
      printf("verdict: %s (%s)\n", verdict->valuestring, outdir);
      print_undecided(outdir);
      if (strcmp(verdict->valuestring, "pass") && worst == EXIT_OK) worst = EXIT_CHECK_FAILED;
    }
    cJSON_Delete(m);
  }
  if (stopped) return EXIT_INTERRUPTED;
  return cs ? EXIT_CHECK_FAILED : worst;
}

int cmd_run(int argc, char **argv, const vplan_steps *steps) {
  dry_use_steps(steps); /* the estimates find each step's suite where the run does */
  run_opts o;
  const int early = run_parse_opts(argc, argv, &o);
  if (early >= 0) return early;
  if (o.resume && run_resume_opts(&o)) { cli_print_error("run"); return EXIT_USAGE; }
  if (o.list) return run_list(steps);
  const int gpus = gpu_count();
  vplan *p = NULL;
  if (run_build_plan(&o, steps, gpus > 0 || o.gpu_mem > 0 /* --gpu-mem plans for a GPU */, gpus, &p)) {
    cli_print_error("run");
    return EXIT_USAGE;
  }
  dry_env env;
  machine_env(&env, gpus, o.gpu_mem, o.host_mem, o.cpus);
  int rc = run_preflight(p, &o, steps, &env);
  char outdir[600];
  vrundir *rd = NULL;
  if (rc < 0 && !run_open(p, &o, argc, argv, outdir, sizeof outdir, &rd)) rc = EXIT_USAGE;
  if (rc < 0) {
    vinterrupt_install();
    fprintf(stderr, "vouch run: plan %s on %s (%d GPU%s) -> %s%s\n", p->name, gpus ? "GPU" : "CPU", gpus,
            gpus == 1 ? "" : "s", outdir, o.resume ? " (resumed)" : "");
    plan_servers ps; /* the 'launch:' servers, started once for every step (plan_servers.h) */
    int worst;
    if (plan_servers_start(p, vrundir_sink(rd), &ps)) {
      cli_print_error("run");
      worst = servers_failed(p, rd, verr_msg());
      verr_clear();
    } else {
      worst = run_steps(p, &o, steps, rd, &ps);
      plan_servers_stop(&ps);
    }
    rc = run_close(rd, outdir, o.bundle, worst);
  }
  free_plan(p);
  return rc;
}
