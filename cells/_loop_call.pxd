# One call of the time loop (cells/_time_loop.pyx): its sizes, options and named buffers.
#
# Notation (libnd4j's): sL steps, bS batch rows, nIn inputs, nOut units; a family has `gates`
# gate blocks of nOut columns each, G = gates·nOut (include/cells/families.h). The state h has
# nState columns: nOut, or nProj when the output is projected (h = m·Wproj, PyTorch's LSTM
# proj_size; a family whose table row `projects`). Arrays are
# C-contiguous, of the call's dtype (float or double: the fields are void * because a Cython struct cannot be
# fused; the time loop casts them once). NULL marks an optional array that is not given.
#
# Indexing. Row b runs the loop steps t < len_b = seq_len[b] (every step without seq_len), at the
# time index tau = t going forward, len_b-1-t in reverse (ONNX direction="reverse"): its valid
# prefix runs backwards and each output stays at its own time index. Arrays [sL, bS, ...] are
# tau-indexed, and 0 at a row's padded time indices tau >= len_b; the per-step scratch is in loop
# order ([2, ...]: double-buffered by the parity of t, so that no thread overwrites what another
# still multiplies).
from libc.stdint cimport int64_t

from cells._family_table cimport cells_step_options
from cells._panels cimport PackedWeights, Rows, RowScratch
from cells._team cimport cells_claims


cdef struct Prepared:
    # A prepared net's weights (cells.PreparedNet): op(Wx), op(Wh) and Wproj, each packed whole
    # once, gate block by gate block, multiplied in fixed order (gemm_panels_fixed, or lowp.h's
    # products on int8 or bfloat16 panels); the threads of a call take views of whole panels
    # of them (panel_columns).
    PackedWeights wx, wh, wproj   # wproj.P is NULL without Wproj
    int kind                      # NATIVE_PANELS, INT8_PANELS or BF16_PANELS (_panels.pxd)


