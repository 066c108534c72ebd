/* Work that a call's threads claim task by task (host only): how a call keeps going when one
 * of its threads is descheduled, and how each thread keeps to its own share otherwise.
 *
 * Were a call's threads to own fixed shares and meet at a barrier once a step, then whenever
 * the operating system deschedules one thread (a busy neighbour process on its core), every
 * other thread would wait at the next barrier until it runs again, a time slice
 * (milliseconds) per step. Here a call's work is a sequence of phases of `tasks` tasks each,
 * numbered across the call; a thread claims the next task of the current phase, runs it and
 * counts it finished, and a thread that finds no task left waits until the phase's tasks are
 * all finished. A thread that is descheduled claims nothing meanwhile, and the others run its
 * share: they wait only for a task that it claimed and has not finished (one time slice, at
 * most, per descheduling), and a thread that comes back late finds its phases done and catches
 * up without work. Which thread runs a task changes nothing in its result.
 *
 * Homes. The tasks of a phase are dealt out to the call's parts in nearly equal ranges, a
 * part's home: tasks [h·tasks/homes, (h+1)·tasks/homes) are part h's. A part claims its home's
 * tasks first, in order, then the tasks left in the other homes (the next part's first). In a
 * quiet process every part then runs its own range at every phase, the same tasks as on fixed
 * shares: the weights and rows those tasks read stay in its core's caches from phase to phase.
 * A home's counter is on a cache line of its own, so that claiming one's own task touches no
 * line another part writes; so is the count of the tasks its part has finished (of any
 * home), which only that part writes, with a plain store, and the others read when they wait
 * for a phase (the sum over the homes): a finished task takes no atomic read-modify-write of a
 * line that the waiting parts read. A part whose home is empty looks at
 * the other homes only once its wait has lasted CELLS_STEAL_NS, long past the moment a running
 * part claims its own: in a quiet process it never reads another's home (which would cost that
 * part a cache miss at its next claim). A part that found a task to take over in a phase looks
 * at once in the next (its partner is likely away still). A call of one part (one home) claims
 * and counts with plain loads and stores: no other thread reads them.
 *
 * cells_claims_init(c, homes) before the call's parts start (homes: the parts asked for, at
 * most CELLS_MAX_THREADS; fewer may run, and the others then run the homes of those that do
 * not; -1 where memory ran out); each part `me` then runs, for phase g (0, 1, ...) of `tasks`
 * tasks:
 *     long task;
 *     while ((task = cells_claim(c, g, tasks, me)) >= 0) { run task; cells_claim_finished(c, me); }
 * cells_claim returns -1 once every task of the phase is finished (every part runs the same
 * sequence of phases, with the same `tasks`, so each knows g). cells_claims_destroy(c) after
 * the call. A call's claims live on its caller's stack and are never shared by calls. */
#ifndef CELLS_CLAIMS_H
#define CELLS_CLAIMS_H

#include <stdlib.h>

#include "cells/team.h"

/* How long a part whose home is empty waits for the phase's last tasks before it looks for an
 * unclaimed one in the other homes. */
#define CELLS_STEAL_NS 10000

/* Home h: its next task, numbered across the call (in phase g its range [start, start + len)
 * is counted from g·len); eager: its part took over another's task in its last phase; and
 * the tasks its part has finished, of any home (mod 2^32). Only its part writes eager and
 * finished; `next` the others take from only when they take over its tasks. */
typedef struct {
    _Alignas(64) atomic_llong next;
    int eager;
    _Alignas(64) atomic_uint finished;
} cells_home;

typedef struct {
    int homes;
    cells_home *home;   /* [homes] */
    cells_signal wake;  /* its sleepers wait for the count of finished tasks (its value unused) */
} cells_claims;

static int cells_claims_init(cells_claims *c, int homes) {
    void *home;
    c->homes = homes < 1 ? 1 : homes > CELLS_MAX_THREADS ? CELLS_MAX_THREADS : homes;
    if (posix_memalign(&home, 64, (size_t)c->homes * sizeof(cells_home)) != 0)
        return -1;
    c->home = home;
    for (int h = 0; h < c->homes; ++h) {
        atomic_store(&c->home[h].next, 0);
        c->home[h].eager = 0;
        atomic_store(&c->home[h].finished, 0);
    }
    cells_signal_init(&c->wake);
    return 0;
}

static void cells_claims_destroy(cells_claims *c) {
    cells_signal_destroy(&c->wake);
    free(c->home);
}

/* The tasks finished in the call, every phase's (mod 2^32): a cells_count_fn of the claims. */
static unsigned cells_claims_finished(const void *arg) {
    const cells_claims *c = arg;
    unsigned sum = 0;
    for (int h = 0; h < c->homes; ++h)
        sum += atomic_load_explicit(&c->home[h].finished, memory_order_acquire);
    return sum;
}

/* The next unclaimed task of home h in phase g, as its index in the phase, or -1 when the
 * home has none left. A part reaches phase g only when every task before it is claimed (and
 * finished), so the home's counter is never below g's first. */
