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

/* A wait for the tasks of a phase spins this long before it yields its core at every look,
 * then sleeps after the call's spin time (team.h's CELLS_SPIN_NS): a phase's last task takes
 * microseconds, unless its thread was descheduled. */
#define CELLS_CLAIMS_YIELD_NS 20000

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

/* Wait until every task of phase g is finished: spin for spin_ns, then sleep until the last
 * one finishes (cells_signal's protocol, team.h). */
static void cells_claims_wait(cells_claims *c, long long g, long tasks, int64_t spin_ns) {
    const unsigned end = (unsigned)((g + 1) * tasks); /* the count, mod 2^32, once finished */
    cells_signal *s = &c->finished;
    int64_t deadline = 0;
    for (unsigned spins = 0;
         (int)(atomic_load_explicit(&s->value, memory_order_acquire) - end) < 0; spins++) {
        if (spins % 64 == 0) { /* a clock read costs about 64 pauses */
            int64_t now = cells_now_ns();
            if (deadline == 0) {
                deadline = now + spin_ns;
            } else if (now > deadline - spin_ns + CELLS_CLAIMS_YIELD_NS && now <= deadline) {
                /* The task waited for may be on this core, queued behind this thread (the
                 * system runs more threads than cores): let it run. */
                sched_yield();
            } else if (now > deadline) {
                pthread_mutex_lock(&s->lock);
                atomic_fetch_add(&s->sleepers, 1);
                while ((int)(atomic_load(&s->value) - end) < 0)
                    pthread_cond_wait(&s->moved, &s->lock);
                atomic_fetch_sub(&s->sleepers, 1);
                pthread_mutex_unlock(&s->lock);
                return;
            }
        }
        cells_pause();
    }
}

/* How long a part of me's call spins before it sleeps (team.h: CELLS_SPIN_NS, or less on
 * more parts than cores). */
static int64_t cells_part_spin_ns(cells_part me) { return me.meeting->spin_ns; }

#endif
