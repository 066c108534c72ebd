"""Bad input to the LSTM functions is rejected with ValueError (shapes, values) / TypeError (types),
naming the argument and, for shape errors, quoting the given shape as Python prints the tuple."""
import re

import numpy as np
import pytest

import cells

bS, N_IN, H, SL = 3, 5, 4, 2
FNS = ["lstmLayerCell", "lstmLayerCellBp", "lstmLayerTimeLoop", "lstmLayerTimeLoopBp"]


def _args(seq, dtype=np.float64):
    rng = np.random.default_rng(0)
    return dict(
        x=rng.normal(size=(SL, bS, N_IN) if seq else (bS, N_IN)).astype(dtype),
        Wx=rng.normal(size=(N_IN, 4 * H)).astype(dtype),
        Wr=rng.normal(size=(H, 4 * H)).astype(dtype),
        b=rng.normal(size=(4 * H,)).astype(dtype),
        hI=rng.normal(size=(bS, H)).astype(dtype),
        cI=rng.normal(size=(bS, H)).astype(dtype),
    )


def _call(fn, a, Wp=None, dtype=np.float64, **kw):
    """Call fn with the arrays positionally (API order), the upstream gradients it needs, Wp."""
    f = getattr(cells, fn)
    if fn == "lstmLayerCellBp":
        return f(*a.values(), np.ones((bS, H), dtype), np.ones((bS, H), dtype), Wp=Wp, **kw)
    if fn == "lstmLayerTimeLoopBp":
        return f(*a.values(), np.ones((SL, bS, H), dtype), Wp=Wp, **kw)
    return f(*a.values(), Wp=Wp, **kw)


def _names(msg, name):
    return re.search(r"(?<![A-Za-z0-9_])" + re.escape(name) + r"(?![A-Za-z0-9_])", msg) is not None


def _check(excinfo, candidates):
    """The message names one of the candidate arguments, with that argument's shape (when one is
    given)."""
    msg = str(excinfo.value)
    for name, shape in candidates:
        if _names(msg, name) and (shape is None or str(tuple(shape)) in msg):
            return
    raise AssertionError(f"message {msg!r} does not name any of {candidates}")


@pytest.mark.parametrize("fn", FNS)
def test_valid_calls_work(fn):
    seq = fn.startswith("lstmLayerTimeLoop")
    _call(fn, _args(seq), Wp=np.ones(3 * H))
    a = dict(_args(seq), b=None, hI=None, cI=None)
    _call(fn, a)


SHAPE_CASES = [
    # (argument, new shape (the x shapes are for the cell; a time step is prepended for
    # sequences), arguments the message may blame)
    ("x", (N_IN,), ["x"]),                          # rank
    ("x", (1, 1, bS, N_IN), ["x"]),
    ("x", (bS, N_IN + 1), ["x", "Wx"]),             # nIn mismatch
    ("Wx", (N_IN + 1, 4 * H), ["Wx", "x"]),
    ("Wx", (N_IN, 4 * H + 1), ["Wx"]),
    ("Wx", (N_IN * 4 * H,), ["Wx"]),
    ("Wr", (H, 4 * H - 1), ["Wr"]),
    ("Wr", (H, 4 * H, 1), ["Wr"]),
    ("Wr", (4 * H,), ["Wr"]),
    ("Wr", (H + 1, 4 * H), ["Wr"]),
    ("b", (4 * H + 1,), ["b"]),
    ("b", (2, 4 * H), ["b"]),
    ("b", (), ["b"]),
    ("hI", (bS - 1, H), ["hI", "x"]),               # batch mismatch
    ("hI", (bS, H + 1), ["hI", "Wr"]),              # nOut mismatch
    ("hI", (H,), ["hI"]),
    ("cI", (bS + 1, H), ["cI", "x"]),
    ("cI", (bS, H - 1), ["cI", "Wr"]),
    ("cI", (1, bS, H), ["cI"]),
]


@pytest.mark.parametrize("name,shape,blame", SHAPE_CASES)
@pytest.mark.parametrize("fn", FNS)
def test_shape_errors(fn, name, shape, blame):
    seq = fn.startswith("lstmLayerTimeLoop")
    a = _args(seq)
    if name == "x" and seq:
        shape = (SL,) + shape
    a[name] = np.zeros(shape)
    with pytest.raises(ValueError) as ei:
        _call(fn, a)
    _check(ei, [(n, a[n].shape) for n in blame])


