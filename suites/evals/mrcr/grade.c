/* The MRCR grader: difflib's SequenceMatcher ratio over code points, and the public prefix
 * rule (see grade.h for both, and for where the rule comes from). */
#include "suites/evals/mrcr/grade.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- UTF-8 ---- */

/* Decodes s[n] (strict UTF-8, as Python's decoder with errors='strict') into a new array of code
 * points *cps[*n_cps] (free() it; never NULL on success, also for n == 0). Fails naming `what` and
 * the byte offset of the first bad sequence, or when memory runs out. */
static vstatus utf8_decode(const char *s, size_t n, const char *what, uint32_t **cps, size_t *n_cps) {
  const unsigned char *u = (const unsigned char *)s;
  if (n > SIZE_MAX / sizeof(uint32_t)) return VERR("%s: %zu bytes, too long to decode", what, n);
  uint32_t *out = vmalloc((n ? n : 1) * sizeof *out, what);
  if (!out) return V_ERR;
  size_t k = 0, p = 0;
  while (p < n) {
    unsigned c = u[p];
    if (c < 0x80) { out[k++] = c; p++; continue; }
    int more;            /* continuation bytes that follow */
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the first continuation byte */
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) { more = 1; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) {
      more = 2; cp = c & 0x0F;
      if (c == 0xE0) lo = 0xA0;      /* below: overlong */
      else if (c == 0xED) hi = 0x9F; /* above: a surrogate U+D800..U+DFFF */
    } else if (c >= 0xF0 && c <= 0xF4) {
      more = 3; cp = c & 0x07;
      if (c == 0xF0) lo = 0x90;      /* below: overlong */
      else if (c == 0xF4) hi = 0x8F; /* above: past U+10FFFF */
    } else {
      free(out);
      return VERR("%s: invalid UTF-8 at byte %zu (lead byte 0x%02X)", what, p, c);
    }
    for (int m = 1; m <= more; m++) {
      unsigned cc = p + (size_t)m < n ? u[p + (size_t)m] : 0x100; /* 0x100: the string ended */
      unsigned l = m == 1 ? lo : 0x80, h = m == 1 ? hi : 0xBF;
      if (cc < l || cc > h) {
        free(out);
        return VERR("%s: invalid UTF-8 at byte %zu (%s)", what, p,
                    cc == 0x100 ? "truncated sequence" : "bad continuation byte");
      }
      cp = (cp << 6) | (cc & 0x3F);
    }
    out[k++] = cp;
    p += (size_t)more + 1;
  }
  *cps = out;
  *n_cps = k;
  return V_OK;
}

/* ---- SequenceMatcher ---- */

/* The state of one comparison: both sequences, b's index, and the scratch rows of the longest
 * match search. */
typedef struct {
  const uint32_t *a, *b; /* the sequences, code points */
  size_t na, nb;         /* their lengths */
  size_t *pos;           /* [nb] positions in b, grouped by code point, ascending within a group */
  size_t *grp_start;     /* [n_grp + 1] group g is pos[grp_start[g] .. grp_start[g+1]) */
  size_t *arun;          /* [na] a[i]'s group in b's index, or SIZE_MAX when a[i] is not indexed
                            (absent from b, or popular) */
  size_t *rowlen[2];     /* [nb] each: length of the match ending at (row's i, j); valid where stamped */
  uint64_t *rowtag[2];   /* [nb] each: the row tag that wrote rowlen[.][j] */
  uint64_t tag;          /* the last row tag handed out; rows alternate buffers by tag parity */
} seqm;

/* A match a[i:i+n] == b[j:j+n] (a difflib Match triple). */
typedef struct {
  size_t i, j, n;
} triple;

static int cmp_u64(const void *x, const void *y) {
  uint64_t p = *(const uint64_t *)x, q = *(const uint64_t *)y;
  return p < q ? -1 : p > q;
}

static void seqm_free(seqm *m) {
  free(m->pos);
  free(m->grp_start);
  free(m->arun);
  for (int t = 0; t < 2; t++) { free(m->rowlen[t]); free(m->rowtag[t]); }
  memset(m, 0, sizeof *m);
}

