/* `vouch features`: the production-feature checks (suites/features/features.h) as a suite on the
 * driver (suites/features/features_suite.c; runner/cli/commands.c points at it). */
#ifndef VOUCH_SUITES_FEATURES_FEATURES_SUITE_H
#define VOUCH_SUITES_FEATURES_FEATURES_SUITE_H

#include "suites/engine/suite.h"

extern const vsuite vsuite_features;

#endif
