/* Expert parallelism on cpu-ref (model/shard.h ds_shard_model_ep, vpath_opts.ep), simulated ranks:
 *   - cpu-ref:tpN:ep (N = 1, 2, 4, 8, 16 where n_routed_experts divides; others are skipped with
 *     the reason printed) against cpu-ref:tp1 on synth:tiny (16 experts) and synth:small (64
 *     experts; N = 2 and 8, all four with VOUCH_EP_SMALL=1): a prefill of prompts of 1 and 4 tokens
 *     (batch 1 and 3), 8 greedy decode steps fed by TP 1's argmax, then a 3-token step that
 *     rewinds one position; max |dlogit| within 1e-4 of the largest |logit| (fp32 summation order
 *     only), greedy tokens identical, EP 1 bitwise equal to TP 1; EP N also against TP N (every
 *     expert split along its intermediate dimension) at the same bound;
 *   - :ep:dcp together against TP 1; suites/diverge with a "NAME:tpN:ep" path;
 *   - what a rank holds: after materializing each EP shard of a lazy model, exactly its E/N
 *     experts x 3 tensors per MoE layer have data (the others are not in the shard and bind as
 *     NULL), equal bit for bit to the full model's; the shared expert is the TP block;
 *   - errors: a degree that does not divide n_routed_experts (a 12-expert variant of tiny at
 *     EP 8) names the field; :ep without a TP degree; :ep on a GPU path is not supported with
 *     the reason (needs a CUDA build: skipped with a line otherwise); bad suffixes.
 * Prints max |dlogit| and token agreement per N (docs/tensor-parallel.md quotes them). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/model.h"
#include "model/shard.h"
#include "suites/diverge/diverge.h"
#include "suites/paths/paths.h"
#include "suites/paths/spec.h"
#include "tests/cpu/sharded_checks.h"
#include "tests/cpu/path_specs.h"
#include "tests/harness.h"


/* One step on the reference, the EP path and (when tp != NULL) the TP N path; EP is compared with
 * the reference (c_ref) and with TP N (c_tp). */
/* EP against the reference, and (tp != NULL) against TP N's intermediate split (TP N as the
 * reference), through the shared script (tests/cpu/sharded_checks.h). */
static vstatus run_compare(vpath *ref, vpath *ep, vpath *tp, int V, int B, int steps, cmp *c_ref, cmp *c_tp) {
  vpath *p[2] = {ep, tp};
  cmp c[2];
  c[0] = *c_ref;
  memset(&c[1], 0, sizeof c[1]);
  vstatus s = sharded_script(ref, p, tp ? 2 : 1, NULL, V, B, steps, c, tp ? c_tp : NULL);
  *c_ref = c[0];
  return s;
}

static double secs(const struct timespec *a, const struct timespec *b) {
  return (double)(b->tv_sec - a->tv_sec) + 1e-9 * (double)(b->tv_nsec - a->tv_nsec);
}

static void check_cmp(const char *spec, const char *what, int N, int B, const cmp *c) {
  const double rel = c->max_ref > 0 ? c->max_d / c->max_ref : c->max_d;
  CHECK(rel <= 1e-4, "%s EP %d batch %d vs %s: max |dlogit| %.3g is %.3g of max |logit|", spec, N, B, what, c->max_d,
        rel);
  CHECK(c->token_diff == 0, "%s EP %d batch %d vs %s: argmax differs in %d of %d rows", spec, N, B, what,
        c->token_diff, c->rows);
}

