/* lm-eval's aime grading (suites/evals/aime/aime_grade.h) on known strings: each expected value is what
 * lm_eval/tasks/aime/utils.py process_results / is_equiv give on the same string (Python 3), and the
 * row reader's field names and errors (suites/evals/aime/aime_rows.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites/evals/aime/aime_grade.h"
#include "suites/evals/aime/aime_rows.h"
#include "suites/evals/served_eval.h"
#include "tests/harness.h"

typedef struct {
  const char *response;
  long long target;
  bool correct, boxed;
} grade_case;

static const grade_case GRADES[] = {
    {"so \\boxed{\\frac{1}{2}} ok", 1, false, true},          /* nested braces: the content is \frac{1}{2} */
    {"\\boxed{12} then \\boxed{34}", 34, true, true},          /* several boxes: the last wins */
    {"\\boxed{12} then \\boxed{34}", 12, false, true},
    {"\\boxed{ 042 }", 42, false, true},                       /* spaces go, the leading zero stays: "042" != "42" */
    {"\\boxed{ 42 }", 42, true, true},
    {"The answer is 42.", 42, false, false},                   /* no box: the whole answer is compared */
    {"42", 42, true, false},
    {"$42$", 42, true, false},                                 /* between the first and the last '$' */
    {"let $x=1$ so \\boxed{42}", 42, true, true},
    {"\\fbox{42}", 42, false, false},                          /* found, but remove_boxed refuses \fbox */
    {"\\boxed 42$ done", 42, true, true},                      /* "\boxed " up to the next '$' */
    {"\\boxed{42", 42, false, false},                          /* unclosed: no box */
    {"\\boxed{x = 42}", 42, true, true},                       /* "k = v" with a short left side */
    {"\\boxed{ab = 42}", 42, false, true},                     /* "ab " is 3 characters */
    {"\\boxed{\xc3\xa9 = 42}", 42, true, true},                /* "é " is 2 code points (4 bytes) */
    {"\\boxed{42^\\circ}", 42, true, true},
    {"\\boxed{\\text{42}}", 42, false, true},
    {"\\boxed{42.}", 42, false, true},
    {"\\boxed{\\sqrt}", 42, false, true},                      /* strip_string raises: raw strings compared */
    {"\\boxed{}", 42, false, true},
    {"\\boxed\n{42}", 42, false, false},                       /* not "\boxed{": refused */
    {"$\\boxed{42}$", 42, true, true},
    {"\\boxed{\\boxed{42}}", 42, true, true},                  /* the last "\boxed" is the inner one */
    {"\\boxed{4}2}", 42, false, true},
    {"}\\boxed{42}", 42, true, true},
    {"\\boxed{42}}", 42, true, true},
    {"\\boxed{-7}", -7, true, true},
    {"\\boxed{\\left(42\\right)}", 42, false, true},
    {"\\boxed{42\\%}", 42, true, true},
    {"\\boxed{42\\text{ cm}}", 42, true, true},                /* units after "\text{ " dropped */
    {"\\boxed{4\\!2}", 42, true, true},
    {"\\boxed{42/1}", 42, false, true},                        /* 42/1 -> \frac{42}{1} */
    {"\\boxed{x/2}", 42, false, true},
};

typedef struct {
  const char *a, *b;
  bool eq;
} equiv_case;

static const equiv_case EQUIVS[] = {
    {"1/2", "\\frac{1}{2}", true},     {"\\dfrac12", "\\frac{1}{2}", true}, {"0.5", "\\frac{1}{2}", true},
    {"a/2", "a/2", true},              {"\\sqrt3", "\\sqrt{3}", true},      {"\\frac1{72}", "\\frac{1}{72}", true},
    {"\\frac1", "\\frac1", true},      {"\\sqrt", "\\sqrt", true},          {"\\sqrt", "\\sqrt{}", false},
    {".5", "0.5", true},               {"01/2", "\\frac{1}{2}", false},     {"\\text{ a}\\text{ b}", "\\text{ a}\\text{ b}", true},
    {"\\text{ a}\\text{ b}", "", false}, {"1_0/2", "1_0/2", true},
};

static void test_grades(void) {
  for (size_t i = 0; i < sizeof GRADES / sizeof *GRADES; i++) {
    const grade_case *c = &GRADES[i];
    aime_grade g;
    CHECK_OK(aime_grade_response(c->response, strlen(c->response), c->target, &g));
    CHECK(g.correct == c->correct && g.boxed == c->boxed, "'%s' vs %lld: correct %d boxed %d, want %d %d", c->response,
          c->target, g.correct, g.boxed, c->correct, c->boxed);
  }
  char *a;
  bool boxed;
  CHECK_OK(aime_extract("x \\boxed{\\frac{1}{2}} y", 22, &a, &boxed));
  CHECK(!strcmp(a, "\\frac{1}{2}") && boxed, "nested braces extracted as '%s'", a);
  free(a);
  for (size_t i = 0; i < sizeof EQUIVS / sizeof *EQUIVS; i++) {
    bool eq;
    CHECK_OK(aime_equiv(EQUIVS[i].a, EQUIVS[i].b, &eq));
    CHECK(eq == EQUIVS[i].eq, "is_equiv('%s', '%s') = %d, want %d", EQUIVS[i].a, EQUIVS[i].b, eq, EQUIVS[i].eq);
  }
  char *s;
  CHECK(aime_strip("\\sqrt", &s) == false && !s, "strip_string raises on an empty piece after \\sqrt");
}

