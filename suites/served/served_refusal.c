/* A server's refusal read from its error message (suites/served/served_refusal.h). */
#include "suites/served/served_refusal.h"

#include <ctype.h>
#include <string.h>

/* True when needle occurs in hay, ASCII case ignored. */
static bool contains_nocase(const char *hay, const char *needle) {
  const size_t n = strlen(needle);
  for (; *hay; hay++) {
    size_t i = 0;
    while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) i++;
    if (i == n) return true;
  }
  return false;
}

bool served_refused_context(const served_call *c) {
  if (c->ok || c->http != 400 || !c->err_message) return false;
  static const char *const says[] = {"context length", "maximum context", "context size", "max_model_len"};
  for (size_t i = 0; i < sizeof says / sizeof *says; i++)
    if (contains_nocase(c->err_message, says[i])) return true;
  return false;
}
