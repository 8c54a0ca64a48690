/* The checks of `vouch features --ref-server` that compare distributions (suites/features/features_text_dist.c):
 * temperature, top_p, logprobs. Each runs into *r (features_text_ask.h); error only when the client fails. */
#ifndef VOUCH_SUITES_FEATURES_FEATURES_TEXT_DIST_H
#define VOUCH_SUITES_FEATURES_FEATURES_TEXT_DIST_H

#include "suites/features/features_text_ask.h"

vstatus ft_check_temperature(ft_ctx *c, ft_result *r);
vstatus ft_check_top_p(ft_ctx *c, ft_result *r);
vstatus ft_check_logprobs(ft_ctx *c, ft_result *r);

#endif