cdef struct Loop:
    int family                  # an enum cells_family (include/cells/families.h)
    Py_ssize_t sL, bS, nIn, nOut, G
    Py_ssize_t nState           # the columns of h: nOut, or nProj with Wproj
    const int64_t *seq_len      # [bS] or NULL: every row runs all sL steps
    bint forward                # False: each row's valid steps run backwards in time
    bint keep                   # forward: keep every step's gates, c and aux for the backward
    int n_threads               # the parts (threads) to run on; each claims a block of the
    bint rows_split             # units first (its home), or, where this is set, a block of the
                                # batch rows and every unit (splits_rows)
    bint row_steps              # where the units split for a family whose step reduces across
                                # a row (row_reduction): the steps still run on blocks of whole
                                # rows, in a phase of their own after the products
    Py_ssize_t r0, r1           # the batch rows the parts run, [r0, r1): every row, or a
                                # row group's
    int row_groups              # the groups of the rows a pass's steps run in, each on a
                                # group of the parts (run_pass); 1: none
    Py_ssize_t unit_align       # a part's block of the units starts at a multiple of this
    const Prepared *prepared    # a prepared net's weights, or NULL: the call packs its own
    cells_claims *claims        # the tasks the call's parts claim, `tasks` per phase
    long tasks                  # (a block of the rows, or of the units)
    PackedWeights *shares       # [tasks, 3] or NULL: where the units split and the call packs
                                # its weights, each task's: in the forward its columns of
                                # op(Wx), op(Wh) and Wproj; in the backward its rows of op(Wh)ᵀ
                                # (the blocks that multiply hPrev, those that multiply aux) and
                                # of Wprojᵀ
    RowScratch *row_scratch     # [n_threads] or NULL: on int8 or bfloat16 weights, each
                                # part's room for the rows its products convert
    Rows x_rows                 # on int8 or bfloat16 weights: x [sL·bS, nIn] converted once
                                # for the input projections (x_rows.data NULL otherwise)

    # The weights: op(Wx) [nIn, G] and op(Wh) [nState, G], op(W) = W or, with
    # weights_transposed, Wᵀ (PyTorch's layout: Wx is [G, ldwx] and Wh [G, ldwh]); leading
    # dimensions ldwx and ldwh.
    bint weights_transposed
    Py_ssize_t ldwx, ldwh
    const void *Wx
    const void *Wh
    const void *b               # [G]                or NULL: the input projection's bias
    const void *P               # [blocks, nOut]     or NULL: the family's own parameters
                                #                    (GRU linear-before-reset: bh_c; LSTM: Wp)
    const void *Wproj           # [nOut, nState]     or NULL: the output's projection
    cells_step_options options  # what some family's step reads (clip, activation)

    # Forward and backward
    const void *x               # [sL, bS, nIn]
    const void *hI              # [bS, nState]       the initial state
    const void *cI              # [bS, nOut]         the initial cell state (families with c)
    void *h                     # [sL, bS, nState]   forward: out, every step's output
    void *c                     # [sL, bS, nOut]     forward: out when keep (families with c;
                                #                    may be given without keep)
    void *gates                 # [sL, bS, G]        the activated gates of every step (forward
                                #                    out when keep, else [bS, G] scratch); the
                                #                    backward overwrites them with dL/dz
    void *aux                   # [sL, bS, A]        a family's own value per row and step, A =
                                #                    aux·nOut (GRU: hPrev·Wh_c + bh_c or
                                #                    r∘hPrev; LayerNorm cells: the raw products);
                                #                    in the forward [bS, A] scratch unless kept
    const void *zone            # [sL, bS, nOut], [1] or NULL: zoneout's share of the new
    bint zone_per_step          # state, h = hPrev + zone∘(hNew - hPrev): each element's
                                # (zone_per_step: haste's training mask) or one value for all
                                # (its eval: 1 - p); NULL: no zoneout

    # Forward
    void *gx                    # [gx_steps, bS, G]  scratch: x·op(Wx) + b, projected chunk_steps
                                #                    time steps at a time; `gates` when keep
                                #                    (each step's gates overwrite their own)
    Py_ssize_t chunk_steps      # time steps per input projection (projection_chunk_steps)
    Py_ssize_t gx_steps         # sL (gx holds every time index), or chunk_steps (the chunk's)
    void *gh                    # [bS, G]            scratch: the step's recurrent products
    void *hs                    # [2, bS, nState]    scratch: the state leaving a step
    void *cs                    # [2, bS, nOut]      scratch: the cell state leaving a step
    void *hL                    # [bS, nState]       out or NULL: every row's final state
    void *cL                    # [bS, nOut]         out or NULL: every row's final cell state

    # Forward and backward, with Wproj
    void *m                     # [sL, bS, nOut]     every step's unprojected output (forward:
                                #                    out when keep; NULL without keep)
    void *ms                    # [bS, nOut]         forward scratch: the step's m; backward
                                #                    scratch: the step's dL/dm
    void *dh_step               # [bS, nState]       backward scratch: the step's whole dL/dh
    void *dh_steps              # [sL, bS, nState]   backward scratch: dh_step of every step

    # Backward
    const void *dLdh            # [sL, bS, nState]   or NULL: the gradient arriving at h
    const void *dLdhL           # [bS, nState]       or NULL: ... at the final states
    const void *dLdcL           # [bS, nOut]         or NULL: ... at the final cell states
    const void *dLdgates        # [sL, bS, G]        or NULL: ... at the gates (GRU block cell)
    const void *dLdc            # [sL, bS, nOut]     or NULL: ... at every step's c
    void *d                     # [2, bS, G]         scratch: the step's recurrent-side dL/dz
    void *daux                  # [bS, nOut]         scratch: dL/daux of the step
    void *dzone                 # [bS, nOut]         scratch with zone: the part of the step's
                                #                    dL/dh that zoneout passes to hPrev
    void *dLdx                  # [sL, bS, nIn]      out or NULL (not wanted)
    void *dLdhI                 # [bS, nState]       out; the carried dL/dh during the loop
    void *dLdcI                 # [bS, nOut]         out; the carried dL/dc during the loop
    void *dLdWx                 # like Wx            out (leading dimension ldwx)
    void *dLdWh                 # like Wh            out (leading dimension ldwh)
    void *dLdb                  # [G]                out or NULL: Σ dL/dz
    void *dLdP                  # like P             out or NULL
    void *part_sums             # [n_threads, gates + blocks, nOut] scratch where the sums
                                #                    go by rows (sums_by_rows): each task's
                                #                    Σ dL/db and Σ dL/dP over its rows
    void *dLdWproj              # like Wproj         out (with Wproj)
