"""Each cell family declared once for Python: its time loop functions, their arguments and
shapes, results, workspace and variants.

The C side declares what a family's step is (include/cells/family_rows.h: its gate blocks, cell
state, phases, ...); this module declares how Python calls it. Everything that treats the
families alike reads the declarations here instead of listing the families again:

- ``python -m cells`` checks and times every family and variant (cells/__main__.py);
- the benchmarks build their inputs and call cells from them (benchmarks/families.py);
- the tests hold every declared family to the shared checks (tests/test_families.py says which);
- cells.torch generates its custom operators from them (with Family.torch, what an operator
  adds: the options it fixes or passes through, and its optional arrays).

Shapes are written in the time loop's dimensions: sL time steps, bS batch rows, nIn inputs,
nOut units (the state has nOut columns; the LSTM's projection, an option, is not part of the
declared shapes).
"""
from collections.abc import Callable
from typing import NamedTuple

from cells import _time_loop


class Dims(NamedTuple):
    """The dimensions of a time loop call."""
    sL: int
    bS: int
    nIn: int
    nOut: int


class Argument(NamedTuple):
    """A positional array argument of a family's time loop (and of its backward, which takes
    the same ones first): its name, its kind ("input", "state" or "weight": what the checks
    draw for it) and its shape as a function of Dims."""
    name: str
    kind: str
    shape: Callable[[Dims], tuple]


class TorchOperator(NamedTuple):
    """What cells.torch's custom operator for a family's time loop (cells::<name>_time_loop,
    and its backward cells::<name>_time_loop_backward) adds to the family's declaration.

    options: keyword options of the time loop the operator fixes ({"linear_before_reset":
      True}: torch's GRU);
    extra_params: optional arrays it takes after the declared arguments, differentiable, passed
      to the time loop by keyword (the LSTM's "Wproj"), their gradients named "dLd<name>";
    extra_options: (name, schema type) of the options it passes through after those, by keyword
      (the RNN's ("activation", "str"));
    units: the argument whose columns are the units (the state may be narrower: a projection);
    workspace_fields(call) -> {field: value}: the workspace's fields beyond its arrays, seq_len
      and forward, from the call's extra params and options ({name: value});
    optional_workspace: {workspace array: the extra param without which it is not kept}.
    """
    options: dict
    extra_params: tuple
    extra_options: tuple
    units: str
    workspace_fields: Callable[[dict], dict]
    optional_workspace: dict


def _no_fields(call):
    return {}


# The final state of a family that returns only h: h at the loop's last step.
LAST_STEP = "h at the last step"


class Family(NamedTuple):
    """How Python calls one cell family's time loop.

    name: the family's module (cells.gru, ...) and its name everywhere in Python;
    variants: variant name -> (the C table's row that runs it, the keyword options of the time
      loop and its backward that select it);
    time_loop, time_loop_bp: the names of the time loop and its backward in `cells`;
    arguments: the positional array arguments of both, in order;
    outputs: the names of the time loop's results (without return_workspace);
    final_states: (result name, the backward's keyword for the gradient arriving at it): the
      final states a loss may read, beside every step's h (for GRU and RNN, which return h
      alone, "h at the last step": see final_state_values);
    grads: the backward's results, one per argument, in order (the LSTM's backward returns
      more, for options these shapes do not declare);
    workspace: the arrays of the time loop's workspace (return_workspace=True);
    consumed: those of them the backward overwrites with gradients (a workspace serves one
      backward);
    torch: its cells.torch operator (TorchOperator), or None (haste's families: cells.haste
      has operators of its own).
    """
    name: str
    variants: dict
    time_loop: str
    time_loop_bp: str
    arguments: tuple
    outputs: tuple
    final_states: tuple
    grads: tuple
    workspace: tuple
    consumed: tuple
    torch: TorchOperator

    @property
    def gates(self):
        """Gate blocks of nOut columns in the weights, from the C table (the gemm FLOPs of a
        step: 2·bS·(nIn + nOut)·gates·nOut)."""
        row = next(iter(self.variants.values()))[0]
        return _time_loop.family(row).gates

    def product_inputs(self, nIn, nOut):
        """The inputs a step's products sum over per gate column: nIn + nOut, or nIn alone for
        a family with no recurrent product (the C table's recurrent_product)."""
        row = next(iter(self.variants.values()))[0]
        return nIn + (nOut if _time_loop.family(row).recurrent_product else 0)

    def shapes(self, dims):
        """{argument name: its shape} for `dims`, in argument order."""
        return {a.name: a.shape(dims) for a in self.arguments}

    def argument_kinds(self):
        """{argument name: its kind}, in argument order."""
        return {a.name: a.kind for a in self.arguments}

    def final_state_values(self, outputs, forward=True):
        """{the backward's keyword: the final state it is the gradient of}, from the results
        `outputs` (a tuple, in the order of self.outputs) of a call without seq_len: "h at the
        last step" is h[-1] forward, h[0] in reverse."""
        named = dict(zip(self.outputs, outputs))
        last = named["h"][-1 if forward else 0]
        return {keyword: last if result == LAST_STEP else named[result]
                for result, keyword in self.final_states}


