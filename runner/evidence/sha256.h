/* SHA-256 through OpenSSL's EVP interface, as lowercase hex. */
#ifndef VOUCH_RUNNER_EVIDENCE_SHA256_H
#define VOUCH_RUNNER_EVIDENCE_SHA256_H

#include <stddef.h>

#include "common/vstatus.h"

/* hex: 64 hex digits + NUL. */
vstatus sha256_hex(const void *data, size_t len, char hex[65]);
/* Hashes a whole file. */
vstatus sha256_file_hex(const char *path, char hex[65]);

#endif
