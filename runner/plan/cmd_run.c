/* vouch run: executes a plan's suites in order and writes one result directory.
 *
 * A plan is JSON: {"name", "description", "vars": {...}, "steps": [{"suite", "args": [...]}]}.
 * Arguments may use ${var}: vars from the plan, overridden by --model/--paths/--set; a var
 * X_gpu or X_cpu defines ${X} when a GPU is (or is not) visible; ${device} is "gpu"/"cpu".
 * Each suite runs in-process (vplan_steps, runner/plan/cmd_run.h: the steps a plan may name, handed in by
 * the command table of runner/cli/commands.c) and stores its records
 * in the run as each case finishes (suites/engine/engine.h), so Ctrl-C, a crash or kill -9 keeps every
 * finished case; the run is then "incomplete". The store also records how many steps finished
 * (meta 'steps_done') and the variables the run was given (meta 'run_args'), so --resume DIR
 * continues it: finished steps are kept, the interrupted step runs again without the cases
 * already stored (suites/engine/record.h rec_stored), and the rest run as usual.
 * Before anything runs, every step is estimated (runner/plan/dryrun.h: the paths it opens, memory per GPU
 * and on the host, expected time) and a plan with a step that cannot fit the GPU is refused;
 * --dry-run prints the estimates and stops there. --fail-fast stops after the first failed step. */
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

typedef struct {
  char key[48];
  char val[512];
} var;

static const char *var_get(const var *v, int n, const char *key) {
  for (int i = n - 1; i >= 0; i--)
    if (!strcmp(v[i].key, key)) return v[i].val;
  return NULL;
}

/* Expands ${name} in `in` into out; unknown variables are errors naming the plan and step. */
static vstatus expand(const char *in, const var *v, int n, char *out, size_t cap, const char *where) {
  size_t k = 0;
  for (const char *p = in; *p;) {
    if (p[0] == '$' && p[1] == '{') {
      const char *e = strchr(p, '}');
      if (!e) return VERR("%s: unterminated ${ in '%s'", where, in);
      char key[48];
      snprintf(key, sizeof key, "%.*s", (int)(e - p - 2), p + 2);
      const char *val = var_get(v, n, key);
      if (!val) return VERR("%s: unknown variable ${%s}", where, key);
      size_t l = strlen(val);
      if (k + l >= cap) return VERR("%s: argument too long", where);
      memcpy(out + k, val, l);
      k += l;
      p = e + 1;
    } else {
      if (k + 1 >= cap) return VERR("%s: argument too long", where);
      out[k++] = *p++;
    }
  }
  out[k] = 0;
  return V_OK;
}

