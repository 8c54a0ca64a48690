/* A plan, typed (runner/plan/plan.h): the one parser of a plan's JSON. */
#include <assert.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/plan/plan.h"
#include "suites/plans/plans.h"

const char *plan_var(const vplan *p, const char *key) {
  for (int i = p->n_vars - 1; i >= 0; i--)
    if (!strcmp(p->vars[i].key, key)) return p->vars[i].val;
  return NULL;
}

const char *plan_when_name(vplan_when w) { return w == VPLAN_GPU ? "gpu" : w == VPLAN_CPU ? "cpu" : NULL; }

/* The text of plan `source` (malloc'ed) and its default name; NULL (error recorded) when it is
 * neither a built-in plan nor a readable file. */
static char *read_plan(const char *source, char *name, size_t name_cap) {
  for (const vplan_text *p = vouch_plans; p->name; p++)
    if (!strcmp(p->name, source)) {
      snprintf(name, name_cap, "%s", p->name);
      char *t = strdup(p->text);
      if (!t) VERR("plan %s: out of memory", p->name);
      return t;
    }
  FILE *f = fopen(source, "rb");
  if (!f) {
    char known[256] = "";
    for (const vplan_text *p = vouch_plans; p->name; p++) {
      strncat(known, p->name, sizeof known - strlen(known) - 2);
      strncat(known, " ", sizeof known - strlen(known) - 1);
    }
    VERR("plan '%s' is neither a built-in plan (%s) nor a readable file", source, known);
    return NULL;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  char *t = n >= 0 && n < (1 << 22) ? malloc((size_t)n + 1) : NULL;
  if (!t || fread(t, 1, (size_t)n, f) != (size_t)n) {
    fclose(f);
    free(t);
    VERR("%s: cannot read plan", source);
    return NULL;
  }
  fclose(f);
  t[n] = 0;
  const char *base = strrchr(source, '/');
  base = base ? base + 1 : source;
  const size_t bl = strlen(base) < name_cap ? strlen(base) : name_cap - 1; /* a long file name is cut */
  memcpy(name, base, bl);
  name[bl] = 0;
  char *dot = strrchr(name, '.');
  if (dot) *dot = 0;
  return t;
}

/* Checks the plan's shape; every problem names the plan and the field. (cJSON_GetObjectItem: field
 * names are matched ignoring case, as they always were.) */
static vstatus check_shape(const cJSON *plan, const char *pname, const vplan_steps *steps) {
  if (!cJSON_IsObject(plan)) return VERR("plan %s: top level must be an object", pname);
  const cJSON *list = cJSON_GetObjectItem(plan, "steps");
  if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) == 0) return VERR("plan %s: field 'steps' must be a non-empty list", pname);
  const cJSON *vars = cJSON_GetObjectItem(plan, "vars");
  if (vars && !cJSON_IsObject(vars)) return VERR("plan %s: field 'vars' must be an object of strings", pname);
  const cJSON *v;
  cJSON_ArrayForEach(v, vars) if (!cJSON_IsString(v)) return VERR("plan %s: vars.%s must be a string", pname, v->string);
  const cJSON *req = cJSON_GetObjectItem(plan, "required");
  if (req && !cJSON_IsObject(req)) return VERR("plan %s: field 'required' must be an object of strings", pname);
  cJSON_ArrayForEach(v, req) if (!cJSON_IsString(v)) return VERR("plan %s: required.%s must be a string", pname, v->string);
  int i = 0;
  const cJSON *s;
  cJSON_ArrayForEach(s, list) {
    const cJSON *suite = cJSON_GetObjectItem(s, "suite"), *args = cJSON_GetObjectItem(s, "args");
    if (!cJSON_IsString(suite)) return VERR("plan %s: steps[%d].suite must be a string", pname, i);
    if (!steps->known(suite->valuestring)) return VERR("plan %s: steps[%d].suite '%s' is not a suite of this build", pname, i, suite->valuestring);
    if (args && !cJSON_IsArray(args)) return VERR("plan %s: steps[%d].args must be a list of strings", pname, i);
    const cJSON *a;
    int k = 0;
    cJSON_ArrayForEach(a, args) {
      if (!cJSON_IsString(a)) return VERR("plan %s: steps[%d].args[%d] must be a string", pname, i, k);
      k++;
    }
    const cJSON *when = cJSON_GetObjectItem(s, "when");
    if (when && (!cJSON_IsString(when) || (strcmp(when->valuestring, "gpu") && strcmp(when->valuestring, "cpu"))))
      return VERR("plan %s: steps[%d].when must be \"gpu\" or \"cpu\"", pname, i);
    const cJSON *needs = cJSON_GetObjectItem(s, "needs");
    if (needs && !cJSON_IsArray(needs)) return VERR("plan %s: steps[%d].needs must be a list of variable names", pname, i);
    k = 0;
    cJSON_ArrayForEach(a, needs) {
      if (!cJSON_IsString(a) || !a->valuestring[0]) return VERR("plan %s: steps[%d].needs[%d] must be a variable name", pname, i, k);
      k++;
    }
    i++;
  }
  return V_OK;
}

