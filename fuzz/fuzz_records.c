/* libFuzzer target: results.json of a result folder, read by vouch verify and by
 * report (runner/evidence/verify.c, runner/evidence/bundle.c bundle_load, runner/evidence/report.c report_markdown). The folder's manifest.json is
 * a real one (the seed corpus of fuzz_manifest); results.json is the input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "runner/evidence/bundle.h"
#include "runner/evidence/report.h"
#include "runner/evidence/verify.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  static int ready;
  if (!ready) {
    fz_mkdir("run");
    fz_copy("run/manifest.json", fz_source("fuzz/corpus/fuzz_manifest/smoke-manifest.json"));
    ready = 1;
  }
  fz_write("run/results.json", data, n);
  const char *dir = fz_path("run");
  char d[4096];
  strncpy(d, dir, sizeof d - 1);
  d[sizeof d - 1] = 0;
  vverify_report rep;
  memset(&rep, 0, sizeof rep);
  if (verify_path(d, &rep) == V_OK) verify_report_free(&rep);
  vresults r;
  if (bundle_load(d, &r) == V_OK) {
    char *md = NULL;
    if (report_markdown(&r, NULL, 1 << 16, &md) == V_OK) free(md); /* what publish posts */
    bundle_unload(&r);
  } else {
    fz_assert(verr_msg()[0] && !strchr(verr_msg(), '\n'), "bundle_load error is one non-empty line");
  }
  return 0;
}
