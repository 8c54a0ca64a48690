/* The MRCR grader (suites/evals/mrcr/grade.h): SequenceMatcher ratios whose value is known by
 * hand (empty, disjoint, identical, difflib's documented examples, the autojunk boundary at
 * len(b) 199/200/201/300, popular elements recovered by extension, ties in the longest match,
 * code points not bytes), the prefix rule, bad UTF-8 as an error value.
 *
 * Hidden mode for tests/cli/test_mrcr_grade_python.sh:
 *   test_mrcr_grade --pairs FILE
 * FILE holds records "<bytes of a> <bytes of b>\n" followed by a's then b's UTF-8 bytes. For each
 * record it prints two lines: the ratio (%.17g), then the matching blocks "i j n ..." (the closing
 * one included); or one line "error <message>" when the grader refused the pair. Exit 0 when the
 * file was read whole, 2 when it is malformed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites/evals/mrcr/grade.h"
#include "tests/harness.h"

/* mrcr_ratio of two NUL-terminated strings as a value; -1 when it failed */
static double R(const char *a, const char *b) {
  double x = -1;
  if (mrcr_ratio(a, strlen(a), b, strlen(b), &x) != V_OK) return -1;
  return x;
}

/* mrcr_grade as a value; -1 when it failed */
static double G(const char *resp, const char *ans, const char *pfx) {
  double x = -1;
  if (mrcr_grade(resp, ans, pfx, &x) != V_OK) return -1;
  return x;
}

/* A new string: k distinct two-byte characters U+0100.. (each once), then `tail`. */
static char *distinct_then(int k, const char *tail) {
  size_t tl = strlen(tail);
  char *s = malloc(2 * (size_t)k + tl + 1);
  for (int i = 0; i < k; i++) {
    unsigned cp = 0x100u + (unsigned)i;
    s[2 * i] = (char)(0xC0 | (cp >> 6));
    s[2 * i + 1] = (char)(0x80 | (cp & 0x3F));
  }
  memcpy(s + 2 * k, tail, tl + 1);
  return s;
}

