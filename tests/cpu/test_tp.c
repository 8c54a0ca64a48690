/* Simulated tensor parallelism on the CPU: the thread communicators (exact sums, identical
 * on every rank, abort instead of a hang), the kernel-suite variant on exact inputs, and
 * cpu-ref under TP 1/2/4/8/16 (synth:tiny) and TP 2/4 (synth:small; also 8/16 with
 * VOUCH_TP_SMALL=1) against the unsharded path: a prefill and 8 decode steps at
 * batch 1 and 3, logits within 1e-4 of the largest |logit| (fp32; only the summation order
 * differs), greedy tokens identical. Prints the max |dlogit| per degree. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/comm.h"
#include "reference/cpu/variants.h"
#include "reference/opreg.h"
#include "model/model.h"
#include "model/shard.h"
#include "suites/diverge/diverge.h"
#include "suites/kernels/kernels.h"
#include "suites/paths/paths.h"
#include "tests/cpu/sharded_checks.h"
#include "tests/cpu/path_specs.h"
#include "tests/harness.h"


/* ---------------- communicators ---------------- */

typedef struct {
  const vcomm *c;
  float *buf;
  int64_t n;
  int64_t n_override; /* >= 0: pass this count instead (mismatch test) */
  vstatus st;
} cjob;

static void *do_allreduce(void *arg) {
  cjob *j = arg;
  j->st = j->c->allreduce_sum(j->c, j->buf, j->n_override >= 0 ? j->n_override : j->n, DT_F32, NULL);
  return NULL;
}

static void test_comm_threads(void) {
  const int sizes[] = {1, 2, 3, 4, 8, 16};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    const int N = sizes[k];
    const int64_t n = 1000 + N;
    vcomm_group *g;
    CHECK_OK(vcomm_threads_group(&g, N));
    float *b = malloc(sizeof(float) * (size_t)(N * n));
    /* non-integers: the sum is in rank order, so every rank holds bitwise the same result,
     * equal to a sequential rank-order sum */
    for (int64_t i = 0; i < N * n; i++) b[i] = (float)sin((double)i * 0.37) * 3.0f;
    float *want = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
      float s = b[i];
      for (int r = 1; r < N; r++) s += b[r * n + i];
      want[i] = s;
    }
    cjob *j = calloc((size_t)N, sizeof *j);
    pthread_t *th = calloc((size_t)N, sizeof *th);
    for (int rep = 0; rep < 3; rep++) { /* repeated collectives reuse the group */
      if (rep > 0)
        for (int r = 0; r < N; r++) memcpy(b + r * n, b, sizeof(float) * (size_t)n); /* all ranks: the sum */
      for (int r = 0; r < N; r++) {
        j[r] = (cjob){.c = g->rank(g, r), .buf = b + r * n, .n = n, .n_override = -1};
        pthread_create(&th[r], NULL, do_allreduce, &j[r]);
      }
      for (int r = 0; r < N; r++) pthread_join(th[r], NULL);
      int bad = 0;
      for (int r = 0; r < N; r++) bad += j[r].st != V_OK;
      CHECK(bad == 0, "N=%d rep %d: %d ranks failed: %s", N, rep, bad, verr_msg());
      if (rep == 0) {
        int64_t diff = 0;
        for (int r = 0; r < N; r++) diff += memcmp(b + r * n, want, sizeof(float) * (size_t)n) != 0;
        CHECK(diff == 0, "N=%d: %lld ranks differ from the rank-order sum", N, (long long)diff);
      } else {
        int64_t diff = 0;
        for (int r = 1; r < N; r++) diff += memcmp(b + r * n, b, sizeof(float) * (size_t)n) != 0;
        CHECK(diff == 0, "N=%d rep %d: ranks disagree", N, rep);
      }
    }
    if (N > 1) {
      /* count mismatch: every rank reports the error, none hangs */
      for (int r = 0; r < N; r++) {
        j[r] = (cjob){.c = g->rank(g, r), .buf = b + r * n, .n = n, .n_override = r == N - 1 ? n - 1 : -1};
        pthread_create(&th[r], NULL, do_allreduce, &j[r]);
      }
      for (int r = 0; r < N; r++) pthread_join(th[r], NULL);
      int errs = 0;
      for (int r = 0; r < N; r++) errs += j[r].st == V_ERR;
      CHECK(errs == N, "N=%d count mismatch: %d of %d ranks report it", N, errs, N);
      /* a missing rank: abort wakes the others with an error */
      for (int r = 0; r < N - 1; r++) {
        j[r] = (cjob){.c = g->rank(g, r), .buf = b + r * n, .n = n, .n_override = -1};
        pthread_create(&th[r], NULL, do_allreduce, &j[r]);
      }
      usleep(20000);
      g->abort(g);
      for (int r = 0; r < N - 1; r++) pthread_join(th[r], NULL);
      errs = 0;
      for (int r = 0; r < N - 1; r++) errs += j[r].st == V_ERR;
      CHECK(errs == N - 1, "N=%d abort: %d of %d waiting ranks returned an error", N, errs, N - 1);
      CHECK_OK(g->recover(g));
      for (int r = 0; r < N; r++) {
        j[r] = (cjob){.c = g->rank(g, r), .buf = b + r * n, .n = n, .n_override = -1};
        pthread_create(&th[r], NULL, do_allreduce, &j[r]);
      }
      for (int r = 0; r < N; r++) pthread_join(th[r], NULL);
      errs = 0;
      for (int r = 0; r < N; r++) errs += j[r].st != V_OK;
      CHECK(errs == 0, "N=%d: the group works again after recover (%d failures)", N, errs);
    }
    free(th);
    free(j);
    free(want);
    free(b);
    g->destroy(g);
  }
}

