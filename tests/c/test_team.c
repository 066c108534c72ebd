/* cells' threads (include/cells/team.h) under stress.
 *
 *   gcc -O3 -fno-wrapv -fno-trapping-math -pthread -I include tests/c/test_team.c -o t
 *   ./t                                     (tests/test_team.py does this)
 *
 * A call's parts run ROUNDS rounds of two phases of claimed tasks (claims.h), as a time loop's
 * parts do: in the first, task k writes its slot of the round; in the second, each task checks
 * every slot. A wait that lets a part into a phase before the one before it is complete shows
 * as a stale slot, and a call that returns before a part that joined it has finished (every
 * part but 0 finishes 20 µs late) as a missing count. Part 0 waits (up to a second) until
 * every part has joined, so that each call runs on all of its parts. Run on 2, 3, 5 and 8
 * parts (more than the cores: the sleeping path), from two threads at once (on the team, one
 * of them finds it busy and runs alone), and with a call from inside a part (runs alone).
 * Forks: a fork made while another thread's call holds in its parts returns only after that
 * call has returned (the child's copy of memory shows every part finished), and the child runs
 * a call on threads of its own; forks made while two threads keep starting calls each wait for
 * the calls in flight only; a fork from inside a part does not wait for its own call. All of
 * it through both entries (cells_run_parts, on cells' team, and cells_run_parts_with_openmp,
 * on OpenMP's pool when built with -fopenmp) in this process, then in a child forked after it
 * (where both run on cells' team, so that its forks end the team's workers first). It prints
 * each check and "N failures".
 */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cells/claims.h"

enum { ROUNDS = 1000, CALLS = 100 };
/* Two callers at once, each on 2 threads: 4 threads on (here) 2 cores, where every wait may
 * spin its full CELLS_SPIN_NS: few calls. */
enum { CALLER_CALLS = 20, CALLER_ROUNDS = 10 };

static int failures = 0;

static void check(const char *what, int ok) {
    failures += !ok;
    printf("%-60s %s\n", what, ok ? "ok" : "FAIL");
}

typedef struct {
    cells_claims claims;            /* the call's (call_rounds sets them up) */
    int tasks;                      /* a phase's: the parts asked for */
    int slot[CELLS_MAX_THREADS];    /* each task's round */
    atomic_int runs[CELLS_MAX_THREADS];      /* how many times each part started */
    atomic_int finished[CELLS_MAX_THREADS];  /* and finished */
    atomic_int stale;               /* slots seen out of step */
    atomic_int nparts_seen;         /* the nparts every part saw (or -1 on a mismatch) */
    atomic_int started;             /* the parts that started this call */
    int rounds;
} Rounds;

/* The entry under test: cells_run_parts or cells_run_parts_with_openmp. */
static int (*run_parts)(int, cells_part_fn, void *);

/* A wait of at most `ns` for count to reach `target`. */
static void wait_for_count(atomic_int *count, int target, int64_t ns) {
    for (int64_t end = cells_now_ns() + ns; atomic_load(count) < target && cells_now_ns() < end;)
        cells_pause();
}

static void rounds(void *arg, cells_part me) {
    Rounds *r = arg;
    atomic_fetch_add(&r->runs[me.part], 1);
    atomic_fetch_add(&r->started, 1);
    if (me.part == 0)
        wait_for_count(&r->started, me.nparts, 1000000000);
    int expected = 0;
    if (!atomic_compare_exchange_strong(&r->nparts_seen, &expected, me.nparts)
        && expected != me.nparts)
        atomic_store(&r->nparts_seen, -1);
    for (int round = 1; round <= r->rounds; ++round) {
        long long g = 2 * (long long)(round - 1);
        long task;
        while ((task = cells_claim(&r->claims, g, r->tasks, me)) >= 0) {
            r->slot[task] = round;
            cells_claim_finished(&r->claims, me);
        }
        while ((task = cells_claim(&r->claims, g + 1, r->tasks, me)) >= 0) {
            for (int k = 0; k < r->tasks; ++k)
                if (*(volatile int *)&r->slot[k] != round)
                    atomic_fetch_add(&r->stale, 1);
            cells_claim_finished(&r->claims, me);
        }
    }
    if (me.part > 0) {  /* a worker finishes late: the call must wait for it */
        int64_t until = cells_now_ns() + 20000;
        while (cells_now_ns() < until)
            cells_pause();
    }
    atomic_fetch_add(&r->finished[me.part], 1);
}

/* A call of r's rounds on nparts parts, with its claims; the parts it ran. */
static int call_rounds(int nparts, Rounds *r) {
    r->tasks = nparts;
    if (cells_claims_init(&r->claims, nparts) != 0) {
        check("the claims of a call allocated", 0);
        return 0;
    }
    atomic_store(&r->started, 0);
    int ran = run_parts(nparts, rounds, r);
    cells_claims_destroy(&r->claims);
    return ran;
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
        *ran = call_rounds(nparts, &r);
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
        int ran = call_rounds(2, &c->r);
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
        *(int *)arg = call_rounds(2, &inner);
    }
}

static void nap_ns(long ns) {
    struct timespec t = {ns / 1000000000, ns % 1000000000};
    nanosleep(&t, NULL);
}

/* Whether child (forked) exited with success. */
static int exited_well(pid_t child) {
    int status = 0;
    return child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status)
           && WEXITSTATUS(status) == 0;
}

