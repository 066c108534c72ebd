/* Work that a call's threads claim task by task (host only): how a call keeps going when one
 * of its threads is descheduled, and how each thread keeps to its own share otherwise.
 *
 * Were a call's threads to own fixed shares and meet at a barrier once a step, then whenever
 * the operating system deschedules one thread (a busy neighbour process on its core), every
 * other thread would wait at the next barrier until it runs again, a time slice
 * (milliseconds) per step. Here a call's work is a sequence of phases of `tasks` tasks each,
 * numbered across the call; a thread claims the next task of the current phase, runs it and
 * counts it finished, and a thread that finds no task left waits until the phase's tasks are
 * all finished. A thread that is
 * descheduled claims nothing meanwhile, and the others run its share: they wait only for a
 * task that it claimed and has not finished (one time slice, at most, per descheduling), and
 * a thread that comes back late finds its phases done and catches up without work. Which
 * thread runs a task changes nothing in its result.
 *
 * Homes. The tasks of a phase are dealt out to the call's parts in nearly equal ranges, a
 * part's home: tasks [h·tasks/homes, (h+1)·tasks/homes) are part h's. A part claims its home's
 * tasks first, in order, then the tasks left in the other homes (the next part's first). In a
 * quiet process every part then runs its own range at every phase, the same tasks as on fixed
 * shares: the weights and rows those tasks read stay in its core's caches from phase to phase.
 * A home's counter is on a cache line of its own, so that claiming one's own task touches no
 * line another part writes; `claimed` counts the claims of the whole call, so that a part
 * that finds its home empty looks at the other homes only while a task is left in one.
 *
 * cells_claims_init(c, homes) before the call's parts start (homes: the parts asked for, at
 * most CELLS_MAX_THREADS; fewer may run, and the others then run the homes of those that do
 * not); each part then runs, for phase g (0, 1, ...) of `tasks` tasks:
 *     long task;
 *     while ((task = cells_claim(c, g, tasks, me.part)) >= 0) { run task; cells_claim_finished(c); }
 *     cells_claims_wait(c, g, tasks, me.spin_ns);
 * (every part runs the same sequence of phases, with the same `tasks`, so each knows g).
 * cells_claims_destroy(c) after the call. A call's claims live on its caller's stack and are
 * never shared by calls. */
#ifndef CELLS_CLAIMS_H
#define CELLS_CLAIMS_H

#include "cells/team.h"

/* A home's next task, numbered across the call: in phase g its range [start, start + len)
 * is counted from g·len. */
typedef struct {
    _Alignas(64) atomic_llong next;
} cells_home;

typedef struct {
    _Alignas(64) atomic_llong claimed;  /* the tasks claimed in the call, every phase's */
    _Alignas(64) cells_signal finished; /* moves once per finished task: its value counts them
                                           (mod 2^32) */
    int homes;
    cells_home home[CELLS_MAX_THREADS];
} cells_claims;

static void cells_claims_init(cells_claims *c, int homes) {
    c->homes = homes < 1 ? 1 : homes > CELLS_MAX_THREADS ? CELLS_MAX_THREADS : homes;
    atomic_store(&c->claimed, 0);
    for (int h = 0; h < c->homes; ++h)
        atomic_store(&c->home[h].next, 0);
    cells_signal_init(&c->finished);
}

static void cells_claims_destroy(cells_claims *c) { cells_signal_destroy(&c->finished); }

/* The next unclaimed task of home h in phase g, as its index in the phase, or -1 when the
 * home has none left. A part reaches phase g only when every task before it is claimed (and
 * finished), so the home's counter is never below g's first. */
static long cells_claim_in(cells_claims *c, int h, long long g, long tasks) {
    const long start = (long)((long long)tasks * h / c->homes);
    const long len = (long)((long long)tasks * (h + 1) / c->homes) - start;
    const long long first = g * len, end = first + len;
    long long t = atomic_load_explicit(&c->home[h].next, memory_order_relaxed);
    while (t < end)
        if (atomic_compare_exchange_weak(&c->home[h].next, &t, t + 1)) {
            atomic_fetch_add(&c->claimed, 1);
            return start + (long)(t - first);
        }
    return -1;
}

/* The next unclaimed task of phase g for part `part`: its home's next, else the next of the
 * other homes', or -1 when every task of the phase is claimed. */
static long cells_claim(cells_claims *c, long long g, long tasks, int part) {
    const long long all = (g + 1) * tasks;   /* the tasks claimed once phase g is */
    const int own = part % c->homes;
    long task = cells_claim_in(c, own, g, tasks);
    for (int i = 1; task < 0 && i < c->homes && atomic_load(&c->claimed) < all; ++i)
        task = cells_claim_in(c, (own + i) % c->homes, g, tasks);
    return task;
}

static void cells_claim_finished(cells_claims *c) { cells_signal_move(&c->finished); }

/* Wait until every task of phase g is finished (team.h's wait: spin, yield, then sleep until
 * the last one finishes). */
static void cells_claims_wait(cells_claims *c, long long g, long tasks, int64_t spin_ns) {
    cells_signal_wait_for(&c->finished, (unsigned)((g + 1) * tasks), spin_ns);
}

#endif
