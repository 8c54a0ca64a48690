/* What the text evals over servers share (suites/evals/served_eval.h). */
#include "suites/evals/served_eval.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites/engine/record.h"

static vstatus open_one(seval_server *s, const char *url, const char *model, double timeout_s, const char *role,
                        const char *path_prefix) {
  memset(s, 0, sizeof *s);
  VTRY(served_conn_init(&s->conn, url, timeout_s));
  VTRY(served_identity_read(&s->conn, model, &s->id));
  s->role = role;
  snprintf(s->path, sizeof s->path, "%s:%.250s", path_prefix, s->id.id);
  return V_OK;
}

vstatus seval_open(const vrec_sink *sink, const char *url, const char *ref_url, const char *model, double timeout_s,
                   seval_server sv[2], int *n) {
  *n = 0;
  memset(sv, 0, 2 * sizeof *sv);
  vstatus s = open_one(&sv[0], url, model, timeout_s, ref_url ? "candidate" : "server", "server");
  if (s) { verr_prefix("--server"); return s; }
  *n = 1;
  if (ref_url) {
    if ((s = open_one(&sv[1], ref_url, model, timeout_s, "reference", "ref-server"))) {
      verr_prefix("--ref-server");
      return s;
    }
    *n = 2;
    VTRY(served_pair_check(&sv[0].id, &sv[1].id));
  }
  for (int i = 0; i < *n; i++) VTRY(served_identity_note(sink, &sv[i].id, sv[i].role));
  return V_OK;
}

void seval_close(seval_server *sv, int n) {
  for (int i = 0; i < n; i++) served_identity_free(&sv[i].id);
}

void seval_print_identity(const seval_server *s) {
  printf("%s %s: model %s (root %s, max_model_len ", s->role, s->conn.shown, s->id.id,
         s->id.has_root ? s->id.root : "not given");
  if (s->id.max_model_len) printf("%ld", s->id.max_model_len);
  else printf("not given");
  printf(", owned_by %s, version %s)\n", s->id.owned_by[0] ? s->id.owned_by : "-",
         s->id.version_raw ? s->id.version : "no /version");
}

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

/* s contains needle, ignoring case. */
static bool has_ci(const char *s, const char *needle) {
  const size_t n = strlen(needle);
  for (; *s; s++) {
    size_t k = 0;
    while (k < n && s[k] && tolower((unsigned char)s[k]) == tolower((unsigned char)needle[k])) k++;
    if (k == n) return true;
  }
  return false;
}

bool seval_past_context(const served_call *c) {
  if (c->ok || c->http != 400 || !c->err_message) return false;
  return has_ci(c->err_message, "context length") || has_ci(c->err_message, "maximum context") ||
         has_ci(c->err_message, "context size") || has_ci(c->err_message, "max_model_len");
}
