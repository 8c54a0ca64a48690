/* The typed plan (runner/plan/plan.c build_plan_text): shape errors name the plan and the field,
 * variables settle in order (plan, X_gpu/X_cpu, paths, device, --set), each step that runs on this
 * machine has its argv expanded once and a step for the other machine is not expanded, and the
 * built-in plans build for both variants with every step known. */
#include <stdlib.h>
#include <string.h>

#include "runner/plan/plan.h"
#include "suites/plans/plans.h"
#include "tests/harness.h"

static bool known(const char *suite) { return !strcmp(suite, "gen") || !strcmp(suite, "sweep"); }
static vstatus check(const char *suite, int argc, char **argv) { (void)suite, (void)argc, (void)argv; return V_OK; }
static int run(const char *suite, int argc, char **argv, const vrec_sink *sink) {
  (void)suite, (void)argc, (void)argv, (void)sink;
  return 0;
}
static const vplan_steps STEPS = {.known = known, .check = check, .run = run};
static bool all_known(const char *suite) { (void)suite; return true; }
static const vplan_steps ANY = {.known = all_known, .check = check, .run = run};

/* build_plan_text(text) must fail with exactly `want`. */
static void refuses(const char *text, const char *want) {
  const vplan_opts o = {.steps = &STEPS};
  vplan *p = NULL;
  vstatus s = build_plan_text(text, "t", &o, &p);
  CHECK(s != V_OK && !p && !strcmp(verr_msg(), want), "%s: got '%s', want '%s'", text, s ? verr_msg() : "ok", want);
  free_plan(p);
}

static void shapes(void) {
  refuses("{", "plan t: not valid JSON");
  refuses("[1]", "plan t: top level must be an object");
  refuses("{\"stepz\": []}", "plan t: field 'steps' must be a non-empty list");
  refuses("{\"steps\": []}", "plan t: field 'steps' must be a non-empty list");
  refuses("{\"vars\": 1, \"steps\": [{\"suite\": \"gen\"}]}", "plan t: field 'vars' must be an object of strings");
  refuses("{\"vars\": {\"a\": 1}, \"steps\": [{\"suite\": \"gen\"}]}", "plan t: vars.a must be a string");
  refuses("{\"steps\": [{\"suite\": \"gen\"}, {}]}", "plan t: steps[1].suite must be a string");
  refuses("{\"steps\": [{\"suite\": \"nosuch\"}]}", "plan t: steps[0].suite 'nosuch' is not a suite of this build");
  refuses("{\"steps\": [{\"suite\": \"gen\", \"args\": \"-x\"}]}", "plan t: steps[0].args must be a list of strings");
  refuses("{\"steps\": [{\"suite\": \"gen\", \"args\": [\"-x\", 1]}]}", "plan t: steps[0].args[1] must be a string");
  refuses("{\"steps\": [{\"suite\": \"gen\", \"when\": \"tpu\"}]}", "plan t: steps[0].when must be \"gpu\" or \"cpu\"");
  refuses("{\"steps\": [{\"suite\": \"gen\", \"needs\": \"x\"}]}", "plan t: steps[0].needs must be a list of variable names");
  refuses("{\"steps\": [{\"suite\": \"gen\", \"needs\": [\"x\", \"\"]}]}", "plan t: steps[0].needs[1] must be a variable name");
  refuses("{\"required\": [\"x\"], \"steps\": [{\"suite\": \"gen\"}]}", "plan t: field 'required' must be an object of strings");
  refuses("{\"required\": {\"x\": 1}, \"steps\": [{\"suite\": \"gen\"}]}", "plan t: required.x must be a string");
  /* a required variable with no value, or an empty one, names the --set and what it holds */
  refuses("{\"name\": \"s\", \"required\": {\"server\": \"the candidate\"}, \"steps\": [{\"suite\": \"gen\"}]}",
          "plan s: --set server=VALUE is required (the candidate)");
  refuses("{\"vars\": {\"server\": \"\"}, \"required\": {\"server\": \"the candidate\"}, \"steps\": [{\"suite\": \"gen\"}]}",
          "plan t: --set server=VALUE is required (the candidate)");
  /* expansion errors name the plan by its own name */
  refuses("{\"name\": \"own\", \"steps\": [{\"suite\": \"gen\", \"args\": [\"${nosuch}\"]}]}",
          "plan own: steps[0]: unknown variable ${nosuch}");
  refuses("{\"steps\": [{\"suite\": \"gen\", \"args\": [\"${x\"]}]}", "plan t: steps[0]: unterminated ${ in '${x'");
}

