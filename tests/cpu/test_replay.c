/* suites/sweep/server_replay.h without a server: the done hook driven by hand, as served_run_hooked
 * calls it, with made-up end times. A turn that joins a subagent is held until every turn of the
 * subagent finished and is then due at the later of its own time and the subagent's end; a failed
 * subagent turn ends the subagent and releases the parent; a join turn whose own session failed
 * stays skipped; with lanes, a tree's first turns wait until a live tree is over. A subagent's first
 * turn that names its spawner is held until that parent turn ended (ok, failed or skipped), then
 * due its recorded gap later, whatever its own timestamp. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "suites/sweep/server_replay.h"
#include "tests/harness.h"

#define N 6
#define T0 100.0 /* the run's start on the clock: ends are given relative to it */

/* Tree 0: the parent (session 0: turn at 0 ms, then one 100 ms after its end, which joins the
 * subagent) and its subagent (session 1: at 50 ms, then 300 ms after its end). Tree 1: a session
 * of two turns at 20 ms. */
static const trace_line LINES[N] = {
    {.t_ms = 0, .in = 4, .out = 2, .session = 0, .turn = 0},
    {.in = 2, .out = 2, .session = 0, .turn = 1, .pause_ms = 100},
    {.t_ms = 50, .in = 3, .out = 2, .session = 1, .turn = 0, .joiner = 2},
    {.in = 2, .out = 2, .session = 1, .turn = 1, .pause_ms = 300, .joiner = 2},
    {.t_ms = 20, .in = 4, .out = 2, .session = 2, .turn = 0, .tree = 1},
    {.in = 1, .out = 2, .session = 2, .turn = 1, .tree = 1},
};

/* Spawns: the parent (session 0: 0 ms, then 100 ms after its end) spawns at its second turn (line
 * 1) the subagent (session 1), recorded at 50 ms with a gap of 250 ms after the spawner's end.
 * Tree 1: one turn at 20 ms. */
#define NS 5
static const trace_line SPAWN[NS] = {
    {.t_ms = 0, .in = 4, .out = 2, .session = 0, .turn = 0},
    {.in = 2, .out = 2, .session = 0, .turn = 1, .pause_ms = 100},
    {.t_ms = 50, .in = 3, .out = 2, .session = 1, .turn = 0, .spawner = 2, .pause_ms = 250},
    {.in = 2, .out = 2, .session = 1, .turn = 1},
    {.t_ms = 20, .in = 4, .out = 2, .session = 2, .turn = 0, .tree = 1},
};

typedef struct {
  replay_ctx c;
  served_req reqs[N];
  int32_t tok[N][4];
  int32_t *fresh[N];
} run;

static void start_lines(run *r, const trace_line *lines, int n, int lanes) {
  memset(r, 0, sizeof *r);
  for (int i = 0; i < N; i++) r->fresh[i] = r->tok[i];
  CHECK_OK(replay_init(&r->c, lines, r->fresh, n, 100, 1.0, lanes, r->reqs));
}

static void start(run *r, int lanes) { start_lines(r, LINES, N, lanes); }

/* Request i finished `end` s after the run's start (two tokens when ok), then the hook ran. */
static void finish(run *r, int i, double end, bool ok) {
  served_req *q = &r->reqs[i];
  CHECK(!q->held && !q->skip, "request %d was sent: it was released", i);
  q->ok = ok, q->t_send = T0 + q->arrival_s, q->t_end = T0 + end;
  if (ok) {
    q->ids = malloc(2 * sizeof *q->ids);
    q->ids[0] = 7, q->ids[1] = 8, q->n_tokens = 2;
  }
  replay_done(&r->c, r->reqs, i, T0);
}

static void stop(run *r) {
  replay_free(&r->c);
  for (int i = 0; i < N; i++) served_req_free(&r->reqs[i]);
}

static bool near(double a, double b) { return fabs(a - b) < 1e-9; }

