/* vouch ab: the regression check a pull request needs, with no earlier bundle.
 *
 * 1. Resolves --base and --head (default HEAD) in the git repository at --repo (libgit2).
 * 2. Adds a detached git worktree per side at DIR/work/{base,head} (a temporary branch
 *    makes git_worktree_add check the commit out; HEAD is then detached and the branch
 *    deleted, so the repository keeps no trace once the worktree is pruned).
 * 3. Builds each side with the same cmake options (those this vouch was built with,
 *    VOUCH_CMAKE_OPTIONS, or --cmake-options) into DIR/work/build-{base,head};
 *    logs/build-<side>.log. VOUCH_AB_PREBUILT=BINARY skips both builds.
 * 4. Runs `<side>/vouch run --plan P --out DIR/<side>-<k>` in the side's worktree (so each
 *    manifest names that side's commit), alternating base-1, head-1, head-2, base-2, base-3, ...
 *    Each run bundles itself to DIR/<side>-<k>.vouch.tar.gz.
 * 5. Compares in-process: each round on its own, then all rounds of the two sides
 *    (compare_rounds: intervals resample rounds, then steps within them, and a timing's also
 *    covers the t interval of the per-round ratios; that comparison
 *    decides the exit code). Writes compare.json, compare.md, ab.json and SHA256SUMS.
 *
 * With --launch (ab_launch.c: the repository is a server's) steps 3-5 become --build in each worktree and
 * one run of the served plan on the two launched servers (DIR/served).
 *
 * DIR layout:
 *   ab.json               revisions, commits, cmake options, plan, every run (order, exit
 *                         code, verdict, bundle sha256), regression counts
 *   ab.log                one line per step in the order it ran
 *   compare.json          `vouch compare --json` shape of the all-rounds comparison, plus
 *                         "ab" (revisions, commits) and "per_round" (counts per round)
 *   compare.md            the same for a PR comment
 *   SHA256SUMS            sha256 of ab.json, compare.json, compare.md and every bundle
 *   base-K/ head-K/       result directories;  base-K.vouch.tar.gz head-K.vouch.tar.gz
 *   logs/                 build-base.log, build-head.log, base-1.log, head-1.log, ...
 *   work/                 worktrees and build trees (deleted at the end unless --keep-work) */
#define _GNU_SOURCE
#include "common/atomic_file.h"
#include "common/clock.h"
#include "common/read_file.h"
#include "runner/cli/cmd_ab.h"
#include "runner/cli/ab_launch.h"
#include "runner/cli/ab_side.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <git2.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runner/evidence/bundle.h"
#include "suites/engine/cli.h"
#include "runner/evidence/compare.h"
#include "runner/evidence/manifest.h"
#include "suites/engine/record.h"
#include "runner/evidence/sha256.h"
#include "vouch_build_options.h"
#include "vouch_git_commit.h" /* VOUCH_GIT_COMMIT (build dir, cmake/git_commit.cmake) */

static const char USAGE[] =
    "usage: vouch ab --base REV [--head REV] [--plan P] [--rounds N] [--out DIR] [--repo DIR]\n"
    "                [--threshold T] [--set VAR=VALUE]... [--cmake-options OPTS] [--keep-work] [--json]\n"
    "       vouch ab --base REV [--head REV] --launch 'CMD {port}' [--build 'CMD'] [--plan P] [--rounds N]\n"
    "                [--out DIR] [--repo DIR] [--set VAR=VALUE]... [--keep-work]\n";

static const char HELP[] =
    "\nBase vs head on this machine, with no earlier bundle needed. Checks BASE and HEAD (default\n"
    "HEAD) of the git repository at --repo (default .) out into worktrees, builds each with the\n"
    "same cmake options (default: the ones this vouch was built with), runs the plan (default\n"
    "smoke; --set passes variables to it) with both builds alternating base, head, head, base, ...\n"
    "(--rounds N pairs, default 3: the fewest for which timings are tested) so machine drift\n"
    "cancels, and compares the sides over all rounds as `vouch compare` does (--threshold,\n"
    "default 0.05); a timing's interval covers the bootstrap of rounds, then steps within them,\n"
    "and the Student-t interval of the per-round ratios (the drift between rounds).\n"
    "\n"
    "DIR (default vouch-ab/<base>-<head>-<UTC time>):\n"
    "  ab.json compare.json compare.md SHA256SUMS ab.log\n"
    "  base-1/ head-1/ base-2/ head-2/ ...   result directories, each bundled to <name>.vouch.tar.gz\n"
    "  logs/                                 build-base.log build-head.log base-1.log ...\n"
    "  work/                                 worktrees and builds (removed unless --keep-work)\n"
    "\n"
    "With --launch the repository is the server's (an inference engine's), not vouch's: no cmake\n"
    "build; --build CMD (sh) runs in each worktree first (logs/build-<side>.log), then one run of the\n"
    "plan (default served) with server='launch:cd HEAD_WORKTREE && CMD' and ref='launch:cd\n"
    "BASE_WORKTREE && CMD': vouch starts both servers once ({port} a free port), the plan's steps\n"
    "judge head against base (features, diverge, evals, and the speed step's interleaved rounds,\n"
    "--rounds N as ab_rounds), and the run's result directory and bundle are DIR/served and\n"
    "DIR/served.vouch.tar.gz (logs/served.log); the exit code is the plan's (1: a check failed or the\n"
    "speed step named a regression).\n"
    "\n"
    "Committed revisions only: uncommitted changes of the repository are not part of HEAD.\n"
    "VOUCH_AB_PREBUILT=BINARY skips both builds and runs BINARY for both sides.\n"
    "Exit code: 0 no regression, 1 regression (a case newly fails or errors, a metric got worse\n"
    "beyond the threshold, or the head's runs are incomplete, errored or lack cases), 2 usage error, unknown revision, worktree collision, or a\n"
    "build or run that failed (the message names its log).\n";