def _x(d):
    return (d.sL, d.bS, d.nIn)


def _state(d):
    return (d.bS, d.nOut)


GRU = Family(
    name="gru",
    variants={"reset_before": ("gru_reset_before", {"linear_before_reset": False}),
              "linear_before_reset": ("gru_linear_before_reset",
                                      {"linear_before_reset": True})},
    time_loop="gruTimeLoop", time_loop_bp="gruTimeLoopBp",
    arguments=(Argument("x", "input", _x), Argument("hI", "state", _state),
               Argument("Wx", "weight", lambda d: (d.nIn, 3 * d.nOut)),
               Argument("Wh", "weight", lambda d: (d.nOut, 3 * d.nOut)),
               Argument("b", "weight", lambda d: (2, 3 * d.nOut))),
    outputs=("h",), final_states=((LAST_STEP, "dLdhLast"),),
    grads=("dLdx", "dLdhI", "dLdWx", "dLdWh", "dLdb"),
    workspace=("h", "gates", "hc"), consumed=("gates", "hc"),
    torch=TorchOperator(options={"linear_before_reset": True}, extra_params=(),
                        extra_options=(), units="hI", workspace_fields=_no_fields,
                        optional_workspace={}))

LSTM = Family(
    name="lstm",
    variants={"-": ("lstm", {})},
    time_loop="lstmLayerTimeLoop", time_loop_bp="lstmLayerTimeLoopBp",
    arguments=(Argument("x", "input", _x),
               Argument("Wx", "weight", lambda d: (d.nIn, 4 * d.nOut)),
               Argument("Wr", "weight", lambda d: (d.nOut, 4 * d.nOut)),
               Argument("b", "weight", lambda d: (4 * d.nOut,)),
               Argument("hI", "state", _state), Argument("cI", "state", _state)),
    outputs=("h", "hL", "cL"), final_states=(("hL", "dLdhL"), ("cL", "dLdcL")),
    grads=("dLdx", "dLdWx", "dLdWr", "dLdb", "dLdhI", "dLdcI"),
    workspace=("h", "c", "gates", "m"), consumed=("gates",),
    torch=TorchOperator(options={}, extra_params=("Wproj",), extra_options=(), units="cI",
                        workspace_fields=lambda call: {"cell_clip": 0.0, "peepholes": False,
                                                       "projected": call["Wproj"] is not None},
                        optional_workspace={"m": "Wproj"}))

LLTM = Family(
    name="lltm",
    variants={"-": ("lltm", {})},
    time_loop="lltmTimeLoop", time_loop_bp="lltmTimeLoopBp",
    arguments=(Argument("x", "input", _x),
               Argument("W", "weight", lambda d: (3 * d.nOut, d.nOut + d.nIn)),
               Argument("b", "weight", lambda d: (3 * d.nOut,)),
               Argument("hI", "state", _state), Argument("cI", "state", _state)),
    outputs=("h", "hL", "cL"), final_states=(("hL", "dLdhL"), ("cL", "dLdcL")),
    grads=("dLdx", "dLdW", "dLdb", "dLdhI", "dLdcI"),
    workspace=("h", "gates", "c"), consumed=("gates",),
    torch=TorchOperator(options={}, extra_params=(), extra_options=(), units="hI",
                        workspace_fields=_no_fields, optional_workspace={}))

