/* The text client's parsers and builders (suites/served/served_text.h), the server identity and pair
 * check (served_pair.h), the paired sign-flip test of the text evals (suites/evals/served_eval.h):
 * its false-alarm rate on simulated A/A pairs and its power on a planted shift, and the MRCR row
 * checks (suites/evals/mrcr/mrcr_rows.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "suites/evals/mrcr/mrcr_rows.h"
#include "suites/evals/served_eval.h"
#include "suites/served/served_pair.h"
#include "suites/served/served_text.h"
#include "tests/harness.h"

static const served_parse_opts COMPL = {0}, CHAT = {.chat = true};

/* Parses json whole; returns ok, the error in err. */
static bool parse(const char *json, const served_parse_opts *o, served_reply *r, char *err) {
  return served_reply_parse(json, o, r, err, 320);
}

/* err holds want (and is one line). */
static void want_err(const char *json, const served_parse_opts *o, const char *want) {
  served_reply r;
  char err[320];
  const bool ok = parse(json, o, &r, err);
  CHECK(!ok && strstr(err, want) && !strchr(err, '\n'), "'%.60s' -> ok %d, error '%s', want '%s'", json, ok, err, want);
  served_reply_free(&r);
}

static void test_completions(void) {
  const char *j =
      "{\"id\":\"cmpl-1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\" Paris.\",\"finish_reason\":\"stop\","
      "\"stop_reason\":null,\"token_ids\":[11,22],\"logprobs\":{\"tokens\":[\" Paris\",\".\"],\"token_logprobs\":[-0.1,-0.5],"
      "\"top_logprobs\":[{\" Paris\":-0.1,\" Lyon\":-2.5},{\".\":-0.5,\"!\":-1.0}],\"text_offset\":[0,6]}}],"
      "\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2,\"total_tokens\":9}}";
  served_reply r;
  char err[320];
  CHECK(parse(j, &COMPL, &r, err), "completions: %s", err);
  CHECK(r.n_choices == 1 && !strcmp(r.choices[0].text, " Paris.") && r.choices[0].text_len == 7, "text");
  CHECK(!strcmp(r.choices[0].finish_reason, "stop") && !strcmp(r.id, "cmpl-1") && !strcmp(r.model, "m"), "finish, id");
  CHECK(r.prompt_tokens == 7 && r.completion_tokens == 2, "usage %ld %ld", r.prompt_tokens, r.completion_tokens);
  const served_choice *c = &r.choices[0];
  CHECK(c->has_token_ids && c->n_token_ids == 2 && c->token_ids[1] == 22, "token ids");
  CHECK(c->n_lp == 2 && !strcmp(c->lp[0].token, " Paris") && c->lp[0].logprob == -0.1 && c->lp[1].text_offset == 6,
        "legacy logprobs");
  CHECK(c->lp[0].n_top == 2 && !strcmp(c->lp[0].top[1].token, " Lyon") && c->lp[0].top[1].logprob == -2.5 &&
            c->lp[0].top[1].id == -1, "top_logprobs dict in order");
  CHECK(r.n_prompt_lp == 0 && !r.prompt_lp_from, "no prompt logprobs");
  served_reply_free(&r);
  /* tokens named by id (vLLM return_tokens_as_token_ids) */
  CHECK(parse("{\"choices\":[{\"text\":\"a\",\"finish_reason\":\"length\",\"logprobs\":{\"tokens\":[\"token_id:42\"],"
              "\"token_logprobs\":[-1],\"top_logprobs\":[{\"token_id:42\":-1,\"token_id:7\":-2}]}}]}", &COMPL, &r, err),
        "ids: %s", err);
  CHECK(r.choices[0].lp[0].id == 42 && r.choices[0].lp[0].top[1].id == 7 && r.prompt_tokens == -1, "token_id:N names");
  served_reply_free(&r);
}