static const char *gerr(void) {
  const git_error *e = git_error_last();
  return e && e->message ? e->message : "unknown libgit2 error";
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  remove(path);
  return 0;
}

/* rm -rf that never follows symlinks or crosses into another file system. */
static void rm_rf(const char *path) {
  struct stat st;
  if (lstat(path, &st) == 0) nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

static vstatus resolve(git_repository *repo, const char *repo_path, const char *opt, side *s) {
  char spec[512];
  snprintf(spec, sizeof spec, "%s^{commit}", s->rev);
  git_object *obj = NULL;
  if (git_revparse_single(&obj, repo, spec) != 0)
    return VERR("%s '%s': unknown revision in %s (%s): name a branch, tag or commit of that repository", opt, s->rev,
                repo_path, gerr());
  git_oid_cpy(&s->oid, git_object_id(obj));
  git_oid_tostr(s->sha, sizeof s->sha, &s->oid);
  git_object_free(obj);
  return V_OK;
}

/* True when the repository's work tree differs from its HEAD (tracked files). */
static bool repo_dirty(git_repository *repo) {
  if (git_repository_is_bare(repo)) return false;
  git_object *tree = NULL;
  git_diff *diff = NULL;
  bool dirty = false;
  if (git_revparse_single(&tree, repo, "HEAD^{tree}") == 0 &&
      git_diff_tree_to_workdir_with_index(&diff, repo, (git_tree *)tree, NULL) == 0)
    dirty = git_diff_num_deltas(diff) > 0;
  git_diff_free(diff);
  git_object_free(tree);
  return dirty;
}

static vstatus add_worktree(git_repository *repo, side *s) {
  struct stat st;
  if (lstat(s->wt_path, &st) == 0)
    return VERR("%s: already exists (left by an earlier vouch ab with this --out?): remove it or pick a new --out",
                s->wt_path);
  git_worktree *old = NULL;
  if (git_worktree_lookup(&old, repo, s->wt_name) == 0) {
    VERR("worktree '%s' is already registered in the repository (at %s): remove it with `git worktree remove --force "
         "%s` or run `git worktree prune`", s->wt_name, git_worktree_path(old), git_worktree_path(old));
    git_worktree_free(old);
    return V_ERR;
  }
  git_commit *commit = NULL;
  git_reference *branch = NULL;
  git_worktree *wt = NULL;
  git_repository *wrepo = NULL;
  vstatus s_ = V_OK;
  if (git_commit_lookup(&commit, repo, &s->oid) != 0) {
    s_ = VERR("%s %s: commit %s cannot be read: %s", s->role, s->rev, s->sha, gerr());
    goto done;
  }
  if (git_branch_create(&branch, repo, s->wt_name, commit, 0) != 0) {
    s_ = VERR("%s: cannot create the temporary branch '%s' for the worktree (%s): delete that branch if an earlier "
              "vouch ab left it", s->role, s->wt_name, gerr());
    goto done;
  }
  git_worktree_add_options wo;
  git_worktree_add_options_init(&wo, GIT_WORKTREE_ADD_OPTIONS_VERSION);
  wo.ref = branch;
  wo.checkout_options.checkout_strategy = GIT_CHECKOUT_FORCE;
  if (git_worktree_add(&wt, repo, s->wt_name, s->wt_path, &wo) != 0) {
    s_ = VERR("%s: cannot add a worktree for %s at %s: %s", s->wt_path, s->role, s->sha, gerr());
    git_reference_delete(branch);
    goto done;
  }
  s->added = true;
  if (git_repository_open_from_worktree(&wrepo, wt) != 0 || git_repository_set_head_detached(wrepo, &s->oid) != 0) {
    s_ = VERR("%s: cannot detach the worktree's HEAD at %s: %s", s->wt_path, s->sha, gerr());
    goto done;
  }
  /* git_reference_delete, not git_branch_delete: the branch has no config section, and
   * libgit2 1.5's section removal leaks pcre2 match data on every non-matching entry */
  if (git_reference_delete(branch) != 0)
    fprintf(stderr, "vouch ab: warning: temporary branch '%s' not deleted: %s\n", s->wt_name, gerr());
done:
  git_repository_free(wrepo);
  git_worktree_free(wt);
  git_reference_free(branch);
  git_commit_free(commit);
  return s_;
}

static void remove_worktree(git_repository *repo, side *s) {
  if (s->added) {
    git_worktree *wt = NULL;
    if (git_worktree_lookup(&wt, repo, s->wt_name) == 0) {
      git_worktree_prune_options po;
      git_worktree_prune_options_init(&po, GIT_WORKTREE_PRUNE_OPTIONS_VERSION);
      po.flags = GIT_WORKTREE_PRUNE_VALID | GIT_WORKTREE_PRUNE_LOCKED | GIT_WORKTREE_PRUNE_WORKING_TREE;
      if (git_worktree_prune(wt, &po) != 0)
        fprintf(stderr, "vouch ab: warning: worktree '%s' not pruned: %s\n", s->wt_name, gerr());
      git_worktree_free(wt);
    }
    s->added = false;
    rm_rf(s->wt_path);
  }
  if (s->built) rm_rf(s->build_dir);
  s->built = false;
}

static vstatus build_side(ab_opts *o, side *s) {
  if (o->prebuilt) {
    snprintf(s->bin, sizeof s->bin, "%s", o->prebuilt);
    ab_log(o, "build %s: skipped, VOUCH_AB_PREBUILT=%s", s->role, o->prebuilt, NULL);
    return V_OK;
  }
  FILE *f = fopen(s->build_log, "w");
  if (!f) return VERR("%s: cannot write the build log: %s", s->build_log, strerror(errno));
  fprintf(f, "vouch ab: building %s (%s = %s)\ncmake -S %s -B %s %s\n", s->role, s->rev, s->sha, s->wt_path,
          s->build_dir, o->cmake_options);
  fclose(f);
  ab_log(o, "build %s %s: log %s", s->role, s->sha, s->build_log);
  struct stat st;
  if (lstat(s->build_dir, &st) == 0)
    return VERR("%s: already exists (left by an earlier vouch ab with this --out?): remove it or pick a new --out",
                s->build_dir);
  s->built = true;
  /* the options are shell words (e.g. -DCMAKE_CUDA_ARCHITECTURES='90a;100a'): sh splits them */
  char script[4096];
  if (snprintf(script, sizeof script, "set -e\ncmake -S \"$1\" -B \"$2\" %s\ncmake --build \"$2\" -j\"$(nproc)\"\n",
               o->cmake_options) >= (int)sizeof script)
    return VERR("--cmake-options: too long");
  char *argv[] = {"/bin/sh", "-c", script, "sh", s->wt_path, s->build_dir, NULL};
  double t = vclock_now();
  int rc = ab_spawn(argv, s->wt_path, s->build_log, NULL);
  s->build_s = vclock_now() - t;
  if (rc != 0) return VERR("build of %s (%s = %.12s) failed (exit %d): see %s", s->role, s->rev, s->sha, rc, s->build_log);
  if (snprintf(s->bin, sizeof s->bin, "%s/vouch", s->build_dir) >= (int)sizeof s->bin) return VERR("%s: path too long", s->build_dir);
  if (access(s->bin, X_OK) != 0)
    return VERR("%s: the build of %s finished but made no vouch binary: see %s", s->bin, s->role, s->build_log);
  return V_OK;
}

/* One run of the plan with one side's build; appends its entry to runs. */
static vstatus run_side(ab_opts *o, const side *s, int round, cJSON *runs) {
  char name[32], out[PATH_MAX + 40], log[PATH_MAX + 48], bundle[PATH_MAX + 64];
  snprintf(name, sizeof name, "%s-%d", s->role, round);
  snprintf(out, sizeof out, "%s/%s", o->dir, name);
  snprintf(log, sizeof log, "%s/logs/%s.log", o->dir, name);
  snprintf(bundle, sizeof bundle, "%s/%s.vouch.tar.gz", o->dir, name);
  char *argv[8 + 2 * AB_MAX_SETS];
  int n = 0;
  argv[n++] = (char *)s->bin;
  argv[n++] = "run";
  argv[n++] = "--plan";
  argv[n++] = (char *)o->plan;
  argv[n++] = "--out";
  argv[n++] = out;
  for (int i = 0; i < o->n_sets; i++) {
    argv[n++] = "--set";
    argv[n++] = (char *)o->sets[i];
  }
  argv[n] = NULL;
  char rs[16];
  snprintf(rs, sizeof rs, "%d", round);
  ab_log(o, "run %s round=%s sha=%s", name, rs, s->sha);
  /* the CI's pull-request variables describe the head; a base run takes its subject from git */
  static const char *const base_unset[] = {"GITHUB_EVENT_PATH", "GITHUB_SHA", "GITHUB_REF", NULL};
  double t = vclock_now();
  int rc = ab_spawn(argv, s->wt_path, log, strcmp(s->role, "base") ? NULL : base_unset);
  double secs = vclock_now() - t;
  char probe[PATH_MAX + 64];
  snprintf(probe, sizeof probe, "%s/manifest.json", out);
  if (access(probe, F_OK) != 0)
    return VERR("run %s (%s at %.12s) exited %d and wrote no result directory: see %s", name, s->rev, s->sha, rc, log);
  if (rc != EXIT_OK && rc != EXIT_CHECK_FAILED)
    return VERR("run %s (%s at %.12s) exited %d%s: see %s", name, s->rev, s->sha, rc,
                rc == EXIT_INTERRUPTED ? " (interrupted)" : rc > 128 ? " (killed by a signal)" : "", log);
  if (access(bundle, F_OK) != 0) return VERR("run %s: no bundle at %s: see %s", name, bundle, log);
  char verdict[32], hex[65];
  ab_manifest_field(out, "verdict", verdict, sizeof verdict);
  VTRY(sha256_file_hex(bundle, hex));
  snprintf(rs, sizeof rs, "%d", rc);
  ab_log(o, "done %s exit=%s verdict=%s", name, rs, verdict);
  cJSON *r = cJSON_CreateObject();
  cJSON_AddStringToObject(r, "name", name);
  cJSON_AddStringToObject(r, "side", s->role);
  cJSON_AddNumberToObject(r, "round", round);
  cJSON_AddStringToObject(r, "commit", s->sha);
  cJSON_AddNumberToObject(r, "exit_code", rc);
  cJSON_AddStringToObject(r, "verdict", verdict);
  cJSON_AddNumberToObject(r, "seconds", secs);
  char rel[64];
  snprintf(rel, sizeof rel, "%s.vouch.tar.gz", name);
  cJSON_AddStringToObject(r, "bundle", rel);
  cJSON_AddStringToObject(r, "bundle_sha256", hex);
  snprintf(rel, sizeof rel, "logs/%s.log", name);
  cJSON_AddStringToObject(r, "log", rel);
  cJSON_AddItemToArray(runs, r);
  return V_OK;
}

static cJSON *side_json(const side *s) {
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "rev", s->rev);
  cJSON_AddStringToObject(j, "commit", s->sha);
  cJSON_AddStringToObject(j, "binary", s->bin);
  cJSON_AddNumberToObject(j, "build_seconds", s->build_s);
  return j;
}

