/* `vouch diverge`: teacher-forced divergence (suites/diverge/diverge.h) as a suite on the driver
 * (suites/diverge/diverge_suite.c; runner/cli/commands.c points at it). */
#ifndef VOUCH_SUITES_DIVERGE_DIVERGE_SUITE_H
#define VOUCH_SUITES_DIVERGE_DIVERGE_SUITE_H

#include "suites/engine/suite.h"

extern const vsuite vsuite_diverge;

#endif
