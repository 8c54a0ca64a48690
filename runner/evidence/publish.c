#define _GNU_SOURCE
#include "runner/evidence/publish.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "common/redact.h"
#include "runner/evidence/publish_reply.h"
#include "runner/evidence/report.h"

vstatus publish_parse_pr(const char *spec, char *repo, size_t cap, int *pr) {
  const char *hash = spec ? strchr(spec, '#') : NULL;
  const char *slash = spec ? strchr(spec, '/') : NULL;
  if (!hash || !slash || slash > hash || slash == spec || hash == slash + 1 || !hash[1])
    return VERR("--pr: '%s' is not OWNER/REPO#NUMBER", spec ? spec : "");
  for (const char *p = spec; p < hash; p++)
    if (!(isalnum((unsigned char)*p) || *p == '-' || *p == '_' || *p == '.' || (*p == '/' && p == slash)))
      return VERR("--pr: '%s': unexpected character '%c' in OWNER/REPO", spec, *p);
  char *end;
  long n = strtol(hash + 1, &end, 10);
  if (*end || n <= 0 || n > 1000000000L) return VERR("--pr: '%s': the pull request number must be a positive integer", spec);
  if ((size_t)(hash - spec) >= cap) return VERR("--pr: '%s': too long", spec);
  snprintf(repo, cap, "%.*s", (int)(hash - spec), spec);
  *pr = (int)n;
  return V_OK;
}

typedef publish_reply resp;

static size_t on_body(char *p, size_t sz, size_t nm, void *u) { return publish_reply_body(u, p, sz * nm); }

static size_t on_header(char *p, size_t sz, size_t nm, void *u) {
  publish_reply_header(u, p, sz * nm);
  return sz * nm;
}

typedef struct {
  const publish_opts *o;
  const char *token;     /* never printed */
  double waited;         /* seconds slept so far */
  double max_wait;       /* cap on the total */
} client;

static void sleep_s(double s) {
  if (s <= 0) return;
  struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
  nanosleep(&ts, NULL);
}

/* One API call with retries. *status gets the final HTTP code. */
static vstatus http(client *c, const char *method, const char *url, const char *body, long *code, resp *r) {
  double backoff = 1.0;
  for (int attempt = 1;; attempt++) {
    memset(r, 0, sizeof *r);
    publish_reply_init(r);
    CURL *h = curl_easy_init();
    if (!h) return VERR("%s %s: cannot initialise libcurl", method, url);
    char auth[512], ua[64], errbuf[CURL_ERROR_SIZE] = "";
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->token);
    snprintf(ua, sizeof ua, "vouch/%s", VOUCH_VERSION);
    struct curl_slist *hd = NULL;
    hd = curl_slist_append(hd, auth);
    hd = curl_slist_append(hd, "Accept: application/vnd.github+json");
    hd = curl_slist_append(hd, "X-GitHub-Api-Version: 2022-11-28");
    hd = curl_slist_append(hd, "Content-Type: application/json");
    memset(auth, 0, sizeof auth);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_USERAGENT, ua);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L); /* never carry the token elsewhere */
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    if (body) curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    CURLcode rc = curl_easy_perform(h);
    *code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, code);
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    if (rc != CURLE_OK) {
      free(r->data);
      r->data = NULL;
      return VERR("%s %s: cannot reach the API: %s (curl error %d)", method, url, errbuf[0] ? errbuf : curl_easy_strerror(rc), (int)rc);
    }
    bool limited = *code == 429 || (*code == 403 && (r->retry_after >= 0 || r->rl_remaining == 0));
    bool retry = *code >= 500 || limited;
    if (!retry) return V_OK;
    double wait = backoff;
    if (r->retry_after >= 0) wait = r->retry_after;
    else if (limited && r->rl_remaining == 0 && r->rl_reset > 0) wait = fmax(1.0, r->rl_reset - (double)time(NULL));
    if (attempt >= 6 || c->waited + wait > c->max_wait) {
      free(r->data);
      r->data = NULL;
      return VERR("%s %s: HTTP %ld%s; gave up after %d attempts and %.0f s of waiting (VOUCH_PUBLISH_MAX_WAIT=%.0f)",
                  method, url, *code, limited ? " (rate limited)" : " (server error)", attempt, c->waited, c->max_wait);
    }
    fprintf(c->o->out, "publish: %s %s: HTTP %ld, retrying in %.1f s\n", method, url, *code, wait);
    free(r->data);
    r->data = NULL;
    sleep_s(wait);
    c->waited += wait;
    backoff *= 2;
  }
}