/* dir/name, whole or not at all (common/atomic_file.h) */
static vstatus write_text(const char *dir, const char *name, const char *text) {
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return vfile_write_atomic(path, text, strlen(text), 0644);
}

static vstatus write_md(const ab_opts *o, const side *b, const side *h, const cJSON *cmp, const char *hw) {
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/compare.md", o->dir);
  FILE *f = fopen(path, "wb");
  if (!f) return VERR("%s: cannot write: %s", path, strerror(errno));
  int runs = cJSON_GetObjectItemCaseSensitive(cmp, "run_regressions")->valueint;
  /* the first line is the verdict: a failed head run, a problem or a regression, or none */
  if (runs)
    fprintf(f, "**REGRESSION: %d head run%s failed where the base run passed**\n\n", runs, runs == 1 ? "" : "s");
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(cmp, "run_regression_notes")) fprintf(f, "- %s\n", e->valuestring);
  if (runs) fprintf(f, "\n");
  compare_markdown(cmp, f, COMPARE_MD_LIMIT - 8000); /* room for the rounds table below */
  fprintf(f, "\n## vouch ab: `%s` (%.12s) vs base `%s` (%.12s)\n\n", h->rev, h->sha, b->rev, b->sha);
  fprintf(f, "Plan `%s`, %d round%s alternating base, head on one machine (%s); a timing's interval "
          "covers the bootstrap of rounds and steps and the t interval of the per-round ratios.\n\n", o->plan, o->rounds, o->rounds == 1 ? "" : "s", hw);
  fprintf(f, "| round | correctness regressions | performance regressions |\n|---|---|---|\n");
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(cmp, "per_round"))
    fprintf(f, "| %d | %d | %d |\n", cJSON_GetObjectItemCaseSensitive(e, "round")->valueint,
            cJSON_GetObjectItemCaseSensitive(e, "correctness_regressions")->valueint,
            cJSON_GetObjectItemCaseSensitive(e, "perf_regressions")->valueint);
  fprintf(f, "| all rounds | %d | %d |\n", cJSON_GetObjectItemCaseSensitive(cmp, "correctness_regressions")->valueint,
          cJSON_GetObjectItemCaseSensitive(cmp, "perf_regressions")->valueint);
  return fclose(f) != 0 ? VERR("%s: write failed", path) : V_OK;
}