static void add_var(vplan *p, const char *key, int key_len, const char *val) {
  vplan_var *v = &p->vars[p->n_vars++];
  snprintf(v->key, sizeof v->key, "%.*s", key_len, key);
  snprintf(v->val, sizeof v->val, "%s", val);
}

/* The variables in the order they are looked up last-first: the plan's "vars" (at most 60), X for
 * each X_gpu (X_cpu) of the GPU (CPU) variant, "paths" (cpu-ref) unless defined, "device", then
 * o->sets. Fails on a set without '='. */
static vstatus settle_vars(vplan *p, const cJSON *plan, const vplan_opts *o) {
  const cJSON *pv;
  cJSON_ArrayForEach(pv, cJSON_GetObjectItem(plan, "vars")) {
    if (p->n_vars == 60) break;
    add_var(p, pv->string, (int)strlen(pv->string), pv->valuestring);
  }
  const char *suffix = o->gpu ? "_gpu" : "_cpu";
  for (int i = 0, n0 = p->n_vars; i < n0 && p->n_vars < 60; i++) {
    size_t kl = strlen(p->vars[i].key);
    if (kl > 4 && !strcmp(p->vars[i].key + kl - 4, suffix)) {
      vplan_var d = p->vars[i]; /* a copy: source and destination are elements of the same array */
      d.key[kl - 4] = 0;
      p->vars[p->n_vars++] = d;
    }
  }
  if (!plan_var(p, "paths")) add_var(p, "paths", 5, "cpu-ref");
  add_var(p, "device", 6, o->gpu ? "gpu" : "cpu");
  for (int i = 0; i < o->n_sets && p->n_vars < VPLAN_MAX_VARS; i++) {
    const char *eq = strchr(o->sets[i], '=');
    if (!eq) return VERR("--set '%s': expected VAR=VALUE", o->sets[i]);
    add_var(p, o->sets[i], (int)(eq - o->sets[i]), eq + 1);
  }
  return V_OK;
}

/* Expands ${name} in `in` into out; unknown variables are errors naming `where` (the plan and step). */
static vstatus expand(const vplan *p, const char *in, char *out, size_t cap, const char *where) {
  size_t k = 0;
  for (const char *c = in; *c;) {
    if (c[0] == '$' && c[1] == '{') {
      const char *e = strchr(c, '}');
      if (!e) return VERR("%s: unterminated ${ in '%s'", where, in);
      char key[48];
      snprintf(key, sizeof key, "%.*s", (int)(e - c - 2), c + 2);
      const char *val = plan_var(p, key);
      if (!val) return VERR("%s: unknown variable ${%s}", where, key);
      size_t l = strlen(val);
      if (k + l >= cap) return VERR("%s: argument too long", where);
      memcpy(out + k, val, l);
      k += l;
      c = e + 1;
    } else {
      if (k + 1 >= cap) return VERR("%s: argument too long", where);
      out[k++] = *c++;
    }
  }
  out[k] = 0;
  return V_OK;
}

/* Step `i`'s argv: its suite, then its args expanded (at most VPLAN_MAX_ARGV - 2 of them). */
static vstatus expand_step(const vplan *p, int i, vplan_step *st) {
  char where[160], buf[VPLAN_ARG_CAP];
  snprintf(where, sizeof where, "plan %s: steps[%d]", p->name, i);
  const int n = st->n_args < VPLAN_MAX_ARGV - 2 ? st->n_args + 1 : VPLAN_MAX_ARGV - 1;
  st->argv = calloc((size_t)n + 1, sizeof *st->argv);
  if (!st->argv) return VERR("%s: out of memory", where);
  st->argv[0] = st->suite;
  for (st->argc = 1; st->argc < n; st->argc++) {
    VTRY(expand(p, st->args[st->argc - 1], buf, sizeof buf, where));
    if (!(st->argv[st->argc] = strdup(buf))) return VERR("%s: out of memory", where);
  }
  return V_OK;
}

