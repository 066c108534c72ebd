"""The time loop of every cell family: the forward and backward passes over a sequence, for float
and double.

Every public function of cells (a cell, a time loop, a backward pass, an ONNX operator) is one
call of `forward` or `backward` here, with sL = 1 for a cell. cells/_loop_call.pxd holds the
sizes, options and named buffers of one call (every array's shape is documented there, once);
include/cells/families.h says what each family is (cells/_family_table.pyx reads its table for
Python), and include/cells/step.h what its steps do.
This module owns what is the same for every family:

Sequences: row b runs its first len_b = seq_len[b] loop steps, at time index tau =
step_time(t, len_b, forward) (cells/_small_loops.pxd); past them its state is frozen and its
outputs (and, in the workspace, its gates, c and aux) at the padded time indices are 0; the
backward passes its carried gradient through them unchanged. At a row's first step the state is
hI (and cI); a row's final state is the state after its last valid step (hI, cI when len_b = 0).

Threads: a pass runs as the parts of one cells_run_parts call (include/cells/team.h: on cells'
team, or on OpenMP's pool for cells.torch's calls), a thread each, and its work is tasks that
the parts claim (include/cells/claims.h), in phases that end only where a task reads what other
tasks wrote. A task is a block of the units (its block of
each gate block): it multiplies the state by its columns of op(Wh), packed once per call in
the pass's first phase (cells/_panels.pxd, L.shares), then runs its family's step for just
those elements; a forward step is one phase (two for a family with a second phase, the
reset-before GRU, and one more with Wproj). There are as many tasks as parts, and part p
claims task p first (its home): in a quiet process every part runs its own block at every
step, on weights that stay in its core's caches; when the system deschedules a part (a busy
process beside it), the others run its tasks, and wait only for a task it holds. The input
projection (a chunk of time steps at a time, just before the steps that read it) and the
backward's dL/dx run on packed weights too (a call of one step, whose every product runs once,
reads the weights in place: call_weights); the backward's weight gradients are one product per
weight and task, each its own columns, on the same kernels reading the inputs and dz in place
(gemm_tn; on BLAS for a gradient over TN_C_BYTES: the only products on BLAS). Where the batch
is large and the recurrent weights small (splits_rows), a task is instead a block of the batch
rows over every step, run on the packed copy of all the weights of the part that runs it, and
the loop has no phase to wait for (the backward adds up the tasks' sums over their rows,
dL/db and dL/dP, after it; part_share says who owns what). Between the two, on 4 threads or
more (row_groups), the rows run in groups, each group's steps a pass of its own on a group of
the parts that split its units (its own claims, packed weights and sums: run_pass): a part
waits at a step only for the parts of its group, which read the same rows; the backward's
gradients over all steps then run on every part. A part whose share of the units is narrower
than a panel packs its gate blocks side by side (pack_side_by_side).

The backward: only the dL/dh (and dL/dc) recurrence runs step by step, with dL/db = Σ dz
(and dL/dP) summed as each step's dz is written; after the loop, dL/dx = dz·op(Wx)ᵀ,
dL/dWx = Σ xᵀ·dz and dL/dWh = Σ hPrevᵀ·d are products over all steps. Each step's dz
overwrites its gates once the step has read them: a training step takes no memory beyond
the forward's workspace.

A family whose step reduces across a row's units (LayerNorm cells: the table's row_reduction)
runs its steps on whole rows, and no reduction crosses threads: where the units split
(L.row_steps), a stage's products are a phase of tasks of blocks of the units, and its steps
a phase of as many tasks of blocks of the rows (step_share); the backward sums dL/db and dL/dP
over each task's rows, as the row split does.

A family with no recurrent product (IndRNN: recurrent_product 0) has no op(Wh): neither pass
multiplies by it, and there is no dL/dWh.

Zoneout (L.zone): after each step, h = hPrev + zone∘(hNew - hPrev), for any family whose output
is not projected; the backward splits each step's dL/dh between the step and hPrev to match.

Prepared nets (cells.PreparedNet, PreparedWeights below): prepare() packs a family's weights
whole, once (L.prepared); each inference call runs forward_loop on them, each thread taking
views of whole panels (part_units aligned to the panel width; its tasks are blocks of whole
panels, or of 8 rows), every product in fixed order
(gemm_panels_fixed). An output's bits then depend on neither the rows beside it, nor the steps
a call spans, nor the thread that computes it.
"""
cimport numpy as cnp
from libc.math cimport INFINITY
from libc.stdint cimport int8_t, int32_t, int64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy, memset

from cells._blas cimport ACCUMULATE, AS_IS, OVERWRITE, TRANSPOSED, real
from cells._family_table cimport (
    CELLS_ACTIVATIONS, CELLS_PARAM_GRAD_STEPS, backward_step, cells_families, cells_family_info,
    forward_step,
)
from cells._loop_call cimport Loop, Prepared
from cells._small_loops cimport (
    add_units, copy_units, prev_state_product, row_len, step_time, sum_rows, weight_grad,
    zero_units, zoneout_grad_units, zoneout_units,
)
from cells._team cimport (
    CELLS_MAX_THREADS, Units, cells_claim, cells_claim_finished, cells_claims,
    cells_claims_destroy, cells_claims_init, cells_gate_enter, cells_gate_leave,
    cells_group_fn, cells_groups, cells_groups_destroy, cells_groups_init, cells_groups_run,
    cells_part, cells_part_fn, cells_run_parts, cells_run_parts_with_openmp,
    cells_team_register_fork_handler, part_start, part_units,
)
from cells._panels cimport (
    BF16_PANELS, CELLS_LOWP_Q8_K_MAX, CELLS_LOWP_Q8_QMAX,
    CELLS_PANEL_WIDTH_D, CELLS_PANEL_WIDTH_F, INT8_PANELS, NATIVE_PANELS, PROJECT_ROWS,
    CELLS_ISA_AVX2, CELLS_ISA_AVX512, CELLS_ISA_GENERIC, PackedWeights, Rows, RowScratch,
    cells_isa, cells_isa_cpu, cells_isa_set, cells_l2_bytes, cells_panel_tn_c_bytes,
    cells_lowp_q8_pack_quantized, convert_rows, free_packed,
    gemm_packed, lowp_row_bytes, multiply, pack_lowp, pack_side_by_side, pack_weights,
    packs_side_by_side, panel_columns, panel_width, project,
    project_rows, rows_from, weights_in_place,
)

import numpy as np

from cells import _validate as check
from cells._arrays import type_name
from cells._family_table import FAMILIES, LSTM_ACTIVATIONS

cnp.import_array()

# A part's block of the units starts at a multiple of a cache line's elements (part_units):
# on arrays that start on a cache line (cells/_cpu.py allocates them so), no two parts write
# one line of a row, and every part's row starts vector-aligned. A prepared net's blocks start
# at a multiple of the panel width (whole panels of its packed weights).
CACHE_LINE = 64

def line_aligned_empty(shape, dtype):
    """A new uninitialised C-ordered array of `shape` (a tuple, or an int) and `dtype` whose data
    starts on a cache line (NumPy's start on 16 bytes): a view of a uint8 buffer CACHE_LINE
    bytes longer. A call's threads write their blocks of the units (whole lines) side by side
    in such arrays without sharing a line."""
    shape = (shape,) if isinstance(shape, int) else shape
    dtype = np.dtype(dtype)
    cdef Py_ssize_t nbytes = dtype.itemsize, extent
    for extent in shape:
        nbytes *= extent
    cdef cnp.ndarray buffer = np.empty(nbytes + CACHE_LINE, np.uint8)
    cdef Py_ssize_t start = (-<size_t>cnp.PyArray_DATA(buffer)) % CACHE_LINE
    return np.ndarray(shape, dtype, buffer, start)


# The most threads a call can run on (include/cells/team.h).
MAX_THREADS = CELLS_MAX_THREADS
# A core's L2 in bytes, read from the machine here, as the module is imported, before any of its
# threads reads it (include/cells/caches.h): the blocks and splits below are sized by it.
L2_BYTES = cells_l2_bytes()
# The largest weight gradient (per thread, in bytes) the backward computes on cells' gemm_tn;
# larger ones go to BLAS (cells/_small_loops.pxd, weight_grad).
TN_C_BYTES = cells_panel_tn_c_bytes()
cells_team_register_fork_handler()


# The kernels' instruction sets by their names in cells' API, best first, and their values in
# include/cells/isa.h.
INSTRUCTION_SETS = {"avx512": CELLS_ISA_AVX512, "avx2": CELLS_ISA_AVX2,
                    "generic": CELLS_ISA_GENERIC}


def cpu_instruction_set():
    """The best instruction set of the kernels this CPU runs (a value of INSTRUCTION_SETS)."""
    return cells_isa_cpu()


def instruction_set():
    """The instruction set the kernels run now (as cpu_instruction_set)."""
    return cells_isa()


def set_instruction_set(int isa):
    """Runs the kernels on `isa`, which cells/_isa.py has checked against the CPU."""
    cells_isa_set(isa)


# ---------------------------------------------------------------------------------------------
# The weights, packed once per call (or, by a call of one step, read in place)
# ---------------------------------------------------------------------------------------------

# A call of one step reads weights it multiplies transposed in place (gemm_nt's dot products)
# while its products have fewer rows than K / NT_K_PER_ROW (K: their inner dimension); with more,
# transposing the weights into panels first is faster (its cost grows with K, gemm_nt's extra
# cost with the rows; the break-even points are in the Performance page's records).
cdef enum:
    NT_K_PER_ROW = 16


cpdef bint reads_weights_in_place(Py_ssize_t sL, Py_ssize_t rows, Py_ssize_t K,
                                  bint transposed) noexcept nogil:
    """Whether a pass of sL steps whose products have `rows` rows (a thread's) and inner
    dimension K multiplies a weight (read transposed: `transposed`) where it is rather than a
    copy packed for the call: in a call of one step (a cell, whose every product runs once),
    always where the weight needs no transposing, else for fewer than K / NT_K_PER_ROW rows."""
    return sL == 1 and (not transposed or rows * NT_K_PER_ROW < K)


cdef inline PackedWeights call_weights(const Loop *L, Py_ssize_t rows, const real *B,
                                       Py_ssize_t step, Py_ssize_t blocks, Py_ssize_t K,
                                       Py_ssize_t n, Py_ssize_t ldb,
                                       bint transB) noexcept nogil:
    """The weights of one of the call's products (pack_weights' arguments), which multiply
    `rows` rows at a time (a step's): packed once, or read in place (reads_weights_in_place).
    A net being prepared (L.prepared set) always packs them."""
    if L.prepared == NULL and reads_weights_in_place(L.sL, rows, K, transB):
        return weights_in_place(B, step, blocks, K, n, ldb, transB)
    return pack_weights(B, step, blocks, K, n, ldb, transB)


cdef inline PackedWeights gate_column_weights(const Loop *L, Py_ssize_t rows, const real *W,
                                              Py_ssize_t ldw, Py_ssize_t K, Py_ssize_t blocks,
                                              Py_ssize_t split, Py_ssize_t j0,
                                              Py_ssize_t n) noexcept nogil:
    """The columns k·nOut + [j0, j0 + n) of op(W) [K, G] (W's leading dimension ldw), for the
    blocks k < blocks: what a thread multiplies `rows` rows of K inputs (x or h) by, the
    blocks [0, split) in one product and [split, blocks) in another. Packed side by side in
    those two groups where that fills fewer panels (packs_side_by_side), else call_weights'."""
    cdef const real *B = W + j0 * ldw if L.weights_transposed else W + j0
    cdef Py_ssize_t step = L.nOut * ldw if L.weights_transposed else L.nOut
    if (L.prepared == NULL and not reads_weights_in_place(L.sL, rows, K, L.weights_transposed)
            and packs_side_by_side(panel_width(W), blocks, split, n)):
        return pack_side_by_side(B, step, blocks, split, K, n, ldw, L.weights_transposed)
    return call_weights(L, rows, B, step, blocks, K, n, ldw, L.weights_transposed)


cdef inline PackedWeights gate_row_weights(const Loop *L, Py_ssize_t rows, const real *W,
                                           Py_ssize_t ldw, Py_ssize_t k0, Py_ssize_t k1,
                                           Py_ssize_t j0, Py_ssize_t n) noexcept nogil:
    """The columns [j0, j0 + n) of op(W)ᵀ over the gate blocks [k0, k1) ([(k1-k0)·nOut, n]; W's
    leading dimension ldw): what a thread multiplies those blocks of `rows` rows of gradients
    by to get dL/d(its units or inputs)."""
    cdef Py_ssize_t K = (k1 - k0) * L.nOut
    if L.weights_transposed:
        return call_weights(L, rows, W + k0 * L.nOut * ldw + j0, 0, 1, K, n, ldw, AS_IS)
    return call_weights(L, rows, W + j0 * ldw + k0 * L.nOut, 0, 1, K, n, ldw, TRANSPOSED)


cdef inline real *gate_columns(const Loop *L, real *dW, Py_ssize_t ldw,
                               Py_ssize_t col) noexcept nogil:
    """Where column `col` of op(dW) starts in dW (leading dimension ldw; a row of dW when it is
    transposed)."""
    return dW + (col * ldw if L.weights_transposed else col)


cdef inline real *offset(const real *a, Py_ssize_t k) noexcept nogil:
    """a + k, or NULL for an array that is not given."""
    return <real *>a + k if a != NULL else NULL


cdef struct Share:
    # What one part of a pass owns (or one task of a prepared net's call): the batch rows
    # [r0, r1), the units [j0, j0 + n) of every gate block and the state columns [s0, s0 + ns)
    # (its units, unless the output is projected).
    Py_ssize_t r0, r1, j0, n, s0, ns


cdef inline Share part_share(const Loop *L, cells_part me) noexcept nogil:
    """Part me's share of L's products (and, unless L.row_steps, of its steps): a block of the
    batch rows and every unit where L.rows_split, else every row and a block of the units (and
    of the state columns)."""
    cdef Share s
    cdef Units units, states
    if L.rows_split:
        s = row_share(L, me)
    else:
        units = part_units(me, L.nOut, L.unit_align)
        states = part_units(me, L.nState, L.unit_align)
        s.r0, s.r1 = L.r0, L.r1
        s.j0, s.n = units.j0, units.j1 - units.j0
        s.s0, s.ns = states.j0, states.j1 - states.j0
    return s


cdef inline Share row_share(const Loop *L, cells_part me) noexcept nogil:
    """Part me's block of L's batch rows, every unit and state column."""
    cdef Share s
    s.r0 = L.r0 + part_start(L.r1 - L.r0, me.part, me.nparts, 1)
    s.r1 = L.r0 + part_start(L.r1 - L.r0, me.part + 1, me.nparts, 1)
    s.j0, s.n, s.s0, s.ns = 0, L.nOut, 0, L.nState
    return s


cdef inline Share step_share(const Loop *L, cells_part me) noexcept nogil:
    """Part me's share of L's steps: whole rows where L.row_steps, else its share of the
    products."""
    return row_share(L, me) if L.row_steps else part_share(L, me)