/* EP N (and, with `suffix`, e.g. ":dcp", EP N plus that) against TP 1 and TP N. */
static void test_degrees(const ds_model *m, const char *spec, const int *Ns, int n_N, const char *suffix) {
  const int V = m->cfg.vocab_size, E = m->cfg.n_routed_experts, Bs[] = {1, 3};
  for (int k = 0; k < n_N; k++) {
    const int N = Ns[k];
    if (E % N) { /* recorded, never silent */
      printf("SKIP %s EP %d: n_routed_experts %d is not divisible by %d\n", spec, N, E, N);
      continue;
    }
    for (int bi = 0; bi < 2; bi++) {
      const int B = Bs[bi];
      vpath_opts o = {.max_seq = B, .max_ctx = 1 + 3 * (B - 1) + 8 + 2, .n_threads = 1};
      vpath ref, ep, tp;
      char name[48], tname[32];
      snprintf(name, sizeof name, "cpu-ref:tp%d:ep%s", N, suffix);
      snprintf(tname, sizeof tname, "cpu-ref:tp%d", N);
      CHECK_OK(test_open(&ref, "cpu-ref:tp1", m, &o));
      vtrace tr;
      vtrace_init(&tr, true);
      vpath_opts oe = o;
      oe.trace = &tr;
      vstatus s = test_open(&ep, name, m, &oe);
      CHECK(s == V_OK, "%s: open %s: %s", spec, name, verr_msg());
      const bool with_tp = N > 1 && !suffix[0];
      vstatus st = with_tp ? test_open(&tp, tname, m, &o) : V_OK;
      CHECK(st == V_OK, "%s: open %s: %s", spec, tname, verr_msg());
      if (s == V_OK && st == V_OK) {
        cmp c_ref = {0}, c_tp = {0};
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        vstatus r = run_compare(&ref, &ep, with_tp ? &tp : NULL, V, B, 8, &c_ref, &c_tp);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        CHECK(r == V_OK, "%s %s batch %d: %s", spec, name, B, verr_msg());
        printf("%s %-20s batch %d: vs TP 1 max |dlogit| %.3g (max |logit| %.3g), argmax differs in %d of %d rows", spec,
               name, B, c_ref.max_d, c_ref.max_ref, c_ref.token_diff, c_ref.rows);
        if (with_tp)
          printf("; vs TP %d max |dlogit| %.3g, argmax differs in %d of %d rows", N, c_tp.max_d, c_tp.token_diff,
                 c_tp.rows);
        printf(" [%.2f s]\n", secs(&t0, &t1));
        check_cmp(spec, "TP 1", N, B, &c_ref);
        if (with_tp) check_cmp(spec, "TP N", N, B, &c_tp);
        if (N == 1 && !suffix[0]) CHECK(c_ref.max_d == 0, "EP 1 equals TP 1 bit for bit (%.3g)", c_ref.max_d);
        CHECK(vtrace_has(&tr, "ep", "owned_experts", 0), "%s: the trace shows the EP MoE loop ran", name);
        CHECK(vtrace_has(&tr, "allreduce", "threads", 0), "%s: the trace shows the all-reduce ran", name);
      }
      if (st == V_OK && with_tp) vpath_close(&tp);
      if (s == V_OK) vpath_close(&ep);
      vtrace_free(&tr);
      vpath_close(&ref);
    }
  }
}

/* What each rank holds: EP shards of a lazy model, materialized on the host. */
static void test_holdings(void) {
  ds_model lazy, full;
  CHECK_OK(ds_model_open(&lazy, "synth:tiny", 3, 0, false));
  CHECK_OK(ds_model_open(&full, "synth:tiny", 3, 0, true));
  const ds_config *c = &full.cfg;
  const int E = c->n_routed_experts;
  int n_moe = 0;
  for (int l = 0; l < c->num_hidden_layers; l++) n_moe += ds_layer_is_moe(c, l);
  const int Ns[] = {1, 2, 4, 8, 16};
  for (int k = 0; k < 5; k++) {
    const int N = Ns[k];
    int total = 0;
    for (int r = 0; r < N; r++) {
      ds_model a, t;
      vstatus s = ds_shard_model_ep(&a, &lazy, r, N, true);
      CHECK(s == V_OK, "EP %d rank %d shard: %s", N, r, verr_msg());
      if (s) continue;
      CHECK_OK(ds_shard_model(&t, &full, r, N)); /* the TP shard, for the shared expert */
      int e0, e1;
      ds_model_expert_range(&a, &e0, &e1);
      CHECK(ds_model_is_ep(&a) && e0 == r * E / N && e1 == (r + 1) * E / N, "EP %d rank %d owns [%d, %d)", N, r, e0,
            e1);
      /* lazy: nothing generated yet, each owned expert's rule is the whole tensor */
      int lazy_bad = 0;
      for (int i = 0; i < a.n_synth; i++)
        if (ds_shard_expert_of(a.synth[i].name) >= 0)
          lazy_bad += a.synth[i].data != NULL || a.lazy[i].start != 0 ||
                      a.lazy[i].rows * a.lazy[i].cols != vtensor_numel(&a.synth[i]) ||
                      a.lazy[i].rows != a.lazy[i].spec.shape[0];
      CHECK(lazy_bad == 0, "EP %d rank %d: %d expert tensors not lazy whole-tensor rules", N, r, lazy_bad);
      CHECK_OK(ds_model_materialize(&a));
      int with_data = 0, foreign = 0, differ = 0;
      for (int i = 0; i < a.n_synth; i++) {
        const vtensor *x = &a.synth[i];
        const int e = ds_shard_expert_of(x->name);
        if (e < 0 || !x->data) continue;
        with_data++;
        foreign += e < e0 || e >= e1;
        const vtensor *f = NULL;
        for (int j = 0; j < full.n_synth && !f; j++)
          if (!strcmp(full.synth[j].name, x->name)) f = &full.synth[j];
        differ += !f || vtensor_nbytes(f) != vtensor_nbytes(x) || memcmp(f->data, x->data, vtensor_nbytes(x)) != 0;
      }
      total += with_data;
      CHECK(with_data == (E / N) * 3 * n_moe && foreign == 0,
            "EP %d rank %d: %d expert tensors with data (want %d = %d experts x 3 x %d MoE layers), %d not owned", N, r,
            with_data, (E / N) * 3 * n_moe, E / N, n_moe, foreign);
      CHECK(differ == 0, "EP %d rank %d: %d expert tensors differ from the full model's", N, r, differ);
      int bound_bad = 0, shared_bad = 0;
      for (int l = 0; l < c->num_hidden_layers; l++) {
        const ds_layer *y = &a.layers[l];
        if (!y->is_moe) continue;
        for (int e = 0; e < E; e++) {
          const bool own = e >= e0 && e < e1;
          bound_bad += own != (y->exp_gate[e] != NULL) || own != (y->exp_up[e] != NULL) ||
                       own != (y->exp_down[e] != NULL);
          if (own) bound_bad += y->exp_gate[e]->shape[0] != c->moe_intermediate_size;
        }
        const vtensor *sa[3] = {y->sh_gate, y->sh_up, y->sh_down}, *st[3] = {t.layers[l].sh_gate, t.layers[l].sh_up,
                                                                              t.layers[l].sh_down};
        for (int q = 0; q < 3; q++)
          shared_bad += sa[q]->shape[0] != st[q]->shape[0] || sa[q]->shape[1] != st[q]->shape[1] ||
                        memcmp(sa[q]->data, st[q]->data, vtensor_nbytes(st[q])) != 0;
      }
      CHECK(bound_bad == 0, "EP %d rank %d: %d expert bindings wrong (owned: whole, others NULL)", N, r, bound_bad);
      CHECK(shared_bad == 0, "EP %d rank %d: %d shared-expert tensors differ from the TP %d block", N, r, shared_bad, N);
      CHECK(a.n_synth == t.n_synth - (E - E / N) * 3 * n_moe, "EP %d rank %d: %d tensors, TP shard %d", N, r,
            a.n_synth, t.n_synth);
      ds_model_close(&t);
      ds_model_close(&a);
    }
    printf("EP %2d: each rank holds %d of %d experts (%d expert tensors with data per rank; %d over all ranks)\n", N,
           E / N, E, (E / N) * 3 * n_moe, total);
    CHECK(total == E * 3 * n_moe, "EP %d: every expert tensor on exactly one rank (%d of %d)", N, total, E * 3 * n_moe);
  }
  ds_model_close(&full);
  ds_model_close(&lazy);
}

