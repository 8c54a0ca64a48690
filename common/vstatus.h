/* Errors are values. A function that can fail returns vstatus; on failure it has
 * recorded one line saying what was wrong and where (file, field), and the status
 * travels up the stack unchanged until main prints it and picks the exit code.
 *
 *   VTRY(safetensors_open(&st, path));        // return early on failure
 *   return VERR("%s: tensor '%s': offset past end of file", path, name);
 */
#ifndef VOUCH_VSTATUS_H
#define VOUCH_VSTATUS_H

#include <stddef.h>

typedef enum {
  V_OK = 0,           /* success */
  V_ERR = 1,          /* failure; verr_msg() says why */
  V_UNSUPPORTED = 2,  /* the request is valid but this path/op cannot do it; never a pass, never a fail */
  V_INTERRUPTED = 3,  /* the user asked to stop (SIGINT); what finished is kept */
} vstatus;

/* Records a one-line message (printf format; control characters become '?') and the source
 * location; returns V_ERR.
 * A later error overwrites an earlier one. Thread-local. */
vstatus verr_set(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Like verr_set but returns V_UNSUPPORTED (the message is the reason). */
vstatus vunsupported_set(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prepends "prefix: " to the current message (adds context while unwinding). */
void verr_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

const char *verr_msg(void);   /* the last message, "" if none */
/* Control characters in m (a newline, a terminal escape) become '?': a message that quotes an
 * untrusted file or server stays one printable line (every verr message gets this). */
void vtext_one_line(char *m);
const char *verr_where(void); /* "file.c:123" of the last verr_set */
void verr_clear(void);

#define VERR(...) verr_set(__FILE__, __LINE__, __VA_ARGS__)
#define VUNSUPPORTED(...) vunsupported_set(__FILE__, __LINE__, __VA_ARGS__)
#define VTRY(expr)                    \
  do {                                \
    vstatus vtry_s_ = (expr);         \
    if (vtry_s_ != V_OK) return vtry_s_; \
  } while (0)

/* Allocation that records an error instead of crashing; NULL on failure. */
void *vmalloc(size_t n, const char *what);
void *vcalloc(size_t count, size_t size, const char *what);

#endif