int main(void) {
  run r;
  /* all ok, one tree at a time */
  start(&r, 1);
  CHECK(!r.reqs[0].held && !r.reqs[2].held && near(r.reqs[2].arrival_s, 0.05), "first turns of tree 0 due at once");
  CHECK(r.reqs[1].held && r.reqs[3].held && r.reqs[4].held && r.reqs[5].held, "later turns and tree 1 held");
  CHECK(r.c.n_trees == 2 && r.c.n_joins == 1, "2 trees (%d), 1 join (%d)", r.c.n_trees, r.c.n_joins);
  finish(&r, 0, 1.0, true);
  CHECK(r.reqs[1].held && r.reqs[1].n_prompt == 4 + 2 + 2, "the join turn has its prompt and still waits for the subagent");
  finish(&r, 2, 1.2, true);
  CHECK(!r.reqs[3].held && near(r.reqs[3].arrival_s, 1.5), "the subagent's next turn: its pause after its end");
  CHECK(r.reqs[1].held, "the join turn waits while the subagent has a turn left");
  finish(&r, 3, 2.0, true);
  CHECK(!r.reqs[1].held && near(r.reqs[1].arrival_s, 2.0),
        "released at the subagent's end, not its own 1.1 s (arrival %g)", r.reqs[1].arrival_s);
  CHECK(r.reqs[4].held, "tree 1 waits while tree 0 has a turn left");
  CHECK(r.c.composed[1] && r.reqs[1].prompt == r.c.composed[1], "the join turn's composed prompt, before it is sent");
  finish(&r, 1, 2.5, true);
  CHECK(!r.c.composed[1] && !r.reqs[1].prompt && r.reqs[1].n_prompt == 4 + 2 + 2,
        "a finished turn's history is freed (the next turn holds its copy); its length stays for the figures");
  CHECK(!r.reqs[4].held && near(r.reqs[4].arrival_s, 2.5), "tree 1 admitted at tree 0's end (arrival %g)", r.reqs[4].arrival_s);
  CHECK(r.reqs[5].held, "tree 1's second turn waits for its first");
  stop(&r);

  /* a failed subagent turn ends the subagent: its rest is not sent, the parent goes on */
  start(&r, 0);
  CHECK(!r.reqs[4].held && near(r.reqs[4].arrival_s, 0.02), "no lanes: tree 1 starts at its time");
  finish(&r, 0, 1.0, true);
  finish(&r, 2, 1.2, false);
  CHECK(r.reqs[3].skip && !r.reqs[3].ok && strstr(r.reqs[3].error, "turn 1 of session 1 failed"), "the subagent's rest: %s",
        r.reqs[3].error);
  CHECK(!r.reqs[1].held && !r.reqs[1].skip && near(r.reqs[1].arrival_s, 1.2),
        "the parent's join turn sent when the subagent failed (arrival %g)", r.reqs[1].arrival_s);
  stop(&r);

  /* the join turn's own session failed: it stays skipped when the subagent ends; the tree is over */
  start(&r, 1);
  finish(&r, 0, 0.5, false);
  CHECK(r.reqs[1].skip, "the join turn is skipped with its session");
  finish(&r, 2, 0.7, true);
  finish(&r, 3, 1.5, true);
  CHECK(r.reqs[1].skip && !r.reqs[1].held, "still skipped after the subagent ended");
  CHECK(!r.reqs[4].held && near(r.reqs[4].arrival_s, 1.5), "tree 1 admitted when tree 0's last turn ended");
  stop(&r);

  /* spawns: the subagent waits for the turn that spawned it (which takes 0.6 s), then its gap; its
   * recorded 50 ms does not count */
  start_lines(&r, SPAWN, NS, 1);
  CHECK(r.c.n_spawns == 1 && r.c.n_joins == 0, "1 spawn (%d), no join (%d)", r.c.n_spawns, r.c.n_joins);
  CHECK(!r.reqs[0].held && r.reqs[2].held && r.reqs[4].held, "the subagent waits for its spawner, tree 1 for its lane");
  finish(&r, 0, 0.5, true);
  CHECK(!r.reqs[1].held && near(r.reqs[1].arrival_s, 0.6) && r.reqs[2].held, "the spawner due; the subagent still held");
  finish(&r, 1, 1.2, true);
  CHECK(!r.reqs[2].held && near(r.reqs[2].arrival_s, 1.45), "the subagent due 250 ms after its spawner's end (arrival %g)",
        r.reqs[2].arrival_s);
  CHECK(r.reqs[4].held, "tree 1 waits while the subagent has turns left");
  finish(&r, 2, 1.6, true);
  CHECK(!r.reqs[3].held && near(r.reqs[3].arrival_s, 1.6), "the subagent's next turn after its first");
  finish(&r, 3, 1.9, true);
  CHECK(!r.reqs[4].held && near(r.reqs[4].arrival_s, 1.9), "tree 1 admitted when the subagent ended (arrival %g)",
        r.reqs[4].arrival_s);
  stop(&r);

  /* a failed spawner still spawns (the subagent's turns are its own); a skipped one at its session's failure */
  start_lines(&r, SPAWN, NS, 0);
  finish(&r, 0, 0.5, true);
  finish(&r, 1, 1.0, false);
  CHECK(!r.reqs[2].held && !r.reqs[2].skip && near(r.reqs[2].arrival_s, 1.25), "failed spawner: arrival %g",
        r.reqs[2].arrival_s);
  stop(&r);
  start_lines(&r, SPAWN, NS, 0);
  finish(&r, 0, 0.4, false);
  CHECK(r.reqs[1].skip && !r.reqs[2].held && !r.reqs[2].skip && near(r.reqs[2].arrival_s, 0.65),
        "skipped spawner: the subagent due its gap after the failed turn's end (arrival %g)", r.reqs[2].arrival_s);
  stop(&r);

  /* a spawner the replay cannot wait on (another tree, a later turn, its own session) is none */
  trace_line odd[4] = {{.session = 0, .in = 1, .out = 1},
                       {.session = 1, .in = 1, .out = 1, .spawner = 1, .tree = 1},
                       {.session = 1, .turn = 1, .in = 1, .out = 1, .spawner = 1, .tree = 1},
                       {.t_ms = 30, .session = 2, .in = 1, .out = 1, .spawner = 4, .tree = 1}};
  start_lines(&r, odd, 4, 0);
  CHECK(r.c.n_spawns == 0 && !r.reqs[1].held && !r.reqs[3].held && near(r.reqs[3].arrival_s, 0.03), "no spawns (%d)",
        r.c.n_spawns);
  stop(&r);

  /* with lanes, a tree's lines must be contiguous */
  trace_line apart[3] = {{.session = 0, .in = 1, .out = 1}, {.session = 1, .in = 1, .out = 1, .tree = 1},
                         {.session = 2, .in = 1, .out = 1}};
  int32_t t1[1] = {1};
  int32_t *fr[3] = {t1, t1, t1};
  served_req rq[3] = {0};
  replay_ctx c;
  CHECK(replay_init(&c, apart, fr, 3, 100, 1.0, 1, rq) == V_ERR && strstr(verr_msg(), "apart"), "tree apart: %s", verr_msg());
  replay_free(&c);
  CHECK_OK(replay_init(&c, apart, fr, 3, 100, 1.0, 0, rq)); /* without lanes trees are not tracked */
  replay_free(&c);
  return test_finish();
}