static vstatus check_code(const char *method, const char *url, long code, const resp *r) {
  if (code >= 200 && code < 300) return V_OK;
  char m[256];
  publish_reply_field(r->data, "message", m, sizeof m);
  const char *hint = code == 401 ? "the token was rejected: check GITHUB_TOKEN"
                     : code == 403 ? "forbidden: the token lacks permission (pull-requests: write / statuses: write)"
                     : code == 404 ? "not found: check OWNER/REPO and the PR number, and that the token can see the repository"
                     : "unexpected reply";
  return VERR("%s %s: HTTP %ld: %s%s%s%s", method, url, code, hint, m[0] ? " (GitHub: " : "", m, m[0] ? ")" : "");
}

static void dry(const publish_opts *o, const char *method, const char *url, const char *body) {
  fprintf(o->out, "%s %s\nAuthorization: Bearer ***\nAccept: application/vnd.github+json\nX-GitHub-Api-Version: 2022-11-28\n",
          method, url);
  if (body) fprintf(o->out, "Content-Type: application/json\n\n%s\n", body);
  fprintf(o->out, "\n");
}

static char *json_body(const char *key1, const char *v1, const char *key2, const char *v2, const char *key3,
                       const char *v3, const char *key4, const char *v4) {
  cJSON *j = cJSON_CreateObject();
  const char *k[] = {key1, key2, key3, key4}, *v[] = {v1, v2, v3, v4};
  for (int i = 0; i < 4; i++)
    if (k[i] && v[i]) cJSON_AddStringToObject(j, k[i], v[i]);
  char *t = cJSON_PrintUnformatted(j);
  cJSON_Delete(j);
  return t;
}

/* Finds the comment holding the marker; *id gets its number (0 when none). */
static vstatus find_comment(client *c, const char *base, double *id) {
  char url[2048];
  snprintf(url, sizeof url, "%s/repos/%s/issues/%d/comments?per_page=100", base, c->o->repo, c->o->pr);
  *id = 0;
  for (int page = 0; page < 100 && url[0]; page++) {
    long code;
    resp r;
    VTRY(http(c, "GET", url, NULL, &code, &r));
    vstatus s = check_code("GET", url, code, &r);
    if (s) { free(r.data); return s; }
    s = publish_reply_find_comment(r.data, REPORT_MARKER, url, id);
    free(r.data);
    if (s || *id) return s;
    /* follow Link: rel="next" only on the same API host (the token goes with it) */
    if (r.next[0] && !strncmp(r.next, base, strlen(base))) snprintf(url, sizeof url, "%s", r.next);
    else url[0] = 0;
  }
  return V_OK;
}

