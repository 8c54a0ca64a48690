/* Whole files into memory: the reading counterpart of common/atomic_file.h, for every layer that
 * reads a plan, a bundle member, a schema or a trace whole. */
#ifndef VOUCH_COMMON_READ_FILE_H
#define VOUCH_COMMON_READ_FILE_H

#include <stddef.h>

#include "common/vstatus.h"

/* Reads the whole file at path into *data (malloc'ed, NUL-terminated; the caller frees it) and its
 * length without the NUL into *len when len is not NULL. On error *data is NULL and the message
 * names path: it cannot be opened (with the system's reason), a read error, or out of memory. */
vstatus vfile_read(const char *path, char **data, size_t *len);

#endif
