/* libFuzzer target: manifest.json of a result folder (runner/evidence/verify.c schema checks, the
 * manifest fields compare and report read). results.json is a small real one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "runner/evidence/bundle.h"
#include "runner/evidence/manifest.h"
#include "runner/evidence/report.h"
#include "runner/evidence/verify.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  static int ready;
  if (!ready) {
    fz_mkdir("run");
    fz_copy("run/results.json", fz_source("fuzz/corpus/fuzz_records/smoke-results.json"));
    ready = 1;
  }
  fz_write("run/manifest.json", data, n);
  char d[4096];
  snprintf(d, sizeof d, "%s", fz_path("run"));
  vverify_report rep;
  memset(&rep, 0, sizeof rep);
  if (verify_path(d, &rep) == V_OK) verify_report_free(&rep);
  vresults r;
  if (bundle_load(d, &r) == V_OK) {
    (void)manifest_hardware_key(r.manifest);
    char *md = NULL;
    if (report_markdown(&r, NULL, 1 << 16, &md) == V_OK) free(md); /* what publish posts */
    bundle_unload(&r);
  }
  return 0;
}