typedef struct {
  const vcomm *c;
  const float *send;
  float *recv;
  int64_t n;
  vstatus st;
} gjob;

static void *do_allgather(void *arg) {
  gjob *j = arg;
  j->st = j->c->allgather(j->c, j->send, j->recv, j->n, DT_F32, NULL);
  return NULL;
}

static void test_allgather(void) {
  for (int N = 1; N <= 16; N *= 2) {
    const int64_t n = 7;
    vcomm_group *g;
    CHECK_OK(vcomm_threads_group(&g, N));
    float *send = malloc(sizeof(float) * (size_t)(N * n)), *recv = malloc(sizeof(float) * (size_t)(N * N * n));
    for (int64_t i = 0; i < N * n; i++) send[i] = (float)(i * 3 + 1);
    gjob *j = calloc((size_t)N, sizeof *j);
    pthread_t *th = calloc((size_t)N, sizeof *th);
    for (int r = 0; r < N; r++) {
      j[r] = (gjob){.c = g->rank(g, r), .send = send + r * n, .recv = recv + (size_t)r * N * n, .n = n};
      pthread_create(&th[r], NULL, do_allgather, &j[r]);
    }
    for (int r = 0; r < N; r++) pthread_join(th[r], NULL);
    int bad = 0;
    for (int r = 0; r < N; r++) bad += j[r].st != V_OK || memcmp(recv + (size_t)r * N * n, send, sizeof(float) * (size_t)(N * n)) != 0;
    CHECK(bad == 0, "allgather N=%d: %d ranks wrong", N, bad);
    free(j);
    free(th);
    free(send);
    free(recv);
    g->destroy(g);
  }
  /* placing vocabulary blocks: vocab 10 over 4 ranks (blocks of 3, the last of 1) */
  float gathered[4 * 2 * 3], out[2 * 10];
  for (int r = 0; r < 4; r++)
    for (int i = 0; i < 2; i++)
      for (int k = 0; k < 3; k++) gathered[(r * 2 + i) * 3 + k] = (float)(i * 100 + r * 3 + k);
  memset(out, 0, sizeof out);
  vcomm_place_vocab_blocks(out, gathered, 2, 10, 4);
  int bad = 0;
  for (int i = 0; i < 2; i++)
    for (int v = 0; v < 10; v++) bad += out[i * 10 + v] != (float)(i * 100 + v);
  CHECK(bad == 0, "vocab blocks placed (%d wrong)", bad);
}