static void variables(void) {
  const char *text = "{\"name\": \"v\", \"description\": \"d\", \"vars\": {\"m\": \"plan\", \"m_gpu\": \"big\", \"m_cpu\": \"tiny\"},"
                     " \"steps\": [{\"suite\": \"gen\", \"args\": [\"--model\", \"${m}\", \"${paths}/${device}/${seed}\"]},"
                     " {\"suite\": \"sweep\", \"args\": [\"${only_gpu}\"], \"when\": \"gpu\"}]}";
  const char *sets[] = {"seed=7", "paths=a=b"};
  for (int gpu = 0; gpu < 2; gpu++) {
    const vplan_opts o = {.steps = &STEPS, .sets = sets, .n_sets = 2, .gpu = gpu};
    vplan *p = NULL;
    vstatus s = build_plan_text(text, "file", &o, &p);
    if (gpu) { /* step 1 runs on the GPU and uses a variable nobody defines */
      CHECK(s != V_OK && strstr(verr_msg(), "plan v: steps[1]: unknown variable ${only_gpu}"), "gpu: %s", verr_msg());
      free_plan(p);
      continue;
    }
    CHECK_OK(s);
    if (!p) continue;
    CHECK(!strcmp(p->name, "v") && !strcmp(p->description, "d") && !strcmp(p->text, text), "name, description, text");
    CHECK(p->n_steps == 2 && p->steps[0].runs_here && !p->steps[1].runs_here, "runs_here");
    const vplan_step *st = &p->steps[0];
    CHECK(st->argc == 4 && !strcmp(st->argv[0], "gen") && !strcmp(st->argv[2], "tiny") &&
              !strcmp(st->argv[3], "a=b/cpu/7") && !st->argv[4],
          "argv expanded: %s %s", st->argc > 2 ? st->argv[2] : "?", st->argc > 3 ? st->argv[3] : "?");
    CHECK(st->n_args == 3 && !strcmp(st->args[1], "${m}"), "args kept as written");
    CHECK(!p->steps[1].argv && p->steps[1].when == VPLAN_GPU && !strcmp(plan_when_name(VPLAN_GPU), "gpu"),
          "a step for the other machine is not expanded");
    CHECK(!strcmp(plan_var(p, "m"), "tiny") && !strcmp(plan_var(p, "seed"), "7") && !plan_var(p, "nosuch"), "plan_var");
    free_plan(p);
  }
  const char *bad[] = {"novalue"};
  const vplan_opts o = {.steps = &STEPS, .sets = bad, .n_sets = 1};
  vplan *p = NULL;
  CHECK(build_plan_text(text, "file", &o, &p) != V_OK && !strcmp(verr_msg(), "--set 'novalue': expected VAR=VALUE"),
        "--set without '=': %s", verr_msg());
  /* a name that is not a plain file name keeps the file's */
  const vplan_opts o2 = {.steps = &STEPS};
  CHECK_OK(build_plan_text("{\"name\": \"../x\", \"steps\": [{\"suite\": \"gen\"}]}", "file", &o2, &p));
  CHECK(p && !strcmp(p->name, "file") && p->steps[0].argc == 1 && !p->steps[0].argv[1], "name and bare argv");
  free_plan(p);
}

/* A step whose "needs" variable is empty does not run and says which --set would run it; set, it runs
 * with the value expanded. A required variable given by --set builds. */
static void needs(void) {
  const char *text = "{\"vars\": {\"data\": \"\"}, \"required\": {\"server\": \"the candidate\"},"
                     " \"steps\": [{\"suite\": \"gen\", \"args\": [\"${server}\"]},"
                     " {\"suite\": \"sweep\", \"args\": [\"${data}\"], \"needs\": [\"server\", \"data\"]}]}";
  const char *sets[] = {"server=http://a", "data=f.jsonl"};
  for (int n = 1; n <= 2; n++) {
    const vplan_opts o = {.steps = &STEPS, .sets = sets, .n_sets = n};
    vplan *p = NULL;
    CHECK_OK(build_plan_text(text, "t", &o, &p));
    if (!p) continue;
    CHECK(p->steps[0].runs_here && !strcmp(p->steps[0].argv[1], "http://a") && !p->steps[0].skip_why[0], "required set");
    if (n == 1)
      CHECK(!p->steps[1].runs_here && !p->steps[1].argv && !strcmp(p->steps[1].skip_why, "needs --set data=VALUE (empty here)"),
            "empty need: runs %d, why '%s'", p->steps[1].runs_here, p->steps[1].skip_why);
    else
      CHECK(p->steps[1].runs_here && !strcmp(p->steps[1].argv[1], "f.jsonl") && p->steps[1].n_needs == 2, "need met");
    free_plan(p);
  }
}

static void shipped(void) {
  /* the served plan requires its two servers; the others ignore these variables */
  const char *sets[] = {"server=http://127.0.0.1:1", "ref=http://127.0.0.1:2"};
  for (const vplan_text *t = vouch_plans; t->name; t++)
    for (int gpu = 0; gpu < 2; gpu++) {
      const vplan_opts o = {.steps = &ANY, .gpu = gpu, .sets = sets, .n_sets = 2};
      vplan *p = NULL;
      vstatus s = build_plan(t->name, &o, &p);
      CHECK(s == V_OK && p && p->n_steps > 0 && !strcmp(p->name, t->name), "plan %s (gpu %d): %s", t->name, gpu,
            s ? verr_msg() : "");
      free_plan(p);
    }
  vplan *p = NULL;
  const vplan_opts o = {.steps = &ANY};
  CHECK(build_plan("/nonexistent/plan.json", &o, &p) != V_OK && strstr(verr_msg(), "neither a built-in plan"),
        "missing file: %s", verr_msg());
}

int main(void) {
  shapes();
  variables();
  needs();
  shipped();
  return test_finish();
}
