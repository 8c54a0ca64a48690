/* libFuzzer target: a plan's JSON (runner/plan/cmd_run.c run_plan_parse), then each accepted step's
 * arguments through its suite's own parser (runner/cli/commands.h vcommand_check: what `vouch run`
 * does before step 0 runs). Properties: errors are one line, the plan's naming the plan; an
 * accepted plan has a non-empty steps list; no suite's option parser crashes, leaks or reads out of
 * bounds on any argument list. Steps with --path-lib are left out (it loads a library). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "runner/plan/cmd_run.h"
#include "runner/cli/commands.h"

/* Step s's arguments through its suite's parser (literal: ${VAR} is not expanded). */
static void check_step(const cJSON *s) {
  const char *suite = cJSON_GetObjectItem(s, "suite")->valuestring; /* run_plan_parse: a string */
  const vcommand *c = vcommand_find(suite);
  if (!c) return;
  char *argv[64];
  int argc = 0;
  argv[argc++] = (char *)suite;
  const cJSON *a;
  cJSON_ArrayForEach(a, cJSON_GetObjectItem(s, "args")) {
    if (argc == 63) break;
    if (!strncmp(a->valuestring, "--path-lib", 10)) return;
    argv[argc++] = a->valuestring;
  }
  argv[argc] = NULL;
  if (vcommand_check(c, argc, argv) != V_OK) fz_assert(!strchr(verr_msg(), '\n'), "a step's option error is one line");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  char *text = fz_cstr(data, n);
  cJSON *plan = NULL;
  vstatus s = run_plan_parse(text, "fuzz", &vcommands_plan_steps, &plan);
  free(text);
  if (s != V_OK) {
    const char *m = verr_msg();
    fz_assert(strstr(m, "plan fuzz") && !strchr(m, '\n'), "plan error is one line naming the plan");
    return 0;
  }
  fz_assert(cJSON_GetArraySize(cJSON_GetObjectItem(plan, "steps")) > 0, "accepted plan has steps");
  const cJSON *step;
  cJSON_ArrayForEach(step, cJSON_GetObjectItem(plan, "steps")) check_step(step);
  cJSON_Delete(plan);
  return 0;
}