static char *read_plan(const char *arg, char *name, size_t name_cap) {
  for (const vplan_text *p = vouch_plans; p->name; p++)
    if (!strcmp(p->name, arg)) {
      snprintf(name, name_cap, "%s", p->name);
      return strdup(p->text);
    }
  FILE *f = fopen(arg, "rb");
  if (!f) {
    char known[256] = "";
    for (const vplan_text *p = vouch_plans; p->name; p++) {
      strncat(known, p->name, sizeof known - strlen(known) - 2);
      strncat(known, " ", sizeof known - strlen(known) - 1);
    }
    VERR("plan '%s' is neither a built-in plan (%s) nor a readable file", arg, known);
    return NULL;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  char *t = n >= 0 && n < (1 << 22) ? malloc((size_t)n + 1) : NULL;
  if (!t || fread(t, 1, (size_t)n, f) != (size_t)n) {
    fclose(f);
    free(t);
    VERR("%s: cannot read plan", arg);
    return NULL;
  }
  fclose(f);
  t[n] = 0;
  const char *base = strrchr(arg, '/');
  base = base ? base + 1 : arg;
  const size_t bl = strlen(base) < name_cap ? strlen(base) : name_cap - 1; /* a long file name is cut */
  memcpy(name, base, bl);
  name[bl] = 0;
  char *dot = strrchr(name, '.');
  if (dot) *dot = 0;
  return t;
}

/* Checks the plan's shape; every problem names the plan and the field. */
static vstatus check_plan(const cJSON *plan, const char *pname, const vplan_steps *steps) {
  if (!cJSON_IsObject(plan)) return VERR("plan %s: top level must be an object", pname);
  const cJSON *list = cJSON_GetObjectItem(plan, "steps");
  if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) == 0) return VERR("plan %s: field 'steps' must be a non-empty list", pname);
  const cJSON *vars = cJSON_GetObjectItem(plan, "vars");
  if (vars && !cJSON_IsObject(vars)) return VERR("plan %s: field 'vars' must be an object of strings", pname);
  const cJSON *v;
  cJSON_ArrayForEach(v, vars) if (!cJSON_IsString(v)) return VERR("plan %s: vars.%s must be a string", pname, v->string);
  int i = 0;
  const cJSON *s;
  cJSON_ArrayForEach(s, list) {
    const cJSON *suite = cJSON_GetObjectItem(s, "suite"), *args = cJSON_GetObjectItem(s, "args");
    if (!cJSON_IsString(suite)) return VERR("plan %s: steps[%d].suite must be a string", pname, i);
    if (!steps->known(suite->valuestring)) return VERR("plan %s: steps[%d].suite '%s' is not a suite of this build", pname, i, suite->valuestring);
    if (args && !cJSON_IsArray(args)) return VERR("plan %s: steps[%d].args must be a list of strings", pname, i);
    const cJSON *a;
    cJSON_ArrayForEach(a, args) if (!cJSON_IsString(a)) return VERR("plan %s: steps[%d].args must be strings", pname, i);
    const cJSON *when = cJSON_GetObjectItem(s, "when");
    if (when && (!cJSON_IsString(when) || (strcmp(when->valuestring, "gpu") && strcmp(when->valuestring, "cpu"))))
      return VERR("plan %s: steps[%d].when must be \"gpu\" or \"cpu\"", pname, i);
    i++;
  }
  return V_OK;
}


/* The suite argv of step `s` with variables expanded into bufs; false (error recorded) on a bad
 * variable. */
static bool expand_step(const cJSON *s, const var *vars, int nv, const char *pname, int step_i, char **sargv,
                        char (*bufs)[600], int *sargc) {
  const char *suite = cJSON_GetObjectItem(s, "suite")->valuestring;
  int n = 0;
  sargv[n++] = (char *)suite;
  const cJSON *a;
  char where[160];
  snprintf(where, sizeof where, "plan %s: steps[%d]", pname, step_i);
  cJSON_ArrayForEach(a, cJSON_GetObjectItem(s, "args")) {
    if (n == 127) break;
    if (expand(a->valuestring, vars, nv, bufs[n], sizeof bufs[0], where)) return false;
    sargv[n] = bufs[n];
    n++;
  }
  sargv[n] = NULL;
  *sargc = n;
  return true;
}

/* "141G", "80g", "512M", "1073741824" -> bytes (K/M/G/T: powers of 1024). */
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

/* Checks the options of every step from step `from` on (a resumed run's unfinished ones) that runs
 * on this machine (gpu: the GPU variant) with its
 * suite's own parser (steps->check), running nothing, so a misspelled option or an unknown path
 * in step 12 refuses the plan before step 0 runs. Returns the number of steps refused (each with
 * one line on stderr naming the plan, the step and the option), -1 on a plan error (recorded). */
static int plan_check_options(const cJSON *plan, const char *pname, const vplan_steps *steps, const var *vars, int nv,
                              bool gpu, int from) {
  int step_i = 0, bad = 0;
#ifndef VOUCH_HAVE_CUDA
  /* a GPU variant planned (--dry-run --gpu-mem) by a build without the GPU paths: their names are
   * unknown here, though the steps are right for a CUDA build */
  if (gpu) {
    fprintf(stderr, "vouch run: plan %s: the steps' options are not checked: this build has no CUDA paths\n", pname);
    return 0;
  }
#endif
  const cJSON *s;
  cJSON_ArrayForEach(s, cJSON_GetObjectItem(plan, "steps")) {
    const cJSON *when = cJSON_GetObjectItem(s, "when");
    const char *suite = cJSON_GetObjectItem(s, "suite")->valuestring;
    if (step_i >= from && (!when || !strcmp(when->valuestring, gpu ? "gpu" : "cpu"))) {
      char *sargv[128], bufs[128][600];
      int sargc;
      if (!expand_step(s, vars, nv, pname, step_i, sargv, bufs, &sargc)) return -1;
      if (steps->check(suite, sargc, sargv)) { /* check_plan: a plan step of this build */
        fprintf(stderr, "vouch run: plan %s: steps[%d] (%s): %s\n", pname, step_i, suite, verr_msg());
        bad++;
      }
    }
    step_i++;
  }
  return bad;
}

