/* The text client of an OpenAI-compatible server (vLLM, SGLang, llama.cpp's server, TRT-LLM): JSON
 * requests with text or chat messages, answers parsed into one form whether they came whole or
 * streamed. What the suites that judge a real engine on real text build on (eval mrcr --dataset,
 * and the text modes of diverge and features); suites/served/served.h stays the token-id client of
 * the constructed evals and the served sweep.
 *
 * Three parts:
 *   1. The runner (served_calls_run): N POST requests (path + JSON body), at most C in flight on one
 *      curl multi handle, each non-streamed or streamed (SSE). No retries: a completion that reached
 *      the server may have run. Each call keeps its own failure: the HTTP status with the OpenAI
 *      error's message, a transport error (refused, timeout), or the first malformed field of the
 *      answer. The API key is served_conn's (VOUCH_SERVER_API_KEY, else OPENAI_API_KEY, sent as a
 *      bearer token and never written anywhere: not in a call's error, a record, a log or a manifest).
 *   2. The request builders (served_build_completion, served_build_chat) from a served_gen: every
 *      generation parameter the suites use, each sent only when set.
 *   3. The parsers (served_reply_parse, served_stream_parse_text): the answer of /v1/completions or
 *      /v1/chat/completions into served_reply (choices with text, finish reason, logprobs in either
 *      format, token ids; usage; prompt logprobs from vLLM's prompt_logprobs or from echo). The
 *      answer is untrusted: a malformed field fails that call with a one-line error naming the field
 *      ("choices[0].logprobs.token_logprobs[3]: not a number"), never the process.
 *
 *   served_conn c;  VTRY(served_conn_init(&c, url, 600));
 *   served_gen g = served_gen_default();
 *   g.model = "m"; g.messages = msgs; g.max_tokens = 512; g.temperature = 0;
 *   served_call *calls = calloc(n, sizeof *calls);
 *   for (i...) { VTRY(served_build_chat(&g, &calls[i].body)); calls[i].path = SERVED_CHAT; }
 *   VTRY(served_calls_run(&c, calls, n, 8, vinterrupted, NULL, NULL));
 *   calls[i].ok ? calls[i].reply.choices[0].text : calls[i].error
 *   served_calls_free(calls, n);
 */
#ifndef VOUCH_SUITES_SERVED_SERVED_TEXT_H
#define VOUCH_SUITES_SERVED_SERVED_TEXT_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/vstatus.h"
#include "suites/served/served.h"

#define SERVED_COMPLETIONS "/v1/completions"
#define SERVED_CHAT "/v1/chat/completions"

/* The most choices one answer may hold (n > 1) and alternatives one position may list: an answer
 * past these fails (it is not what was asked, and bounds what an untrusted server makes us hold). */
#define SERVED_MAX_CHOICES 256
#define SERVED_MAX_TOP 1024

/* ---------------------------------------------------------------------------------------------
 * Parsed answers */

/* One alternative at a position: a top_logprobs entry (legacy {token: lp} member, chat
 * {token, logprob, bytes} object, vLLM prompt_logprobs {"<id>": {logprob, rank, decoded_token}}). */
typedef struct {
  char *token;         /* the token as the server names it: its text, or "token_id:N" (vLLM's
                          return_tokens_as_token_ids); prompt_logprobs: decoded_token, "" when null (owned) */
  int32_t id;          /* its token id when the server says it (a prompt_logprobs key, a "token_id:N"
                          name), else -1 */
  double logprob;      /* natural log of its probability (<= 0 from a sane server; not judged here) */
  int rank;            /* vLLM's rank (1: most likely), 0 when not given */
} served_alt;

