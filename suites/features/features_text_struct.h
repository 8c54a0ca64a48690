/* The structured-output checks of `vouch features --ref-server` (suites/features/features_text_struct.c):
 * JSON schema, regex, choice (kind: FT_JSON_SCHEMA, FT_REGEX, FT_CHOICE of features_text_checks.h). Runs
 * into *r (features_text_ask.h); error only when the client fails. */
#ifndef VOUCH_SUITES_FEATURES_FEATURES_TEXT_STRUCT_H
#define VOUCH_SUITES_FEATURES_FEATURES_TEXT_STRUCT_H

#include "suites/features/features_text_ask.h"

vstatus ft_check_structured(ft_ctx *c, int kind, ft_result *r);

#endif