static void *do_reduce_scatter(void *arg) {
  gjob *j = arg;
  j->st = j->c->reduce_scatter_sum(j->c, j->send, j->recv, j->n, DT_F32, NULL);
  return NULL;
}

/* rank r sends [N][n] small integers and receives chunk r of the sum; the last case reduces in
 * place (recv = the rank's own chunk of send), as the latency path's two-stage reduce may */
static void test_reduce_scatter(void) {
  for (int N = 1; N <= 16; N *= 2)
    for (int inplace = 0; inplace < 2; inplace++) {
      const int64_t n = 5;
      vcomm_group *g;
      CHECK_OK(vcomm_threads_group(&g, N));
      float *send = malloc(sizeof(float) * (size_t)(N * N * n)), *recv = malloc(sizeof(float) * (size_t)(N * n));
      for (int64_t i = 0; i < N * N * n; i++) send[i] = (float)((i * 7) % 13 - 6);
      float *want = calloc((size_t)(N * n), sizeof(float));
      for (int r = 0; r < N; r++)
        for (int64_t i = 0; i < N * n; i++) want[i] += send[(size_t)r * N * n + i];
      gjob *j = calloc((size_t)N, sizeof *j);
      pthread_t *th = calloc((size_t)N, sizeof *th);
      for (int r = 0; r < N; r++) {
        float *mine = send + (size_t)r * N * n;
        j[r] = (gjob){.c = g->rank(g, r), .send = mine, .recv = inplace ? mine + r * n : recv + r * n, .n = n};
        pthread_create(&th[r], NULL, do_reduce_scatter, &j[r]);
      }
      for (int r = 0; r < N; r++) pthread_join(th[r], NULL);
      int bad = 0;
      for (int r = 0; r < N; r++)
        bad += j[r].st != V_OK || memcmp(j[r].recv, want + r * n, sizeof(float) * (size_t)n) != 0;
      CHECK(bad == 0, "reduce_scatter N=%d%s: %d ranks wrong", N, inplace ? " in place" : "", bad);
      free(j), free(th), free(send), free(recv), free(want);
      g->destroy(g);
    }
}

/* ---------------- the kernel-suite variant on exact inputs ---------------- */

static void test_variant(void) {
  kernels_register_ops();
  const vop *op = vopreg_find_op("allreduce");
  CHECK(op != NULL, "allreduce op registered");
  if (!op) return;
  const vop_variant *var = NULL;
  for (int pass = 0; pass < 2 && !var; pass++) {
    if (pass == 1) comm_variants_register(); /* until kernels_register_ops() registers it */
    for (int i = 0; i < vopreg_n_variants(); i++)
      if (vopreg_variant(i)->op == op && strcmp(vopreg_variant(i)->name, "threads") == 0) var = vopreg_variant(i);
  }
  CHECK(var != NULL, "threads variant registered");
  if (!var) return;
  const int ranks[] = {2, 4, 8, 16};
  for (int k = 0; k < 4; k++) {
    vop_case c;
    memset(&c, 0, sizeof c);
    c.op = op;
    snprintf(c.preset, sizeof c.preset, "tiny");
    snprintf(c.shape, sizeof c.shape, "tp%d", ranks[k]);
    c.d[0] = ranks[k];
    c.d[1] = 256 + 3;
    c.dist = VD_SMALLINT;
    c.seed = 100 + (uint64_t)k;
    vop_layout l;
    CHECK_OK(op->layout(&c, &l));
    void *host[VOP_MAX_BUFS] = {0};
    double *ref[VOP_MAX_BUFS] = {0};
    for (int b = 0; b < l.n; b++) {
      host[b] = calloc((size_t)l.b[b].n, vdtype_size(l.b[b].dtype));
      if (l.b[b].is_output) ref[b] = calloc((size_t)l.b[b].n, sizeof(double));
    }
    void *in_only[VOP_MAX_BUFS] = {0};
    for (int b = 0; b < l.n; b++) in_only[b] = l.b[b].is_output ? NULL : host[b];
    CHECK_OK(op->gen_inputs(&c, &l, in_only));
    CHECK_OK(op->oracle(&c, &l, host, ref));
    vtrace t;
    vtrace_init(&t, true);
    CHECK_OK(var->supports(&c));
    CHECK_OK(var->run(&c, &l, host, &t));
    CHECK(vtrace_has(&t, "allreduce", "threads", 0), "trace shows the threads variant ran");
    int64_t wrong = 0;
    for (int b = 0; b < l.n; b++)
      if (l.b[b].is_output)
        for (int64_t i = 0; i < l.b[b].n; i++) wrong += ((float *)host[b])[i] != (float)ref[b][i];
    CHECK(wrong == 0, "allreduce threads R=%d: %lld elements differ from the oracle (bitwise)", ranks[k],
          (long long)wrong);
    vtrace_free(&t);
    for (int b = 0; b < l.n; b++) {
      free(host[b]);
      free(ref[b]);
    }
  }
}