static void test_chat(void) {
  const char *j =
      "{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"finish_reason\":\"stop\","
      "\"logprobs\":{\"content\":[{\"token\":\"Hi\",\"logprob\":-0.25,\"bytes\":[72,105],\"top_logprobs\":["
      "{\"token\":\"Hi\",\"logprob\":-0.25,\"bytes\":[72,105]},{\"token\":\"Hello\",\"logprob\":-1.5,\"bytes\":null}]}]}},"
      "{\"index\":1,\"message\":{\"role\":\"assistant\",\"content\":null},\"finish_reason\":\"length\",\"logprobs\":null}],"
      "\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}";
  served_reply r;
  char err[320];
  CHECK(parse(j, &CHAT, &r, err), "chat: %s", err);
  CHECK(r.n_choices == 2 && !strcmp(r.choices[0].text, "Hi") && !strcmp(r.choices[1].text, "") &&
            !strcmp(r.choices[1].finish_reason, "length"), "chat choices");
  const served_pos *p = &r.choices[0].lp[0];
  CHECK(r.choices[0].n_lp == 1 && p->n_bytes == 2 && p->bytes[1] == 105 && p->n_top == 2 && p->top[1].logprob == -1.5,
        "chat logprobs");
  CHECK(served_reply_choice(&r, 1) == &r.choices[1] && !served_reply_choice(&r, 2), "choice by index");
  served_reply_free(&r);
}

/* vLLM's prompt_logprobs: null first, then dicts whose first key is the prompt's token. */
static void test_prompt_logprobs(void) {
  const char *j = "{\"choices\":[{\"index\":0,\"text\":\"x\",\"finish_reason\":\"length\",\"prompt_logprobs\":[null,"
                  "{\"5\":{\"logprob\":-3.0,\"rank\":4,\"decoded_token\":\" cat\"},\"9\":{\"logprob\":-0.5,\"rank\":1,"
                  "\"decoded_token\":\" dog\"}},{\"8\":{\"logprob\":-0.1,\"rank\":1,\"decoded_token\":\".\"}}]}]}";
  served_reply r;
  char err[320];
  CHECK(parse(j, &COMPL, &r, err), "prompt_logprobs: %s", err);
  CHECK(r.n_prompt_lp == 3 && !strcmp(r.prompt_lp_from, "prompt_logprobs"), "3 positions");
  CHECK(isnan(r.prompt_lp[0].logprob) && r.prompt_lp[0].n_top == 0, "position 0 has none");
  CHECK(r.prompt_lp[1].id == 5 && r.prompt_lp[1].logprob == -3.0 && r.prompt_lp[1].rank == 4 &&
            !strcmp(r.prompt_lp[1].token, " cat") && r.prompt_lp[1].n_top == 2, "the prompt's token is the first key");
  served_reply_free(&r);
  /* with prompt_token_ids (top level, chat) the prompt's token is found by id */
  const char *k = "{\"prompt_token_ids\":[1,9,8],\"prompt_logprobs\":[null,{\"5\":{\"logprob\":-3.0},\"9\":{\"logprob\":-0.5}},"
                  "{\"8\":{\"logprob\":-0.1}}],\"choices\":[{\"index\":0,\"message\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}";
  CHECK(parse(k, &CHAT, &r, err), "chat prompt_logprobs: %s", err);
  CHECK(r.n_prompt_token_ids == 3 && r.prompt_lp[0].id == 1 && r.prompt_lp[1].id == 9 && r.prompt_lp[1].logprob == -0.5,
        "by prompt_token_ids");
  served_reply_free(&r);
  want_err("{\"prompt_token_ids\":[1,7],\"prompt_logprobs\":[null,{\"5\":{\"logprob\":-3.0}}],\"choices\":[{\"message\":"
           "{\"content\":\"\"},\"finish_reason\":\"stop\"}]}", &CHAT, "prompt_logprobs[1]: no entry for the prompt's token 7");
  want_err("{\"prompt_logprobs\":[null,{\"x5\":{\"logprob\":-3.0}}],\"choices\":[{\"message\":{\"content\":\"\"},"
           "\"finish_reason\":\"stop\"}]}", &CHAT, "prompt_logprobs[1]: the key 'x5' is not a token id");
}

