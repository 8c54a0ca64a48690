#define _GNU_SOURCE
#include "runner/evidence/manifest.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <git2.h>

#include "common/redact.h"
#include "runner/evidence/sha256.h"
#include "suites/paths/paths.h"

#ifndef VOUCH_VERSION
#define VOUCH_VERSION "unknown"
#endif
#ifndef VOUCH_C_COMPILER
#define VOUCH_C_COMPILER "unknown"
#endif
#include "vouch_build_options.h" /* VOUCH_CMAKE_OPTIONS, configured by CMake */
#include "vouch_git_commit.h" /* VOUCH_GIT_COMMIT (build dir, cmake/git_commit.cmake) */
#ifndef VOUCH_BUILD_FLAGS
#define VOUCH_BUILD_FLAGS ""
#endif

extern char **environ;

static char *g_gpu_info; /* JSON array text from the CUDA side, or NULL */

void manifest_set_gpu_info(const char *json) {
  free(g_gpu_info);
  g_gpu_info = json ? strdup(json) : NULL;
}

void manifest_time_iso(char out[32]) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

bool manifest_name_is_secret(const char *name) {
  static const char *const words[] = {"TOKEN", "SECRET", "KEY", "PASSWORD", "PASS",
                                      "CREDENTIAL", "AUTH", "COOKIE", "SESSION"};
  char up[256];
  size_t n = 0;
  for (; name[n] && n + 1 < sizeof up; n++) up[n] = (char)toupper((unsigned char)name[n]);
  up[n] = 0;
  for (size_t i = 0; i < sizeof words / sizeof *words; i++)
    if (strstr(up, words[i])) return true;
  return false;
}

void manifest_strip_userinfo(const char *url, char *out, size_t cap) {
  const char *scheme = strstr(url, "://");
  const char *host = scheme ? scheme + 3 : url;
  const char *slash = strchr(host, '/');
  const char *at = strchr(host, '@');
  if (scheme && at && (!slash || at < slash)) {
    snprintf(out, cap, "%.*s%s", (int)(host - url), url, at + 1);
  } else {
    snprintf(out, cap, "%s", url);
  }
}

/* The allow-listed variables (redact_env_allowed), values redacted: a secret-looking name keeps
 * only "***"; any value loses a URL's password and anything that looks like a credential. */
static cJSON *environment_json(void) {
  /* sorted by name so the manifest does not depend on environ order */
  int n = 0;
  for (char **e = environ; e && *e; e++) n++;
  char **v = malloc((size_t)(n ? n : 1) * sizeof *v);
  cJSON *obj = cJSON_CreateObject();
  if (!v || !obj) { free(v); cJSON_Delete(obj); return NULL; }
  for (int i = 0; i < n; i++) v[i] = environ[i];
  for (int i = 1; i < n; i++)
    for (int k = i; k > 0 && strcmp(v[k - 1], v[k]) > 0; k--) { char *t = v[k]; v[k] = v[k - 1]; v[k - 1] = t; }
  for (int i = 0; i < n; i++) {
    const char *eq = strchr(v[i], '=');
    if (!eq || eq == v[i]) continue;
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(eq - v[i]), v[i]);
    if (cJSON_GetObjectItemCaseSensitive(obj, name) || !redact_env_allowed(name)) continue;
    if (manifest_name_is_secret(name)) {
      cJSON_AddStringToObject(obj, name, "***");
    } else {
      char val[4096];
      /* values that carry credentials in a URL (proxies) lose them too */
      manifest_strip_userinfo(eq + 1, val, sizeof val);
      redact_text(val);
      cJSON_AddStringToObject(obj, name, val);
    }
  }
  free(v);
  return obj;
}