/* Builds b's index (code point -> ascending positions; popular code points dropped when
 * nb >= 200) and a's lookup into it, and the zeroed scratch rows. Fails when memory runs out or
 * b has 2^32 code points or more (positions are packed beside the code point in 64 bits). */
static vstatus seqm_init(seqm *m, const uint32_t *a, size_t na, const uint32_t *b, size_t nb) {
  memset(m, 0, sizeof *m);
  m->a = a; m->na = na; m->b = b; m->nb = nb;
  if (nb > UINT32_MAX) return VERR("b: %zu code points, more than the grader indexes (2^32 - 1)", nb);
  size_t nb1 = nb ? nb : 1, na1 = na ? na : 1;
  uint64_t *keys = vmalloc(nb1 * sizeof *keys, "mrcr: b's index");
  m->pos = vmalloc(nb1 * sizeof *m->pos, "mrcr: b's index");
  m->grp_start = vmalloc((nb + 1) * sizeof *m->grp_start, "mrcr: b's index");
  m->arun = vmalloc(na1 * sizeof *m->arun, "mrcr: a's lookup");
  for (int t = 0; t < 2; t++) {
    m->rowlen[t] = vcalloc(nb1, sizeof *m->rowlen[t], "mrcr: match rows");
    m->rowtag[t] = vcalloc(nb1, sizeof *m->rowtag[t], "mrcr: match rows");
  }
  if (!keys || !m->pos || !m->grp_start || !m->arun || !m->rowlen[0] || !m->rowlen[1] || !m->rowtag[0] ||
      !m->rowtag[1]) {
    free(keys);
    seqm_free(m);
    return V_ERR;
  }
  for (size_t j = 0; j < nb; j++) keys[j] = (uint64_t)b[j] << 32 | j;
  qsort(keys, nb, sizeof *keys, cmp_u64);
  /* groups of equal code points, in code point order; a popular one is kept as an empty group,
   * so an a[i] equal to it finds no position */
  uint32_t *grp_cp = vmalloc(nb1 * sizeof *grp_cp, "mrcr: b's index");
  if (!grp_cp) { free(keys); seqm_free(m); return V_ERR; }
  size_t n_grp = 0, w = 0;
  const size_t ntest = nb / 100 + 1; /* more occurrences than this: popular */
  for (size_t s = 0; s < nb;) {
    size_t e = s;
    uint32_t cp = (uint32_t)(keys[s] >> 32);
    while (e < nb && (uint32_t)(keys[e] >> 32) == cp) e++;
    grp_cp[n_grp] = cp;
    m->grp_start[n_grp] = w;
    if (!(nb >= 200 && e - s > ntest))
      for (size_t q = s; q < e; q++) m->pos[w++] = (size_t)(keys[q] & 0xFFFFFFFFu);
    n_grp++;
    s = e;
  }
  m->grp_start[n_grp] = w;
  free(keys);
  for (size_t i = 0; i < na; i++) {
    size_t lo = 0, hi = n_grp; /* binary search for a[i] among the distinct code points */
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      if (grp_cp[mid] < a[i]) lo = mid + 1; else hi = mid;
    }
    m->arun[i] = lo < n_grp && grp_cp[lo] == a[i] && m->grp_start[lo + 1] > m->grp_start[lo] ? lo : SIZE_MAX;
  }
  free(grp_cp);
  return V_OK;
}

/* difflib's find_longest_match(alo, ahi, blo, bhi) with isjunk None: the longest block of
 * a[alo:ahi] == b[blo:bhi] made of indexed elements, found row by row over i (a row holds, for
 * each indexed j where a[i] == b[j], the length of the match ending there), the first strictly
 * longer one winning (so: earliest in a, then earliest in b); then grown by equal elements
 * before and after (popular ones included). Returns (alo, blo, 0) when neither finds anything. */