static void test_rows(void) {
  aime_row r = {0};
  const struct { const char *row; long long answer; } good[] = {
      {"{\"ID\": \"2024-I-1\", \"Problem\": \"p\", \"Solution\": \"s\", \"Answer\": 204}", 204},  /* Maxwell-Jia/AIME_2024 */
      {"{\"Year\": 1983, \"Question\": \"p\", \"Answer\": 9, \"Part\": null}", 9},             /* gneubig/aime-1983-2024 */
      {"{\"problem\": \"p\", \"answer\": \"70\", \"id\": 0}", 70},                              /* math-ai/aime25 */
      {"{\"question\": \"p\", \"answer\": \" 042 \"}", 42},
  };
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    CHECK_OK(aime_row_parse(good[i].row, "f.jsonl", 3, &r));
    CHECK(r.answer == good[i].answer && r.problem && !strcmp(r.problem, "p") && r.line == 3, "row %zu", i);
    free(r.problem);
    r.problem = NULL;
  }
  const struct { const char *row, *err; } bad[] = {
      {"[1]", "f.jsonl:7: not a JSON object"},
      {"{\"answer\": 1}", "f.jsonl:7: field 'problem': missing"},
      {"{\"problem\": \"p\", \"Problem\": \"q\", \"answer\": 1}", "f.jsonl:7: field 'problem': given twice"},
      {"{\"problem\": 3, \"answer\": 1}", "f.jsonl:7: field 'problem': not a non-empty string"},
      {"{\"problem\": \"p\"}", "f.jsonl:7: field 'answer': missing"},
      {"{\"problem\": \"p\", \"answer\": 1.5}", "f.jsonl:7: field 'answer': not an integer"},
      {"{\"Problem\": \"p\", \"Answer\": \"x12\"}", "f.jsonl:7: field 'Answer': not an integer"},
      {"{\"problem\": \"p\", \"answer\": 1e300}", "f.jsonl:7: field 'answer': not an integer"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    memset(&r, 0, sizeof r);
    CHECK(aime_row_parse(bad[i].row, "f.jsonl", 7, &r) != V_OK && strstr(verr_msg(), bad[i].err),
          "'%s': error '%s', want '%s'", bad[i].row, verr_msg(), bad[i].err);
  }
}

/* The paired rule on AIME-shaped differences: 30 items (the size of one year's set), each asked R times
 * of both builds, each answer right with the item's own chance (drawn once per run: most items near
 * 0 or 1, as real AIME solve rates are); d_i = the difference of the two builds' per-item means, in
 * steps of 1/R. A/A: both builds draw from the same chance (exchangeable): the false-alarm rate at
 * alpha 0.05 over 2000 runs stays at or below alpha within 3 standard errors, for R = 1 (0/1 items:
 * the sign test, exact) and R = 8 (the enumeration or the Monte Carlo path). */
static uint64_t lcg(uint64_t *st) { return (*st = *st * 6364136223846793005ull + 1442695040888963407ull) >> 11; }
static double unif(uint64_t *st) { return (double)lcg(st) / 9007199254740992.0; }

static void test_false_alarms(void) {
  const int runs = 2000, n = 30;
  for (int R = 1; R <= 8; R += 7) {
    uint64_t st = 777 + (uint64_t)R;
    int rej = 0, rej_shift = 0;
    double d[30], e[30];
    for (int r = 0; r < runs; r++) {
      for (int i = 0; i < n; i++) {
        const double u = unif(&st), p = u * u * (3 - 2 * u); /* smoothstep: more mass near 0 and 1 */
        int a = 0, b = 0, c = 0;
        for (int k = 0; k < R; k++) {
          a += unif(&st) < p, b += unif(&st) < p;
          c += unif(&st) < fmax(0, p - 0.15); /* a candidate 0.15 worse on every item */
        }
        d[i] = (double)(a - b) / R;
        e[i] = (double)(a - c) / R;
      }
      rej += seval_worse_p(d, n, (uint64_t)r, NULL) < 0.05;
      if (r < 400) rej_shift += seval_worse_p(e, n, (uint64_t)r, NULL) < 0.05;
    }
    const double rate = (double)rej / runs, se = sqrt(0.05 * 0.95 / runs);
    printf("aime paired rule, %d items x %d repeats: A/A false-alarm rate %.4f over %d runs (alpha 0.05, se %.4f); "
           "0.15 worse: %d of 400 caught\n", n, R, rate, runs, se, rej_shift);
    CHECK(rate <= 0.05 + 3 * se, "R %d: A/A false alarms %.4f > alpha + 3 se", R, rate);
  }
}

int main(void) {
  test_false_alarms();
  test_grades();
  test_rows();
  return test_finish();
}