/* ---------------- cpu-ref under TP vs unsharded ---------------- */


/* Prefill B prompts of different lengths, then `steps` greedy decode steps (teacher forced on
 * the reference's argmax), comparing `p` against `ref` every step. */
static vstatus run_compare(vpath *ref, vpath *p, int V, int B, int steps, cmp *out) {
  int seq[8], nt[8], pos[8];
  int32_t tok[64];
  int k = 0;
  for (int b = 0; b < B; b++) {
    seq[b] = b;
    nt[b] = 3 + 2 * b;
    pos[b] = 0;
    for (int j = 0; j < nt[b]; j++) tok[k++] = (int32_t)((b * 37 + j * 11 + 5) % V);
  }
  vstep s = {.n_seq = B, .seq = seq, .n_tokens = nt, .start_pos = pos, .tokens = tok};
  float *la = malloc(sizeof(float) * (size_t)B * V), *lb = malloc(sizeof(float) * (size_t)B * V);
  vstatus st = V_OK;
  for (int step = 0; step <= steps && st == V_OK; step++) {
    if ((st = ref->ops->forward(ref->state, &s, la)) != V_OK) break;
    if ((st = p->ops->forward(p->state, &s, lb)) != V_OK) break;
    for (int b = 0; b < B; b++) {
      const float *x = la + (size_t)b * V, *y = lb + (size_t)b * V;
      for (int i = 0; i < V; i++) {
        double d = fabs((double)x[i] - y[i]);
        if (!(d <= out->max_d)) out->max_d = d; /* NaN sticks */
        if (fabs(x[i]) > out->max_ref) out->max_ref = fabs(x[i]);
      }
      out->token_diff += argmax(x, V) != argmax(y, V);
    }
    /* next step: one token per sequence, the reference's greedy choice */
    for (int b = 0; b < B; b++) {
      pos[b] += nt[b];
      nt[b] = 1;
      tok[b] = (int32_t)argmax(la + (size_t)b * V, V);
    }
  }
  free(la);
  free(lb);
  return st;
}