/* echo: the first usage.prompt_tokens positions of the legacy logprobs are the prompt's. */
static void test_echo(void) {
  const char *j = "{\"choices\":[{\"index\":0,\"text\":\"A B C\",\"finish_reason\":\"length\",\"logprobs\":{\"tokens\":"
                  "[\"A\",\" B\",\" C\"],\"token_logprobs\":[null,-1.0,-2.0],\"top_logprobs\":[null,{\" B\":-1.0},"
                  "{\" C\":-2.0}]}}],\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":1}}";
  const served_parse_opts echo = {.echo = true};
  served_reply r;
  char err[320];
  CHECK(parse(j, &echo, &r, err), "echo: %s", err);
  CHECK(r.n_prompt_lp == 2 && !strcmp(r.prompt_lp_from, "echo") && isnan(r.prompt_lp[0].logprob) &&
            r.prompt_lp[1].logprob == -1.0, "echo: the prompt's positions");
  CHECK(r.choices[0].n_lp == 1 && !strcmp(r.choices[0].lp[0].token, " C"), "echo: the generated position stays");
  served_reply_free(&r);
  want_err("{\"choices\":[{\"text\":\"A\",\"finish_reason\":\"length\",\"logprobs\":{\"tokens\":[\"A\"],"
           "\"token_logprobs\":[null]}}]}", &echo, "echo: usage.prompt_tokens missing");
  want_err("{\"choices\":[{\"text\":\"A\",\"finish_reason\":\"length\",\"logprobs\":{\"tokens\":[\"A\"],"
           "\"token_logprobs\":[null]}}],\"usage\":{\"prompt_tokens\":4}}", &echo, "fewer than usage.prompt_tokens 4");
}

static void test_malformed(void) {
  want_err("nope", &COMPL, "the answer is not JSON");
  want_err("[1]", &COMPL, "not a JSON object");
  want_err("{\"error\":{\"message\":\"boom\\nline\"}}", &COMPL, "the server answered an error: boom?line");
  want_err("{\"choices\":{}}", &COMPL, "choices: not a list");
  want_err("{\"choices\":[]}", &COMPL, "choices: empty");
  want_err("{\"choices\":[{\"index\":-1,\"text\":\"\"}]}", &COMPL, "choices[0].index: not an index");
  want_err("{\"choices\":[{\"index\":1e9,\"text\":\"\"}]}", &COMPL, "choices[0].index: not an index below 256");
  want_err("{\"choices\":[{\"text\":5}]}", &COMPL, "choices[0].text: not a string or null");
  want_err("{\"choices\":[{}]}", &COMPL, "choices[0].text: missing");
  want_err("{\"choices\":[{\"message\":{\"content\":[1]}}]}", &CHAT, "choices[0].message.content: not a string or null");
  want_err("{\"choices\":[{\"text\":\"\",\"finish_reason\":3}]}", &COMPL, "choices[0].finish_reason: not a string or null");
  want_err("{\"choices\":[{\"text\":\"\",\"logprobs\":{\"tokens\":[\"a\",\"b\"],\"token_logprobs\":[-1]}}]}", &COMPL,
           "choices[0].logprobs.token_logprobs: 1 entries for 2 tokens");
  want_err("{\"choices\":[{\"text\":\"\",\"logprobs\":{\"tokens\":[\"a\"],\"token_logprobs\":[\"x\"]}}]}", &COMPL,
           "choices[0].logprobs.token_logprobs[0]: not a number or null");
  want_err("{\"choices\":[{\"text\":\"\",\"logprobs\":{\"tokens\":[\"a\"],\"token_logprobs\":[-1],\"top_logprobs\":"
           "[{\"a\":\"x\"}]}}]}", &COMPL, "choices[0].logprobs.top_logprobs[0]: the value of 'a' is not a number");
  want_err("{\"choices\":[{\"message\":{\"content\":\"\"},\"logprobs\":{\"content\":[{\"token\":\"a\",\"logprob\":-1,"
           "\"bytes\":[300]}]}}]}", &CHAT, "choices[0].logprobs.content[0].bytes[0]: not a byte");
  want_err("{\"choices\":[{\"message\":{\"content\":\"\"},\"logprobs\":{\"content\":[{\"token\":\"a\"}]}}]}", &CHAT,
           "choices[0].logprobs.content[0].logprob: not a number");
  want_err("{\"choices\":[{\"text\":\"\",\"token_ids\":[1,-2]}]}", &COMPL, "choices[0].token_ids[1]: not a token id");
  want_err("{\"choices\":[{\"text\":\"\"}],\"usage\":{\"prompt_tokens\":-1}}", &COMPL, "usage.prompt_tokens: not a count");
}