@pytest.mark.parametrize("shape", [(3 * H + 1,), (H, 3), (4 * H,), ()])
@pytest.mark.parametrize("fn", FNS)
def test_peephole_shape_errors(fn, shape):
    with pytest.raises(ValueError) as ei:
        _call(fn, _args(fn.startswith("lstmLayerTimeLoop")), Wp=np.zeros(shape))
    _check(ei, [("Wp", shape)])


@pytest.mark.parametrize("pos,name", [(0, "dLdh"), (1, "dLdc")])
@pytest.mark.parametrize("shape", [(bS, H + 1), (bS + 1, H), (H,), (1, bS, H)])
def test_cell_bp_upstream_shapes(pos, name, shape):
    ups = [None, None]
    ups[pos] = np.ones(shape)
    with pytest.raises(ValueError) as ei:
        cells.lstmLayerCellBp(*_args(False).values(), *ups)
    _check(ei, [(name, shape)])


@pytest.mark.parametrize("name,shape", [
    ("dLdh", (SL + 1, bS, H)), ("dLdh", (SL, bS, H + 1)), ("dLdh", (bS, H)),
    ("dLdhL", (bS, H + 1)), ("dLdhL", (1, bS, H)), ("dLdcL", (bS + 1, H)), ("dLdcL", (H,)),
])
def test_time_loop_bp_upstream_shapes(name, shape):
    kw = {"dLdh": None, name: np.ones(shape)}
    with pytest.raises(ValueError) as ei:
        cells.lstmLayerTimeLoopBp(*_args(True).values(), kw.pop("dLdh"), **kw)
    _check(ei, [(name, shape)])


TYPE_CASES = {
    "Wr-float32": ("Wr", lambda a: a.astype(np.float32)),      # mixed float dtypes
    "cI-float32": ("cI", lambda a: a.astype(np.float32)),
    "b-float32": ("b", lambda a: a.astype(np.float32)),
    "Wx-int64": ("Wx", lambda a: a.astype(np.int64)),          # integer
    "x-int32": ("x", lambda a: a.astype(np.int32)),
    "Wr-float16": ("Wr", lambda a: a.astype(np.float16)),      # other float
    "hI-complex128": ("hI", lambda a: a.astype(np.complex128)),
    "x-list": ("x", lambda a: a.tolist()),                     # list
    "b-scalar": ("b", lambda a: 1.0),                          # scalar
    "Wx-None": ("Wx", lambda a: None),                         # a required array is None
    "Wr-None": ("Wr", lambda a: None),
    "x-None": ("x", lambda a: None),
}


@pytest.mark.parametrize("name,make", list(TYPE_CASES.values()), ids=list(TYPE_CASES))
@pytest.mark.parametrize("fn", FNS)
def test_type_errors(fn, name, make):
    a = _args(fn.startswith("lstmLayerTimeLoop"))
    a[name] = make(a[name])
    with pytest.raises(TypeError) as ei:
        _call(fn, a)
    _check(ei, [(name, None)])


@pytest.mark.parametrize("fn", FNS)
def test_type_errors_on_peepholes_and_upstream(fn):
    seq = fn.startswith("lstmLayerTimeLoop")
    with pytest.raises(TypeError) as ei:
        _call(fn, _args(seq, np.float32), Wp=np.ones(3 * H), dtype=np.float32)
    _check(ei, [("Wp", None)])
    with pytest.raises(TypeError) as ei:
        _call(fn, _args(seq), Wp=[1.0] * (3 * H))
    _check(ei, [("Wp", None)])
    if fn == "lstmLayerCellBp":
        with pytest.raises(TypeError) as ei:
            cells.lstmLayerCellBp(*_args(False, np.float32).values(), None, np.ones((bS, H)))
        _check(ei, [("dLdc", None)])
    if fn == "lstmLayerTimeLoopBp":
        with pytest.raises(TypeError) as ei:
            cells.lstmLayerTimeLoopBp(*_args(True, np.float32).values(), None,
                                      dLdcL=np.ones((bS, H)))
        _check(ei, [("dLdcL", None)])
        with pytest.raises(TypeError) as ei:
            cells.lstmLayerTimeLoopBp(*_args(True).values(), [[[0.0] * H] * bS] * SL)
        _check(ei, [("dLdh", None)])


