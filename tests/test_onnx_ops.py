"""cells.onnx: ONNX's GRU, LSTM and RNN operators and their gradients.

Forward against ONNX Runtime (float32, layout 0: it refuses layout 1) and onnx.reference
(float64, every layout and direction, but it ignores sequence_lens, and knows no Relu RNN);
layout 1 against layout 0 transposed; every gradient against central finite differences of
cells.onnx's own float64 forward, and bidirectional gradients against torch autograd (weights
mapped by cells.convert); errors for unsupported attributes and bad arguments; the outputs and
gradients as the NamedTuples the docstrings name.
"""
import re

import numpy as np
import pytest

from cells import onnx as co
from cells.convert import gru_to_onnx, lstm_to_onnx, rnn_to_onnx
from gru_reference import (FD_EPS, FD_TOL, F32_FWD_TOL, F32_SEQ_GRAD_TOL, F64_TOL, SAME_GRAD_TOL,
                           SAME_TOL, assert_close, central_diff_grad, reversed_view, strided,
                           transposed_view)

# torch's float64 CPU GRU/LSTM evaluate the same formulas in float64 (~1e-16 measured), as
# does onnx.reference: the float64 cells-vs-reference tolerance applies.
TORCH_TOL = REF_TOL = F64_TOL

# The ONNX inputs of each operator, in the node's order, and its outputs.
INPUTS = {"GRU": ("X", "W", "R", "B", "sequence_lens", "initial_h"),
          "LSTM": ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"),
          "RNN": ("X", "W", "R", "B", "sequence_lens", "initial_h")}
OUTPUTS = {"GRU": ("Y", "Y_h"), "LSTM": ("Y", "Y_h", "Y_c"), "RNN": ("Y", "Y_h")}
FORWARD = {"GRU": co.gru, "LSTM": co.lstm, "RNN": co.rnn}
BACKWARD = {"GRU": co.gru_bp, "LSTM": co.lstm_bp, "RNN": co.rnn_bp}
GATES = {"GRU": 3, "LSTM": 4, "RNN": 1}  # gate blocks in W and R
OPS = list(FORWARD)

# (operator, attributes, whether P is given) for every variant: the GRU's two candidate
# formulas, the LSTM without and with peepholes, the RNN with Tanh (the default) and Relu.
# An "activations" attribute lists one direction's; _variant repeats it for each direction.
VARIANTS = {"gru_lbr0": ("GRU", {"linear_before_reset": 0}, False),
            "gru_lbr1": ("GRU", {"linear_before_reset": 1}, False),
            "lstm": ("LSTM", {}, False),
            "lstm_peep": ("LSTM", {}, True),
            "rnn_tanh": ("RNN", {}, False),
            "rnn_relu": ("RNN", {"activations": ["Relu"]}, False)}
# onnx.reference's RNN knows Tanh only (and Affine)
REFERENCE_VARIANTS = [name for name in VARIANTS if name != "rnn_relu"]


def _rng(*params):
    """A random generator seeded by a test's parameters."""
    return np.random.default_rng(list(repr(params).encode()))


def _variant(name, direction):
    """(op, a fresh dict of its attributes for cells.onnx and the ONNX node, whether P is
    given), with the variant's activations listed for each direction of `direction`."""
    op, attrs, peepholes = VARIANTS[name]
    attrs = dict(attrs)
    if "activations" in attrs:
        attrs["activations"] = attrs["activations"] * (2 if direction == "bidirectional" else 1)
    return op, attrs, peepholes


def _problem(rng, op, seq, batch, n_in, H, direction, lengths=None, peepholes=False,
             omit=()):
    """Random float64 ONNX inputs (layout 0) by name: weights ~0.5 so that the gates are not
    saturated, non-zero biases and initial states; the names in `omit` are None."""
    n = 2 if direction == "bidirectional" else 1
    G = GATES[op]
    inputs = {
        "X": rng.normal(0.0, 1.0, (seq, batch, n_in)),
        "W": rng.normal(0.0, 0.5, (n, G * H, n_in)),
        "R": rng.normal(0.0, 0.5, (n, G * H, H)),
        "B": rng.normal(0.0, 0.5, (n, 2 * G * H)),
        "sequence_lens": None if lengths is None else np.array(lengths, dtype=np.int32),
        "initial_h": rng.uniform(-0.9, 0.9, (n, batch, H)),
    }
    if op == "LSTM":
        inputs["initial_c"] = rng.uniform(-1.5, 1.5, (n, batch, H))
        inputs["P"] = rng.normal(0.0, 0.5, (n, 3 * H)) if peepholes else None
    return {k: None if k in omit else v for k, v in inputs.items()}


def _output_grads(rng, outputs, given):
    """Random dY, dY_h (, dY_c) shaped as the outputs; those not in `given` are None."""
    return {"d" + name: rng.normal(0.0, 1.0, out.shape) if "d" + name in given else None
            for name, out in zip(("Y", "Y_h", "Y_c"), outputs)}


def _to_layout1(inputs):
    """Layout-0 ONNX inputs as layout 1: batch first in X and in the initial states."""
    return {k: np.ascontiguousarray(v.swapaxes(0, 1))
            if k in ("X", "initial_h", "initial_c") and v is not None else v
            for k, v in inputs.items()}