static void test_model(const char *spec, const int *tps, int n_tps) {
  ds_model m;
  vstatus s = ds_model_open(&m, spec, 7, 0, true);
  CHECK(s == V_OK, "open %s: %s", spec, verr_msg());
  if (s) return;
  const int V = m.cfg.vocab_size;
  const int Bs[] = {1, 3};
  for (int bi = 0; bi < 2; bi++) {
    const int B = Bs[bi];
    vpath_opts o = {.max_seq = B, .max_ctx = 32, .n_threads = 1};
    for (int k = 0; k < n_tps; k++) {
      vpath ref, p;
      CHECK_OK(test_open(&ref, "cpu-ref", &m, &o));
      vpath_opts ot = o;
      ot.tp = tps[k];
      vtrace tr;
      vtrace_init(&tr, true);
      ot.trace = &tr;
      s = test_open(&p, "cpu-ref", &m, &ot);
      CHECK(s == V_OK, "%s: open TP %d: %s", spec, tps[k], verr_msg());
      if (s == V_OK) {
        cmp c = {0};
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        CHECK_OK(run_compare(&ref, &p, V, B, 8, &c));
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double rel = c.max_ref > 0 ? c.max_d / c.max_ref : c.max_d;
        printf("%s TP %2d batch %d: max |dlogit| %.3g (max |logit| %.3g, relative %.3g), argmax differs in %d rows "
               "[%.2f s]\n",
               spec, tps[k], B, c.max_d, c.max_ref, rel, c.token_diff,
               (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
        CHECK(rel <= 1e-4, "%s TP %d batch %d: max |dlogit| %.3g is %.3g of max |logit|", spec, tps[k], B, c.max_d,
              rel);
        CHECK(c.token_diff == 0, "%s TP %d batch %d: greedy tokens differ in %d rows", spec, tps[k], B, c.token_diff);
        if (tps[k] == 1) CHECK(c.max_d == 0, "TP 1 equals the unsharded path bit for bit (%.3g)", c.max_d);
        CHECK(vtrace_has(&tr, "tp", "threads", 0), "trace shows the TP wrapper ran");
        CHECK(vtrace_has(&tr, "allreduce", "threads", 0), "trace shows the path's all-reduce ran");
        vpath_close(&p);
      }
      vtrace_free(&tr);
      vpath_close(&ref);
    }
  }
  /* name suffix and errors */
  vpath p;
  vpath_opts o = {.max_seq = 1, .max_ctx = 16, .n_threads = 1};
  CHECK_OK(test_open(&p, "cpu-ref:tp2", &m, &o));
  vpath_close(&p);
  o.tp = 3;
  CHECK(test_open(&p, "cpu-ref", &m, &o) == V_ERR && strstr(verr_msg(), "divisible by 3"), "TP 3: %s", verr_msg());
  o.tp = 0;
  CHECK(test_open(&p, "cpu-ref:tpx", &m, &o) == V_ERR, "bad suffix is an error");
  /* an invalid step is an error on every rank, and the path stays usable */
  o.tp = 4;
  CHECK_OK(test_open(&p, "cpu-ref", &m, &o));
  int seq = 0, nt = 1, pos = 0;
  int32_t bad_tok = V + 5, good = 3;
  float *l = malloc(sizeof(float) * (size_t)V);
  vstep st = {.n_seq = 1, .seq = &seq, .n_tokens = &nt, .start_pos = &pos, .tokens = &bad_tok};
  CHECK(p.ops->forward(p.state, &st, l) == V_ERR && strstr(verr_msg(), "outside the vocabulary"), "bad token: %s", verr_msg());
  st.tokens = &good;
  CHECK_OK(p.ops->forward(p.state, &st, l));
  free(l);
  vpath_close(&p);
  ds_model_close(&m);
}

/* suites/diverge with "NAME:tpN" paths: TP N matches TP 1 over a synthetic context
 * (fill_cache on every rank) and teacher-forced decode steps. */
static void test_diverge(void) {
  ds_model m;
  CHECK_OK(ds_model_open(&m, "synth:tiny", 9, 0, true));
  const char *paths_s[] = {"cpu-ref", "cpu-ref:tp2", "cpu-ref:tp8", "cpu-ref:tp16"};
  vpath_spec paths[sizeof paths_s / sizeof *paths_s];
  test_specs(paths_s, (int)(sizeof paths_s / sizeof *paths_s), paths);
  diverge_opts o = {.paths = paths, .n_paths = 4, .batch = 2, .context = 24, .tokens = 8, .seed = 4, .n_threads = 1};
  diverge_result res[3];
  vstatus s = diverge_run(&m, &o, res);
  CHECK(s == V_OK, "diverge: %s", verr_msg());
  if (s == V_OK) check_diverge_exact(res, 3);
  ds_model_close(&m);
}

int main(void) {
  test_comm_threads();
  test_allgather();
  test_reduce_scatter();
  test_variant();
  const int tiny_tps[] = {1, 2, 4, 8, 16};
  test_model("synth:tiny", tiny_tps, 5);
  test_diverge();
  /* small: TP 2 and 4 always; 8 and 16 too with VOUCH_TP_SMALL=1 (about 15 s more on 2 cores) */
  const char *e = getenv("VOUCH_TP_SMALL");
  const int small_tps[] = {2, 4, 8, 16};
  test_model("synth:small", small_tps, e && e[0] == '1' ? 4 : 2);
  return test_finish();
}