/* One token position: a generated token, or a prompt token (prompt logprobs). */
typedef struct {
  char *token;         /* the token chosen there (generated, or the prompt's), as named; NULL when the
                          server did not name it (owned) */
  int32_t id;          /* its id when known ("token_id:N", the prompt_logprobs key), else -1 */
  double logprob;      /* its logprob; NaN when not given (the first prompt position, a null entry) */
  int rank;            /* vLLM prompt_logprobs rank of the chosen token, 0 when not given */
  long text_offset;    /* legacy format: character offset of the token in the choice's text, -1 when
                          not given */
  unsigned char *bytes; /* chat format: the token's UTF-8 bytes (owned; NULL when not given) */
  int n_bytes;
  served_alt *top;     /* [n_top] the alternatives listed there, in the server's order (owned) */
  int n_top;
} served_pos;

/* One choice of an answer. */
typedef struct {
  int index;           /* choices[].index (the order of first appearance when a stream interleaves) */
  char *text;          /* completions: text; chat: message.content (delta.content concatenated);
                          "" when null; NUL-terminated, may hold NUL bytes: text_len counts them (owned) */
  size_t text_len;     /* bytes in text */
  char finish_reason[32]; /* "stop", "length", ...; "" when none was given */
  char stop_reason[160];  /* vLLM stop_reason: the stop string matched, or a token id as digits; "" when
                             null or absent */
  served_pos *lp;      /* [n_lp] logprobs of the generated tokens (none asked or given: NULL, 0);
                          with echo, the prompt's positions are moved to served_reply.prompt_lp (owned) */
  int n_lp, cap_lp;
  bool has_logprobs;   /* the choice carried a logprobs object (possibly with no position) */
  int32_t *token_ids;  /* [n_token_ids] vLLM return_token_ids: the generated ids (NULL when not given) (owned) */
  int n_token_ids, cap_token_ids;
  bool has_token_ids;  /* token_ids was given (possibly empty) */
} served_choice;

/* An answer of /v1/completions or /v1/chat/completions, whole or reassembled from a stream. */
typedef struct {
  char id[128];        /* the answer's id ("" when none) */
  char model[256];     /* the model the server says answered ("" when none) */
  served_choice *choices; /* [n_choices] in order of first appearance (owned) */
  int n_choices;
  long prompt_tokens;  /* usage.prompt_tokens, -1 when not given */
  long completion_tokens; /* usage.completion_tokens, -1 when not given */
  served_pos *prompt_lp; /* [n_prompt_lp] logprobs of the prompt's tokens: vLLM's prompt_logprobs (the top
                            level, else choices[0]'s), or with echo the first prompt_tokens positions of
                            choices[0]'s logprobs; position 0 has logprob NaN (nothing precedes it) (owned) */
  int n_prompt_lp;
  const char *prompt_lp_from; /* "prompt_logprobs", "echo", or NULL when none */
  int32_t *prompt_token_ids; /* [n_prompt_token_ids] vLLM's prompt_token_ids (return_token_ids), NULL when
                                not given (owned) */
  int n_prompt_token_ids;
  int n_events;        /* streamed: the data events read (0 for a whole answer) */
} served_reply;

/* How to read an answer. */
typedef struct {
  bool chat;           /* /v1/chat/completions (message/delta, the chat logprobs format) */
  bool echo;           /* echo was asked: choices[0]'s first usage.prompt_tokens positions are the prompt's */
} served_parse_opts;

/* Parses the JSON text of a whole (non-streamed) answer into *r (zeroed first; free with
 * served_reply_free, also after a failure). False with a one-line reason in err[cap] naming the first
 * malformed field: not JSON, an "error" object in place of an answer, no choices list, a field of the
 * wrong type, a choice index outside [0, SERVED_MAX_CHOICES), logprob arrays of unequal length, echo
 * without usage.prompt_tokens or with more prompt positions than given. */
bool served_reply_parse(const char *json, const served_parse_opts *o, served_reply *r, char *err, size_t cap);

/* A stream being read: SSE bytes in, one served_reply out. */
typedef struct {
  served_parse_opts o; /* how to read the events */
  served_reply r;      /* what the events said so far */
  char err[320];       /* the first problem ("" none) */
  bool done;           /* "data: [DONE]" was read */
  char *line;          /* bytes not yet split into lines (owned) */
  size_t n_line, cap_line;
  double *event_t;     /* [n_event_t] arrival time (the caller's clock) of each event that carried text,
                          tokens or logprobs (owned) */
  int n_event_t, cap_event_t;
} served_sse;

