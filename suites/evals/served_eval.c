/* What the text evals over servers share (suites/evals/served_eval.h). */
#define _GNU_SOURCE
#include "suites/evals/served_eval.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites/engine/cli.h"
#include "suites/engine/record.h"

/* P(X >= k) for X ~ Binomial(m, 1/2). */
static double binom_half_ge(int m, int k) {
  if (k <= 0) return 1;
  if (k > m) return 0;
  double p = 0;
  const double lm = lgamma(m + 1.0) - m * log(2.0);
  for (int j = k; j <= m; j++) p += exp(lm - lgamma(j + 1.0) - lgamma(m - j + 1.0));
  return p > 1 ? 1 : p;
}

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double seval_worse_p(const double *d, int n, uint64_t seed, int *m_out) {
  double *a = malloc((size_t)(n > 0 ? n : 1) * sizeof *a); /* |d| of the non-zero items */
  int m = 0, pos = 0;
  double t = 0, sa = 0; /* the observed sum, the sum of |d| */
  for (int i = 0; a && i < n; i++) {
    if (!isfinite(d[i]) || fabs(d[i]) <= 1e-12) continue;
    a[m++] = fabs(d[i]);
    pos += d[i] > 0;
    t += d[i];
    sa += fabs(d[i]);
  }
  if (m_out) *m_out = m;
  if (!a || m == 0) { free(a); return 1; }
  const double tol = 1e-9 * sa; /* sums equal up to rounding count as reaching t */
  bool equal = true;
  for (int i = 1; i < m && equal; i++) equal = fabs(a[i] - a[0]) <= 1e-12 * a[0];
  double p;
  if (equal) {
    p = binom_half_ge(m, pos);
  } else if (m <= 16) {
    /* every sign pattern, walked in Gray-code order: one sign flips per step */
    long hits = 0;
    const long total = 1L << m;
    double sum = -sa; /* all signs negative */
    for (long g = 0; g < total; g++) {
      if (g) {
        const int bit = __builtin_ctzl((unsigned long)g); /* the bit that flips from g-1's code to g's */
        sum += ((g ^ (g >> 1)) >> bit & 1) ? 2 * a[bit] : -2 * a[bit];
      }
      hits += sum >= t - tol;
    }
    p = (double)hits / (double)total;
  } else {
    const int draws = 20000;
    uint64_t st = seed ^ 0x5eed5eedULL ^ (uint64_t)m;
    long hits = 0;
    for (int r = 0; r < draws; r++) {
      double s = 0;
      uint64_t bits = 0;
      for (int i = 0; i < m; i++) {
        if (i % 64 == 0) bits = splitmix(&st);
        s += (bits >> (i % 64) & 1) ? a[i] : -a[i];
      }
      hits += s >= t - tol;
    }
    p = (1.0 + (double)hits) / (1.0 + draws);
  }
  free(a);
  return p;
}

void seval_opts_init(seval_opts *o, long max_tokens) {
  o->max_tokens = max_tokens;
  o->concurrency = 8;
  o->alpha = 0.05;
  o->timeout_s = 1800;
}

bool seval_option(seval_opts *o, int argc, char **argv, int *i, vstatus *err) {
  const char *v;
  if (cli_opt(argc, argv, i, "--dataset", &v, err)) { if (v) o->dataset = v; }
  else if (cli_opt(argc, argv, i, "--server", &v, err)) { if (v) o->server = v; }
  else if (cli_opt(argc, argv, i, "--ref-server", &v, err)) { if (v) o->ref_server = v; }
  else if (cli_opt(argc, argv, i, "--server-model", &v, err)) { if (v) o->server_model = v; }
  else if (cli_opt(argc, argv, i, "--max-tokens", &v, err)) { if (v) *err = cli_int("--max-tokens", v, 1, 1 << 24, &o->max_tokens); }
  else if (cli_opt(argc, argv, i, "--concurrency", &v, err)) { if (v) *err = cli_int("--concurrency", v, 1, 4096, &o->concurrency); }
  else if (cli_opt(argc, argv, i, "--limit", &v, err)) { if (v) *err = cli_int("--limit", v, 1, 1L << 30, &o->limit); }
  else if (cli_opt(argc, argv, i, "--alpha", &v, err)) { if (v) *err = cli_double("--alpha", v, &o->alpha); }
  else if (cli_opt(argc, argv, i, "--timeout", &v, err)) { if (v) *err = cli_double("--timeout", v, &o->timeout_s); }
  else if (!strcmp(argv[*i], "--stream")) o->stream = true;
  else return false;
  return true;
}