cdef inline cells_part part_of(Py_ssize_t task, Py_ssize_t tasks) noexcept nogil:
    """Task `task` of `tasks` as the part whose share it is (part_share, part_units)."""
    cdef cells_part part
    part.part, part.nparts = task, tasks
    return part


# ---------------------------------------------------------------------------------------------
# Where a row stands at a loop step, and the states it moves between (both passes)
# ---------------------------------------------------------------------------------------------

cdef struct RowStep:
    # Where a batch row stands at a loop step t (row_step): whether it runs the step (t < its
    # length), the time index tau it processes, and its slot, tau·bS + row: its place in the
    # [sL, bS, ...] arrays (past its end: t·bS + row, the padded time index t). prev: the slot
    # of the state it entered the step with, the time index next to tau in loop order; -1 at
    # its first step, which starts from the initial state.
    bint runs
    Py_ssize_t tau, slot, prev


cdef inline RowStep row_step(const Loop *L, Py_ssize_t t, Py_ssize_t row) noexcept nogil:
    """Where batch row `row` stands at loop step t of L."""
    cdef RowStep r
    cdef Py_ssize_t length = row_len(L.seq_len, row, L.sL)
    r.runs = t < length
    r.tau = step_time(t, length, L.forward)
    r.slot = (r.tau if r.runs else t) * L.bS + row
    r.prev = -1
    if r.runs and t > 0:
        r.prev = (r.tau - 1 if L.forward else r.tau + 1) * L.bS + row
    return r


cdef inline const real *entering(const real *init, const real *states, RowStep r,
                                 Py_ssize_t row, Py_ssize_t ld, Py_ssize_t col) noexcept nogil:
    """Where the state that a running row entered its step with starts, at column col: in
    init [bS, ld] at its first step, else in every step's states [sL, bS, ld] at r.prev; NULL
    for a state that is not given."""
    return offset(init, row * ld + col) if r.prev < 0 else offset(states, r.prev * ld + col)


cdef inline const real *state_entering(const real *init, real *states, Py_ssize_t t,
                                       Py_ssize_t size) noexcept nogil:
    """The state (`size` elements, [bS, ...]) that the forward's loop step t starts from: init
    at the first step, else the half of the double buffer states [2, size] that step t-1 wrote;
    NULL for a state that is not given."""
    return init if t == 0 else offset(states, (t % 2) * size)


cdef inline real *state_leaving(real *states, Py_ssize_t t, Py_ssize_t size) noexcept nogil:
    """The half of the double buffer states [2, size] that the forward's loop step t writes."""
    return offset(states, ((t + 1) % 2) * size)


# ---------------------------------------------------------------------------------------------
# Forward
# ---------------------------------------------------------------------------------------------

cdef inline void project_chunk(const Loop *L, PackedWeights wx, const real *x, const real *b,
                               Py_ssize_t tau0, Py_ssize_t steps, Py_ssize_t r0, Py_ssize_t r1,
                               Py_ssize_t j0, real *chunk) noexcept nogil:
    """gx = x·op(Wx) + b at the time indices [tau0, tau0 + steps), rows [r0, r1), the columns
    j0 + [0, wx.n) of each gate block (a thread's units); chunk [steps, bS, G] (gx from time
    index tau0). Whole steps are one product over all of them; the bias is added as the
    products are stored. On int8 or bfloat16 weights, x's rows come converted (L.x_rows)."""
    cdef Py_ssize_t bS = L.bS, G = L.G, rows = r1 - r0, k, first
    if rows == bS:
        rows, steps = steps * bS, 1
    for k in range(steps):
        first = (tau0 + k) * bS + r0
        if real is float and L.x_rows.data != NULL:
            project_rows(rows, rows_from(L.x_rows, first), wx, offset(b, j0),
                         chunk + (k * bS + r0) * G + j0, G, L.nOut)
        else:
            project(rows, x + first * L.nIn, L.nIn, wx, offset(b, j0),
                    chunk + (k * bS + r0) * G + j0, G, L.nOut)


cdef enum:
    # The stages of a forward step: the state times the gate blocks [0, h_blocks) and the
    # family's step; a two-phase family's other blocks times its aux (the reset-before GRU);
    # the output's projection (with Wproj). Each ends where the next reads what every share
    # of it wrote.
    PHASE_0, PHASE_1, PROJECTION
    # and the phases of a forward pass's claimed work (claimed_phase) that are not a step's:
    # the call's packed weights of each block of the units, before the first step; the final
    # states, after the last step
    PACK_WEIGHTS, FINAL_STATE


cdef enum:
    # What a claimed phase runs of its stage: all of it, or (L.row_steps) its products, on
    # blocks of the units, then its steps, on as many blocks of the rows.
    WHOLE_STAGE, STAGE_PRODUCTS, STAGE_STEPS


cdef struct Task:
    # A share of the forward's work and the weights it multiplies (claimed_task), with the room
    # of the part that runs it for the rows it converts (int8 or bfloat16 weights; else NULL).
    # s: the share of the products; steps: that of the steps (s, but whole rows where
    # L.row_steps).
    Share s, steps
    const PackedWeights *wx
    const PackedWeights *wh
    const PackedWeights *wproj
    PackedWeights views[3]  # a prepared net's task's: views of whole panels (wx, wh, wproj)
    RowScratch *scratch


cdef inline void claimed_task(const Loop *L, cells_part me, Py_ssize_t task, bint rows,
                              const PackedWeights *own, Task *w, real zero) noexcept nogil:
    """Task `task` of L.tasks of a forward pass, run by part `me`: a block of the rows where
    L.rows_split or `rows` (the steps of L.row_steps), else a block of the units (and of the
    state columns): part_share's, or row_share's with `rows`. Its weights: views of whole
    panels of a prepared net's; else, where the rows split, `own` (the running part's packed
    copy of all of them), and where the units split, the call's packed columns of the task's
    units (L.shares). Filled in place (w: the part's own), as a copy of the struct would cost
    more than the rest of a short step's bookkeeping."""
    cdef cells_part part = part_of(task, L.tasks)
    w.s = row_share(L, part) if rows else part_share(L, part)
    w.steps = w.s
    w.scratch = L.row_scratch + me.part if L.row_scratch != NULL else NULL
    if L.prepared != NULL:
        w.views[0] = panel_columns(&zero, L.prepared.wx, w.s.j0, w.s.n)
        w.views[1] = panel_columns(&zero, L.prepared.wh, w.s.j0, w.s.n)
        w.views[2] = panel_columns(&zero, L.prepared.wproj, w.s.s0, w.s.ns)
        own = w.views
    elif not L.rows_split:
        own = L.shares + 3 * task
    w.wx, w.wh, w.wproj = &own[0], &own[1], &own[2]


cdef void pack_share(const Loop *L, const Share *s, PackedWeights *w,
                     real zero) noexcept nogil:
    """The weights that share s's products multiply, packed for the call (call_weights): its
    units' columns of op(Wx) and op(Wh) (w[0], w[1]) and its state columns of Wproj (w[2]);
    those the call has not stay zeroed."""
    cdef cells_family_info fam = cells_families[L.family]
    cdef Py_ssize_t rows = s.r1 - s.r0
    if fam.recurrent_product:
        w[1] = gate_column_weights(L, rows, <const real *>L.Wh, L.ldwh, L.nState, fam.gates,
                                   fam.h_blocks, s.j0, s.n)
    if L.Wproj != NULL:
        w[2] = call_weights(L, rows, <const real *>L.Wproj + s.s0, 0, 1, L.nOut, s.ns,
                            L.nState, AS_IS)
    w[0] = gate_column_weights(L, rows, <const real *>L.Wx, L.ldwx, L.nIn, fam.gates,
                               fam.gates, s.j0, s.n)


cdef struct OwnCopy:
    # Where the rows split: the part's packed copy of all the weights its pass multiplies
    # (pack_share's in the forward, pack_backward_share's in the backward), packed before the
    # first task it claims (claim_rows); zeroed until then.
    PackedWeights w[3]
    bint packed


cdef long claim_rows(const Loop *L, cells_part me, OwnCopy *own, bint backward,
                     real zero) noexcept nogil:
    """The next block of rows that part me claims where the rows split, or -1 when none is
    left; `own` packed before its first (not for a prepared net's call, whose tasks view its
    panels)."""
    cdef long task = cells_claim(L.claims, 0, L.tasks, me)
    cdef Share all_units
    if task >= 0 and not own.packed and L.prepared == NULL:
        all_units = row_share(L, me)
        if backward:
            pack_backward_share(L, &all_units, own.w, zero)
        else:
            pack_share(L, &all_units, own.w, zero)
        own.packed = True
    return task


cdef void free_own(OwnCopy *own) noexcept nogil:
    cdef int k
    for k in range(3):
        free_packed(&own.w[k])


cdef inline int last_stage(const Loop *L) noexcept nogil:
    """The stage a forward step ends with."""
    if L.Wproj != NULL or (L.prepared != NULL and L.prepared.wproj.P != NULL):
        return PROJECTION
    return PHASE_1 if cells_families[L.family].phases == 2 else PHASE_0


cdef inline bint has_stage(const Loop *L, int stage) noexcept nogil:
    return (stage == PHASE_0 or (stage == PHASE_1 and cells_families[L.family].phases == 2)
            or (stage == PROJECTION and last_stage(L) == PROJECTION))


cdef void forward_stage(const Loop *L, const Task *w, Py_ssize_t t, int stage,
                        real zero) noexcept nogil:
    """Stage `stage` of loop step t for a share whose products and steps are the same (a
    prepared net's task): its products, then its steps."""
    stage_products(L, w, t, stage, zero)
    stage_steps(L, w, t, stage, zero)


cdef struct Chunk:
    # The input projection's chunk of loop step t: its loop steps [t0, t1), tau0 its first
    # time index; first: the time index at gx's start (0 where gx holds every step).
    Py_ssize_t t0, t1, tau0, first


cdef inline Chunk projection_chunk(const Loop *L, Py_ssize_t t) noexcept nogil:
    """The input projection's chunk that loop step t belongs to."""
    cdef Chunk c
    c.t0 = t - t % L.chunk_steps
    c.t1 = min(L.sL, c.t0 + L.chunk_steps)
    c.tau0 = c.t0 if L.forward else L.sL - c.t1
    c.first = 0 if L.gx_steps == L.sL else c.tau0
    return c


cdef void stage_products(const Loop *L, const Task *w, Py_ssize_t t, int stage,
                         real zero) noexcept nogil:
    """The products of stage `stage` of loop step t for w.s's rows [r0, r1), units
    [j0, j0 + n) and state columns [s0, s0 + ns): PHASE_0 starts with the input projection
    where a chunk of steps starts; then the state (PHASE_1: aux) times the phase's gate blocks
    of op(Wh); PROJECTION: the output m times Wproj, the next state."""
    cdef cells_family_info fam = cells_families[L.family]
    cdef Py_ssize_t bS = L.bS, nOut = L.nOut, G = L.G, nState = L.nState
    cdef Py_ssize_t r0 = w.s.r0, r1 = w.s.r1, j0 = w.s.j0
    cdef real *gh = <real *>L.gh
    cdef Py_ssize_t A = fam.aux * nOut
    cdef const real *hcur = state_entering(<const real *>L.hI, <real *>L.hs, t, bS * nState)
    cdef Chunk chunk = projection_chunk(L, t)
    # M [rows, lda]: what the phase multiplies by its gate blocks [k0, k1) of op(Wh).
    cdef Py_ssize_t k0, k1, lda
    cdef const real *M
    if stage == PROJECTION:
        multiply(r1 - r0, <real *>L.ms + r0 * nOut, nOut, w.wproj[0], 0, 1, 0, NULL,
                 state_leaving(<real *>L.hs, t, bS * nState) + r0 * nState + w.s.s0, nState,
                 w.scratch)
        return
    if stage == PHASE_0:
        if t == chunk.t0:  # gx = x·op(Wx) + b for the chunk's steps, the share's columns
            project_chunk(L, w.wx[0], <const real *>L.x, <const real *>L.b, chunk.tau0,
                          chunk.t1 - chunk.t0, r0, r1, j0,
                          <real *>L.gx + (chunk.tau0 - chunk.first) * bS * G)
        k0, k1, M, lda = 0, fam.h_blocks, hcur + r0 * nState, nState
    else:
        k0, k1, M, lda = fam.h_blocks, fam.gates, <real *>L.aux + r0 * A, A
    if fam.recurrent_product:
        multiply(r1 - r0, M, lda, w.wh[0], k0, k1, nOut, NULL, gh + r0 * G + j0, G, w.scratch)


cdef void stage_steps(const Loop *L, const Task *w, Py_ssize_t t, int stage,
                      real zero) noexcept nogil:
    """The steps of stage `stage` of loop step t for w.steps's rows [r0, r1) and units
    [j0, j0 + n): the family's step (phase PHASE_0 or PHASE_1) for every row that runs; the
    step's last stage ends with its rows' outputs and next states (end_step)."""
    cdef cells_family_info fam = cells_families[L.family]
    cdef Py_ssize_t bS = L.bS, nOut = L.nOut, G = L.G, nState = L.nState
    cdef Py_ssize_t j0 = w.steps.j0, row, at
    cdef const real *P = <const real *>L.P
    cdef real *gx = <real *>L.gx
    cdef real *gh = <real *>L.gh
    cdef real *gates = <real *>L.gates
    cdef real *aux = <real *>L.aux
    cdef Py_ssize_t A = fam.aux * nOut
    cdef const real *hcur = state_entering(<const real *>L.hI, <real *>L.hs, t, bS * nState)
    cdef const real *ccur = state_entering(<const real *>L.cI, <real *>L.cs, t, bS * nOut)
    cdef real *cnxt = state_leaving(<real *>L.cs, t, bS * nOut)
    cdef bint projected = last_stage(L) == PROJECTION
    cdef real *out = <real *>L.ms if projected else state_leaving(<real *>L.hs, t, bS * nState)
    # Elements between time indices of gates and aux: 0 where one step's scratch is reused.
    cdef Py_ssize_t gates_step = bS * G if L.keep else 0
    cdef Py_ssize_t aux_step = bS * A if L.keep and fam.aux_kept else 0
    cdef Py_ssize_t first = projection_chunk(L, t).first
    cdef RowStep r
    if stage != PROJECTION:
        for row in range(w.steps.r0, w.steps.r1):
            r = row_step(L, t, row)
            if r.runs:
                at = row * nOut + j0
                forward_step(L.family, stage == PHASE_1, &L.options, w.steps.n, nOut,
                             gx + ((r.tau - first) * bS + row) * G + j0, gh + row * G + j0,
                             NULL if projected else hcur + at, offset(ccur, at), offset(P, j0),
                             gates + r.tau * gates_step + row * G + j0,
                             offset(aux, r.tau * aux_step + row * A + j0), out + at,
                             offset(cnxt, at))
    if stage == last_stage(L):
        end_step(L, w, t, zero)