static cJSON *hardware_json(void) {
  cJSON *h = cJSON_CreateObject();
  char model[256] = "unknown";
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[512];
    while (fgets(line, sizeof line, f)) {
      if (!strncmp(line, "model name", 10)) {
        char *c = strchr(line, ':');
        if (c) {
          c++;
          while (*c == ' ' || *c == '\t') c++;
          c[strcspn(c, "\n")] = 0;
          snprintf(model, sizeof model, "%s", c);
        }
        break;
      }
    }
    fclose(f);
  }
  cJSON_AddStringToObject(h, "cpu_model", model);
  cJSON_AddNumberToObject(h, "cpu_count", (double)sysconf(_SC_NPROCESSORS_ONLN));
  long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  cJSON_AddNumberToObject(h, "ram_bytes", pages > 0 && psz > 0 ? (double)pages * (double)psz : 0);
  struct utsname u;
  if (uname(&u) == 0) {
    char os[600];
    snprintf(os, sizeof os, "%s %s %s", u.sysname, u.release, u.machine);
    cJSON_AddStringToObject(h, "os", os);
  }
  cJSON *g = g_gpu_info ? cJSON_Parse(g_gpu_info) : NULL;
  if (g && !cJSON_IsArray(g)) {
    cJSON *a = cJSON_CreateArray();
    cJSON_AddItemToArray(a, g);
    g = a;
  }
  cJSON_AddItemToObject(h, "gpus", g ? g : cJSON_CreateArray());
  /* key: "<gpu name> x<count>" or the CPU model */
  char key[300];
  cJSON *g0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(h, "gpus"), 0);
  cJSON *gn = cJSON_GetObjectItemCaseSensitive(g0, "name");
  if (cJSON_IsString(gn))
    snprintf(key, sizeof key, "%s x%d", gn->valuestring, cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(h, "gpus")));
  else
    snprintf(key, sizeof key, "%s", model);
  cJSON_AddStringToObject(h, "key", key);
  return h;
}

const char *manifest_hardware_key(const cJSON *m) {
  const cJSON *k = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "hardware"), "key");
  return cJSON_IsString(k) ? k->valuestring : "";
}

static cJSON *str_or_null(const char *s) { return s && s[0] ? cJSON_CreateString(s) : cJSON_CreateNull(); }

/* PR facts from the GitHub Actions event payload, when there is one. */
static void read_event(int *pr, char *head, char *base, size_t cap) {
  const char *p = getenv("GITHUB_EVENT_PATH");
  if (!p || !*p) return;
  FILE *f = fopen(p, "rb");
  if (!f) return;
  char *buf = NULL;
  size_t n = 0, capb = 0, r;
  char tmp[8192];
  while ((r = fread(tmp, 1, sizeof tmp, f)) > 0 && n < (64u << 20)) {
    if (n + r + 1 > capb) {
      capb = (n + r + 1) * 2;
      char *nb = realloc(buf, capb);
      if (!nb) { free(buf); fclose(f); return; }
      buf = nb;
    }
    memcpy(buf + n, tmp, r);
    n += r;
  }
  fclose(f);
  if (!buf) return;
  buf[n] = 0;
  cJSON *ev = cJSON_Parse(buf);
  free(buf);
  cJSON *prj = cJSON_GetObjectItemCaseSensitive(ev, "pull_request");
  if (prj) {
    cJSON *num = cJSON_GetObjectItemCaseSensitive(prj, "number");
    if (cJSON_IsNumber(num)) *pr = num->valueint;
    cJSON *h = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(prj, "head"), "sha");
    cJSON *b = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(prj, "base"), "sha");
    if (cJSON_IsString(h)) snprintf(head, cap, "%s", h->valuestring);
    if (cJSON_IsString(b) && !base[0]) snprintf(base, cap, "%s", b->valuestring);
  }
  cJSON_Delete(ev);
}