def _outputs_to_layout1(outputs):
    """Layout-0 outputs (Y, Y_h[, Y_c]) as layout 1."""
    Y, *states = outputs
    return (Y.transpose(2, 0, 1, 3), *(s.swapaxes(0, 1) for s in states))


def _onnx_model(op, inputs, dtype, **attributes):
    """A single-node opset-14 model of `op` taking the non-None `inputs` (omitted ones are ''
    in the node); float32 or float64 tensors, int32 sequence_lens."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    et = TensorProto.FLOAT if dtype == np.float32 else TensorProto.DOUBLE
    names = [name if inputs.get(name) is not None else "" for name in INPUTS[op]]
    while names[-1] == "":
        names.pop()
    infos = [helper.make_tensor_value_info(
        name, TensorProto.INT32 if name == "sequence_lens" else et, inputs[name].shape)
        for name in names if name]
    H = inputs["R"].shape[-1]
    node = helper.make_node(op, inputs=names, outputs=list(OUTPUTS[op]), hidden_size=H,
                            **attributes)
    graph = helper.make_graph([node], op.lower(), infos,
                              [helper.make_tensor_value_info(name, et, [None] * rank)
                               for name, rank in zip(OUTPUTS[op], (4, 3, 3))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _feeds(inputs, dtype):
    return {k: v.astype(np.int32 if k == "sequence_lens" else dtype)
            for k, v in inputs.items() if v is not None}


def _run_onnxruntime(op, inputs, **attributes):
    """ONNX Runtime's outputs on the float32-rounded inputs (it has no float64 GRU/LSTM)."""
    ort = pytest.importorskip("onnxruntime")
    model = _onnx_model(op, inputs, np.float32, **attributes)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, _feeds(inputs, np.float32))


def _run_reference(op, inputs, **attributes):
    """onnx.reference's float64 outputs (it ignores sequence_lens)."""
    pytest.importorskip("onnx")
    from onnx.reference import ReferenceEvaluator
    model = _onnx_model(op, inputs, np.float64, **attributes)
    return ReferenceEvaluator(model).run(None, _feeds(inputs, np.float64))


def _cast(inputs, dtype):
    """The float inputs in `dtype` (sequence_lens and None unchanged)."""
    return {k: v if v is None or k == "sequence_lens" else v.astype(dtype)
            for k, v in inputs.items()}


# ---------------------------------------------------------------------------------------------
# Forward
# ---------------------------------------------------------------------------------------------
# (seq, batch, input, hidden, lengths with a row of length 0 and a full one)
ORT_SHAPES = [(5, 4, 3, 4, [5, 0, 3, 1]), (3, 2, 7, 24, [0, 3])]


