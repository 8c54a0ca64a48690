/* Structured outputs for vouch serve: the request's `structured_outputs` / `response_format`
 * (vLLM's parameter names) read into a token-id automaton (common/token_dfa.h).
 *
 * Without a tokenizer only constraints over token ids can be honoured:
 *   structured_outputs.choice     a list of token-id lists: the output is exactly one of them
 *                                 (vLLM's choice takes strings; strings are refused here)
 *   structured_outputs.token_dfa  vouch's own: {"start": S, "accept": [..], "edges": [{"from", "to",
 *                                 and "ids": [..] or "lo"/"hi" (default 0 / vocab-1) with optional
 *                                 "mod"/"rem"}]}
 * Everything that constrains text (json, regex, grammar, json_object, structural_tag, a
 * response_format other than {"type": "text"}) and the guided_* fields vLLM removed in 0.12 are
 * refused with 400 naming the field: a server that ignored a constraint would let a check pass
 * that it never did. */
#ifndef VOUCH_RUNNER_SERVE_SERVE_CONSTRAINT_H
#define VOUCH_RUNNER_SERVE_SERVE_CONSTRAINT_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/token_dfa.h"

#define SERVE_DFA_MAX_STATES 4096
#define SERVE_DFA_MAX_EDGES 65536
#define SERVE_DFA_MAX_SPAN (1 << 24) /* token ids all edges admit together: bounds a step's masking */

/* Reads the constraint of request body o. *out stays NULL when the request has none; else a
 * malloc'ed automaton (tdfa_free + free). false: a bad or unsupported constraint, param and msg
 * say which and why (HTTP 400). */
bool serve_constraint_parse(const cJSON *o, int vocab, tdfa **out, char *param, size_t param_n, char *msg, size_t msg_n);

#endif