static triple longest_match(seqm *m, size_t alo, size_t ahi, size_t blo, size_t bhi) {
  size_t besti = alo, bestj = blo, bestsize = 0;
  m->tag++; /* an empty row before alo: the first row continues nothing */
  for (size_t i = alo; i < ahi; i++) {
    uint64_t tag = ++m->tag;
    size_t *cur = m->rowlen[tag & 1], *prev = m->rowlen[(tag - 1) & 1];
    uint64_t *curtag = m->rowtag[tag & 1], *prevtag = m->rowtag[(tag - 1) & 1];
    size_t g = m->arun[i];
    if (g == SIZE_MAX) continue;
    size_t lo = m->grp_start[g], hi = m->grp_start[g + 1];
    while (lo < hi) { /* first position >= blo: those before it are outside the window */
      size_t mid = lo + (hi - lo) / 2;
      if (m->pos[mid] < blo) lo = mid + 1; else hi = mid;
    }
    for (size_t q = lo, end = m->grp_start[g + 1]; q < end; q++) {
      size_t j = m->pos[q];
      if (j >= bhi) break;
      size_t k = (j > 0 && prevtag[j - 1] == tag - 1 ? prev[j - 1] : 0) + 1;
      cur[j] = k;
      curtag[j] = tag;
      if (k > bestsize) { besti = i + 1 - k; bestj = j + 1 - k; bestsize = k; }
    }
  }
  while (besti > alo && bestj > blo && m->a[besti - 1] == m->b[bestj - 1]) { besti--; bestj--; bestsize++; }
  while (besti + bestsize < ahi && bestj + bestsize < bhi && m->a[besti + bestsize] == m->b[bestj + bestsize])
    bestsize++;
  return (triple){besti, bestj, bestsize};
}

/* A growable array of triples (the work stack, and the blocks found). */
typedef struct {
  triple *v;  /* [cap] */
  size_t n;   /* used */
  size_t cap; /* allocated */
} tvec;

/* Appends t; fails when memory runs out. */
static vstatus tvec_push(tvec *s, triple t) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 64;
    triple *v = realloc(s->v, cap * sizeof *v);
    if (!v) return VERR("mrcr: out of memory for %zu matching blocks", cap);
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = t;
  return V_OK;
}

/* difflib's get_matching_blocks before its sort: a stack of (alo, ahi, blo, bhi) windows,
 * starting with the whole of both; each popped window's longest match is kept when not empty,
 * and the window left of it, then the one right of it, pushed when both sides are non-empty.
 * The stack holds a window as two triples (alo, ahi, 0) and (blo, bhi, 0). Appends the blocks
 * to *out in the order found; fails when memory runs out. */
static vstatus raw_blocks(seqm *m, tvec *out) {
  tvec st = {0};
  vstatus s = tvec_push(&st, (triple){0, m->na, 0});
  if (s == V_OK) s = tvec_push(&st, (triple){0, m->nb, 0});
  while (s == V_OK && st.n) {
    triple bw = st.v[--st.n], aw = st.v[--st.n];
    size_t alo = aw.i, ahi = aw.j, blo = bw.i, bhi = bw.j;
    triple x = longest_match(m, alo, ahi, blo, bhi);
    if (!x.n) continue;
    s = tvec_push(out, x);
    if (s == V_OK && alo < x.i && blo < x.j) {
      s = tvec_push(&st, (triple){alo, x.i, 0});
      if (s == V_OK) s = tvec_push(&st, (triple){blo, x.j, 0});
    }
    if (s == V_OK && x.i + x.n < ahi && x.j + x.n < bhi) {
      s = tvec_push(&st, (triple){x.i + x.n, ahi, 0});
      if (s == V_OK) s = tvec_push(&st, (triple){x.j + x.n, bhi, 0});
    }
  }
  free(st.v);
  return s;
}

/* 2*M/T of the decoded sequences, as difflib's ratio(). Fails when memory runs out. */
static vstatus ratio_cps(const uint32_t *a, size_t na, const uint32_t *b, size_t nb, double *out) {
  seqm m;
  VTRY(seqm_init(&m, a, na, b, nb));
  tvec blocks = {0};
  vstatus s = raw_blocks(&m, &blocks);
  seqm_free(&m);
  if (s == V_OK) {
    size_t matched = 0;
    for (size_t q = 0; q < blocks.n; q++) matched += blocks.v[q].n;
    size_t total = na + nb;
    /* the same two operations as Python's 2.0 * matches / length, each exactly rounded */
    *out = total ? 2.0 * (double)matched / (double)total : 1.0;
  }
  free(blocks.v);
  return s;
}

