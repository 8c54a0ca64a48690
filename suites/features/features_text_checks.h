/* The checks of `vouch features --ref-server` (suites/features/features_text.h): each one asks both
 * servers the same requests and decides the candidate's answer against the reference's, or says why
 * it cannot (undecided: the reference cannot decide it; not_supported: the reference refuses the
 * feature). What each asks and decides: docs/serving.md "features --server --ref-server". */
#ifndef VOUCH_SUITES_FEATURES_FEATURES_TEXT_CHECKS_H
#define VOUCH_SUITES_FEATURES_FEATURES_TEXT_CHECKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/vstatus.h"
#include "suites/features/features_text_ask.h"

/* The checks, in the order they run and are stored. */
enum {
  FT_STOP_STRINGS, FT_STOP_TOKEN_IDS, FT_MAX_TOKENS, FT_MIN_TOKENS, FT_SEEDED, FT_TEMPERATURE, FT_TOP_P,
  FT_JSON_SCHEMA, FT_REGEX, FT_CHOICE, FT_MAX_MODEL_LEN, FT_N, FT_STREAM, FT_LOGPROBS, FT_N_CHECKS
};

/* The name of check i ("stop_strings", ...; NULL outside [0, FT_N_CHECKS)). */
const char *ft_check_name(int i);
/* Runs check i into *r. Error only when the client fails (out of memory, curl cannot start, the run
 * was interrupted); a server's failure is the check's result. */
vstatus ft_check_run(ft_ctx *c, int i, ft_result *r);

#endif
