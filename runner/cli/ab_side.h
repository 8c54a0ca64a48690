/* What the parts of `vouch ab` share (runner/cli/cmd_ab.c, ab_launch.c): a side (one revision, its
 * worktree and build), the options of one run, and the helpers both use. Not an interface outside
 * `vouch ab`. */
#ifndef VOUCH_RUNNER_CLI_AB_SIDE_H
#define VOUCH_RUNNER_CLI_AB_SIDE_H

#include <cjson/cJSON.h>
#include <git2.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>

#include "common/vstatus.h"

#define AB_MAX_SETS 16
#define AB_MAX_ROUNDS 50

/* One side of the comparison. */
typedef struct {
  const char *role;          /* "base" or "head" */
  const char *rev;           /* the revision as given on the command line */
  git_oid oid;               /* the commit it resolves to */
  char sha[GIT_OID_HEXSZ + 1]; /* that commit, 40 hex digits */
  char wt_name[64];          /* worktree (and temporary branch) name in the repository */
  char wt_path[PATH_MAX];    /* DIR/work/<role>: the checkout */
  char build_dir[PATH_MAX];  /* DIR/work/build-<role> */
  char bin[PATH_MAX];        /* the vouch binary that runs this side */
  char build_log[PATH_MAX];  /* DIR/logs/build-<role>.log */
  double build_s;            /* seconds the build took (0 when prebuilt) */
  bool added;                /* the worktree is registered (prune it at the end) */
  bool built;                /* build_dir was made by this run (delete it at the end) */
} side;

/* The options and state of one `vouch ab`. */
typedef struct {
  char dir[PATH_MAX];        /* the output directory, absolute */
  const char *plan;          /* plan name, or absolute path of a plan file */
  char plan_abs[PATH_MAX];   /* storage for the absolute plan path */
  const char *sets[AB_MAX_SETS]; /* [n_sets] "VAR=VALUE" passed to vouch run */
  int n_sets;
  int rounds;                /* base/head pairs */
  double threshold;          /* compare threshold, fraction */
  const char *cmake_options; /* shell words appended to `cmake -S -B` */
  const char *prebuilt;      /* VOUCH_AB_PREBUILT or NULL */
  const char *launch;        /* --launch: the server command (holds {port}), run in each worktree; NULL: builds
                              * of vouch run the plan */
  const char *build_cmd;     /* --build: a command run in each worktree before launching, or NULL */
  bool rounds_given;         /* --rounds was on the command line (--launch: passed as ab_rounds) */
  FILE *log;                 /* DIR/ab.log */
} ab_opts;

/* One line to ab.log (and stderr): "<UTC time> <what>" with fmt's three %s filled by a, b, c (NULL: ""). */
void ab_log(ab_opts *o, const char *fmt, const char *a, const char *b, const char *c);
/* Runs argv with cwd (NULL: this one), stdout and stderr appended to log; `unset` (NULL-terminated, or
 * NULL) names environment variables removed in the child. Returns the exit status, 128+signal when
 * killed, -1 when it could not be started. */
int ab_spawn(char *const argv[], const char *cwd, const char *log, const char *const *unset);
/* Reads one string field of DIR/manifest.json into out ("" when absent or unreadable). */
void ab_manifest_field(const char *dir, const char *key, char *out, size_t cap);
/* Writes j to DIR/name atomically. Error: the file's. */
vstatus ab_write_json(const char *dir, const char *name, const cJSON *j);

#endif
