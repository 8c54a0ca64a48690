/* One in-process path of an eval, opened, run and closed: see eval_on_path in evals.h. */
#include <stdio.h>

#include "suites/evals/evals.h"
#include "suites/paths/paths.h"

vstatus eval_on_path(const char *eval, const vpath_spec *spec, const ds_model *m, const vpath_opts *po, int p,
                     eval_path_result *pr, vstatus (*run)(vpath *path, void *ctx), void *ctx) {
  vpath path;
  vstatus s = vpath_open(&path, spec, m, po);
  if (s == V_OK) {
    s = run(&path, ctx);
    pr->opened = true;
    const vstatus ks = vpath_close_keep(&path, &pr->ran);
    if (s == V_OK) s = ks;
  }
  if (s == V_UNSUPPORTED || (s != V_OK && p > 0)) {
    pr->supported = false;
    pr->errored = s != V_UNSUPPORTED;
    snprintf(pr->reason, sizeof pr->reason, "%s", verr_msg());
    return V_OK;
  }
  if (s != V_OK) verr_prefix("%s: path %s", eval, spec->name);
  return s;
}
