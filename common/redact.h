/* Credential redaction: values that look like secrets are replaced by "***" wherever vouch
 * writes text that may be published (manifest, records, traces, logs, replay.sh, the PR
 * comment). Detection goes by the value, not by the variable's name:
 *   GitHub tokens   ghp_ gho_ ghs_ ghu_ ghr_ + >= 20 alphanumerics, github_pat_ + >= 20 [A-Za-z0-9_]
 *   Hugging Face    hf_ + >= 20 alphanumerics
 *   API keys        sk- + >= 20 [A-Za-z0-9_-] (OpenAI / Anthropic style, sk-proj-..., sk-ant-...)
 *   AWS key ids     AKIA / ASIA + 16 [A-Z0-9]
 *   Slack           xoxb- xoxp- xoxa- xoxr- xoxs- + >= 10 [A-Za-z0-9-]
 *   JWTs            eyJ... . eyJ... . signature (base64url, three parts)
 *   URL passwords   scheme://user:password@host: "user:password" becomes "***"
 *   high entropy    a run of >= 32 base64 characters ([A-Za-z0-9+/=], not part of a longer name
 *                   with '_', '-' or '.') holding upper case, lower case and digits, >= 4.0 bits of
 *                   Shannon entropy per character and at most 45% adjacent lower-case pairs (an
 *                   AWS secret key, a random bearer token). Hex digests (no upper case) are kept.
 * Prefix patterns match at a word start (not preceded by a letter, digit or '_'). */
#ifndef VOUCH_COMMON_REDACT_H
#define VOUCH_COMMON_REDACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define REDACTED "***"

/* Redacts credential-looking substrings of the NUL-terminated string s in place (the text
 * only shrinks). Returns the number of substrings replaced. */
int redact_text(char *s);
/* A copy of s, redacted (caller frees); NULL on out of memory. */
char *redact_dup(const char *s);
/* True when s contains something redact_text would replace. */
bool redact_has_credential(const char *s);

/* True when an environment variable of this name is recorded in manifests: variables that
 * matter for reproducing a run (CUDA_*, NCCL_*, OMP_*, VOUCH_*, ..., the CI's run and PR
 * identifiers). Everything else is left out. */
bool redact_env_allowed(const char *name);

/* A write-only stream onto `f` that redacts each line before it reaches `f` (a credential
 * split across two fprintf calls of one line is still caught). Closing it closes f.
 * NULL (error set) when the stream cannot be made. */
FILE *redact_stream(FILE *f);

#endif