/* A stream reassembles into the same reply as the whole answer, with per-event times. */
static void test_stream(void) {
  const char *sse =
      "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n"
      "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"logprobs\":{\"content\":[{\"token\":\"Hel\","
      "\"logprob\":-0.5,\"top_logprobs\":[]}]},\"finish_reason\":null}]}\r\n\r\n"
      ": a comment\n"
      "data: {\"id\":\"c\",\"choices\":[{\"index\":1,\"delta\":{\"content\":\"B\"},\"finish_reason\":\"length\"}]}\n\n"
      "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"logprobs\":{\"content\":[{\"token\":\"lo\","
      "\"logprob\":-0.25,\"top_logprobs\":[]}]},\"finish_reason\":\"stop\"}]}\n\n"
      "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":3}}\n\n"
      "data: [DONE]\n\n";
  const char *whole =
      "{\"id\":\"c\",\"choices\":[{\"index\":0,\"message\":{\"content\":\"Hello\"},\"logprobs\":{\"content\":[{\"token\":\"Hel\","
      "\"logprob\":-0.5},{\"token\":\"lo\",\"logprob\":-0.25}]},\"finish_reason\":\"stop\"},{\"index\":1,\"message\":"
      "{\"content\":\"B\"},\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":3}}";
  served_reply a, b;
  char err[320];
  CHECK(parse(whole, &CHAT, &a, err), "whole: %s", err);
  /* fed in pieces of 7 bytes, each at its own time */
  served_sse s;
  served_sse_init(&s, &CHAT);
  const size_t n = strlen(sse);
  for (size_t i = 0; i < n; i += 7) served_sse_feed(&s, sse + i, n - i < 7 ? n - i : 7, (double)i);
  CHECK(served_sse_finish(&s), "stream: %s", s.err);
  b = s.r;
  CHECK(b.n_choices == a.n_choices && !strcmp(b.choices[0].text, a.choices[0].text) &&
            !strcmp(b.choices[1].text, a.choices[1].text) && !strcmp(b.choices[0].finish_reason, "stop") &&
            !strcmp(b.choices[1].finish_reason, "length"), "stream text and finish equal the whole answer's");
  CHECK(b.choices[0].n_lp == 2 && b.choices[0].lp[1].logprob == a.choices[0].lp[1].logprob && b.prompt_tokens == 4 &&
            b.completion_tokens == 3, "stream logprobs and usage");
  CHECK(b.n_events == 5 && s.n_event_t == 3 && s.event_t[0] < s.event_t[1] && s.event_t[1] < s.event_t[2],
        "events %d, timed %d (the ones carrying text)", b.n_events, s.n_event_t);
  served_sse_free(&s);
  served_reply_free(&b);
  served_reply_free(&a);
  /* a stream cut off, without a finish reason, an error event, an event after [DONE] */
  const struct { const char *body, *want; } bad[] = {
      {"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\n\n", "without 'data: [DONE]'"},
      {"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n", "without a finish_reason"},
      {"data: {\"error\":{\"message\":\"oom\"}}\n\ndata: [DONE]\n\n", "event 1: the server answered an error: oom"},
      {"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\ndata: {}\n\n",
       "an event after 'data: [DONE]'"},
      {"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\n\ndata: {oops\n\ndata: [DONE]\n\n",
       "event 2: not JSON"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    served_reply r;
    const bool ok = served_stream_parse_text(bad[i].body, strlen(bad[i].body), &CHAT, &r, err, sizeof err);
    CHECK(!ok && strstr(err, bad[i].want), "stream %zu: ok %d '%s', want '%s'", i, ok, err, bad[i].want);
    served_reply_free(&r);
  }
}