/* Errors and names. */
static void test_errors(const ds_model *m) {
  vpath p;
  vpath_opts o = {.max_seq = 1, .max_ctx = 16, .n_threads = 1};
  /* a 12-expert variant of tiny: TP 8 divides everything, EP 8 does not divide the experts */
  ds_config c12 = m->cfg;
  c12.n_routed_experts = 12;
  ds_model m12;
  vstatus s = ds_model_synth(&m12, &c12, "tiny-e12", 5, true);
  CHECK(s == V_OK, "synth tiny with 12 experts: %s", verr_msg());
  if (s == V_OK) {
    CHECK_OK(test_open(&p, "cpu-ref:tp8", &m12, &o));
    vpath_close(&p);
    CHECK(test_open(&p, "cpu-ref:tp8:ep", &m12, &o) == V_ERR &&
              strstr(verr_msg(), "EP 8 needs n_routed_experts (12) divisible by 8"),
          "EP 8 of 12 experts: %s", verr_msg());
    CHECK(ds_shard_check_ep(&c12, 8, true) == V_ERR && strstr(verr_msg(), "n_routed_experts"), "check: %s",
          verr_msg());
    CHECK(ds_shard_check_ep(&c12, 8, false) == V_OK, "TP 8 of 12 experts is fine without ep");
    /* EP 4 of 12 experts (3 per rank) matches TP 1 */
    const int n4[] = {4};
    test_degrees(&m12, "tiny-e12", n4, 1, "");
    ds_model_close(&m12);
  }
  CHECK(test_open(&p, "cpu-ref:ep", m, &o) == V_ERR && strstr(verr_msg(), "--tp"), "ep without tp: %s", verr_msg());
  o.tp = 2;
  CHECK_OK(test_open(&p, "cpu-ref:ep", m, &o)); /* tp from the options, ep from the name */
  CHECK(p.opts.tp == 2 && p.opts.ep, "tp and ep reach the options");
  vpath_close(&p);
  o.ep = true;
  o.tp = 3;
  CHECK(test_open(&p, "cpu-ref", m, &o) == V_ERR && strstr(verr_msg(), "divisible by 3"), "EP 3: %s", verr_msg());
  o.ep = false;
  o.tp = 0;
  /* names */
  vpath_spec sp;
  CHECK(vpath_spec_parse("cpu-ref:tp2:ep", NULL, &sp) == V_OK && vpath_spec_parse("cpu-ref:tp2:ep:dcp", NULL, &sp) == V_OK &&
            vpath_spec_parse("cpu-ref:tp2:dcp:ep", NULL, &sp) == V_OK && vpath_spec_parse("cpu-ref:tp2:ep@v", NULL, &sp) == V_OK,
        "NAME:tpN:ep[:dcp][@V] parse: %s", verr_msg());
  CHECK(vpath_spec_parse("cpu-ref:tp2:ep:ep", NULL, &sp) == V_ERR && vpath_spec_parse("cpu-ref:ep:tp2", NULL, &sp) == V_ERR &&
            vpath_spec_parse("cpu-ref:tp2:epx", NULL, &sp) == V_ERR,
        "bad ep suffixes are refused");
  vpath_spec a, b, c;
  CHECK(vpath_spec_parse("cpu-ref:tp4:ep", NULL, &a) == V_OK && a.ep && vpath_spec_parse("cpu-ref:tp4:dcp:ep", NULL, &b) == V_OK &&
            b.ep && b.dcp && vpath_spec_parse("cpu-ref:tp4", NULL, &c) == V_OK && !c.ep && !c.dcp && c.tp == 4 &&
            a.tp == 4 && b.tp == 4,
        "the spec's ep / dcp / tp");
  /* GPU paths: not supported, with the reason, before any rank opens */
#ifdef VOUCH_HAVE_CUDA
  const char *gpu[] = {"cuda-ref:tp2:ep", "latency:tp2:ep"};
  for (int i = 0; i < 2; i++) {
    s = test_open(&p, gpu[i], m, &o);
    CHECK(s == V_UNSUPPORTED && strstr(verr_msg(), "expert parallelism is implemented on cpu-ref only"), "%s: %s",
          gpu[i], verr_msg());
    if (s == V_OK) vpath_close(&p);
  }
#else
  printf("SKIP :ep on cuda-ref / latency: this build has no CUDA paths (the check runs in CUDA builds)\n");
  CHECK(test_open(&p, "cuda-ref:tp2:ep", m, &o) == V_ERR && strstr(verr_msg(), "unknown path"),
        "cuda-ref is unknown in a CPU build: %s", verr_msg());
#endif
}

