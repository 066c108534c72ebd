# The cell families of the time loop (cells/_time_loop.pyx): what each one is, and its step.
#
# The time loop owns everything that is the same for every family: sequence lengths, direction,
# padded steps, initial and final states, step buffers, which thread owns which units, the input
# projection and its bias, the recurrent products, the products over all steps after the
# backward loop, and the workspace. A family supplies only what is its own:
#   - its FamilyInfo: how many gate blocks, whether it carries a cell state c, which gate blocks
#     multiply hPrev and which its own per-step value aux, and where the backward keeps what;
#   - its step: a row function of one forward step and one of one backward step (each for one
#     batch row and a thread's units), and a second-phase pair when some blocks multiply aux.
# Adding a family means a header under include/cells/, a cells/_<family>_step.pxd with its steps,
# and one line in each table below.
#
# The steps all have one signature (pointers offset to the row and the thread's first unit j0;
# block k of a [G] row starts at k·nOut; n = the thread's units; NULL: not given):
#
#   forward(L, n, zx, zh, hPrev, cPrev, P, g, aux, hNext, cNext)
#     zx     [G]  x·op(Wx) + b at the row's time index (may be g: g's element j is written only
#                 after zx's is read)
#     zh     [G]  the step's recurrent products: blocks k < h_blocks hold hPrev·op(Wh)_k; in the
#                 second phase the other blocks hold aux·op(Wh)_k
#     hPrev, cPrev  the state entering the step (cPrev NULL without a cell state)
#     P      [param_blocks, nOut] or NULL
#     g      [G]  out: the activated gates
#     aux    [nOut]  out: the family's own value (when FamilyInfo.aux)
#     hNext, cNext  out: the state leaving the step (written by the last phase)
#
#   backward(L, n, dLdh, dLdg, g, aux, daux, hPrev, cPrev, c, P, d, dh, dc, dP)
#     dLdh   [nOut] or NULL: the gradient arriving at the step's output
#     dLdg   [G] or NULL: the gradient arriving at its gates (the GRU block cell's outputs)
#     g      [G]  in: the forward's gates; out, by the last phase: dL/dz, the gradient of the
#                 input-side pre-activation (x·op(Wx) + b)
#     aux    [nOut]  in: the forward's aux, when kept; out: what FamilyInfo says
#     daux   [nOut]  in the second phase: dL/daux = d[blocks >= h_blocks]·op(Wh)ᵀ
#     hPrev, cPrev, c  the state entering the step, and the step's own cell state
#     d      [G]  out: the recurrent-side gradient, dL/d(the recurrent pre-activation); the loop
#                 then adds d[blocks < h_blocks]·op(Wh)ᵀ to dh
#     dh     [nOut]  in: dL/dh carried from the later steps; out: its part that does not go
#                 through op(Wh) (0 for most families)
#     dc     [nOut]  in: dL/dc from the later steps; out: dL/dcPrev (families with c)
#     dP     like P or NULL: accumulates dL/dP
#
# A reduction across a row's units inside a step (LayerNorm cells) would be a step of this kind
# whose thread owns every unit of its rows: a FamilyInfo flag making the loop split rows instead
# of units between threads, the step signature unchanged.
from cells._blas cimport real
from cells._gru_step cimport (
    lbr_backward, lbr_forward, rb_backward, rb_backward_b, rb_forward, rb_forward_b,
)
from cells._lltm_step cimport lltm_backward, lltm_forward
from cells._loop cimport Loop
from cells._lstm_step cimport lstm_backward, lstm_forward
from cells._rnn_step cimport rnn_backward, rnn_forward


cdef enum Family:
    GRU_RESET_BEFORE
    GRU_LINEAR_BEFORE_RESET
    LSTM
    LLTM
    RNN


cdef struct FamilyInfo:
    Py_ssize_t gates            # gate blocks of nOut columns: G = gates·nOut
    bint cell_state             # carries c as well as h
    Py_ssize_t h_blocks         # blocks [0, h_blocks) multiply hPrev; the others multiply aux,
                                # in a second phase after a barrier
    bint aux                    # has a per-row value aux [nOut] of its own
    bint aux_kept               # the forward keeps aux of every step (else it is scratch, and
                                # the backward recomputes it)
    Py_ssize_t aux_grad_block   # -1, or the block whose recurrent-side gradient the backward
                                # keeps in aux (the gates keep the input side's)
    Py_ssize_t param_blocks     # blocks of nOut in P


cdef inline FamilyInfo family_info(int family) noexcept nogil:
    #                                   gates  c  h_blocks aux kept grad_block params
    if family == GRU_RESET_BEFORE:
        return FamilyInfo(3, False, 2, True, False, -1, 0)
    if family == GRU_LINEAR_BEFORE_RESET:
        return FamilyInfo(3, False, 3, True, True, 2, 1)
    if family == LSTM:
        return FamilyInfo(4, True, 4, False, False, -1, 3)
    if family == LLTM:
        return FamilyInfo(3, True, 3, False, False, -1, 0)
    return FamilyInfo(1, False, 1, False, False, -1, 0)        # RNN


cdef inline void forward_step(const Loop *L, bint second_phase, Py_ssize_t n, const real *zx,
                              real *zh, const real *hPrev, const real *cPrev, const real *P,
                              real *g, real *aux, real *hNext, real *cNext) noexcept nogil:
    if L.family == GRU_RESET_BEFORE:
        if second_phase:
            rb_forward_b(L, n, zx, zh, hPrev, cPrev, P, g, aux, hNext, cNext)
        else:
            rb_forward(L, n, zx, zh, hPrev, cPrev, P, g, aux, hNext, cNext)
    elif L.family == GRU_LINEAR_BEFORE_RESET:
        lbr_forward(L, n, zx, zh, hPrev, cPrev, P, g, aux, hNext, cNext)
    elif L.family == LSTM:
        lstm_forward(L, n, zx, zh, hPrev, cPrev, P, g, aux, hNext, cNext)
    elif L.family == LLTM:
        lltm_forward(L, n, zx, zh, hPrev, cPrev, P, g, aux, hNext, cNext)
    else:
        rnn_forward(L, n, zx, zh, hPrev, cPrev, P, g, aux, hNext, cNext)


cdef inline void backward_step(const Loop *L, bint second_phase, Py_ssize_t n,
                               const real *dLdh, const real *dLdg, real *g, real *aux,
                               const real *daux, const real *hPrev, const real *cPrev,
                               const real *c, const real *P, real *d, real *dh, real *dc,
                               real *dP) noexcept nogil:
    if L.family == GRU_RESET_BEFORE:
        if second_phase:
            rb_backward_b(L, n, dLdh, dLdg, g, aux, daux, hPrev, cPrev, c, P, d, dh, dc, dP)
        else:
            rb_backward(L, n, dLdh, dLdg, g, aux, daux, hPrev, cPrev, c, P, d, dh, dc, dP)
    elif L.family == GRU_LINEAR_BEFORE_RESET:
        lbr_backward(L, n, dLdh, dLdg, g, aux, daux, hPrev, cPrev, c, P, d, dh, dc, dP)
    elif L.family == LSTM:
        lstm_backward(L, n, dLdh, dLdg, g, aux, daux, hPrev, cPrev, c, P, d, dh, dc, dP)
    elif L.family == LLTM:
        lltm_backward(L, n, dLdh, dLdg, g, aux, daux, hPrev, cPrev, c, P, d, dh, dc, dP)
    else:
        rnn_backward(L, n, dLdh, dLdg, g, aux, daux, hPrev, cPrev, c, P, d, dh, dc, dP)
