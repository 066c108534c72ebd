/* The threads a call runs on (host only).
 *
 * cells_run_parts(nparts, fn, arg) runs fn(arg, me) for me.part = 0 .. nparts-1, a thread
 * each, on the threads that join the call in time, and returns once those have finished. The
 * parts claim their work task by task (claims.h), so a part that never starts holds nothing:
 * me.nparts is the most parts that may run, not how many do. Their waits spin for me.spin_ns,
 * yielding the core, before they sleep.
 *
 * Where the threads come from:
 *  - cells' team of POSIX threads (cells_run_parts). The calling thread runs part 0 and worker
 *    threads (named cells-team) parts 1 .. nparts-1, in the order they join the call. The call
 *    closes when its caller has finished part 0, and waits only for the workers that joined
 *    it: a worker descheduled by a busy neighbour process holds up nobody, and every wait
 *    yields the core (CELLS_YIELD_NS) to a thread queued behind it.
 *  - OpenMP's pool (cells_run_parts_with_openmp), when the extension is built with OpenMP and
 *    this process is not a child made by fork(): for the calls of cells.torch's operators.
 *    PyTorch's operators run on that pool, whose idle threads spin for milliseconds after each
 *    region; threads of cells' own beside them take turns with those spinners for the cores,
 *    so the two libraries' calls take turns on one pool instead. A region waits at its end for
 *    every thread of the pool's team, descheduled or not.
 *  In a forked child (multiprocessing's default start method on Linux, DataLoader workers,
 *  pre-fork servers) and in a build without OpenMP both run on cells' team: GCC's OpenMP
 *  runtime keeps the threads of the parent's pool, which fork() did not copy, and a child that
 *  opens a region of more than one thread waits for them forever. The child's first threaded
 *  call starts workers of its own.
 *
 * fork() waits for the calls in flight: from the moment a fork is asked for, no call starts
 * until the fork is done, and the fork waits until every call in flight has returned and the
 * team's workers have ended (the fork gate, below; cells_team_register_fork_handler registers
 * its pthread_atfork handlers at import). So the child never holds a lock, a waiter or an
 * allocation of a call of the parent that it cannot finish.
 *
 * The team starts no thread until a call asks for more than one part, then grows to the
 * largest count any call has asked for. One call at a time runs on it: a call that finds it
 * busy (another thread of the process is in a threaded call, or fn itself calls
 * cells_run_parts) runs on its own thread, as part 0 of 1: the same results without the
 * parallelism, and never more threads than the team. A call also runs on fewer parts when the
 * system refuses to start a worker, as an OpenMP region may get fewer threads than it asks
 * for. Both functions return the number of parts that ran.
 *
 * Waiting (for a claimed task, for a call's parts, a worker between calls) spins first,
 * yielding the core at every look after CELLS_YIELD_NS, then sleeps until it is woken
 * (CELLS_SPIN_NS says how long, and why). */
#ifndef CELLS_TEAM_H
#define CELLS_TEAM_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#if defined(_OPENMP)
#include <omp.h>
#endif
#include <sched.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

/* The most parts a call can run on. */
#define CELLS_MAX_THREADS 256
/* How long a waiting thread (for a claimed task, for its call's parts, a team worker between
 * calls) spins before it sleeps. In a process whose other libraries keep threads of their own
 * yielding or spinning (OpenBLAS, ONNX Runtime), a shorter spin sleeps at almost every step
 * and waits for its wake-up; with 2 ms a call runs as fast as alone (GCC's OpenMP runtime
 * spins about as long). A call on more threads than the process has cores spins only
 * CELLS_CROWDED_SPIN_NS: there a spinning thread holds the core that the thread it waits for
 * needs. */
#define CELLS_SPIN_NS 2000000
#define CELLS_CROWDED_SPIN_NS 20000

/* A spinning waiter yields its core at every look (after this long): the thread it waits for
 * may be queued on the same core (the system runs more threads than cores, a busy neighbour
 * process on each), where a pure spin holds it off until the scheduler's next tick. */
#define CELLS_YIELD_NS 20000

/* A counter that threads wait on to move: one thread advances it by one at a time, the others
 * wait until it reaches the value they need (one past the value they saw, or a count). */
typedef struct {
    atomic_uint value;
    atomic_int sleepers;    /* waiters asleep on moved (or about to be) */
    pthread_mutex_t lock;   /* guards the sleep */
    pthread_cond_t moved;
} cells_signal;

