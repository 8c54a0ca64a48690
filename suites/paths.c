#include "suites/paths.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "reference/cpu/cpu_ref.h"
#ifdef VOUCH_HAVE_CUDA
#include "reference/cuda/cuda_ref.h"
#endif

#define MAX_LOADED 8
static const vpath_ops *g_loaded[MAX_LOADED];
static int g_n_loaded;

static const vpath_ops *const g_builtin[] = {
    &cpu_ref_ops,
#ifdef VOUCH_HAVE_CUDA
    &cuda_ref_ops,
#endif
};

const char *vpaths_names(void) {
#ifdef VOUCH_HAVE_CUDA
  return "cpu-ref cuda-ref";
#else
  return "cpu-ref (cuda-ref needs a CUDA build)";
#endif
}

const vpath_ops *vpaths_find(const char *name) {
  for (size_t i = 0; i < sizeof g_builtin / sizeof g_builtin[0]; i++)
    if (strcmp(g_builtin[i]->name, name) == 0) return g_builtin[i];
  for (int i = 0; i < g_n_loaded; i++)
    if (strcmp(g_loaded[i]->name, name) == 0) return g_loaded[i];
  return NULL;
}

vstatus vpaths_load_lib(const char *file) {
  if (g_n_loaded == MAX_LOADED) return VERR("%s: too many --path-lib libraries (max %d)", file, MAX_LOADED);
  void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
  if (!h) return VERR("%s: cannot load path library: %s", file, dlerror());
  const vpath_ops *ops = dlsym(h, "vouch_path_ops");
  if (!ops) return VERR("%s: symbol 'vouch_path_ops' not found (a path library exports const vpath_ops vouch_path_ops)", file);
  if (!ops->name || !ops->open || !ops->forward || !ops->close)
    return VERR("%s: vouch_path_ops lacks name/open/forward/close", file);
  g_loaded[g_n_loaded++] = ops;
  return V_OK;
}

vstatus vpath_open(vpath *p, const char *name, const ds_model *m, const vpath_opts *o) {
  memset(p, 0, sizeof *p);
  const vpath_ops *ops = vpaths_find(name);
  if (!ops) return VERR("unknown path '%s' (known: %s)", name, vpaths_names());
  p->ops = ops;
  p->opts = *o;
  vstatus s = ops->open(&p->state, m, o);
  if (s != V_OK) {
    verr_prefix("path %s", name);
    p->ops = NULL;
  }
  return s;
}

void vpath_close(vpath *p) {
  if (p->ops && p->state) p->ops->close(p->state);
  memset(p, 0, sizeof *p);
}
