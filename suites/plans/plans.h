/* Plans built into the binary: suites/plans/NAME.json, embedded by cmake/embed_plans.cmake (the build's
 * plans_embedded.c). `vouch run` runs them by name; `vouch history baseline` hashes them. */
#ifndef VOUCH_SUITES_PLANS_PLANS_H
#define VOUCH_SUITES_PLANS_PLANS_H

#include <stddef.h>

typedef struct {
  const char *name;  /* file name without .json ("smoke", "h200") */
  const char *text;  /* the JSON text, NUL-terminated */
  size_t len;        /* bytes, without the NUL */
} vplan_text;

/* Terminated by an entry whose name is NULL. */
extern const vplan_text vouch_plans[];

#endif