typedef struct {
    int part;                /* this part, of */
    int nparts;              /* the parts of the call */
    int64_t spin_ns;         /* how long its waits spin before they sleep: CELLS_SPIN_NS, or
                                CELLS_CROWDED_SPIN_NS on more parts than cores */
} cells_part;

typedef void (*cells_part_fn)(void *arg, cells_part me);

static inline void cells_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static inline int64_t cells_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void cells_signal_init(cells_signal *s) {
    atomic_store(&s->value, 0);
    atomic_store(&s->sleepers, 0);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->moved, NULL);
}

static void cells_signal_destroy(cells_signal *s) {
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->moved);
}

/* Wake s's sleepers, after the count they wait for has moved. (A waiter counts itself a
 * sleeper, then reads the count, under the lock; a mover moves the count, then reads the
 * sleepers: one of the two sees the other, so no waiter sleeps through the move.) */
static void cells_signal_wake(cells_signal *s) {
    if (atomic_load(&s->sleepers) > 0) {
        pthread_mutex_lock(&s->lock);
        pthread_cond_broadcast(&s->moved);
        pthread_mutex_unlock(&s->lock);
    }
}

/* Move s on and wake its sleepers. */
static void cells_signal_move(cells_signal *s) {
    atomic_fetch_add(&s->value, 1);
    cells_signal_wake(s);
}

/* A count that threads wait for: count(arg), moved by threads that wake s's sleepers after. */
typedef unsigned (*cells_count_fn)(const void *arg);

/* Wait until count(arg) reaches `target` (mod 2^32: within 2^31 moves ahead of it): spin for
 * spin_ns, yielding the core at every look after CELLS_YIELD_NS, then sleep on s. */
static void cells_wait_for(cells_signal *s, cells_count_fn count, const void *arg,
                           unsigned target, int64_t spin_ns) {
    int64_t start = 0;
    for (unsigned spins = 0; (int)(count(arg) - target) < 0; spins++) {
        if (spins % 64 == 0) {  /* a clock read costs about 64 pauses */
            int64_t now = cells_now_ns();
            if (start == 0) {
                start = now;
            } else if (now - start > spin_ns) {
                pthread_mutex_lock(&s->lock);
                atomic_fetch_add(&s->sleepers, 1);
                while ((int)(count(arg) - target) < 0)
                    pthread_cond_wait(&s->moved, &s->lock);
                atomic_fetch_sub(&s->sleepers, 1);
                pthread_mutex_unlock(&s->lock);
                return;
            } else if (now - start > CELLS_YIELD_NS) {
                sched_yield();
            }
        }
        cells_pause();
    }
}

static unsigned cells_signal_value(const void *s) {
    return atomic_load_explicit(&((const cells_signal *)s)->value, memory_order_acquire);
}

/* Wait until s's value reaches `target` (cells_wait_for). */
static void cells_signal_wait_for(cells_signal *s, unsigned target, int64_t spin_ns) {
    cells_wait_for(s, cells_signal_value, s, target, spin_ns);
}

/* Wait until s moves past `seen`, the value seen before. */
static void cells_signal_wait(cells_signal *s, unsigned seen, int64_t spin_ns) {
    cells_signal_wait_for(s, seen + 1, spin_ns);
}

/* ------------------------------------------------------------------------------------------ */
/* cells' team                                                                                 */
/* ------------------------------------------------------------------------------------------ */

/* Whether this thread is running a part of a call: a call made from there is nested in that
 * call (the fork gate lets it through, see cells_gate_enter). */
static _Thread_local int cells_in_part;

/* The call in flight on the team, in one word: its number (the high 32 bits), which tells one
 * call from the next, and its seats left (the low bits): how many more workers may join it. A
 * call opens with nparts - 1 seats; a worker joins by taking one (compare-and-swap on the whole
 * word, so a worker that read the word of a call since closed takes nothing). The call closes
 * when its caller has finished its own part, by taking the seats left. */
#define CELLS_CALL_SEATS 0xffffffffull

