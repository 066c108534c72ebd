"""The GRU (cells.gru): its declaration, and its parameters on the time loop's and back.

The loop's GRU rows are "gru_reset_before" and "gru_linear_before_reset"; its b is the sum of
every bias that is a plain sum in the pre-activations, and its P the recurrent candidate bias
that sits inside r∘(hPrev·Wh_c + bh_c) (linear_before_reset only).
"""
from cells import _arrays
from cells._families._declaration import (
    LAST_STEP, Argument, Family, TorchOperator, no_fields, STATE, X, zoned,
)

FAMILY = Family(
    name="gru",
    variants={"reset_before": ("gru_reset_before", {"linear_before_reset": False}),
              "linear_before_reset": ("gru_linear_before_reset",
                                      {"linear_before_reset": True})},
    time_loop="gruTimeLoop", time_loop_bp="gruTimeLoopBp",
    arguments=(Argument("x", "input", X), Argument("hI", "state", STATE),
               Argument("Wx", "weight", ("nIn", "3*nOut")),
               Argument("Wh", "weight", ("nOut", "3*nOut")),
               Argument("b", "weight", ("2", "3*nOut"), rows="rows bx, bh")),
    outputs=("h",), final_states=((LAST_STEP, "dLdhLast"),),
    grads=("dLdx", "dLdhI", "dLdWx", "dLdWh", "dLdb"),
    workspace=("h", "gates", "hc"), consumed=("gates", "hc"),
    torch=TorchOperator(options={"linear_before_reset": True}, extra_params=(),
                        extra_options=(), units="hI", workspace_fields=no_fields,
                        optional_workspace={}))


def loop_row(lbr):
    """The time loop's GRU row for linear_before_reset `lbr`."""
    return "gru_linear_before_reset" if lbr else "gru_reset_before"


def split_bias(xp, b, nOut, lbr):
    """(bx, bhc): bx [3nOut] holds every bias that is a plain sum in the pre-activations
    (bh_r, bh_u always, bh_c too when reset-before); bhc [nOut] is the recurrent candidate bias
    that sits inside r∘(hPrev·Wh_c + bh_c) (linear_before_reset only, else None)."""
    if b.ndim == 1:
        return b, (xp.zeros(nOut, b.dtype) if lbr else None)
    if not lbr:
        return b[0] + b[1], None
    bx = b[0].copy()
    bx[:2 * nOut] += b[1, :2 * nOut]
    return bx, b[1, 2 * nOut:]


def bias_grad(xp, b, dLdbx, dLdbhc, lbr):
    """dL/db in b's layout, from dLdbx = Σ dz and (lbr) dLdbhc = Σ dL/dhc. The recurrent biases
    bh_r, bh_u (and bh_c when reset-before) are plain sums with bx, so they share its gradient."""
    if b.ndim == 1:
        return dLdbx
    dLdb = xp.stack([dLdbx, dLdbx])
    if lbr:
        dLdb[1, 2 * dLdbhc.shape[0]:] = dLdbhc
    return dLdb


def forward(backend, dims, x, hI, Wx, Wh, b, lbr, keep, n_threads, seq_len=None, fwd=True,
            zoneout=None):
    """Run the GRU forward (linear_before_reset `lbr`); return (h [sL, bS, nOut], gates
    [sL, bS, 3nOut], hc [sL, bS, nOut]): with keep, gates and hc are every step's (hc None
    without lbr); without, both are None. h is 0 at padded steps. zoneout: None, or
    zoneout's share of the new state, [1] or [sL, bS, nOut] (the time loop's zone)."""
    bx, bhc = split_bias(_arrays.array_module(x), b, dims[3], lbr)
    h, _, _, gates, _, hc, _ = backend.forward(
        loop_row(lbr), dims, x, hI, keep, n_threads, seq_len, fwd, Wx=Wx, Wh=Wh, b=bx, P=bhc,
        **zoned(zoneout))
    return h, gates, hc


def backward(backend, dims, x, hI, Wx, Wh, b, lbr, saved, dLdh, dLdhLast, dLdgates, n_threads,
             seq_len=None, fwd=True, input_grad=True, zoneout=None):
    """Run the GRU backward on `saved` = (h, gates, hc) from forward with keep (None: run it
    first); dLdh [sL, bS, nOut], dLdhLast [bS, nOut] and dLdgates [sL, bS, 3nOut] (the
    gradients arriving at the activated gates) may each be None. Return (dLdx [sL, bS, nIn],
    dLdhI [bS, nOut], dLdWx [nIn, 3nOut], dLdWh [nOut, 3nOut], dLdb in b's layout); gates and
    hc are consumed."""
    xp = _arrays.array_module(x)
    if saved is None:
        saved = forward(backend, dims, x, hI, Wx, Wh, b, lbr, True, n_threads, seq_len, fwd,
                        zoneout)
    h, gates, hc = saved
    _, bhc = split_bias(xp, b, dims[3], lbr)
    dLdx, dLdhI, _, dLdWx, dLdWh, dLdbx, dLdbhc, _ = backend.backward(
        loop_row(lbr), dims, x, hI, (h, gates, None, hc, None), n_threads, seq_len, fwd,
        dLdh=dLdh, dLdhL=dLdhLast, dLdgates=dLdgates, Wx=Wx, Wh=Wh, P=bhc,
        input_grad=input_grad, **zoned(zoneout))
    return dLdx, dLdhI, dLdWx, dLdWh, bias_grad(xp, b, dLdbx, dLdbhc, lbr)
