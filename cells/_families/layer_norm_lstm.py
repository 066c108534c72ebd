"""haste's LayerNorm LSTM (cells.layer_norm_lstm): its declaration, and its parameters as the
time loop's P and back (the loop itself: cells/_families/_haste.py)."""
from cells import _arrays
from cells._families._declaration import Argument, Family, state_shape, x_shape

GATES = 4

FAMILY = Family(
    name="layer_norm_lstm",
    variants={"-": ("layer_norm_lstm", {})},
    time_loop="layerNormLstmTimeLoop", time_loop_bp="layerNormLstmTimeLoopBp",
    arguments=(Argument("x", "input", x_shape),
               Argument("Wx", "weight", lambda d: (d.nIn, 4 * d.nOut)),
               Argument("Wh", "weight", lambda d: (d.nOut, 4 * d.nOut)),
               Argument("b", "weight", lambda d: (4 * d.nOut,)),
               Argument("gamma", "weight", lambda d: (2, 4 * d.nOut)),
               Argument("gamma_h", "weight", lambda d: (d.nOut,)),
               Argument("beta_h", "weight", lambda d: (d.nOut,)),
               Argument("hI", "state", state_shape), Argument("cI", "state", state_shape)),
    outputs=("h", "hL", "cL"), final_states=(("hL", "dLdhL"), ("cL", "dLdcL")),
    grads=("dLdx", "dLdWx", "dLdWh", "dLdb", "dLdgamma", "dLdgamma_h", "dLdbeta_h", "dLdhI",
           "dLdcI"),
    workspace=("h", "c", "gates", "aux"), consumed=("gates", "aux"), torch=None)


def loop_params(b, gamma, gamma_h, beta_h):
    """The time loop's P [14nOut] of the parameters (include/cells/layer_norm_impl.h): b,
    gamma's rows, gamma_h, beta_h."""
    return _arrays.array_module(b).concatenate([b, gamma.ravel(), gamma_h, beta_h])


def param_grads(dLdP, nOut):
    """(dLdb, dLdgamma, dLdgamma_h, dLdbeta_h), new arrays, from the time loop's dL/dP."""
    G = GATES * nOut
    dLdb, dLdgamma, dLdgamma_h, dLdbeta_h = (a.copy() for a in
                                             _arrays.array_module(dLdP).split(
                                                 dLdP, [G, 3 * G, 3 * G + nOut]))
    return dLdb, dLdgamma.reshape(2, G), dLdgamma_h, dLdbeta_h