static struct {
    int forked;             /* this process is a child made by fork() */
    pthread_mutex_t busy;   /* held by the call running on the team */
    int workers;            /* worker threads running */
    pthread_t threads[CELLS_MAX_THREADS];  /* theirs, for cells_team_retire */
    atomic_int retiring;    /* set before `start` moves: the workers end, not join a call */
    /* The call in flight, written before it opens (no seat is left to take meanwhile): */
    cells_part_fn fn;
    void *arg;
    int nparts;
    unsigned calls;         /* the calls run, the last one's number */
    atomic_ullong call;     /* the call's number and its seats left (CELLS_CALL_SEATS) */
    atomic_llong spin_ns;   /* how long the workers spin for the next call (the last call's) */
    cells_signal start;     /* moves once per call: the workers' go */
    cells_signal done;      /* moves once per worker that finishes its part of a call */
} cells_team = {
    .busy = PTHREAD_MUTEX_INITIALIZER,
    .start = {.lock = PTHREAD_MUTEX_INITIALIZER, .moved = PTHREAD_COND_INITIALIZER},
    .done = {.lock = PTHREAD_MUTEX_INITIALIZER, .moved = PTHREAD_COND_INITIALIZER},
};

/* The value of `start` a new worker waits to see move. */
static unsigned cells_worker_seen[CELLS_MAX_THREADS];

/* Take a seat in the call in flight: the part this worker runs (1 .. nparts - 1), or 0 when
 * no seat is left (the call is full or closed, or none is in flight). */
static int cells_team_join(void) {
    unsigned long long call = atomic_load(&cells_team.call);
    while (call & CELLS_CALL_SEATS)
        if (atomic_compare_exchange_weak(&cells_team.call, &call, call - 1))
            return cells_team.nparts - (int)(call & CELLS_CALL_SEATS);
    return 0;
}

/* A worker: each time `start` moves, join the call in flight if a seat is left, run its part
 * and report; end when the team retires. A worker that wakes late (descheduled, or a call of
 * fewer parts) finds no seat and touches nothing of the call. */
static void *cells_worker(void *arg) {
    unsigned seen = *(unsigned *)arg;
#if defined(__linux__)
    prctl(PR_SET_NAME, "cells-team");  /* in top -H, /proc/PID/task/TID/comm, debuggers */
#endif
    cells_in_part = 1;  /* a worker runs nothing but parts */
    for (;;) {
        cells_signal_wait(&cells_team.start, seen, atomic_load(&cells_team.spin_ns));
        seen = atomic_load(&cells_team.start.value);
        if (atomic_load(&cells_team.retiring))
            return NULL;
        int part = cells_team_join();
        if (part > 0) {
            cells_part me = {part, cells_team.nparts, atomic_load(&cells_team.spin_ns)};
            cells_team.fn(cells_team.arg, me);
            cells_signal_move(&cells_team.done);
        }
    }
}

/* End the workers and wait until their threads are gone (no call is in flight: the fork gate
 * is closed); the next call that needs workers starts new ones. Before a fork: a worker that
 * finished a call may still hold the lock of `done` (moving it after its caller saw it move),
 * be on its way back from a call it found closed, or be asleep on `start`, and a child would
 * inherit that lock held, or a condition variable that counts a waiter it does not have. */
static void cells_team_retire(void) {
    if (cells_team.workers == 0)
        return;
    atomic_store(&cells_team.retiring, 1);
    cells_signal_move(&cells_team.start);
    for (int w = 0; w < cells_team.workers; ++w)
        pthread_join(cells_team.threads[w], NULL);
    cells_team.workers = 0;
    atomic_store(&cells_team.retiring, 0);
}

/* Start workers until the team can run nparts parts (the caller holds `busy`); return the
 * parts it can run. The workers block every signal: Python handles them on its main thread. */
static int cells_team_grow(int nparts) {
    sigset_t all, before;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &before);
    while (cells_team.workers < nparts - 1) {
        int w = cells_team.workers;
        cells_worker_seen[w] = atomic_load(&cells_team.start.value);
        if (pthread_create(&cells_team.threads[w], NULL, cells_worker, &cells_worker_seen[w]) != 0)
            break;
        cells_team.workers = w + 1;
    }
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    return nparts < cells_team.workers + 1 ? nparts : cells_team.workers + 1;
}

/* fn on nparts parts of the team (the caller holds `busy`, the workers are started): the
 * caller runs part 0, and up to nparts - 1 workers join. The call closes once part 0 has
 * returned and waits only for the workers that joined it. Returns the parts that ran. */