vstatus publish_run(const publish_opts *o, char *url_out, size_t cap) {
  if (url_out && cap) url_out[0] = 0;
  char base[1024];
  snprintf(base, sizeof base, "%s", o->api_url && *o->api_url ? o->api_url : "https://api.github.com");
  size_t bl = strlen(base);
  while (bl && base[bl - 1] == '/') base[--bl] = 0;
  if (strncmp(base, "https://", 8) && strncmp(base, "http://127.0.0.1", 16) && strncmp(base, "http://localhost", 16))
    return VERR("--api-url: '%s': must be https:// (plain http only for localhost)", base);
  const char *state = o->verdict && !strcmp(o->verdict, "pass") ? "success" : "failure";
  char desc[140];
  snprintf(desc, sizeof desc, "vouch: %s", o->verdict ? o->verdict : "unknown");
  const char *target = o->target_url && (!strncmp(o->target_url, "https://", 8) || !strncmp(o->target_url, "http://", 7))
                           ? o->target_url : NULL;
  char url[2048];
  char *rbody = redact_dup(o->body); /* the comment is public: no credential in it */
  char *cbody = rbody ? json_body("body", rbody, NULL, NULL, NULL, NULL, NULL, NULL) : NULL;
  free(rbody);
  char *sbody = json_body("state", state, "context", "vouch", "description", desc, "target_url", target);
  if (!cbody || !sbody) { free(cbody); free(sbody); return VERR("publish: out of memory"); }
  vstatus s = V_OK;
  if (o->status && (!o->head_sha || strlen(o->head_sha) < 7)) {
    s = VERR("--status: the manifest has no subject.head_sha to set a status on");
    goto out;
  }
  if (o->dry_run) {
    snprintf(url, sizeof url, "%s/repos/%s/issues/%d/comments?per_page=100", base, o->repo, o->pr);
    dry(o, "GET", url, NULL);
    fprintf(o->out, "# then, if a comment contains %s:\n", REPORT_MARKER);
    snprintf(url, sizeof url, "%s/repos/%s/issues/comments/{id}", base, o->repo);
    dry(o, "PATCH", url, cbody);
    fprintf(o->out, "# otherwise:\n");
    snprintf(url, sizeof url, "%s/repos/%s/issues/%d/comments", base, o->repo, o->pr);
    dry(o, "POST", url, cbody);
    if (o->status) {
      snprintf(url, sizeof url, "%s/repos/%s/statuses/%s", base, o->repo, o->head_sha);
      dry(o, "POST", url, sbody);
    }
    goto out;
  }
  const char *token = getenv("GITHUB_TOKEN");
  if (!token || !*token) { s = VERR("publish: GITHUB_TOKEN is not set (a token with pull-requests: write)"); goto out; }
  if (strpbrk(token, "\r\n")) { s = VERR("publish: GITHUB_TOKEN contains a line break"); goto out; }
  const char *mw = getenv("VOUCH_PUBLISH_MAX_WAIT");
  client c = {o, token, 0, mw && *mw ? atof(mw) : 120.0};
  curl_global_init(CURL_GLOBAL_DEFAULT);
  double id = 0;
  if ((s = find_comment(&c, base, &id))) goto out_curl;
  const char *method = id ? "PATCH" : "POST";
  if (id) snprintf(url, sizeof url, "%s/repos/%s/issues/comments/%.0f", base, o->repo, id);
  else snprintf(url, sizeof url, "%s/repos/%s/issues/%d/comments", base, o->repo, o->pr);
  long code;
  resp r;
  if ((s = http(&c, method, url, cbody, &code, &r))) goto out_curl;
  s = check_code(method, url, code, &r);
  if (s == V_OK) {
    char hu[2048];
    publish_reply_field(r.data, "html_url", hu, sizeof hu);
    if (hu[0] && url_out) snprintf(url_out, cap, "%s", hu);
    fprintf(o->out, "publish: %s comment on %s#%d%s%s\n", id ? "updated" : "created", o->repo, o->pr, hu[0] ? ": " : "", hu);
  }
  free(r.data);
  if (s || !o->status) goto out_curl;
  snprintf(url, sizeof url, "%s/repos/%s/statuses/%s", base, o->repo, o->head_sha);
  if ((s = http(&c, "POST", url, sbody, &code, &r))) goto out_curl;
  s = check_code("POST", url, code, &r);
  free(r.data);
  if (s == V_OK) fprintf(o->out, "publish: status '%s' (context vouch) on %.12s\n", state, o->head_sha);
out_curl:
  curl_global_cleanup();
out:
  free(cbody);
  free(sbody);
  return s;
}
