/* Structured-output constraints of vouch serve requests (runner/serve/serve_constraint.h). */
#include "runner/serve/serve_constraint.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char *param, *msg;
  size_t param_n, msg_n;
} why;

static bool bad(why *w, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool bad(why *w, const char *param, const char *fmt, ...) {
  snprintf(w->param, w->param_n, "%s", param);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(w->msg, w->msg_n, fmt, ap);
  va_end(ap);
  return false;
}

static bool present(const cJSON *j) { return j && !cJSON_IsNull(j); }

/* An integer in [lo, hi] (whole number). */
static bool int_in(const cJSON *j, double lo, double hi, int *out) {
  if (!cJSON_IsNumber(j) || j->valuedouble != floor(j->valuedouble) || j->valuedouble < lo || j->valuedouble > hi)
    return false;
  *out = (int)j->valuedouble;
  return true;
}

static const char *const NO_TOKENIZER =
    "constrains text, and this server has no tokenizer: constrain token ids with structured_outputs.choice "
    "(lists of token ids) or structured_outputs.token_dfa";

static bool parse_choice(const cJSON *c, int vocab, tdfa *d, why *w) {
  const char *P = "structured_outputs.choice";
  const int n = cJSON_IsArray(c) ? cJSON_GetArraySize(c) : -1;
  if (n < 1 || n > 256) return bad(w, P, "'%s' must be a list of 1..256 choices, each a list of token ids", P);
  int32_t **seqs = calloc((size_t)n, sizeof *seqs);
  int *lens = calloc((size_t)n, sizeof *lens);
  bool ok = seqs && lens;
  if (!ok) bad(w, P, "out of memory");
  long total = 0;
  for (int i = 0; i < n && ok; i++) {
    const cJSON *s = cJSON_GetArrayItem(c, i), *t;
    if (cJSON_IsString(s)) { ok = bad(w, P, "'%s'[%d] is a string: this server has no tokenizer, give token-id lists", P, i); break; }
    const int len = cJSON_IsArray(s) ? cJSON_GetArraySize(s) : -1;
    if (len < 1) { ok = bad(w, P, "'%s'[%d] must be a non-empty list of token ids", P, i); break; }
    if ((total += len) > SERVE_DFA_MAX_STATES) { ok = bad(w, P, "'%s' holds more than %d tokens", P, SERVE_DFA_MAX_STATES); break; }
    seqs[i] = malloc((size_t)len * sizeof **seqs);
    if (!seqs[i]) { ok = bad(w, P, "out of memory"); break; }
    lens[i] = len;
    int k = 0, v;
    cJSON_ArrayForEach(t, s) {
      if (!int_in(t, 0, vocab - 1, &v)) { ok = bad(w, P, "'%s'[%d][%d] is not a token id in [0, %d)", P, i, k, vocab); break; }
      seqs[i][k++] = v;
    }
  }
  if (ok && tdfa_choice(d, (const int32_t *const *)seqs, lens, n)) ok = bad(w, P, "out of memory");
  for (int i = 0; seqs && i < n; i++) free(seqs[i]);
  free(seqs);
  free(lens);
  return ok;
}

/* One edge object: "from", "to", and "ids" or lo/hi/mod/rem. */
static bool parse_edge(const cJSON *e, int k, int vocab, tdfa *d, why *w) {
  char P[64];
  snprintf(P, sizeof P, "structured_outputs.token_dfa.edges[%d]", k);
  if (!cJSON_IsObject(e)) return bad(w, P, "'%s' must be an object", P);
  tdfa_edge x = {.lo = 0, .hi = vocab - 1};
  const cJSON *ids = cJSON_GetObjectItemCaseSensitive(e, "ids"), *j;
  if (!int_in(cJSON_GetObjectItemCaseSensitive(e, "from"), 0, d->n_states - 1, &x.from) ||
      !int_in(cJSON_GetObjectItemCaseSensitive(e, "to"), 0, d->n_states - 1, &x.to))
    return bad(w, P, "'%s': 'from' and 'to' must be states in [0, %d)", P, d->n_states);
  cJSON_ArrayForEach(j, e) {
    static const char *known[] = {"from", "to", "ids", "lo", "hi", "mod", "rem"};
    bool found = false;
    for (size_t q = 0; q < sizeof known / sizeof *known; q++) found |= !strcmp(j->string, known[q]);
    if (!found) return bad(w, P, "'%s': unknown key '%.40s' (from, to, ids or lo/hi/mod/rem)", P, j->string);
  }
  if (present(ids)) {
    if (cJSON_GetObjectItemCaseSensitive(e, "lo") || cJSON_GetObjectItemCaseSensitive(e, "hi") ||
        cJSON_GetObjectItemCaseSensitive(e, "mod") || cJSON_GetObjectItemCaseSensitive(e, "rem"))
      return bad(w, P, "'%s': give 'ids' or lo/hi/mod/rem, not both", P);
    if (!cJSON_IsArray(ids) || cJSON_GetArraySize(ids) < 1) return bad(w, P, "'%s.ids' must be a non-empty list", P);
    int i = 0;
    cJSON_ArrayForEach(j, ids) {
      int v;
      if (!int_in(j, 0, vocab - 1, &v)) return bad(w, P, "'%s.ids'[%d] is not a token id in [0, %d)", P, i, vocab);
      if (d->n_edges >= SERVE_DFA_MAX_EDGES) return bad(w, P, "more than %d edges", SERVE_DFA_MAX_EDGES);
      x.lo = x.hi = v;
      if (tdfa_add_edge(d, x)) return bad(w, P, "out of memory");
      i++;
    }
    return true;
  }
  const cJSON *lo = cJSON_GetObjectItemCaseSensitive(e, "lo"), *hi = cJSON_GetObjectItemCaseSensitive(e, "hi");
  const cJSON *mod = cJSON_GetObjectItemCaseSensitive(e, "mod"), *rem = cJSON_GetObjectItemCaseSensitive(e, "rem");
  if ((lo && !int_in(lo, 0, vocab - 1, &x.lo)) || (hi && !int_in(hi, 0, vocab - 1, &x.hi)) || x.lo > x.hi)
    return bad(w, P, "'%s': lo <= hi must be token ids in [0, %d)", P, vocab);
  if ((mod && !int_in(mod, 1, vocab, &x.mod)) || (rem && (!mod || !int_in(rem, 0, x.mod - 1, &x.rem))))
    return bad(w, P, "'%s': 'mod' must be in [1, %d] and 'rem' in [0, mod)", P, vocab);
  if (d->n_edges >= SERVE_DFA_MAX_EDGES) return bad(w, P, "more than %d edges", SERVE_DFA_MAX_EDGES);
  if (tdfa_add_edge(d, x)) return bad(w, P, "out of memory");
  return true;
}

static bool parse_dfa(const cJSON *j, int vocab, tdfa *d, why *w) {
  const char *P = "structured_outputs.token_dfa";
  if (!cJSON_IsObject(j)) return bad(w, P, "'%s' must be an object with start, accept, edges", P);
  const cJSON *start = cJSON_GetObjectItemCaseSensitive(j, "start"), *acc = cJSON_GetObjectItemCaseSensitive(j, "accept");
  const cJSON *edges = cJSON_GetObjectItemCaseSensitive(j, "edges"), *e;
  if (!cJSON_IsArray(edges) || cJSON_GetArraySize(edges) < 1) return bad(w, P, "'%s.edges' must be a non-empty list", P);
  if (acc && !cJSON_IsArray(acc)) return bad(w, P, "'%s.accept' must be a list of states", P);
  /* states: 0 .. the largest one named */
  int n_states = 1, v;
  cJSON_ArrayForEach(e, edges) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(e, "from"), *t = cJSON_GetObjectItemCaseSensitive(e, "to");
    if (int_in(f, 0, SERVE_DFA_MAX_STATES - 1, &v) && v + 1 > n_states) n_states = v + 1;
    if (int_in(t, 0, SERVE_DFA_MAX_STATES - 1, &v) && v + 1 > n_states) n_states = v + 1;
  }
  cJSON_ArrayForEach(e, acc) if (int_in(e, 0, SERVE_DFA_MAX_STATES - 1, &v) && v + 1 > n_states) n_states = v + 1;
  int s0 = 0;
  if (present(start) && !int_in(start, 0, n_states - 1, &s0)) return bad(w, P, "'%s.start' must be a state in [0, %d)", P, n_states);
  if (tdfa_init(d, n_states, s0)) return bad(w, P, "out of memory");
  int k = 0;
  cJSON_ArrayForEach(e, acc) {
    if (!int_in(e, 0, n_states - 1, &v)) return bad(w, P, "'%s.accept'[%d] is not a state in [0, %d)", P, k, SERVE_DFA_MAX_STATES);
    d->accept[v] = true;
    k++;
  }
  k = 0;
  cJSON_ArrayForEach(e, edges) if (!parse_edge(e, k++, vocab, d, w)) return false;
  cJSON_ArrayForEach(e, j) {
    if (strcmp(e->string, "start") && strcmp(e->string, "accept") && strcmp(e->string, "edges"))
      return bad(w, P, "'%s': unknown key '%.40s' (start, accept, edges)", P, e->string);
  }
  return true;
}

