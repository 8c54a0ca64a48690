/* lm-eval's aime grading in C (suites/evals/aime/aime_grade.h). Each step names the Python it mirrors;
 * strings are NUL-terminated UTF-8, and every helper that builds one returns NULL on out of memory. */
#define _GNU_SOURCE
#include "suites/evals/aime/aime_grade.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dupn(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d) memcpy(d, s, n), d[n] = 0;
  return d;
}

static char *cat3(const char *a, const char *b, const char *c) {
  const size_t na = strlen(a), nb = strlen(b), nc = strlen(c);
  char *d = malloc(na + nb + nc + 1);
  if (d) memcpy(d, a, na), memcpy(d + na, b, nb), memcpy(d + na + nb, c, nc + 1);
  return d;
}

/* Python's s.replace(from, to) (non-overlapping, left to right); frees s. NULL: out of memory. */
static char *replace(char *s, const char *from, const char *to) {
  if (!s) return NULL;
  const size_t nf = strlen(from), nt = strlen(to);
  size_t k = 0;
  for (const char *p = strstr(s, from); p; p = strstr(p + nf, from)) k++;
  if (!k) return s;
  char *d = malloc(strlen(s) + k * nt - k * nf + 1), *o = d;
  if (d) {
    const char *p = s, *q;
    while ((q = strstr(p, from))) memcpy(o, p, (size_t)(q - p)), o += q - p, memcpy(o, to, nt), o += nt, p = q + nf;
    strcpy(o, p);
  }
  free(s);
  return d;
}

/* Pieces of Python's s.split(sep): occurrences + 1. */
static int pieces(const char *s, const char *sep) {
  int k = 1;
  for (const char *p = strstr(s, sep); p; p = strstr(p + strlen(sep), sep)) k++;
  return k;
}

/* Bytes of the code point at s (1 for a stray byte, 0 at the end). */
static size_t cp_bytes(const char *s) {
  const unsigned char c = (unsigned char)*s;
  size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
  if (!c) return 0;
  for (size_t i = 1; i < k; i++)
    if (((unsigned char)s[i] & 0xC0) != 0x80) return 1;
  return k;
}

/* Code points in s[n]. */
static size_t cp_len(const char *s, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i += cp_bytes(s + i), k++) {}
  return k;
}

/* fix_sqrt: "\sqrt3" -> "\sqrt{3}" (the one code point after "\sqrt"). Sets *raised (an empty piece
 * after "\sqrt": IndexError). Frees s. */
static char *fix_sqrt(char *s, bool *raised) {
  if (!s || !strstr(s, "\\sqrt")) return s;
  const char *p = strstr(s, "\\sqrt");
  char *d = dupn(s, (size_t)(p - s));
  while (d && p) {
    const char *piece = p + 5, *next = strstr(piece, "\\sqrt");
    const size_t n = next ? (size_t)(next - piece) : strlen(piece);
    if (!n) { *raised = true; break; }
    char *pc = dupn(piece, n), *nd = NULL;
    if (pc && pc[0] != '{') {
      const size_t a = cp_bytes(pc);
      char *head = dupn(pc, a);
      if (head) {
        char *t = cat3("\\sqrt{", head, "}");
        if (t) nd = cat3(d, t, pc + a);
        free(t);
      }
      free(head);
    } else if (pc) {
      nd = cat3(d, "\\sqrt", pc);
    }
    free(pc);
    free(d);
    d = nd;
    p = next;
  }
  free(s);
  if (*raised) free(d), d = NULL;
  return d;
}

/* fix_fracs: "\frac12" -> "\frac{1}{2}", "\frac1{2}" -> "\frac{1}{2}"; a piece of one code point
 * returns the string unchanged. Sets *raised (an empty piece: IndexError). Frees s. */
