"""The LSTM (cells.lstm): its declaration, and its parameters on the time loop's and back.

The loop's "lstm" row takes the face's Wr as its Wh, the peepholes Wp as its P, the cell clip
as a bound (+inf: none) and the activations as (code, alpha, beta) triples.
"""
from cells import _arrays
from cells._family_table import LSTM_ACTIVATIONS
from cells._families._declaration import (
    Argument, Family, TorchOperator, initial_state, kernel_clip, STATE, X, zoned,
)

FAMILY = Family(
    name="lstm",
    variants={"-": ("lstm", {})},
    time_loop="lstmLayerTimeLoop", time_loop_bp="lstmLayerTimeLoopBp",
    arguments=(Argument("x", "input", X),
               Argument("Wx", "weight", ("nIn", "4*nOut")),
               Argument("Wr", "weight", ("nOut", "4*nOut")),
               Argument("b", "weight", ("4*nOut",)),
               Argument("hI", "state", STATE), Argument("cI", "state", STATE)),
    outputs=("h", "hL", "cL"), final_states=(("hL", "dLdhL"), ("cL", "dLdcL")),
    grads=("dLdx", "dLdWx", "dLdWr", "dLdb", "dLdhI", "dLdcI"),
    workspace=("h", "c", "gates", "m"), consumed=("gates",),
    torch=TorchOperator(options={}, extra_params=("Wproj",), extra_options=(), units="cI",
                        workspace_fields=lambda call: {"cell_clip": 0.0, "peepholes": False,
                                                       "projected": call["Wproj"] is not None},
                        optional_workspace={"m": "Wproj"}))


def forward(backend, dims, x, Wx, Wr, b, hI, cI, Wp, Wproj, clip, lengths, fwd, keep, n_threads,
            acts=LSTM_ACTIVATIONS, zoneout=None, c_steps=False):
    """Run the LSTM forward (b, hI, cI, Wp, Wproj may be None; clip is cell_clip, 0: none;
    acts the (code, alpha, beta) of the gate, cell and output activations); nState = nOut,
    or nProj with Wproj [nOut, nProj]. Return (h [sL, bS, nState], hL [bS, nState], cL
    [bS, nOut], c [sL, bS, nOut], gates [sL, bS, 4nOut], m [sL, bS, nOut]): with keep, c,
    gates and (with Wproj) m are every step's; without, all three are None (c is every
    step's with c_steps). zoneout: None, or zoneout's share of the new state, [1] or
    [sL, bS, nOut] (the time loop's zone)."""
    xp = _arrays.array_module(x)
    _, bS, _, nOut = dims
    nState = nOut if Wproj is None else Wproj.shape[1]
    h, hL, cL, gates, c, _, m = backend.forward(
        "lstm", dims, x, initial_state(xp, hI, bS, nState, x.dtype), keep, n_threads,
        lengths, fwd, cI=initial_state(xp, cI, bS, nOut, x.dtype), Wx=Wx, Wh=Wr, b=b, P=Wp,
        Wproj=Wproj, clip=kernel_clip(clip), lstm_acts=acts, c_steps=c_steps,
        **zoned(zoneout))
    return h, hL, cL, c, gates, m


def backward(backend, dims, x, Wx, Wr, b, hI, cI, Wp, Wproj, clip, lengths, fwd, saved, dLdh, dLdhL,
             dLdcL, n_threads, acts=LSTM_ACTIVATIONS, input_grad=True, zoneout=None, dLdc=None):
    """Run the LSTM backward on `saved` = (h, c, gates, m) from forward with keep and the same
    acts (None: run it first); dLdh [sL, bS, nState], dLdhL [bS, nState] and dLdcL [bS, nOut]
    may each be None. Return (dLdx [sL, bS, nIn], dLdWx [nIn, 4nOut], dLdWr [nState, 4nOut],
    dLdb [4nOut] (None when b is None), dLdhI [bS, nState], dLdcI [bS, nOut], dLdWp [3nOut]
    (None when Wp is None), dLdWproj [nOut, nProj] (None when Wproj is None)); gates are
    consumed. dLdc [sL, bS, nOut] or None: the gradient arriving at every step's c; zoneout as
    forward's."""
    xp = _arrays.array_module(x)
    _, bS, _, nOut = dims
    nState = nOut if Wproj is None else Wproj.shape[1]
    if saved is None:
        h, _, _, c, gates, m = forward(backend, dims, x, Wx, Wr, b, hI, cI, Wp, Wproj, clip,
                                       lengths, fwd, True, n_threads, acts, zoneout)
    else:
        h, c, gates, m = saved
    dLdx, dLdhI, dLdcI, dLdWx, dLdWr, dLdb, dLdWp, dLdWproj = backend.backward(
        "lstm", dims, x, initial_state(xp, hI, bS, nState, x.dtype), (h, gates, c, None, m),
        n_threads, lengths, fwd, cI=initial_state(xp, cI, bS, nOut, x.dtype), dLdh=dLdh,
        dLdhL=dLdhL, dLdcL=dLdcL, Wx=Wx, Wh=Wr, P=Wp, Wproj=Wproj, clip=kernel_clip(clip),
        lstm_acts=acts, input_grad=input_grad, dLdc=dLdc, **zoned(zoneout))
    return dLdx, dLdWx, dLdWr, None if b is None else dLdb, dLdhI, dLdcI, dLdWp, dLdWproj