/* Starts reading a stream into *s. */
void served_sse_init(served_sse *s, const served_parse_opts *o);
/* Feeds n more bytes that arrived at time `now`: each complete "data: ..." line is one event applied
 * to s->r (text and token ids appended per choice index, logprob positions appended, the last
 * non-null finish_reason kept, usage and prompt logprobs taken where given). An event after the first
 * problem is not read. False only when memory runs out (s->err says so). */
bool served_sse_feed(served_sse *s, const char *d, size_t n, double now);
/* Ends the stream: false (reason in s->err) when a problem was seen, the stream ended without
 * "data: [DONE]" or without a finish_reason on every choice, or echo's prompt positions cannot be
 * split; then s->r is the same form served_reply_parse gives. */
bool served_sse_finish(served_sse *s);
/* Frees what s holds except s->r (move it out first, or free it with served_reply_free). */
void served_sse_free(served_sse *s);
/* The whole stream body[n] at once (served_sse_init/feed/finish, event times 0) into *r; the event
 * count in r->n_events. False with the reason in err[cap]. */
bool served_stream_parse_text(const char *body, size_t n, const served_parse_opts *o, served_reply *r, char *err,
                              size_t cap);

void served_reply_free(served_reply *r);

/* ---------------------------------------------------------------------------------------------
 * Requests */

/* Structured output: what the answer must match. */
typedef enum {
  SERVED_STRUCT_NONE = 0,
  SERVED_STRUCT_JSON,   /* spec: a JSON schema (object text) */
  SERVED_STRUCT_REGEX,  /* spec: a regular expression */
  SERVED_STRUCT_CHOICE, /* spec: a JSON array of strings */
} served_struct_kind;

/* How the structured output is asked. */
typedef enum {
  SERVED_STRUCT_VLLM = 0,   /* vLLM's "structured_outputs": {"json"|"regex"|"choice": ...} */
  SERVED_STRUCT_GUIDED,     /* the legacy names: guided_json, guided_regex, guided_choice (vLLM < 0.10, SGLang
                               takes regex/json_schema under other names: use extra) */
  SERVED_STRUCT_OPENAI,     /* OpenAI's "response_format": {"type": "json_schema", "json_schema": {"name",
                               "schema", "strict": true}} (json only) */
} served_struct_style;

/* What to generate. Start from served_gen_default(): every field is then "not sent", and the server's
 * default applies. Integer fields use SERVED_UNSET, doubles NaN. */
#define SERVED_UNSET (-2147483647 - 1)
typedef struct {
  const char *model;             /* "model" (required) */
  /* the prompt: exactly one of these three */
  const char *prompt;            /* completions: the prompt as text */
  const int32_t *prompt_ids;     /* completions: the prompt as token ids [n_prompt_ids] */
  int n_prompt_ids;
  const cJSON *messages;         /* chat: a JSON array of {"role", "content"} objects (copied into the body) */
  int max_tokens;                /* "max_tokens" */
  int min_tokens;                /* "min_tokens" (vLLM, SGLang) */
  double temperature, top_p;     /* "temperature", "top_p" */
  int top_k;                     /* "top_k" (vLLM, SGLang, llama.cpp) */
  bool has_seed;                 /* send "seed" */
  uint64_t seed;                 /* its value (below 2^53, else the request is refused: JSON numbers) */
  int n;                         /* "n": choices per prompt */
  const char *const *stop;       /* "stop": [n_stop] strings */
  int n_stop;
  const int32_t *stop_token_ids; /* "stop_token_ids" (vLLM) [n_stop_token_ids] */
  int n_stop_token_ids;
  int ignore_eos;                /* "ignore_eos": SERVED_UNSET, 0 or 1 */
  int logprobs;                  /* completions: "logprobs": k; chat: "logprobs": true and "top_logprobs": k
                                    (k = 0: only the chosen token's logprob) */
  bool echo;                     /* completions: "echo": true (the prompt is returned, with its logprobs when
                                    logprobs is set) */
  int prompt_logprobs;           /* vLLM's "prompt_logprobs": k */
  bool return_token_ids;         /* vLLM's "return_token_ids": true (generated and prompt ids in the answer) */
  bool tokens_as_ids;            /* vLLM's "return_tokens_as_token_ids": true (logprob tokens named "token_id:N") */
  served_struct_kind structured; /* structured output (NONE: not asked) */
  served_struct_style struct_style; /* how it is asked */
  const char *struct_spec;       /* the schema (JSON object text), the regex, or the choices (JSON array text) */
  bool stream;                   /* "stream": true, with "stream_options": {"include_usage": true} */
  const char *extra;             /* NULL, or a JSON object text whose members are added last, replacing members
                                    of the same name (an engine's own parameters) */
} served_gen;