# ---------------------------------------------------------------------------------------------
# keyword options
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value,error", [(-0.5, ValueError), (-1, ValueError),
                                         (float("nan"), ValueError), ("1", TypeError),
                                         (None, TypeError), (True, TypeError),
                                         (np.ones(1), TypeError)])
@pytest.mark.parametrize("fn", FNS)
def test_cell_clip_must_be_a_float_at_least_zero(fn, value, error):
    with pytest.raises(error) as ei:
        _call(fn, _args(fn.startswith("lstmLayerTimeLoop")), cell_clip=value)
    _check(ei, [("cell_clip", None)])


@pytest.mark.parametrize("fn", FNS)
def test_cell_clip_valid_values(fn):
    for value in (0, 0.0, 1, 2.5, np.float32(0.5), float("inf")):
        _call(fn, _args(fn.startswith("lstmLayerTimeLoop")), cell_clip=value)


@pytest.mark.parametrize("option", ["forward", "return_workspace"])
@pytest.mark.parametrize("value", [1, 0, "yes", None])
def test_flags_must_be_bool(option, value):
    fns = ["lstmLayerTimeLoop"] + (["lstmLayerTimeLoopBp"] if option == "forward" else [])
    for fn in fns:
        with pytest.raises(TypeError) as ei:
            _call(fn, _args(True), **{option: value})
        _check(ei, [(option, None)])


@pytest.mark.parametrize("value,error,shape", [
    (np.array([1, 2]), ValueError, (2,)),                    # wrong batch size
    (np.array([[1, 2, 0]]), ValueError, (1, 3)),
    (np.array([1, SL + 1, 0]), ValueError, None),           # out of range
    (np.array([1, -1, 0]), ValueError, None),
    (np.array([1.0, 2.0, 0.0]), TypeError, None),           # not integers
    ([1, 2, 0], TypeError, None),
])
@pytest.mark.parametrize("fn", ["lstmLayerTimeLoop", "lstmLayerTimeLoopBp"])
def test_seq_len_errors(fn, value, error, shape):
    with pytest.raises(error) as ei:
        _call(fn, _args(True), seq_len=value)
    _check(ei, [("seq_len", shape)])


@pytest.mark.parametrize("fn", FNS)
@pytest.mark.parametrize("value", [0, -1, 1.5, "2", True])
def test_n_threads_must_be_positive_int(fn, value):
    with pytest.raises((TypeError, ValueError)) as ei:
        _call(fn, _args(fn.startswith("lstmLayerTimeLoop")), n_threads=value)
    _check(ei, [("n_threads", None)])


@pytest.mark.parametrize("fn", FNS)
def test_keyword_only_options(fn):
    """Everything after the arrays (and the upstream gradients of the Bp functions) is keyword
    only."""
    seq = fn.startswith("lstmLayerTimeLoop")
    a = list(_args(seq).values())
    ups = {"lstmLayerCellBp": [None, None], "lstmLayerTimeLoopBp": [None]}.get(fn, [])
    with pytest.raises(TypeError):
        getattr(cells, fn)(*a, *ups, np.ones(3 * H))


@pytest.mark.parametrize("option,value,error", [
    ("gate_act", 11, ValueError), ("cell_act", -1, ValueError), ("out_act", 2.0, TypeError),
    ("gate_act", True, TypeError), ("cell_act", None, TypeError), ("gate_alpha", "1", TypeError),
    ("out_beta", None, TypeError), ("cell_alpha", True, TypeError)])
@pytest.mark.parametrize("fn", FNS)
def test_activation_options(fn, option, value, error):
    """An activation is a code of libnd4j's (cells.lstm.ACTIVATIONS) with real alpha, beta."""
    with pytest.raises(error) as ei:
        _call(fn, _args(fn.startswith("lstmLayerTimeLoop")), **{option: value})
    _check(ei, [(option, None)])
