"""haste's LayerNorm GRU (cells.layer_norm_gru): its declaration, and its parameters as the time
loop's P and back (the loop itself: cells/_families/_haste.py)."""
from cells import _arrays
from cells._families._declaration import LAST_STEP, Argument, Family, STATE, X

GATES = 3

FAMILY = Family(
    name="layer_norm_gru",
    variants={"-": ("layer_norm_gru", {})},
    time_loop="layerNormGruTimeLoop", time_loop_bp="layerNormGruTimeLoopBp",
    arguments=(Argument("x", "input", X),
               Argument("Wx", "weight", ("nIn", "3*nOut")),
               Argument("Wh", "weight", ("nOut", "3*nOut")),
               Argument("b", "weight", ("3*nOut",)),
               Argument("bh", "weight", ("3*nOut",)),
               Argument("gamma", "weight", ("2", "3*nOut")),
               Argument("hI", "state", STATE)),
    outputs=("h",), final_states=((LAST_STEP, "dLdhLast"),),
    grads=("dLdx", "dLdWx", "dLdWh", "dLdb", "dLdbh", "dLdgamma", "dLdhI"),
    workspace=("h", "gates", "aux"), consumed=("gates", "aux"), torch=None)


def loop_params(b, bh, gamma):
    """The time loop's P [12nOut] of the parameters (include/cells/layer_norm_impl.h): b, bh,
    gamma's rows."""
    return _arrays.array_module(b).concatenate([b, bh, gamma.ravel()])


def param_grads(dLdP, nOut):
    """(dLdb, dLdbh, dLdgamma), new arrays, from the time loop's dL/dP."""
    G = GATES * nOut
    dLdb, dLdbh, dLdgamma = (a.copy() for a in
                             _arrays.array_module(dLdP).split(dLdP, [G, 2 * G]))
    return dLdb, dLdbh, dLdgamma.reshape(2, G)
