/* Path traces: which op variant ran at each step, and every fallback with its reason.
 * Paths append events; the runner prints them (--trace) and stores them in bundles.
 * A test that meant to run variant X fails when the trace shows X did not run.
 *
 * Two modes. A step trace (vtrace_init) keeps every event in order, one per (step, event), up to
 * max_events. A tally (vtrace_init_tally) keeps one event per distinct (kind, path, op, variant), with
 * its count over every step and the detail and step of its first occurrence: its memory is
 * O(distinct events) however many steps run, so every open path keeps one (suites/paths/paths.h) and the
 * records say what ran (issue 37). A fallback event means a hand-over to ANOTHER path (its variant names
 * that path); a path that runs its own kernels in another mode (latency's chunked prefill) records `ran`. */
#ifndef VOUCH_COMMON_TRACE_H
#define VOUCH_COMMON_TRACE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef enum { TR_RAN = 0, TR_FALLBACK = 1, TR_NOTE = 2 } vtrace_kind;

typedef struct {
  int64_t step;       /* forward() call number, from 0 */
  vtrace_kind kind;
  char path[24];      /* path that recorded it ("cuda-ref", "latency") */
  char op[32];        /* op name as registered ("rmsnorm", "mla_decode", ...) */
  char variant[48];   /* variant that ran; for a fallback, the path fallen back to */
  char detail[160];   /* shape/batch bucket, or the fallback's reason */
  int64_t count;      /* times this same event repeated within the step (deduplicated); in a tally, in
                       * every step (step and detail are then the first occurrence's) */
} vtrace_event;

typedef struct vtrace_s {
  bool enabled;       /* false: recording calls return at once */
  bool tally;         /* tally mode (above): identical events of any step merge into one */
  int64_t step;       /* current step number */
  vtrace_event *ev;   /* [n] events, in order */
  int n, cap;
  int max_events;     /* hard cap (default 1<<20); past it events are counted in dropped */
  int64_t dropped;
  struct vtrace_s *tee; /* every event recorded here is also recorded there (its own mode); NULL: none.
                         * A path's tally tees to the caller's step trace (--trace) */
} vtrace;

void vtrace_init(vtrace *t, bool enabled);
/* A tally (above), enabled; max_events distinct events (default 4096; past it, dropped counts them). */
void vtrace_init_tally(vtrace *t);
void vtrace_free(vtrace *t);
/* Forgets the events (and dropped), keeping the mode, the step number and tee: a tally from here on. */
void vtrace_clear(vtrace *t);
/* dst (not initialized) becomes a copy of src's events and mode, without tee (a case's tally kept after
 * its path closed). False on out of memory (dst then empty). */
bool vtrace_copy(vtrace *dst, const vtrace *src);
/* The number of distinct fallback events (kind TR_FALLBACK) in t; 0 for NULL. */
int vtrace_n_fallbacks(const vtrace *t);
void vtrace_next_step(vtrace *t);
/* Records that `variant` of `op` ran in `path`; identical consecutive events in one step
 * are merged (count++). */
void vtrace_ran(vtrace *t, const char *path, const char *op, const char *variant, const char *detail);
/* Records a fallback from `path` to `to` for `op`, with the reason. */
void vtrace_fallback(vtrace *t, const char *path, const char *op, const char *to, const char *reason);
void vtrace_note(vtrace *t, const char *path, const char *what);
/* True when some event in steps [from_step, now] shows `variant` of `op` ran. */
bool vtrace_has(const vtrace *t, const char *op, const char *variant, int64_t from_step);
/* Human-readable dump, one line per event. */
void vtrace_print(const vtrace *t, FILE *f);
/* JSON array text (caller frees). */
char *vtrace_to_json(const vtrace *t);

#endif