cdef void end_step(const Loop *L, const Task *w, Py_ssize_t t, real zero) noexcept nogil:
    """The end of loop step t for w's share of the steps: each running row's output (and,
    kept, its c and m) at its time index; past a row's end, its state frozen and zeros at time
    index t."""
    cdef cells_family_info fam = cells_families[L.family]
    cdef Py_ssize_t bS = L.bS, nOut = L.nOut, nState = L.nState, G = L.G
    cdef Py_ssize_t j0 = w.steps.j0, n = w.steps.n, s0 = w.steps.s0, ns = w.steps.ns
    cdef Py_ssize_t row, at, hat, k
    cdef const real *hcur = state_entering(<const real *>L.hI, <real *>L.hs, t, bS * nState)
    cdef const real *ccur = state_entering(<const real *>L.cI, <real *>L.cs, t, bS * nOut)
    cdef real *hnxt = state_leaving(<real *>L.hs, t, bS * nState)
    cdef real *cnxt = state_leaving(<real *>L.cs, t, bS * nOut)
    cdef real *h = <real *>L.h
    cdef real *c = <real *>L.c
    cdef real *m = <real *>L.m
    cdef bint projected = last_stage(L) == PROJECTION
    cdef RowStep r
    for row in range(w.steps.r0, w.steps.r1):
        r = row_step(L, t, row)
        # at: the share's first unit of the row in the [bS, nOut] arrays; hat: its first
        # state column in the [bS, nState] arrays.
        at, hat = row * nOut + j0, row * nState + s0
        if r.runs:
            if L.zone != NULL:  # no projection: nState = nOut, and s0, ns are j0, n
                zoneout_units(ns, zone_at(L, r.slot, s0, zero), L.zone_per_step, hcur + hat,
                              hnxt + hat)
            copy_units(ns, hnxt + hat, h + r.slot * nState + s0)
            if c != NULL:
                copy_units(n, cnxt + at, c + r.slot * nOut + j0)
            if L.keep and projected:
                copy_units(n, <real *>L.ms + at, m + r.slot * nOut + j0)
            continue
        # Past the row's end: its state is frozen, and time index t is padding.
        copy_units(ns, hcur + hat, hnxt + hat)
        zero_units(ns, h + r.slot * nState + s0)
        if fam.cell_state:
            copy_units(n, ccur + at, cnxt + at)
        if c != NULL:
            zero_units(n, c + r.slot * nOut + j0)
        if L.keep:
            for k in range(fam.gates):
                zero_units(n, <real *>L.gates + r.slot * G + k * nOut + j0)
            for k in range(fam.aux if fam.aux_kept else 0):
                zero_units(n, <real *>L.aux + r.slot * fam.aux * nOut + k * nOut + j0)
            if projected:
                zero_units(n, m + r.slot * nOut + j0)


cdef inline const real *zone_at(const Loop *L, Py_ssize_t slot, Py_ssize_t j0,
                                real zero) noexcept nogil:
    """Where zoneout's share of unit j0 at `slot` (tau·bS + row) is: in every step's
    [sL, bS, nOut] array, or the one value for all."""
    return <const real *>L.zone + (slot * L.nOut + j0 if L.zone_per_step else 0)


cdef void final_state(const Loop *L, const Share *s, real zero) noexcept nogil:
    """hL and cL (where given) of s's rows, units and state columns: the state after the last
    step."""
    cdef Py_ssize_t sL = L.sL, bS = L.bS, nOut = L.nOut, nState = L.nState, row
    cdef const real *hcur = state_entering(<const real *>L.hI, <real *>L.hs, sL, bS * nState)
    cdef const real *ccur = state_entering(<const real *>L.cI, <real *>L.cs, sL, bS * nOut)
    cdef real *hL = <real *>L.hL
    cdef real *cL = <real *>L.cL
    for row in range(s.r0, s.r1):
        if hL != NULL:
            copy_units(s.ns, hcur + row * nState + s.s0, hL + row * nState + s.s0)
        if cL != NULL:
            copy_units(s.n, ccur + row * nOut + s.j0, cL + row * nOut + s.j0)


cdef void forward_loop(const Loop *L, cells_part me, real zero) noexcept nogil:
    """Part `me` of the forward pass of L (`zero`, 0 in the call's dtype, picks the
    instantiation): the tasks it claims (L.claims; claims.h), its home's first. Where the rows
    split, a task is a block of rows over every step, on the packed copy of all the weights of
    the part that runs it (a prepared net's: its panels), and the parts never meet. Where the
    units split, the call's packed weights of each block of the units are a phase of their own
    (a prepared net's are packed already), then every stage of every step is a phase of a task
    per block of the units (L.row_steps: a phase of its products, then one of its steps, on
    blocks of the rows), and the parts meet at the end of each only when they wait for the
    last of its tasks."""
    cdef Py_ssize_t t, task
    cdef long long phase = 0
    cdef int stage
    cdef Task w
    cdef OwnCopy own
    memset(&own, 0, sizeof(own))
    if L.rows_split:
        task = claim_rows(L, me, &own, False, zero)
        while task >= 0:
            claimed_task(L, me, task, False, own.w, &w, zero)
            for t in range(L.sL):
                for stage in range(PHASE_0, last_stage(L) + 1):
                    if has_stage(L, stage):
                        new_phase(L, me, phase)
                        phase += 1
                        forward_stage(L, &w, t, stage, zero)
            final_state(L, &w.s, zero)
            cells_claim_finished(L.claims, me)
            task = claim_rows(L, me, &own, False, zero)
        free_own(&own)
        return
    if L.prepared == NULL:
        claimed_phase(L, me, phase, 0, PACK_WEIGHTS, WHOLE_STAGE, zero)
        phase += 1
    for t in range(L.sL):
        for stage in range(PHASE_0, last_stage(L) + 1):
            if not has_stage(L, stage):
                continue
            if L.row_steps:
                claimed_phase(L, me, phase, t, stage, STAGE_PRODUCTS, zero)
                claimed_phase(L, me, phase + 1, t, stage, STAGE_STEPS, zero)
                phase += 2
            else:
                claimed_phase(L, me, phase, t, stage, WHOLE_STAGE, zero)
                phase += 1
    claimed_phase(L, me, phase, L.sL, FINAL_STATE, WHOLE_STAGE, zero)


cdef inline void new_phase(const Loop *L, cells_part me, long long phase) noexcept nogil:
    """Tell part me's converted rows (on int8 or bfloat16 weights) that phase `phase` begins:
    the rows it converted before are of an earlier phase."""
    if L.row_scratch != NULL:
        L.row_scratch[me.part].phase = phase


cdef void claimed_phase(const Loop *L, cells_part me, long long phase, Py_ssize_t t, int stage,
                        int runs, real zero) noexcept nogil:
    """Phase `phase` of a forward pass where the units split: the tasks of stage `stage` of
    step t (PACK_WEIGHTS: the call's packed weights; FINAL_STATE: the final states, after the
    last step), or of its products or its steps (`runs`), that this part claims, then the wait
    for the others' (claims.h)."""
    cdef Task w
    cdef Share s
    cdef Py_ssize_t tasks = L.tasks   # in every phase (claims.h numbers them across the call)
    cdef Py_ssize_t task = cells_claim(L.claims, phase, tasks, me)
    new_phase(L, me, phase)
    while task >= 0:
        if stage == PACK_WEIGHTS:
            s = part_share(L, part_of(task, tasks))
            pack_share(L, &s, L.shares + 3 * task, zero)
        else:
            claimed_task(L, me, task, runs == STAGE_STEPS, NULL, &w, zero)
            if stage == FINAL_STATE:
                final_state(L, &w.s, zero)
            elif runs == STAGE_PRODUCTS:
                stage_products(L, &w, t, stage, zero)
            elif runs == STAGE_STEPS:
                stage_steps(L, &w, t, stage, zero)
            else:
                forward_stage(L, &w, t, stage, zero)
        cells_claim_finished(L.claims, me)
        task = cells_claim(L.claims, phase, tasks, me)


# ---------------------------------------------------------------------------------------------
# Backward
# ---------------------------------------------------------------------------------------------

cdef struct BackwardPart:
    # Task k of a backward pass (backward_task): its share, the weights it multiplies, packed
    # for the call (op(Wh)ᵀ's rows over the blocks that multiply hPrev, for its state columns;
    # over a two-phase family's blocks that multiply aux, for its units; Wprojᵀ's, for its
    # units), and where its steps add up dL/db and dL/dP (sums, dPsum: arrays of the call's
    # dtype, NULL where not wanted). s: its share of the products; steps: of the steps (s, but
    # whole rows where L.row_steps).
    Share s, steps
    const PackedWeights *whT
    const PackedWeights *wauxT
    const PackedWeights *wprojT
    void *sums
    void *dPsum


cdef void backward_task(const Loop *L, Py_ssize_t task, const PackedWeights *own,
                        BackwardPart *p, real zero) noexcept nogil:
    """Task `task` of L.tasks of the backward pass of L, filled in p (as claimed_task fills a
    forward's): its shares, its weights (`own`, the running part's packed copy of all of them,
    where the rows split; else the call's packed rows of the task's, L.shares) and its sums of
    dL/db and dL/dP."""
    cdef cells_family_info fam = cells_families[L.family]
    p.s = part_share(L, part_of(task, L.tasks))
    p.steps = step_share(L, part_of(task, L.tasks))
    if not L.rows_split:
        own = L.shares + 3 * task
    p.whT, p.wauxT, p.wprojT = &own[0], &own[1], &own[2]
    # dL/db and dL/dP are sums over the rows, taken step by step while dz is in cache. Where
    # the steps split the rows, each task sums its own rows in its row of part_sums, and the
    # rows are added up after the loop (add_part_sums); else each sums its units' columns in
    # place.
    cdef bint by_rows = sums_by_rows(L)
    cdef real *sums = (offset(<real *>L.part_sums, task * sum_blocks(fam) * L.nOut)
                       if by_rows else <real *>L.dLdb)
    p.sums = sums
    p.dPsum = (offset(sums, fam.gates * L.nOut) if by_rows and L.dLdP != NULL
               else <real *>L.dLdP)


cdef void pack_backward_share(const Loop *L, const Share *s, PackedWeights *w,
                              real zero) noexcept nogil:
    """The weights that share s's products multiply in the backward, packed for the call:
    op(Wh)ᵀ's rows over the blocks that multiply hPrev, for its state columns (w[0]); over a
    two-phase family's blocks that multiply aux, for its units (w[1]); Wprojᵀ's, for its units
    (w[2]); those the call has not stay zeroed."""
    cdef cells_family_info fam = cells_families[L.family]
    cdef const real *Wh = <const real *>L.Wh
    cdef Py_ssize_t rows = s.r1 - s.r0
    if fam.recurrent_product:
        w[0] = gate_row_weights(L, rows, Wh, L.ldwh, 0, fam.h_blocks, s.s0, s.ns)
    if fam.phases == 2:
        w[1] = gate_row_weights(L, rows, Wh, L.ldwh, fam.h_blocks, fam.gates, s.j0, s.n)
    if L.Wproj != NULL:  # Wprojᵀ [nState, nOut], the share's unit columns
        w[2] = call_weights(L, rows, <const real *>L.Wproj + s.j0 * L.nState, 0, 1, L.nState,
                            s.n, L.nState, TRANSPOSED)


cdef void start_task(const Loop *L, const BackwardPart *p, real zero) noexcept nogil:
    """Before a task's first step: its sums zeroed, and the gradients carried into the last
    step (start_carried)."""
    cdef cells_family_info fam = cells_families[L.family]
    cdef Py_ssize_t k
    # The units whose sums the task takes: its own; by rows every unit of its own sums (a
    # row group's task adds its units alone, and add_part_sums adds every task's sums).
    cdef Py_ssize_t j0 = 0 if sums_by_rows(L) else p.steps.j0
    cdef Py_ssize_t n = L.nOut if sums_by_rows(L) else p.steps.n
    if p.sums != NULL:
        for k in range(fam.gates):
            zero_units(n, <real *>p.sums + k * L.nOut + j0)
    if p.dPsum != NULL:
        for k in range(fam.param_blocks):
            zero_units(n, <real *>p.dPsum + k * L.nOut + j0)
    start_carried(L, &p.steps, zero)


cdef inline bint sums_by_rows(const Loop *L) noexcept nogil:
    """Whether each task sums dL/db and dL/dP over its own rows, in its own row of part_sums
    (another task's steps may add into the same units: its steps' rows are whole rows, or
    the rows run in groups)."""
    return L.rows_split or L.row_steps or L.row_groups > 1


cdef inline Py_ssize_t sum_blocks(cells_family_info fam) noexcept nogil:
    """The blocks of nOut of the per-unit sums over the rows: dL/db's, then dL/dP's."""
    return fam.gates + fam.param_blocks


cdef void start_carried(const Loop *L, const Share *s, real zero) noexcept nogil:
    """The gradients carried into the last step, s's rows: dL/dh (and dL/dc) from dLdhL (and
    dLdcL), 0 where not given."""
    cdef Py_ssize_t nOut = L.nOut, nState = L.nState, row, at, hat
    cdef real *dh = <real *>L.dLdhI
    cdef real *dc = <real *>L.dLdcI
    for row in range(s.r0, s.r1):
        hat = row * nState + s.s0
        if L.dLdhL != NULL:
            copy_units(s.ns, <const real *>L.dLdhL + hat, dh + hat)
        else:
            zero_units(s.ns, dh + hat)
        if cells_families[L.family].cell_state:
            at = row * nOut + s.j0
            if L.dLdcL != NULL:
                copy_units(s.n, <const real *>L.dLdcL + at, dc + at)
            else:
                zero_units(s.n, dc + at)


cdef void projected_grad(const Loop *L, const BackwardPart *p, Py_ssize_t t,
                         real zero) noexcept nogil:
    """With Wproj, where loop step t starts: the step's whole dL/dh (carried + arriving, kept
    in dh_steps for dL/dWproj), p's rows and state columns; the carried dL/dh restarts at 0
    for the rows that run the step. (The step's MAIN segment then starts from dL/dm =
    dL/dh·Wprojᵀ.)"""
    cdef Py_ssize_t nState = L.nState, s0 = p.s.s0, ns = p.s.ns, row, hat
    cdef real *dh = <real *>L.dLdhI
    cdef real *dh_step = <real *>L.dh_step
    cdef real *dh_steps = <real *>L.dh_steps
    cdef RowStep r
    for row in range(p.s.r0, p.s.r1):
        r = row_step(L, t, row)
        hat = row * nState + s0
        if not r.runs:
            zero_units(ns, dh_step + hat)
            zero_units(ns, dh_steps + r.slot * nState + s0)
            continue
        copy_units(ns, dh + hat, dh_step + hat)
        if L.dLdh != NULL:
            add_units(ns, <const real *>L.dLdh + r.slot * nState + s0, dh_step + hat)
        copy_units(ns, dh_step + hat, dh_steps + r.slot * nState + s0)
        zero_units(ns, dh + hat)


