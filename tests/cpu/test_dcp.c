/* Decode context parallelism on cpu-ref (reference/cpu/cpu_dcp.h), simulated ranks:
 *   - the log-sum-exp combine against a full softmax in double: split keys with one part
 *     empty (lse -inf), all lse equal, lse far apart (+-1000), all empty, NaN;
 *   - cpu-ref:tpN:dcp (N = 1, 2, 4, 8) against the unsharded path on synth:tiny: a prefill of
 *     prompts of lengths 1, 4, 7 (so at N >= 2 some ranks hold no visible key in the first
 *     steps), 8 greedy decode steps, then a speculative-style step of 3 tokens that rewinds
 *     one position; batch 1 and 3; max_ctx exactly the positions used (a rank holds
 *     ceil(max_ctx / N)); max |dlogit| <= 1e-4 and identical greedy tokens;
 *   - a long synthetic context (fill_cache 300 and 123 positions) then 8 decode steps;
 *   - names and errors: NAME:tpN:dcp, --tp with dcp, dcp without tp, a bad suffix.
 * Prints the max |dlogit| per case (docs/tensor-parallel.md quotes them). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "reference/cpu/cpu_dcp.h"
#include "suites/paths/paths.h"
#include "suites/paths/spec.h"
#include "tests/cpu/sharded_checks.h"
#include "tests/cpu/path_specs.h"
#include "tests/harness.h"

/* ---------------- the combine ---------------- */

/* Deterministic values in [-a, a]. */
static double val(int i, double a) { return a * sin(0.731 * i + 0.2 * (i % 7)); }

/* n keys (scores s[j], values v[j][vd]) split into P parts by j % P: partial o/lse per part
 * (float, as a rank holds them) in parts[P][vd + 1]; returns the full softmax output in want. */
static void make_parts(int n, int P, int vd, const double *s, const double *v, float *parts, double *want) {
  for (int r = 0; r < P; r++) {
    double mx = -INFINITY, sum = 0;
    for (int j = r; j < n; j += P) mx = s[j] > mx ? s[j] : mx;
    float *o = parts + (size_t)r * (vd + 1);
    for (int d = 0; d < vd; d++) o[d] = 0;
    if (mx == -INFINITY) {
      o[vd] = -INFINITY;
      continue;
    }
    for (int j = r; j < n; j += P) sum += exp(s[j] - mx);
    for (int d = 0; d < vd; d++) {
      double a = 0;
      for (int j = r; j < n; j += P) a += exp(s[j] - mx) / sum * v[j * vd + d];
      o[d] = (float)a;
    }
    o[vd] = (float)(mx + log(sum));
  }
  double mx = -INFINITY, sum = 0;
  for (int j = 0; j < n; j++) mx = s[j] > mx ? s[j] : mx;
  for (int j = 0; j < n; j++) sum += exp(s[j] - mx);
  for (int d = 0; d < vd; d++) {
    double a = 0;
    for (int j = 0; j < n; j++) a += exp(s[j] - mx) / sum * v[j * vd + d];
    want[d] = a;
  }
}