/* suites/diverge with an EP path: teacher-forced decode over a synthetic context. */
static void test_diverge(void) {
  ds_model m;
  CHECK_OK(ds_model_open(&m, "synth:tiny", 9, 0, true));
  const char *paths_s[] = {"cpu-ref", "cpu-ref:tp4:ep", "cpu-ref:tp16:ep"};
  vpath_spec paths[sizeof paths_s / sizeof *paths_s];
  test_specs(paths_s, (int)(sizeof paths_s / sizeof *paths_s), paths);
  diverge_opts o = {.paths = paths, .n_paths = 3, .batch = 2, .context = 24, .tokens = 8, .seed = 4, .n_threads = 1};
  diverge_result res[2];
  vstatus s = diverge_run(&m, &o, res);
  CHECK(s == V_OK, "diverge: %s", verr_msg());
  if (s == V_OK) check_diverge_exact(res, 2);
  ds_model_close(&m);
}

int main(void) {
  test_holdings();
  ds_model m;
  vstatus s = ds_model_open(&m, "synth:tiny", 7, 0, true);
  CHECK(s == V_OK, "open synth:tiny: %s", verr_msg());
  if (s == V_OK) {
    const int Ns[] = {1, 2, 3, 4, 8, 16}; /* 3 does not divide 16 experts: skipped with the reason */
    test_degrees(&m, "synth:tiny", Ns, 6, "");
    const int Nd[] = {4};
    test_degrees(&m, "synth:tiny", Nd, 1, ":dcp");
    test_errors(&m);
    ds_model_close(&m);
  }
  test_diverge();
  /* small (64 experts): EP 2 and 8 always, 4 and 16 too with VOUCH_EP_SMALL=1 */
  s = ds_model_open(&m, "synth:small", 7, 0, true);
  CHECK(s == V_OK, "open synth:small: %s", verr_msg());
  if (s == V_OK) {
    const char *e = getenv("VOUCH_EP_SMALL");
    const bool all = e && e[0] == '1';
    const int some[] = {2, 8}, every[] = {2, 4, 8, 16};
    if (!all) printf("synth:small: EP 4 and 16 not run (set VOUCH_EP_SMALL=1)\n");
    test_degrees(&m, "synth:small", all ? every : some, all ? 4 : 2, "");
    ds_model_close(&m);
  }
  return test_finish();
}
