/* vouch features --server URL --ref-server URL: the features users keep (stop strings, max_tokens,
 * seeded sampling, structured output, n, streaming, logprobs, ...) checked on TEXT over two
 * OpenAI-compatible servers, the candidate build and the reference build of the same model, each
 * decided against the reference and `undecided` when the reference cannot decide it
 * (suites/features/features_text.c, the checks in features_text_checks.c; docs/serving.md). */
#ifndef VOUCH_SUITES_FEATURES_FEATURES_TEXT_H
#define VOUCH_SUITES_FEATURES_FEATURES_TEXT_H

#include "suites/engine/suite.h"

extern const vsuite vsuite_features_text;
/* vsuite_features' mode: the text suite when argv holds --ref-server, else NULL (--server alone stays
 * the token-id checks of suites/features/features_served.c). */
const vsuite *features_text_mode(int argc, char **argv);

#endif