static void test_combine(void) {
  enum { VD = 16, MAXN = 64, P = 4 };
  double s[MAXN], v[MAXN * VD], want[VD];
  float parts[P * (VD + 1)], out[VD];
  /* 3 keys over 4 parts: part 3 holds none (lse -inf); scores spread over +-8 */
  const int ns[] = {3, 13, 64};
  for (int k = 0; k < 3; k++) {
    const int n = ns[k];
    for (int j = 0; j < n; j++) s[j] = val(j, 8.0);
    for (int j = 0; j < n * VD; j++) v[j] = val(j + 1000, 2.0);
    make_parts(n, P, VD, s, v, parts, want);
    if (n == 3) CHECK(parts[3 * (VD + 1) + VD] == -INFINITY, "part 3 of 3 keys is empty");
    for (int d = 0; d < VD; d++) out[d] = NAN; /* poison: every element must be written */
    cpu_dcp_combine(out, parts, parts + VD, P, VD + 1, VD);
    double e = 0;
    for (int d = 0; d < VD; d++) e = fmax(e, fabs(out[d] - want[d])); /* NaN makes e NaN */
    CHECK(e <= 1e-6, "combine of %d keys over %d parts: max error %.3g vs the full softmax", n, P, e);
  }
  /* all lse equal: the mean of the parts */
  for (int r = 0; r < P; r++) {
    for (int d = 0; d < VD; d++) parts[r * (VD + 1) + d] = (float)(r * 10 + d);
    parts[r * (VD + 1) + VD] = 3.25f;
  }
  cpu_dcp_combine(out, parts, parts + VD, P, VD + 1, VD);
  int bad = 0;
  for (int d = 0; d < VD; d++) bad += fabs(out[d] - (15.0 + d)) > 1e-5;
  CHECK(bad == 0, "equal lse: the mean of the parts (%d wrong)", bad);
  /* lse far apart: the dominant part alone, no overflow or NaN; a NaN o behind -inf is not read */
  const float lse_far[P] = {0.0f, 1000.0f, -1000.0f, -INFINITY};
  for (int r = 0; r < P; r++) parts[r * (VD + 1) + VD] = lse_far[r];
  for (int d = 0; d < VD; d++) parts[3 * (VD + 1) + d] = NAN;
  cpu_dcp_combine(out, parts, parts + VD, P, VD + 1, VD);
  bad = 0;
  for (int d = 0; d < VD; d++) bad += !(out[d] == parts[1 * (VD + 1) + d]);
  CHECK(bad == 0, "lse 0 / 1000 / -1000 / -inf: part 1 alone (%d wrong)", bad);
  /* two parts 20 nats apart: weights 1 : e^-20 */
  parts[0 * (VD + 1) + VD] = 20.0f;
  parts[1 * (VD + 1) + VD] = 0.0f;
  cpu_dcp_combine(out, parts, parts + VD, 2, VD + 1, VD);
  const double w1 = exp(-20.0) / (1 + exp(-20.0));
  double e = 0;
  for (int d = 0; d < VD; d++)
    e = fmax(e, fabs(out[d] - ((1 - w1) * parts[d] + w1 * parts[VD + 1 + d])));
  CHECK(e <= 1e-6, "lse 20 / 0: error %.3g", e);
  /* every part empty: zeros; a NaN lse: NaN */
  for (int r = 0; r < P; r++) parts[r * (VD + 1) + VD] = -INFINITY;
  cpu_dcp_combine(out, parts, parts + VD, P, VD + 1, VD);
  bad = 0;
  for (int d = 0; d < VD; d++) bad += out[d] != 0.0f;
  CHECK(bad == 0, "all parts empty: zeros (%d not)", bad);
  parts[2 * (VD + 1) + VD] = NAN;
  cpu_dcp_combine(out, parts, parts + VD, P, VD + 1, VD);
  CHECK(isnan(out[0]) && isnan(out[VD - 1]), "a NaN lse gives NaN");
  /* owned positions */
  CHECK(cpu_dcp_owned(0, 0, 4) == 0 && cpu_dcp_owned(1, 0, 4) == 1 && cpu_dcp_owned(1, 1, 4) == 0 &&
            cpu_dcp_owned(5, 0, 4) == 2 && cpu_dcp_owned(5, 1, 4) == 1 && cpu_dcp_owned(8, 3, 4) == 2,
        "cpu_dcp_owned counts p %% N == rank in [0, n)");
}

/* ---------------- cpu-ref:tpN:dcp vs the unsharded path ---------------- */


/* One path against the reference through the shared script (tests/cpu/sharded_checks.h). */
static vstatus run_compare(vpath *ref, vpath *p, int V, int B, const int *ctx, int steps, cmp *c) {
  return sharded_script(ref, &p, 1, ctx, V, B, steps, c, NULL);
}

static void check_case(const char *what, int N, int B, const cmp *c) {
  double rel = c->max_ref > 0 ? c->max_d / c->max_ref : c->max_d;
  printf("%s DCP %d batch %d: max |dlogit| %.3g (max |logit| %.3g), argmax differs in %d of %d rows\n", what, N, B,
         c->max_d, c->max_ref, c->token_diff, c->rows);
  CHECK(c->max_d <= 1e-4, "%s DCP %d batch %d: max |dlogit| %.3g (relative %.3g)", what, N, B, c->max_d, rel);
  CHECK(c->token_diff == 0, "%s DCP %d batch %d: greedy tokens differ in %d rows", what, N, B, c->token_diff);
}