static char *fix_fracs(char *s, bool *raised) {
  if (!s) return NULL;
  const char *p = strstr(s, "\\frac");
  if (!p) return s;
  char *d = dupn(s, (size_t)(p - s));
  while (d && p) {
    const char *piece = p + 5, *next = strstr(piece, "\\frac");
    const size_t n = next ? (size_t)(next - piece) : strlen(piece);
    char *pc = dupn(piece, n), *nd = NULL;
    if (!pc) { free(d); d = NULL; break; }
    if (!n) { *raised = true; free(pc); break; }
    if (pc[0] == '{') {
      nd = cat3(d, "\\frac", pc);
    } else if (cp_len(pc, n) < 2) {
      free(pc);
      free(d);
      return s; /* Python: return string (the one fix_fracs was given) */
    } else {
      const size_t a = cp_bytes(pc), b = cp_bytes(pc + a);
      char *ca = dupn(pc, a), *cb = dupn(pc + a, b), *mid = NULL;
      if (ca && cb) {
        if (strcmp(cb, "{")) { /* "{a}{b}" + rest */
          char *t = cat3("{", ca, "}{");
          mid = t ? cat3(t, cb, "}") : NULL;
          free(t);
        } else { /* "{a}" + b + rest */
          char *t = cat3("{", ca, "}");
          mid = t ? cat3(t, cb, "") : NULL;
          free(t);
        }
      }
      char *t = mid ? cat3(d, "\\frac", mid) : NULL;
      nd = t ? cat3(t, pc + a + b, "") : NULL;
      free(t);
      free(mid);
      free(ca);
      free(cb);
    }
    free(pc);
    free(d);
    d = nd;
    p = next;
  }
  free(s);
  if (*raised) free(d), d = NULL;
  return d;
}

/* Python's int(s) succeeds: optional whitespace, sign, ASCII digits with single '_' between digits
 * (Python also takes non-ASCII decimal digits; these count as not an integer here). *canonical: s is
 * exactly str(int(s)). */
static bool py_int(const char *s, size_t n, bool *canonical) {
  size_t i = 0, j = n;
  while (i < j && strchr(" \t\n\r\f\v", s[i])) i++;
  while (j > i && strchr(" \t\n\r\f\v", s[j - 1])) j--;
  const size_t start = i;
  if (i < j && (s[i] == '+' || s[i] == '-')) i++;
  const size_t digits = i;
  bool prev_digit = false;
  for (; i < j; i++) {
    if (s[i] >= '0' && s[i] <= '9') prev_digit = true;
    else if (s[i] == '_' && prev_digit && i + 1 < j && s[i + 1] >= '0' && s[i + 1] <= '9') prev_digit = false;
    else return false;
  }
  if (digits == j) return false;
  bool zero = true;
  for (size_t k = digits; k < j; k++) zero &= s[k] == '0';
  *canonical = start == 0 && j == n && s[0] != '+' && !memchr(s, '_', n) &&
               !(s[digits] == '0' && j - digits > 1) && !(zero && s[0] == '-');
  return true;
}

/* fix_a_slash_b: "a/b" of canonical integers -> "\frac{a}{b}". Sets *raised (a side that int()
 * refuses: ValueError). Frees s. */
static char *fix_a_slash_b(char *s, bool *raised) {
  if (!s || pieces(s, "/") != 2) return s;
  const char *slash = strchr(s, '/');
  bool ca, cb;
  if (!py_int(s, (size_t)(slash - s), &ca) || !py_int(slash + 1, strlen(slash + 1), &cb)) {
    *raised = true;
    free(s);
    return NULL;
  }
  if (!ca || !cb) return s;
  char *a = dupn(s, (size_t)(slash - s)), *t = a ? cat3("\\frac{", a, "}{") : NULL, *d = t ? cat3(t, slash + 1, "}") : NULL;
  free(a);
  free(t);
  free(s);
  return d;
}

