"""What a family's declaration is (Family, Argument, Dims, TorchOperator), and what the
families' mappings onto the time loop share.

A family module (cells/_families/gru.py, ...) declares its FAMILY and maps its face's
parameters onto the time loop's and back: forward(backend, ...) and backward(backend, ...) run
the loop of `backend` (cells._cpu or cells._gpu, as cells._backend.of chooses for the call's
arrays: the face passes it) and return plain arrays, which the face turns into its results.

Shapes are written in the time loop's dimensions: sL time steps, bS batch rows, nIn inputs,
nOut units (the state has nOut columns; the LSTM's projection, an option, is not part of the
declared shapes).
"""
import functools
import math
from collections.abc import Callable
from typing import NamedTuple

from cells import _family_table


class Dims(NamedTuple):
    """The dimensions of a time loop call."""
    sL: int
    bS: int
    nIn: int
    nOut: int


class Argument(NamedTuple):
    """A positional array argument of a family's time loop (and of its backward, which takes
    the same ones first): its name, its kind ("input", "state" or "weight": what the checks
    draw for it) and its sizes, each written in the dimensions ("nIn", "3*nOut", "nOut+nIn",
    "2"): its shape, and what an error message spells it as (cells._validate.arguments).

    rows: for a weight whose first dimension may be left out, what its rows are ("rows bx,
    bh": a bias [G] or [2, G], whose two rows are summands); "" for the others.
    """
    name: str
    kind: str
    sizes: tuple
    rows: str = ""

    def shape(self, dims):
        """The shape for `dims` (a Dims)."""
        sL, bS, nIn, nOut = dims
        return tuple([c + a * sL + b * bS + i * nIn + o * nOut
                      for c, a, b, i, o in coefficients(self.sizes)])

    def meaning(self):
        """The shape in the dimensions' names: "[nIn, 3*nOut]"."""
        return f"[{', '.join(self.sizes)}]"


@functools.cache
def coefficients(sizes):
    """Each size of `sizes` (written in the dimensions: a sum of terms, each a dimension, a
    number, or a number times a dimension: "nOut+nIn", "3*nOut", "2") as its constant and its
    coefficients of sL, bS, nIn and nOut, worked out once."""
    result = []
    for expression in sizes:
        terms = dict.fromkeys(("1", *Dims._fields), 0)
        for term in expression.split("+"):
            factor, _, name = term.rpartition("*")
            if name.isdigit():
                factor, name = name, "1"
            terms[name] += int(factor or 1)
        result.append(tuple(terms.values()))
    return tuple(result)


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


def no_fields(call):
    """TorchOperator.workspace_fields of a family whose workspace has no field of its own."""
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
        return _family_table.family(row).gates

    def product_inputs(self, nIn, nOut):
        """The inputs a step's products sum over per gate column: nIn + nOut, or nIn alone for
        a family with no recurrent product (the C table's recurrent_product)."""
        row = next(iter(self.variants.values()))[0]
        return nIn + (nOut if _family_table.family(row).recurrent_product else 0)

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


# x, and a state: every family's first argument and its states.
X = ("sL", "bS", "nIn")
STATE = ("bS", "nOut")


# ---------------------------------------------------------------------------------------------
# What the mappings share
# ---------------------------------------------------------------------------------------------

def initial_state(xp, a, bS, n, dtype):
    """An initial state [bS, n]: `a`, or zeros when it is None."""
    return xp.zeros((bS, n), dtype) if a is None else a


def kernel_clip(cell_clip):
    """The time loop's clip bound: +inf stands for no clipping (cell_clip = 0)."""
    return cell_clip if cell_clip > 0 else math.inf


def zoned(zoneout):
    """The loop's zoneout keyword, left out where zoneout is None: every backend runs a call
    without it."""
    return {} if zoneout is None else {"zoneout": zoneout}
