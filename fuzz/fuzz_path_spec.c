/* libFuzzer target: a path as a user names it (suites/paths/spec.c vpath_spec_parse, what --paths,
 * --path, --ref, --floor and a plan's paths go through). An accepted spec must hold what it says:
 * the text kept whole, a registered base without ':' or '@', N in 1..4096, the variant as written
 * after '@', the caps the declaration's; and its fields must spell the text again. A refused one is
 * one non-empty line (for texts of one line) naming the option. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "suites/paths/paths.h"
#include "suites/paths/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  if (n > 300) return 0;
  char text[301];
  memcpy(text, data, n);
  text[n] = 0;
  const bool one_line = !strpbrk(text, "\r\n") && strlen(text) == n;
  vpath_spec s;
  vstatus st = vpath_spec_parse(text, "--paths", &s);
  if (st != V_OK) {
    const char *m = verr_msg();
    fz_assert(m[0] && (!one_line || !strchr(m, '\n')), "spec error is one non-empty line");
    fz_assert(!strncmp(m, "--paths: ", 9), "spec error names the option");
    fz_assert(!s.ops, "a refused spec is zeroed");
    return 0;
  }
  fz_assert(!strcmp(s.name, text), "the spec keeps the text whole");
  fz_assert(s.ops && s.ops == vpaths_find(s.base) && !strpbrk(s.base, ":@"), "the base is a registered name");
  fz_assert(s.tp >= 0 && s.tp <= 4096, "tp in range");
  fz_assert(!memcmp(&s.caps, &s.ops->caps, sizeof s.caps), "the caps are the declaration's");
  const char *at = strchr(text, '@');
  fz_assert(at ? !strcmp(s.variant, at + 1) && s.variant[0] : !s.variant[0], "the variant is the text after '@'");
  /* the fields spell a name that parses to the same spec (the order :ep:dcp is canonical) */
  char again[300];
  snprintf(again, sizeof again, "%s", s.base);
  if (s.tp) snprintf(again + strlen(again), sizeof again - strlen(again), ":tp%d", s.tp);
  if (s.ep) strcat(again, ":ep");
  if (s.dcp) strcat(again, ":dcp");
  if (s.variant[0]) snprintf(again + strlen(again), sizeof again - strlen(again), "@%s", s.variant);
  vpath_spec t;
  fz_assert(vpath_spec_parse(again, "--paths", &t) == V_OK && t.tp == s.tp && t.dcp == s.dcp && t.ep == s.ep &&
                !strcmp(t.base, s.base) && !strcmp(t.variant, s.variant),
            "the spec's fields parse back to it");
  return 0;
}
