/* libFuzzer target: a result bundle (.vouch.tar.gz) as vouch verify opens it: libarchive
 * extraction with the name checks of runner/evidence/bundle.c, then every check of runner/evidence/verify.c.
 * Property: nothing is written outside the extraction folder (the scratch folder's canary
 * file is never replaced or joined by new files). */
#include <stdio.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "runner/evidence/bundle.h"
#include "runner/evidence/verify.h"

static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  static int ready;
  char root[4096];
  if (!ready) {
    fz_mkdir("x");
    fz_write("canary", (const uint8_t *)"canary", 6);
    ready = 1;
  }
  /* extraction goes to TMPDIR: the scratch folder's x/ */
  snprintf(root, sizeof root, "%s", fz_path("x"));
  setenv("TMPDIR", root, 1);
  char p[4096];
  snprintf(p, sizeof p, "%s", fz_write("b.vouch.tar.gz", data, n));
  vverify_report rep;
  memset(&rep, 0, sizeof rep);
  if (verify_path(p, &rep) == V_OK) verify_report_free(&rep);
  else fz_assert(verr_msg()[0] && !strchr(verr_msg(), '\n'), "verify error is one non-empty line");
  fz_assert(count_entries(root) == 0, "the extraction folder was removed");
  fz_assert(count_entries(fz_dir()) == 3, "nothing was written next to the extraction folder");
  return 0;
}