/* The hidden cross-check mode: see the header comment. */
static int pairs_mode(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) { fprintf(stderr, "%s: cannot open\n", path); return 2; }
  size_t la, lb;
  int rc = 0;
  while (fscanf(f, "%zu %zu", &la, &lb) == 2) {
    if (fgetc(f) != '\n') { fprintf(stderr, "%s: record header lacks its newline\n", path); rc = 2; break; }
    char *a = malloc(la + 1), *b = malloc(lb + 1);
    if (!a || !b || fread(a, 1, la, f) != la || fread(b, 1, lb, f) != lb) {
      fprintf(stderr, "%s: record shorter than its header says\n", path);
      free(a); free(b);
      rc = 2;
      break;
    }
    double x;
    mrcr_block *bl = NULL;
    size_t nbl = 0;
    if (mrcr_ratio(a, la, b, lb, &x) != V_OK || mrcr_matching_blocks(a, la, b, lb, &bl, &nbl) != V_OK) {
      printf("error %s\n", verr_msg());
    } else {
      printf("%.17g\n", x);
      for (size_t q = 0; q < nbl; q++) printf("%s%zu %zu %zu", q ? " " : "", bl[q].i, bl[q].j, bl[q].n);
      printf("\n");
    }
    free(bl);
    free(a);
    free(b);
  }
  if (rc == 0 && !feof(f)) { fprintf(stderr, "%s: bad record header\n", path); rc = 2; }
  fclose(f);
  return rc;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--pairs") == 0) return pairs_mode(argv[2]);

  /* trivial cases; Python gives 1.0 for two empty strings (T = 0) */
  CHECK(R("", "") == 1.0, "both empty -> 1.0, got %.17g", R("", ""));
  CHECK(R("", "abc") == 0.0 && R("abc", "") == 0.0, "one empty -> 0");
  CHECK(R("abc", "xyz") == 0.0, "disjoint -> 0");
  CHECK(R("hello world", "hello world") == 1.0, "identical -> 1");
  /* difflib's documented examples */
  CHECK(R("abcd", "bcde") == 0.75, "abcd/bcde -> 0.75, got %.17g", R("abcd", "bcde"));
  CHECK(R(" abcd", "abcd abcd") == 10.0 / 14, "' abcd'/'abcd abcd' -> 10/14, got %.17g", R(" abcd", "abcd abcd"));
  mrcr_block *bl = NULL;
  size_t nbl = 0;
  CHECK_OK(mrcr_matching_blocks(" abcd", 5, "abcd abcd", 9, &bl, &nbl));
  CHECK(nbl == 2 && bl[0].i == 0 && bl[0].j == 4 && bl[0].n == 5 && bl[1].i == 5 && bl[1].j == 9 && bl[1].n == 0,
        "' abcd'/'abcd abcd' blocks (0,4,5) (5,9,0)");
  free(bl);
  /* a NUL byte is an element */
  double x = -1;
  CHECK_OK(mrcr_ratio("a\0b", 3, "a\0c", 3, &x));
  CHECK(x == 4.0 / 6, "'a\\0b'/'a\\0c' -> 4/6, got %.17g", x);

  /* ties in the longest match: the earliest in a wins, then the earliest in b. In 'cbaab' vs 'bb'
   * the first 'b' of a against the first 'b' of b leaves 'aab' vs 'b' to match again (M = 2);
   * taking b's second 'b', or a's last 'b', would end at M = 1 */
  CHECK(R("cbaab", "bb") == 4.0 / 7, "tie, earliest in b: got %.17g want 4/7", R("cbaab", "bb"));
  /* 'xy' (earliest in a) and 'ab' tie at length 2; 'xy' leaves 'Qab' vs 'Q' (M = 3), 'ab' nothing */
  CHECK(R("xyQab", "abQxyQ") == 6.0 / 11, "tie, earliest in a: got %.17g want 6/11", R("xyQab", "abQxyQ"));
  /* three ties of length 1; the first, (0, 0), leaves 'ab' vs 'ca' to match again (M = 2); the
   * last, (2, 0), leaves nothing */
  CHECK(R("bab", "bca") == 4.0 / 6, "tie, not the last one: got %.17g want 4/6", R("bab", "bca"));
  CHECK_OK(mrcr_matching_blocks("cbaab", 5, "bb", 2, &bl, &nbl));
  CHECK(nbl == 3 && bl[0].i == 1 && bl[0].j == 0 && bl[0].n == 1 && bl[1].i == 4 && bl[1].j == 1 && bl[1].n == 1,
        "cbaab/bb blocks (1,0,1) (4,1,1) (5,2,0)");
  free(bl);

  /* the autojunk boundary: the heuristic needs len(b) >= 200; then a code point occurring more
   * than len(b)/100 + 1 times is dropped from b's index. 'aaaa' at the end of b matches only
   * while 'a' is indexed (at b's start, extension would recover it: see below) */
  char *b199 = distinct_then(195, "aaaa"), *b200 = distinct_then(196, "aaaa"), *b201 = distinct_then(197, "aaaa");
  CHECK(R("aaaa", b199) == 8.0 / 203, "len(b) 199, 'a' x4: no heuristic -> 8/203, got %.17g", R("aaaa", b199));
  CHECK(R("aaaa", b200) == 0.0, "len(b) 200, 'a' x4 > 3: popular -> 0, got %.17g", R("aaaa", b200));
  CHECK(R("aaaa", b201) == 0.0, "len(b) 201, 'a' x4 > 3: popular -> 0, got %.17g", R("aaaa", b201));
  char *c200 = distinct_then(197, "aaa"), *c201 = distinct_then(198, "aaa");
  CHECK(R("aaa", c200) == 6.0 / 203, "len(b) 200, 'a' x3 = 3: indexed -> 6/203, got %.17g", R("aaa", c200));
  CHECK(R("aaa", c201) == 6.0 / 204, "len(b) 201, 'a' x3 = 3: indexed -> 6/204, got %.17g", R("aaa", c201));
  char *d300 = distinct_then(296, "aaaa"), *e300 = distinct_then(295, "aaaaa");
  CHECK(R("aaaa", d300) == 8.0 / 304, "len(b) 300, 'a' x4 = 300/100+1: indexed -> 8/304, got %.17g", R("aaaa", d300));
  CHECK(R("aaaaa", e300) == 0.0, "len(b) 300, 'a' x5 > 4: popular -> 0, got %.17g", R("aaaaa", e300));
  /* popular elements still match as the extension of an indexed block: U+01C3 (b200's last
   * distinct character) anchors, 'aaaa' follows it in both */
  CHECK(R("\xC7\x83" "aaaa", b200) == 10.0 / 205, "extension over popular -> 10/205, got %.17g", R("\xC7\x83" "aaaa", b200));
  /* ... and before one: U+01C3 after b's popular 'aaaa' anchors, the match grows back over them */
  char *f200 = distinct_then(195, "aaaa\xC7\x83");
  CHECK(R("aaaa\xC7\x83", f200) == 10.0 / 205, "backward extension over popular -> 10/205, got %.17g",
        R("aaaa\xC7\x83", f200));
  free(f200);
  /* only b is looked at: with the long string as a nothing is popular */
  CHECK(R(b200, "aaaa") == 8.0 / 204, "swapped -> 8/204, got %.17g", R(b200, "aaaa"));
  /* everything popular: no indexed match at all, and the empty match at (0, 0) grows to the whole */
  char ab[1001];
  for (int i = 0; i < 1000; i++) ab[i] = "ab"[i & 1];
  ab[1000] = 0;
  CHECK(R(ab, ab) == 1.0, "'abab...' x1000 vs itself -> 1.0 through extension");
  free(b199); free(b200); free(b201); free(c200); free(c201); free(d300); free(e300);

  /* code points, not bytes: e-acute and e-diaeresis share their lead byte 0xC3 */
  CHECK(R("\xC3\xA9" "a", "\xC3\xAB" "a") == 0.5, "'ea' with accents -> 0.5 (bytes would give 2/3), got %.17g",
        R("\xC3\xA9" "a", "\xC3\xAB" "a"));
  CHECK(R("\xC3\xA9", "e\xCC\x81") == 0.0, "precomposed vs decomposed: no normalization -> 0");
  CHECK(R("\xF0\x9F\x98\x80x", "x") == 2.0 / 3, "an emoji is one element -> 2/3, got %.17g", R("\xF0\x9F\x98\x80x", "x"));
  /* the edges of valid UTF-8 */
  const char *edges = "\xC2\x80" "\xDF\xBF" "\xE0\xA0\x80" "\xED\x9F\xBF" "\xEE\x80\x80" "\xEF\xBF\xBF"
                      "\xF0\x90\x80\x80" "\xF4\x8F\xBF\xBF";
  CHECK(R(edges, edges) == 1.0 && R(edges, "\xF4\x8F\xBF\xBF") == 2.0 / 9, "valid edges U+0080..U+10FFFF: 8 elements");

  /* bad UTF-8: an error value naming the string and the byte */
  const char *bad[] = {"\x80", "\xC0\x80", "\xC1\xBF", "\xE0\x9F\xBF", "\xED\xA0\x80", "\xF0\x8F\xBF\xBF",
                       "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\xFF", "\xE2\x82", "\xC3", "\xC3\x28"};
  for (size_t q = 0; q < sizeof bad / sizeof *bad; q++) {
    char s[16];
    snprintf(s, sizeof s, "ok%s", bad[q]);
    x = 42;
    vstatus st = mrcr_ratio("ok", 2, s, strlen(s), &x);
    CHECK(st == V_ERR && x == 42 && strstr(verr_msg(), "b: invalid UTF-8 at byte 2"), "bad UTF-8 #%zu in b: %d '%s'", q,
          (int)st, verr_msg());
    st = mrcr_ratio(s, strlen(s), "ok", 2, &x);
    CHECK(st == V_ERR && strstr(verr_msg(), "a: invalid UTF-8 at byte 2"), "bad UTF-8 #%zu in a: '%s'", q, verr_msg());
    st = mrcr_grade("pfx", s, "pfx", &x);
    CHECK(st == V_ERR && x == 42 && strstr(verr_msg(), "answer: invalid UTF-8"), "bad answer #%zu: '%s'", q, verr_msg());
    st = mrcr_grade(s, "ok", "", &x);
    CHECK(st == V_ERR && strstr(verr_msg(), "response: invalid UTF-8"), "bad response #%zu: '%s'", q, verr_msg());
    st = mrcr_grade("ok", "ok", s, &x);
    CHECK(st == V_ERR && strstr(verr_msg(), "random_prefix: invalid UTF-8"), "bad prefix #%zu: '%s'", q, verr_msg());
  }
  CHECK(mrcr_grade(NULL, "a", "", &x) == V_ERR, "NULL response is an error");

  /* the prefix rule */
  CHECK(G("PFXhello", "PFXhello", "PFX") == 1.0, "prefixed, equal -> 1");
  CHECK(G("hello", "PFXhello", "PFX") == 0.0, "response without the prefix -> 0");
  CHECK(G("PFhello", "PFXhello", "PFX") == 0.0, "response with part of the prefix -> 0");
  CHECK(G("PF", "PFXhello", "PFX") == 0.0, "response shorter than the prefix -> 0");
  CHECK(G("xPFXhello", "PFXhello", "PFX") == 0.0, "prefix not at the start -> 0");
  CHECK(G("PFX", "PFX", "PFX") == 1.0, "only the prefix on both: two empty strings -> 1");
  CHECK(G("PFX", "PFXabc", "PFX") == 0.0, "only the prefix in the response -> 0");
  /* stripped from both: 'abcd' vs 'bcde' -> 0.75 (with the prefixes left on it would be 12/14) */
  CHECK(G("PFXabcd", "PFXbcde", "PFX") == 0.75, "stripped from both -> 0.75, got %.17g", G("PFXabcd", "PFXbcde", "PFX"));
  /* an answer without the prefix keeps all of it (removeprefix removes only what is there) */
  CHECK(G("PFXhello", "hello", "PFX") == 1.0, "answer lacking the prefix compared whole -> 1");
  CHECK(G("PFXhello", "xhello", "PFX") == 10.0 / 11, "answer lacking the prefix -> 10/11, got %.17g",
        G("PFXhello", "xhello", "PFX"));
  CHECK(G("PFXPFXab", "PFXab", "PFX") == 4.0 / 7, "the prefix is removed once -> 'PFXab' vs 'ab' = 4/7, got %.17g",
        G("PFXPFXab", "PFXab", "PFX"));
  CHECK(G("abcd", "bcde", "") == 0.75, "empty prefix -> plain ratio");
  /* the order of the arguments: response is a, answer is b (the junk heuristic looks at b) */
  char *b_long = distinct_then(196, "aaaa");
  const char *resp = "Zxaaaa";
  char *ans = malloc(strlen(b_long) + 3);
  sprintf(ans, "Zx%s", b_long);
  CHECK(G(resp, ans, "Zx") == 0.0, "answer is b: its popular 'a' does not match -> 0, got %.17g", G(resp, ans, "Zx"));
  CHECK(G(ans, resp, "Zx") == 8.0 / 204, "swapped roles -> 8/204, got %.17g", G(ans, resp, "Zx"));
  free(b_long);
  free(ans);
  /* a non-ASCII prefix is compared by code point */
  CHECK(G("\xC3\xA9tude", "\xC3\xA9tude", "\xC3\xA9") == 1.0, "non-ASCII prefix, equal -> 1");
  CHECK(G("\xC3\xABtude", "\xC3\xA9tude", "\xC3\xA9") == 0.0, "non-ASCII prefix, other accent -> 0");
  return test_finish();
}
