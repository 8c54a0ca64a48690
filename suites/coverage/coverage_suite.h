/* `vouch coverage`: each path's selectable (op, variant) pairs (vpath_ops.selectable) as records of kind
 * coverage, for the report's coverage table (suites/coverage/coverage_suite.c; runner/cli/commands.c
 * points at it). */
#ifndef VOUCH_SUITES_COVERAGE_COVERAGE_SUITE_H
#define VOUCH_SUITES_COVERAGE_COVERAGE_SUITE_H

#include "suites/engine/suite.h"

extern const vsuite vsuite_coverage;

#endif
