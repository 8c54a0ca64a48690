/* Credential redaction by value (common/redact.h). */
#define _GNU_SOURCE
#include "common/redact.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/vstatus.h"

#define ENTROPY_MIN_LEN 32      /* shortest run judged by entropy */
#define ENTROPY_MIN_BITS 4.0    /* bits per character of such a run */
#define ENTROPY_MAX_LOWER_PAIRS 0.45 /* at most this share of adjacent lower-case pairs */

static bool is_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
static bool is_upper_digit(char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
static bool is_b64url(char c) { return is_alnum(c) || c == '_' || c == '-'; }
static bool is_b64std(char c) { return is_alnum(c) || c == '+' || c == '/'; }
static bool is_b64std_segment(char c) { return is_alnum(c) || c == '+'; }
static bool islower_c(char c) { return c >= 'a' && c <= 'z'; }
/* Characters that continue a name or a base64 run ('=' and ':' separate "key=value"). */
static bool is_run_char(char c) { return is_alnum(c) || c == '+' || c == '/' || c == '_' || c == '-' || c == '.'; }
static bool is_word(char c) { return is_alnum(c) || c == '_'; }
static bool is_dash_word(char c) { return is_word(c) || c == '-'; }

/* Length of the run of characters of class `ok` at s (at most `max`, 0 = no limit). */
static size_t run_len(const char *s, bool (*ok)(char), size_t max) {
  size_t n = 0;
  while (s[n] && ok(s[n]) && (max == 0 || n < max)) n++;
  return n;
}

/* prefix + at least `min` characters of class `ok`: the match length, 0 when none. */
static size_t prefixed(const char *s, const char *prefix, bool (*ok)(char), size_t min) {
  size_t p = strlen(prefix);
  if (strncmp(s, prefix, p) != 0) return 0;
  size_t n = run_len(s + p, ok, 0);
  return n >= min ? p + n : 0;
}

/* A JWT: three base64url parts, the first two starting with eyJ ('{"'). */
static size_t jwt(const char *s) {
  if (strncmp(s, "eyJ", 3) != 0) return 0;
  size_t a = run_len(s, is_b64url, 0);
  if (a < 10 || s[a] != '.' || strncmp(s + a + 1, "eyJ", 3) != 0) return 0;
  size_t b = run_len(s + a + 1, is_b64url, 0);
  if (b < 10 || s[a + 1 + b] != '.') return 0;
  size_t c = run_len(s + a + 2 + b, is_b64url, 0);
  return c >= 10 ? a + 2 + b + c : 0;
}

static size_t aws_key_id(const char *s) {
  if (strncmp(s, "AKIA", 4) != 0 && strncmp(s, "ASIA", 4) != 0) return 0;
  size_t n = run_len(s + 4, is_upper_digit, 0);
  return n == 16 && !is_alnum(s[20]) ? 20 : 0;
}

/* A run of standard base64 characters (and its '=' padding) that looks random: upper case, lower case and digits
 * all present, a high Shannon entropy per character, and few adjacent lower-case pairs (words
 * in identifiers and paths have many: "KernelVariant"; random text about 1 in 6). Runs with
 * '_', '-' or '.' are identifiers or names, not judged here. segment: s is one '/'-separated
 * part of a path (path_run), judged without the '/' and what follows it. */
static size_t high_entropy(const char *s, bool segment) {
  size_t n = run_len(s, segment ? is_b64std_segment : is_b64std, 0), pad = 0;
  while (pad < 2 && s[n + pad] == '=') pad++;
  if (n < ENTROPY_MIN_LEN || is_word(s[n + pad]) || s[n + pad] == '-' || s[n + pad] == '.') return 0;
  bool up = false, lo = false, dg = false;
  unsigned count[256] = {0};
  size_t lower_pairs = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    up |= c >= 'A' && c <= 'Z';
    lo |= c >= 'a' && c <= 'z';
    dg |= c >= '0' && c <= '9';
    count[c]++;
    if (i && islower_c(s[i - 1]) && islower_c(s[i])) lower_pairs++;
  }
  if (!(up && lo && dg) || (double)lower_pairs > ENTROPY_MAX_LOWER_PAIRS * (double)(n - 1)) return 0;
  double h = 0;
  for (int c = 0; c < 256; c++)
    if (count[c]) {
      double p = (double)count[c] / (double)n;
      h -= p * log2(p);
    }
  return h >= ENTROPY_MIN_BITS ? n + pad : 0;
}