/* Estimates every step that runs on this machine; prints the table when `print`. Returns the number
 * of steps that cannot fit (each with one line on stderr), -1 on a plan error (recorded). */
static int plan_fit(const cJSON *plan, const char *pname, const var *vars, int nv, const dry_env *env, bool print) {
  const double gib = 1073741824.0;
  int step_i = 0, refused = 0;
  double total_s = 0;
  if (print) {
    printf("plan %s on %s%s, a host of %.1f GiB and %d cores\n", pname,
           env->gpu ? (env->device[0] ? env->device : "a GPU") : "the CPU",
           env->gpu && env->gpu_free > 0 ? "" : env->gpu ? " (free memory unknown: not checked)" : "",
           env->host_total / 1073741824.0, env->cpu_threads);
    printf("%-4s %-9s %-44s %10s %10s %8s %-8s %s\n", "step", "suite", "paths (a+b: open together; a, b: one at a time)",
           "GPU GiB", "host GiB", "seconds", "fits", "peak at");
  }
  const cJSON *s;
  cJSON_ArrayForEach(s, cJSON_GetObjectItem(plan, "steps")) {
    const cJSON *when = cJSON_GetObjectItem(s, "when");
    const char *suite = cJSON_GetObjectItem(s, "suite")->valuestring;
    if (when && strcmp(when->valuestring, env->gpu ? "gpu" : "cpu")) {
      if (print) printf("%-4d %-9s (runs only on a %s: skipped)\n", step_i, suite, when->valuestring);
      step_i++;
      continue;
    }
    char *sargv[128], bufs[128][600];
    int sargc;
    if (!expand_step(s, vars, nv, pname, step_i, sargv, bufs, &sargc)) return -1;
    dry_step d;
    /* a step that cannot be estimated (an unreadable model; bad options were refused before, by
     * plan_check_options) is left to the suite, which records why it failed */
    vstatus e = dry_estimate(sargc, sargv, env, &d);
    char label[16];
    snprintf(label, sizeof label, "%s", e != V_OK ? "?" : d.fits ? (d.degrades && env->gpu_free > 0 &&
                                                                                   d.gpu_bytes > env->gpu_free ? "shrinks" : "yes")
                                                                         : "NO");
    if (!env->gpu && d.uses_gpu && d.fits) snprintf(label, sizeof label, "no GPU");
    if (print) {
      const char *suite_l = !strcmp(suite, "eval") && sargc > 1 ? sargv[1] : suite;
      if (e != V_OK) printf("%-4d %-9s not estimated: %s\n", step_i, suite_l, verr_msg());
      else
        printf("%-4d %-9s %-44s %10.2f %10.2f %8.0f %-8s %s\n", step_i, suite_l, d.paths, d.gpu_bytes / gib,
               d.host_bytes / gib, d.seconds, label, d.peak_at);
    }
    total_s += d.seconds;
    if (e == V_OK && !d.fits) {
      fprintf(stderr, "vouch run: plan %s: step %d (%s) cannot fit: %s\n", pname, step_i, suite, d.why);
      refused++;
    }
    step_i++;
  }
  if (print) printf("expected total: %.0f s (%.1f min)%s\n", total_s, total_s / 60.0,
                    refused ? "; refused: steps that cannot fit are listed on stderr" : "");
  return refused;
}

/* The case id of step `step_i`'s own records ("step3-kernels"; rundir.c writes the same). */
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

static void step_id(char *buf, size_t n, int step_i, const char *suite) { snprintf(buf, n, "step%d-%s", step_i, suite); }

