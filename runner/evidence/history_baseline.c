/* `vouch history baseline`: the run a pull request is compared with. A candidate is a run
 * of the same plan content (sha256 of the plan text; the name is only shown), on the same
 * hardware key, that finished, that was not a pull-request run, and whose head commit is
 * the base commit or one of its ancestors in the given repository. The nearest ancestor
 * wins, the newest run of that commit first. Every run that was passed over is counted
 * under the reason it was passed over, so the answer says why it is what it is. */
#define _GNU_SOURCE
#include "runner/evidence/history.h"

#include <git2.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "common/read_file.h"
#include "runner/evidence/sha256.h"
#include "suites/plans/plans.h"

static bool is_hex64(const char *s) { return strlen(s) == 64 && strspn(s, "0123456789abcdef") == 64; }

vstatus history_plan_identity(const char *plan, char hash[65], char *name, size_t cap) {
  if (is_hex64(plan)) {
    snprintf(hash, 65, "%s", plan);
    snprintf(name, cap, "%.12s", plan);
    return V_OK;
  }
  for (const vplan_text *p = vouch_plans; p->name; p++)
    if (!strcmp(p->name, plan)) {
      snprintf(name, cap, "%s", p->name);
      return sha256_hex(p->text, p->len, hash);
    }
  char *text = NULL;
  size_t n = 0;
  if (vfile_read(plan, &text, &n)) {
    verr_clear();
    return VERR("--plan %s: neither a built-in plan, a readable plan file nor a 64-digit sha256", plan);
  }
  vstatus s = sha256_hex(text, strlen(text), hash); /* the manifest hashes the text up to its first NUL */
  cJSON *j = cJSON_Parse(text);
  const char *own = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "name"));
  snprintf(name, cap, "%s", own ? own : plan);
  cJSON_Delete(j);
  free(text);
  return s;
}

typedef struct {
  int pr, incomplete, not_ancestor, unknown_commit, no_head;
} skipped;

static void add_fmt(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add_fmt(char *buf, size_t cap, const char *fmt, ...) {
  size_t k = strlen(buf);
  if (k >= cap) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + k, cap - k, fmt, ap);
  va_end(ap);
}

static const char *col(sqlite3_stmt *st, int i) {
  const char *v = (const char *)sqlite3_column_text(st, i);
  return v ? v : "";
}

/* Runs of a plan with this name but other content: not comparable, worth saying. */
static int other_versions(sqlite3 *h, const char *name, const char *hash, const char *hw) {
  sqlite3_stmt *st = NULL;
  int n = 0;
  if (sqlite3_prepare_v2(h, "SELECT count(*) FROM runs WHERE plan = ?1 AND plan_sha256 != ?2 AND hardware = ?3", -1, &st,
                         NULL) == SQLITE_OK) {
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, hash, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, hw, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int(st, 0);
  }
  sqlite3_finalize(st);
  return n;
}