static void test_build(void) {
  char *body = NULL;
  served_gen g = served_gen_default();
  g.model = "m";
  g.prompt = "Hello";
  CHECK_OK(served_build_completion(&g, &body));
  CHECK(body && !strcmp(body, "{\"model\":\"m\",\"prompt\":\"Hello\"}"), "only what is set: %s", body);
  free(body);
  const char *stops[] = {"\n\n", "END"};
  const int32_t ids[] = {3, 4}, sids[] = {2};
  g.prompt = NULL, g.prompt_ids = ids, g.n_prompt_ids = 2;
  g.max_tokens = 16, g.min_tokens = 2, g.temperature = 0.7, g.top_p = 0.9, g.top_k = 40, g.has_seed = true, g.seed = 7;
  g.n = 3, g.stop = stops, g.n_stop = 2, g.stop_token_ids = sids, g.n_stop_token_ids = 1, g.ignore_eos = 1;
  g.logprobs = 5, g.echo = true, g.prompt_logprobs = 2, g.return_token_ids = true, g.tokens_as_ids = true;
  g.structured = SERVED_STRUCT_REGEX, g.struct_spec = "[a-z]+", g.stream = true, g.extra = "{\"top_k\":-1,\"x\":[1]}";
  CHECK_OK(served_build_completion(&g, &body));
  CHECK(body && !strcmp(body, "{\"model\":\"m\",\"prompt\":[3,4],\"echo\":true,\"max_tokens\":16,\"min_tokens\":2,"
                              "\"temperature\":0.7,\"top_p\":0.9,\"seed\":7,\"n\":3,\"stop\":[\"\\n\\n\",\"END\"],"
                              "\"stop_token_ids\":[2],\"ignore_eos\":true,\"logprobs\":5,\"prompt_logprobs\":2,"
                              "\"return_token_ids\":true,\"return_tokens_as_token_ids\":true,\"structured_outputs\":"
                              "{\"regex\":\"[a-z]+\"},\"stream\":true,\"stream_options\":{\"include_usage\":true},"
                              "\"top_k\":-1,\"x\":[1]}"), "every field: %s", body);
  free(body);
  cJSON *msgs = cJSON_Parse("[{\"role\":\"user\",\"content\":\"hi\"}]");
  served_gen c = served_gen_default();
  c.model = "m", c.messages = msgs, c.logprobs = 3, c.temperature = 0;
  c.structured = SERVED_STRUCT_JSON, c.struct_style = SERVED_STRUCT_OPENAI, c.struct_spec = "{\"type\":\"object\"}";
  CHECK_OK(served_build_chat(&c, &body));
  CHECK(body && !strcmp(body, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":0,"
                              "\"logprobs\":true,\"top_logprobs\":3,\"response_format\":{\"type\":\"json_schema\","
                              "\"json_schema\":{\"name\":\"vouch\",\"schema\":{\"type\":\"object\"},\"strict\":true}}}"),
        "chat: %s", body);
  free(body);
  c.struct_style = SERVED_STRUCT_GUIDED, c.structured = SERVED_STRUCT_CHOICE, c.struct_spec = "[\"yes\",\"no\"]";
  CHECK_OK(served_build_chat(&c, &body));
  CHECK(body && strstr(body, "\"guided_choice\":[\"yes\",\"no\"]"), "guided_choice: %s", body);
  free(body);
  /* refused */
  c.struct_spec = "[1]";
  CHECK(served_build_chat(&c, &body) && strstr(verr_msg(), "not a JSON array of strings") && !body, "bad choices");
  c.structured = SERVED_STRUCT_NONE, c.extra = "[1]";
  CHECK(served_build_chat(&c, &body) && strstr(verr_msg(), "extra is not a JSON object"), "bad extra");
  c.extra = NULL, c.has_seed = true, c.seed = 1ull << 53;
  CHECK(served_build_chat(&c, &body) && strstr(verr_msg(), "not exact in JSON"), "seed 2^53");
  g = served_gen_default(), g.model = "m";
  CHECK(served_build_completion(&g, &body) && strstr(verr_msg(), "one of them"), "no prompt");
  g.messages = msgs;
  CHECK(served_build_completion(&g, &body) && strstr(verr_msg(), "/v1/chat/completions"), "messages to completions");
  cJSON_Delete(msgs);
}

