/* What a server's refusal of a request says (suites/served/served_text.h calls): a limit of the
 * server (the prompt is past its context) rather than a failure of the build. */
#ifndef VOUCH_SUITES_SERVED_SERVED_REFUSAL_H
#define VOUCH_SUITES_SERVED_SERVED_REFUSAL_H

#include <stdbool.h>

#include "suites/served/served_text.h"

/* True when a failed call is the server refusing a prompt longer than its context: HTTP 400 whose
 * error message speaks of the context (vLLM "maximum context length", SGLang "context length",
 * llama.cpp "context size", "max_model_len"). False for an answered call. */
bool served_refused_context(const served_call *c);

#endif