/* SHA256SUMS of ab.json, compare.json, compare.md and the bundles (sha256sum -c reads it). */
static vstatus write_sums(const ab_opts *o, const cJSON *runs) {
  const char *fixed[] = {"ab.json", "compare.json", "compare.md"};
  char text[8192] = "", hex[65], path[PATH_MAX + 64];
  size_t k = 0;
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/%s", o->dir, fixed[i]);
    VTRY(sha256_file_hex(path, hex));
    k += (size_t)snprintf(text + k, sizeof text - k, "%s  %s\n", hex, fixed[i]);
  }
  const cJSON *r;
  cJSON_ArrayForEach(r, runs) {
    if (k + 200 >= sizeof text) return VERR("%s/SHA256SUMS: too many runs", o->dir);
    k += (size_t)snprintf(text + k, sizeof text - k, "%s  %s\n",
                          cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "bundle_sha256")),
                          cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "bundle")));
  }
  return write_text(o->dir, "SHA256SUMS", text);
}

/* Head runs that exited non-zero in a round whose base run exited 0 (a step failed, a case
 * failed, or the run is incomplete): each is a regression of its own, named with its log. */
static cJSON *run_regressions(const cJSON *runs) {
  cJSON *out = cJSON_CreateArray();
  const cJSON *r, *x;
  cJSON_ArrayForEach(r, runs) {
    const char *side_name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "side"));
    int rc = cJSON_GetObjectItemCaseSensitive(r, "exit_code")->valueint;
    if (side_name && !strcmp(side_name, "base")) continue;
    const cJSON *base = NULL; /* the base run of the same round */
    cJSON_ArrayForEach(x, runs)
      if (!strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(x, "side")), "base") &&
          cJSON_GetObjectItemCaseSensitive(x, "round")->valueint == cJSON_GetObjectItemCaseSensitive(r, "round")->valueint)
        base = x;
    if (!base || rc == EXIT_OK ||
        cJSON_GetObjectItemCaseSensitive(base, "exit_code")->valueint != EXIT_OK)
      continue;
    char line[256];
    snprintf(line, sizeof line, "%s exited %d where %s exited 0: a step failed (see %s)",
             cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "name")), rc,
             cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(base, "name")),
             cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "log")));
    cJSON_AddItemToArray(out, cJSON_CreateString(line));
  }
  return out;
}

