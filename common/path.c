#include "common/path.h"

#include <assert.h>
#include <stddef.h>
#include <string.h>

vstatus vstep_validate(const vstep *s, const vstep_limits *L) {
  const char *P = L->path;
  if (!s || s->n_seq < 1) return VERR("%s: step has no sequences (n_seq %d)", P, s ? s->n_seq : 0);
  if (!s->seq || !s->n_tokens || !s->start_pos || !s->tokens)
    return VERR("%s: step arrays seq/n_tokens/start_pos/tokens must not be NULL", P);
  for (int i = 0; i < s->n_seq; i++) {
    const int sl = s->seq[i];
    if (sl < 0) return VERR("%s: sequence %d: slot %d is negative", P, i, sl);
    if (sl >= L->max_seq)
      return VUNSUPPORTED("%s: sequence %d: slot %d outside the %d cache slots opened (max_seq)", P, i, sl, L->max_seq);
    if (s->n_tokens[i] < 1) return VERR("%s: sequence %d: n_tokens %d must be >= 1", P, i, s->n_tokens[i]);
    if (s->start_pos[i] < 0) return VERR("%s: sequence %d: start_pos %d is negative", P, i, s->start_pos[i]);
    if ((long long)s->start_pos[i] + s->n_tokens[i] > L->max_ctx)
      return VUNSUPPORTED("%s: sequence %d: positions [%d, %lld) past max_ctx %d (open with a larger max_ctx)", P, i,
                          s->start_pos[i], (long long)s->start_pos[i] + s->n_tokens[i], L->max_ctx);
    /* start_pos below the cached length rewinds the slot (rejected speculative drafts) */
    if (L->cached && s->start_pos[i] > L->cached[sl])
      return VERR("%s: sequence %d (slot %d) starts at position %d but its cache holds %d positions", P, i, sl,
                  s->start_pos[i], L->cached[sl]);
    for (int j = 0; j < i; j++)
      if (s->seq[j] == sl) return VERR("%s: sequences %d and %d both use slot %d (slots must be distinct)", P, j, i, sl);
  }
  const int T = vstep_total_tokens(s);
  for (int t = 0; t < T; t++)
    if (s->tokens[t] < 0 || s->tokens[t] >= L->vocab)
      return VERR("%s: token %d: id %d outside the vocabulary [0, %d)", P, t, (int)s->tokens[t], L->vocab);
  if (s->forced_experts && L->n_moe > 0) {
    const int32_t *f = s->forced_experts;
    for (long long row = 0; row < (long long)L->n_moe * T; row++)
      for (int k = 0; k < L->top_k; k++) {
        const int32_t e = f[row * L->top_k + k];
        if (e < 0 || e >= L->n_experts)
          return VERR("%s: forced_experts: MoE layer %lld token %lld: expert %d outside [0, %d)", P, row / T, row % T,
                      (int)e, L->n_experts);
        for (int k2 = 0; k2 < k; k2++)
          if (f[row * L->top_k + k2] == e)
            return VERR("%s: forced_experts: MoE layer %lld token %lld: expert %d chosen twice", P, row / T, row % T,
                        (int)e);
      }
  }
  return V_OK;
}

bool vpath_variant_has_word(const char *variant, const char *w) {
  assert(variant && w);
  const size_t n = strlen(w);
  for (const char *p = variant; *p;) {
    const char *e = strchr(p, ',');
    const size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && strncmp(p, w, n) == 0) return true;
    if (!e) break;
    p = e + 1;
  }
  return false;
}