cdef void backward_phase(const Loop *L, const BackwardPart *p, Py_ssize_t t, int phase,
                         real zero) noexcept nogil:
    """Phase `phase` (0, or a two-phase family's 1, which reads dL/daux) of loop step t: the
    family's backward step for every row of p's share that runs it, writing its d (and
    overwriting its gates with dz). In the first phase, a padded row's d, gates and aux
    become 0: nothing flows through a padded step, and the carried gradient passes on
    unchanged. Projected, the step reads no hPrev and starts from dL/dm alone (in ms)."""
    cdef cells_family_info fam = cells_families[L.family]
    cdef Py_ssize_t bS = L.bS, nOut = L.nOut, G = L.G, nState = L.nState
    cdef Py_ssize_t j0 = p.steps.j0, n = p.steps.n, row, at, k
    cdef const real *h = <const real *>L.h
    cdef const real *c = <const real *>L.c
    cdef real *gates = <real *>L.gates
    cdef real *aux = <real *>L.aux
    cdef real *d = <real *>L.d + (t % 2) * bS * G
    cdef real *dm = <real *>L.ms
    cdef real *dh = <real *>L.dLdhI
    cdef real *dzone = <real *>L.dzone
    cdef const real *dLdh
    cdef bint projected = L.Wproj != NULL
    cdef Py_ssize_t A = fam.aux * nOut
    cdef RowStep r
    for row in range(p.steps.r0, p.steps.r1):
        r = row_step(L, t, row)
        at = row * nOut + j0
        if not r.runs:
            if phase == 0:
                for k in range(fam.gates):
                    zero_units(n, d + row * G + k * nOut + j0)
                    zero_units(n, gates + r.slot * G + k * nOut + j0)
                for k in range(fam.aux):
                    zero_units(n, aux + r.slot * A + k * nOut + j0)
            continue
        dLdh = NULL if projected else offset(<const real *>L.dLdh, r.slot * nOut + j0)
        if phase == 0 and L.dLdc != NULL:
            add_units(n, <const real *>L.dLdc + r.slot * nOut + j0, <real *>L.dLdcI + at)
        if phase == 0 and L.zone != NULL:  # the step's share of dL/dh, and hPrev's
            zoneout_grad_units(n, zone_at(L, r.slot, j0, zero), L.zone_per_step, dLdh,
                               dh + at, dzone + at)
            dLdh = NULL
        backward_step(L.family, phase == 1, &L.options, n, nOut, dLdh,
                      offset(<const real *>L.dLdgates, r.slot * G + j0),
                      gates + r.slot * G + j0, offset(aux, r.slot * A + j0),
                      offset(<const real *>L.daux, at),
                      NULL if projected else entering(<const real *>L.hI, h, r, row, nState, j0),
                      entering(<const real *>L.cI, c, r, row, nOut, j0),
                      offset(c, r.slot * nOut + j0), offset(<const real *>L.P, j0),
                      d + row * G + j0, (dm if projected else dh) + at,
                      offset(<real *>L.dLdcI, at), offset(<real *>p.dPsum, j0))
        if phase == fam.phases - 1 and L.zone != NULL:
            add_units(n, dzone + at, dh + at)


cdef void add_step_sums(const Loop *L, const BackwardPart *p, Py_ssize_t t,
                        real zero) noexcept nogil:
    """dL/db += loop step t's dz, the rows of p's steps that run it and their units."""
    cdef Py_ssize_t nOut = L.nOut, G = L.G, j0 = p.steps.j0, row, k
    cdef real *sums = <real *>p.sums
    cdef const real *dz
    cdef RowStep r
    for row in range(p.steps.r0, p.steps.r1):
        r = row_step(L, t, row)
        if r.runs:
            dz = <const real *>L.gates + r.slot * G
            for k in range(cells_families[L.family].gates):
                add_units(p.steps.n, dz + k * nOut + j0, sums + k * nOut + j0)


cdef enum:
    # The pieces of a backward pass that a task runs (run_segment), in order; the phases of
    # the claimed work end between some of them (ends_phase).
    START,      # its sums zeroed and the carried gradients started (start_task)
    PROJECTED,  # with Wproj, where step t starts: the step's whole dL/dh (projected_grad)
    MAIN,       # step t: with Wproj dL/dm = dL/dh·Wprojᵀ; the backward step (its first phase)
    AUX,        # a two-phase family's dL/daux = d·op(Wh)ᵀ over the blocks that multiply aux,
                # and the backward step's second phase
    TAIL,       # step t's sums of dL/db, and dL/dhPrev += d·op(Wh)ᵀ over the blocks that
                # multiply hPrev
    GRADIENTS   # after the recurrence: the gradients over all steps (gradients_task)


cdef inline bint ends_phase(const Loop *L, int segment, Py_ssize_t t) noexcept nogil:
    """Whether a phase of a backward pass whose units split ends before `segment` of step t:
    where it reads what other tasks wrote in the segments before it. MAIN reads every state
    column of dL/dh (PROJECTED's); AUX and TAIL every unit's d (MAIN's, or AUX's); where the
    steps split the rows, a step reads every unit of dL/dh (the TAIL before it); GRADIENTS
    reads every step's dz and every task's sums. Elsewhere a task reads only what it wrote
    itself, and runs on in the same phase."""
    if segment == AUX or segment == TAIL or segment == GRADIENTS:
        return True
    if segment == MAIN and L.Wproj != NULL:
        return True
    return L.row_steps and t < L.sL - 1 and segment == (PROJECTED if L.Wproj != NULL else MAIN)


cdef void run_segment(const Loop *L, const BackwardPart *p, int segment, Py_ssize_t t,
                      real zero) noexcept nogil:
    """Piece `segment` of step t (the enum above) for task p's share."""
    cdef cells_family_info fam = cells_families[L.family]
    cdef Py_ssize_t bS = L.bS, nOut = L.nOut, G = L.G, nState = L.nState
    cdef Py_ssize_t r0 = p.s.r0, rows = p.s.r1 - p.s.r0
    cdef real *d = <real *>L.d + (t % 2) * bS * G
    if segment == START:
        start_task(L, p, zero)
    elif segment == PROJECTED:
        projected_grad(L, p, t, zero)
    elif segment == MAIN:
        if L.Wproj != NULL:
            gemm_packed(rows, <const real *>L.dh_step + r0 * nState, nState, p.wprojT[0], 0,
                        OVERWRITE, <real *>L.ms + r0 * nOut + p.s.j0, nOut)
        backward_phase(L, p, t, 0, zero)
    elif segment == AUX:
        gemm_packed(rows, d + r0 * G + fam.h_blocks * nOut, G, p.wauxT[0], 0, OVERWRITE,
                    <real *>L.daux + r0 * nOut + p.s.j0, nOut)
        backward_phase(L, p, t, 1, zero)
    elif segment == TAIL:
        if p.sums != NULL:
            add_step_sums(L, p, t, zero)
        if fam.recurrent_product:
            gemm_packed(rows, d + r0 * G, G, p.whT[0], 0, ACCUMULATE,
                        <real *>L.dLdhI + r0 * nState + p.s.s0, nState)


cdef struct Segments:
    # The segments of one phase of a backward pass whose units split, as the loop reaches
    # them (at most two: a TAIL, then a PROJECTED or a MAIN; or a START and one of those).
    int segment[2]
    Py_ssize_t t[2]
    int n
    long long phase


cdef void add_segment(const Loop *L, cells_part me, Segments *phase, int segment,
                      Py_ssize_t t, real zero) noexcept nogil:
    """Segment `segment` of step t, in the phase of the segments before it unless it starts
    a new one (ends_phase: the tasks of the phase so far run first)."""
    if phase.n > 0 and ends_phase(L, segment, t):
        run_phase(L, me, phase, zero)
    phase.segment[phase.n] = segment
    phase.t[phase.n] = t
    phase.n += 1


cdef void run_phase(const Loop *L, cells_part me, Segments *phase, real zero) noexcept nogil:
    """The tasks of the phase's segments that this part claims, each running them all for its
    share, then the wait for the others' (claims.h); the next phase starts empty. GRADIENTS
    (a phase of its own) runs gradients_task."""
    cdef Py_ssize_t tasks = L.tasks
    cdef Py_ssize_t task = cells_claim(L.claims, phase.phase, tasks, me)
    cdef BackwardPart p
    cdef Share s
    cdef int i
    while task >= 0:
        if phase.segment[0] == GRADIENTS:
            gradients_task(L, task, zero)
        else:
            if phase.segment[0] == START:
                s = part_share(L, part_of(task, tasks))
                pack_backward_share(L, &s, L.shares + 3 * task, zero)
            backward_task(L, task, NULL, &p, zero)
            for i in range(phase.n):
                run_segment(L, &p, phase.segment[i], phase.t[i], zero)
        cells_claim_finished(L.claims, me)
        task = cells_claim(L.claims, phase.phase, tasks, me)
    phase.phase += 1
    phase.n = 0


cdef void run_steps(const Loop *L, const BackwardPart *p, real zero) noexcept nogil:
    """Every segment of the recurrence, last step first, for one task whose every step is its
    own (its rows, where the rows split)."""
    cdef Py_ssize_t t
    run_segment(L, p, START, 0, zero)
    for t in range(L.sL - 1, -1, -1):
        if L.Wproj != NULL:
            run_segment(L, p, PROJECTED, t, zero)
        run_segment(L, p, MAIN, t, zero)
        if cells_families[L.family].phases == 2:
            run_segment(L, p, AUX, t, zero)
        run_segment(L, p, TAIL, t, zero)


cdef void add_part_sums(const Loop *L, cells_part me, real zero) noexcept nogil:
    """Where the steps split the rows: dL/db and dL/dP = Σ over the tasks' sums (part_sums),
    part me's block of the units."""
    cdef cells_family_info fam = cells_families[L.family]
    cdef Py_ssize_t nOut = L.nOut, blocks = sum_blocks(fam), k
    cdef Units units = part_units(me, nOut, L.unit_align)
    cdef real *total
    for k in range(blocks):
        total = (offset(<real *>L.dLdb, k * nOut) if k < fam.gates
                 else offset(<real *>L.dLdP, (k - fam.gates) * nOut))
        if total != NULL:
            sum_rows(L.tasks, units.j1 - units.j0,
                     <const real *>L.part_sums + k * nOut + units.j0, blocks * nOut,
                     total + units.j0)


cdef void input_grad(const Loop *L, cells_part me, real zero) noexcept nogil:
    """dL/dx = dz·op(Wx)ᵀ, this part's input columns [i0, i1), on op(Wx)ᵀ packed: dz is read
    as it is, where BLAS would copy it whole per thread."""
    cdef Py_ssize_t SB = L.sL * L.bS, nIn = L.nIn
    cdef Py_ssize_t i0 = part_start(nIn, me.part, me.nparts, 16)
    cdef Py_ssize_t i1 = part_start(nIn, me.part + 1, me.nparts, 16)
    cdef PackedWeights wxT = gate_row_weights(L, SB, <const real *>L.Wx, L.ldwx, 0,
                                              cells_families[L.family].gates, i0, i1 - i0)
    project(SB, <const real *>L.gates, L.G, wxT, NULL, <real *>L.dLdx + i0, nIn, 0)
    free_packed(&wxT)


cdef enum:
    # Where the recurrent side's gradient of a gate block is, for dL/dWh: the gates' (the
    # input side's, where they are the same), aux's (the family's aux_grad_block and the blocks
    # after it that multiply hPrev), or a block that multiplies aux (Σ auxᵀ·dz).
    GRAD_IN_GATES, GRAD_IN_AUX, GRAD_OF_AUX


cdef inline int recurrent_grad_kind(cells_family_info fam, Py_ssize_t k) noexcept nogil:
    """Which of the kinds above gate block k's recurrent weight gradient is."""
    if k >= fam.h_blocks:
        return GRAD_OF_AUX
    if 0 <= fam.aux_grad_block <= k:
        return GRAD_IN_AUX
    return GRAD_IN_GATES


