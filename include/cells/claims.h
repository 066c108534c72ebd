/* Work that a call's threads claim task by task (host only): how a prepared net's call keeps
 * going when one of its threads is descheduled.
 *
 * A call whose threads own fixed shares meets at a barrier once a step: when the operating
 * system deschedules one thread (a busy neighbour process on its core), every other thread
 * waits at the next barrier until it runs again, a time slice (milliseconds) per step. Here a
 * call's work is a sequence of phases of `tasks` tasks each, numbered across the call; any
 * thread claims the next task of the current phase, runs it and counts it finished, and a
 * thread that finds no task left waits until the phase's tasks are all finished. A thread
 * that is descheduled claims nothing meanwhile, and the others run its share: they wait only
 * for a task that it claimed and has not finished (one time slice, at most, per
 * descheduling), and a thread that comes back late finds its phases done and catches up
 * without work. Which thread runs a task changes nothing in its result.
 *
 * cells_claims_init(c) before the call's parts start; each part then runs, for phase g
 * (0, 1, ...) of `tasks` tasks:
 *     long task;
 *     while ((task = cells_claim(c, g, tasks)) >= 0) { run task; cells_claim_finished(c); }
 *     cells_claims_wait(c, g, tasks, spin_ns);
 * (every part runs the same sequence of phases, so each knows g). cells_claims_destroy(c)
 * after the call. A call's claims live on its caller's stack and are never shared by calls. */
#ifndef CELLS_CLAIMS_H
#define CELLS_CLAIMS_H

#include "cells/team.h"

typedef struct {
    atomic_llong next;      /* the next task to claim, numbered across the call's phases */
    cells_signal finished;  /* moves once per finished task: its value counts them (mod 2^32) */
} cells_claims;

static void cells_claims_init(cells_claims *c) {
    atomic_store(&c->next, 0);
    cells_signal_init(&c->finished);
}

static void cells_claims_destroy(cells_claims *c) { cells_signal_destroy(&c->finished); }

/* The next unclaimed task of phase g (tasks [g·tasks, (g+1)·tasks) of the call), as its
 * index in the phase, or -1 when every task of the phase is claimed. A thread reaches phase
 * g only when every task before it is finished, so `next` is never below g's first. */
static long cells_claim(cells_claims *c, long long g, long tasks) {
    const long long first = g * tasks, end = first + tasks;
    long long t = atomic_load(&c->next);
    while (t < end)
        if (atomic_compare_exchange_weak(&c->next, &t, t + 1))
            return (long)(t - first);
    return -1;
}

static void cells_claim_finished(cells_claims *c) { cells_signal_move(&c->finished); }

/* Wait until every task of phase g is finished (team.h's wait: spin, yield, then sleep until
 * the last one finishes). */
static void cells_claims_wait(cells_claims *c, long long g, long tasks, int64_t spin_ns) {
    cells_signal_wait_for(&c->finished, (unsigned)((g + 1) * tasks), spin_ns);
}

/* How long a part of me's call spins before it sleeps (team.h: CELLS_SPIN_NS, or less on
 * more parts than cores). */
static int64_t cells_part_spin_ns(cells_part me) { return me.meeting->spin_ns; }

#endif
