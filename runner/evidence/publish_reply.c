/* Parsing GitHub's replies for `vouch publish` (runner/evidence/publish_reply.h). */
#define _GNU_SOURCE
#include "runner/evidence/publish_reply.h"

#include <errno.h>
#include <stdio.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#define MAX_COMMENT_ID 9007199254740992.0 /* 2^53: exact in a double, printed with %.0f */

void publish_reply_init(publish_reply *r) {
  r->retry_after = -1;
  r->rl_remaining = -1;
  r->rl_reset = -1;
  r->next[0] = 0;
}

size_t publish_reply_body(publish_reply *r, const char *p, size_t k) {
  if (r->n + k + 1 > r->cap) {
    size_t cap = (r->n + k + 1) * 2;
    char *d = realloc(r->data, cap);
    if (!d) return 0;
    r->data = d;
    r->cap = cap;
  }
  memcpy(r->data + r->n, p, k);
  r->n += k;
  r->data[r->n] = 0;
  return k;
}

/* A whole-string finite number in [lo, hi]; false otherwise. */
static bool number_in(const char *v, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double d = strtod(v, &end);
  if (end == v || errno || !isfinite(d) || d < lo || d > hi) return false;
  while (*end == ' ' || *end == '\t') end++;
  if (*end) return false;
  *out = d;
  return true;
}

static bool printable_line(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] == 0x7f) return false;
  return true;
}

/* Link: <URL>; rel="next", <URL>; rel="last" */
static void parse_link(publish_reply *r, const char *v) {
  for (const char *s = v; (s = strchr(s, '<'));) {
    const char *e = strchr(s, '>');
    if (!e) break;
    const char *next_lt = strchr(e + 1, '<'), *rel = strstr(e, "rel=\"next\"");
    if (rel && (!next_lt || rel < next_lt)) {
      size_t n = (size_t)(e - s - 1);
      if (n < sizeof r->next && printable_line(s + 1, n)) {
        memcpy(r->next, s + 1, n);
        r->next[n] = 0;
      }
      break;
    }
    s = e + 1;
  }
}

void publish_reply_header(publish_reply *r, const char *p, size_t k) {
  char line[4096];
  size_t n = k < sizeof line - 1 ? k : sizeof line - 1;
  memcpy(line, p, n);
  line[n] = 0;
  line[strcspn(line, "\r\n")] = 0;
  char *c = strchr(line, ':');
  if (!c) return;
  *c = 0;
  char *v = c + 1;
  while (*v == ' ') v++;
  double d;
  if (!strcasecmp(line, "retry-after")) {
    r->retry_after = number_in(v, 0, PUBLISH_MAX_RETRY_AFTER_S, &d) ? d : -1;
  } else if (!strcasecmp(line, "x-ratelimit-remaining")) {
    r->rl_remaining = number_in(v, 0, 1e9, &d) && d == floor(d) ? (long)d : -1;
  } else if (!strcasecmp(line, "x-ratelimit-reset")) {
    r->rl_reset = number_in(v, 0, 1e12, &d) ? d : -1;
  } else if (!strcasecmp(line, "link")) {
    parse_link(r, v);
  }
}

vstatus publish_reply_find_comment(const char *body, const char *marker, const char *url, double *id) {
  *id = 0;
  cJSON *arr = body ? cJSON_Parse(body) : NULL;
  if (!cJSON_IsArray(arr)) {
    cJSON_Delete(arr);
    return VERR("GET %s: reply is not a JSON array of comments", url);
  }
  vstatus s = V_OK;
  int i = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, arr) {
    const char *b = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "body"));
    const cJSON *idj = cJSON_GetObjectItemCaseSensitive(e, "id");
    if (b && strstr(b, marker) && cJSON_IsNumber(idj)) {
      double v = idj->valuedouble;
      if (!(v >= 1 && v <= MAX_COMMENT_ID && v == floor(v))) {
        s = VERR("GET %s: field '[%d].id' of the vouch comment is not a positive integer", url, i);
        break;
      }
      *id = v;
      break;
    }
    i++;
  }
  cJSON_Delete(arr);
  return s;
}

void publish_reply_field(const char *body, const char *key, char *out, size_t cap) {
  if (cap) out[0] = 0;
  cJSON *j = body ? cJSON_Parse(body) : NULL;
  const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, key));
  if (v && cap) snprintf(out, cap, "%s", v);
  cJSON_Delete(j);
}