vstatus manifest_subject(const char *repo_dir, const char *base_sha, cJSON **out) {
  cJSON *s = cJSON_CreateObject();
  if (!s) return VERR("manifest: subject: out of memory");
  char head[64] = "", base[64] = "", git_head[64] = "", remote[1024] = "", diff_hash[65] = "";
  int pr = -1, dirty = -1;
  if (base_sha) snprintf(base, sizeof base, "%s", base_sha);

  git_libgit2_init();
  git_repository *repo = NULL;
  if (git_repository_open_ext(&repo, repo_dir ? repo_dir : ".", 0, NULL) == 0) {
    git_oid oid;
    if (git_reference_name_to_id(&oid, repo, "HEAD") == 0) git_oid_tostr(git_head, sizeof git_head, &oid);
    git_remote *rm = NULL;
    if (git_remote_lookup(&rm, repo, "origin") == 0) {
      const char *u = git_remote_url(rm);
      if (u) manifest_strip_userinfo(u, remote, sizeof remote);
      git_remote_free(rm);
    }
    git_object *tree = NULL;
    if (git_head[0]) git_revparse_single(&tree, repo, "HEAD^{tree}");
    git_diff *diff = NULL;
    if (!git_repository_is_bare(repo) &&
        git_diff_tree_to_workdir_with_index(&diff, repo, (git_tree *)tree, NULL) == 0) {
      git_buf buf = {0};
      if (git_diff_to_buf(&buf, diff, GIT_DIFF_FORMAT_PATCH) == 0) {
        sha256_hex(buf.ptr ? buf.ptr : "", buf.size, diff_hash);
        dirty = git_diff_num_deltas(diff) > 0;
        git_buf_dispose(&buf);
      }
      git_diff_free(diff);
    }
    git_object_free(tree);
    git_repository_free(repo);
  }
  git_libgit2_shutdown();

  const char *gref = getenv("GITHUB_REF"), *gsha = getenv("GITHUB_SHA");
  const char *grepo = getenv("GITHUB_REPOSITORY"), *gbase = getenv("GITHUB_BASE_REF");
  if (gref && !strncmp(gref, "refs/pull/", 10)) pr = atoi(gref + 10);
  read_event(&pr, head, base, sizeof head);
  if (!head[0]) snprintf(head, sizeof head, "%s", git_head[0] ? git_head : (gsha ? gsha : ""));

  cJSON_AddItemToObject(s, "repo", str_or_null(grepo && *grepo ? grepo : remote));
  cJSON_AddItemToObject(s, "remote_url", str_or_null(remote));
  if (pr > 0) cJSON_AddNumberToObject(s, "pr", pr);
  else cJSON_AddNullToObject(s, "pr");
  cJSON_AddItemToObject(s, "head_sha", str_or_null(head));
  cJSON_AddItemToObject(s, "base_sha", str_or_null(base));
  cJSON_AddItemToObject(s, "git_head", str_or_null(git_head));
  if (dirty < 0) cJSON_AddNullToObject(s, "dirty");
  else cJSON_AddBoolToObject(s, "dirty", dirty);
  cJSON_AddItemToObject(s, "diff_sha256", str_or_null(diff_hash));
  cJSON *ci = cJSON_AddObjectToObject(s, "ci");
  cJSON_AddItemToObject(ci, "github_repository", str_or_null(grepo));
  cJSON_AddItemToObject(ci, "github_ref", str_or_null(gref));
  cJSON_AddItemToObject(ci, "github_sha", str_or_null(gsha));
  cJSON_AddItemToObject(ci, "github_base_ref", str_or_null(gbase));
  *out = s;
  return V_OK;
}

/* Sets m's "path_libs" to the libraries loaded so far (suites/paths/paths.h), each hashed now; leaves m without
 * it when none was loaded. A file that can no longer be read gets sha256 null. */
static void set_path_libs(cJSON *m) {
  cJSON_DeleteItemFromObjectCaseSensitive(m, "path_libs");
  cJSON *arr = NULL;
  for (int i = 0; i < vpaths_n_loaded(); i++) {
    const char *file;
    const vpath_ops *ops = vpaths_loaded(i, &file);
    if (!file) continue; /* registered in code, not loaded from a file */
    if (!arr && !(arr = cJSON_AddArrayToObject(m, "path_libs"))) return;
    cJSON *e = cJSON_CreateObject();
    if (!e) return;
    cJSON_AddStringToObject(e, "file", file);
    cJSON_AddStringToObject(e, "path", ops->name);
    char hex[65];
    if (sha256_file_hex(file, hex) == V_OK) cJSON_AddStringToObject(e, "sha256", hex);
    else cJSON_AddNullToObject(e, "sha256");
    cJSON_AddItemToArray(arr, e);
  }
}

