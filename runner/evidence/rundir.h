/* A result directory (what `vouch run` writes; runner/evidence/rundir.c): manifest.json, plan.json,
 * replay.sh, results.sqlite (each record stored as soon as rec_add() is called, so a crash keeps
 * what finished), results.json (regenerated from SQLite by rec_close), traces/, logs/. While a
 * plan runs, the directory is the suites' run sink (suites/engine/sink.h): vrundir_sink, handed to
 * each step.
 * Layout and JSON shapes: results-schema/README.md. */
#ifndef VOUCH_RUNNER_EVIDENCE_RUNDIR_H
#define VOUCH_RUNNER_EVIDENCE_RUNDIR_H

#include <stdbool.h>
#include <stdio.h>

#include "common/vstatus.h"
#include "suites/engine/record.h"
#include "suites/engine/sink.h"

struct manifest_opts;
typedef struct vrundir vrundir;
/* Creates DIR (and traces/, logs/), writes manifest.json (verdict "incomplete"), plan.json,
 * replay.sh and an empty results.sqlite + results.json. Fails if DIR already holds a run. */
vstatus rec_open_dir(vrundir **out, const char *dir, const struct manifest_opts *mo);
/* Reopens DIR, a run that crashed (state "running") or was interrupted ("incomplete"), to add
 * the cases it did not finish: state back to "running", traces numbered on, and from now on a
 * record whose (suite, case_id, path) is stored already is not stored again (rec_stored). Fails,
 * naming the file and field, on a directory that is not a run, a finished run or a bad store. */
vstatus rec_resume_dir(vrundir **out, const char *dir);
/* Plan progress, kept in the store's meta table: step `step` (0-based) has finished, so a resumed
 * run starts after it (rec_resume_check gives the number of finished steps). */
vstatus rec_dir_step_done(vrundir *rd, int step);
/* Before a resume changes anything: DIR's store (read-only) holds a run of this build (the
 * manifest's commit and CMake options, as rec_resume_dir checks them); *steps_done its finished
 * steps and *run_args its meta 'run_args' (malloc'ed, the caller frees it). Fails naming the file
 * and the field (*run_args NULL). */
vstatus rec_resume_check(const char *dir, int *steps_done, char **run_args);
/* Sets another key of the store's meta table (cmd_run.c keeps the run's variables there). */
vstatus rec_dir_meta_set(vrundir *rd, const char *key, const char *value);
/* Deletes record (suite, case_id, path) when it is stored with status not_run (a crashed run's
 * record of a step that a resumed run now runs); any other record stays. */
vstatus rec_dir_forget_not_run(vrundir *rd, const char *suite, const char *case_id, const char *path);
/* Finalizes r and stores it in SQLite (committed before returning). r stays the caller's. */
vstatus rec_add(vrundir *rd, vrecord *r);
/* Writes a path trace (JSON text) to traces/NNNN.json and sets r->trace_ref; call before rec_add. */
vstatus rec_attach_trace(vrundir *rd, vrecord *r, const char *json_text);
/* Opens logs/<name>.log for appending (caller fcloses). NULL on failure (error set). */
FILE *rec_log_open(vrundir *rd, const char *name);
/* Marks the run complete: final manifest (end time, verdict), results.json from SQLite,
 * and a row in the history store. Frees rd. */
vstatus rec_close(vrundir *rd);
/* Ends an interrupted run: results.json and manifest say "incomplete". Frees rd. */
vstatus rec_abandon(vrundir *rd);
/* For a directory whose run crashed (state still "running" in SQLite, or results.json
 * missing): a not_run record for every plan step it did not finish (plan.json from meta
 * 'steps_done' on), then results.json and the manifest verdict ("incomplete"). No-op on a
 * finished run. */
vstatus rec_repair_dir(const char *dir);
/* rd as the run sink (suites/engine/sink.h) that `vouch run` hands each plan step, so the step's
 * records go to this directory; valid until rd is closed (rec_close, rec_abandon). Never fails. */
const vrec_sink *vrundir_sink(vrundir *rd);
/* Number of records stored (a planned case's not_run copy counts until its record replaces it). */
int rec_dir_count(const vrundir *rd);
/* Records added that failed or errored (a step that exited non-zero without one needs one); in a
 * resumed run a suite's record that is kept from before counts when the kept copy failed. */
int rec_dir_count_bad(const vrundir *rd);
const char *rec_dir_path(const vrundir *rd);

#endif
