/* Test of include/cells/claims.h: the work a call claims task by task.
 *
 *   gcc -O3 -pthread -I include tests/c/test_claims.c -o test_claims && ./test_claims
 *   (tests/test_team.py does this, with OpenMP and without)
 *
 * Calls of 1 to 6 parts (more than the cores), on cells' team (cells_run_parts), run
 * PHASES phases of TASKS tasks each the way the time loop does: claim (its home's tasks
 * first), run, finish, until the claim says the phase is done. Checked:
 *  - every task of every phase runs exactly once (a counter per task);
 *  - no task of phase g starts before every task of phase g - 1 has finished (each task
 *    checks the phase before it is complete);
 *  - a part that starts late (it sleeps 2 ms first, as a descheduled thread would) holds up
 *    nobody: the others finish every phase without it, and it catches up without work;
 *  - the order of the claims, on one thread: a part's home first (part h of `homes` takes
 *    tasks [h·tasks/homes, (h+1)·tasks/homes) in order), then the next homes', every task of
 *    a phase once, none of the next phase before it; the first task it takes from another
 *    home only after CELLS_STEAL_NS, and then those of the next phase at once (it is eager);
 *  - the call runs on cells' team (part 0 on the caller, the others on cells-team workers);
 *  - a part runs only while its call is in flight: a worker that wakes after its call closed
 *    (thousands of calls of a few phases, on more parts than cores, make some late) touches
 *    nothing of it, nor of the next call unless it joins that one;
 *  - groups of homes (cells_groups): calls of 1 to 3 groups of 1 to 3 parts, each group a
 *    claimed pass of its own, on the team, and with part 0 alone (as when no worker joins):
 *    every home of every group runs exactly once, and every task of every group's pass. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cells/claims.h"

#define PHASES 200
#define TASKS 7

static long failures, checks;
static long calls;                  /* the calls made, the number of the last */
static atomic_long call_in_flight;  /* the number of the call in flight, 0 between calls */

typedef struct {
    long number;                    /* the call's number (call_in_flight while it runs) */
    long phases;                    /* its phases: PHASES, or fewer */
    int64_t task_ns;                /* how long a task takes */
    cells_claims claims;
    atomic_int runs[PHASES][TASKS]; /* how often each task ran */
    atomic_int done[PHASES];        /* the tasks of each phase finished */
    int late_part;                  /* this part sleeps before it starts (-1: none) */
    atomic_int tasks_of_late;       /* the tasks the late part ran */
    atomic_int worker_parts;        /* parts that ran on a thread named cells-team */
} call;

static void expect(int ok, const char *what) {
    ++checks;
    if (!ok && ++failures < 20)
        printf("FAIL %s\n", what);
}

static void part(void *arg, cells_part me) {
    call *c = arg;
    expect(atomic_load(&call_in_flight) == c->number, "a part ran outside its call");
    char name[32] = "";
#if defined(__linux__)
    prctl(PR_GET_NAME, name);
#endif
    if (strcmp(name, "cells-team") == 0)
        atomic_fetch_add(&c->worker_parts, 1);
    if (me.part == c->late_part) {
        struct timespec nap = {0, 2000000};
        nanosleep(&nap, NULL);
    }
    for (long long g = 0; g < c->phases; ++g) {
        long task;
        while ((task = cells_claim(&c->claims, g, TASKS, me)) >= 0) {
            expect(g == 0 || atomic_load(&c->done[g - 1]) == TASKS,
                   "a task started before the phase before it was complete");
            atomic_fetch_add(&c->runs[g][task], 1);
            for (int64_t end = cells_now_ns() + c->task_ns; cells_now_ns() < end;)
                cells_pause();
            if (me.part == c->late_part)
                atomic_fetch_add(&c->tasks_of_late, 1);
            atomic_fetch_add(&c->done[g], 1);
            cells_claim_finished(&c->claims, me);
        }
    }
    expect(atomic_load(&call_in_flight) == c->number, "a part ran outside its call");
}

/* A call of nparts parts and `phases` phases of tasks of task_ns; returns the parts that ran. */
static int run_call(int nparts, int late_part, long phases, int64_t task_ns, int verbose) {
    static call c;
    memset(&c, 0, sizeof c);
    c.number = ++calls;
    c.phases = phases;
    c.task_ns = task_ns;
    c.late_part = late_part;
    expect(cells_claims_init(&c.claims, nparts) == 0, "the claims of a call allocated");
    atomic_store(&call_in_flight, c.number);
    int ran = cells_run_parts(nparts, part, &c);
    atomic_store(&call_in_flight, 0);
    cells_claims_destroy(&c.claims);
    for (int g = 0; g < phases; ++g)
        for (int t = 0; t < TASKS; ++t)
            expect(atomic_load(&c.runs[g][t]) == 1, "a task ran other than once");
    expect(ran >= 1 && ran <= nparts, "the parts that ran are 1 .. nparts");
    expect(atomic_load(&c.worker_parts) == ran - 1, "parts 1.. ran on cells' team");
    if (late_part > 0 && late_part < ran)
        /* the others finish the call's 1400 µs of tasks during most of its 2 ms nap */
        expect(atomic_load(&c.tasks_of_late) < PHASES * TASKS / 2,
               "the parts on time waited for the late one");
    if (verbose)
        printf("%d parts (ran %d), late part %d: it ran %d of %ld tasks\n", nparts, ran,
               late_part, atomic_load(&c.tasks_of_late), phases * TASKS);
    return ran;
}