cdef void weight_grads(const Loop *L, cells_part me, real zero) noexcept nogil:
    """The weight gradients, each one product over all steps, for this part's columns
    [c0, c1) of the G gate columns: dL/dWx = Σ xᵀ·dz; dL/dWh_k = Σ hPrevᵀ·dz_k (d_k, kept in
    aux, for the family's aux_grad_block), or Σ auxᵀ·dz_k for a block that multiplies aux.
    L.d, free now, holds each part's rows of prev_state_product's first steps."""
    cdef cells_family_info fam = cells_families[L.family]
    cdef Py_ssize_t sL = L.sL, bS = L.bS, nOut = L.nOut, G = L.G, nState = L.nState, SB = sL * bS
    cdef Py_ssize_t c0 = part_start(G, me.part, me.nparts, 16)
    cdef Py_ssize_t c1 = part_start(G, me.part + 1, me.nparts, 16)
    cdef Py_ssize_t col = c0, end, k
    cdef const real *hI = <const real *>L.hI
    cdef const real *h = <const real *>L.h
    cdef real *gates = <real *>L.gates
    cdef real *aux = <real *>L.aux
    cdef real *ds = <real *>L.d
    cdef real *dLdWh = <real *>L.dLdWh
    cdef Py_ssize_t A = fam.aux * nOut, kind
    weight_grad(L.weights_transposed, L.nIn, c1 - c0, SB, <const real *>L.x, L.nIn, gates + c0,
                G, OVERWRITE, gate_columns(L, <real *>L.dLdWx, L.ldwx, c0), L.ldwx)
    if not fam.recurrent_product:
        return
    while col < c1:  # the recurrent weight's, in runs of columns of one kind
        kind = recurrent_grad_kind(fam, col // nOut)
        end = min(c1, (col // nOut + 1) * nOut)
        while end < c1 and recurrent_grad_kind(fam, end // nOut) == kind:
            end = min(c1, end + nOut)
        if kind == GRAD_IN_AUX:
            prev_state_product(sL, bS, nState, end - col, L.seq_len, L.forward, hI, h,
                               aux + col - fam.aux_grad_block * nOut, A, ds + bS * col,
                               L.weights_transposed, gate_columns(L, dLdWh, L.ldwh, col), L.ldwh)
        elif kind == GRAD_IN_GATES:
            prev_state_product(sL, bS, nState, end - col, L.seq_len, L.forward, hI, h,
                               gates + col, G, ds + bS * col, L.weights_transposed,
                               gate_columns(L, dLdWh, L.ldwh, col), L.ldwh)
        else:
            weight_grad(L.weights_transposed, nOut, end - col, SB, aux, A, gates + col,
                        G, OVERWRITE, gate_columns(L, dLdWh, L.ldwh, col), L.ldwh)
        col = end


cdef void gradients_task(const Loop *L, Py_ssize_t task, real zero) noexcept nogil:
    """Task `task` of the gradients over all steps, after the recurrence: its block of each
    gradient's columns, however the recurrence split the work."""
    cdef cells_part me = part_of(task, L.tasks)
    cdef Units units
    if sums_by_rows(L) and L.part_sums != NULL:
        add_part_sums(L, me, zero)
    if L.Wproj != NULL:
        # dL/dWproj = Σ mᵀ·dL/dh over every step, this task's block of the state columns.
        units = part_units(me, L.nState, L.unit_align)
        weight_grad(False, L.nOut, units.j1 - units.j0, L.sL * L.bS, <const real *>L.m,
                    L.nOut, <const real *>L.dh_steps + units.j0, L.nState, OVERWRITE,
                    <real *>L.dLdWproj + units.j0, L.nState)
    if L.dLdx != NULL:
        input_grad(L, me, zero)
    weight_grads(L, me, zero)


cdef void backward_loop(const Loop *L, cells_part me, real zero) noexcept nogil:
    """Part `me` of the backward pass of L, on the workspace (h, c, gates, aux, m) of its
    forward pass: the tasks it claims (L.claims; claims.h), its home's first. Where the rows
    split, a task is a block of rows over every step, on the packed copy of the weights of the
    part that runs it. Where the units split, the recurrence runs in phases of a task per
    block of the units (run_phase), which end where a task reads what others wrote (ends_phase):
    the segments of one step (or two) a phase. Then, in a phase of its own, the gradients over
    all steps (gradients_task)."""
    cdef Segments phase
    phase.n, phase.phase = 0, 0
    backward_recurrence(L, me, &phase, zero)
    add_segment(L, me, &phase, GRADIENTS, 0, zero)
    run_phase(L, me, &phase, zero)


cdef void backward_recurrence(const Loop *L, cells_part me, Segments *phase,
                              real zero) noexcept nogil:
    """The recurrence of backward_loop, from `phase` on: every phase of it run but the last,
    which stays open in `phase` (run_phase runs it)."""
    cdef OwnCopy own
    cdef BackwardPart p
    cdef Py_ssize_t t, task
    if L.rows_split:
        memset(&own, 0, sizeof(own))
        task = claim_rows(L, me, &own, True, zero)
        while task >= 0:
            backward_task(L, task, own.w, &p, zero)
            run_steps(L, &p, zero)
            cells_claim_finished(L.claims, me)
            task = claim_rows(L, me, &own, True, zero)
        free_own(&own)
        phase.phase += 1
        return
    add_segment(L, me, phase, START, 0, zero)
    for t in range(L.sL - 1, -1, -1):
        if L.Wproj != NULL:
            add_segment(L, me, phase, PROJECTED, t, zero)
        add_segment(L, me, phase, MAIN, t, zero)
        if cells_families[L.family].phases == 2:
            add_segment(L, me, phase, AUX, t, zero)
        add_segment(L, me, phase, TAIL, t, zero)


cdef void whole_recurrence(const Loop *L, cells_part me, real zero) noexcept nogil:
    """Part me of the recurrence of L's backward pass, every phase of it (a row group's: the
    gradients over all steps run after every group's, gradients_loop)."""
    cdef Segments phase
    phase.n, phase.phase = 0, 0
    backward_recurrence(L, me, &phase, zero)
    if phase.n > 0:
        run_phase(L, me, &phase, zero)


cdef void gradients_loop(const Loop *L, cells_part me, real zero) noexcept nogil:
    """Part me of the gradients over all steps of L's backward pass, once its recurrence is
    done (whole_recurrence): a phase of its own (gradients_task)."""
    cdef Segments phase
    phase.n, phase.phase = 0, 0
    add_segment(L, me, &phase, GRADIENTS, 0, zero)
    run_phase(L, me, &phase, zero)


cpdef bint backward_calls_blas(Py_ssize_t nIn, Py_ssize_t nState, Py_ssize_t G,
                               Py_ssize_t itemsize):
    """Whether a backward pass may multiply on BLAS: where dL/dWx [nIn, G] or dL/dWh [nState, G]
    holds more than TN_C_BYTES (weight_grad takes a thread's columns of it, at most all of it;
    dL/dWproj [nOut, nState] is smaller than dL/dWh). Every other product of either pass runs on
    cells' kernels."""
    return max(nIn, nState) * G * itemsize > cells_panel_tn_c_bytes()


# The input projection runs a chunk of time steps at a time, just before the loop steps that
# read it, so that the gate pass finds gx in cache rather than in memory: chunks of at most
# projection_chunk_bytes() of gx (every thread's columns), at least one step.
cdef inline Py_ssize_t projection_chunk_bytes() noexcept nogil:
    """Half a core's L2."""
    return cells_l2_bytes() // 2


PROJECTION_CHUNK_BYTES = projection_chunk_bytes()


cpdef Py_ssize_t projection_chunk_steps(Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t G,
                                        Py_ssize_t itemsize, bint whole):
    """Time steps per input-projection chunk, in [1, sL] (0 for sL = 0). `whole`: all sL at
    once, where the rows of one loop step are at different time indices (reverse with seq_len).
    An inference call's gx holds one chunk."""
    cdef Py_ssize_t step_bytes = bS * G * itemsize
    if whole or step_bytes == 0:
        return sL
    return min(sL, max(1, projection_chunk_bytes() // step_bytes))


# A pass splits the batch rows between the threads instead of the units (L.rows_split) where
# every thread gets at least MIN_ROWS_PER_THREAD rows and its own packed copy of all the
# recurrent weights (and Wproj) is at most row_split_weight_bytes(): then no thread
# waits for another at any step. The backward's packed weights are the same sizes, transposed.
# Below 8 rows a thread, or above a core's L2 (1 MiB on the cores of the Performance page's
# records), the unit split is as fast or faster.
cdef enum:
    MIN_ROWS_PER_THREAD = 8


cdef inline Py_ssize_t row_split_weight_bytes() noexcept nogil:
    """A core's L2."""
    return cells_l2_bytes()


ROW_SPLIT_WEIGHT_BYTES = row_split_weight_bytes()


cdef inline Py_ssize_t recurrent_weight_bytes(Py_ssize_t nOut, Py_ssize_t nState,
                                              Py_ssize_t gates, bint projected,
                                              Py_ssize_t itemsize) noexcept nogil:
    """The bytes of the weights every step multiplies: op(Wh) [nState, gates·nOut], and Wproj
    [nOut, nState] when `projected`."""
    return (nState * gates * nOut + (nOut * nState if projected else 0)) * itemsize


cpdef bint splits_rows(int n_threads, Py_ssize_t bS, Py_ssize_t nOut, Py_ssize_t nState,
                       Py_ssize_t gates, bint projected, Py_ssize_t itemsize):
    """Whether a pass on n_threads over bS rows splits the rows (L.rows_split), for a family of
    `gates` gate blocks, nState state columns (nOut, or nProj when `projected`) and elements of
    `itemsize` bytes."""
    return (n_threads > 1 and bS >= n_threads * MIN_ROWS_PER_THREAD
            and recurrent_weight_bytes(nOut, nState, gates, projected, itemsize)
            <= row_split_weight_bytes())


def packs_gates_side_by_side(Py_ssize_t blocks, Py_ssize_t split, Py_ssize_t n, dtype):
    """Whether a thread's share of n units of `blocks` gate blocks (products over the blocks
    [0, split) and [split, blocks)) is packed side by side (cells/_panels.pxd,
    packs_side_by_side) in a pass of `dtype` on the instruction set in use."""
    cdef Py_ssize_t width = (CELLS_PANEL_WIDTH_F if np.dtype(dtype) == np.float32
                             else CELLS_PANEL_WIDTH_D)
    return packs_side_by_side(width, blocks, split, n)


cpdef int row_groups(int n_threads, Py_ssize_t bS, Py_ssize_t nOut, Py_ssize_t nState,
                     Py_ssize_t gates, bint projected, Py_ssize_t itemsize):
    """The groups of the batch rows whose steps a pass on n_threads runs apart, each group on
    n_threads / groups threads that split its units (run_pass), for a family of `gates` gate
    blocks, nState state columns and elements of `itemsize` bytes: the most groups, with
    every group at least MIN_ROWS_PER_THREAD rows and every thread's share of the recurrent
    weights (and Wproj) at most row_split_weight_bytes(), as where the rows split (a group of
    one thread). A thread then waits at a step only for the threads of its group, which read
    the same rows, rather than for all. 1 (no groups) where the rows split, or where no group
    of 2 to n_threads - 1 threads (a divisor of n_threads) qualifies: on 2 threads, always."""
    cdef Py_ssize_t weights = recurrent_weight_bytes(nOut, nState, gates, projected, itemsize)
    cdef int size
    if splits_rows(n_threads, bS, nOut, nState, gates, projected, itemsize):
        return 1
    for size in range(2, n_threads):
        if (n_threads % size == 0 and bS >= n_threads // size * MIN_ROWS_PER_THREAD
                and weights <= size * row_split_weight_bytes()):
            return n_threads // size
    return 1


cdef void split_work(Loop *L, cells_family_info fam, bint projected,
                     Py_ssize_t itemsize) noexcept:
    """How a pass (or a prepared net's call) shares its work between its parts: L.rows_split
    as splits_rows decides for any family; where the units split instead, a family whose step
    reduces across a row runs its steps on whole rows (L.row_steps). On one thread such a
    family splits the rows: one part, whose steps are whole rows either way, and a prepared
    net's call then runs as one task rather than two phases a step."""
    L.rows_split = (splits_rows(L.n_threads, L.bS, L.nOut, L.nState, fam.gates, projected,
                                itemsize)
                    or (fam.row_reduction and L.n_threads == 1))
    L.row_steps = fam.row_reduction and not L.rows_split


# The passes as cells_run_parts runs them (include/cells/team.h): one per pass and dtype.
cdef void forward_float(void *L, cells_part me) noexcept nogil:
    forward_loop(<const Loop *>L, me, <float>0)


cdef void forward_double(void *L, cells_part me) noexcept nogil:
    forward_loop(<const Loop *>L, me, <double>0)


cdef void backward_float(void *L, cells_part me) noexcept nogil:
    backward_loop(<const Loop *>L, me, <float>0)


cdef void backward_double(void *L, cells_part me) noexcept nogil:
    backward_loop(<const Loop *>L, me, <double>0)


# Loops run in groups of the parts (include/cells/claims.h, cells_groups): a pass's row groups
# (run_pass), or prepared nets' calls at once (run_calls). Group g runs loops[g] with `run`.
cdef struct Grouped:
    Loop **loops
    cells_groups groups
    cells_group_fn run      # one of the four below


cdef void run_grouped(void *arg, cells_part me) noexcept nogil:
    cdef Grouped *G = <Grouped *>arg
    cells_groups_run(&G.groups, me, G.run, arg)


cdef void group_forward_float(void *arg, int group, cells_part home) noexcept nogil:
    forward_loop((<Grouped *>arg).loops[group], home, <float>0)


cdef void group_forward_double(void *arg, int group, cells_part home) noexcept nogil:
    forward_loop((<Grouped *>arg).loops[group], home, <double>0)


cdef void group_recurrence_float(void *arg, int group, cells_part home) noexcept nogil:
    whole_recurrence((<Grouped *>arg).loops[group], home, <float>0)


cdef void group_recurrence_double(void *arg, int group, cells_part home) noexcept nogil:
    whole_recurrence((<Grouped *>arg).loops[group], home, <double>0)


cdef void gradients_float(void *L, cells_part me) noexcept nogil:
    gradients_loop(<const Loop *>L, me, <float>0)


cdef void gradients_double(void *L, cells_part me) noexcept nogil:
    gradients_loop(<const Loop *>L, me, <double>0)


# ---------------------------------------------------------------------------------------------
# Entry points for the CPU backend (cells/_cpu.py), which has validated every shape and dtype.
# The sizes of the arrays are checked once more here, so that no caller can make the loop read
# or write out of bounds: a failure is a bug in cells (hence "internal").
# ---------------------------------------------------------------------------------------------

cdef void *data(dtype, str name, a, Py_ssize_t size, bint required=False,
               bint writes=False) except? NULL:
    """The data of array `a` (NULL for None: not given), checked to have the `size` elements of
    `dtype` that the loop indexes, C-contiguous (and writeable, for an array the loop `writes`)."""
    if a is None:
        if required and size > 0:
            raise ValueError(f"internal: {name} is required")
        return NULL
    if not isinstance(a, np.ndarray):
        raise TypeError(f"internal: {name} is a {type(a).__name__}, not an ndarray")
    cdef cnp.ndarray arr = a
    if arr.dtype != dtype or not arr.flags.c_contiguous or arr.size != size:
        raise ValueError(f"internal: {name} is {arr.dtype} {a.shape}, expected {size} "
                         f"C-contiguous {dtype} elements")
    if writes and not arr.flags.writeable:
        raise ValueError(f"internal: {name} is read-only")
    return cnp.PyArray_DATA(arr)


cdef int set_seq_len(Loop *L, seq_len) except -1:
    """L.seq_len from seq_len: None, or L.bS int64 lengths in [0, L.sL]."""
    L.seq_len = NULL
    if seq_len is not None:
        if (not isinstance(seq_len, np.ndarray) or seq_len.dtype != np.int64
                or not seq_len.flags.c_contiguous or seq_len.shape != (L.bS,)
                or (L.bS and not (0 <= seq_len.min() and seq_len.max() <= L.sL))):
            raise ValueError(f"internal: seq_len must be {L.bS} int64 lengths in [0, {L.sL}]")
        if L.bS:
            L.seq_len = <const int64_t *>cnp.PyArray_DATA(<cnp.ndarray>seq_len)
    return 0


cdef cells_family_info set_problem(Loop *L, str family, Py_ssize_t sL, Py_ssize_t bS,
                                    Py_ssize_t nIn, Py_ssize_t nOut, Py_ssize_t nProj,
                                    seq_len, bint forward, int n_threads, dtype, Wx, Wh, W,
                                    bint weights_transposed, P, Wproj, double clip,
                                    int activation, lstm_acts) except *:
    """Fill in L's sizes, options and weights; return the family's row of the table."""
    L.family = FAMILIES[family]
    cdef cells_family_info fam = cells_families[L.family]
    L.sL, L.bS, L.nIn, L.nOut, L.G = sL, bS, nIn, nOut, fam.gates * nOut
    L.r0, L.r1, L.row_groups = 0, bS, 1
    if Wproj is not None and not fam.projects:
        raise ValueError(f"internal: the {family} family's output cannot be projected")
    L.nState = nOut if Wproj is None else nProj
    L.Wproj = data(dtype, "Wproj", Wproj, nOut * L.nState)
    L.forward, L.n_threads = forward, n_threads
    L.options.clip, L.options.activation = clip, activation
    for code, _, _ in lstm_acts:
        if not 0 <= code < CELLS_ACTIVATIONS:
            raise ValueError(f"internal: activation code {code} is not in "
                             f"[0, {CELLS_ACTIVATIONS})")
    (L.options.gate_act.code, L.options.gate_act.alpha, L.options.gate_act.beta), \
        (L.options.cell_act.code, L.options.cell_act.alpha, L.options.cell_act.beta), \
        (L.options.out_act.code, L.options.out_act.alpha, L.options.out_act.beta) = lstm_acts
    set_seq_len(L, seq_len)
    L.unit_align = CACHE_LINE // dtype.itemsize
    L.prepared, L.claims, L.tasks, L.shares = NULL, NULL, 0, NULL
    L.row_steps = False
    L.row_scratch, L.x_rows.data = NULL, NULL
    L.zone, L.zone_per_step, L.dLdc, L.dzone = NULL, False, NULL, NULL
    L.weights_transposed = W is not None or weights_transposed
    if W is not None:
        # W [G, nOut + nIn] (PyTorch's layout), columns h then x: op(Wh) = W[:, :nOut]ᵀ.
        L.ldwx = L.ldwh = nOut + nIn
        L.Wh = data(dtype, "W", W, L.G * L.ldwh, True)
        L.Wx = <const char *>L.Wh + nOut * <Py_ssize_t>dtype.itemsize
    else:
        # Wx [nIn, G] and Wh [nState, G], or transposed [G, nIn] and [G, nState].
        L.ldwx, L.ldwh = (nIn, L.nState) if weights_transposed else (L.G, L.G)
        L.Wx = data(dtype, "Wx", Wx, nIn * L.G, True)
        L.Wh = data(dtype, "Wh", Wh, L.nState * L.G, fam.recurrent_product)
    L.P = data(dtype, "P", P, fam.param_blocks * nOut, fam.param_grad == CELLS_PARAM_GRAD_STEPS)
    return fam


cdef int set_zoneout(Loop *L, dtype, zoneout, bint projected) except -1:
    """L.zone from zoneout: None, or zoneout's share of the new state, one value for all
    ([1]) or each element's ([sL, bS, nOut])."""
    if zoneout is None:
        return 0
    if projected:
        raise ValueError("internal: zoneout on a projected output")
    cdef Py_ssize_t size = zoneout.size if isinstance(zoneout, np.ndarray) else -1
    L.zone_per_step = size != 1
    L.zone = data(dtype, "zoneout", zoneout, 1 if size == 1 else L.sL * L.bS * L.nOut, True)
    return 0


def forward(str family, Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t nIn, Py_ssize_t nOut, *,
            seq_len, bint forward, bint keep, int n_threads, x, hI, Wx=None, Wh=None, W=None,
            bint weights_transposed=False, b=None, P=None, Wproj=None, Py_ssize_t nProj=0,
            cI=None, gx, gh, hs, cs=None, gates, c=None, aux=None, m=None, ms=None, h, hL=None,
            cL=None, zoneout=None, double clip=INFINITY, int activation=0,
            lstm_acts=LSTM_ACTIVATIONS, bint openmp=False):
    """Run the forward pass of `family` (a key of cells._family_table.FAMILIES) on the arrays
    that cells/_loop_call.pxd names (and shapes). W [G, nOut + nIn] in PyTorch's layout replaces
    Wx and Wh (the LLTM); with weights_transposed, Wx and Wh are given in PyTorch's layout,
    transposed ([G, nIn] and [G, nState]).
    clip and lstm_acts (LSTM_ACTIVATIONS' layout) are the LSTM's options, activation the RNN's
    code (include/cells/step.h).
    With keep, gates, c and a kept aux are [sL, ...]; without, gates and aux are one step's
    scratch ([bS, ...]) and c may be given (every step's c, as with keep). Wproj [nOut, nProj]
    projects the output (then m is given with keep, and ms always). zoneout: None, or zoneout's
    share of the new state, [1] or [sL, bS, nOut] (cells/_loop_call.pxd: zone). openmp: run on
    OpenMP's pool rather than cells' team (run_pass)."""
    cdef Loop L
    dtype = x.dtype
    cdef cells_family_info fam = set_problem(&L, family, sL, bS, nIn, nOut, nProj, seq_len,
                                             forward, n_threads, dtype, Wx, Wh, W,
                                             weights_transposed, P, Wproj, clip, activation,
                                             lstm_acts)
    cdef Py_ssize_t G = L.G, S = bS * nOut, H = bS * L.nState, steps = sL if keep else 1
    cdef bint projected = L.Wproj != NULL
    L.keep = keep
    L.b = data(dtype, "b", b, G)
    L.x = data(dtype, "x", x, sL * bS * nIn, True)
    L.hI = data(dtype, "hI", hI, H, True)
    L.cI = data(dtype, "cI", cI, S, fam.cell_state)
    L.chunk_steps = projection_chunk_steps(sL, bS, G, dtype.itemsize,
                                           not forward and seq_len is not None)
    L.gx_steps = sL if keep else L.chunk_steps
    split_work(&L, fam, projected, dtype.itemsize)
    L.gx = data(dtype, "gx", gx, L.gx_steps * bS * G, True, True)
    L.gh = data(dtype, "gh", gh, bS * G, True, True)
    L.hs = data(dtype, "hs", hs, 2 * H, True, True)
    L.cs = data(dtype, "cs", cs, 2 * S, fam.cell_state, True)
    L.gates = data(dtype, "gates", gates, steps * bS * G, True, True)
    L.c = data(dtype, "c", c, sL * S, keep and fam.cell_state, True)
    L.aux = data(dtype, "aux", aux, (steps if fam.aux_kept else 1) * S * fam.aux, fam.aux,
                 True)
    set_zoneout(&L, dtype, zoneout, projected)
    L.m = data(dtype, "m", m, sL * S, keep and projected, True)
    L.ms = data(dtype, "ms", ms, S, projected, True)
    L.h = data(dtype, "h", h, sL * H, True, True)
    L.hL = data(dtype, "hL", hL, H, False, True)
    L.cL = data(dtype, "cL", cL, S, False, True)
    cdef bint single = dtype == np.float32
    run_pass(&L, False, single, "forward", openmp)


cdef int run_pass(Loop *L, bint backward, bint single, str name, bint openmp) except -1:
    """Run L's forward or backward pass (`backward`; float32 where `single`) on L.n_threads
    parts, on cells' team or, with `openmp`, OpenMP's pool (include/cells/team.h says when
    each): as many tasks a phase as parts (a block of the rows, or of the units, each part's
    home), and where the units split, the table of each task's packed weights (L.shares),
    freed after. Where the rows run in groups (row_groups), each group's steps are a pass of
    their own (its Loop: its rows, claims, packed weights and sums) on a group of the parts
    (claims.h's cells_groups), and the backward's gradients over all steps then run on every
    part."""
    cdef cells_family_info fam = cells_families[L.family]
    cdef Py_ssize_t itemsize = sizeof(float) if single else sizeof(double)
    L.row_groups = row_groups(L.n_threads, L.bS, L.nOut, L.nState, fam.gates,
                              L.Wproj != NULL, itemsize)
    if L.row_groups > 1:
        return run_row_groups_pass(L, backward, single, itemsize, name, openmp)
    run_claimed(L, (backward_float if single else backward_double) if backward
                else (forward_float if single else forward_double), not L.rows_split, name,
                openmp)
    return 0


cdef inline void run_parts(int nparts, cells_part_fn fn, void *arg, bint openmp) noexcept nogil:
    """fn(arg) on nparts parts: on OpenMP's pool with `openmp` (include/cells/team.h says where
    it is), else on cells' team."""
    if openmp:
        cells_run_parts_with_openmp(nparts, fn, arg)
    else:
        cells_run_parts(nparts, fn, arg)


cdef int run_claimed(Loop *L, cells_part_fn fn, bint packs, str name, bint openmp) except -1:
    """fn(L) on L.n_threads parts (run_pass's pools), with claims of as many homes and tasks
    a phase, and where `packs`, the table of each task's packed weights (L.shares), freed
    after."""
    cdef cells_claims claims
    cdef Py_ssize_t k
    L.tasks = L.n_threads
    L.claims = &claims
    if cells_claims_init(&claims, L.n_threads) != 0:
        raise MemoryError(f"the claims of a {name} pass")
    L.shares = NULL
    if packs:
        L.shares = <PackedWeights *>calloc(3 * L.tasks, sizeof(PackedWeights))
        if L.shares == NULL:
            cells_claims_destroy(&claims)
            raise MemoryError(f"the packed weights of a {name} pass")
    with nogil:
        run_parts(L.n_threads, fn, L, openmp)
    cells_claims_destroy(&claims)
    L.claims = NULL
    if L.shares != NULL:
        for k in range(3 * L.tasks):
            free_packed(&L.shares[k])
        free(L.shares)
        L.shares = NULL
    return 0


cdef int run_row_groups_pass(Loop *L, bint backward, bint single, Py_ssize_t itemsize,
                             str name, bint openmp) except -1:
    """run_pass where the rows run in L.row_groups groups: group g's Loop is L's with its
    block of the rows, size = n_threads / groups threads (as many tasks a phase), claims and
    packed weights of its own, and, in the backward, its size rows of part_sums; then the
    gradients over all steps on L, every part."""
    cdef int groups = L.row_groups, size = L.n_threads // groups, g
    cdef Py_ssize_t k, sums_bytes = sum_blocks(cells_families[L.family]) * L.nOut * itemsize
    cdef Grouped G
    cdef Loop *loops = <Loop *>calloc(groups, sizeof(Loop))
    G.loops = <Loop **>calloc(groups, sizeof(Loop *))
    cdef cells_claims *claims = <cells_claims *>calloc(groups, sizeof(cells_claims))
    cdef PackedWeights *shares = <PackedWeights *>calloc(3 * L.n_threads, sizeof(PackedWeights))
    cdef int claims_made = 0
    cdef bint groups_made = False
    try:
        if loops == NULL or G.loops == NULL or claims == NULL or shares == NULL:
            raise MemoryError(f"the row groups of a {name} pass")
        if cells_groups_init(&G.groups, groups, size) != 0:
            raise MemoryError(f"the row groups of a {name} pass")
        groups_made = True
        for g in range(groups):
            loops[g] = L[0]
            loops[g].r0 = part_start(L.bS, g, groups, 1)
            loops[g].r1 = part_start(L.bS, g + 1, groups, 1)
            loops[g].n_threads = loops[g].tasks = size
            loops[g].shares = shares + 3 * size * g
            if L.part_sums != NULL:
                loops[g].part_sums = <char *>L.part_sums + size * g * sums_bytes
            if cells_claims_init(&claims[g], size) != 0:
                raise MemoryError(f"the claims of a {name} pass")
            claims_made += 1
            loops[g].claims = &claims[g]
            G.loops[g] = &loops[g]
        if backward:
            G.run = group_recurrence_float if single else group_recurrence_double
        else:
            G.run = group_forward_float if single else group_forward_double
        with nogil:
            run_parts(L.n_threads, run_grouped, &G, openmp)
    finally:
        for g in range(claims_made):
            cells_claims_destroy(&claims[g])
        if groups_made:
            cells_groups_destroy(&G.groups)
        if shares != NULL:
            for k in range(3 * L.n_threads):
                free_packed(&shares[k])
        free(shares)
        free(claims)
        free(G.loops)
        free(loops)
    if backward:
        run_claimed(L, gradients_float if single else gradients_double, False, name, openmp)
    return 0


def backward(str family, Py_ssize_t sL, Py_ssize_t bS, Py_ssize_t nIn, Py_ssize_t nOut, *,
             seq_len, bint forward, int n_threads, x, hI, Wx=None, Wh=None, W=None,
             bint weights_transposed=False, P=None, Wproj=None, Py_ssize_t nProj=0, cI=None, h,
             c=None, gates, aux=None, m=None, dLdh=None, dLdhL=None, dLdcL=None, dLdgates=None,
             dLdc=None, zoneout=None, d, daux=None, dzone=None, ms=None, dh_step=None,
             dh_steps=None, dLdx, dLdhI, dLdcI=None,
             dLdWx=None, dLdWh=None, dLdW=None, dLdb=None, dLdP=None, part_sums=None,
             dLdWproj=None, double clip=INFINITY, int activation=0,
             lstm_acts=LSTM_ACTIVATIONS, bint openmp=False):
    """Run the backward pass of `family` on its forward's workspace (h, c, gates, aux and m of
    every step; aux is scratch when the forward does not keep it); it overwrites gates and aux
    with gradients. dLdx None skips dL/dx. dLdW [G, nOut + nIn] goes with W, and dLdWx and dLdWh
    are transposed with weights_transposed (as Wx and Wh); m, ms, dh_step, dh_steps and
    dLdWproj go with Wproj. part_sums [n_threads, gates + blocks, nOut] is scratch
    for a pass that splits the rows (with dLdb or dLdP): each thread's sums of dL/db and dL/dP
    over its rows. dLdc [sL, bS, nOut]: the gradient arriving at every step's c; zoneout as
    forward() took it, with dzone [bS, nOut] its scratch; dLdWh None for a family with no
    recurrent product; openmp as forward() takes it."""
    cdef Loop L
    dtype = x.dtype
    cdef cells_family_info fam = set_problem(&L, family, sL, bS, nIn, nOut, nProj, seq_len,
                                             forward, n_threads, dtype, Wx, Wh, W,
                                             weights_transposed, P, Wproj, clip, activation,
                                             lstm_acts)
    cdef Py_ssize_t G = L.G, S = bS * nOut, H = bS * L.nState, SB = sL * bS
    cdef bint projected = L.Wproj != NULL
    L.keep = True
    split_work(&L, fam, projected, dtype.itemsize)
    L.x = data(dtype, "x", x, SB * nIn, True)
    L.hI = data(dtype, "hI", hI, H, True)
    L.cI = data(dtype, "cI", cI, S, fam.cell_state)
    L.h = data(dtype, "h", h, sL * H, True)
    L.c = data(dtype, "c", c, SB * nOut, fam.cell_state)
    L.gates = data(dtype, "gates", gates, SB * G, True, True)
    L.aux = data(dtype, "aux", aux, SB * nOut * fam.aux, fam.aux, True)
    L.m = data(dtype, "m", m, SB * nOut, projected)
    L.dLdh = data(dtype, "dLdh", dLdh, sL * H)
    L.dLdhL = data(dtype, "dLdhL", dLdhL, H)
    L.dLdcL = data(dtype, "dLdcL", dLdcL, S)
    L.dLdgates = data(dtype, "dLdgates", dLdgates, SB * G)
    L.dLdc = data(dtype, "dLdc", dLdc, SB * nOut)
    set_zoneout(&L, dtype, zoneout, projected)
    L.dzone = data(dtype, "dzone", dzone, S, L.zone != NULL, True)
    L.d = data(dtype, "d", d, 2 * bS * G, True, True)
    L.daux = data(dtype, "daux", daux, S, fam.phases == 2, True)
    L.ms = data(dtype, "ms", ms, S, projected, True)
    L.dh_step = data(dtype, "dh_step", dh_step, H, projected, True)
    L.dh_steps = data(dtype, "dh_steps", dh_steps, sL * H, projected, True)
    L.dLdx = data(dtype, "dLdx", dLdx, SB * nIn, False, True)
    L.dLdhI = data(dtype, "dLdhI", dLdhI, H, True, True)
    L.dLdcI = data(dtype, "dLdcI", dLdcI, S, fam.cell_state, True)
    if W is not None:
        L.dLdWh = data(dtype, "dLdW", dLdW, G * L.ldwh, True, True)
        L.dLdWx = <char *>L.dLdWh + nOut * <Py_ssize_t>dtype.itemsize
    else:
        L.dLdWx = data(dtype, "dLdWx", dLdWx, nIn * G, True, True)
        L.dLdWh = data(dtype, "dLdWh", dLdWh, L.nState * G, fam.recurrent_product, True)
    L.dLdb = data(dtype, "dLdb", dLdb, G, False, True)
    L.dLdP = data(dtype, "dLdP", dLdP, fam.param_blocks * nOut,
                  fam.param_grad == CELLS_PARAM_GRAD_STEPS, True)
    L.part_sums = data(dtype, "part_sums", part_sums,
                       n_threads * (fam.gates + fam.param_blocks) * nOut,
                       sums_by_rows(&L) and (L.dLdb != NULL or L.dLdP != NULL), True)
    L.dLdWproj = data(dtype, "dLdWproj", dLdWproj, nOut * L.nState, projected, True)
    cdef bint single = dtype == np.float32
    run_pass(&L, True, single, "backward", openmp)


# ---------------------------------------------------------------------------------------------
# Prepared nets (cells.PreparedNet): weights packed once, for many inference calls
# ---------------------------------------------------------------------------------------------

cdef bint pack_prepared(Loop *L, real zero) noexcept nogil:
    """Pack L's weights whole into L.prepared (op(Wx) and op(Wh) gate block by gate block, and
    Wproj), for the fixed-order products, into the panels L.prepared.kind says; False where
    memory ran out."""
    cdef cells_family_info fam = cells_families[L.family]
    cdef Prepared *w = <Prepared *>L.prepared
    cdef const real *Wx = <const real *>L.Wx
    cdef const real *Wh = <const real *>L.Wh
    if L.weights_transposed:
        w.wx = weights_in_place(Wx, L.nOut * L.ldwx, fam.gates, L.nIn, L.nOut, L.ldwx, TRANSPOSED)
        w.wh = weights_in_place(Wh, L.nOut * L.ldwh, fam.gates, L.nState, L.nOut, L.ldwh,
                                TRANSPOSED)
    else:
        w.wx = weights_in_place(Wx, L.nOut, fam.gates, L.nIn, L.nOut, L.ldwx, AS_IS)
        w.wh = weights_in_place(Wh, L.nOut, fam.gates, L.nState, L.nOut, L.ldwh, AS_IS)
    w.wproj = weights_in_place(<const real *>L.Wproj, 0, 1, L.nOut, L.nState, L.nState, AS_IS)
    w.wx = pack_whole(w.wx, w.kind, zero)
    if fam.recurrent_product:
        w.wh = pack_whole(w.wh, w.kind, zero)
    if L.Wproj != NULL:
        w.wproj = pack_whole(w.wproj, w.kind, zero)
    # Only the packed copies are read from here on: the caller's arrays may change.
    w.wx.B = w.wh.B = w.wproj.B = NULL
    return (w.wx.P != NULL and (not fam.recurrent_product or w.wh.P != NULL)
            and (L.Wproj == NULL or w.wproj.P != NULL))


cdef inline PackedWeights pack_whole(PackedWeights w, int kind, real zero) noexcept nogil:
    """w (read in place) packed for a prepared net's fixed-order products: panels of the dtype
    of `zero`, or int8 or bfloat16 panels (`kind`, float32 weights)."""
    if kind != NATIVE_PANELS:
        return pack_lowp(w, kind)
    w = pack_weights(<const real *>w.B, w.step, w.blocks, w.K, w.n, w.ldb, w.transB)
    w.fixed_order = True
    return w


cdef Py_ssize_t aligned_elements(Py_ssize_t n, Py_ssize_t itemsize) noexcept nogil:
    """n elements rounded up to a whole number of 64-byte lines."""
    return (n * itemsize + 63) // 64 * 64 // itemsize


cdef struct NetCall:
    # One call of a prepared net (PreparedWeights.start): its Loop, whose claims and scratch
    # are these.
    Loop L
    cells_claims claims
    char *scratch
    char *lowp


cdef void end_call(NetCall *call) noexcept:
    """Free what PreparedWeights.start took for `call`."""
    cells_claims_destroy(&call.claims)
    free(call.scratch)
    free(call.lowp)


cdef class PreparedWeights:
    """A prepared net's part in the time loop: its weights packed whole (Prepared), its own
    copies of the loop's b and P, and the family, sizes and options of the loop (a Loop with
    no call's arrays). run() is one inference call of the forward loop on them; any number of
    threads may run it at once (each call has its own scratch)."""

    cdef Loop problem
    cdef Prepared packed
    cdef readonly object dtype, b, P
    cdef object zone            # zoneout's share of the new state, [1], or None
    cdef readonly str weights_kind  # what the panels hold: the dtype's name, "int8", "bfloat16"
    cdef readonly Py_ssize_t nIn, nOut, nState, G
    cdef readonly size_t nbytes  # of the packed weights, b and P
    cdef readonly size_t step_nbytes  # of the packed weights every step reads: Wh's, Wproj's

    def __dealloc__(self):
        free_packed(&self.packed.wx)
        free_packed(&self.packed.wh)
        free_packed(&self.packed.wproj)

    def call(self, net, x, state, seq_len, out, n_threads):
        """net(x, state, seq_len=seq_len, out=out, n_threads=n_threads) for the net these
        weights are (cells._prepared.PreparedNet, whose __call__ documents the arguments and
        their errors): arguments() checks them, then the call runs on the threads asked for,
        or on the net's choice (n_threads None). A plain int in range is taken as it is; any
        other value goes to cells._threads.check_n_threads, after the arrays' checks."""
        sL, bS, x, hI, cI, h, hL, cL, lengths, result = self.arguments(net, x, state, seq_len,
                                                                       out)
        if not (type(n_threads) is int and 1 <= n_threads <= CELLS_MAX_THREADS):
            n_threads = net._threads(bS, n_threads)
        self.run(sL, bS, x, hI, cI, h, hL, cL, lengths, n_threads)
        return result

    cpdef tuple arguments(self, net, x, state, seq_len, out):
        """A call's arguments checked, in order: x, the state, seq_len, out. Returns run()'s
        arguments but n_threads, (sL, bS, x, hI, cI, h, hL, cL, seq_len), followed by the
        NetResult the run fills in. An array that is not C-contiguous is copied (but out's,
        which must be); the common call (every array C-contiguous and of the net's dtype
        object, no seq_len) passes each check in a comparison or two."""
        cdef cells_family_info fam = cells_families[self.problem.family]
        cdef Py_ssize_t sL, bS, nd
        if type(x) is not np.ndarray and not isinstance(x, np.ndarray):
            raise TypeError(f"x: expected a numpy.ndarray, got {type_name(x)}")
        cdef cnp.ndarray xa = <cnp.ndarray>x
        if <object>cnp.PyArray_DESCR(xa) is not self.dtype and x.dtype != self.dtype:
            raise TypeError(f"x: expected dtype {self.dtype} (the net's), got {x.dtype}")
        nd = cnp.PyArray_NDIM(xa)
        if not 2 <= nd <= 3:
            raise ValueError(f"x: expected a 3-d array [sL, bS, nIn] or a 2-d array [bS, nIn] "
                             f"(one step), got shape {x.shape}")
        if cnp.PyArray_DIM(xa, nd - 1) != self.nIn:
            raise ValueError(f"x: expected {self.nIn} inputs (the net's nIn) in its last "
                             f"dimension, got shape {x.shape}")
        sL = cnp.PyArray_DIM(xa, 0) if nd == 3 else 1
        bS = cnp.PyArray_DIM(xa, nd - 2)
        State = net.State
        if state is None:
            hI = np.zeros((bS, self.nState), self.dtype)
            cI = np.zeros((bS, self.nOut), self.dtype) if fam.cell_state else None
        elif type(state) is State:
            hI = self._state_array("state.h", state[0], bS, self.nState, "nState")
            cI = (self._state_array("state.c", state[1], bS, self.nOut, "nOut")
                  if fam.cell_state else None)
        else:
            net._wrong_state(state)
        lengths = None if seq_len is None else check.seq_len(seq_len, sL, bS, x)
        if out is None:
            h = np.empty(((sL,) if nd == 3 else ()) + (bS, self.nState), self.dtype)
            hL = np.empty((bS, self.nState), self.dtype)
            cL = np.empty((bS, self.nOut), self.dtype) if fam.cell_state else None
            result = net.Result(h, State(hL, cL) if fam.cell_state else State(hL))
        else:
            if not (isinstance(out, tuple) and len(out) == 2 and type(out[1]) is State):
                raise TypeError(f"out: expected None or (h, state), state a {State.__name__}, "
                                f"got {type_name(out)}")
            h = self._out_array("out.h", out[0], nd, sL, bS, self.nState)
            hL = self._out_array("out.state.h", out[1][0], 2, 1, bS, self.nState)
            cL = (self._out_array("out.state.c", out[1][1], 2, 1, bS, self.nOut)
                  if fam.cell_state else None)
            result = net.Result(h, out[1])
        if type(x) is not np.ndarray or not cnp.PyArray_IS_C_CONTIGUOUS(xa):
            x = np.ascontiguousarray(x)
        return sL, bS, x, hI, cI, h, hL, cL, lengths, result

    cdef object _state_array(self, str name, a, Py_ssize_t bS, Py_ssize_t n, str size):
        """A state's array `a` [bS, n] (`size` names n), checked, C-contiguous (a copy of one
        that is not)."""
        if (type(a) is np.ndarray and <object>cnp.PyArray_DESCR(<cnp.ndarray>a) is self.dtype
                and cnp.PyArray_NDIM(<cnp.ndarray>a) == 2
                and cnp.PyArray_DIM(<cnp.ndarray>a, 0) == bS
                and cnp.PyArray_DIM(<cnp.ndarray>a, 1) == n
                and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a)):
            return a
        if not isinstance(a, np.ndarray):
            raise TypeError(f"{name}: expected a numpy.ndarray, got {type_name(a)}")
        if a.dtype != self.dtype:
            raise TypeError(f"{name}: expected dtype {self.dtype} (the net's), got {a.dtype}")
        if a.shape != (bS, n):
            raise ValueError(f"{name}: expected shape {(bS, n)} = [bS, {size}] (bS from x), got "
                             f"{a.shape}")
        return np.ascontiguousarray(a)

    cdef object _out_array(self, str name, a, Py_ssize_t nd, Py_ssize_t sL, Py_ssize_t bS,
                           Py_ssize_t n):
        """out's array `a`, checked: a writeable C-contiguous array of the net's dtype,
        [sL, bS, n] (nd 3) or [bS, n] (nd 2)."""
        if (type(a) is np.ndarray and <object>cnp.PyArray_DESCR(<cnp.ndarray>a) is self.dtype
                and cnp.PyArray_NDIM(<cnp.ndarray>a) == nd
                and (nd == 2 or cnp.PyArray_DIM(<cnp.ndarray>a, 0) == sL)
                and cnp.PyArray_DIM(<cnp.ndarray>a, nd - 2) == bS
                and cnp.PyArray_DIM(<cnp.ndarray>a, nd - 1) == n
                and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a)
                and cnp.PyArray_ISWRITEABLE(<cnp.ndarray>a)):
            return a
        shape = ((sL,) if nd == 3 else ()) + (bS, n)
        if not isinstance(a, np.ndarray) or a.dtype != self.dtype:
            raise TypeError(f"{name}: expected a {self.dtype} numpy.ndarray, got "
                            f"{getattr(a, 'dtype', '')} {type_name(a)}".rstrip())
        if a.shape != shape or not a.flags.c_contiguous or not a.flags.writeable:
            raise ValueError(f"{name}: expected a writeable C-contiguous array of shape "
                             f"{shape}, got shape {a.shape}"
                             f"{'' if a.flags.c_contiguous else ', not C-contiguous'}"
                             f"{'' if a.flags.writeable else ', read-only'}")
        return a

    def run(self, Py_ssize_t sL, Py_ssize_t bS, x, hI, cI, h, hL, cL, seq_len,
            int n_threads):
        """The forward loop over x [sL, bS, nIn] from hI [bS, nState] (and cI [bS, nOut]):
        every step's output into h [sL, bS, nState], the final states into hL and cL, each a
        C-contiguous array of the net's dtype (cI, cL None without a cell state); seq_len
        None or int64 [bS] in [0, sL]."""
        cdef NetCall call
        self.start(&call, sL, bS, x, hI, cI, h, hL, cL, seq_len, n_threads)
        cdef bint single = self.dtype == np.float32
        with nogil:
            cells_run_parts(n_threads, forward_float if single else forward_double, &call.L)
        end_call(&call)

    cdef int start(self, NetCall *call, Py_ssize_t sL, Py_ssize_t bS, x, hI, cI, h, hL, cL,
                   seq_len, int n_threads) except -1:
        """A call of run()'s arguments made ready in `call`: its Loop, scratch and claims (to
        be ended with end_call once it has run)."""
        call.L = self.problem
        cdef Loop *L = &call.L
        cdef cells_family_info fam = cells_families[L.family]
        cdef Py_ssize_t G = L.G, S = bS * L.nOut, H = bS * L.nState
        cdef Py_ssize_t itemsize = self.dtype.itemsize
        cdef Py_ssize_t gx_len, gh_len, hs_len, cs_len, aux_len, ms_len
        cdef char *scratch
        L.sL, L.bS, L.n_threads = sL, bS, n_threads
        L.r0, L.r1, L.row_groups = 0, bS, 1
        set_seq_len(L, seq_len)
        L.x = data(self.dtype, "x", x, sL * bS * L.nIn, True)
        L.hI = data(self.dtype, "hI", hI, H, True)
        L.cI = data(self.dtype, "cI", cI, S, fam.cell_state)
        L.h = data(self.dtype, "h", h, sL * H, True, True)
        L.hL = data(self.dtype, "hL", hL, H, True, True)
        L.cL = data(self.dtype, "cL", cL, S, fam.cell_state, True)
        L.chunk_steps = L.gx_steps = projection_chunk_steps(sL, bS, G, itemsize, False)
        split_work(L, fam, self.packed.wproj.P != NULL, itemsize)
        # The call's scratch, in one block: gx, gh, hs, cs, gates, aux, ms
        # (cells/_loop_call.pxd).
        gx_len = aligned_elements(L.gx_steps * bS * G, itemsize)
        gh_len = aligned_elements(bS * G, itemsize)
        hs_len = aligned_elements(2 * H, itemsize)
        cs_len = aligned_elements(2 * S, itemsize)
        aux_len = aligned_elements(S * fam.aux, itemsize)
        ms_len = aligned_elements(S, itemsize)
        scratch = <char *>malloc((gx_len + 2 * gh_len + hs_len + cs_len + aux_len + ms_len)
                                 * itemsize + 64)
        if scratch == NULL:
            raise MemoryError("the scratch of a prepared net's call")
        call.scratch, call.lowp = scratch, NULL
        L.gx = scratch + (64 - <size_t>scratch % 64) % 64
        L.gh = <char *>L.gx + gx_len * itemsize
        L.gates = <char *>L.gh + gh_len * itemsize
        L.hs = <char *>L.gates + gh_len * itemsize
        L.cs = <char *>L.hs + hs_len * itemsize
        L.aux = <char *>L.cs + cs_len * itemsize
        L.ms = <char *>L.aux + aux_len * itemsize
        L.c = L.m = NULL
        # On int8 or bfloat16 panels: x converted once, and each part's room for the rows its
        # products convert (at most bS of a step, of nState or nOut inputs).
        if self.packed.kind != NATIVE_PANELS:
            try:
                call.lowp = self._lowp_scratch(L)
            except MemoryError:
                free(scratch)
                raise
        # The tasks the parts claim: blocks of MIN_ROWS_PER_THREAD rows, or of whole panels
        # of the units (and as many blocks of the rows for the steps of L.row_steps).
        L.tasks = (max(1, bS // MIN_ROWS_PER_THREAD) if L.rows_split
                   else (L.nOut + L.unit_align - 1) // L.unit_align)
        L.claims = &call.claims
        if cells_claims_init(&call.claims, L.n_threads) != 0:
            free(scratch)
            free(call.lowp)
            raise MemoryError("the claims of a prepared net's call")
        return 0

    cdef char *_lowp_scratch(self, Loop *L) except NULL:
        """The scratch of a call on int8 or bfloat16 panels, in one block (free it): L.x_rows,
        x converted (here), and L.row_scratch, each part's room for the rows it converts."""
        cdef Py_ssize_t xM = L.sL * L.bS, x_ld = lowp_row_bytes(L.nIn)
        cdef Py_ssize_t part_ld = lowp_row_bytes(max(L.nOut, L.nState))
        cdef Py_ssize_t x_bytes = (xM * x_ld + xM * 8 + 63) // 64 * 64
        cdef Py_ssize_t part_bytes = (L.bS * part_ld + L.bS * 8 + 63) // 64 * 64
        cdef Py_ssize_t head = (L.n_threads * sizeof(RowScratch) + 63) // 64 * 64
        cdef char *block = <char *>malloc(head + x_bytes + L.n_threads * part_bytes + 64)
        if block == NULL:
            raise MemoryError("the scratch of a prepared net's call")
        cdef char *at = block + (64 - <size_t>block % 64) % 64
        L.row_scratch = <RowScratch *>at
        at += head
        L.x_rows = rows_at(at, xM, x_ld, self.packed.kind)
        with nogil:
            convert_rows(xM, L.nIn, <const float *>L.x, L.nIn, &L.x_rows)
        at += x_bytes
        cdef int part
        for part in range(L.n_threads):
            L.row_scratch[part].rows = rows_at(at + part * part_bytes, L.bS, part_ld,
                                               self.packed.kind)
            L.row_scratch[part].A = NULL
            L.row_scratch[part].converted = -1
        return block

    def packed_state(self):
        """The bytes of the int8 or bfloat16 panels of op(Wx), op(Wh) and Wproj (None without
        one), as packed (with their scales and column sums): what prepare(packed_state=...)
        restores bit for bit."""
        cdef PackedWeights *w
        cdef int i
        state = []
        for i in range(3):
            w = prepared_matrix(&self.packed, i)
            state.append(None if w.P == NULL
                         else (<char *>w.P)[:packed_bytes(w[0], self.dtype.itemsize)])
        return tuple(state)

    def weights(self):
        """(Wx, Wh, Wproj): op(Wx) [nIn, G], op(Wh) [nState, G] (None for a family with no
        recurrent product) and Wproj [nOut, nState] (None without one) unpacked from the panels of the net's dtype: the weights the net
        multiplies, as new C-ordered arrays."""
        return (_unpack(self, &self.packed.wx),
                None if self.packed.wh.P == NULL else _unpack(self, &self.packed.wh),
                None if self.packed.wproj.P == NULL else _unpack(self, &self.packed.wproj))


def run_calls(calls, int threads_each):
    """Prepared nets' calls at once, each on threads_each threads: call k on group k of the
    parts (include/cells/claims.h, cells_groups), the independent directions of a
    bidirectional layer, say. `calls`: (PreparedWeights, (sL, bS, x, hI, cI, h, hL, cL,
    seq_len)) pairs, run()'s arguments but n_threads, every net of one dtype. Each call's
    results are run()'s, bit for bit (a prepared net's sums do not depend on its threads)."""
    cdef Py_ssize_t n = len(calls), k, started = 0
    cdef PreparedWeights net
    cdef Grouped G
    if n * threads_each > CELLS_MAX_THREADS or threads_each < 1:
        raise ValueError(f"internal: {n} calls of {threads_each} threads")
    if len({c[0].dtype for c in calls}) > 1:
        raise ValueError("internal: calls of nets of different dtypes")
    cdef NetCall *call = <NetCall *>calloc(max(n, 1), sizeof(NetCall))
    G.loops = <Loop **>calloc(max(n, 1), sizeof(Loop *))
    cdef bint single = n > 0 and calls[0][0].dtype == np.float32
    G.run = group_forward_float if single else group_forward_double
    try:
        if call == NULL or G.loops == NULL:
            raise MemoryError("the calls of prepared nets")
        for k in range(n):
            net = calls[k][0]
            sL, bS, x, hI, cI, h, hL, cL, seq_len = calls[k][1]
            net.start(&call[k], sL, bS, x, hI, cI, h, hL, cL, seq_len, threads_each)
            started += 1
            G.loops[k] = &call[k].L
        if cells_groups_init(&G.groups, n, threads_each) != 0:
            raise MemoryError("the groups of prepared nets' calls")
        with nogil:
            cells_run_parts(n * threads_each, run_grouped, &G)
        cells_groups_destroy(&G.groups)
    finally:
        for k in range(started):
            end_call(&call[k])
        free(call)
        free(G.loops)


cdef _unpack(PreparedWeights net, const PackedWeights *w):
    """The matrix [K, blocks·n] whose block k is op(B_k) [K, n], from w's panels."""
    cdef Py_ssize_t width = CELLS_PANEL_WIDTH_F if net.dtype == np.float32 else CELLS_PANEL_WIDTH_D
    cdef Py_ssize_t panels = (w.n + width - 1) // width
    cdef Py_ssize_t itemsize = net.dtype.itemsize
    if w.blocks * w.K * w.n == 0:
        return np.zeros((w.K, w.blocks * w.n), net.dtype)
    buf = np.frombuffer((<char *>w.P)[:w.blocks * w.length * itemsize], net.dtype)
    # panel p of block k holds columns [p·width, (p+1)·width) of op(B_k), k-major
    blocks = buf.reshape(w.blocks, panels, w.K, width).transpose(2, 0, 1, 3)
    return np.ascontiguousarray(blocks.reshape(w.K, w.blocks, panels * width)[:, :, :w.n]
                                .reshape(w.K, w.blocks * w.n))


# prepare's `weights`: the panels of each kind; the most inputs an int8 product sums exactly.
WEIGHT_KINDS = {None: NATIVE_PANELS, "int8": INT8_PANELS, "bfloat16": BF16_PANELS}
INT8_K_MAX = CELLS_LOWP_Q8_K_MAX


def prepare(str family, Py_ssize_t nIn, Py_ssize_t nOut, *, dtype, Wx=None, Wh=None, W=None,
            bint weights_transposed=False, b=None, P=None, Wproj=None, Py_ssize_t nProj=0,
            double clip=INFINITY, int activation=0, lstm_acts=LSTM_ACTIVATIONS, weights=None,
            packed_state=None, quantized=None, zoneout=None):
    """The PreparedWeights of `family` (a key of cells._family_table.FAMILIES) for the weights
    and options that forward() takes (checked as it checks them): packed once, into panels of
    the dtype (weights None) or int8 or bfloat16 panels (weights "int8", "bfloat16": float32
    weights only), with copies of b and P, so that later changes to the caller's arrays do not
    reach the net. packed_state: the panels' bytes from packed_state() of a net prepared from
    the same options, copied over the ones packed from the weights given. quantized (weights
    "int8", Wx and Wh C-ordered, not transposed): (qx, sx, qh, sh), int8 weights already
    quantized, op(Wx)'s qx [nIn, G] and op(Wh)'s qh [nState, G] (C-contiguous int8 in
    [-127, 127]) with their column scales sx, sh [G] (float32), packed over the panels of Wx and Wh
    (whose values are not used): see _pack_quantized. zoneout: None, or a probability p: every
    call's h = p·hPrev + (1 - p)·hNew (haste's eval mode)."""
    cdef PreparedWeights net = PreparedWeights.__new__(PreparedWeights)
    cdef Loop *L = &net.problem
    dtype = np.dtype(dtype)
    cdef cells_family_info fam = set_problem(L, family, 0, 0, nIn, nOut, nProj, None, True, 1,
                                             dtype, Wx, Wh, W, weights_transposed, P, Wproj,
                                             clip, activation, lstm_acts)
    net.dtype, net.nIn, net.nOut, net.nState, net.G = dtype, nIn, nOut, L.nState, L.G
    net.b = None if b is None else np.array(b, dtype, order="C")
    net.P = None if P is None else np.array(P, dtype, order="C")
    L.b = data(dtype, "b", net.b, L.G)
    L.P = data(dtype, "P", net.P, fam.param_blocks * nOut)
    net.zone = None if zoneout is None else np.full(1, 1 - zoneout, dtype)
    set_zoneout(L, dtype, net.zone, Wproj is not None)
    L.unit_align = CELLS_PANEL_WIDTH_F if dtype == np.float32 else CELLS_PANEL_WIDTH_D
    L.prepared = &net.packed
    net.packed.kind = WEIGHT_KINDS[weights]
    net.weights_kind = dtype.name if weights is None else weights
    cdef bint packed
    cdef bint single = dtype == np.float32
    with nogil:
        cells_gate_enter()  # a fork waits for the packing's allocations
        packed = pack_prepared(L, <float>0) if single else pack_prepared(L, <double>0)
        cells_gate_leave()
    # Only the packed copies and the net's own b and P are read from here on.
    L.Wx = L.Wh = L.Wproj = NULL
    if not packed:
        raise MemoryError(f"packing the weights of a {family} net (nIn={nIn}, nOut={nOut})")
    if quantized is not None:
        _pack_quantized(net, quantized, weights_transposed)
    cdef PackedWeights *matrix
    cdef const char *saved
    cdef int i
    net.nbytes = (0 if net.b is None else net.b.nbytes) + (0 if net.P is None else net.P.nbytes)
    net.step_nbytes = 0
    for i in range(3):
        matrix = prepared_matrix(&net.packed, i)
        if matrix.P != NULL:
            net.nbytes += packed_bytes(matrix[0], dtype.itemsize)
            if i > 0:  # op(Wh), Wproj
                net.step_nbytes += packed_bytes(matrix[0], dtype.itemsize)
        if packed_state is None:
            continue
        state = packed_state[i]
        if (state is None) != (matrix.P == NULL) or (
                state is not None and len(state) != packed_bytes(matrix[0], dtype.itemsize)):
            raise ValueError("packed_state: not the panels of a net of these options")
        if state is not None:
            saved = state
            memcpy(matrix.P, saved, len(state))
    return net


cdef _pack_quantized(PreparedWeights net, quantized, bint transposed):
    """Pack the int8 weights quantized = (qx, sx, qh, sh) over the int8 panels of op(Wx) and
    op(Wh) of `net` (lowp.h's cells_lowp_q8_pack_quantized): block k of op(Wx) is the columns
    [k·nOut, (k+1)·nOut) of qx [nIn, G] with those of sx [G] as its scales, and so for op(Wh)
    and qh [nState, G], sh [G]. The same panels as packing float32 weights whose q and s_w
    these are."""
    if net.packed.kind != INT8_PANELS or transposed:
        raise ValueError("quantized: int8 weights are packed into the int8 panels of a net "
                         "prepared with weights='int8' from C-ordered Wx and Wh")
    if not (isinstance(quantized, tuple) and len(quantized) == 4):
        raise TypeError("quantized: expected a tuple (qx, sx, qh, sh)")
    cdef PackedWeights *w
    cdef const int8_t *qd
    cdef const float *sd
    cdef Py_ssize_t i, k, G
    for i, names in enumerate((("qx", "sx"), ("qh", "sh"))):
        w = prepared_matrix(&net.packed, i)
        G = w.blocks * w.n
        q, scales = quantized[2 * i], quantized[2 * i + 1]
        if not (type(q) is np.ndarray and q.dtype == np.int8 and q.flags.c_contiguous
                and q.shape == (w.K, G)):
            raise ValueError(f"quantized: {names[0]} must be a C-contiguous int8 array of "
                             f"shape {(w.K, G)}")
        if not (type(scales) is np.ndarray and scales.dtype == np.float32
                and scales.flags.c_contiguous and scales.shape == (G,)):
            raise ValueError(f"quantized: {names[1]} must be a C-contiguous float32 array of "
                             f"shape {(G,)}")
        if q.size and q.min() < -CELLS_LOWP_Q8_QMAX:
            raise ValueError(f"quantized: {names[0]} holds -128; int8 weights lie in "
                             f"[-127, 127]")
        qd = <const int8_t *>cnp.PyArray_DATA(<cnp.ndarray>q)
        sd = <const float *>cnp.PyArray_DATA(<cnp.ndarray>scales)
        with nogil:
            for k in range(w.blocks):
                cells_lowp_q8_pack_quantized(w.K, w.n, qd + k * w.n, G, 0, sd + k * w.n,
                                             <int8_t *>w.P + k * w.length, w.s_w + k * w.n,
                                             w.colsum + k * w.n)


cdef Rows rows_at(char *at, Py_ssize_t M, Py_ssize_t row_bytes, int kind) noexcept nogil:
    """Rows of `kind` in the memory at `at`: M rows of row_bytes, then each row's s_a and zp."""
    cdef Rows rows
    rows.kind, rows.data, rows.ld = kind, at, 0
    rows.s_a = <float *>(at + M * row_bytes)
    rows.zp = <int32_t *>(rows.s_a + M)
    return rows


cdef PackedWeights *prepared_matrix(Prepared *packed, int i):
    """Matrix i of a prepared net's weights: op(Wx), op(Wh), Wproj."""
    return &packed.wx if i == 0 else &packed.wh if i == 1 else &packed.wproj


cdef size_t packed_bytes(PackedWeights w, Py_ssize_t itemsize):
    """The bytes of w's packed copy (panels of `itemsize`-byte elements, or int8 panels with
    their scales and column sums, or bfloat16 panels)."""
    if w.kind == INT8_PANELS:
        return (w.blocks * w.length + 63) // 64 * 64 + w.blocks * w.n0 * 8
    if w.kind == BF16_PANELS:
        return (w.blocks * w.length * 2 + 63) // 64 * 64
    return w.blocks * w.length * itemsize
