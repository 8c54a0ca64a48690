/* Structured output for `vouch features --ref-server` (suites/features/features_text_checks.h): a
 * small JSON schema, a regular expression and a choice, each asked of both servers; the answer must
 * validate here (JSON parse + the schema's keys and types; POSIX regcomp over the whole text; choice
 * membership). Decided against the reference: when its answer does not validate either, the engine
 * does not do the feature and the check is undecided. */
#include <cjson/cJSON.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites/features/features_text_struct.h"

/* Small enough for every engine's grammar (node-llama-cpp takes no "required": each property listed is
 * then generated, and vLLM's backends may leave one out, which the validator allows). */
static const char SCHEMA[] = "{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":\"boolean\"},"
                             "\"color\":{\"enum\":[\"red\",\"green\",\"blue\"]}},\"additionalProperties\":false}";
static const char REGEX[] = "[0-9]{3}-[a-z]{2}";
static const char CHOICES[] = "[\"yes\",\"no\",\"maybe\"]";
#define STRUCT_TOKENS 32   /* max_tokens of a structured answer */

/* True when JSON value v has the schema type name t. */
static bool has_type(const cJSON *v, const char *t) {
  if (!strcmp(t, "boolean")) return cJSON_IsBool(v);
  if (!strcmp(t, "string")) return cJSON_IsString(v);
  if (!strcmp(t, "number")) return cJSON_IsNumber(v);
  if (!strcmp(t, "integer")) return cJSON_IsNumber(v) && v->valuedouble == (double)(long long)v->valuedouble;
  if (!strcmp(t, "object")) return cJSON_IsObject(v);
  if (!strcmp(t, "array")) return cJSON_IsArray(v);
  if (!strcmp(t, "null")) return cJSON_IsNull(v);
  return false;
}

/* Validates text against a flat object schema (properties with type or enum of strings, required,
 * additionalProperties false). False with the reason in why. */
static bool valid_json(const char *text, const char *schema, char *why, size_t cap) {
  cJSON *s = cJSON_Parse(schema), *v = cJSON_Parse(text);
  bool ok = cJSON_IsObject(v);
  if (!ok) snprintf(why, cap, "not a JSON object");
  const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties"), *f, *req;
  cJSON_ArrayForEach(req, cJSON_GetObjectItemCaseSensitive(s, "required"))
    if (ok && cJSON_IsString(req) && !cJSON_GetObjectItemCaseSensitive(v, req->valuestring))
      ok = false, snprintf(why, cap, "the required key '%s' is missing", req->valuestring);
  const bool closed = cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(s, "additionalProperties"));
  const cJSON *obj = ok ? v : NULL;
  cJSON_ArrayForEach(f, obj) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(props, f->string);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "type"), *en = cJSON_GetObjectItemCaseSensitive(p, "enum");
    if (!p) {
      if (closed) ok = false, snprintf(why, cap, "the key '%.40s' is not in the schema", f->string);
      continue;
    }
    if (cJSON_IsString(t) && !has_type(f, t->valuestring))
      ok = false, snprintf(why, cap, "'%.40s' is not of type %s", f->string, t->valuestring);
    if (cJSON_IsArray(en)) {
      bool in = false;
      const cJSON *e;
      cJSON_ArrayForEach(e, en) in = in || (cJSON_IsString(e) && cJSON_IsString(f) && !strcmp(e->valuestring, f->valuestring));
      if (!in) ok = false, snprintf(why, cap, "'%.40s' is not one of its enum", f->string);
    }
    if (!ok) break;
  }
  cJSON_Delete(s);
  cJSON_Delete(v);
  return ok;
}

/* The whole text matches the POSIX extended regex re. */
static bool valid_regex(const char *text, const char *re, char *why, size_t cap) {
  char full[256];
  snprintf(full, sizeof full, "^(%s)$", re);
  regex_t rx;
  if (regcomp(&rx, full, REG_EXTENDED | REG_NOSUB)) { snprintf(why, cap, "regcomp cannot compile %.120s", full); return false; }
  const bool ok = !regexec(&rx, text, 0, NULL, 0);
  regfree(&rx);
  if (!ok) snprintf(why, cap, "does not match %.120s", full);
  return ok;
}