vstatus mrcr_ratio(const char *a_utf8, size_t a_len, const char *b_utf8, size_t b_len, double *out) {
  if ((!a_utf8 && a_len) || (!b_utf8 && b_len)) return VERR("mrcr_ratio: NULL string with a length");
  uint32_t *a = NULL, *b = NULL;
  size_t na = 0, nb = 0;
  vstatus s = utf8_decode(a_utf8, a_len, "a", &a, &na);
  if (s == V_OK) s = utf8_decode(b_utf8, b_len, "b", &b, &nb);
  if (s == V_OK) s = ratio_cps(a, na, b, nb, out);
  free(a);
  free(b);
  return s;
}

static int cmp_triple_i(const void *x, const void *y) {
  const triple *p = x, *q = y;
  /* blocks are disjoint in a, so i alone orders them as Python's tuple sort does */
  return p->i < q->i ? -1 : p->i > q->i;
}

vstatus mrcr_matching_blocks(const char *a_utf8, size_t a_len, const char *b_utf8, size_t b_len,
                             mrcr_block **blocks, size_t *n_blocks) {
  *blocks = NULL;
  *n_blocks = 0;
  if ((!a_utf8 && a_len) || (!b_utf8 && b_len)) return VERR("mrcr_matching_blocks: NULL string with a length");
  uint32_t *a = NULL, *b = NULL;
  size_t na = 0, nb = 0;
  tvec raw = {0};
  seqm m;
  vstatus s = utf8_decode(a_utf8, a_len, "a", &a, &na);
  if (s == V_OK) s = utf8_decode(b_utf8, b_len, "b", &b, &nb);
  if (s == V_OK && (s = seqm_init(&m, a, na, b, nb)) == V_OK) {
    s = raw_blocks(&m, &raw);
    seqm_free(&m);
  }
  mrcr_block *res = NULL;
  if (s == V_OK) res = vmalloc((raw.n + 1) * sizeof *res, "mrcr: matching blocks");
  if (s == V_OK && !res) s = V_ERR;
  if (s == V_OK) {
    if (raw.n > 1) qsort(raw.v, raw.n, sizeof *raw.v, cmp_triple_i);
    size_t k = 0;
    for (size_t q = 0; q < raw.n; q++) { /* a block that continues the previous one in both joins it */
      if (k && res[k - 1].i + res[k - 1].n == raw.v[q].i && res[k - 1].j + res[k - 1].n == raw.v[q].j)
        res[k - 1].n += raw.v[q].n;
      else
        res[k++] = (mrcr_block){raw.v[q].i, raw.v[q].j, raw.v[q].n};
    }
    res[k++] = (mrcr_block){na, nb, 0};
    *blocks = res;
    *n_blocks = k;
  }
  free(raw.v);
  free(a);
  free(b);
  return s;
}

vstatus mrcr_grade(const char *response, const char *answer, const char *random_prefix, double *score) {
  if (!response || !answer || !random_prefix) return VERR("mrcr_grade: NULL response, answer or random_prefix");
  uint32_t *r = NULL, *a = NULL, *p = NULL;
  size_t nr = 0, na = 0, np = 0;
  vstatus s = utf8_decode(response, strlen(response), "response", &r, &nr);
  if (s == V_OK) s = utf8_decode(answer, strlen(answer), "answer", &a, &na);
  if (s == V_OK) s = utf8_decode(random_prefix, strlen(random_prefix), "random_prefix", &p, &np);
  if (s == V_OK) {
    if (np > nr || memcmp(r, p, np * sizeof *p) != 0) {
      *score = 0.0; /* response.startswith(prefix) is false */
    } else {
      /* removeprefix on both: the response surely has it; the answer only where it has it */
      size_t cut_a = np <= na && memcmp(a, p, np * sizeof *p) == 0 ? np : 0;
      s = ratio_cps(r + np, nr - np, a + cut_a, na - cut_a, score);
    }
  }
  free(r);
  free(a);
  free(p);
  return s;
}