static void test_identity(void) {
  served_identity a = {0}, b = {0};
  const char *vllm = "{\"object\":\"list\",\"data\":[{\"id\":\"deepseek\",\"object\":\"model\",\"created\":1,\"owned_by\":\"vllm\","
                     "\"root\":\"/ckpt/ds\",\"max_model_len\":131072},{\"id\":\"other\",\"root\":\"/x\"}]}";
  CHECK_OK(served_identity_parse_models(vllm, "http://a", NULL, &a));
  CHECK(!strcmp(a.id, "deepseek") && !strcmp(a.root, "/ckpt/ds") && a.has_root && a.max_model_len == 131072 &&
            !strcmp(a.owned_by, "vllm"), "vLLM identity");
  CHECK_OK(served_identity_parse_models(vllm, "http://b", "deepseek", &b));
  snprintf(a.url, sizeof a.url, "http://a"), snprintf(b.url, sizeof b.url, "http://b");
  CHECK_OK(served_pair_check(&a, &b));
  b.max_model_len = 65536;
  CHECK(served_pair_check(&a, &b) && strstr(verr_msg(), "field 'max_model_len'") && strstr(verr_msg(), "http://a") &&
            strstr(verr_msg(), "http://b"), "max_model_len differs: %s", verr_msg());
  CHECK_OK(served_identity_parse_models(vllm, "http://b", "other", &b));
  CHECK(served_pair_check(&a, &b) && strstr(verr_msg(), "field 'id'"), "id differs");
  snprintf(b.id, sizeof b.id, "deepseek");
  CHECK(served_pair_check(&a, &b) && strstr(verr_msg(), "field 'root'"), "root differs");
  CHECK(served_identity_parse_models("{\"data\":[{\"id\":\"x\"}]}", "http://c", "y", &b) &&
            strstr(verr_msg(), "http://c serves no model 'y' (it serves: x)"), "model not served");
  CHECK(served_identity_parse_models("{\"data\":[{\"id\":\"x\",\"max_model_len\":\"big\"}]}", "http://c", NULL, &b) &&
            strstr(verr_msg(), "field 'max_model_len'"), "bad max_model_len");
  CHECK(served_identity_parse_models("{\"data\":[{\"id\":3}]}", "http://c", NULL, &b) && strstr(verr_msg(), "data[0].id"),
        "bad id");
  /* llama.cpp: id and owned_by only; two such servers pair */
  served_identity l1 = {0}, l2 = {0};
  CHECK_OK(served_identity_parse_models("{\"data\":[{\"id\":\"m.gguf\",\"owned_by\":\"llamacpp\"}]}", "http://l", NULL, &l1));
  CHECK_OK(served_identity_parse_models("{\"data\":[{\"id\":\"m.gguf\",\"owned_by\":\"llamacpp\"}]}", "http://l", NULL, &l2));
  CHECK(!l1.has_root && l1.max_model_len == 0 && served_pair_check(&l1, &l2) == V_OK, "llama.cpp identity pairs");
  served_identity_parse_version("{\"version\":\"0.10.1\"}", &l1);
  CHECK(!strcmp(l1.version, "0.10.1"), "version");
  l1.models_raw = strdup("{\"data\":[]}");
  cJSON *j = served_identity_json(&l1, "reference");
  CHECK(j && cJSON_IsNull(cJSON_GetObjectItem(j, "root")) && cJSON_IsNull(cJSON_GetObjectItem(j, "max_model_len")) &&
            cJSON_IsNull(cJSON_GetObjectItem(j, "version")) && !strcmp(cJSON_GetObjectItem(j, "v1_models")->valuestring, "{\"data\":[]}"),
        "manifest entry (no /version: null)");
  cJSON_Delete(j);
  served_identity_free(&l1);
}