RNN = Family(
    name="rnn",
    variants={"tanh": ("rnn", {"activation": "tanh"}),
              "relu": ("rnn", {"activation": "relu"})},
    time_loop="rnnTimeLoop", time_loop_bp="rnnTimeLoopBp",
    arguments=(Argument("x", "input", _x), Argument("hI", "state", _state),
               Argument("Wx", "weight", lambda d: (d.nIn, d.nOut)),
               Argument("Wh", "weight", lambda d: (d.nOut, d.nOut)),
               Argument("b", "weight", lambda d: (2, d.nOut))),
    outputs=("h",), final_states=((LAST_STEP, "dLdhLast"),),
    grads=("dLdx", "dLdhI", "dLdWx", "dLdWh", "dLdb"),
    workspace=("h", "gates"), consumed=("gates",),
    torch=TorchOperator(options={}, extra_params=(), extra_options=(("activation", "str"),),
                        units="hI",
                        workspace_fields=lambda call: {"activation": call["activation"]},
                        optional_workspace={}))

LAYER_NORM_LSTM = Family(
    name="layer_norm_lstm",
    variants={"-": ("layer_norm_lstm", {})},
    time_loop="layerNormLstmTimeLoop", time_loop_bp="layerNormLstmTimeLoopBp",
    arguments=(Argument("x", "input", _x),
               Argument("Wx", "weight", lambda d: (d.nIn, 4 * d.nOut)),
               Argument("Wh", "weight", lambda d: (d.nOut, 4 * d.nOut)),
               Argument("b", "weight", lambda d: (4 * d.nOut,)),
               Argument("gamma", "weight", lambda d: (2, 4 * d.nOut)),
               Argument("gamma_h", "weight", lambda d: (d.nOut,)),
               Argument("beta_h", "weight", lambda d: (d.nOut,)),
               Argument("hI", "state", _state), Argument("cI", "state", _state)),
    outputs=("h", "hL", "cL"), final_states=(("hL", "dLdhL"), ("cL", "dLdcL")),
    grads=("dLdx", "dLdWx", "dLdWh", "dLdb", "dLdgamma", "dLdgamma_h", "dLdbeta_h", "dLdhI",
           "dLdcI"),
    workspace=("h", "c", "gates", "aux"), consumed=("gates", "aux"), torch=None)

LAYER_NORM_GRU = Family(
    name="layer_norm_gru",
    variants={"-": ("layer_norm_gru", {})},
    time_loop="layerNormGruTimeLoop", time_loop_bp="layerNormGruTimeLoopBp",
    arguments=(Argument("x", "input", _x),
               Argument("Wx", "weight", lambda d: (d.nIn, 3 * d.nOut)),
               Argument("Wh", "weight", lambda d: (d.nOut, 3 * d.nOut)),
               Argument("b", "weight", lambda d: (3 * d.nOut,)),
               Argument("bh", "weight", lambda d: (3 * d.nOut,)),
               Argument("gamma", "weight", lambda d: (2, 3 * d.nOut)),
               Argument("hI", "state", _state)),
    outputs=("h",), final_states=((LAST_STEP, "dLdhLast"),),
    grads=("dLdx", "dLdWx", "dLdWh", "dLdb", "dLdbh", "dLdgamma", "dLdhI"),
    workspace=("h", "gates", "aux"), consumed=("gates", "aux"), torch=None)

INDRNN = Family(
    name="indrnn",
    variants={"-": ("indrnn", {})},
    time_loop="indRnnTimeLoop", time_loop_bp="indRnnTimeLoopBp",
    arguments=(Argument("x", "input", _x), Argument("hI", "state", _state),
               Argument("Wx", "weight", lambda d: (d.nIn, d.nOut)),
               Argument("u", "weight", lambda d: (d.nOut,)),
               Argument("b", "weight", lambda d: (d.nOut,))),
    outputs=("h",), final_states=((LAST_STEP, "dLdhLast"),),
    grads=("dLdx", "dLdhI", "dLdWx", "dLdu", "dLdb"),
    workspace=("h", "gates"), consumed=("gates",), torch=None)

FAMILIES = {f.name: f for f in (GRU, LSTM, LLTM, RNN, LAYER_NORM_LSTM, LAYER_NORM_GRU, INDRNN)}
