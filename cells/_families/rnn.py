"""The RNN (cells.rnn): its declaration, and its parameters on the time loop's and back.

The loop's "rnn" row takes one bias, bx + bh, and the activation as libnd4j's code.
"""
from cells import _arrays
from cells._families._declaration import (
    LAST_STEP, Argument, Family, TorchOperator, STATE, X,
)

FAMILY = Family(
    name="rnn",
    variants={"tanh": ("rnn", {"activation": "tanh"}),
              "relu": ("rnn", {"activation": "relu"})},
    time_loop="rnnTimeLoop", time_loop_bp="rnnTimeLoopBp",
    arguments=(Argument("x", "input", X), Argument("hI", "state", STATE),
               Argument("Wx", "weight", ("nIn", "nOut")),
               Argument("Wh", "weight", ("nOut", "nOut")),
               Argument("b", "weight", ("2", "nOut"), rows="rows bx, bh")),
    outputs=("h",), final_states=((LAST_STEP, "dLdhLast"),),
    grads=("dLdx", "dLdhI", "dLdWx", "dLdWh", "dLdb"),
    workspace=("h", "gates"), consumed=("gates",),
    torch=TorchOperator(options={}, extra_params=(), extra_options=(("activation", "str"),),
                        units="hI",
                        workspace_fields=lambda call: {"activation": call["activation"]},
                        optional_workspace={}))

# The RNN's activation codes in the kernels (include/cells/activations.h: libnd4j's).
ACTIVATIONS = {"tanh": 0, "relu": 1}


def loop_bias(b):
    """bx + bh: b is [nOut] (bx alone) or [2, nOut] (rows bx, bh), a plain sum either way."""
    return b if b.ndim == 1 else b[0] + b[1]


def bias_grad(xp, b, dLdb):
    """dL/db in b's layout: both rows of a [2, nOut] b get the whole gradient (summands)."""
    return dLdb if b.ndim == 1 else xp.stack([dLdb, dLdb])


def forward(backend, dims, x, hI, Wx, Wh, b, activation, keep, n_threads, seq_len=None, fwd=True):
    """Run the RNN forward (activation "tanh" or "relu"); return (h [sL, bS, nOut], hL
    [bS, nOut], gates [sL, bS, nOut]): gates, every step's act(z), with keep, else None."""
    h, hL, _, gates, _, _, _ = backend.forward(
        "rnn", dims, x, hI, keep, n_threads, seq_len, fwd, Wx=Wx, Wh=Wh, b=loop_bias(b),
        activation=ACTIVATIONS[activation])
    return h, hL, gates


def backward(backend, dims, x, hI, Wx, Wh, b, activation, saved, dLdh, dLdhLast, n_threads,
             seq_len=None, fwd=True, input_grad=True):
    """Run the RNN backward on `saved` = (h, gates) from forward with keep (None: run it
    first); dLdh [sL, bS, nOut] and dLdhLast [bS, nOut] may each be None. Return (dLdx
    [sL, bS, nIn], dLdhI [bS, nOut], dLdWx [nIn, nOut], dLdWh [nOut, nOut], dLdb in b's
    layout); gates are consumed."""
    if saved is None:
        h, _, gates = forward(backend, dims, x, hI, Wx, Wh, b, activation, True, n_threads, seq_len,
                              fwd)
    else:
        h, gates = saved
    dLdx, dLdhI, _, dLdWx, dLdWh, dLdb, _, _ = backend.backward(
        "rnn", dims, x, hI, (h, gates, None, None, None), n_threads, seq_len, fwd,
        dLdh=dLdh, dLdhL=dLdhLast, Wx=Wx, Wh=Wh, activation=ACTIVATIONS[activation],
        input_grad=input_grad)
    return dLdx, dLdhI, dLdWx, dLdWh, bias_grad(_arrays.array_module(x), b, dLdb)
