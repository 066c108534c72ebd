"""haste's IndRNN (cells.indrnn): its declaration. Its recurrent weights u are the time loop's
P and its b the loop's bias (the loop itself: cells/_families/_haste.py)."""
from cells._families._declaration import LAST_STEP, Argument, Family, state_shape, x_shape

FAMILY = Family(
    name="indrnn",
    variants={"-": ("indrnn", {})},
    time_loop="indRnnTimeLoop", time_loop_bp="indRnnTimeLoopBp",
    arguments=(Argument("x", "input", x_shape), Argument("hI", "state", state_shape),
               Argument("Wx", "weight", lambda d: (d.nIn, d.nOut)),
               Argument("u", "weight", lambda d: (d.nOut,)),
               Argument("b", "weight", lambda d: (d.nOut,))),
    outputs=("h",), final_states=((LAST_STEP, "dLdhLast"),),
    grads=("dLdx", "dLdhI", "dLdWx", "dLdu", "dLdb"),
    workspace=("h", "gates"), consumed=("gates",), torch=None)