/* Copies step `s` (shape checked) into st; its variables are settled in p. */
static vstatus copy_step(const cJSON *s, const vplan *p, vplan_step *st) {
  const cJSON *args = cJSON_GetObjectItem(s, "args"), *when = cJSON_GetObjectItem(s, "when"), *a;
  const cJSON *needs = cJSON_GetObjectItem(s, "needs");
  st->when = !when ? VPLAN_ANY : !strcmp(when->valuestring, "gpu") ? VPLAN_GPU : VPLAN_CPU;
  st->runs_here = st->when == VPLAN_ANY || (st->when == VPLAN_GPU) == p->gpu;
  if (!st->runs_here) snprintf(st->skip_why, sizeof st->skip_why, "this step runs only on a %s", plan_when_name(st->when));
  st->suite = strdup(cJSON_GetObjectItem(s, "suite")->valuestring);
  st->args = calloc((size_t)cJSON_GetArraySize(args) + 1, sizeof *st->args);
  st->needs = calloc((size_t)cJSON_GetArraySize(needs) + 1, sizeof *st->needs);
  if (!st->suite || !st->args || !st->needs) return VERR("plan %s: out of memory", p->name);
  cJSON_ArrayForEach(a, args) if (!(st->args[st->n_args++] = strdup(a->valuestring))) return VERR("plan %s: out of memory", p->name);
  cJSON_ArrayForEach(a, needs) {
    if (!(st->needs[st->n_needs++] = strdup(a->valuestring))) return VERR("plan %s: out of memory", p->name);
    const char *val = plan_var(p, a->valuestring);
    if (st->runs_here && (!val || !*val)) { /* the first empty one names the --set that would run it */
      st->runs_here = false;
      snprintf(st->skip_why, sizeof st->skip_why, "needs --set %s=VALUE (empty here)", a->valuestring);
    }
  }
  return V_OK;
}

/* Every variable of the plan's "required" has a non-empty value; else the error names the first
 * missing one and what it holds. */
static vstatus check_required(const vplan *p, const cJSON *j) {
  const cJSON *r;
  cJSON_ArrayForEach(r, cJSON_GetObjectItem(j, "required")) {
    const char *val = plan_var(p, r->string);
    if (!val || !*val) return VERR("plan %s: --set %s=VALUE is required (%s)", p->name, r->string, r->valuestring);
  }
  return V_OK;
}

/* Fills p (its name and text set) from the parsed plan j. */
static vstatus fill_plan(vplan *p, const cJSON *j, const vplan_opts *o) {
  VTRY(check_shape(j, p->name, o->steps));
  /* a plan file is known by its own "name" (replay.sh runs plan.json): identity is its hash */
  const char *own = cJSON_GetStringValue(cJSON_GetObjectItem(j, "name"));
  if (own && *own && strlen(own) < sizeof p->name && own[0] != '.' &&
      strspn(own, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == strlen(own))
    snprintf(p->name, sizeof p->name, "%s", own);
  const cJSON *d = cJSON_GetObjectItem(j, "description");
  if (!(p->description = strdup(cJSON_IsString(d) ? d->valuestring : ""))) return VERR("plan %s: out of memory", p->name);
  p->gpu = o->gpu;
  VTRY(settle_vars(p, j, o));
  VTRY(check_required(p, j));
  const cJSON *list = cJSON_GetObjectItem(j, "steps"), *s;
  if (!(p->steps = calloc((size_t)cJSON_GetArraySize(list), sizeof *p->steps))) return VERR("plan %s: out of memory", p->name);
  cJSON_ArrayForEach(s, list) VTRY(copy_step(s, p, &p->steps[p->n_steps++]));
  for (int i = 0; i < p->n_steps; i++)
    if (p->steps[i].runs_here) VTRY(expand_step(p, i, &p->steps[i]));
  return V_OK;
}

vstatus build_plan_text(const char *text, const char *name, const vplan_opts *o, vplan **out) {
  assert(text && name && o && o->steps);
  *out = NULL;
  vplan *p = calloc(1, sizeof *p);
  if (!p || !(p->text = strdup(text))) {
    free(p);
    return VERR("plan %s: out of memory", name);
  }
  snprintf(p->name, sizeof p->name, "%s", name);
  cJSON *j = cJSON_Parse(text);
  vstatus s = j ? fill_plan(p, j, o) : VERR("plan %s: not valid JSON", name);
  cJSON_Delete(j);
  if (s) { free_plan(p); return s; }
  *out = p;
  return V_OK;
}

vstatus build_plan(const char *source, const vplan_opts *o, vplan **out) {
  *out = NULL;
  char name[128];
  char *text = read_plan(source, name, sizeof name);
  if (!text) return V_ERR;
  vstatus s = build_plan_text(text, name, o, out);
  free(text);
  return s;
}

void free_plan(vplan *p) {
  if (!p) return;
  for (int i = 0; i < p->n_steps; i++) {
    vplan_step *st = &p->steps[i];
    for (int k = 1; st->argv && k < st->argc; k++) free(st->argv[k]);
    for (int k = 0; k < st->n_args; k++) free(st->args[k]);
    for (int k = 0; k < st->n_needs; k++) free(st->needs[k]);
    free(st->needs);
    free(st->argv);
    free(st->args);
    free(st->suite);
  }
  free(p->steps);
  free(p->description);
  free(p->text);
  free(p);
}