vstatus manifest_build(const manifest_opts *o, cJSON **out) {
  *out = NULL;
  cJSON *m = cJSON_CreateObject();
  if (!m) return VERR("manifest: out of memory");
  cJSON_AddNumberToObject(m, "schema_version", MANIFEST_SCHEMA_VERSION);
  cJSON *tool = cJSON_AddObjectToObject(m, "tool");
  cJSON_AddStringToObject(tool, "name", "vouch");
  cJSON_AddStringToObject(tool, "version", VOUCH_VERSION);
  cJSON_AddStringToObject(tool, "commit", VOUCH_GIT_COMMIT);
  cJSON *subject = NULL;
  vstatus s = manifest_subject(o->repo_dir, o->base_sha, &subject);
  if (s) { cJSON_Delete(m); return s; }
  cJSON_AddItemToObject(m, "subject", subject);
  cJSON_AddItemToObject(m, "hardware", hardware_json());
  cJSON *b = cJSON_AddObjectToObject(m, "build");
  cJSON_AddStringToObject(b, "compiler", VOUCH_C_COMPILER);
  cJSON_AddStringToObject(b, "flags", VOUCH_BUILD_FLAGS);
  cJSON_AddStringToObject(b, "cmake_options", VOUCH_CMAKE_OPTIONS);
  const char *digest = getenv("VOUCH_IMAGE_DIGEST");
  if (digest && *digest) cJSON_AddStringToObject(b, "image_digest", digest);
  else cJSON_AddNullToObject(b, "image_digest");
#ifdef VOUCH_HAVE_CUDA
  cJSON_AddBoolToObject(b, "cuda", 1);
#else
  cJSON_AddBoolToObject(b, "cuda", 0);
#endif
#ifdef VOUCH_HAVE_NCCL
  cJSON_AddBoolToObject(b, "nccl", 1);
#else
  cJSON_AddBoolToObject(b, "nccl", 0);
#endif
  /* the plan as plan.json holds it (rundir writes files redacted), so the hash matches */
  char *pt = redact_dup(o->plan_text);
  if (!pt) { cJSON_Delete(m); return VERR("manifest: out of memory"); }
  char hash[65];
  sha256_hex(pt, strlen(pt), hash);
  cJSON *plan = cJSON_AddObjectToObject(m, "plan");
  cJSON_AddStringToObject(plan, "name", o->plan_name ? o->plan_name : "");
  cJSON_AddStringToObject(plan, "sha256", hash);
  cJSON_AddStringToObject(plan, "text", pt);
  free(pt);
  set_path_libs(m);
  cJSON *seeds = cJSON_AddArrayToObject(m, "seeds");
  for (int i = 0; i < o->n_seeds; i++) {
    if (o->seeds[i] <= (1ULL << 53)) {
      cJSON_AddItemToArray(seeds, cJSON_CreateNumber((double)o->seeds[i]));
    } else {
      char t[32];
      snprintf(t, sizeof t, "%llu", (unsigned long long)o->seeds[i]);
      cJSON_AddItemToArray(seeds, cJSON_CreateString(t));
    }
  }
  char now[32];
  manifest_time_iso(now);
  cJSON_AddStringToObject(m, "started_at", now);
  cJSON_AddNullToObject(m, "ended_at");
  cJSON *cmd = cJSON_AddArrayToObject(m, "command_line");
  bool hide_next = false;
  for (int i = 0; i < o->argc; i++) {
    const char *a = o->argv[i] ? o->argv[i] : "";
    char buf[512];
    const char *eq = strchr(a, '=');
    if (hide_next) {
      snprintf(buf, sizeof buf, "***");
    } else if (a[0] == '-' && eq) {
      /* --api-token=VALUE keeps the name, hides the value */
      char name[256];
      snprintf(name, sizeof name, "%.*s", (int)(eq - a), a);
      if (manifest_name_is_secret(name)) snprintf(buf, sizeof buf, "%s=***", name);
      else snprintf(buf, sizeof buf, "%s", a);
    } else {
      snprintf(buf, sizeof buf, "%s", a);
    }
    hide_next = a[0] == '-' && !eq && manifest_name_is_secret(a);
    redact_text(buf);
    cJSON_AddItemToArray(cmd, cJSON_CreateString(buf));
  }
  cJSON *env = environment_json();
  if (!env) { cJSON_Delete(m); return VERR("manifest: environment: out of memory"); }
  cJSON_AddItemToObject(m, "environment", env);
  cJSON_AddStringToObject(m, "verdict", "incomplete");
  *out = m;
  return V_OK;
}

vstatus manifest_finish(cJSON *m, const char *verdict) {
  set_path_libs(m); /* plan steps may have loaded libraries of their own (--path-lib in a step's args) */
  char now[32];
  manifest_time_iso(now);
  if (!cJSON_ReplaceItemInObjectCaseSensitive(m, "ended_at", cJSON_CreateString(now)) ||
      !cJSON_ReplaceItemInObjectCaseSensitive(m, "verdict", cJSON_CreateString(verdict)))
    return VERR("manifest: fields 'ended_at'/'verdict': missing");
  return V_OK;
}