vstatus seval_options_done(const seval_opts *o) {
  if (!o->dataset) return VERR("option --dataset FILE is required here");
  if (!o->server) return VERR("option --server URL is required with --dataset (the eval asks a server; there is no model)");
  VTRY(served_spec_check("--server", o->server));
  if (o->ref_server) VTRY(served_spec_check("--ref-server", o->ref_server)); /* its errors name --ref-server */
  if (!(o->alpha > 0 && o->alpha < 1)) return VERR("option --alpha: %g is not in (0, 1)", o->alpha);
  if (!(o->timeout_s > 0)) return VERR("option --timeout: %g is not a positive number of seconds", o->timeout_s);
  return V_OK;
}

void seval_paired_decide(seval_paired *p, const double *d, const double *t, int m, uint64_t seed, double alpha) {
  double sum = 0;
  for (int i = 0; i < m; i++) sum -= d[i];
  p->n_paired = m;
  p->mean_diff = m ? sum / m : NAN;
  p->p_worse = seval_worse_p(d, m, seed, &p->n_differ);
  p->p_trunc = seval_worse_p(t, m, seed + 1, NULL);
  p->worse = p->p_worse < alpha;
  p->more_truncated = p->p_trunc < alpha;
}

void seval_paired_metrics(const seval_paired *p, vrecord *r) {
  rec_metric_value(r, "paired_items", "", RB_NONE, p->n_paired);
  rec_metric_value(r, "paired_differ", "", RB_NONE, p->n_differ);
  rec_metric_value(r, "paired_diff", "", RB_HIGHER, p->mean_diff);
  rec_metric_value(r, "worse_p", "", RB_HIGHER, p->p_worse);
  rec_metric_value(r, "reference_truncated", "", RB_NONE, p->trunc_r);
  rec_metric_value(r, "truncated_p", "", RB_HIGHER, p->p_trunc);
}

void seval_paired_checks(const seval_paired *p, double alpha, vrecord *r) {
  rec_param_num(r, "alpha", alpha);
  rec_check_add(r, "not_worse_than_reference", !p->worse);
  rec_check_add(r, "not_more_truncated_than_reference", !p->more_truncated);
  rec_check_add(r, "context_as_reference", !p->lost_context);
}

void seval_paired_print(const seval_paired *p, double alpha, const char *items, const char *score, const char *answers) {
  printf("\npaired, candidate - reference, over the %d %s both answered: mean %s difference %+.4f, %d differ, "
         "one-sided sign-flip p %.3g (alpha %g)%s\n",
         p->n_paired, items, score, p->mean_diff, p->n_differ, p->p_worse, alpha, p->worse ? ": significantly worse" : "");
  printf("truncated at max_tokens: candidate %d, reference %d%s, one-sided p %.3g%s\n", p->trunc_c, p->trunc_r, answers,
         p->p_trunc, p->more_truncated ? ": significantly more" : "");
}

void seval_paired_print_fails(const seval_paired *p, const char *path, double alpha, const char *score) {
  if (p->worse)
    printf("FAIL %s: significantly worse than its reference (mean %s difference %+.4f, p %.3g < %g)\n", path, score,
           p->mean_diff, p->p_worse, alpha);
  if (p->more_truncated)
    printf("FAIL %s: truncated %d answers at max_tokens where the reference truncated %d (p %.3g < %g)\n", path,
           p->trunc_c, p->trunc_r, p->p_trunc, alpha);
  if (p->lost_context) printf("FAIL %s: refused prompts as longer than its context that the reference answered\n", path);
}

vstatus seval_rows_each(const char *file, long limit, seval_row_fn row, void *ctx, int *n) {
  *n = 0;
  FILE *f = fopen(file, "rb");
  if (!f) return VERR("--dataset %s: cannot read: %s", file, strerror(errno));
  char *buf = NULL;
  size_t cap = 0;
  ssize_t got;
  long line = 0;
  vstatus s = V_OK;
  off_t at = 0;
  while ((limit <= 0 || *n < limit) && (got = getline(&buf, &cap, f)) >= 0) {
    line++;
    const off_t start = at;
    at += got;
    size_t len = (size_t)got;
    if (len && buf[len - 1] == '\n') buf[--len] = 0;
    if (strspn(buf, " \t\r") >= len) continue;
    if (memchr(buf, 0, len)) { s = VERR("%s:%ld: a NUL byte in the line", file, line); break; }
    if ((s = row(ctx, buf, len, line, start))) break;
    (*n)++;
  }
  if (!s && ferror(f)) s = VERR("%s: read error after line %ld", file, line);
  if (!s && *n == 0) s = VERR("--dataset %s: no rows (one JSON object per line)", file);
  free(buf);
  fclose(f);
  return s;
}
