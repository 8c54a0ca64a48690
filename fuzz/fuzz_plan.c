/* libFuzzer target: a plan's JSON (runner/plan/plan.h build_plan_text: the one plan parser, for the
 * CPU and the GPU variant), then each accepted step's arguments through its suite's own parser
 * (runner/cli/commands.h vcommand_check: what `vouch run` does before step 0 runs). Properties:
 * errors are one line naming the plan; an accepted plan has steps, each with its suite, and a step
 * that runs on the machine has its argv (the suite, then the expanded args, NULL-terminated); no
 * suite's option parser crashes, leaks or reads out of bounds on any argument list. Steps with
 * --path-lib are left out (it loads a library). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "runner/plan/plan.h"
#include "runner/cli/commands.h"

/* Step st's arguments as written (literal: ${VAR} is not expanded) through its suite's parser. */
static void check_step(const vplan_step *st) {
  const vcommand *c = vcommand_find(st->suite);
  if (!c) return;
  char *argv[64];
  int argc = 0;
  argv[argc++] = st->suite;
  for (int i = 0; i < st->n_args && argc < 63; i++) {
    if (!strncmp(st->args[i], "--path-lib", 10)) return;
    argv[argc++] = st->args[i];
  }
  argv[argc] = NULL;
  if (vcommand_check(c, argc, argv) != V_OK) fz_assert(!strchr(verr_msg(), '\n'), "a step's option error is one line");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  char *text = fz_cstr(data, n);
  for (int gpu = 0; gpu < 2; gpu++) {
    const char *sets[] = {"seed=1"};
    const vplan_opts o = {.steps = &vcommands_plan_steps, .sets = sets, .n_sets = 1, .gpu = gpu};
    vplan *plan = NULL;
    vstatus s = build_plan_text(text, "fuzz", &o, &plan);
    if (s != V_OK) {
      const char *m = verr_msg();
      fz_assert(!strncmp(m, "plan ", 5) && !strchr(m, '\n'), "plan error is one line naming the plan");
      continue;
    }
    fz_assert(plan->n_steps > 0, "accepted plan has steps");
    for (int i = 0; i < plan->n_steps; i++) {
      const vplan_step *st = &plan->steps[i];
      fz_assert(st->suite && (!st->runs_here || (st->argc >= 1 && st->argv[0] == st->suite && !st->argv[st->argc])),
                "a step that runs has its argv");
      if (!gpu) check_step(st);
    }
    free_plan(plan);
  }
  free(text);
  return 0;
}
