"""haste's LayerNorm LSTM (cells.layer_norm_lstm): its declaration, and its parameters as the
time loop's P and back (the loop itself: cells/_families/_haste.py)."""
from cells import _arrays
from cells._families._declaration import Argument, Family, STATE, X

GATES = 4

FAMILY = Family(
    name="layer_norm_lstm",
    variants={"-": ("layer_norm_lstm", {})},
    time_loop="layerNormLstmTimeLoop", time_loop_bp="layerNormLstmTimeLoopBp",
    arguments=(Argument("x", "input", X),
               Argument("Wx", "weight", ("nIn", "4*nOut")),
               Argument("Wh", "weight", ("nOut", "4*nOut")),
               Argument("b", "weight", ("4*nOut",)),
               Argument("gamma", "weight", ("2", "4*nOut")),
               Argument("gamma_h", "weight", ("nOut",)),
               Argument("beta_h", "weight", ("nOut",)),
               Argument("hI", "state", STATE), Argument("cI", "state", STATE)),
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
