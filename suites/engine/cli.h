/* Small helpers shared by the CLI commands: option values, lists, sizes, terminal output. */
#ifndef VOUCH_SUITES_ENGINE_CLI_H
#define VOUCH_SUITES_ENGINE_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "common/vstatus.h"

/* Exit codes a CI job can gate on. */
enum { EXIT_OK = 0, EXIT_CHECK_FAILED = 1, EXIT_USAGE = 2, EXIT_INTERRUPTED = 130 };

/* If argv[*i] is `name` (then the value is argv[*i+1]) or `name=value`, stores the value,
 * advances *i and returns true. A missing value is reported through *err. */
bool cli_opt(int argc, char **argv, int *i, const char *name, const char **val, vstatus *err);
/* Integer / float / size ("4k" = 4096, "1m" = 1048576) parsing with range checks. */
vstatus cli_int(const char *opt, const char *s, long lo, long hi, long *out);
vstatus cli_double(const char *opt, const char *s, double *out);
vstatus cli_u64(const char *opt, const char *s, uint64_t *out);
vstatus cli_size(const char *opt, const char *s, long *out);
/* Comma-separated list of sizes ("1,2,64" or "4k,32k"); *out malloc'ed. */
vstatus cli_size_list(const char *opt, const char *s, long **out, int *n);
/* Prints "vouch: error: <msg>" (and the source location when VOUCH_DEBUG is set). */
void cli_print_error(const char *cmd);
bool cli_is_tty(int fd);
/* mkdir -p: creates `dir` and its missing parents. */
vstatus cli_mkdirs(const char *dir);

#endif