/* Records step `step_i` (suite) as not run in the run `sink`, with the reason. */
static void not_run_record(const vrec_sink *sink, int step_i, const char *suite, const char *why) {
  vrecord *r = rec_new("run", suite, "");
  if (!r) return;
  step_id(r->case_id, sizeof r->case_id, step_i, suite);
  rec_set_status(r, REC_NOT_RUN, why);
  rec_emit(sink, r, NULL);
  rec_free(r);
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

vstatus run_plan_parse(const char *text, const char *pname, const vplan_steps *steps, cJSON **out) {
  *out = NULL;
  cJSON *plan = cJSON_Parse(text);
  if (!plan) return VERR("plan %s: not valid JSON", pname);
  vstatus s = check_plan(plan, pname, steps);
  if (s) { cJSON_Delete(plan); return s; }
  *out = plan;
  return V_OK;
}

int cmd_run(int argc, char **argv, const vplan_steps *steps) {
  dry_use_steps(steps); /* the estimates find each step's suite where the run does */
  const char *plan_arg = "smoke", *out_arg = NULL, *resume = NULL, *v;
  char resume_plan[700];
  int resume_done = 0; /* the steps a resumed run finished before: not checked again */
  var vars[64];
  int nv = 0;
  bool bundle = true, list = false, dry = false, fail_fast = false, force = false, plan_given = false;
  double gpu_mem = 0, host_mem = 0;
  int cpus = 0;
  vstatus err = V_OK;
  char over[16][600]; /* "VAR=VALUE" from --model, --paths, --set */
  int n_over = 0;
  char libs[8][600]; /* --path-lib files, for replay.sh and --resume */
  int n_libs = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(USAGE, stdout); return EXIT_OK; }
    if (!strcmp(a, "--no-bundle")) bundle = false;
    else if (!strcmp(a, "--list")) list = true;
    else if (!strcmp(a, "--dry-run")) dry = true;
    else if (!strcmp(a, "--fail-fast")) fail_fast = true;
    else if (!strcmp(a, "--force")) force = true;
    else if (cli_opt(argc, argv, &i, "--gpu-mem", &v, &err)) { if (v) err = parse_mem("--gpu-mem", v, &gpu_mem); }
    else if (cli_opt(argc, argv, &i, "--host-mem", &v, &err)) { if (v) err = parse_mem("--host-mem", v, &host_mem); }
    else if (cli_opt(argc, argv, &i, "--cpus", &v, &err)) {
      char *end;
      long n = v ? strtol(v, &end, 10) : 0;
      if (v && (end == v || *end || n < 1 || n > 4096)) err = VERR("--cpus '%s': expected a core count 1..4096", v);
      else if (v) cpus = (int)n;
    }
    else if (cli_opt(argc, argv, &i, "--plan", &v, &err)) { if (v) plan_arg = v, plan_given = true; }
    else if (cli_opt(argc, argv, &i, "--resume", &v, &err)) { if (v) resume = v; }
    else if (cli_opt(argc, argv, &i, "--out", &v, &err)) { if (v) out_arg = v; }
    else if (cli_opt(argc, argv, &i, "--model", &v, &err)) { if (v && n_over < 16) snprintf(over[n_over++], sizeof over[0], "model=%s", v); }
    else if (cli_opt(argc, argv, &i, "--paths", &v, &err)) { if (v && n_over < 16) snprintf(over[n_over++], sizeof over[0], "paths=%s", v); }
    else if (cli_opt(argc, argv, &i, "--path-lib", &v, &err)) {
      /* replay.sh and --resume load it again from wherever they run: its absolute path */
      char full[PATH_MAX];
      if (v && !(err = vpaths_load_lib(v)) && n_libs < 8) {
        const char *keep = realpath(v, full) && strlen(full) < sizeof libs[0] ? full : v;
        size_t l = strlen(keep);
        if (l >= sizeof libs[0]) l = sizeof libs[0] - 1; /* a name that long fails to load again, with its error */
        memcpy(libs[n_libs], keep, l);
        libs[n_libs++][l] = 0;
      }
    } else if (cli_opt(argc, argv, &i, "--set", &v, &err)) { if (v && n_over < 16) snprintf(over[n_over++], sizeof over[0], "%s", v);
    } else err = VERR("unknown option '%s' (see vouch run --help)", a);
    if (err) { cli_print_error("run"); return EXIT_USAGE; }
    if (resume && (out_arg || n_over || n_libs || list || dry || plan_given || fail_fast))
      err = VERR("--resume DIR continues DIR with its own plan, variables and path libraries: drop --plan, --out, "
                 "--model, --paths, --set, --path-lib, --fail-fast, --list and --dry-run");
    if (err) { cli_print_error("run"); return EXIT_USAGE; }
  }
  if (resume) {
    snprintf(resume_plan, sizeof resume_plan, "%s/plan.json", resume);
    plan_arg = resume_plan;
    /* the build first: a newer build's option names must not hide that it is another build */
    char *args_txt = NULL;
    const vstatus e = rec_resume_check(resume, &resume_done, &args_txt);
    if (e || load_run_args(resume, args_txt, over, &n_over, libs, &n_libs, &fail_fast)) {
      cli_print_error("run");
      free(args_txt);
      return EXIT_USAGE;
    }
    free(args_txt);
  }
  if (list) {
    for (const vplan_text *p = vouch_plans; p->name; p++) {
      cJSON *j = cJSON_Parse(p->text);
      const cJSON *d = j ? cJSON_GetObjectItem(j, "description") : NULL;
      printf("%-10s %s\n", p->name, cJSON_IsString(d) ? d->valuestring : "");
      cJSON_Delete(j);
    }
    return EXIT_OK;
  }
  char pname[128];
  char *text = read_plan(plan_arg, pname, sizeof pname);
  if (!text) { cli_print_error("run"); return EXIT_USAGE; }
  cJSON *plan = NULL;
  if (run_plan_parse(text, pname, steps, &plan)) { cli_print_error("run"); free(text); return EXIT_USAGE; }
  /* a plan file is known by its own "name" (replay.sh runs plan.json): identity is its hash */
  const char *own = cJSON_GetStringValue(cJSON_GetObjectItem(plan, "name"));
  if (own && *own && strlen(own) < sizeof pname && strspn(own, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == strlen(own) && own[0] != '.')
    snprintf(pname, sizeof pname, "%s", own);

  /* variables: plan, then device-derived, then command-line overrides */
  const int gpus = gpu_count();
  const bool gpu_variant = gpus > 0 || gpu_mem > 0; /* --gpu-mem plans for a GPU */
  if ((host_mem > 0 || cpus > 0) && !dry) {
    VERR("--host-mem and --cpus describe another machine to plan for: use them with --dry-run");
    cli_print_error("run");
    cJSON_Delete(plan);
    free(text);
    return EXIT_USAGE;
  }
  if (gpu_mem > 0 && gpus == 0 && !dry) {
    VERR("--gpu-mem plans for a GPU and this machine has none: use it with --dry-run");
    cli_print_error("run");
    cJSON_Delete(plan);
    free(text);
    return EXIT_USAGE;
  }
  const cJSON *pv;
  cJSON_ArrayForEach(pv, cJSON_GetObjectItem(plan, "vars")) {
    if (nv == 60) break;
    snprintf(vars[nv].key, sizeof vars[nv].key, "%s", pv->string);
    snprintf(vars[nv].val, sizeof vars[nv].val, "%s", pv->valuestring);
    nv++;
  }
  /* X_gpu / X_cpu define ${X} on a machine with / without a GPU */
  const char *suffix = gpu_variant ? "_gpu" : "_cpu";
  for (int i = 0, n0 = nv; i < n0 && nv < 60; i++) {
    size_t kl = strlen(vars[i].key);
    if (kl > 4 && !strcmp(vars[i].key + kl - 4, suffix)) {
      var d = vars[i]; /* a copy: source and destination are elements of the same array */
      d.key[kl - 4] = 0;
      vars[nv++] = d;
    }
  }
  if (!var_get(vars, nv, "paths")) {
    snprintf(vars[nv].key, sizeof vars[nv].key, "paths");
    snprintf(vars[nv].val, sizeof vars[nv].val, "cpu-ref");
    nv++;
  }
  snprintf(vars[nv].key, sizeof vars[nv].key, "device");
  snprintf(vars[nv].val, sizeof vars[nv].val, "%s", gpu_variant ? "gpu" : "cpu");
  nv++;
  for (int i = 0; i < n_over && nv < 64; i++) {
    const char *eq = strchr(over[i], '=');
    if (!eq) { VERR("--set '%s': expected VAR=VALUE", over[i]); cli_print_error("run"); return EXIT_USAGE; }
    snprintf(vars[nv].key, sizeof vars[nv].key, "%.*s", (int)(eq - over[i]), over[i]);
    snprintf(vars[nv].val, sizeof vars[nv].val, "%s", eq + 1);
    nv++;
  }

  /* every step's options checked before anything runs (not overridden by --force) */
  const int bad_opts = plan_check_options(plan, pname, steps, vars, nv, gpu_variant, resume_done);
  if (bad_opts != 0) {
    if (bad_opts < 0) cli_print_error("run");
    else
      fprintf(stderr, "vouch run: plan %s refused: %d step%s with options the suite rejects (nothing ran)\n", pname,
              bad_opts, bad_opts == 1 ? "" : "s");
    cJSON_Delete(plan);
    free(text);
    return EXIT_USAGE;
  }
  /* every step estimated before anything runs; a step that cannot fit refuses the plan */
  dry_env env;
  machine_env(&env, gpus, gpu_mem, host_mem, cpus);
  const int refused = plan_fit(plan, pname, vars, nv, &env, dry);
  if (refused > 0 && force && !dry)
    fprintf(stderr, "vouch run: --force: running plan %s although %d step%s may not fit\n", pname, refused,
            refused == 1 ? "" : "s");
  else if (refused != 0 || dry) {
    if (refused < 0) cli_print_error("run");
    else if (refused > 0)
      fprintf(stderr, "vouch run: plan %s refused: %d step%s cannot fit %s (nothing ran)\n", pname, refused,
              refused == 1 ? "" : "s", env.gpu ? env.device : "this machine");
    cJSON_Delete(plan);
    free(text);
    return refused != 0 ? EXIT_USAGE : EXIT_OK;
  }

  char outdir[600];
  if (resume) snprintf(outdir, sizeof outdir, "%s", resume);
  else if (out_arg) snprintf(outdir, sizeof outdir, "%s", out_arg);
  else {
    char ts[32];
    time_t now = time(NULL);
    strftime(ts, sizeof ts, "%Y%m%d-%H%M%S", gmtime(&now));
    snprintf(outdir, sizeof outdir, "vouch-results/%s-%s", pname, ts);
    cli_mkdirs("vouch-results");
  }
#ifdef VOUCH_HAVE_CUDA
  char *gi = cuda_gpu_info_json();
  manifest_set_gpu_info(gi);
  free(gi);
#endif
  uint64_t seeds[1] = {0};
  const char *seed_s = var_get(vars, nv, "seed");
  if (seed_s) seeds[0] = strtoull(seed_s, NULL, 0);
  /* replay.sh passes the same variables again */
  char replay[16 * 620] = "";
  for (int i = 0; i < n_over; i++) {
    size_t k = strlen(replay);
    if (strchr(over[i], '\'')) continue; /* cannot be single-quoted; replay.sh then lacks it */
    snprintf(replay + k, sizeof replay - k, "%s--set '%.600s'", k ? " " : "", over[i]);
  }
  for (int i = 0; i < n_libs; i++) {
    size_t k = strlen(replay);
    if (strchr(libs[i], '\'')) continue;
    snprintf(replay + k, sizeof replay - k, "%s--path-lib '%.590s'", k ? " " : "", libs[i]);
  }
  manifest_opts mo = {.plan_name = pname, .plan_text = text, .argc = argc, .argv = argv, .seeds = seeds, .n_seeds = 1,
                      .replay_args = replay[0] ? replay : NULL};
  vrundir *rd = NULL;
  const int steps_done = resume_done; /* steps a resumed run finished before (rec_resume_check read them) */
  if (resume ? rec_resume_dir(&rd, outdir) : rec_open_dir(&rd, outdir, &mo)) {
    cli_print_error("run");
    cJSON_Delete(plan);
    free(text);
    return EXIT_USAGE;
  }
  if (!resume && save_run_args(rd, over, n_over, libs, n_libs, fail_fast)) {
    cli_print_error("run");
    rec_abandon(rd);
    cJSON_Delete(plan);
    free(text);
    return EXIT_USAGE;
  }
  const vrec_sink *sink = vrundir_sink(rd); /* handed to each step: where its records go */
  vinterrupt_install();
  fprintf(stderr, "vouch run: plan %s on %s (%d GPU%s) -> %s%s\n", pname, gpus ? "GPU" : "CPU", gpus, gpus == 1 ? "" : "s",
          outdir, resume ? " (resumed)" : "");

  int step_i = 0, worst = EXIT_OK;
  char stop_why[160] = "";
  const cJSON *s;
  cJSON_ArrayForEach(s, cJSON_GetObjectItem(plan, "steps")) {
    if (vinterrupted()) break;
    const cJSON *when = cJSON_GetObjectItem(s, "when");
    const char *suite = cJSON_GetObjectItem(s, "suite")->valuestring;
    if (step_i < steps_done) { /* resumed: this step finished before the interruption */
      fprintf(stderr, "vouch run: step %d (%s) finished before: its records are kept\n", step_i, suite);
      step_i++;
      continue;
    }
    char sid[160];
    step_id(sid, sizeof sid, step_i, suite);
    if (resume && rec_dir_forget_not_run(rd, "run", sid, "")) { /* the crashed run's "not run" of this step */
      cli_print_error("run");
      worst = EXIT_USAGE;
      goto finish;
    }
    if (stop_why[0]) { /* --fail-fast: a step failed; the rest are recorded, not run */
      not_run_record(sink, step_i, suite, stop_why);
      if (!step_finished(rd, step_i++)) { worst = EXIT_CHECK_FAILED; goto finish; }
      continue;
    }
    if (when && strcmp(when->valuestring, gpu_variant ? "gpu" : "cpu")) {
      fprintf(stderr, "vouch run: step %d (%s) needs a %s: skipped\n", step_i, suite, when->valuestring);
      char why[96];
      snprintf(why, sizeof why, "this step runs only on a %s", when->valuestring);
      not_run_record(sink, step_i, suite, why);
      if (!step_finished(rd, step_i++)) { worst = EXIT_CHECK_FAILED; goto finish; }
      continue;
    }
    char *sargv[128], bufs[128][600];
    int sargc = 0;
    if (!expand_step(s, vars, nv, pname, step_i, sargv, bufs, &sargc)) {
      cli_print_error("run");
      worst = EXIT_USAGE;
      goto finish;
    }
    fprintf(stderr, "vouch run: step %d: vouch", step_i);
    for (int k = 0; k < sargc; k++) fprintf(stderr, " %s", sargv[k]);
    fprintf(stderr, "\n");
    const int bad_before = rec_dir_count_bad(rd);
    const int rc = steps->run(suite, sargc, sargv, sink); /* check_plan: a plan step of this build */
    if (rc == EXIT_INTERRUPTED && vinterrupted()) {
      /* stopped after its case in flight (SIGINT / SIGTERM): what finished is stored, the step is not
       * marked done, so --resume runs the rest of it; not a failure of the step */
      fprintf(stderr, "vouch run: step %d (%s) interrupted\n", step_i, suite);
    } else if (rc != EXIT_OK) {
      fprintf(stderr, "vouch run: step %d (%s) exited %d\n", step_i, suite, rc);
      /* A step that failed without recording why (bad arguments, an unreadable model, a store
       * error after some cases were kept) still leaves an error record, so the verdict cannot stay
       * "pass" (seen: a UNIQUE-constraint failure left a plan "pass" with exit 1). */
      if (rc == EXIT_USAGE || rec_dir_count_bad(rd) == bad_before) {
        vrecord *r = rec_new("run", suite, "");
        if (r) {
          step_id(r->case_id, sizeof r->case_id, step_i, suite);
          rec_set_status(r, REC_ERROR, rc == EXIT_USAGE ? "the suite rejected its arguments (see the log above)"
                                                        : "the suite exited non-zero without a failing case (see the log above)");
          rec_emit(sink, r, NULL);
          rec_free(r);
        }
      }
      if (worst == EXIT_OK) worst = EXIT_CHECK_FAILED;
      if (fail_fast) {
        snprintf(stop_why, sizeof stop_why, "--fail-fast: step %d (%s) exited %d", step_i, suite, rc);
        fprintf(stderr, "vouch run: %s; the remaining steps are not run\n", stop_why);
      }
    }
    if (!step_finished(rd, step_i++)) { worst = EXIT_CHECK_FAILED; goto finish; }
  }
finish:;
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
  cJSON_Delete(plan);
  free(text);
  if (stopped) return EXIT_INTERRUPTED;
  return cs ? EXIT_CHECK_FAILED : worst;
}
