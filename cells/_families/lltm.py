"""The LLTM (cells.lltm): its declaration, and its parameters on the time loop's and back.

Its weights W [3S, S + nIn] are in PyTorch's layout (columns h, then x), as the loop's "lltm"
row reads them.
"""
from cells import _arrays
from cells._families._declaration import (
    Argument, Family, TorchOperator, initial_state, no_fields, STATE, X,
)

FAMILY = Family(
    name="lltm",
    variants={"-": ("lltm", {})},
    time_loop="lltmTimeLoop", time_loop_bp="lltmTimeLoopBp",
    arguments=(Argument("x", "input", X),
               Argument("W", "weight", ("3*nOut", "nOut+nIn")),
               Argument("b", "weight", ("3*nOut",)),
               Argument("hI", "state", STATE), Argument("cI", "state", STATE)),
    outputs=("h", "hL", "cL"), final_states=(("hL", "dLdhL"), ("cL", "dLdcL")),
    grads=("dLdx", "dLdW", "dLdb", "dLdhI", "dLdcI"),
    workspace=("h", "gates", "c"), consumed=("gates",),
    torch=TorchOperator(options={}, extra_params=(), extra_options=(), units="hI",
                        workspace_fields=no_fields, optional_workspace={}))


def forward(backend, dims, x, W, b, hI, cI, lens, fwd, keep, n_threads, z=None):
    """Run the LLTM forward; return (h [sL, bS, S], hL, cL [bS, S], gates [sL, bS, 3S],
    c [sL, bS, S]): with keep, gates and c are every step's; without, both are None. z,
    when given, is a [bS, 3S] array that receives the pre-activations of the last step
    (all rows active)."""
    h, hL, cL, gates, c, _, _ = backend.forward("lltm", dims, x, hI, keep, n_threads,
                                                       lens, fwd, cI=cI, z=z, W=W, b=b)
    return h, hL, cL, gates, c


def backward(backend, dims, x, W, hI, cI, fwd, saved, dLdh, dLdhL, dLdcL, n_threads, b=None,
             lens=None, input_grad=True):
    """Run the LLTM backward on `saved` = (h, gates, c) from forward with keep (None: run it
    first, on b and cI); dLdh [sL, bS, S], dLdhL and dLdcL [bS, S] may each be None. Return
    (dLdx [sL, bS, nIn], dLdW [3S, S+nIn], dLdb [3S], dLdhI, dLdcI [bS, S]); gates are
    consumed."""
    if saved is None:
        h, _, _, gates, c = forward(backend, dims, x, W, b, hI, cI, lens, fwd, True, n_threads)
    else:
        h, gates, c = saved
    # The LLTM's backward does not read the initial cell state (c = cPrev + n∘i): the
    # cell's backward (lltm_backward) has none to give.
    _, bS, _, S = dims
    dLdx, dLdhI, dLdcI, dLdW, _, dLdb, _, _ = backend.backward(
        "lltm", dims, x, hI, (h, gates, c, None, None), n_threads, lens, fwd,
        cI=initial_state(_arrays.array_module(x), cI, bS, S, x.dtype), dLdh=dLdh,
        dLdhL=dLdhL, dLdcL=dLdcL, W=W, input_grad=input_grad)
    return dLdx, dLdW, dLdb, dLdhI, dLdcI
