"""haste's IndRNN (cells.indrnn): its declaration. Its recurrent weights u are the time loop's
P and its b the loop's bias (the loop itself: cells/_families/_haste.py)."""
from cells._families._declaration import LAST_STEP, Argument, Family, STATE, X

FAMILY = Family(
    name="indrnn",
    variants={"-": ("indrnn", {})},
    time_loop="indRnnTimeLoop", time_loop_bp="indRnnTimeLoopBp",
    arguments=(Argument("x", "input", X), Argument("hI", "state", STATE),
               Argument("Wx", "weight", ("nIn", "nOut")),
               Argument("u", "weight", ("nOut",)),
               Argument("b", "weight", ("nOut",))),
    outputs=("h",), final_states=((LAST_STEP, "dLdhLast"),),
    grads=("dLdx", "dLdhI", "dLdWx", "dLdu", "dLdb"),
    workspace=("h", "gates"), consumed=("gates",), torch=None)