/* Loads every run, compares each round and then all rounds; writes compare.json and
 * compare.md. *regressions gets the all-rounds count plus the run regressions; *failed
 * also counts the candidate's problems (incomplete, errored, missing cases). */
static vstatus compare_all(ab_opts *o, const side *b, const side *h, bool json, const cJSON *runs, int *regressions,
                           bool *failed, cJSON *ab) {
  int n = o->rounds;
  vresults *rb = vcalloc((size_t)n, sizeof *rb, "base results"), *rh = vcalloc((size_t)n, sizeof *rh, "head results");
  vstatus s = (!rb || !rh) ? V_ERR : V_OK;
  int loaded = 0;
  char dir[PATH_MAX + 40];
  for (int k = 0; s == V_OK && k < n; k++) {
    snprintf(dir, sizeof dir, "%s/base-%d", o->dir, k + 1);
    if ((s = bundle_load(dir, &rb[k]))) break;
    snprintf(dir, sizeof dir, "%s/head-%d", o->dir, k + 1);
    if ((s = bundle_load(dir, &rh[k]))) { bundle_unload(&rb[k]); break; }
    loaded++;
  }
  cJSON *per = cJSON_CreateArray();
  for (int k = 0; s == V_OK && k < n; k++) {
    cJSON *c = compare_results(&rb[k], &rh[k], o->threshold);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "round", k + 1);
    const char *keys[] = {"regressions", "correctness_regressions", "perf_regressions"};
    for (int i = 0; i < 3; i++)
      cJSON_AddNumberToObject(e, keys[i], cJSON_GetObjectItemCaseSensitive(c, keys[i])->valuedouble);
    cJSON_AddItemToArray(per, e);
    cJSON_Delete(c);
  }
  if (s == V_OK) {
    const char *hwb = manifest_hardware_key(rb[0].manifest), *hwh = manifest_hardware_key(rh[0].manifest);
    if (strcmp(hwb, hwh)) fprintf(stderr, "vouch ab: warning: the sides ran on different hardware: %s vs %s\n", hwb, hwh);
    cJSON *cmp = compare_rounds(rb, n, rh, n, o->threshold);
    cJSON *meta = cJSON_AddObjectToObject(cmp, "ab");
    cJSON_AddStringToObject(meta, "base_rev", b->rev);
    cJSON_AddStringToObject(meta, "base_commit", b->sha);
    cJSON_AddStringToObject(meta, "head_rev", h->rev);
    cJSON_AddStringToObject(meta, "head_commit", h->sha);
    cJSON_AddNumberToObject(meta, "rounds", n);
    cJSON_AddStringToObject(meta, "hardware", hwb);
    cJSON_AddItemToObject(cmp, "per_round", per);
    per = NULL;
    cJSON *rr = run_regressions(runs);
    int n_rr = cJSON_GetArraySize(rr);
    cJSON_AddNumberToObject(cmp, "run_regressions", n_rr);
    cJSON_AddItemToObject(cmp, "run_regression_notes", rr);
    *regressions = cJSON_GetObjectItemCaseSensitive(cmp, "regressions")->valueint + n_rr;
    cJSON_ReplaceItemInObjectCaseSensitive(cmp, "regressions", cJSON_CreateNumber(*regressions));
    *failed = compare_failed(cmp) || n_rr > 0;
    if (n_rr) cJSON_ReplaceItemInObjectCaseSensitive(cmp, "failed", cJSON_CreateTrue());
    s = ab_write_json(o->dir, "compare.json", cmp);
    if (s == V_OK) s = write_md(o, b, h, cmp, hwb);
    cJSON *summary = cJSON_AddObjectToObject(ab, "compare");
    const char *keys[] = {"regressions", "correctness_regressions", "perf_regressions", "run_regressions",
                          "not_enough_samples"};
    for (int i = 0; i < 5; i++)
      cJSON_AddNumberToObject(summary, keys[i], cJSON_GetObjectItemCaseSensitive(cmp, keys[i])->valuedouble);
    cJSON_AddItemToObject(summary, "problems", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(cmp, "problems"), 1));
    cJSON_AddStringToObject(summary, "headline", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cmp, "headline")));
    cJSON_AddStringToObject(ab, "hardware", hwb);
    if (s == V_OK) {
      if (json) {
        char *t = cJSON_Print(cmp);
        if (t) puts(t);
        free(t);
      } else {
        compare_print(cmp, stdout);
        const cJSON *e;
        cJSON_ArrayForEach(e, rr) printf("== run regression: %s\n", e->valuestring);
      }
    }
    cJSON_Delete(cmp);
  }
  cJSON_Delete(per);
  for (int k = 0; k < loaded; k++) {
    bundle_unload(&rb[k]);
    bundle_unload(&rh[k]);
  }
  free(rb);
  free(rh);
  return s;
}