/* The length of the base64 run at s when it is a path of '/'-separated parts, 0 when not. Random
 * base64 holds one '/' in 64 characters, so a run of n characters with at least 3 + n/16 of them
 * is a path (a record id "linear/latency/table/edge/129x1031/B17/heavy/s1000", a file path): for
 * random text that happens with probability below 2e-4 at any n (a Poisson tail: n = 40, an AWS
 * secret key's length, needs 6 where 0.6 are expected). A path's parts are judged one by one. */
static size_t path_run(const char *s) {
  size_t n = run_len(s, is_b64std, 0), slashes = 0;
  for (size_t i = 0; i < n; i++) slashes += s[i] == '/';
  return n >= ENTROPY_MIN_LEN && 16 * slashes >= 48 + n ? n : 0;
}

/* The credential starting at s: its length, 0 when none. word_start: s is not preceded by a
 * letter, digit or '_' (prefix patterns); run_start: nor by '+', '/', '-' or '.' (entropy), or s
 * starts a part of a path (in_path: entropy judged up to the next '/'). */
static size_t credential_at(const char *s, bool word_start, bool run_start, bool in_path) {
  if (!word_start) return 0;
  static const char *const gh[] = {"ghp_", "gho_", "ghs_", "ghu_", "ghr_"};
  size_t n;
  for (size_t i = 0; i < sizeof gh / sizeof *gh; i++)
    if ((n = prefixed(s, gh[i], is_alnum, 20))) return n;
  if ((n = prefixed(s, "github_pat_", is_word, 20))) return n;
  if ((n = prefixed(s, "hf_", is_alnum, 20))) return n;
  if ((n = prefixed(s, "sk-", is_dash_word, 20))) return n;
  static const char *const slack[] = {"xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-"};
  for (size_t i = 0; i < sizeof slack / sizeof *slack; i++)
    if ((n = prefixed(s, slack[i], is_dash_word, 10))) return n;
  if ((n = aws_key_id(s))) return n;
  if ((n = jwt(s))) return n;
  return run_start ? high_entropy(s, in_path) : 0;
}

/* At s = "://": the length of "user:password" that follows (before '@' and before any '/'),
 * 0 when the URL carries no password. */
static size_t url_userinfo(const char *s) {
  if (strncmp(s, "://", 3) != 0) return 0;
  const char *h = s + 3;
  size_t end = strcspn(h, "/@ \t\r\n\"'<>");
  if (h[end] != '@') return 0;
  const char *colon = memchr(h, ':', end);
  return colon && colon > h ? end : 0;
}

int redact_text(char *s) {
  if (!s) return 0;
  int hits = 0;
  size_t r = 0, w = 0;
  size_t path_end = 0; /* s[r] with r < path_end is in a path (path_run): its parts are judged alone */
  while (s[r]) {
    bool run_start = r == 0 || !is_run_char(s[r - 1]);
    if (run_start && r >= path_end) {
      size_t p = path_run(s + r);
      if (p) path_end = r + p;
    }
    bool in_path = r < path_end;
    if (in_path && r > 0 && s[r - 1] == '/') run_start = true;
    size_t n = credential_at(s + r, r == 0 || !is_word(s[r - 1]), run_start, in_path);
    if (n > 0) {
      memcpy(s + w, REDACTED, 3);
      w += 3;
      r += n;
      hits++;
      continue;
    }
    size_t u = url_userinfo(s + r);
    if (u > 0) {
      memmove(s + w, "://", 3);
      memcpy(s + w + 3, REDACTED, 3);
      w += 6;
      r += 3 + u;
      hits++;
      continue;
    }
    s[w++] = s[r++];
  }
  s[w] = 0;
  return hits;
}

