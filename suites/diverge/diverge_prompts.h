/* The prompts `vouch diverge --server --ref-server` teacher-forces on when no --prompts FILE is given
 * (suites/diverge/diverge_text.c): a fixed set written for vouch, so a served plan judges two builds
 * on real text with nothing to download. Mixed on purpose: prose, code, arithmetic, lists, tables,
 * dialogue, JSON and a few languages besides English, so tokenizer paths, digits, punctuation runs
 * and long words all reach the model. */
#ifndef VOUCH_SUITES_DIVERGE_DIVERGE_PROMPTS_H
#define VOUCH_SUITES_DIVERGE_DIVERGE_PROMPTS_H

extern const char *const dt_builtin_prompts[]; /* [dt_n_builtin_prompts] non-empty UTF-8 strings */
extern const int dt_n_builtin_prompts;

#endif