static int cells_team_run(int nparts, cells_part_fn fn, void *arg, int64_t spin_ns) {
    const unsigned long long seats = (unsigned long long)(nparts - 1);
    cells_team.fn = fn;
    cells_team.arg = arg;
    cells_team.nparts = nparts;
    unsigned long long number = (unsigned long long)++cells_team.calls << 32;
    atomic_store(&cells_team.spin_ns, spin_ns);
    unsigned done = atomic_load(&cells_team.done.value);
    atomic_store(&cells_team.call, number | seats);
    cells_signal_move(&cells_team.start);
    cells_part me = {0, nparts, spin_ns};
    fn(arg, me);
    unsigned long long joined = seats - (atomic_exchange(&cells_team.call, number)
                                         & CELLS_CALL_SEATS);
    cells_signal_wait_for(&cells_team.done, done + (unsigned)joined, spin_ns);
    return 1 + (int)joined;
}

/* ------------------------------------------------------------------------------------------ */
/* The fork gate                                                                               */
/* ------------------------------------------------------------------------------------------ */

/* fork() copies the calling thread alone: whatever another thread held at that moment stays
 * held in the child, by no one, and re-initialising it there is undefined. A call in flight
 * holds such things: `busy`, the lock of a signal it moves or sleeps on (the team's, and its
 * claims' on its caller's stack), the condition variables its sleepers wait on, and the
 * allocator inside its parts' malloc and free (their packed weights). glibc's malloc takes
 * its own locks around fork; the AddressSanitizer runtime of GCC 12 registers no fork handler,
 * so a child can inherit its allocator's locks held. A fork therefore waits for the calls:
 *  - prepare (before the copy): close the gate, so that no call starts, then wait until no
 *    call is in flight and end the team's workers (cells_team_retire);
 *  - parent and child (after it): open the gate. The child finds every lock of cells free and
 *    no waiter on its condition variables, and uses them as they are.
 * A call that finds the gate closed waits until it opens: a fork waits for the calls that
 * were in flight when it closed the gate, not for the ones other threads keep starting. It
 * may wait long: as long as the longest call in flight (seconds, for a long sequence).
 *
 * The gate itself is atomics and a short sleep in a loop (waits at it are rare: a fork, or
 * calls during one), so that it holds no lock and has no waiter that a fork could copy; a call
 * pays for it an atomic add and subtract and two looks at a thread-local flag (nanoseconds;
 * the shortest call takes microseconds). `forking` is held by the thread that forks, from prepare to parent
 * and child (one fork at a time), which POSIX defines: the child's one thread unlocks its own
 * lock.
 *
 * Code of cells that runs without the GIL outside any call, and allocates or takes a lock
 * there, passes the gate the same way: cells_gate_enter() before, cells_gate_leave() after.
 *
 * A call from inside a part (cells_in_part) passes the gate: its outer call is in flight
 * already, and a fork that waits for the outer call would wait for it forever. A fork from
 * inside a part cannot wait for its own call: the handlers do nothing then, and the child may
 * only exec or _exit. No caller of cells forks there (a part runs no Python code). Python's
 * os.fork holds the GIL through the handlers; the calls it waits for run without the GIL, and
 * wait at the gate without it.
 *
 * Prepare handlers run in the reverse order of their registration, so those of libraries
 * loaded after cells (PyTorch, ONNX Runtime) run before this one and may hold their locks
 * while it waits: a part takes none of them (it runs cells' code and scipy's BLAS, loaded
 * before cells registers), so the calls finish. */
static struct {
    atomic_int calls;         /* calls in flight, not counting calls from inside a part */
    atomic_int closed;        /* a fork is waiting for the calls or copying the process */
    pthread_mutex_t forking;  /* held by the thread that forks, from prepare to parent/child */
} cells_gate = {.forking = PTHREAD_MUTEX_INITIALIZER};

/* A wait at the gate between two looks: short against a fork (milliseconds), long against
 * an atomic load. */
#define CELLS_GATE_NAP_NS 50000

static void cells_gate_nap(void) {
    struct timespec nap = {0, CELLS_GATE_NAP_NS};
    nanosleep(&nap, NULL);
}

/* Count a call in flight, once the gate is open. (The call counts itself, then reads
 * `closed`; a fork closes, then reads `calls`: one of the two sees the other, so either the
 * fork waits for the call or the call steps back and waits for the fork.) */