static vstatus mkdir_one(const char *path) {
  if (mkdir(path, 0755) != 0 && errno != EEXIST) return VERR("%s: cannot create directory: %s", path, strerror(errno));
  return V_OK;
}

int cmd_ab(int argc, char **argv) {
  ab_opts o = {.plan = "smoke", .rounds = COMPARE_MIN_TIMING_RUNS, .threshold = 0.05, .cmake_options = VOUCH_CMAKE_OPTIONS};
  side b = {.role = "base"}, h = {.role = "head", .rev = "HEAD"};
  const char *out = NULL, *repo_arg = ".", *v, *rounds_s = NULL, *th_s = NULL;
  bool keep = false, json = false;
  vstatus err = V_OK;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      printf("%s%s", USAGE, HELP);
      printf("\nThis vouch's cmake options: %s\n", VOUCH_CMAKE_OPTIONS);
      return EXIT_OK;
    }
    if (!strcmp(a, "--keep-work")) keep = true;
    else if (!strcmp(a, "--json")) json = true;
    else if (cli_opt(argc, argv, &i, "--base", &v, &err)) b.rev = v;
    else if (cli_opt(argc, argv, &i, "--head", &v, &err)) h.rev = v;
    else if (cli_opt(argc, argv, &i, "--plan", &v, &err)) o.plan = v;
    else if (cli_opt(argc, argv, &i, "--rounds", &v, &err)) rounds_s = v;
    else if (cli_opt(argc, argv, &i, "--out", &v, &err)) out = v;
    else if (cli_opt(argc, argv, &i, "--repo", &v, &err)) repo_arg = v;
    else if (cli_opt(argc, argv, &i, "--threshold", &v, &err)) th_s = v;
    else if (cli_opt(argc, argv, &i, "--cmake-options", &v, &err)) o.cmake_options = v;
    else if (cli_opt(argc, argv, &i, "--launch", &v, &err)) o.launch = v;
    else if (cli_opt(argc, argv, &i, "--build", &v, &err)) o.build_cmd = v;
    else if (cli_opt(argc, argv, &i, "--set", &v, &err)) {
      if (v && !strchr(v, '=')) err = VERR("--set '%s': expected VAR=VALUE", v);
      else if (v && o.n_sets == AB_MAX_SETS) err = VERR("--set: at most %d", AB_MAX_SETS);
      else if (v) o.sets[o.n_sets++] = v;
    } else err = VERR("unknown option '%s'", a);
    if (err) break;
  }
  long rounds = COMPARE_MIN_TIMING_RUNS;
  if (!err && rounds_s && cli_int("--rounds", rounds_s, 1, AB_MAX_ROUNDS, &rounds)) err = V_ERR;
  o.rounds = (int)rounds;
  o.rounds_given = rounds_s != NULL;
  bool plan_given = false;
  for (int i = 1; i < argc; i++) plan_given |= !strcmp(argv[i], "--plan");
  if (!err && o.launch && !strstr(o.launch, "{port}"))
    err = VERR("--launch '%s': the command must hold {port} (where vouch tells the server to listen)", o.launch);
  if (!err && o.build_cmd && !o.launch) err = VERR("--build: only with --launch (without it vouch builds with cmake)");
  if (!err && o.launch && !plan_given) o.plan = "served";
  if (!err && th_s && (cli_double("--threshold", th_s, &o.threshold) || o.threshold < 0 || o.threshold >= 1))
    err = VERR("--threshold %s: must be in [0, 1)", th_s);
  if (!err && (!b.rev || !b.rev[0])) err = VERR("missing --base REV");
  if (err) {
    cli_print_error("ab");
    fputs(USAGE, stderr);
    return EXIT_USAGE;
  }
  /* a plan file is given to the runs by absolute path (they run inside the worktrees) */
  if (access(o.plan, F_OK) == 0 && realpath(o.plan, o.plan_abs)) o.plan = o.plan_abs;
  o.prebuilt = getenv("VOUCH_AB_PREBUILT");
  if (o.prebuilt && !o.prebuilt[0]) o.prebuilt = NULL;
  if (o.prebuilt && access(o.prebuilt, X_OK) != 0) {
    VERR("VOUCH_AB_PREBUILT=%s: not an executable file", o.prebuilt);
    cli_print_error("ab");
    return EXIT_USAGE;
  }

  git_libgit2_init();
  git_repository *repo = NULL;
  int rc = EXIT_USAGE, regressions = 0;
  cJSON *ab = NULL, *runs = NULL;
  vstatus s = V_OK;
  if (git_repository_open_ext(&repo, repo_arg, 0, NULL) != 0) {
    s = VERR("--repo %s: not inside a git repository (%s)", repo_arg, gerr());
    goto out;
  }
  const char *repo_path = git_repository_workdir(repo) ? git_repository_workdir(repo) : git_repository_path(repo);
  if ((s = resolve(repo, repo_path, "--base", &b)) || (s = resolve(repo, repo_path, "--head", &h))) goto out;
  bool dirty = repo_dirty(repo);
  if (dirty)
    fprintf(stderr, "vouch ab: note: %s has uncommitted changes: they are not part of --head %s (commit them to "
            "test them)\n", repo_path, h.rev);

  char outdir[PATH_MAX];
  if (out) snprintf(outdir, sizeof outdir, "%s", out);
  else {
    char ts[32];
    time_t t = time(NULL);
    strftime(ts, sizeof ts, "%Y%m%d-%H%M%S", gmtime(&t));
    snprintf(outdir, sizeof outdir, "vouch-ab/%.12s-%.12s-%s", b.sha, h.sha, ts);
  }
  if ((s = cli_mkdirs(outdir))) goto out;
  if (!realpath(outdir, o.dir)) { s = VERR("%s: cannot resolve: %s", outdir, strerror(errno)); goto out; }
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/ab.json", o.dir);
  if (access(path, F_OK) == 0) { s = VERR("%s: already holds an A/B run (ab.json exists): pick a new --out", o.dir); goto out; }
  snprintf(path, sizeof path, "%s/base-1", o.dir);
  if (access(path, F_OK) == 0) { s = VERR("%s: already exists: pick a new --out", path); goto out; }
  snprintf(path, sizeof path, "%s/logs", o.dir);
  if ((s = mkdir_one(path))) goto out;
  snprintf(path, sizeof path, "%s/work", o.dir);
  if ((s = mkdir_one(path))) goto out;
  snprintf(path, sizeof path, "%s/ab.log", o.dir);
  o.log = fopen(path, "a");
  side *sides[2] = {&b, &h};
  for (int i = 0; i < 2; i++) {
    side *sd = sides[i];
    snprintf(sd->wt_name, sizeof sd->wt_name, "vouch-ab-%s-%ld", sd->role, (long)getpid());
    if (snprintf(sd->wt_path, sizeof sd->wt_path, "%s/work/%s", o.dir, sd->role) >= (int)sizeof sd->wt_path ||
        snprintf(sd->build_dir, sizeof sd->build_dir, "%s/work/build-%s", o.dir, sd->role) >= (int)sizeof sd->build_dir ||
        snprintf(sd->build_log, sizeof sd->build_log, "%s/logs/build-%s.log", o.dir, sd->role) >= (int)sizeof sd->build_log) {
      s = VERR("--out %s: path too long", o.dir);
      goto out;
    }
  }
  for (int i = 0; i < 2; i++) {
    ab_log(&o, "worktree %s %s at %s", sides[i]->role, sides[i]->sha, sides[i]->wt_path);
    if ((s = add_worktree(repo, sides[i]))) goto out;
  }
  for (int i = 0; i < 2; i++)
    if ((s = o.launch ? ab_launch_build(&o, sides[i]) : build_side(&o, sides[i]))) goto out;

  ab = cJSON_CreateObject();
  cJSON_AddStringToObject(ab, "kind", "vouch-ab");
  cJSON_AddNumberToObject(ab, "schema_version", 1);
  cJSON *tool = cJSON_AddObjectToObject(ab, "tool");
  cJSON_AddStringToObject(tool, "version", VOUCH_VERSION);
  cJSON_AddStringToObject(tool, "commit", VOUCH_GIT_COMMIT);
  cJSON_AddStringToObject(ab, "repo", repo_path);
  cJSON_AddBoolToObject(ab, "repo_dirty", dirty);
  cJSON_AddStringToObject(ab, "plan", o.plan);
  cJSON *sets = cJSON_AddArrayToObject(ab, "set");
  for (int i = 0; i < o.n_sets; i++) cJSON_AddItemToArray(sets, cJSON_CreateString(o.sets[i]));
  cJSON_AddNumberToObject(ab, "rounds", o.rounds);
  cJSON_AddNumberToObject(ab, "threshold", o.threshold);
  cJSON_AddStringToObject(ab, "cmake_options", o.cmake_options);
  if (o.prebuilt) cJSON_AddStringToObject(ab, "prebuilt", o.prebuilt);
  else cJSON_AddNullToObject(ab, "prebuilt");
  if (o.launch) { /* the served plan judges the two servers; its speed step interleaves their rounds */
    cJSON_AddItemToObject(ab, "base", side_json(&b));
    cJSON_AddItemToObject(ab, "head", side_json(&h));
    int plan_rc = EXIT_USAGE;
    if ((s = ab_launch_run(&o, &b, &h, ab, &plan_rc))) goto out;
    rc = plan_rc;
    cJSON_AddNumberToObject(ab, "exit_code", rc);
    if ((s = ab_write_json(o.dir, "ab.json", ab))) { rc = EXIT_USAGE; goto out; }
    fprintf(stderr, "vouch ab: %s of head against base: exit %d; results in %s/served (bundle served.vouch.tar.gz, "
            "ab.json)\n", o.plan, rc, o.dir);
    goto out;
  }
  runs = cJSON_AddArrayToObject(ab, "runs");
  /* base, head, head, base, base, head, ...: a drift of the machine that grows steadily over
   * the runs lands on both sides alike */
  for (int k = 1; k <= o.rounds; k++)
    for (int i = 0; i < 2; i++)
      if ((s = run_side(&o, sides[k % 2 ? i : 1 - i], k, runs))) goto out;
  cJSON_AddItemToObject(ab, "base", side_json(&b));
  cJSON_AddItemToObject(ab, "head", side_json(&h));
  bool failed = false;
  if ((s = compare_all(&o, &b, &h, json, runs, &regressions, &failed, ab))) goto out;
  rc = failed ? EXIT_CHECK_FAILED : EXIT_OK;
  cJSON_AddNumberToObject(ab, "exit_code", rc);
  if ((s = ab_write_json(o.dir, "ab.json", ab)) || (s = write_sums(&o, runs))) { rc = EXIT_USAGE; goto out; }
  char cnt[16];
  snprintf(cnt, sizeof cnt, "%d", regressions);
  ab_log(&o, "compare: %s regression(s); %s", cnt, failed ? "exit 1" : "exit 0", NULL);
  fprintf(stderr, "vouch ab: results in %s (compare.md, compare.json, ab.json)\n", o.dir);
out:
  if (s) {
    cli_print_error("ab");
    rc = EXIT_USAGE;
  }
  if (repo) {
    if (keep) fprintf(stderr, "vouch ab: kept the worktrees and builds under %s/work\n", o.dir);
    else {
      remove_worktree(repo, &b);
      remove_worktree(repo, &h);
      if (o.dir[0]) {
        snprintf(path, sizeof path, "%s/work", o.dir);
        rmdir(path);
      }
    }
  }
  if (o.log) fclose(o.log);
  cJSON_Delete(ab);
  git_repository_free(repo);
  git_libgit2_shutdown();
  return rc;
}