/* A call of groups of homes: each group a pass of its own (a call's claims and tasks), run by
 * the parts that take its homes. */
#define MAX_GROUPS 3
#define MAX_SIZE 3
typedef struct {
    cells_groups groups;
    call pass[MAX_GROUPS];
    atomic_int home_runs[MAX_GROUPS * MAX_SIZE];
} grouped_call;

static void group_home(void *arg, int group, cells_part home) {
    grouped_call *gc = arg;
    expect(home.nparts == gc->groups.size && home.part < home.nparts,
           "a home is a part of its group");
    atomic_fetch_add(&gc->home_runs[group * gc->groups.size + home.part], 1);
    part(&gc->pass[group], home);
}

static void grouped_part(void *arg, cells_part me) {
    cells_groups_run(&((grouped_call *)arg)->groups, me, group_home, arg);
}

/* `groups` groups of `size` parts, each group's pass `phases` phases of TASKS tasks: on the
 * team, or with part 0 alone (`alone`). */
static void run_groups(int groups, int size, long phases, int alone) {
    static grouped_call gc;
    memset(&gc, 0, sizeof gc);
    ++calls;
    for (int g = 0; g < groups; ++g) {
        gc.pass[g].number = calls;
        gc.pass[g].phases = phases;
        gc.pass[g].late_part = -1;
        expect(cells_claims_init(&gc.pass[g].claims, size) == 0, "a group's claims allocated");
    }
    expect(cells_groups_init(&gc.groups, groups, size) == 0, "the groups allocated");
    atomic_store(&call_in_flight, calls);
    if (alone)
        grouped_part(&gc, (cells_part){0, groups * size, CELLS_SPIN_NS});
    else
        cells_run_parts(groups * size, grouped_part, &gc);
    atomic_store(&call_in_flight, 0);
    for (int h = 0; h < groups * size; ++h)
        expect(atomic_load(&gc.home_runs[h]) == 1, "a home of a group ran other than once");
    for (int g = 0; g < groups; ++g) {
        for (long p = 0; p < phases; ++p)
            for (int t = 0; t < TASKS; ++t)
                expect(atomic_load(&gc.pass[g].runs[p][t]) == 1,
                       "a task of a group's pass ran other than once");
        cells_claims_destroy(&gc.pass[g].claims);
    }
    cells_groups_destroy(&gc.groups);
}

/* Part `part` claims every task of phases 0 and 1 of `tasks` alone, among `homes` homes. */
static void claim_order(int homes, long tasks, int part) {
    cells_claims claims;
    expect(cells_claims_init(&claims, homes) == 0, "the claims of a call allocated");
    cells_part me = {part, homes, CELLS_SPIN_NS};
    const long own = tasks * (part + 1) / homes - tasks * part / homes;
    for (long long g = 0; g < 2; ++g) {
        long start = tasks * part / homes, task;
        for (long i = 0; i < tasks; ++i) {
            int64_t before = cells_now_ns();
            task = cells_claim(&claims, g, tasks, me);
            int64_t took = cells_now_ns() - before;
            expect(task == (start + i) % tasks, "a part claims its home's tasks first, in order");
            if (i == own && g == 0)
                expect(took >= CELLS_STEAL_NS, "a part takes another's task after CELLS_STEAL_NS");
            cells_claim_finished(&claims, me);
        }
        expect(cells_claim(&claims, g, tasks, me) == -1, "a phase has `tasks` tasks");
        expect(claims.home[part].eager == (own < tasks),
               "a part that took another's task takes the next phase's at once");
    }
    cells_claims_destroy(&claims);
}

int main(void) {
    for (int homes = 1; homes <= 5; ++homes)
        for (long tasks = 1; tasks <= 11; ++tasks)
            for (int part = 0; part < homes; ++part)
                claim_order(homes, tasks, part);
    for (int nparts = 1; nparts <= 6; ++nparts) {
        run_call(nparts, -1, PHASES, 1000, 1);
        if (nparts > 1)
            run_call(nparts, nparts - 1, PHASES, 1000, 1);
    }
    long short_calls = 0, parts_asked = 0, parts_ran = 0;
    for (int k = 0; k < 3000; ++k, ++short_calls) {
        int nparts = 2 + k % 5;
        parts_asked += nparts;
        parts_ran += run_call(nparts, -1, 1 + k % 3, 0, 0);
    }
    printf("%ld short calls: %ld of %ld parts ran\n", short_calls, parts_ran, parts_asked);
    for (int groups = 1; groups <= MAX_GROUPS; ++groups)
        for (int size = 1; size <= MAX_SIZE; ++size)
            for (int k = 0; k < 20; ++k)
                run_groups(groups, size, 1 + k % 7, k % 2);
    printf("%ld checks, %ld failures\n", checks, failures);
    return failures != 0;
}