static void cells_gate_enter(void) {
    for (;;) {
        while (atomic_load(&cells_gate.closed))
            cells_gate_nap();
        atomic_fetch_add(&cells_gate.calls, 1);
        if (!atomic_load(&cells_gate.closed))
            return;
        atomic_fetch_sub(&cells_gate.calls, 1);
    }
}

static void cells_gate_leave(void) {
    atomic_fetch_sub(&cells_gate.calls, 1);
}

static void cells_fork_prepare(void) {
    if (cells_in_part)
        return;
    pthread_mutex_lock(&cells_gate.forking);
    atomic_store(&cells_gate.closed, 1);
    while (atomic_load(&cells_gate.calls) > 0)
        cells_gate_nap();
    cells_team_retire();
}

static void cells_fork_in_parent(void) {
    if (cells_in_part)
        return;
    atomic_store(&cells_gate.closed, 0);
    pthread_mutex_unlock(&cells_gate.forking);
}

/* In a forked child: the threads come from cells' team (no workers yet) from now on. */
static void cells_fork_in_child(void) {
    cells_team.forked = 1;
    if (cells_in_part)
        return;
    atomic_store(&cells_gate.closed, 0);
    pthread_mutex_unlock(&cells_gate.forking);
}

/* Once, before the process can fork (the extension's import). */
static void cells_team_register_fork_handler(void) {
    pthread_atfork(cells_fork_prepare, cells_fork_in_parent, cells_fork_in_child);
}

/* ------------------------------------------------------------------------------------------ */
/* The three ways to run a call's parts                                                        */
/* ------------------------------------------------------------------------------------------ */

static int cells_run_alone(cells_part_fn fn, void *arg, int64_t spin_ns) {
    cells_part me = {0, 1, spin_ns};
    fn(arg, me);
    return 1;
}

#if defined(_OPENMP)
static int cells_run_on_openmp(int nparts, cells_part_fn fn, void *arg, int64_t spin_ns) {
    int ran = 1;
#pragma omp parallel num_threads(nparts)
    {
        cells_part me = {omp_get_thread_num(), omp_get_num_threads(), spin_ns};
        if (me.part == 0)
            ran = me.nparts;
        int outer = cells_in_part;  /* the pool's threads run other libraries' work too */
        cells_in_part = 1;
        fn(arg, me);
        cells_in_part = outer;
    }
    return ran;
}
#endif

static int cells_run_on_team(int nparts, cells_part_fn fn, void *arg, int64_t spin_ns) {
    if (pthread_mutex_trylock(&cells_team.busy) != 0)
        return cells_run_alone(fn, arg, spin_ns);
    int parts = cells_team_grow(nparts);
    int ran = parts > 1 ? cells_team_run(parts, fn, arg, spin_ns) : 0;
    pthread_mutex_unlock(&cells_team.busy);
    return ran > 0 ? ran : cells_run_alone(fn, arg, spin_ns);
}

/* The cores this process may run on. */
static int cells_cores(void) {
#if defined(__linux__) && defined(CPU_COUNT)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        return CPU_COUNT(&set);
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* fn on nparts parts: on OpenMP's pool where `openmp` asks for it and the pool is there (not
 * in a forked child), else on cells' team. */
static int cells_run(int nparts, cells_part_fn fn, void *arg, int openmp) {
    int nested = cells_in_part;
    if (!nested)
        cells_gate_enter();
    cells_in_part = 1;
    const int64_t spin_ns = nparts <= cells_cores() ? CELLS_SPIN_NS : CELLS_CROWDED_SPIN_NS;
    int ran;
    if (nparts < 2)
        ran = cells_run_alone(fn, arg, spin_ns);
#if defined(_OPENMP)
    else if (openmp && !cells_team.forked)
        ran = cells_run_on_openmp(nparts, fn, arg, spin_ns);
#endif
    else
        ran = cells_run_on_team(nparts, fn, arg, spin_ns);
#if !defined(_OPENMP)
    (void)openmp;  /* no pool to run on */
#endif
    cells_in_part = nested;
    if (!nested)
        cells_gate_leave();
    return ran;
}

static int cells_run_parts(int nparts, cells_part_fn fn, void *arg) {
    return cells_run(nparts, fn, arg, 0);
}

static int cells_run_parts_with_openmp(int nparts, cells_part_fn fn, void *arg) {
    return cells_run(nparts, fn, arg, 1);
}

#endif
