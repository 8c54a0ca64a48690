/* Checks shared by the CPU tests of the sharded paths (test_tp, test_dcp, test_ep): logits of a
 * sharded path against the unsharded one, and suites/diverge results that must be fp32-exact. */
#ifndef VOUCH_TESTS_CPU_SHARDED_CHECKS_H
#define VOUCH_TESTS_CPU_SHARDED_CHECKS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/path.h"
#include "suites/diverge/diverge.h"
#include "tests/harness.h"

typedef struct {
  double max_d;   /* max |dlogit| */
  double max_ref; /* max |logit| of the reference */
  int token_diff; /* rows whose argmax differs */
  int rows;       /* rows compared */
} cmp;

static inline int argmax(const float *l, int V) {
  int b = 0;
  for (int i = 1; i < V; i++)
    if (l[i] > l[b]) b = i;
  return b;
}

/* Accumulates rows x V logits a (the reference) against b into c. */
static inline void compare_rows(const float *a, const float *b, int rows, int V, cmp *c) {
  for (int i = 0; i < rows; i++) {
    const float *x = a + (size_t)i * V, *y = b + (size_t)i * V;
    for (int k = 0; k < V; k++) {
      double d = fabs((double)x[k] - y[k]);
      if (!(d <= c->max_d)) c->max_d = d; /* NaN sticks */
      if (fabs(x[k]) > c->max_ref) c->max_ref = fabs(x[k]);
    }
    c->token_diff += argmax(x, V) != argmax(y, V);
    c->rows++;
  }
}

/* The script every sharded-path test runs: B <= 4 sequences, a prefill of prompts of 1 + 3b tokens
 * (or, with ctx[b] > 0, a synthetic context of ctx[b] positions filled by fill_cache on every
 * path), `steps` greedy decode steps (the reference's argmax fed to all), then 3 tokens per
 * sequence one position back (a rejected draft rewound) with logits for every token. At every
 * step the logits of p[i] (n <= 2 paths) are compared with the reference's into c[i]; with pair,
 * p[0]'s against p[1]'s (p[1] as the reference) into pair. */
static inline vstatus sharded_script(vpath *ref, vpath *const *p, int n, const int *ctx, int V, int B, int steps,
                                     cmp *c, cmp *pair) {
  int seq[4], nt[4], pos[4];
  int32_t tok[64];
  const size_t bytes = sizeof(float) * 3 * 4 * (size_t)V;
  float *lr = malloc(bytes), *l[2] = {malloc(bytes), malloc(bytes)};
  vstatus st = V_OK;
  if (B < 1 || B > 4 || n < 1 || n > 2) {
    st = VERR("sharded_script: batch %d (1..4), %d paths (1..2)", B, n);
    goto out;
  }
  if (!lr || !l[0] || !l[1]) {
    st = VERR("sharded_script: out of memory for logits");
    goto out;
  }
  int k = 0;
  for (int b = 0; b < B; b++) {
    seq[b] = b;
    if (ctx && ctx[b] > 0) {
      if ((st = ref->ops->fill_cache(ref->state, b, ctx[b], 77)) != V_OK) goto out;
      for (int i = 0; i < n; i++)
        if ((st = p[i]->ops->fill_cache(p[i]->state, b, ctx[b], 77)) != V_OK) goto out;
      nt[b] = 1;
      pos[b] = ctx[b];
    } else {
      nt[b] = 1 + 3 * b;
      pos[b] = 0;
    }
    for (int j = 0; j < nt[b]; j++) tok[k++] = (int32_t)((b * 37 + j * 11 + 5) % V);
  }
  vstep s = {.n_seq = B, .seq = seq, .n_tokens = nt, .start_pos = pos, .tokens = tok};
  for (int step = 0; step <= steps + 1; step++) {
    if (step == steps + 1) { /* the rewound 3-token step */
      k = 0;
      for (int b = 0; b < B; b++) {
        pos[b] -= 1;
        nt[b] = 3;
        for (int j = 0; j < 3; j++) tok[k++] = (int32_t)((b * 13 + j * 29 + 2) % V);
      }
      s.all_logits = true;
    }
    if ((st = ref->ops->forward(ref->state, &s, lr)) != V_OK) goto out;
    for (int i = 0; i < n; i++) {
      if ((st = p[i]->ops->forward(p[i]->state, &s, l[i])) != V_OK) goto out;
      compare_rows(lr, l[i], vstep_logit_rows(&s), V, &c[i]);
    }
    if (pair && n == 2) compare_rows(l[1], l[0], vstep_logit_rows(&s), V, pair);
    if (step < steps + 1)
      for (int b = 0; b < B; b++) {
        pos[b] += nt[b];
        nt[b] = 1;
        tok[b] = (int32_t)argmax(lr + (size_t)b * V, V);
      }
  }
out:
  free(lr);
  free(l[0]);
  free(l[1]);
  return st;
}

/* n diverge results of sharded paths against the unsharded cpu-ref: supported, the same top token
 * everywhere, fp32-reordering distance only. Frees them. */
static inline void check_diverge_exact(diverge_result *res, int n) {
  for (int i = 0; i < n; i++) {
    printf("diverge %s vs cpu-ref (context 24, batch 2, 8 tokens): mean KLD %.3g, same top %.1f%%, max |dlogit| "
           "%.3g\n", res[i].path, res[i].kld_mean, res[i].same_top_pct, res[i].max_dlogit);
    CHECK(res[i].supported, "%s supported: %s", res[i].path, res[i].reason);
    CHECK(res[i].same_top_pct == 100.0, "%s same top %.1f%%", res[i].path, res[i].same_top_pct);
    CHECK(res[i].max_dlogit < 1e-4 && res[i].kld_mean < 1e-9, "%s max |dlogit| %.3g KLD %.3g", res[i].path,
          res[i].max_dlogit, res[i].kld_mean);
    diverge_result_free(&res[i]);
  }
}

#endif