/* The paired sign-flip test: exact values, its false-alarm rate on simulated A/A pairs, its power. */
static void test_paired(void) {
  const double zero[5] = {0};
  int m;
  CHECK(seval_worse_p(zero, 5, 1, &m) == 1 && m == 0, "all ties: p 1");
  const double ones[4] = {1, 1, 1, 1};
  CHECK(fabs(seval_worse_p(ones, 4, 1, &m) - 1.0 / 16) < 1e-12 && m == 4, "four wins: 1/16");
  const double mixed[3] = {0.5, 0.25, -0.125}; /* sums >= 0.625 of the 8 sign patterns: +,+,- and +,+,+ */
  CHECK(fabs(seval_worse_p(mixed, 3, 1, NULL) - 2.0 / 8) < 1e-12, "enumerated: %g", seval_worse_p(mixed, 3, 1, NULL));
  const double tr[6] = {1, 1, 1, -1, 0, 0}; /* the sign test: P(Bin(4, 1/2) >= 3) = 5/16 */
  CHECK(fabs(seval_worse_p(tr, 6, 1, NULL) - 5.0 / 16) < 1e-12, "sign test");
  /* A/A: two builds that draw each item's score from the same distribution (exchangeable): the
   * rejection rate at alpha 0.05 over 2000 simulated runs of 60 items (MC p-values above 20 non-zero
   * items, exact below) stays at or below alpha within 3 standard errors */
  uint64_t st = 12345;
  const int runs = 2000, n = 60;
  int rej = 0, rej_shift = 0;
  double d[60], e[60];
  for (int r = 0; r < runs; r++) {
    for (int i = 0; i < n; i++) {
      st = st * 6364136223846793005ull + 1442695040888963407ull;
      const double base = (double)((st >> 33) % 1000) / 1000.0; /* the item's difficulty */
      st = st * 6364136223846793005ull + 1442695040888963407ull;
      const double u1 = (double)((st >> 33) % 1000) / 1000.0;
      st = st * 6364136223846793005ull + 1442695040888963407ull;
      const double u2 = (double)((st >> 33) % 1000) / 1000.0;
      /* a third of the items differ at all (real engines: batch-order noise flips some answers) */
      const bool noisy = i % 3 == 0;
      const double a = noisy ? fmin(1, base + 0.3 * u1) : base, b = noisy ? fmin(1, base + 0.3 * u2) : base;
      d[i] = a - b;
      e[i] = a - fmax(0, b - 0.1); /* a candidate 0.1 worse on every item */
    }
    if (r < 400) rej_shift += seval_worse_p(e, n, (uint64_t)r, NULL) < 0.05; /* power on fewer runs: it is slower */
    rej += seval_worse_p(d, n, (uint64_t)r, NULL) < 0.05;
  }
  const double rate = (double)rej / runs, se = sqrt(0.05 * 0.95 / runs);
  printf("paired sign-flip test: A/A false-alarm rate %.4f over %d runs (alpha 0.05, se %.4f); shift 0.1: %d of 400 caught\n",
         rate, runs, se, rej_shift);
  CHECK(rate <= 0.05 + 3 * se, "A/A false alarms %.4f > alpha + 3 se", rate);
  CHECK(rate >= 0.05 - 4 * se, "A/A rate %.4f far below alpha: the test is not calibrated", rate);
  CHECK(rej_shift >= 396, "a 0.1 shift caught %d of 400", rej_shift);
}

static void test_rows(void) {
  mrcr_row r = {0};
  cJSON *msgs = NULL;
  const char *good = "{\"prompt\":\"[{\\\"role\\\":\\\"user\\\",\\\"content\\\":\\\"write a poem\\\"}]\",\"answer\":\"abcX\","
                     "\"random_string_to_prepend\":\"abc\",\"n_needles\":2,\"desired_msg_index\":1,\"total_messages\":3,"
                     "\"n_chars\":12}";
  CHECK_OK(mrcr_row_parse(good, "f.jsonl", 3, &r, &msgs));
  CHECK(r.n_needles == 2 && !strcmp(r.answer, "abcX") && !strcmp(r.prefix, "abc") && r.n_messages == 1 &&
            cJSON_GetArraySize(msgs) == 1 && r.line == 3, "row fields");
  free(r.answer), free(r.prefix), cJSON_Delete(msgs);
  const struct { const char *row, *want; } bad[] = {
      {"{\"prompt\":\"[]\"}", "f.jsonl:3: field 'answer': missing"},
      {"{\"prompt\":\"[]\",\"answer\":\"a\",\"random_string_to_prepend\":\"a\",\"n_needles\":2,\"desired_msg_index\":1,"
       "\"total_messages\":3,\"n_chars\":1}", "field 'prompt': not a JSON-encoded non-empty list"},
      {"{\"prompt\":\"[1]\",\"answer\":\"a\",\"random_string_to_prepend\":\"a\",\"n_needles\":2,\"desired_msg_index\":1,"
       "\"total_messages\":3,\"n_chars\":1}", "field 'prompt': message 0 is not a"},
      {"{\"prompt\":\"[]\",\"answer\":\"a\",\"random_string_to_prepend\":\"a\",\"n_needles\":0}", "field 'n_needles': not an integer in [1,"},
      {"{\"prompt\":\"[]\",\"answer\":\"\xff\"}", "field 'answer': invalid UTF-8 at byte 0"},
      {"{\"prompt\":5}", "field 'prompt': not a string"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    mrcr_row q = {0};
    const vstatus s = mrcr_row_parse(bad[i].row, "f.jsonl", 3, &q, NULL);
    CHECK(s && strstr(verr_msg(), bad[i].want), "row %zu: '%s', want '%s'", i, verr_msg(), bad[i].want);
    free(q.answer), free(q.prefix);
  }
}

int main(void) {
  test_completions();
  test_chat();
  test_prompt_logprobs();
  test_echo();
  test_malformed();
  test_stream();
  test_build();
  test_identity();
  test_paired();
  test_rows();
  return test_finish();
}
