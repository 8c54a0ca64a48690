/* Files written whole or not at all. The bytes go to a temporary file beside the target (same
 * directory, so the rename cannot cross file systems), which is then renamed over it: a reader,
 * or a process killed at any moment (kill -9, disk full, a crash), finds the old file (or none) or
 * the complete new one under the final name, never a part of it that looks whole.
 *
 * No fsync: after an OS crash or power loss the file may be the old one, or empty. Durable records
 * live in the run's SQLite (runner/evidence/store.h); these are the JSON, trace and side files derived from
 * them or from one command, and a run writes trace files per case, where a sync each would cost
 * what the store's WAL saves. */
#ifndef VOUCH_COMMON_ATOMIC_FILE_H
#define VOUCH_COMMON_ATOMIC_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/vstatus.h"

struct cJSON;

/* Writes n bytes of data to path as above, with permissions `mode` (0644, 0755) less the umask.
 * Through a symbolic link the file it names is replaced and the link kept (a dangling link is
 * replaced by the file); a target that is not a regular file (/dev/stdout, a FIFO) is written
 * through in place, as a stream. Errors name path and say why; on an error a regular file at path
 * is as it was before and no temporary file is left. */
vstatus vfile_write_atomic(const char *path, const void *data, size_t n, mode_t mode);
/* The NUL-terminated text and, when newline, a final '\n', as vfile_write_atomic writes. */
vstatus vfile_write_text(const char *path, const char *text, bool newline, mode_t mode);
/* j as JSON text (indented when pretty, else on one line) and a final newline, as
 * vfile_write_atomic writes, with mode 0644. */
vstatus vfile_write_json(const char *path, const struct cJSON *j, bool pretty);

#endif