char *redact_dup(const char *s) {
  char *d = strdup(s ? s : "");
  if (d) redact_text(d);
  return d;
}

bool redact_has_credential(const char *s) {
  char *d = strdup(s ? s : "");
  if (!d) return true; /* cannot tell: treat as a credential */
  bool hit = redact_text(d) > 0;
  free(d);
  return hit;
}

bool redact_env_allowed(const char *name) {
  static const char *const prefixes[] = {
      "CUDA_", "NCCL_", "OMP_", "GOMP_", "KMP_", "VOUCH_", "NVIDIA_", "CUBLAS_", "CUBLASLT_", "CUDNN_",
      "OPENBLAS_", "MKL_", "NVSHMEM_", "UCX_", "PYTORCH_", "TORCH_", "SLURM_JOB_", "SLURM_STEP_", "LC_"};
  static const char *const names[] = {
      "CI", "GITHUB_ACTIONS", "GITHUB_RUN_ID", "GITHUB_RUN_NUMBER", "GITHUB_RUN_ATTEMPT", "GITHUB_JOB",
      "GITHUB_WORKFLOW", "GITHUB_EVENT_NAME", "GITHUB_REPOSITORY", "GITHUB_REF", "GITHUB_REF_NAME",
      "GITHUB_SHA", "GITHUB_BASE_REF", "GITHUB_HEAD_REF", "GITHUB_SERVER_URL", "RUNNER_OS",
      "RUNNER_ARCH", "RUNNER_NAME", "CI_JOB_ID", "CI_PIPELINE_ID", "CI_MERGE_REQUEST_IID",
      "CI_COMMIT_SHA", "CI_PROJECT_PATH", "BUILDKITE_BUILD_NUMBER", "BUILDKITE_JOB_ID",
      "BUILDKITE_PULL_REQUEST", "BUILDKITE_COMMIT", "LANG", "TZ", "LD_LIBRARY_PATH", "LD_PRELOAD",
      "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"};
  if (!name) return false;
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (!strcmp(name, names[i])) return true;
  for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
    if (!strncmp(name, prefixes[i], strlen(prefixes[i]))) return true;
  return false;
}

/* ---- the line-redacting stream (fopencookie) ---- */

typedef struct {
  FILE *f;       /* destination (owned) */
  char *line;    /* [cap] the current line, without its newline */
  size_t n, cap; /* used, allocated */
} rstream;

static int flush_line(rstream *c, bool newline) {
  if (!c->line) return 0;
  c->line[c->n] = 0;
  redact_text(c->line);
  int bad = fputs(c->line, c->f) == EOF;
  if (newline) bad |= fputc('\n', c->f) == EOF;
  c->n = 0;
  return bad ? -1 : 0;
}

static ssize_t rs_write(void *cookie, const char *buf, size_t size) {
  rstream *c = cookie;
  for (size_t i = 0; i < size; i++) {
    if (buf[i] == '\n') {
      if (flush_line(c, true)) return -1;
      continue;
    }
    if (c->n + 2 > c->cap) {
      size_t cap = c->cap ? 2 * c->cap : 256;
      char *l = realloc(c->line, cap);
      if (!l) return -1;
      c->line = l;
      c->cap = cap;
    }
    c->line[c->n++] = buf[i];
  }
  return (ssize_t)size;
}

static int rs_close(void *cookie) {
  rstream *c = cookie;
  int rc = c->n ? flush_line(c, false) : 0;
  rc |= fclose(c->f) == EOF ? -1 : 0;
  free(c->line);
  free(c);
  return rc;
}

FILE *redact_stream(FILE *f) {
  if (!f) return NULL;
  rstream *c = calloc(1, sizeof *c);
  if (!c) { fclose(f); VERR("redacting log stream: out of memory"); return NULL; }
  c->f = f;
  cookie_io_functions_t io = {.read = NULL, .write = rs_write, .seek = NULL, .close = rs_close};
  FILE *out = fopencookie(c, "w", io);
  if (!out) { fclose(f); free(c); VERR("redacting log stream: cannot create it"); return NULL; }
  return out;
}
