/* Request bodies of /v1/completions and /v1/chat/completions from a served_gen
 * (suites/served/served_text.h): each parameter is sent only when set, so the server's default
 * applies to the rest. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites/served/served_text.h"

served_gen served_gen_default(void) {
  return (served_gen){.max_tokens = SERVED_UNSET, .min_tokens = SERVED_UNSET, .temperature = NAN, .top_p = NAN,
                      .top_k = SERVED_UNSET, .n = SERVED_UNSET, .ignore_eos = SERVED_UNSET,
                      .logprobs = SERVED_UNSET, .prompt_logprobs = SERVED_UNSET};
}

/* The structured-output members of g added to o. Error names the field. */
static vstatus add_structured(const served_gen *g, cJSON *o) {
  if (g->structured == SERVED_STRUCT_NONE) return V_OK;
  if (!g->struct_spec) return VERR("served request: structured output asked without struct_spec");
  cJSON *spec = NULL; /* the spec as JSON: the schema object, the choices array, or the regex string */
  if (g->structured == SERVED_STRUCT_JSON) {
    spec = cJSON_Parse(g->struct_spec);
    if (!cJSON_IsObject(spec)) {
      cJSON_Delete(spec);
      return VERR("served request: struct_spec: the JSON schema is not a JSON object: %.80s", g->struct_spec);
    }
  } else if (g->structured == SERVED_STRUCT_CHOICE) {
    spec = cJSON_Parse(g->struct_spec);
    const cJSON *e;
    bool strings = cJSON_IsArray(spec) && cJSON_GetArraySize(spec) > 0;
    cJSON_ArrayForEach(e, spec) strings = strings && cJSON_IsString(e);
    if (!strings) {
      cJSON_Delete(spec);
      return VERR("served request: struct_spec: the choices are not a JSON array of strings: %.80s", g->struct_spec);
    }
  } else if (g->structured == SERVED_STRUCT_REGEX) {
    spec = cJSON_CreateString(g->struct_spec);
  } else {
    return VERR("served request: structured: unknown kind %d", (int)g->structured);
  }
  if (!spec) return VERR("served request: out of memory");
  static const char *const vllm_key[] = {"", "json", "regex", "choice"};
  static const char *const guided_key[] = {"", "guided_json", "guided_regex", "guided_choice"};
  switch (g->struct_style) {
  case SERVED_STRUCT_VLLM: {
    cJSON *so = cJSON_AddObjectToObject(o, "structured_outputs");
    cJSON_AddItemToObject(so, vllm_key[g->structured], spec);
    return V_OK;
  }
  case SERVED_STRUCT_GUIDED:
    cJSON_AddItemToObject(o, guided_key[g->structured], spec);
    return V_OK;
  case SERVED_STRUCT_OPENAI: {
    if (g->structured != SERVED_STRUCT_JSON) {
      cJSON_Delete(spec);
      return VERR("served request: response_format takes a JSON schema only (regex and choice: structured_outputs)");
    }
    cJSON *rf = cJSON_AddObjectToObject(o, "response_format");
    cJSON_AddStringToObject(rf, "type", "json_schema");
    cJSON *js = cJSON_AddObjectToObject(rf, "json_schema");
    cJSON_AddStringToObject(js, "name", "vouch");
    cJSON_AddItemToObject(js, "schema", spec);
    cJSON_AddBoolToObject(js, "strict", true);
    return V_OK;
  }
  }
  cJSON_Delete(spec);
  return VERR("served request: struct_style: unknown style %d", (int)g->struct_style);
}