bool serve_constraint_parse(const cJSON *o, int vocab, tdfa **out, char *param, size_t param_n, char *msg, size_t msg_n) {
  why w = {param, msg, param_n, msg_n};
  *out = NULL;
  static const char *guided[] = {"guided_json", "guided_regex", "guided_choice", "guided_grammar",
                                 "guided_whitespace_pattern", "guided_decoding_backend"};
  for (size_t i = 0; i < sizeof guided / sizeof *guided; i++)
    if (present(cJSON_GetObjectItemCaseSensitive(o, guided[i])))
      return bad(&w, guided[i], "'%s' is not supported (vLLM removed it in 0.12): use 'structured_outputs'", guided[i]);
  const cJSON *rf = cJSON_GetObjectItemCaseSensitive(o, "response_format");
  if (present(rf)) {
    const cJSON *type = cJSON_IsObject(rf) ? cJSON_GetObjectItemCaseSensitive(rf, "type") : NULL;
    if (!cJSON_IsString(type)) return bad(&w, "response_format", "'response_format' must be an object with a 'type'");
    const char *t = type->valuestring;
    if (!strcmp(t, "json_object") || !strcmp(t, "json_schema") || !strcmp(t, "structural_tag"))
      return bad(&w, "response_format", "'response_format' of type '%s' %s", t, NO_TOKENIZER);
    if (strcmp(t, "text")) return bad(&w, "response_format", "'response_format': unknown type '%.40s' (text, json_object, json_schema, structural_tag)", t);
  }
  const cJSON *so = cJSON_GetObjectItemCaseSensitive(o, "structured_outputs"), *e;
  if (!present(so)) return true;
  if (!cJSON_IsObject(so)) return bad(&w, "structured_outputs", "'structured_outputs' must be an object");
  const cJSON *choice = NULL, *dfa = NULL;
  int n = 0;
  cJSON_ArrayForEach(e, so) {
    char P[80];
    snprintf(P, sizeof P, "structured_outputs.%.40s", e->string);
    if (!present(e) || (cJSON_IsFalse(e) && !strcmp(e->string, "json_object"))) continue; /* unset, as vLLM's defaults */
    if (!strcmp(e->string, "choice")) choice = e, n++;
    else if (!strcmp(e->string, "token_dfa")) dfa = e, n++;
    else if (!strcmp(e->string, "json") || !strcmp(e->string, "regex") || !strcmp(e->string, "grammar") ||
             !strcmp(e->string, "json_object") || !strcmp(e->string, "structural_tag"))
      return bad(&w, P, "'%s' %s", P, NO_TOKENIZER);
    else if (!strcmp(e->string, "whitespace_pattern") || !strncmp(e->string, "disable_", 8))
      return bad(&w, P, "'%s' is an option of text constraints, which this server does not have", P);
    else return bad(&w, P, "'%s' is not a structured output vouch serve knows (choice of token-id lists, token_dfa)", P);
  }
  if (n == 0) return true;
  if (n > 1) return bad(&w, "structured_outputs", "'structured_outputs': give one constraint (choice or token_dfa)");
  tdfa *d = calloc(1, sizeof *d);
  if (!d) return bad(&w, "structured_outputs", "out of memory");
  bool ok = choice ? parse_choice(choice, vocab, d, &w) : parse_dfa(dfa, vocab, d, &w);
  /* every state the output can reach must let it go on or end: a dead end leaves nothing to sample */
  bool start_only = false;
  const int dead = ok ? tdfa_dead_end(d, vocab, &start_only) : -1;
  const char *P = choice ? "structured_outputs.choice" : "structured_outputs.token_dfa";
  if (dead == -2) ok = bad(&w, P, "out of memory");
  else if (dead >= 0) ok = bad(&w, P, "state %d is reachable, does not accept and admits no token id below %d", dead, vocab);
  else if (ok && start_only) ok = bad(&w, P, "the constraint admits only the empty output");
  /* the work of masking one step is bounded by the ids the edges admit */
  int64_t span = 0;
  for (int i = 0; ok && i < d->n_edges; i++) span += tdfa_edge_span(&d->edges[i], vocab);
  if (ok && span > SERVE_DFA_MAX_SPAN)
    ok = bad(&w, P, "the edges admit %lld token ids in all, more than %d", (long long)span, SERVE_DFA_MAX_SPAN);
  if (!ok) {
    tdfa_free(d);
    free(d);
    return false;
  }
  *out = d;
  return true;
}