bool aime_strip(const char *in, char **out) {
  bool raised = false;
  char *s = dupn(in, strlen(in));
  s = replace(s, "\n", "");
  s = replace(s, "\\!", "");
  s = replace(s, "\\\\", "\\");
  s = replace(s, "tfrac", "frac");
  s = replace(s, "dfrac", "frac");
  s = replace(s, "\\left", "");
  s = replace(s, "\\right", "");
  s = replace(s, "^{\\circ}", "");
  s = replace(s, "^\\circ", "");
  s = replace(s, "\\$", "");
  if (s && strstr(s, "\\text{ ")) { /* remove_right_units: exactly one "\text{ " (assert), keep what precedes */
    if (pieces(s, "\\text{ ") != 2) { free(s); *out = NULL; return false; }
    *strstr(s, "\\text{ ") = 0;
  }
  s = replace(s, "\\%", "");
  s = replace(s, " .", " 0.");
  s = replace(s, "{.", "{0.");
  if (s && !s[0]) { *out = s; return true; }
  if (s && s[0] == '.') { char *t = cat3("0", s, ""); free(s); s = t; }
  if (s && pieces(s, "=") == 2) { /* "k = v" -> " v" when the left side is at most 2 code points */
    const char *eq = strchr(s, '=');
    if (cp_len(s, (size_t)(eq - s)) <= 2) { char *t = cat3(eq + 1, "", ""); free(s); s = t; }
  }
  s = fix_sqrt(s, &raised);
  s = replace(s, " ", "");
  if (!raised) s = fix_fracs(s, &raised);
  if (s && !strcmp(s, "0.5")) { free(s); s = cat3("\\frac{1}{2}", "", ""); }
  if (!raised) s = fix_a_slash_b(s, &raised);
  if (raised) { free(s); *out = NULL; return false; }
  *out = s;
  return true;
}

vstatus aime_equiv(const char *answer, const char *target, bool *eq) {
  char *a = NULL, *t = NULL;
  const bool ok_a = aime_strip(answer, &a), ok_t = ok_a && aime_strip(target, &t);
  if ((ok_a && !a) || (ok_t && !t)) { free(a); free(t); return VERR("aime grading: out of memory"); }
  *eq = ok_a && ok_t ? !strcmp(a, t) : !strcmp(answer, target); /* is_equiv: on an exception, raw strings */
  free(a);
  free(t);
  return V_OK;
}

/* The last occurrence of needle in s[n], NULL when none. */
static const char *last_of(const char *s, size_t n, const char *needle) {
  const size_t k = strlen(needle);
  const char *last = NULL;
  for (const char *p = memmem(s, n, needle, k); p; p = memmem(p + 1, n - (size_t)(p + 1 - s), needle, k)) last = p;
  return last;
}

vstatus aime_extract(const char *r, size_t len, char **out, bool *boxed) {
  *out = NULL;
  *boxed = false;
  const char *d1 = memchr(r, '$', len), *d2 = last_of(r, len, "$");
  const char *from = r, *to = r + len; /* answer: the response, or between its first and last '$' */
  if (d1 && d2 != d1) from = d1 + 1, to = d2;
  const char *sp = last_of(r, len, "\\boxed ");
  if (sp) { /* "\boxed " + the text after the last "\boxed " up to its first '$' */
    from = sp + 7;
    const char *dol = memchr(from, '$', (size_t)(r + len - from));
    to = dol ? dol : r + len;
    *boxed = true;
  } else {
    const char *idx = last_of(r, len, "\\boxed");
    if (!idx) idx = last_of(r, len, "\\fbox");
    const char *close = NULL;
    int open = 0;
    for (const char *p = idx; p && p < r + len && !close; p++) {
      if (*p == '{') open++;
      if (*p == '}' && --open == 0) close = p;
    }
    if (close && close - idx >= 7 && !strncmp(idx, "\\boxed{", 7)) from = idx + 7, to = close, *boxed = true;
  }
  *out = dupn(from, (size_t)(to - from));
  return *out ? V_OK : VERR("aime grading: out of memory");
}

vstatus aime_grade_response(const char *response, size_t len, long long target, aime_grade *g) {
  memset(g, 0, sizeof *g);
  char *a, *norm = NULL, tt[32];
  VTRY(aime_extract(response, len, &a, &g->boxed));
  snprintf(tt, sizeof tt, "%lld", target);
  vstatus s = aime_equiv(a, tt, &g->correct);
  if (!s && aime_strip(a, &norm) && norm) snprintf(g->answer, sizeof g->answer, "%s", norm);
  else if (!s) snprintf(g->answer, sizeof g->answer, "%s", a);
  free(norm);
  free(a);
  return s;
}
