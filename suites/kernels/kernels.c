/* The kernel numerics suite: running variants with poison, guards and a second run, checking
 * against the float64 oracle, the table and the JSON records (case generation: kernels_cases.c). */
#include "common/atomic_file.h"
#include "common/clock.h"
#include "suites/kernels/kernels.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

#define GUARD_BYTES 4096
#define GUARD_BYTE 0xA5
#define POISON_BYTE 0xFF
/* Inputs up to this size are hashed before and after each run (a variant must not write them). */
#define INPUT_HASH_MAX ((size_t)256 << 20)

const char *kernels_status_name(int s) {
  return s == KS_PASS ? "pass" : s == KS_FAIL ? "FAIL" : s == KS_UNSUPPORTED ? "not supported" : "?";
}

/* ======================= running one case ======================= */

static uint64_t hash_bytes(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 0xcbf29ce484222325ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, b + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

static double get_elem(const void *p, vdtype t, int64_t i) {
  switch (t) {
    case DT_F32: return ((const float *)p)[i];
    case DT_BF16: return bf16_to_f32(((const uint16_t *)p)[i]);
    case DT_F16: return f16_to_f32(((const uint16_t *)p)[i]);
    case DT_I32: return ((const int32_t *)p)[i];
    case DT_I64: return (double)((const int64_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
  }
}

static void add_reason(kernels_record *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_reason(kernels_record *r, const char *fmt, ...) {
  size_t len = strlen(r->reason);
  if (len + 8 >= sizeof r->reason) return;
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (strstr(r->reason, msg)) return; /* the second run repeating the first */
  snprintf(r->reason + len, sizeof r->reason - len, "%s%s", len ? "; " : "", msg);
}

/* The precision output o of variant v is computed in, which picks its bound: the variant's
 * activation dtype, except for the outputs a bf16 variant declares it computes and stores in fp32
 * (vop_variant.f32_outputs), which are held to the fp32 bound. */
static vdtype output_dtype(const vop_variant *v, int o) {
  if (v->act_dtype == DT_BF16 && o < 32 && (v->f32_outputs >> o & 1u)) return DT_F32;
  return v->act_dtype;
}

/* Checks one output (host copy `got`); returns error/bound ratio and fills err_out, tol_out. */
static double check_output(const vop_case *c, const vop_layout *l, void **host, double **ref, int o,
                           const vop_variant *v, kernels_record *r, double *err_out, vop_tol *tol_out, bool *bad) {
  const vop_buf *b = &l->b[o];
  const void *got = host[o];
  const size_t es = vdtype_size(b->dtype);
  vop_tol t = c->op->tolerance(c, o, output_dtype(v, o));
  *tol_out = t;
  /* 1. poison: elements never written still hold 0xFF bytes */
  long long unwritten = 0, first = -1;
  for (int64_t i = 0; i < b->n; i++) {
    const unsigned char *e = (const unsigned char *)got + (size_t)i * es;
    bool all = true;
    for (size_t k = 0; k < es && all; k++) all = e[k] == POISON_BYTE;
    if (all) { if (first < 0) first = i; unwritten++; }
  }
  if (unwritten) {
    add_reason(r, "%s: %lld elements not written (still poison; first at %lld)", b->name, unwritten, first);
    *bad = true;
    *err_out = INFINITY;
    return INFINITY;
  }
  /* 2. NaN/Inf where the oracle is finite */
  if (b->dtype == DT_F32 || b->dtype == DT_BF16 || b->dtype == DT_F16) {
    long long nonfin = 0;
    first = -1;
    for (int64_t i = 0; i < b->n; i++)
      if (!isfinite(get_elem(got, b->dtype, i)) && isfinite(ref[o][i])) { if (first < 0) first = i; nonfin++; }
    if (nonfin) {
      add_reason(r, "%s: %lld NaN/Inf values (first at %lld)", b->name, nonfin, first);
      *bad = true;
      *err_out = INFINITY;
      return INFINITY;
    }
  }
  /* 3. the metric */
  double err = 0;
  char note[160] = "";
  switch (b->metric) {
    case VM_REL_L2: {
      double num = 0, den = 0;
      for (int64_t i = 0; i < b->n; i++) {
        double d = get_elem(got, b->dtype, i) - ref[o][i];
        num += d * d;
        den += ref[o][i] * ref[o][i];
      }
      /* floor: outputs whose exact value underflows float32 (|ref| < 1e-30) count as zero */
      double floor_den = (double)b->n * 1e-60;
      err = sqrt(num / (den > floor_den ? den : floor_den));
      break;
    }
    case VM_MAX_REL: {
      double ss = 0;
      for (int64_t i = 0; i < b->n; i++) ss += ref[o][i] * ref[o][i];
      double floor_ = t.atol_frac * sqrt(ss / (double)(b->n ? b->n : 1));
      for (int64_t i = 0; i < b->n; i++) {
        double d = fabs(get_elem(got, b->dtype, i) - ref[o][i]), den = fabs(ref[o][i]) + floor_;
        double e = den > 0 ? d / den : (d > 0 ? INFINITY : 0);
        if (!(e <= err)) err = e;
      }
      break;
    }
    case VM_MAX_ABS:
      for (int64_t i = 0; i < b->n; i++) {
        double d = fabs(get_elem(got, b->dtype, i) - ref[o][i]);
        if (!(d <= err)) err = d;
      }
      break;
    case VM_EXACT: {
      long long mism = 0;
      first = -1;
      for (int64_t i = 0; i < b->n; i++)
        if (get_elem(got, b->dtype, i) != ref[o][i]) { if (first < 0) first = i; mism++; }
      err = (double)mism;
      if (mism) add_reason(r, "%s: %lld elements differ (first at %lld)", b->name, mism, first);
      break;
    }
    default:
      if (!c->op->check) {
        add_reason(r, "%s: op has no check() for its metric", b->name);
        err = INFINITY;
      } else {
        err = c->op->check(c, l, host, ref, o, note);
      }
      break;
  }
  if (note[0]) add_reason(r, "%s: %s", b->name, note);
  *err_out = err;
  double ratio = t.bound > 0 ? err / t.bound : (err > 0 ? INFINITY : 0);
  if (isnan(err) || !(err <= t.bound)) {
    *bad = true;
    add_reason(r, "%s: %s %.3g > bound %.3g", b->name, vop_metric_name(b->metric), err, t.bound);
  }
  return isnan(err) ? INFINITY : ratio;
}

typedef struct {
  void *base;        /* backend allocation (guard + data + guard for outputs) */
  void *ptr;         /* what the variant gets */
  size_t bytes;      /* data bytes */
  size_t total;      /* allocated bytes */
} dbuf;

/* Frees a case's input copies and oracle outputs (either may be NULL) and clears the arrays. */
static void free_bufs(const vop_layout *l, void **host, double **ref) {
  for (int i = 0; i < l->n; i++) {
    free(host[i]), host[i] = NULL;
    free(ref[i]), ref[i] = NULL;
  }
}

/* Copies the case's inputs `host` to `out`, the fp32 inputs whose bit is set in `mask` (layout
 * index; ~0u: every one) rounded to the bf16 grid, and runs the oracle on them into `out_ref`.
 * On failure (out of memory, the oracle's error) returns it; what was allocated stays in out /
 * out_ref for free_bufs. */
static vstatus grid_inputs(const vop *op, const vop_case *c, const vop_layout *l, void *const *host, uint32_t mask,
                           void **out, double **out_ref) {
  for (int i = 0; i < l->n; i++) {
    if (l->b[i].is_output) {
      out_ref[i] = vmalloc((size_t)l->b[i].n * sizeof(double), "oracle output (bf16 grid)");
      if (!out_ref[i]) return V_ERR;
      continue;
    }
    size_t bytes = (size_t)l->b[i].n * vdtype_size(l->b[i].dtype);
    out[i] = vmalloc(bytes, "kernel input (bf16 grid)");
    if (!out[i]) return V_ERR;
    memcpy(out[i], host[i], bytes);
    if (l->b[i].dtype == DT_F32 && i < 32 && (mask >> i & 1u)) {
      float *f = out[i];
      for (int64_t e = 0; e < l->b[i].n; e++) f[e] = bf16_to_f32(f32_to_bf16(f[e]));
    }
  }
  return op->oracle(c, l, out, out_ref);
}

static vstatus run_variant(const vop_case *c, const vop_layout *l, void **host, double **ref, const vop_variant *v,
                           kernels_record *r) {
  const vop_backend *be = v->backend;
  dbuf db[VOP_MAX_BUFS];
  memset(db, 0, sizeof db);
  void *got[2][VOP_MAX_BUFS];
  memset(got, 0, sizeof got);
  uint64_t in_hash[VOP_MAX_BUFS] = {0};
  vtrace tr;
  vtrace_init(&tr, true);
  vstatus st = V_OK;
  bool bad = false;
  double t0 = vclock_now();

  for (int i = 0; i < l->n && st == V_OK; i++) {
    const vop_buf *b = &l->b[i];
    db[i].bytes = (size_t)b->n * vdtype_size(b->dtype);
    if (!b->is_output) {
      if (be->host_mem) {
        db[i].ptr = host[i];
      } else {
        db[i].total = db[i].bytes ? db[i].bytes : 1;
        st = be->alloc(&db[i].base, db[i].total);
        if (st == V_OK) st = be->upload(db[i].base, host[i], db[i].bytes);
        db[i].ptr = db[i].base;
      }
      if (db[i].bytes <= INPUT_HASH_MAX) in_hash[i] = hash_bytes(host[i], db[i].bytes);
    } else {
      db[i].total = db[i].bytes + 2 * GUARD_BYTES;
      st = be->alloc(&db[i].base, db[i].total);
      db[i].ptr = (char *)db[i].base + GUARD_BYTES;
      for (int k = 0; k < 2 && st == V_OK; k++) {
        got[k][i] = malloc(db[i].total);
        if (!got[k][i]) st = VERR("kernels: case '%s': out of memory for output '%s'", r->id, b->name);
      }
    }
  }
  if (st != V_OK) {
    snprintf(r->reason, sizeof r->reason, "setup failed: %s", verr_msg());
    r->status = KS_FAIL;
    goto done;
  }

  for (int run = 0; run < 2; run++) {
    for (int i = 0; i < l->n && st == V_OK; i++) {
      if (!l->b[i].is_output) continue;
      st = be->fill(db[i].base, GUARD_BYTE, db[i].total);
      if (st == V_OK) st = be->fill(db[i].ptr, POISON_BYTE, db[i].bytes);
    }
    if (st != V_OK) break;
    vtrace_next_step(&tr);
    int64_t step = tr.step;
    void *args[VOP_MAX_BUFS];
    for (int i = 0; i < l->n; i++) args[i] = db[i].ptr;
    verr_clear();
    st = v->run(c, l, args, &tr);
    if (st == V_OK) st = be->sync();
    if (st == V_UNSUPPORTED) {
      r->status = KS_UNSUPPORTED;
      snprintf(r->reason, sizeof r->reason, "run: %s", verr_msg());
      goto done;
    }
    if (st != V_OK) break;
    if (!vtrace_has(&tr, c->op->name, v->name, step)) {
      bad = true;
      add_reason(r, "trace: variant '%s' of '%s' did not record that it ran", v->name, c->op->name);
    }
    for (int i = 0; i < l->n && st == V_OK; i++) {
      if (!l->b[i].is_output) continue;
      st = be->download(got[run][i], db[i].base, db[i].total);
      if (st != V_OK) break;
      const unsigned char *g = got[run][i];
      long long hit = 0, firstg = -1;
      for (size_t k = 0; k < GUARD_BYTES; k++) {
        if (g[k] != GUARD_BYTE) { hit++; if (firstg < 0) firstg = -(long long)(GUARD_BYTES - k); }
        if (g[GUARD_BYTES + db[i].bytes + k] != GUARD_BYTE) { hit++; if (firstg < 0) firstg = (long long)k; }
      }
      if (hit) {
        bad = true;
        add_reason(r, "%s: out-of-bounds write: %lld guard bytes changed (first at byte offset %lld from the edge)",
                   l->b[i].name, hit, firstg);
      }
    }
    for (int i = 0; i < l->n && st == V_OK; i++) {
      if (l->b[i].is_output || db[i].bytes > INPUT_HASH_MAX) continue;
      const void *now = host[i];
      void *tmp = NULL;
      if (!be->host_mem) {
        tmp = malloc(db[i].bytes ? db[i].bytes : 1);
        if (!tmp || be->download(tmp, db[i].ptr, db[i].bytes) != V_OK) { free(tmp); continue; }
        now = tmp;
      }
      if (hash_bytes(now, db[i].bytes) != in_hash[i]) {
        bad = true;
        add_reason(r, "%s: input buffer was modified by the variant", l->b[i].name);
      }
      free(tmp);
    }
  }
  if (st != V_OK) {
    r->status = KS_FAIL;
    add_reason(r, "error: %s", verr_msg());
    goto done;
  }

  /* check both runs; the record shows the worst output of the worst run */
  r->deterministic = true;
  double worst = -1;
  const char *nd_out = NULL; /* the first output whose runs differ */
  size_t nd_byte = 0;
  for (int i = 0; i < l->n; i++) {
    if (!l->b[i].is_output) continue;
    const unsigned char *a = (unsigned char *)got[0][i] + GUARD_BYTES, *b = (unsigned char *)got[1][i] + GUARD_BYTES;
    if (r->deterministic && memcmp(a, b, db[i].bytes) != 0) {
      r->deterministic = false;
      nd_out = l->b[i].name;
      while (a[nd_byte] == b[nd_byte]) nd_byte++;
      nd_byte /= vdtype_size(l->b[i].dtype);
    }
  }
  for (int run = 0; run < 2; run++) {
    if (run == 1 && r->deterministic) break; /* identical bytes: identical verdict */
    void *view[VOP_MAX_BUFS];
    for (int i = 0; i < l->n; i++) view[i] = l->b[i].is_output ? (char *)got[run][i] + GUARD_BYTES : host[i];
    for (int i = 0; i < l->n; i++) {
      if (!l->b[i].is_output) continue;
      double e = 0;
      vop_tol t;
      double ratio = check_output(c, l, view, ref, i, v, r, &e, &t, &bad);
      if (ratio > worst) {
        worst = ratio;
        r->error = e;
        r->bound = t.bound;
        r->why = t.why;
        snprintf(r->metric, sizeof r->metric, "%s", vop_metric_name(l->b[i].metric));
        snprintf(r->output, sizeof r->output, "%s", l->b[i].name);
      }
    }
  }
  /* The determinism gate: a variant that promises bitwise reruns (every one that does not declare
   * vop_variant.nondeterministic) fails when its two runs differ, even if both are within the bound:
   * a scheduling-dependent result is a race or an unordered reduction the path did not own up to. */
  if (!r->deterministic && !v->nondeterministic) {
    bad = true;
    add_reason(r, "non-deterministic: two runs differ bitwise (%s, first at element %zu) and the variant declares "
               "bitwise reruns", nd_out, nd_byte);
  } else if (!r->deterministic) {
    add_reason(r, "two runs differ bitwise (declared non-deterministic: %s)", v->nondeterministic);
  }
  r->status = bad ? KS_FAIL : KS_PASS;

done:
  r->seconds = vclock_now() - t0;
  r->trace_json = vtrace_to_json(&tr);
  vtrace_free(&tr);
  for (int i = 0; i < l->n; i++) {
    if (db[i].base) be->free(db[i].base);
    free(got[0][i]);
    free(got[1][i]);
  }
  return V_OK;
}

/* ======================= the suite ======================= */

vstatus kernels_result_add(kernels_result *res, kernels_record *r) {
  if (res->n == res->cap) {
    int cap = res->cap ? 2 * res->cap : 256;
    kernels_record *p = realloc(res->r, (size_t)cap * sizeof *p);
    if (!p) {
      free(r->trace_json);
      return VERR("kernels: out of memory for %d records", cap);
    }
    res->r = p;
    res->cap = cap;
  }
  res->r[res->n++] = *r;
  if (r->status == KS_PASS) res->passed++, res->run++;
  else if (r->status == KS_FAIL) res->failed++, res->run++;
  else res->unsupported++, res->unsupported_cases += r->n_cases ? r->n_cases : 1;
  return V_OK;
}

static void fmt_dims(const vop_case *c, char *buf, size_t n) {
  size_t len = 0;
  buf[0] = 0;
  for (int i = 0; i < VOP_MAX_DIMS && c->op->dim_names[i] && len < n; i++)
    len += (size_t)snprintf(buf + len, n - len, "%s%s=%d", i ? " " : "", c->op->dim_names[i], c->d[i]);
}

void kernels_print_header(FILE *f) {
  fprintf(f, "%-12s %-8s %-9s %-30s %3s %-12s %-8s %-13s %9s %9s  %s\n", "op", "path", "variant", "shape", "B", "dtype",
          "dist", "metric", "error", "bound", "status");
}

void kernels_print_row(FILE *f, const kernels_record *r) {
  char err[24], bound[24];
  snprintf(err, sizeof err, "%.3g", r->error);
  snprintf(bound, sizeof bound, "%.3g", r->bound);
  if (r->status == KS_UNSUPPORTED) snprintf(err, sizeof err, "-"), snprintf(bound, sizeof bound, "-");
  char shape[64];
  if (r->n_cases) snprintf(shape, sizeof shape, "%d cases", r->n_cases);
  else snprintf(shape, sizeof shape, "%s/%s", r->preset, r->shape);
  fprintf(f, "%-12s %-8s %-9s %-30s %3d %-12s %-8s %-13s %9s %9s  %s", r->op, r->path, r->variant, shape, r->batch,
          r->dtype, vop_dist_name(r->dist), r->metric, err, bound, kernels_status_name(r->status));
  if (r->status != KS_PASS && r->reason[0]) fprintf(f, "  (%s)", r->reason);
  fprintf(f, "\n");
}

static bool variant_selected(const vop_variant *v, const kernels_opts *o) {
  if (o->path && strcmp(v->path, o->path) != 0) return false;
  if (!o->path && !strcmp(v->path, "test") && !(o->variant && !strcmp(o->variant, v->name))) return false;
  if (o->variant && strcmp(v->name, o->variant) != 0) return false;
  return true;
}

static vstatus check_filters(const kernels_opts *o) {
  if (o->op && !vopreg_find_op(o->op)) {
    char names[1024] = "";
    for (int i = 0; i < vopreg_n_ops(); i++)
      snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? " " : "", vopreg_op(i)->name);
    return VERR("--op '%s': no such op (registered: %s)", o->op, names);
  }
  bool path_ok = !o->path, var_ok = !o->variant;
  for (int i = 0; i < vopreg_n_variants(); i++) {
    const vop_variant *v = vopreg_variant(i);
    if (o->path && !strcmp(v->path, o->path)) path_ok = true;
    if (o->variant && !strcmp(v->name, o->variant)) var_ok = true;
  }
  if (o->path && !path_ok)
    return VERR("--path '%s': no variant registered on this path (cpu-ref, cuda-ref, latency, test; "
                "cuda-ref needs a CUDA build)", o->path);
  if (o->variant && !var_ok) return VERR("--variant '%s': no variant with this name is registered", o->variant);
  if (o->preset && strcmp(o->preset, "all") && strcmp(o->preset, "tiny") && strcmp(o->preset, "small") &&
      strcmp(o->preset, "k2-slice") && strcmp(o->preset, "edge"))
    return VERR("--preset '%s': expected tiny, small, k2-slice, edge or all", o->preset);
  return V_OK;
}

/* One planned case: a variant on a generated case. */
typedef struct {
  const vop_case *c;      /* the case (in one of the plan's lists) */
  const vop_variant *v;   /* the variant that runs it */
  bool supported;         /* v->supports(c) said yes */
  kernels_status no;      /* !supported: KS_UNSUPPORTED, or KS_FAIL when supports() failed */
  char *why;              /* !supported: the reason (owned) */
  int n_cases;            /* KS_UNSUPPORTED: the cases of this variant it stands for (c the first), else 0 */
} kitem;

/* The cases one variant does not support, over all presets of its op: one record, not one per case
 * (a pr run made ~772 such records, each saying the same thing). */
typedef struct {
  const vop_case *first;  /* the first case it does not support (NULL: none yet) */
  int n;                  /* cases it does not support */
  int n_other;            /* of those, cases whose reason differs from the first's (not just in numbers) */
  char why[320];          /* the first case's reason */
  char other[160];        /* the first differing reason */
} kunsup;

struct kernels_plan {
  vop_case_list *lists;   /* [n_lists] the generated cases, one list per op and preset (owned) */
  int n_lists;
  kitem *it;              /* [n] the planned cases, in run order (owned) */
  int n, cap;
  int skipped_budget;     /* cases left out by the --quick size budget */
  /* the inputs and oracle outputs of case `cur`, reused by its variants (NULL: none made) */
  const vop_case *cur;
  vop_layout l;
  vstatus st;             /* making them: V_OK, or the error (then `st_why`) */
  char st_why[300];
  void *host[VOP_MAX_BUFS];
  double *ref[VOP_MAX_BUFS];
  void *host_bf[VOP_MAX_BUFS];  /* inputs rounded to the bf16 grid (bf16 variants) */
  double *ref_bf[VOP_MAX_BUFS]; /* the oracle on those inputs */
  void *host_mx[VOP_MAX_BUFS];  /* mixed grid: one fp32 variant's bf16_inputs rounded */
  double *ref_mx[VOP_MAX_BUFS];
  uint32_t mx_mask;             /* the mask host_mx was made for (0: none yet) */
};

/* Frees the inputs and oracle outputs of p->cur. */
static void drop_inputs(kernels_plan *p) {
  if (!p->cur) return;
  free_bufs(&p->l, p->host, p->ref);
  free_bufs(&p->l, p->host_bf, p->ref_bf);
  free_bufs(&p->l, p->host_mx, p->ref_mx);
  p->mx_mask = 0;
  p->cur = NULL;
}

static vstatus add_item(kernels_plan *p, const kitem *k) {
  if (p->n == p->cap) {
    const int cap = p->cap ? 2 * p->cap : 256;
    kitem *q = realloc(p->it, (size_t)cap * sizeof *q);
    if (!q) { free(k->why); return VERR("kernels: out of memory for %d cases", cap); }
    p->it = q;
    p->cap = cap;
  }
  p->it[p->n++] = *k;
  return V_OK;
}

/* Whether reasons a and b say the same but for their numbers ("batch 8 > 4" and "batch 64 > 4"). */
static bool same_but_numbers(const char *a, const char *b) {
  for (;;) {
    const bool da = *a >= '0' && *a <= '9', db = *b >= '0' && *b <= '9';
    if (da && db) {
      while (*a >= '0' && *a <= '9') a++;
      while (*b >= '0' && *b <= '9') b++;
      continue;
    }
    if (*a != *b) return false;
    if (!*a) return true;
    a++, b++;
  }
}

/* The planned cases of list cl: per case the variants whose supports() failed, then those that support
 * it; the cases a variant does not support are counted into un[variant] (planned by plan_unsupported). */
static vstatus plan_list(kernels_plan *p, const vop_case_list *cl, const vop_variant *const *vars, int nv,
                         kunsup *un) {
  for (int ci = 0; ci < cl->n; ci++) {
    const vop_case *c = &cl->c[ci];
    int sup[64], n_sup = 0;
    for (int vi = 0; vi < nv; vi++) {
      verr_clear();
      vstatus s = vars[vi]->supports ? vars[vi]->supports(c) : V_OK;
      if (s == V_OK) { sup[n_sup++] = vi; continue; }
      if (s == V_UNSUPPORTED) {
        kunsup *u = &un[vi];
        if (!u->first) u->first = c, snprintf(u->why, sizeof u->why, "%s", verr_msg());
        else if (!same_but_numbers(u->why, verr_msg()) && u->n_other++ == 0)
          snprintf(u->other, sizeof u->other, "%s", verr_msg());
        u->n++;
        continue;
      }
      kitem k = {.c = c, .v = vars[vi], .no = KS_FAIL};
      char why[320];
      snprintf(why, sizeof why, "supports() failed: %s", verr_msg());
      if (!(k.why = strdup(why))) return VERR("kernels: out of memory");
      VTRY(add_item(p, &k));
    }
    for (int k = 0; k < n_sup; k++) VTRY(add_item(p, &(kitem){.c = c, .v = vars[sup[k]], .supported = true}));
  }
  return V_OK;
}

/* One planned "not supported" record per variant of vars[nv] that left cases out (un[nv]). */
static vstatus plan_unsupported(kernels_plan *p, const vop_variant *const *vars, int nv, const kunsup *un) {
  for (int vi = 0; vi < nv; vi++) {
    const kunsup *u = &un[vi];
    if (!u->n) continue;
    char why[sizeof u->why + sizeof u->other + 64];
    if (u->n_other)
      snprintf(why, sizeof why, "%s (and %d case%s for other reasons, e.g. %s)", u->why, u->n_other,
               u->n_other > 1 ? "s" : "", u->other);
    else snprintf(why, sizeof why, "%s", u->why);
    kitem k = {.c = u->first, .v = vars[vi], .no = KS_UNSUPPORTED, .n_cases = u->n};
    if (!(k.why = strdup(why))) return VERR("kernels: out of memory");
    VTRY(add_item(p, &k));
  }
  return V_OK;
}

vstatus kernels_plan_make(const kernels_opts *o, kernels_plan **out) {
  kernels_register_ops();
  VTRY(check_filters(o));
  const char *presets_default[] = {"tiny", "edge", "small", "k2-slice"};
  const char *const *presets = presets_default;
  int n_presets = 4;
  if (o->preset && strcmp(o->preset, "all") != 0) presets = &o->preset, n_presets = 1;
  kernels_plan *p = calloc(1, sizeof *p);
  const int max_lists = vopreg_n_ops() * n_presets;
  if (p) p->lists = calloc((size_t)(max_lists > 0 ? max_lists : 1), sizeof *p->lists);
  if (!p || !p->lists) { free(p); return VERR("kernels: out of memory"); }
  vop_gen_opts g = {.batches = o->batches, .n_batches = o->n_batches, .seeds = o->seeds, .seed0 = o->seed0, .quick = o->quick,
                    .tp = o->tp};
  vstatus s = V_OK;
  for (int oi = 0; oi < vopreg_n_ops() && s == V_OK; oi++) {
    const vop *op = vopreg_op(oi);
    if (o->op && strcmp(op->name, o->op) != 0) continue;
    if (o->tp > 0 && (!op->dim_names[0] || strcmp(op->dim_names[0], "ranks") != 0)) continue; /* --tp: comm ops */
    const vop_variant *vars[64];
    int nv = 0;
    for (int i = 0; i < vopreg_n_variants() && nv < 64; i++) {
      const vop_variant *v = vopreg_variant(i);
      if (v->op == op && variant_selected(v, o)) vars[nv++] = v;
    }
    kunsup un[64];
    memset(un, 0, sizeof un);
    for (int pi = 0; nv && pi < n_presets && s == V_OK; pi++) {
      vop_case_list *cl = &p->lists[p->n_lists++];
      s = kernels_gen_cases(op, presets[pi], &g, cl, &p->skipped_budget);
      if (s == V_OK) s = plan_list(p, cl, vars, nv, un);
    }
    if (s == V_OK) s = plan_unsupported(p, vars, nv, un);
  }
  if (s != V_OK) { kernels_plan_free(p); return s; }
  *out = p;
  return V_OK;
}

int kernels_plan_n(const kernels_plan *p) { return p->n; }
int kernels_plan_skipped(const kernels_plan *p) { return p->skipped_budget; }

void kernels_plan_key(const kernels_plan *p, int i, kernels_record *r) {
  const vop_case *c = p->it[i].c;
  const vop_variant *v = p->it[i].v;
  memset(r, 0, sizeof *r);
  r->op = c->op->name;
  snprintf(r->preset, sizeof r->preset, "%s", c->preset);
  snprintf(r->shape, sizeof r->shape, "%s", c->shape);
  r->batch = c->batch;
  r->dist = c->dist;
  r->seed = c->seed;
  fmt_dims(c, r->dims, sizeof r->dims);
  r->path = v->path;
  r->variant = v->name;
  snprintf(r->dtype, sizeof r->dtype, "w:bf16 a:%s",
           v->act_dtype == DT_BF16 ? (v->f32_outputs ? "bf16+f32 out" : "bf16")
                                   : v->bf16_inputs ? "f32+bf16 in" : "f32");
  snprintf(r->id, sizeof r->id, "%s/%s/%s/%s/%s/B%d/%s/s%llu", c->op->name, r->path, r->variant, c->preset, c->shape,
           c->batch, vop_dist_name(c->dist), (unsigned long long)c->seed);
  if (p->it[i].n_cases) { /* the variant's unsupported cases: the first one's key, and the record's own id */
    r->n_cases = p->it[i].n_cases;
    snprintf(r->first, sizeof r->first, "%s", r->id);
    snprintf(r->id, sizeof r->id, "%s/%s/%s/not-supported", c->op->name, r->path, r->variant);
  }
}

/* Makes the inputs and oracle outputs of item i's case, unless they are made (p->cur). bf16 variants
 * take their float inputs on the bf16 grid, and the oracle is recomputed on those same inputs, so a
 * case measures the kernel's own error, not the rounding of its inputs (which can flip near-argmax
 * softmaxes of heavy-tailed scores or cancel one-element dot products: seen 5 of 722 cases
 * otherwise); the grid is made when a variant of the case that supports it computes in bf16. A
 * failure is p->st (each variant's record then fails), not an error. */
static void make_inputs(kernels_plan *p, int i) {
  const vop_case *c = p->it[i].c;
  if (p->cur == c) return;
  drop_inputs(p);
  const vop *op = c->op;
  p->cur = c;
  vstatus st = op->layout(c, &p->l);
  for (int k = 0; k < p->l.n && st == V_OK; k++) {
    size_t bytes = (size_t)p->l.b[k].n * vdtype_size(p->l.b[k].dtype);
    if (!p->l.b[k].is_output) {
      p->host[k] = vmalloc(bytes, "kernel input");
      if (!p->host[k]) st = V_ERR;
    } else {
      p->ref[k] = vmalloc((size_t)p->l.b[k].n * sizeof(double), "oracle output");
      if (!p->ref[k]) st = V_ERR;
    }
  }
  if (st == V_OK) st = op->gen_inputs(c, &p->l, p->host);
  if (st == V_OK) st = op->oracle(c, &p->l, p->host, p->ref);
  bool any_bf16 = false; /* the case's items are consecutive */
  for (int k = i; k < p->n && p->it[k].c == c; k++) any_bf16 |= p->it[k].supported && p->it[k].v->act_dtype == DT_BF16;
  if (st == V_OK && any_bf16) st = grid_inputs(op, c, &p->l, p->host, ~0u, p->host_bf, p->ref_bf);
  p->st = st;
  if (st != V_OK) snprintf(p->st_why, sizeof p->st_why, "%s", verr_msg());
}

vstatus kernels_plan_run(kernels_plan *p, int i, kernels_record *r) {
  const kitem *k = &p->it[i];
  kernels_plan_key(p, i, r);
  if (!k->supported) {
    r->status = k->no;
    snprintf(r->reason, sizeof r->reason, "%s", k->why);
    snprintf(r->metric, sizeof r->metric, "-");
    return V_OK;
  }
  make_inputs(p, i);
  const vop_variant *v = k->v;
  vstatus vs = p->st;
  char why[300];
  snprintf(why, sizeof why, "%s", p->st_why);
  void **in = p->host;
  double **want = p->ref;
  if (v->act_dtype == DT_BF16) {
    in = p->host_bf, want = p->ref_bf;
  } else if (v->bf16_inputs && vs == V_OK) { /* an fp32 variant that rounds some inputs itself */
    if (v->bf16_inputs != p->mx_mask) {
      free_bufs(&p->l, p->host_mx, p->ref_mx);
      vs = grid_inputs(k->c->op, k->c, &p->l, p->host, v->bf16_inputs, p->host_mx, p->ref_mx);
      p->mx_mask = vs == V_OK ? v->bf16_inputs : 0;
      if (vs != V_OK) snprintf(why, sizeof why, "%s", verr_msg());
    }
    in = p->host_mx, want = p->ref_mx;
  }
  if (vs != V_OK) {
    r->status = KS_FAIL;
    snprintf(r->reason, sizeof r->reason, "inputs/oracle: %s", why);
    snprintf(r->metric, sizeof r->metric, "-");
    return V_OK;
  }
  return run_variant(k->c, &p->l, in, want, v, r);
}

void kernels_plan_free(kernels_plan *p) {
  if (!p) return;
  drop_inputs(p);
  for (int i = 0; i < p->n; i++) free(p->it[i].why);
  free(p->it);
  for (int i = 0; i < p->n_lists; i++) vop_case_list_free(&p->lists[i]);
  free(p->lists);
  free(p);
}

vstatus kernels_run(const kernels_opts *o, kernels_result *res) {
  memset(res, 0, sizeof *res);
  kernels_plan *p;
  VTRY(kernels_plan_make(o, &p));
  res->skipped_budget = kernels_plan_skipped(p);
  const double t0 = vclock_now();
  vstatus s = V_OK;
  for (int i = 0; i < p->n && s == V_OK; i++) {
    kernels_record r;
    s = kernels_plan_run(p, i, &r);
    if (s == V_OK) s = kernels_result_add(res, &r);
  }
  kernels_plan_free(p);
  res->wall_s = vclock_now() - t0;
  return s;
}

void kernels_result_free(kernels_result *res) {
  for (int i = 0; i < res->n; i++) free(res->r[i].trace_json);
  free(res->r);
  memset(res, 0, sizeof *res);
}

vstatus kernels_write_json(const kernels_result *res, const char *path) {
  cJSON *arr = cJSON_CreateArray();
  if (!arr) return VERR("%s: out of memory building JSON", path);
  for (int i = 0; i < res->n; i++) {
    const kernels_record *r = &res->r[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToArray(arr, o);
    cJSON_AddStringToObject(o, "suite", "kernels");
    cJSON_AddStringToObject(o, "case", r->id);
    cJSON_AddStringToObject(o, "op", r->op);
    cJSON_AddStringToObject(o, "path", r->path);
    cJSON_AddStringToObject(o, "variant", r->variant);
    cJSON *p = cJSON_AddObjectToObject(o, "params");
    cJSON_AddStringToObject(p, "preset", r->preset);
    cJSON_AddStringToObject(p, "shape", r->shape);
    cJSON_AddStringToObject(p, "dims", r->dims);
    cJSON_AddNumberToObject(p, "batch", r->batch);
    cJSON_AddStringToObject(p, "dtype", r->dtype);
    cJSON_AddStringToObject(p, "dist", vop_dist_name(r->dist));
    cJSON_AddNumberToObject(p, "seed", (double)r->seed);
    if (r->n_cases) {
      cJSON_AddNumberToObject(p, "cases", r->n_cases);
      cJSON_AddStringToObject(p, "first_case", r->first);
    }
    cJSON *m = cJSON_AddObjectToObject(o, "metric");
    cJSON_AddStringToObject(m, "name", r->metric);
    cJSON_AddStringToObject(m, "output", r->output);
    if (r->status != KS_UNSUPPORTED && isfinite(r->error)) cJSON_AddNumberToObject(m, "value", r->error);
    else if (r->status != KS_UNSUPPORTED) cJSON_AddStringToObject(m, "value", isnan(r->error) ? "nan" : "inf");
    else cJSON_AddNullToObject(m, "value");
    cJSON_AddNumberToObject(m, "bound", r->bound);
    cJSON_AddStringToObject(m, "bound_reason", r->why ? r->why : "");
    cJSON_AddStringToObject(o, "status", kernels_status_name(r->status));
    cJSON_AddStringToObject(o, "reason", r->reason);
    cJSON_AddBoolToObject(o, "deterministic", r->deterministic);
    cJSON_AddNumberToObject(o, "seconds", r->seconds);
    cJSON *tr = r->trace_json ? cJSON_Parse(r->trace_json) : NULL;
    cJSON_AddItemToObject(o, "trace", tr ? tr : cJSON_CreateArray());
  }
  vstatus s = vfile_write_json(path, arr, true);
  cJSON_Delete(arr);
  return s;
}
