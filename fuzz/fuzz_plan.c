/* libFuzzer target: a plan's JSON (runner/cmd_run.c run_plan_parse). Property: errors are one
 * line naming the plan; an accepted plan has a non-empty steps list. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "runner/cmd_run.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  char *text = fz_cstr(data, n);
  cJSON *plan = NULL;
  vstatus s = run_plan_parse(text, "fuzz", &plan);
  free(text);
  if (s != V_OK) {
    const char *m = verr_msg();
    fz_assert(strstr(m, "plan fuzz") && !strchr(m, '\n'), "plan error is one line naming the plan");
    return 0;
  }
  fz_assert(cJSON_GetArraySize(cJSON_GetObjectItem(plan, "steps")) > 0, "accepted plan has steps");
  cJSON_Delete(plan);
  return 0;
}