/* In a forked child: whether a call of 2 parts runs on 2 threads (of its own), right. (One
 * short call: the parent's other threads may keep both cores busy meanwhile.) */
static int child_runs_two_parts(void) {
    int ran;
    return run_rounds(2, 1, 2, &ran) && ran == 2;
}

/* A call whose parts hold until another thread releases them. */
typedef struct {
    atomic_int entered, finished, released;
} Held;

static void held(void *arg, cells_part me) {
    Held *h = arg;
    (void)me;
    atomic_fetch_add(&h->entered, 1);
    while (!atomic_load(&h->released))
        nap_ns(100000);
    atomic_fetch_add(&h->finished, 1);
}

static void *call_held(void *arg) {
    run_parts(2, held, arg);
    return NULL;
}

static void *release_later(void *arg) {
    nap_ns(50000000);  /* 50 ms: the fork has long been asked for by then */
    atomic_store(&((Held *)arg)->released, 1);
    return NULL;
}

/* Fork while another thread's call holds in its parts (released 50 ms later): 1 when the fork
 * returned after every part had finished, in the parent and in the child's copy of memory,
 * and the child runs a call of 2 parts. */
static int fork_waits_for_a_call_in_flight(void) {
    static Held h;
    memset(&h, 0, sizeof h);
    pthread_t caller, releaser;
    pthread_create(&caller, NULL, call_held, &h);
    while (atomic_load(&h.entered) == 0)
        nap_ns(100000);
    pthread_create(&releaser, NULL, release_later, &h);
    pid_t child = fork();
    if (child == 0)
        _exit(!(atomic_load(&h.finished) == atomic_load(&h.entered) && child_runs_two_parts()));
    int finished = atomic_load(&h.finished) == atomic_load(&h.entered);
    pthread_join(caller, NULL);
    pthread_join(releaser, NULL);
    return exited_well(child) && finished;
}

/* A thread that starts calls of 2 parts, one after another, while *calling. */
typedef struct {
    Rounds r;
    atomic_int *calling;
    int calls;
} Repeater;

static void *call_repeatedly(void *arg) {
    Repeater *c = arg;
    while (atomic_load(c->calling)) {
        call_rounds(2, &c->r);
        c->calls++;
    }
    return NULL;
}

/* FORKS forks while two threads keep starting calls: 1 when each fork returned within a
 * second (it waits for the calls in flight, not for those started after it), every child ran
 * a call of 2 parts, and no call saw a stale slot. */
enum { FORKS = 10 };
static int forks_are_not_held_back_by_new_calls(void) {
    static Repeater a, b;
    static atomic_int calling;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    a.r.rounds = b.r.rounds = CALLER_ROUNDS;
    a.calling = b.calling = &calling;
    atomic_store(&calling, 1);
    pthread_t ta, tb;
    pthread_create(&ta, NULL, call_repeatedly, &a);
    pthread_create(&tb, NULL, call_repeatedly, &b);
    int ok = 1;
    int64_t slowest = 0;
    for (int i = 0; i < FORKS; ++i) {
        nap_ns(2000000);
        int64_t start = cells_now_ns();
        pid_t child = fork();
        if (child == 0)
            _exit(!child_runs_two_parts());
        int64_t took = cells_now_ns() - start;
        slowest = took > slowest ? took : slowest;
        ok &= exited_well(child);
    }
    atomic_store(&calling, 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    printf("  (slowest fork: %.1f ms; calls meanwhile: %d)\n", slowest / 1e6, a.calls + b.calls);
    return ok && slowest < 1000000000 && a.calls > 0 && b.calls > 0
           && atomic_load(&a.r.stale) == 0 && atomic_load(&b.r.stale) == 0;
}

/* Part 0 forks (its child exits at once); arg: whether the child exited with success. */
static void fork_inside(void *arg, cells_part me) {
    if (me.part != 0)
        return;
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    *(int *)arg = exited_well(child);
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
        snprintf(what, sizeof what, "%s: %d parts, %d calls of %d claimed rounds", prefix,
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
    run_parts(2, nested, &inner_ran);
    snprintf(what, sizeof what, "%s: a call from inside a part runs alone", prefix);
    check(what, inner_ran == 1);

    snprintf(what, sizeof what, "%s: a fork waits for the call in flight", prefix);
    check(what, fork_waits_for_a_call_in_flight());
    snprintf(what, sizeof what, "%s: forks while two threads keep calling", prefix);
    check(what, forks_are_not_held_back_by_new_calls());
    int forked_inside = 0;
    run_parts(2, fork_inside, &forked_inside);
    snprintf(what, sizeof what, "%s: a fork from inside a part", prefix);
    check(what, forked_inside);
}

/* Every check through each entry; process names the process. */
static void run_entries(const char *process) {
    char prefix[60];
    run_parts = cells_run_parts;
    snprintf(prefix, sizeof prefix, "%s, team", process);
    run_checks(prefix);
    run_parts = cells_run_parts_with_openmp;
    snprintf(prefix, sizeof prefix, "%s, with OpenMP", process);
    run_checks(prefix);
}

int main(void) {
    cells_team_register_fork_handler();
    run_entries("parent");
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {  /* after threaded calls: OpenMP's pool is gone, cells' team takes over */
        run_entries("forked child");
        fflush(stdout);
        _exit(failures != 0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    check("the forked child exited with success", WIFEXITED(status) && WEXITSTATUS(status) == 0);
    printf("%d failures\n", failures);
    return failures != 0;
}
