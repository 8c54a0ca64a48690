/* vouch diverge --server URL --ref-server URL --prompts FILE: the candidate build of an engine against
 * its reference build on real text, judged against the reference's own noise floor
 * (suites/diverge/diverge_text.c; docs/verdicts.md). */
#ifndef VOUCH_SUITES_DIVERGE_DIVERGE_TEXT_H
#define VOUCH_SUITES_DIVERGE_DIVERGE_TEXT_H

#include "suites/engine/suite.h"

extern const vsuite vsuite_diverge_text;
/* vsuite_diverge's mode: the text suite when argv holds --ref-server, else NULL. */
const vsuite *diverge_text_mode(int argc, char **argv);

#endif