@pytest.mark.parametrize("seq,batch,n_in,H,lengths", ORT_SHAPES)
@pytest.mark.parametrize("with_lens", [False, True], ids=["all_steps", "lens"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_onnxruntime_float32(variant, direction, with_lens, seq, batch, n_in, H, lengths):
    """float32 on both sides, from the same float32 values: each side errs by a few float32 ulps
    per step relative to exact arithmetic, so F32_FWD_TOL = 1e-5 relative to max(1, scale)
    (as for float32 cells vs the float64 reference, gru_reference.py) bounds their difference.
    ONNX Runtime returns Y_h = Y_c = 0 for a row of length 0, cells its initial state
    (documented in cells.onnx): those rows are compared on Y, and Y_h, Y_c checked against the
    initial states."""
    op, attrs, peepholes = _variant(variant, direction)
    rng = _rng("ort", variant, direction, with_lens, seq)
    inputs = _cast(_problem(rng, op, seq, batch, n_in, H, direction,
                            lengths if with_lens else None, peepholes), np.float32)
    expected = _run_onnxruntime(op, inputs, direction=direction, **attrs)
    outputs = FORWARD[op](**inputs, direction=direction, **attrs)
    ran = np.ones(batch, bool) if not with_lens else np.array(lengths) > 0
    assert_close(outputs[0], expected[0], F32_FWD_TOL, "Y", np.float32)
    for name, out, exp, initial in zip(OUTPUTS[op][1:], outputs[1:], expected[1:],
                                       (inputs["initial_h"], inputs.get("initial_c"))):
        assert_close(out[:, ran], exp[:, ran], F32_FWD_TOL, name, np.float32)
        assert np.array_equal(out[:, ~ran], initial[:, ~ran]), name
    # the comparison discriminates the directions
    if direction != "bidirectional":
        other = "reverse" if direction == "forward" else "forward"
        assert np.max(np.abs(FORWARD[op](**inputs, direction=other, **attrs)[0]
                             - expected[0])) > 1e-3


@pytest.mark.parametrize("variant", VARIANTS)
def test_onnxruntime_omitted_inputs(variant):
    """B, initial_h (and initial_c) omitted: zeros on both sides (float32, tolerance as above)."""
    op, attrs, peepholes = _variant(variant, "bidirectional")
    rng = _rng("omitted ort", variant)
    inputs = _cast(_problem(rng, op, 4, 3, 2, 3, "bidirectional", peepholes=peepholes,
                            omit=("B", "initial_h", "initial_c")), np.float32)
    expected = _run_onnxruntime(op, inputs, direction="bidirectional", **attrs)
    outputs = FORWARD[op](**inputs, direction="bidirectional", **attrs)
    for name, out, exp in zip(OUTPUTS[op], outputs, expected):
        assert_close(out, exp, F32_FWD_TOL, name, np.float32)


@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("variant", REFERENCE_VARIANTS)
def test_onnx_reference_float64(variant, direction, layout):
    """onnx.reference evaluates the ONNX spec in float64, in both layouts (no sequence_lens:
    it ignores them): REF_TOL = F64_TOL, the float64 cells-vs-reference tolerance."""
    op, attrs, peepholes = _variant(variant, direction)
    rng = _rng("reference", variant, direction, layout)
    inputs = _problem(rng, op, 5, 3, 4, 2, direction, peepholes=peepholes)
    if layout == 1:
        inputs = _to_layout1(inputs)
    expected = _run_reference(op, inputs, direction=direction, layout=layout, **attrs)
    outputs = FORWARD[op](**inputs, direction=direction, layout=layout, **attrs)
    for name, out, exp in zip(OUTPUTS[op], outputs, expected):
        assert_close(out, exp, REF_TOL, name, np.float64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_layout1_is_layout0_transposed(variant, dtype):
    """Layout 1 (batch first), which ONNX Runtime refuses, is layout 0 with X, the states and
    the outputs transposed, forward and gradients, with sequence_lens, bidirectional. Both run
    the same kernels on the same values (layout 1 on a transposed copy): a few ulps
    (SAME_TOL, SAME_GRAD_TOL)."""
    op, attrs, peepholes = _variant(variant, "bidirectional")
    rng = _rng("layout", variant, dtype)
    inputs = _cast(_problem(rng, op, 5, 4, 3, 2, "bidirectional", [5, 0, 2, 4], peepholes),
                   dtype)
    attrs["direction"] = "bidirectional"
    outputs0 = FORWARD[op](**inputs, **attrs)
    outputs1 = FORWARD[op](**_to_layout1(inputs), layout=1, **attrs)
    for name, out, exp in zip(OUTPUTS[op], outputs1, _outputs_to_layout1(outputs0)):
        assert_close(out, exp, SAME_TOL[np.dtype(dtype)], name, dtype)
        assert out.flags.c_contiguous

    dout0 = _output_grads(rng, outputs0, ("dY", "dY_h", "dY_c"))
    dout1 = dict(zip(dout0, _outputs_to_layout1([g.astype(dtype) for g in dout0.values()])))
    grads0 = BACKWARD[op](**inputs, **{k: v.astype(dtype) for k, v in dout0.items()}, **attrs)
    grads1 = BACKWARD[op](**_to_layout1(inputs), **dout1, layout=1, **attrs)
    for name in grads0._fields:
        g0, g1 = getattr(grads0, name), getattr(grads1, name)
        if g0 is None:
            assert g1 is None
            continue
        if name in ("dX", "dinitial_h", "dinitial_c"):
            g0 = g0.swapaxes(0, 1)
        assert_close(g1, g0, SAME_GRAD_TOL[np.dtype(dtype)], name, dtype)
        assert g1.flags.c_contiguous


@pytest.mark.parametrize("variant", VARIANTS)
def test_layout1_against_onnxruntime(variant):
    """cells with layout 1 against ONNX Runtime with layout 0 on the transposed inputs (float32,
    F32_FWD_TOL as above), with sequence_lens (rows of length > 0 for the states)."""
    op, attrs, peepholes = _variant(variant, "bidirectional")
    rng = _rng("layout ort", variant)
    lengths = [4, 0, 2]
    inputs = _cast(_problem(rng, op, 4, 3, 5, 3, "bidirectional", lengths, peepholes),
                   np.float32)
    expected = _outputs_to_layout1(
        _run_onnxruntime(op, inputs, direction="bidirectional", **attrs))
    outputs = FORWARD[op](**_to_layout1(inputs), direction="bidirectional", layout=1, **attrs)
    ran = np.array(lengths) > 0
    assert_close(outputs[0], expected[0], F32_FWD_TOL, "Y", np.float32)
    for name, out, exp in zip(OUTPUTS[op][1:], outputs[1:], expected[1:]):
        assert_close(out[ran], exp[ran], F32_FWD_TOL, name, np.float32)


# ---------------------------------------------------------------------------------------------
# Gradients
# ---------------------------------------------------------------------------------------------
# (direction, sequence_lens, layout, the output gradients given; the others are None)
GRAD_CASES = [
    ("bidirectional", [4, 0, 2], 0, ("dY", "dY_h", "dY_c")),
    ("bidirectional", [3, 4, 1], 1, ("dY_h", "dY_c")),
    ("bidirectional", None, 0, ("dY",)),
    ("forward", [4, 0, 2], 1, ("dY", "dY_h", "dY_c")),
    ("reverse", [1, 4, 0], 0, ("dY", "dY_h", "dY_c")),
]


def _loss(op, inputs, attrs, dout):
    """L = sum(dY∘Y) + sum(dY_h∘Y_h) (+ sum(dY_c∘Y_c)) over the output gradients given. One
    thread: these tiny problems run ~10x faster so (and the threads do not change the math)."""
    outputs = FORWARD[op](**inputs, **attrs, n_threads=1)
    return sum(float(np.sum(g * out)) for g, out in zip(dout.values(), outputs)
               if g is not None)


@pytest.mark.parametrize("direction,lengths,layout,given", GRAD_CASES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_gradients_finite_differences(variant, direction, lengths, layout, given):
    """Every returned gradient (X, W, R, B with both halves Wb and Rb, initial_h, initial_c, P)
    against central differences of L in float64; FD_EPS = 1e-6 and FD_TOL = 1e-7 relative to
    the gradient's scale, justified in gru_reference.py (truncation ~1e-12, cancellation ~1e-9
    for |L| ~ 10: a 100x margin that still rejects any wrong term). seq 4, batch 3, input 2,
    hidden 3."""
    op, attrs, peepholes = _variant(variant, direction)
    rng = _rng("fd", variant, direction, lengths, layout, given)
    inputs = _problem(rng, op, 4, 3, 2, 3, direction, lengths, peepholes)
    if layout == 1:
        inputs = _to_layout1(inputs)
    attrs.update(direction=direction, layout=layout)
    dout = _output_grads(rng, FORWARD[op](**inputs, **attrs), given)
    grads = BACKWARD[op](**inputs, **dout, **attrs)

    names = [k for k, v in inputs.items() if v is not None and k != "sequence_lens"]

    def loss(*arrays):
        return _loss(op, {**inputs, **dict(zip(names, arrays))}, attrs, dout)

    numeric = central_diff_grad(loss, [inputs[k] for k in names], FD_EPS)
    for name, expected in zip(names, numeric):
        assert_close(getattr(grads, "d" + name), expected, FD_TOL, "d" + name, np.float64)
    if op in ("LSTM", "RNN"):
        G = GATES[op] * inputs["R"].shape[-1]
        assert np.array_equal(grads.dB[:, :G], grads.dB[:, G:])  # dWb = dRb
    if op == "LSTM":
        assert (grads.dP is None) == (not peepholes)


@pytest.mark.parametrize("variant", VARIANTS)
def test_omitted_inputs_are_zeros(variant):
    """Omitting B, initial_h, initial_c gives the outputs and the gradients of zeros in their
    place (gradients returned for them too), P omitted gives dP None."""
    op, attrs, peepholes = _variant(variant, "bidirectional")
    rng = _rng("omitted", variant)
    omit = ("B", "initial_h", "initial_c")
    full = _problem(rng, op, 4, 3, 2, 3, "bidirectional", [4, 1, 0], peepholes)
    inputs = {k: None if k in omit else v for k, v in full.items()}
    zeros = {k: np.zeros_like(full[k]) for k in omit if k in full}
    attrs["direction"] = "bidirectional"
    outputs = FORWARD[op](**inputs, **attrs)
    dout = _output_grads(rng, outputs, ("dY", "dY_h", "dY_c"))
    expected = BACKWARD[op](**{**inputs, **zeros}, **dout, **attrs)
    for name, out, exp in zip(OUTPUTS[op], outputs,
                              FORWARD[op](**{**inputs, **zeros}, **attrs)):
        assert np.array_equal(out, exp), name
    for name, g, exp in zip(expected._fields, BACKWARD[op](**inputs, **dout, **attrs), expected):
        assert (g is None) == (exp is None), name
        if g is not None:
            assert np.array_equal(g, exp), name
    if op == "LSTM" and not peepholes:
        assert expected.dP is None


@pytest.mark.parametrize("variant", VARIANTS)
def test_workspace_skips_the_forward(variant):
    """gru/lstm(..., return_workspace=True) then the backward with workspace= gives the
    gradients of the backward that recomputes the forward (same kernels: a few ulps)."""
    op, attrs, peepholes = _variant(variant, "bidirectional")
    rng = _rng("workspace", variant)
    inputs = _to_layout1(_problem(rng, op, 5, 3, 2, 4, "bidirectional", [5, 0, 3], peepholes))
    attrs.update(direction="bidirectional", layout=1)
    *outputs, workspace = FORWARD[op](**inputs, **attrs, return_workspace=True)
    for out, exp in zip(outputs, FORWARD[op](**inputs, **attrs)):
        assert np.array_equal(out, exp)
    assert len(workspace) == 2
    dout = _output_grads(rng, outputs, ("dY", "dY_h", "dY_c"))
    grads = BACKWARD[op](**inputs, **dout, **attrs, workspace=workspace)
    for name, g, exp in zip(grads._fields, grads, BACKWARD[op](**inputs, **dout, **attrs)):
        if exp is not None:
            assert_close(g, exp, SAME_GRAD_TOL[np.dtype(np.float64)], name, np.float64)


@pytest.mark.parametrize("variant", VARIANTS)
def test_float32_gradients(variant):
    """float32 inputs give float32 gradients, close to the float64 ones on the same values:
    F32_SEQ_GRAD_TOL (gru_reference.py) relative to each gradient's scale."""
    op, attrs, peepholes = _variant(variant, "bidirectional")
    rng = _rng("float32", variant)
    inputs = _problem(rng, op, 5, 3, 4, 3, "bidirectional", [5, 0, 2], peepholes)
    inputs32 = _cast(inputs, np.float32)
    inputs64 = _cast(inputs32, np.float64)
    attrs["direction"] = "bidirectional"
    dout = _output_grads(rng, FORWARD[op](**inputs64, **attrs), ("dY", "dY_h", "dY_c"))
    grads32 = BACKWARD[op](**inputs32, **{k: v.astype(np.float32) for k, v in dout.items()},
                           **attrs)
    grads64 = BACKWARD[op](**inputs64, **dout, **attrs)
    for name, g, exp in zip(grads64._fields, grads32, grads64):
        if exp is not None:
            assert_close(g, exp, F32_SEQ_GRAD_TOL, name, np.float32)


@pytest.mark.parametrize("seq,batch", [(0, 2), (3, 0), (0, 0)])
@pytest.mark.parametrize("op", OPS)
def test_empty_sequences_and_batches(op, seq, batch):
    """seq_length = 0: Y is empty, the final states are the initial ones (their gradients pass
    straight through), the weight gradients are 0; batch_size = 0: empty outputs."""
    rng = _rng("empty", op, seq, batch)
    inputs = _problem(rng, op, seq, batch, 2, 3, "bidirectional", [seq] * batch)
    attrs = {"direction": "bidirectional"}
    outputs = FORWARD[op](**inputs, **attrs)
    assert outputs[0].shape == (seq, 2, batch, 3)
    dout = _output_grads(rng, outputs, ("dY", "dY_h", "dY_c"))
    grads = BACKWARD[op](**inputs, **dout, **attrs)
    assert np.array_equal(outputs[1], inputs["initial_h"])
    assert np.array_equal(grads.dinitial_h, dout["dY_h"])
    if op == "LSTM":
        assert np.array_equal(outputs[2], inputs["initial_c"])
        assert np.array_equal(grads.dinitial_c, dout["dY_c"])
    for name in ("dX", "dW", "dR", "dB"):
        assert not np.any(getattr(grads, name)), name


@pytest.mark.parametrize("op", OPS)
def test_any_memory_order(op):
    """Fortran-ordered, strided and transposed-view inputs give the results of C-ordered ones
    (the same kernels on copies: a few ulps at most), and the outputs are C-ordered."""
    rng = _rng("memory", op)
    inputs = _problem(rng, op, 4, 3, 2, 3, "bidirectional", [4, 0, 2])
    attrs = {"direction": "bidirectional"}
    odd = {"X": strided(inputs["X"]), "W": np.asfortranarray(inputs["W"]),
           "R": transposed_view(inputs["R"]), "initial_h": reversed_view(inputs["initial_h"])}
    outputs = FORWARD[op](**inputs, **attrs)
    dout = _output_grads(rng, outputs, ("dY", "dY_h", "dY_c"))
    for out, exp in zip(FORWARD[op](**{**inputs, **odd}, **attrs), outputs):
        assert_close(out, exp, SAME_TOL[np.dtype(np.float64)])
        assert out.flags.c_contiguous
    strided_dout = {k: strided(v) for k, v in dout.items()}
    for out, exp in zip(BACKWARD[op](**{**inputs, **odd}, **strided_dout, **attrs),
                        BACKWARD[op](**inputs, **dout, **attrs)):
        if exp is not None:
            assert_close(out, exp, SAME_GRAD_TOL[np.dtype(np.float64)])
            assert out.flags.c_contiguous


# ---------------------------------------------------------------------------------------------
# Bidirectional gradients against torch autograd
# ---------------------------------------------------------------------------------------------
def _torch_to_onnx(op, tensor, H):
    """ONNX W, R, B of a bidirectional torch GRU/LSTM/RNN, mapped through cells.convert (torch:
    weight_ih [G*H, input] = Wxᵀ, weight_hh = Whᵀ, gate order = cells'); tensor(name) is the
    parameter (or its gradient) as an array. The LSTM's B keeps bias_ih in Wb and bias_hh in Rb
    (lstm_to_onnx puts one bias in Wb, zeros in Rb)."""
    W, R, B = [], [], []
    for suffix in ("_l0", "_l0_reverse"):
        p = {name: tensor(name + suffix)
             for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
        if op in ("GRU", "RNN"):
            to_onnx = gru_to_onnx if op == "GRU" else rnn_to_onnx
            W_d, R_d, B_d = to_onnx(p["weight_ih"].T, p["weight_hh"].T,
                                    np.stack([p["bias_ih"], p["bias_hh"]]))
        else:
            W_d, R_d, B_ih, _ = lstm_to_onnx(p["weight_ih"].T, p["weight_hh"].T, p["bias_ih"])
            B_hh = lstm_to_onnx(p["weight_ih"].T, p["weight_hh"].T, p["bias_hh"])[2]
            B_d = np.concatenate([B_ih[:, :4 * H], B_hh[:, :4 * H]], axis=1)
        W.append(W_d)
        R.append(R_d)
        B.append(B_d)
    return np.concatenate(W), np.concatenate(R), np.concatenate(B)


# torch module options of each ONNX variant (the RNN's nonlinearity is the variant's activation)
TORCH_MODULES = {"gru_lbr1": {}, "lstm": {}, "rnn_tanh": {"nonlinearity": "tanh"},
                 "rnn_relu": {"nonlinearity": "relu"}}


@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("variant", TORCH_MODULES)
def test_torch_bidirectional(variant, layout):
    """nn.GRU / nn.LSTM / nn.RNN(bidirectional=True, batch_first=layout) in float64 on a packed
    batch (torch rejects length 0), weights mapped by cells.convert: Y, Y_h, Y_c and every
    gradient (dX summed over both directions), to TORCH_TOL. The GRU is linear_before_reset=1;
    the RNN's nonlinearity tanh or relu (ONNX activations Tanh or Relu)."""
    torch = pytest.importorskip("torch")
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
    seq, batch, n_in, H = 5, 3, 4, 3
    lengths = np.array([5, 2, 4])
    op, attrs, _ = _variant(variant, "bidirectional")
    rng = _rng("torch", op, layout, variant)
    torch.manual_seed(7900)
    module = getattr(torch.nn, op)(n_in, H, bidirectional=True, batch_first=bool(layout),
                                   dtype=torch.float64, **TORCH_MODULES[variant])
    W, R, B = _torch_to_onnx(op, lambda name: getattr(module, name).detach().numpy(), H)
    inputs = _problem(rng, op, seq, batch, n_in, H, "bidirectional", lengths)
    inputs.update(W=W, R=R, B=B)
    if layout == 1:
        inputs = _to_layout1(inputs)
    attrs.update(direction="bidirectional", layout=layout)

    leaves = {k: torch.from_numpy(inputs[k].copy()).requires_grad_(True)
              for k in ("X", "initial_h", "initial_c") if inputs.get(k) is not None}
    # torch's states are [num_directions, batch, hidden] in both layouts
    states = [leaves[k] if layout == 0 else leaves[k].transpose(0, 1).contiguous()
              for k in ("initial_h", "initial_c") if k in leaves]
    packed = pack_padded_sequence(leaves["X"], torch.from_numpy(lengths),
                                  batch_first=bool(layout), enforce_sorted=False)
    out, final = module(packed, tuple(states) if op == "LSTM" else states[0])
    out, _ = pad_packed_sequence(out, batch_first=bool(layout), total_length=seq)
    finals = list(final) if op == "LSTM" else [final]
    # torch's out [.., 2*hidden] is ONNX's Y with the directions split off the last axis
    Y_torch = (out.reshape(seq, batch, 2, H).transpose(1, 2) if layout == 0
               else out.reshape(batch, seq, 2, H))
    outputs_torch = [Y_torch] + [s if layout == 0 else s.transpose(0, 1) for s in finals]

    outputs = FORWARD[op](**inputs, **attrs)
    for name, out_c, out_t in zip(OUTPUTS[op], outputs, outputs_torch):
        assert_close(out_c, out_t.detach().numpy(), TORCH_TOL, name, np.float64)
    dout = _output_grads(rng, outputs, ("dY", "dY_h", "dY_c"))
    sum(torch.sum(o * torch.from_numpy(g)) for o, g in zip(outputs_torch, dout.values())
        ).backward()

    grads = BACKWARD[op](**inputs, **dout, **attrs)
    dW, dR, dB = _torch_to_onnx(op, lambda name: getattr(module, name).grad.numpy(), H)
    assert_close(grads.dW, dW, TORCH_TOL, "dW", np.float64)
    assert_close(grads.dR, dR, TORCH_TOL, "dR", np.float64)
    assert_close(grads.dB, dB, TORCH_TOL, "dB", np.float64)
    for name, leaf in leaves.items():
        assert_close(getattr(grads, "d" + name), leaf.grad.numpy(), TORCH_TOL, "d" + name,
                     np.float64)


# ---------------------------------------------------------------------------------------------
# Errors: raised before any kernel runs
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def no_kernels(monkeypatch):
    """Fail the test if cells.onnx calls a kernel: its checks must come first."""
    def kernel(*args, **kwargs):
        raise AssertionError("a kernel ran before the arguments were checked")
    for name in ("gruTimeLoop", "gruTimeLoopBp", "lstmLayerTimeLoop", "lstmLayerTimeLoopBp",
                 "rnnTimeLoop", "rnnTimeLoopBp"):
        monkeypatch.setattr(co, name, kernel)


def _calls(op):
    """The forward and backward functions of op, each as f(inputs, **kw)."""
    return [lambda inputs, **kw: FORWARD[op](**inputs, **kw),
            lambda inputs, **kw: BACKWARD[op](**inputs, **kw)]


def _small(op, direction="forward", **kw):
    return _problem(np.random.default_rng(8000), op, 3, 2, 4, 3, direction, **kw)


UNSUPPORTED = [
    ("activations", {"activations": ["Relu", "Tanh"]}),
    ("activations", {"activations": ["Sigmoid", "Tanh", "Tanh", "Tanh"]}),
    ("activations", {"activations": ["Sigmoid"]}),
    ("activations", {"activations": ["tanh"]}),  # ONNX's names are capitalised
    ("activation_alpha", {"activation_alpha": [1.0]}),
    ("activation_beta", {"activation_beta": [0.5]}),
    ("clip", {"clip": 3.0}),
]


@pytest.mark.parametrize("name,kw", UNSUPPORTED, ids=[f"{n}{i}" for i, (n, _) in
                                                      enumerate(UNSUPPORTED)])
@pytest.mark.parametrize("op", OPS)
def test_unsupported_attributes(no_kernels, op, name, kw):
    for call in _calls(op):
        with pytest.raises(NotImplementedError, match=name):
            call(_small(op), **kw)


def test_input_forget_not_implemented(no_kernels):
    for call in _calls("LSTM"):
        with pytest.raises(NotImplementedError, match="input_forget"):
            call(_small("LSTM"), input_forget=1)
        with pytest.raises(ValueError, match="input_forget"):
            call(_small("LSTM"), input_forget=2)


@pytest.mark.parametrize("op", OPS)
def test_default_attributes_given_explicitly(op):
    """The defaults, spelled out as an ONNX model may carry them, are accepted."""
    inputs = _small(op, "bidirectional")
    defaults = {"GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"],
                "RNN": ["Tanh"]}[op]
    explicit = FORWARD[op](**inputs, direction="bidirectional", activations=defaults * 2,
                           activation_alpha=[], activation_beta=[], hidden_size=3)
    for out, exp in zip(explicit, FORWARD[op](**inputs, direction="bidirectional")):
        assert np.array_equal(out, exp)


@pytest.mark.parametrize("op", OPS)
def test_bad_attributes(no_kernels, op):
    for call in _calls(op):
        for direction in ("backward", "Forward", None):
            with pytest.raises(ValueError, match="direction"):
                call(_small(op), direction=direction)
        with pytest.raises(ValueError, match="hidden_size: expected R's last dimension 3"):
            call(_small(op), hidden_size=4)
        with pytest.raises(TypeError, match="hidden_size"):
            call(_small(op), hidden_size=3.0)
        with pytest.raises(ValueError, match="layout"):
            call(_small(op), layout=2)
    if op == "GRU":
        for call in _calls(op):
            with pytest.raises(ValueError, match="linear_before_reset"):
                call(_small(op), linear_before_reset=2)


def _bad_inputs(op):
    """(error, message pattern, the changes to a valid layout-0 forward problem)."""
    G, n_in, H = GATES[op], 4, 3
    rows = "hidden_size" if G == 1 else r"%d\*hidden_size" % G
    rng = np.random.default_rng(8100)
    cases = [
        (TypeError, "X: expected a numpy.ndarray", {"X": [[[0.0]]]}),
        (TypeError, "W: expected dtype float64", {"W": np.zeros((1, G * H, n_in), np.float32)}),
        (TypeError, "X: expected dtype float32 or float64", {"X": np.zeros((3, 2, n_in), int)}),
        (ValueError, r"X: expected a 3-d array \[seq_length", {"X": np.zeros((3, n_in))}),
        (ValueError, r"W: expected shape \(1, %d, 4\)" % (G * H),
         {"W": rng.normal(size=(1, G * H, 5))}),
        (ValueError, r"R: expected a 3-d array", {"R": np.zeros((G * H, H))}),
        (ValueError, r"W: expected shape .* = \[num_directions, %s, input_size\]" % rows,
         {"W": rng.normal(size=(1, G * 2, n_in))}),
        (ValueError, r"B: expected shape \(1, %d\)" % (2 * G * H), {"B": np.zeros((1, G * H))}),
        (ValueError, r"initial_h: expected shape \(1, 2, 3\) = \[num_directions, batch_size",
         {"initial_h": np.zeros((2, 1, H))}),
        (TypeError, "sequence_lens: expected None or an integer",
         {"sequence_lens": np.array([1.0, 2.0])}),
        (TypeError, "sequence_lens: expected None or an integer", {"sequence_lens": [1, 2]}),
        (ValueError, r"sequence_lens: expected shape \(2,\)", {"sequence_lens": np.array([1])}),
        (ValueError, r"sequence_lens: expected values in \[0, seq_length=3\]",
         {"sequence_lens": np.array([1, 4])}),
    ]
    if op == "LSTM":
        cases += [
            (ValueError, r"P: expected shape \(1, 9\)", {"P": np.zeros((1, 12))}),
            (ValueError, r"initial_c: expected shape", {"initial_c": np.zeros((1, 3, H))}),
        ]
    return cases


@pytest.mark.parametrize("op", OPS)
def test_bad_inputs(no_kernels, op):
    for error, pattern, change in _bad_inputs(op):
        for call in _calls(op):
            with pytest.raises(error, match=pattern):
                call({**_small(op), **change})


@pytest.mark.parametrize("op", OPS)
def test_bad_inputs_for_the_directions_and_layout(no_kernels, op):
    """num_directions comes from direction, the states' layout from layout."""
    for call in _calls(op):
        with pytest.raises(ValueError, match=r"W: expected shape \(2, "):
            call(_small(op), direction="bidirectional")
        with pytest.raises(ValueError, match=r"initial_h: expected shape \(2, 1, 3\) = "
                                             r"\[batch_size, num_directions, hidden_size\]"):
            call(_to_layout1(_small(op)) | {"initial_h": np.zeros((1, 2, 3))}, layout=1)


@pytest.mark.parametrize("op", OPS)
def test_bad_output_grads_and_workspace(no_kernels, op):
    bp = BACKWARD[op]
    inputs = _small(op, "bidirectional")
    kw = {"direction": "bidirectional"}
    with pytest.raises(ValueError, match=r"dY: expected shape \(3, 2, 2, 3\) = \[seq_length, "
                                         r"num_directions, batch_size, hidden_size\]"):
        bp(**inputs, dY=np.zeros((3, 1, 2, 3)), **kw)
    with pytest.raises(ValueError, match=r"dY_h: expected shape \(2, 2, 3\)"):
        bp(**inputs, dY_h=np.zeros((2, 3)), **kw)
    with pytest.raises(TypeError, match="dY_h: expected dtype float64"):
        bp(**inputs, dY_h=np.zeros((2, 2, 3), np.float32), **kw)
    if op == "LSTM":
        with pytest.raises(ValueError, match=r"dY_c: expected shape \(2, 2, 3\)"):
            bp(**inputs, dY_c=np.zeros((1, 2, 3)), **kw)
    with pytest.raises(TypeError, match="workspace: expected the tuple"):
        bp(**inputs, workspace=[None, None], **kw)
    with pytest.raises(ValueError, match="workspace: expected num_directions=2 entries, got 1"):
        bp(**inputs, workspace=(None,), **kw)


def test_rnn_activations_of_each_direction(no_kernels):
    """An RNN lists one activation per direction: too few or too many are not the defaults
    and not implemented."""
    for call in _calls("RNN"):
        for names in (["Relu"], ["Tanh", "Relu", "Tanh"]):
            with pytest.raises(NotImplementedError, match=r"activations: .*\['Tanh'\] or "
                                                          r"\['Relu'\].* 2 direction"):
                call(_small("RNN", "bidirectional"), direction="bidirectional",
                     activations=names)


# ---------------------------------------------------------------------------------------------
# An RNN with another activation in each direction
# ---------------------------------------------------------------------------------------------
MIXED = {"direction": "bidirectional", "activations": ["Tanh", "Relu"]}


def test_rnn_mixed_activations_against_onnxruntime():
    """Bidirectional RNN, Tanh forward and Relu in reverse, with sequence_lens, against ONNX
    Runtime (float32, F32_FWD_TOL as in test_onnxruntime_float32; Y_h on the rows that ran),
    and each direction equal to a one-direction node with its own activation."""
    lengths = [5, 0, 3, 1]
    inputs = _cast(_problem(_rng("mixed ort"), "RNN", 5, 4, 3, 4, "bidirectional", lengths),
                   np.float32)
    expected = _run_onnxruntime("RNN", inputs, **MIXED)
    Y, Y_h = co.rnn(**inputs, **MIXED)
    ran = np.array(lengths) > 0
    assert_close(Y, expected[0], F32_FWD_TOL, "Y", np.float32)
    assert_close(Y_h[:, ran], expected[1][:, ran], F32_FWD_TOL, "Y_h", np.float32)
    for d, (direction, name) in enumerate((("forward", "Tanh"), ("reverse", "Relu"))):
        one = {k: v if v is None or k in ("X", "sequence_lens") else v[d:d + 1]
               for k, v in inputs.items()}
        Y_d, Y_h_d = co.rnn(**one, direction=direction, activations=[name])
        assert np.array_equal(Y[:, d:d + 1], Y_d) and np.array_equal(Y_h[d:d + 1], Y_h_d)
    # the Relu direction is not a Tanh one
    assert np.max(np.abs(co.rnn(**inputs, direction="bidirectional")[0][:, 1] - Y[:, 1])) > 1e-3


def test_rnn_mixed_activations_gradients_finite_differences():
    """rnn_bp with Tanh forward and Relu in reverse against central differences of rnn
    (FD_EPS, FD_TOL as in test_gradients_finite_differences), layout 1, sequence_lens."""
    rng = _rng("mixed fd")
    inputs = _to_layout1(_problem(rng, "RNN", 4, 3, 2, 3, "bidirectional", [4, 0, 2]))
    attrs = dict(MIXED, layout=1)
    dout = _output_grads(rng, co.rnn(**inputs, **attrs), ("dY", "dY_h"))
    grads = co.rnn_bp(**inputs, **dout, **attrs)
    names = ["X", "W", "R", "B", "initial_h"]

    def loss(*arrays):
        return _loss("RNN", {**inputs, **dict(zip(names, arrays))}, attrs, dout)

    numeric = central_diff_grad(loss, [inputs[k] for k in names], FD_EPS)
    for name, expected in zip(names, numeric):
        assert_close(getattr(grads, "d" + name), expected, FD_TOL, "d" + name, np.float64)


# ---------------------------------------------------------------------------------------------
# The returned tuples
# ---------------------------------------------------------------------------------------------
def _documented(function, n):
    """The n-th entry of the Returns section of function's (numpydoc) docstring, a NamedTuple's
    name on its own line and its fields below it as ``(fields...)``: (Name, (fields...))."""
    returns = function.__doc__.split("Returns\n")[1].split("Raises\n")[0]
    name, fields = re.findall(r"^\s*(\w+)\n\s+``\(([^)]*)\)``", returns, re.M)[n]
    return name, tuple(f.strip() for f in fields.split(","))


@pytest.mark.parametrize("op", OPS)
def test_outputs_and_gradients_are_the_named_tuples_of_the_docstrings(op):
    """Each function returns the NamedTuple of cells.onnx that its docstring's Returns section
    names, with the fields it lists (the forward ones with return_workspace=True the
    second one named: the outputs and the per-direction workspaces)."""
    inputs = _small(op, "bidirectional", peepholes=op == "LSTM")
    attrs = {"direction": "bidirectional"}
    outputs = FORWARD[op](**inputs, **attrs)
    dout = _output_grads(np.random.default_rng(8200), outputs, ("dY", "dY_h", "dY_c"))
    kept = FORWARD[op](**inputs, **attrs, return_workspace=True)
    for function, n, result in ((FORWARD[op], 0, outputs), (FORWARD[op], 1, kept),
                                (BACKWARD[op], 0, BACKWARD[op](**inputs, **dout, **attrs))):
        name, fields = _documented(function, n)
        assert type(result) is getattr(co, name) and result._fields == fields
    assert outputs._fields == OUTPUTS[op] and kept._fields == OUTPUTS[op] + ("workspace",)
    assert len(kept.workspace) == 2
    for out, exp in zip(kept, outputs):
        assert np.array_equal(out, exp)
