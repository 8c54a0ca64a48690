/* Paths in tests as a user names them: the text parsed where it enters (suites/paths/spec.h), then
 * handed down typed, as the commands do. */
#ifndef VOUCH_TESTS_CPU_PATH_SPECS_H
#define VOUCH_TESTS_CPU_PATH_SPECS_H

#include "suites/paths/paths.h"
#include "suites/paths/spec.h"

/* vpath_spec_parse(name) then vpath_open: the parse's error (malformed, unknown) or the open's. */
static inline vstatus test_open(vpath *p, const char *name, const ds_model *m, const vpath_opts *o) {
  vpath_spec s;
  VTRY(vpath_spec_parse(name, "test", &s));
  return vpath_open(p, &s, m, o);
}

/* names[n] parsed into out[n]; a name that does not parse is left as its text with no ops (a path
 * the suite under test must report, not open). */
static inline void test_specs(const char *const *names, int n, vpath_spec *out) {
  for (int i = 0; i < n; i++)
    if (vpath_spec_parse(names[i], "test", &out[i]) != V_OK) snprintf(out[i].name, sizeof out[i].name, "%s", names[i]);
}

#endif