/* A plan known only by name (a file of another machine): the newest run's plan of that name. */
static bool hash_by_name(const char *db, const char *name, char hash[65]) {
  void *hv = NULL;
  if (history_open(db, false, &hv)) { verr_clear(); return false; }
  sqlite3 *h = hv;
  sqlite3_stmt *st = NULL;
  bool ok = false;
  if (sqlite3_prepare_v2(h, "SELECT plan_sha256 FROM runs WHERE plan = ?1 ORDER BY id DESC LIMIT 1", -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) {
      snprintf(hash, 65, "%s", (const char *)sqlite3_column_text(st, 0));
      ok = true;
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  return ok;
}

vstatus history_baseline(const char *db, const history_query *q, cJSON **out) {
  *out = NULL;
  char hash[65], pname[128];
  bool by_name = false;
  if (history_plan_identity(q->plan, hash, pname, sizeof pname)) {
    verr_clear();
    if (!hash_by_name(db, q->plan, hash)) {
      *out = cJSON_CreateObject();
      cJSON_AddBoolToObject(*out, "found", false);
      char why[600];
      snprintf(why, sizeof why, "no baseline: '%.200s' is not a built-in plan, a plan file or a sha256, and no run of a plan "
               "of that name is in the history store", q->plan);
      cJSON_AddStringToObject(*out, "why", why);
      return V_OK;
    }
    snprintf(pname, sizeof pname, "%s", q->plan);
    by_name = true;
  }
  git_libgit2_init();
  git_repository *repo = NULL;
  git_oid base;
  bool have_base = false, exact_only = false;
  char base_hex[GIT_OID_HEXSZ + 1] = "";
  vstatus e = V_OK;
  if (q->base) {
    char spec[300];
    snprintf(spec, sizeof spec, "%s^{commit}", q->base);
    git_object *obj = NULL;
    if (git_repository_open_ext(&repo, q->repo ? q->repo : ".", 0, NULL) == 0 && git_revparse_single(&obj, repo, spec) == 0) {
      git_oid_cpy(&base, git_object_id(obj));
      have_base = true;
      git_object_free(obj);
    } else if (strlen(q->base) == 40 && strspn(q->base, "0123456789abcdef") == 40) {
      git_oid_fromstr(&base, q->base); /* no repository that knows it: only that exact commit qualifies */
      have_base = exact_only = true;
    } else {
      e = VERR("--base %s: not a commit of the repository at %s; give the 40-digit sha", q->base, q->repo ? q->repo : ".");
    }
  }
  void *hv = NULL;
  if (e == V_OK) e = history_open(db, false, &hv);
  sqlite3 *h = hv;
  sqlite3_stmt *st = NULL;
  if (e == V_OK && sqlite3_prepare_v2(h, "SELECT id, run_dir, coalesce(bundle, ''), verdict, coalesce(head_sha, ''), pr, "
                                      "coalesce(ref, ''), coalesce(ended_at, ''), plan FROM runs WHERE plan_sha256 = ?1 AND "
                                      "hardware = ?2 ORDER BY id DESC", -1, &st, NULL) != SQLITE_OK)
    e = VERR("history: %s", sqlite3_errmsg(h));
  if (e) goto done;
  if (have_base) git_oid_tostr(base_hex, sizeof base_hex, &base);
  sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, q->hardware, -1, SQLITE_STATIC);
  skipped sk = {0};
  int rows = 0, eligible = 0;
  size_t best_dist = (size_t)-1;
  cJSON *best = NULL;
  while (sqlite3_step(st) == SQLITE_ROW) {
    rows++;
    const char *verdict = col(st, 3), *head = col(st, 4), *ref = col(st, 6);
    if (sqlite3_column_type(st, 5) != SQLITE_NULL || !strncmp(ref, "refs/pull/", 10)) { sk.pr++; continue; }
    if (!strcmp(verdict, "incomplete") || !verdict[0]) { sk.incomplete++; continue; }
    size_t dist = 0;
    if (have_base) {
      git_oid ho;
      if (strlen(head) != 40 || git_oid_fromstr(&ho, head) != 0) { sk.no_head++; continue; }
      if (git_oid_equal(&ho, &base)) dist = 0;
      else if (exact_only) { sk.unknown_commit++; continue; }
      else {
        size_t ahead = 0, behind = 0;
        git_commit *c = NULL;
        if (git_commit_lookup(&c, repo, &ho) != 0) { sk.unknown_commit++; continue; }
        git_commit_free(c);
        if (git_graph_ahead_behind(&ahead, &behind, repo, &base, &ho) != 0 || behind != 0) { sk.not_ancestor++; continue; }
        dist = ahead; /* commits of the base that the run's head lacks */
      }
    }
    eligible++;
    if (best && dist >= best_dist) continue; /* rows come newest first: a tie keeps the newer run */
    cJSON_Delete(best);
    best = cJSON_CreateObject();
    best_dist = dist;
    const char *path = col(st, 2)[0] ? col(st, 2) : col(st, 1);
    cJSON_AddNumberToObject(best, "run_id", (double)sqlite3_column_int64(st, 0));
    cJSON_AddStringToObject(best, "path", path);
    cJSON_AddStringToObject(best, "run_dir", col(st, 1));
    cJSON_AddStringToObject(best, "bundle", col(st, 2));
    cJSON_AddStringToObject(best, "verdict", verdict);
    cJSON_AddStringToObject(best, "head_sha", head);
    cJSON_AddStringToObject(best, "ended_at", col(st, 7));
    cJSON_AddStringToObject(best, "plan", col(st, 8));
    if (have_base) cJSON_AddNumberToObject(best, "commits_before_base", (double)dist);
  }
  char why[1024] = "";
  if (best) {
    add_fmt(why, sizeof why, "run %d (ended %s, head %.12s): plan %s sha256 %.12s, hardware %s, not a pull-request run, verdict %s",
            cJSON_GetObjectItemCaseSensitive(best, "run_id")->valueint, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(best, "ended_at")),
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(best, "head_sha")), pname, hash, q->hardware,
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(best, "verdict")));
    if (have_base && best_dist == 0) add_fmt(why, sizeof why, "; its head is the base commit %.12s", base_hex);
    else if (have_base) add_fmt(why, sizeof why, "; its head is %zu commit(s) before the base commit %.12s (no run of a nearer one)", best_dist, base_hex);
    else add_fmt(why, sizeof why, "; no --base given: the newest such run");
    add_fmt(why, sizeof why, "; %d of %d run(s) of this plan and hardware qualified", eligible, rows);
  } else {
    add_fmt(why, sizeof why, "no baseline: %d run(s) of plan %s (sha256 %.12s) on '%s'", rows, pname, hash, q->hardware);
    if (have_base) add_fmt(why, sizeof why, " at or before base %.12s", base_hex);
  }
  if (by_name)
    add_fmt(why, sizeof why, "; plan '%s' is not a built-in plan or a file here: its identity is the newest run's plan of "
            "that name", pname);
  if (sk.pr) add_fmt(why, sizeof why, "; skipped %d pull-request run(s)", sk.pr);
  if (sk.incomplete) add_fmt(why, sizeof why, "; skipped %d unfinished run(s)", sk.incomplete);
  if (sk.not_ancestor) add_fmt(why, sizeof why, "; skipped %d run(s) whose head is not an ancestor of the base", sk.not_ancestor);
  if (sk.unknown_commit)
    add_fmt(why, sizeof why, "; skipped %d run(s) of commits %s", sk.unknown_commit,
            exact_only ? "other than the base (no repository to check ancestry: pass --repo)" : "unknown to the repository");
  if (sk.no_head) add_fmt(why, sizeof why, "; skipped %d run(s) without a head commit", sk.no_head);
  int other = other_versions(h, pname, hash, q->hardware);
  if (other) add_fmt(why, sizeof why, "; %d run(s) of another version of a plan named %s (different content: not comparable)", other, pname);
  *out = best ? best : cJSON_CreateObject();
  cJSON_AddBoolToObject(*out, "found", best != NULL);
  cJSON_AddStringToObject(*out, "plan_sha256", hash);
  cJSON_AddStringToObject(*out, "why", why);
  cJSON *skj = cJSON_AddObjectToObject(*out, "skipped");
  cJSON_AddNumberToObject(skj, "pull_request", sk.pr);
  cJSON_AddNumberToObject(skj, "incomplete", sk.incomplete);
  cJSON_AddNumberToObject(skj, "not_ancestor", sk.not_ancestor);
  cJSON_AddNumberToObject(skj, "unknown_commit", sk.unknown_commit);
  cJSON_AddNumberToObject(skj, "no_head", sk.no_head);
  cJSON_AddNumberToObject(skj, "other_plan_version", other);
done:
  sqlite3_finalize(st);
  if (h) sqlite3_close(h);
  git_repository_free(repo);
  git_libgit2_shutdown();
  return e;
}