/* What both endpoints take, added to o. Error names the field. */
static vstatus add_common(const served_gen *g, cJSON *o, bool chat) {
  if (g->max_tokens != SERVED_UNSET) cJSON_AddNumberToObject(o, "max_tokens", g->max_tokens);
  if (g->min_tokens != SERVED_UNSET) cJSON_AddNumberToObject(o, "min_tokens", g->min_tokens);
  if (!isnan(g->temperature)) cJSON_AddNumberToObject(o, "temperature", g->temperature);
  if (!isnan(g->top_p)) cJSON_AddNumberToObject(o, "top_p", g->top_p);
  if (g->top_k != SERVED_UNSET) cJSON_AddNumberToObject(o, "top_k", g->top_k);
  if (g->has_seed) {
    if (g->seed >= (1ull << 53)) return VERR("served request: seed %llu is not exact in JSON (2^53 or more)",
                                             (unsigned long long)g->seed);
    cJSON_AddNumberToObject(o, "seed", (double)g->seed);
  }
  if (g->n != SERVED_UNSET) cJSON_AddNumberToObject(o, "n", g->n);
  if (g->n_stop > 0) {
    cJSON *a = cJSON_AddArrayToObject(o, "stop");
    for (int i = 0; i < g->n_stop; i++) {
      if (!g->stop[i]) return VERR("served request: stop[%d] is NULL", i);
      cJSON_AddItemToArray(a, cJSON_CreateString(g->stop[i]));
    }
  }
  if (g->n_stop_token_ids > 0) {
    cJSON *a = cJSON_AddArrayToObject(o, "stop_token_ids");
    for (int i = 0; i < g->n_stop_token_ids; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(g->stop_token_ids[i]));
  }
  if (g->ignore_eos != SERVED_UNSET) cJSON_AddBoolToObject(o, "ignore_eos", g->ignore_eos != 0);
  if (g->logprobs != SERVED_UNSET) {
    if (g->logprobs < 0) return VERR("served request: logprobs %d is negative", g->logprobs);
    if (chat) {
      cJSON_AddBoolToObject(o, "logprobs", true);
      if (g->logprobs > 0) cJSON_AddNumberToObject(o, "top_logprobs", g->logprobs);
    } else {
      cJSON_AddNumberToObject(o, "logprobs", g->logprobs);
    }
  }
  if (g->prompt_logprobs != SERVED_UNSET) cJSON_AddNumberToObject(o, "prompt_logprobs", g->prompt_logprobs);
  if (g->return_token_ids) cJSON_AddBoolToObject(o, "return_token_ids", true);
  if (g->tokens_as_ids) cJSON_AddBoolToObject(o, "return_tokens_as_token_ids", true);
  VTRY(add_structured(g, o));
  if (g->stream) {
    cJSON_AddBoolToObject(o, "stream", true);
    cJSON_AddBoolToObject(cJSON_AddObjectToObject(o, "stream_options"), "include_usage", true);
  }
  if (g->extra) {
    cJSON *ex = cJSON_Parse(g->extra), *f;
    if (!cJSON_IsObject(ex)) {
      cJSON_Delete(ex);
      return VERR("served request: extra is not a JSON object: %.80s", g->extra);
    }
    cJSON_ArrayForEach(f, ex) {
      cJSON_DeleteItemFromObjectCaseSensitive(o, f->string);
      cJSON_AddItemToObject(o, f->string, cJSON_Duplicate(f, true));
    }
    cJSON_Delete(ex);
  }
  return V_OK;
}

/* o as unformatted text into *body; frees o. */
static vstatus finish(cJSON *o, vstatus s, char **body) {
  *body = s == V_OK ? cJSON_PrintUnformatted(o) : NULL;
  cJSON_Delete(o);
  if (s == V_OK && !*body) return VERR("served request: out of memory");
  return s;
}

vstatus served_build_completion(const served_gen *g, char **body) {
  *body = NULL;
  if (!g->model || !g->model[0]) return VERR("served request: no model");
  if (g->messages) return VERR("served request: messages go to /v1/chat/completions, not /v1/completions");
  if (!!g->prompt + !!g->prompt_ids != 1) return VERR("served request: give the prompt as text or as token ids (one of them)");
  cJSON *o = cJSON_CreateObject();
  if (!o) return VERR("served request: out of memory");
  cJSON_AddStringToObject(o, "model", g->model);
  if (g->prompt) {
    cJSON_AddStringToObject(o, "prompt", g->prompt);
  } else {
    cJSON *p = cJSON_AddArrayToObject(o, "prompt");
    for (int i = 0; i < g->n_prompt_ids; i++) cJSON_AddItemToArray(p, cJSON_CreateNumber(g->prompt_ids[i]));
  }
  if (g->echo) cJSON_AddBoolToObject(o, "echo", true);
  return finish(o, add_common(g, o, false), body);
}

vstatus served_build_chat(const served_gen *g, char **body) {
  *body = NULL;
  if (!g->model || !g->model[0]) return VERR("served request: no model");
  if (g->prompt || g->prompt_ids) return VERR("served request: a chat request takes messages, not a prompt");
  if (g->echo) return VERR("served request: echo is a /v1/completions parameter");
  if (!cJSON_IsArray(g->messages)) return VERR("served request: messages is not a JSON array");
  cJSON *o = cJSON_CreateObject();
  if (!o) return VERR("served request: out of memory");
  cJSON_AddStringToObject(o, "model", g->model);
  cJSON_AddItemToObject(o, "messages", cJSON_Duplicate(g->messages, true));
  return finish(o, add_common(g, o, true), body);
}