static bool valid_choice(const char *text, const char *choices, char *why, size_t cap) {
  cJSON *a = cJSON_Parse(choices);
  const cJSON *e;
  bool in = false;
  cJSON_ArrayForEach(e, a) in = in || (cJSON_IsString(e) && !strcmp(e->valuestring, text));
  cJSON_Delete(a);
  if (!in) snprintf(why, cap, "not one of %s", choices);
  return in;
}

/* Whether the choice validates as kind (an answer that failed or holds a NUL byte does not). */
static bool validates(const served_call *call, served_struct_kind kind, char *why, size_t cap) {
  const served_choice *ch = ft_first(call);
  if (!ch) { snprintf(why, cap, "no answer: %.150s", call->error); return false; }
  if (strlen(ch->text) != ch->text_len) { snprintf(why, cap, "the text holds a NUL byte"); return false; }
  return kind == SERVED_STRUCT_JSON ? valid_json(ch->text, SCHEMA, why, cap)
         : kind == SERVED_STRUCT_REGEX ? valid_regex(ch->text, REGEX, why, cap)
                                       : valid_choice(ch->text, CHOICES, why, cap);
}

/* Choice 0's text of a call, "(none)" when it has none. */
static const char *text_of(const served_call *call) {
  const served_choice *ch = ft_first(call);
  return ch ? ch->text : "(none)";
}

static const char *style_name(served_struct_style s) {
  return s == SERVED_STRUCT_VLLM ? "structured_outputs" : s == SERVED_STRUCT_GUIDED ? "guided_*" : "response_format";
}

vstatus ft_check_structured(ft_ctx *c, int kind, ft_result *r) {
  served_gen q = ft_greedy_gen(c);
  q.max_tokens = STRUCT_TOKENS, q.return_token_ids = false;
  q.structured = (served_struct_kind)kind;
  q.struct_spec = kind == SERVED_STRUCT_JSON ? SCHEMA : kind == SERVED_STRUCT_REGEX ? REGEX : CHOICES;
  /* auto: the first style the reference honours (vLLM's, the legacy guided_*, OpenAI's for a schema): an
   * engine may refuse a name it does not know (HTTP 4xx) or ignore it (an answer that does not validate) */
  static const served_struct_style order[] = {SERVED_STRUCT_VLLM, SERVED_STRUCT_GUIDED, SERVED_STRUCT_OPENAI};
  served_call rc = {0}, cc = {0};
  bool asked = false;
  for (int k = 0; k < 3 && !asked; k++) {
    if (!c->style_auto && order[k] != c->style) continue;
    if (order[k] == SERVED_STRUCT_OPENAI && kind != SERVED_STRUCT_JSON) continue;
    q.struct_style = order[k];
    if (k && c->style_auto) served_calls_free(&rc, 1);
    VTRY(ft_ask(c, 1, q, &rc));
    char why[200];
    asked = !c->style_auto || (rc.ok ? validates(&rc, q.structured, why, sizeof why) : !(rc.http >= 400 && rc.http < 500));
  }
  char rwhy[200] = "", cwhy[200] = "", what[160], a[64], b[64];
  snprintf(what, sizeof what, "%s %s", style_name(q.struct_style), q.struct_spec);
  if (!rc.ok) {
    if (!rc.sent) ft_set(r, FT_NOT_SUPPORTED, "the style asked (%s) does not take this kind", style_name(c->style));
    else ft_ref_failed(r, &rc, what);
  } else if (!validates(&rc, q.structured, rwhy, sizeof rwhy)) {
    ft_set(r, FT_UNDECIDED, "%s: the reference's answer %s does not validate either (%s): the engine does not do it",
           what, ft_show(text_of(&rc), a, sizeof a), rwhy);
  } else {
    VTRY(ft_ask(c, 0, q, &cc));
    const bool ok = validates(&cc, q.structured, cwhy, sizeof cwhy);
    ft_set(r, ok ? FT_PASS : FT_FAIL, "%s: the candidate's answer %s %s%s; the reference's %s validates", what,
           ft_show(text_of(&cc), a, sizeof a), ok ? "validates" : "does not validate: ",
           ok ? "" : cwhy, ft_show(text_of(&rc), b, sizeof b));
  }
  served_calls_free(&rc, 1);
  served_calls_free(&cc, 1);
  return V_OK;
}