static void test_model(void) {
  ds_model m;
  vstatus s = ds_model_open(&m, "synth:tiny", 7, 0, true);
  CHECK(s == V_OK, "open synth:tiny: %s", verr_msg());
  if (s) return;
  const int V = m.cfg.vocab_size, Ns[] = {1, 2, 4, 8}, Bs[] = {1, 3};
  for (int bi = 0; bi < 2; bi++) {
    const int B = Bs[bi];
    /* prompt 1 + 3(B-1), 8 decode steps, the last step rewinds 1 and adds 3: max position + 1 */
    const int max_ctx = 1 + 3 * (B - 1) + 8 + 2;
    vpath_opts o = {.max_seq = B, .max_ctx = max_ctx, .n_threads = 1};
    for (int k = 0; k < 4; k++) {
      vpath ref, p;
      CHECK_OK(test_open(&ref, "cpu-ref", &m, &o));
      char name[32];
      snprintf(name, sizeof name, "cpu-ref:tp%d:dcp", Ns[k]);
      vtrace tr;
      vtrace_init(&tr, true);
      vpath_opts od = o;
      od.trace = &tr;
      s = test_open(&p, name, &m, &od);
      CHECK(s == V_OK, "open %s: %s", name, verr_msg());
      if (s == V_OK) {
        cmp c = {0};
        vstatus r = run_compare(&ref, &p, V, B, NULL, 8, &c);
        CHECK(r == V_OK, "%s batch %d: %s", name, B, verr_msg());
        check_case("prefill+decode", Ns[k], B, &c);
        CHECK(vtrace_has(&tr, "dcp", "threads", 0), "%s: trace shows the DCP attention ran", name);
        vpath_close(&p);
      }
      vtrace_free(&tr);
      vpath_close(&ref);
    }
  }
  /* long synthetic context: fill_cache fills only the owned positions on each rank */
  const int ctx[2] = {300, 123};
  vpath_opts o = {.max_seq = 2, .max_ctx = 320, .n_threads = 1};
  for (int k = 1; k < 4; k++) {
    vpath ref, p;
    CHECK_OK(test_open(&ref, "cpu-ref", &m, &o));
    vpath_opts od = o;
    od.tp = Ns[k];
    od.dcp = true; /* through the options, as vouch generate --tp N --dcp does */
    s = test_open(&p, "cpu-ref", &m, &od);
    CHECK(s == V_OK, "open cpu-ref --tp %d --dcp: %s", Ns[k], verr_msg());
    if (s == V_OK) {
      cmp c = {0};
      vstatus r = run_compare(&ref, &p, V, 2, ctx, 8, &c);
      CHECK(r == V_OK, "fill_cache DCP %d: %s", Ns[k], verr_msg());
      check_case("fill_cache 300+123", Ns[k], 2, &c);
      vpath_close(&p);
    }
    vpath_close(&ref);
  }
  /* names and errors */
  vpath p;
  vpath_opts oe = {.max_seq = 1, .max_ctx = 16, .n_threads = 1};
  vpath_spec sp;
  CHECK(vpath_spec_parse("cpu-ref:tp2:dcp", "--paths", &sp) == V_OK && sp.tp == 2 && sp.dcp && !sp.ep &&
            !strcmp(sp.base, "cpu-ref") && !strcmp(sp.name, "cpu-ref:tp2:dcp"),
        "cpu-ref:tp2:dcp parses: %s", verr_msg());
  CHECK(vpath_spec_parse("cpu-ref:tp2:dcpx", "--paths", &sp) == V_ERR &&
            strstr(verr_msg(), "--paths: unknown path 'cpu-ref:tp2:dcpx'") && !sp.ops,
        "a bad suffix is refused, naming the option and the text: %s", verr_msg());
  CHECK(vpath_spec_parse("cpu-ref:dcp:tp2", "--paths", &sp) == V_ERR, "dcp before tp is refused");
  CHECK(test_open(&p, "cpu-ref:dcp", &m, &oe) == V_ERR && strstr(verr_msg(), "--tp"), "dcp without tp: %s",
        verr_msg());
  oe.tp = 3;
  CHECK(test_open(&p, "cpu-ref:dcp", &m, &oe) == V_ERR && strstr(verr_msg(), "divisible by 3"), "dcp tp 3: %s",
        verr_msg());
  oe.tp = 2;
  CHECK_OK(test_open(&p, "cpu-ref:dcp", &m, &oe)); /* tp from the options, dcp from the name */
  /* a step past max_ctx is not supported (not an error) under DCP too */
  int seq = 0, nt = 17, pos = 0;
  int32_t toks[17] = {0};
  vstep st = {.n_seq = 1, .seq = &seq, .n_tokens = &nt, .start_pos = &pos, .tokens = toks};
  CHECK(p.ops->supports(p.state, &st) == V_UNSUPPORTED, "17 positions with max_ctx 16: unsupported");
  vpath_close(&p);
  /* NAME[:tpN][:dcp]@VARIANT: the variant reaches the path's options, the rest parses as before */
  CHECK(vpath_spec_parse("cpu-ref:tp2:dcp@x", NULL, &sp) == V_OK && !strcmp(sp.variant, "x") &&
            vpath_spec_parse("cpu-ref@", NULL, &sp) == V_ERR && !strncmp(verr_msg(), "unknown path 'cpu-ref@'", 23),
        "@VARIANT names: %s", verr_msg());
  vpath_opts ov = {.max_seq = 1, .max_ctx = 16, .n_threads = 1};
  CHECK_OK(test_open(&p, "cpu-ref@some_variant", &m, &ov));
  CHECK(p.opts.variant && !strcmp(p.opts.variant, "some_variant"), "variant from the name: %s",
        p.opts.variant ? p.opts.variant : "(null)");
  vpath_close(&p);
  CHECK_OK(test_open(&p, "cpu-ref:tp2:dcp@v2", &m, &ov));
  CHECK(p.opts.tp == 2 && p.opts.dcp && p.opts.variant && !strcmp(p.opts.variant, "v2"), "tp, dcp and variant");
  vpath_close(&p);
  ds_model_close(&m);
}

int main(void) {
  test_combine();
  test_model();
  return test_finish();
}
