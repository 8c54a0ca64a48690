/* The op registry: fixed-size tables of op descriptors and variants, the host ("cpu")
 * backend, and names of distributions and metrics. See reference/opreg.h. */
#include "reference/opreg.h"

#include <stdlib.h>
#include <string.h>

#define MAX_OPS 64
#define MAX_VARIANTS 512

static const vop *g_ops[MAX_OPS];
static int g_n_ops;
static const vop_variant *g_vars[MAX_VARIANTS];
static int g_n_vars;
static bool g_inited;
static const vop_backend *g_cuda_backend;

/* ---- cpu backend: plain host memory ---- */

static vstatus cpu_alloc(void **ptr, size_t bytes) {
  *ptr = vmalloc(bytes, "kernel-suite buffer");
  return *ptr ? V_OK : V_ERR;
}
static void cpu_free(void *ptr) { free(ptr); }
static vstatus cpu_upload(void *dst, const void *src, size_t bytes) {
  if (dst != src) memcpy(dst, src, bytes);
  return V_OK;
}
static vstatus cpu_download(void *dst, const void *src, size_t bytes) {
  if (dst != src) memcpy(dst, src, bytes);
  return V_OK;
}
static vstatus cpu_fill(void *dst, int byte, size_t bytes) {
  memset(dst, byte, bytes);
  return V_OK;
}
static vstatus cpu_sync(void) { return V_OK; }

static const vop_backend g_cpu_backend = {
    .name = "cpu", .host_mem = true, .alloc = cpu_alloc, .free = cpu_free, .upload = cpu_upload,
    .download = cpu_download, .fill = cpu_fill, .sync = cpu_sync,
};

const vop_backend *vop_backend_cpu(void) { return &g_cpu_backend; }

/* ---- names ---- */

static const char *const k_dist_names[VD_COUNT] = {"normal", "heavy", "large", "neartie", "smallint", "small"};

const char *vop_dist_name(int d) { return d >= 0 && d < VD_COUNT ? k_dist_names[d] : "?"; }

int vop_dist_from_name(const char *s) {
  for (int i = 0; i < VD_COUNT; i++)
    if (strcmp(s, k_dist_names[i]) == 0) return i;
  return -1;
}

const char *vop_metric_name(int m) {
  switch (m) {
    case VM_REL_L2: return "rel_l2";
    case VM_MAX_REL: return "max_rel";
    case VM_EXACT: return "mismatches";
    case VM_TOPK_SET: return "topk_set_rows";
    case VM_CUSTOM: return "custom";
    case VM_MAX_ABS: return "max_abs";
    default: return "?";
  }
}

/* ---- case lists ---- */

vstatus vop_case_push(vop_case_list *l, const vop_case *c) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 256;
    vop_case *p = realloc(l->c, (size_t)cap * sizeof *p);
    if (!p) return VERR("out of memory growing the kernel case list to %d cases", cap);
    l->c = p;
    l->cap = cap;
  }
  l->c[l->n++] = *c;
  return V_OK;
}

void vop_case_list_free(vop_case_list *l) {
  free(l->c);
  memset(l, 0, sizeof *l);
}

/* ---- registry ---- */

vstatus vopreg_add_op(const vop *op) {
  if (!op || !op->name || !op->layout || !op->gen_inputs || !op->oracle || !op->tolerance)
    return VERR("op registry: op '%s': name, layout, gen_inputs, oracle and tolerance are required",
                op && op->name ? op->name : "(null)");
  if (vopreg_find_op(op->name)) return VERR("op registry: op '%s': registered twice", op->name);
  if (g_n_ops == MAX_OPS) return VERR("op registry: op '%s': table full (%d ops)", op->name, MAX_OPS);
  g_ops[g_n_ops++] = op;
  return V_OK;
}

vstatus vopreg_add_variant(const vop_variant *v) {
  if (!v || !v->op || !v->path || !v->name || !v->backend || !v->run)
    return VERR("op registry: variant '%s': op, path, name, backend and run are required",
                v && v->name ? v->name : "(null)");
  for (int i = 0; i < g_n_vars; i++)
    if (g_vars[i]->op == v->op && strcmp(g_vars[i]->path, v->path) == 0 && strcmp(g_vars[i]->name, v->name) == 0)
      return VERR("op registry: variant '%s/%s/%s': registered twice", v->op->name, v->path, v->name);
  if (g_n_vars == MAX_VARIANTS) return VERR("op registry: variant '%s': table full", v->name);
  g_vars[g_n_vars++] = v;
  return V_OK;
}

int vopreg_n_ops(void) { return g_n_ops; }
const vop *vopreg_op(int i) { return i >= 0 && i < g_n_ops ? g_ops[i] : NULL; }
int vopreg_n_variants(void) { return g_n_vars; }
const vop_variant *vopreg_variant(int i) { return i >= 0 && i < g_n_vars ? g_vars[i] : NULL; }

const vop *vopreg_find_op(const char *name) {
  for (int i = 0; i < g_n_ops; i++)
    if (strcmp(g_ops[i]->name, name) == 0) return g_ops[i];
  return NULL;
}

void vopreg_set_cuda_backend(const vop_backend *b) { g_cuda_backend = b; }
const vop_backend *vopreg_cuda_backend(void) { return g_cuda_backend; }

void vopreg_reset(void) {
  g_n_ops = 0;
  g_n_vars = 0;
  g_inited = false;
  g_cuda_backend = NULL;
}

void vopreg_init(void (*register_all)(void)) {
  if (g_inited) return;
  g_inited = true;
  register_all();
}
