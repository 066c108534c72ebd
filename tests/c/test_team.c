/* cells' thread team (include/cells/team.h) under stress.
 *
 *   gcc -O3 -fno-wrapv -fno-trapping-math -pthread -I include tests/c/test_team.c -o t
 *   ./t                                     (tests/test_team.py does this)
 *
 * A call's parts each write their slot of a round, meet at the barrier, check every other
 * part's slot, and meet again, for ROUNDS rounds: a barrier that lets a part through early
 * shows as a stale slot, and a call that returns before its last part has finished (it
 * finishes 20 µs late) as a missing count. Run on 2, 3, 5 and 8 parts (more than the cores:
 * the sleeping path), with every part run exactly once per call, from two threads at once (on
 * the team, one of them finds it busy and runs alone), and with a call from inside a part
 * (runs alone). All of it in this process, then in a child forked after it (which runs on
 * cells' team when built with -fopenmp as well). It prints each check and "N failures".
 */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cells/team.h"

enum { ROUNDS = 1000, CALLS = 100 };
/* Two callers at once, each on 2 threads: 4 threads on (here) 2 cores, where every barrier may
 * spin its full CELLS_SPIN_NS: few calls. */
enum { CALLER_CALLS = 20, CALLER_ROUNDS = 10 };

static int failures = 0;

static void check(const char *what, int ok) {
    failures += !ok;
    printf("%-60s %s\n", what, ok ? "ok" : "FAIL");
}

typedef struct {
    int slot[CELLS_MAX_THREADS];    /* each part's round */
    atomic_int runs[CELLS_MAX_THREADS];      /* how many times each part started */
    atomic_int finished[CELLS_MAX_THREADS];  /* and finished */
    atomic_int stale;               /* slots seen out of step */
    atomic_int nparts_seen;         /* the nparts every part saw (or -1 on a mismatch) */
    int rounds;
} Rounds;

static void rounds(void *arg, cells_part me) {
    Rounds *r = arg;
    atomic_fetch_add(&r->runs[me.part], 1);
    int expected = 0;
    if (!atomic_compare_exchange_strong(&r->nparts_seen, &expected, me.nparts)
        && expected != me.nparts)
        atomic_store(&r->nparts_seen, -1);
    for (int round = 1; round <= r->rounds; ++round) {
        r->slot[me.part] = round;
        cells_barrier(me);
        for (int p = 0; p < me.nparts; ++p)
            if (*(volatile int *)&r->slot[p] != round)
                atomic_fetch_add(&r->stale, 1);
        cells_barrier(me);
    }
    if (me.part == me.nparts - 1) {  /* the last part finishes late: the call must wait for it */
        int64_t until = cells_now_ns() + 20000;
        while (cells_now_ns() < until)
            cells_pause();
    }
    atomic_fetch_add(&r->finished[me.part], 1);
}

/* Run `calls` calls of `rounds` rounds on nparts parts; 1 when every part ran once per call and
 * had finished when the call returned, all saw the same nparts and no slot was stale. ran: the
 * parts of the last call. */
static int run_rounds(int nparts, int calls, int n_rounds, int *ran) {
    static Rounds r;
    memset(&r, 0, sizeof r);
    r.rounds = n_rounds;
    for (int call = 0; call < calls; ++call) {
        atomic_store(&r.nparts_seen, 0);
        *ran = cells_run_parts(nparts, rounds, &r);
        for (int p = 0; p < *ran; ++p)
            if (atomic_load(&r.runs[p]) != call + 1 || atomic_load(&r.finished[p]) != call + 1)
                return 0;
        if (atomic_load(&r.nparts_seen) != *ran)
            return 0;
    }
    return atomic_load(&r.stale) == 0;
}

/* Two threads calling at once, each with its own Rounds. */
typedef struct {
    Rounds r;
    int alone, together;
} Caller;

static void *caller(void *arg) {
    Caller *c = arg;
    for (int call = 0; call < CALLER_CALLS; ++call) {
        int ran = cells_run_parts(2, rounds, &c->r);
        c->alone += ran == 1;
        c->together += ran == 2;
    }
    return NULL;
}

static void nested(void *arg, cells_part me) {
    if (me.part == 0) {
        Rounds inner;
        memset(&inner, 0, sizeof inner);
        inner.rounds = 10;
        *(int *)arg = cells_run_parts(2, rounds, &inner);
    }
}

/* Every check, on the threads this process's calls get; prefix names the process. */
static void run_checks(const char *prefix) {
    char what[100];
    int ran;
    snprintf(what, sizeof what, "%s: 1 part runs on the caller alone", prefix);
    check(what, run_rounds(1, 3, 10, &ran) && ran == 1);
    const int counts[] = {2, 3, 5, 8};
    for (int i = 0; i < 4; ++i) {
        int nparts = counts[i];
        int calls = nparts <= 2 ? CALLS : 20, n_rounds = nparts <= 2 ? ROUNDS : 50;
        snprintf(what, sizeof what, "%s: %d parts, %d calls of %d barrier rounds", prefix,
                 nparts, calls, n_rounds);
        check(what, run_rounds(nparts, calls, n_rounds, &ran) && ran == nparts);
    }
    snprintf(what, sizeof what, "%s: after 8 parts, a 2-part call runs on 2", prefix);
    check(what, run_rounds(2, 50, 100, &ran) && ran == 2);

    static Caller a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    a.r.rounds = b.r.rounds = CALLER_ROUNDS;
    pthread_t ta, tb;
    pthread_create(&ta, NULL, caller, &a);
    pthread_create(&tb, NULL, caller, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    snprintf(what, sizeof what, "%s: two callers at once, every call complete", prefix);
    check(what, a.alone + a.together == CALLER_CALLS && b.alone + b.together == CALLER_CALLS
          && atomic_load(&a.r.stale) == 0 && atomic_load(&b.r.stale) == 0);
    printf("  (calls that ran alone: %d of %d)\n", a.alone + b.alone, 2 * CALLER_CALLS);

    int inner_ran = 0;
    cells_run_parts(2, nested, &inner_ran);
    snprintf(what, sizeof what, "%s: a call from inside a part runs alone", prefix);
    check(what, inner_ran == 1);
}

int main(void) {
    cells_team_register_fork_handler();
    run_checks("parent");
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {  /* after threaded calls: OpenMP's pool is gone, cells' team takes over */
        run_checks("forked child");
        fflush(stdout);
        _exit(failures != 0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    check("the forked child exited with success", WIFEXITED(status) && WEXITSTATUS(status) == 0);
    printf("%d failures\n", failures);
    return failures != 0;
}