/* Every field not sent. */
served_gen served_gen_default(void);
/* The JSON body of POST /v1/completions for g into *body (malloc'ed; free()). Error (naming the
 * field) when g has no model, not exactly one of prompt / prompt_ids, messages, a struct_spec that
 * does not parse as its kind needs, an extra that is not a JSON object, a seed of 2^53 or more. */
vstatus served_build_completion(const served_gen *g, char **body);
/* The same for POST /v1/chat/completions: g->messages (a JSON array) is required, prompt and echo are
 * refused; logprobs becomes "logprobs": true, "top_logprobs": k. */
vstatus served_build_chat(const served_gen *g, char **body);

/* ---------------------------------------------------------------------------------------------
 * The runner */

/* One request and its answer. */
typedef struct served_call {
  /* in */
  const char *path;      /* SERVED_COMPLETIONS, SERVED_CHAT, or another path under the server's URL */
  char *body;            /* the JSON body (malloc'ed; the call owns it and the runner frees it once the
                            transfer ends). NULL: the runner's body hook makes it just before sending */
  bool stream;           /* the body asks for a stream: the answer is read as SSE */
  bool echo;             /* the body asks for echo (how to split the prompt's logprobs) */
  /* out */
  bool ok;               /* sent, answered 2xx, parsed whole */
  bool sent;             /* the request was started (false: the run stopped first, or the body hook failed) */
  long http;             /* the HTTP status (0: no answer) */
  char error[400];       /* why not ok, one line naming the server and path: "HTTP 400 from URL/v1/...:
                            <error.message>", a transport error, or a malformed field of the answer */
  char *err_message;     /* the OpenAI error JSON's error.message (or message, detail) of an HTTP error,
                            as given (owned; NULL when none): what a suite matches ("maximum context length") */
  served_reply reply;    /* the parsed answer (when ok; partly filled otherwise) */
  double t_send, t_first, t_end; /* vclock_now() seconds: sent, first event carrying text or tokens (streamed;
                                    t_end for a whole answer), done */
  double *event_t;       /* [n_event_t] streamed: arrival of each event carrying text, tokens or logprobs (owned) */
  int n_event_t;
} served_call;

/* The body hook: makes calls[i].body (malloc'ed JSON) just before call i is sent, so that N large
 * prompts need not be in memory at once. Error (its message becomes the call's error; the call is
 * not sent; the run goes on). */
typedef vstatus (*served_body_fn)(void *ctx, served_call *calls, int i);

/* Sends calls[0..n) in index order, at most `concurrency` in flight, on one curl multi handle; the
 * connection's timeout applies per call. Stops starting calls once stop() says so (those in flight
 * finish; the rest stay not sent). Per-call failures are in the calls; V_ERR only when the runner
 * itself fails (out of memory, curl cannot start). */
vstatus served_calls_run(const served_conn *c, served_call *calls, int n, int concurrency, bool (*stop)(void),
                         served_body_fn body, void *ctx);
/* Frees what calls[0..n) hold (not the array). */
void served_calls_free(served_call *calls, int n);

/* The choice with index `index` of a reply, NULL when it has none. */
const served_choice *served_reply_choice(const served_reply *r, int index);

#endif