static long cells_claim_in(cells_claims *c, int h, long long g, long tasks) {
    const long start = (long)((long long)tasks * h / c->homes);
    const long len = (long)((long long)tasks * (h + 1) / c->homes) - start;
    const long long first = g * len, end = first + len;
    long long t = atomic_load_explicit(&c->home[h].next, memory_order_relaxed);
    if (c->homes == 1) {
        if (t >= end)
            return -1;
        atomic_store_explicit(&c->home[h].next, t + 1, memory_order_relaxed);
        return start + (long)(t - first);
    }
    while (t < end)
        if (atomic_compare_exchange_weak(&c->home[h].next, &t, t + 1))
            return start + (long)(t - first);
    return -1;
}

/* An unclaimed task of phase g in the homes other than `own` (the next one's first), or -1. */
static long cells_claim_other(cells_claims *c, int own, long long g, long tasks) {
    long task = -1;
    for (int i = 1; task < 0 && i < c->homes; ++i)
        task = cells_claim_in(c, (own + i) % c->homes, g, tasks);
    return task;
}

/* The next task of phase g for part me: its home's next; else, once its wait for the phase
 * has lasted CELLS_STEAL_NS (at once after a phase in which it took one over), one left in
 * another home; else, once every task of the phase is finished, -1 (team.h's wait: spin,
 * yield, then sleep until the last one finishes). */
static long cells_claim(cells_claims *c, long long g, long tasks, cells_part me) {
    const int own = me.part % c->homes;
    long task = cells_claim_in(c, own, g, tasks);
    if (task >= 0 || c->homes == 1)
        return task;
    const unsigned all = (unsigned)((g + 1) * tasks);  /* finished once phase g is */
    cells_home *home = &c->home[own];
    if (!home->eager) {
        const int64_t start = cells_now_ns();
        for (unsigned spins = 1; (int)(cells_claims_finished(c) - all) < 0; spins++) {
            if (spins % 64 == 0 && cells_now_ns() - start > CELLS_STEAL_NS)
                break;
            cells_pause();
        }
    }
    if ((int)(cells_claims_finished(c) - all) < 0) {
        task = cells_claim_other(c, own, g, tasks);
        home->eager = task >= 0;
        if (task >= 0)
            return task;
        cells_wait_for(&c->wake, cells_claims_finished, c, all, me.spin_ns);
    }
    return -1;
}

/* Count a task that part me claimed finished (its home's count), and wake the parts asleep
 * waiting for their phase. */
static void cells_claim_finished(cells_claims *c, cells_part me) {
    atomic_uint *finished = &c->home[me.part % c->homes].finished;
    unsigned count = atomic_load_explicit(finished, memory_order_relaxed) + 1;
    if (c->homes == 1) {
        atomic_store_explicit(finished, count, memory_order_relaxed);
        return;
    }
    atomic_store(finished, count);
    cells_signal_wake(&c->wake);
}

/* Groups of homes: a call whose work is `groups` independent pieces (a bidirectional layer's
 * two directions, each a pass of its own with its own claims), each run by `size` parts at
 * once. Part p's home is home p % size of group p / size. A part runs a home only once it has
 * taken it (a compare-and-swap: one part a home, ever), its own first, then every home not
 * taken yet, of every group, in order from its own: so a group whose parts never join the call
 * (the team's workers may not, cells/team.h) is run by the part that finishes first, part 0
 * at the latest, and a group with any part at work gets on as its claims let a part run the
 * tasks of the homes whose parts are away. In a quiet process every part finds its own home
 * free and the others taken. A part that takes a home late, its group's work done, finds
 * every phase finished (claims.h: it catches up without work).
 *
 * cells_groups_init(g, groups, size) before the call's parts start (-1 where memory ran out);
 * every part then calls cells_groups_run(g, me, run, arg), which calls run(arg, group, home)
 * for each home it takes (home: the part of the group that runs it, home.nparts = size);
 * cells_groups_destroy(g) after the call. */
typedef void (*cells_group_fn)(void *arg, int group, cells_part home);

typedef struct {
    int groups, size;
    atomic_int *taken;  /* [groups · size]: whether a part has taken the home */
} cells_groups;

static int cells_groups_init(cells_groups *g, int groups, int size) {
    g->groups = groups < 1 ? 1 : groups;
    g->size = size < 1 ? 1 : size;
    g->taken = malloc((size_t)g->groups * (size_t)g->size * sizeof(atomic_int));
    if (g->taken == NULL)
        return -1;
    for (int h = 0; h < g->groups * g->size; ++h)
        atomic_store(&g->taken[h], 0);
    return 0;
}

static void cells_groups_destroy(cells_groups *g) { free(g->taken); }

static void cells_groups_run(cells_groups *g, cells_part me, cells_group_fn run, void *arg) {
    const int homes = g->groups * g->size;
    for (int i = 0; i < homes; ++i) {
        const int h = (me.part + i) % homes;
        int free_home = 0;
        if (!atomic_compare_exchange_strong(&g->taken[h], &free_home, 1))
            continue;
        cells_part home = {h % g->size, g->size, me.spin_ns};
        run(arg, h / g->size, home);
    }
}

#endif
