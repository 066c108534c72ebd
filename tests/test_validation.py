"""Bad input is rejected with ValueError (shapes) / TypeError (types), naming the argument and,
for shape errors, quoting the given shape as Python prints the tuple."""
import re

import numpy as np
import pytest

import cells

bS, N_IN, H, SL = 3, 5, 4, 2


def _cell_args(dtype=np.float64):
    rng = np.random.default_rng(0)
    return dict(
        x=rng.normal(size=(bS, N_IN)).astype(dtype),
        hI=rng.normal(size=(bS, H)).astype(dtype),
        Wx=rng.normal(size=(N_IN, 3 * H)).astype(dtype),
        Wh=rng.normal(size=(H, 3 * H)).astype(dtype),
        b=rng.normal(size=(3 * H,)).astype(dtype),
    )


def _seq_args(dtype=np.float64):
    a = _cell_args(dtype)
    a["x"] = np.random.default_rng(1).normal(size=(SL, bS, N_IN)).astype(dtype)
    return a


def _block_args(dtype=np.float64):
    rng = np.random.default_rng(2)
    return dict(
        x=rng.normal(size=(bS, N_IN)).astype(dtype),
        hLast=rng.normal(size=(bS, H)).astype(dtype),
        Wru=rng.normal(size=(N_IN + H, 2 * H)).astype(dtype),
        Wc=rng.normal(size=(N_IN + H, H)).astype(dtype),
        bru=rng.normal(size=(2 * H,)).astype(dtype),
        bc=rng.normal(size=(H,)).astype(dtype),
    )


def _names(msg, name):
    return re.search(r"(?<![A-Za-z0-9_])" + re.escape(name) + r"(?![A-Za-z0-9_])", msg) is not None


def _check(excinfo, candidates):
    """The message names one of the candidate arguments, together with that argument's shape
    (when a shape is given)."""
    msg = str(excinfo.value)
    for name, shape in candidates:
        if _names(msg, name) and (shape is None or str(tuple(shape)) in msg):
            return
    raise AssertionError(f"message {msg!r} does not name any of {candidates}")


def _call(fn, args, extra=()):
    """Call fn with the arrays positionally (API order), then the extra positionals."""
    return fn(*args.values(), *extra)


def _upstream(fn):
    """The extra positionals of function `fn` (by name): dLdh for the backward ones."""
    return {"gruCellBp": (np.ones((bS, H)),),
            "gruTimeLoopBp": (np.ones((SL, bS, H)),)}.get(fn, ())


# ---------------------------------------------------------------------------------------------
# the valid calls work (so every failure below is caused by the one change it makes)
# ---------------------------------------------------------------------------------------------
def test_valid_calls_work():
    a = _cell_args()
    cells.gruCell(**a)
    cells.gruCellBp(*a.values(), np.ones((bS, H)))
    s = _seq_args()
    cells.gruTimeLoop(**s)
    cells.gruTimeLoopBp(*s.values(), np.ones((SL, bS, H)), dLdhLast=np.ones((bS, H)))
    k = _block_args()
    cells.gruBlockCell(**k)
    cells.gruBlockCellBp(*k.values(), *(np.ones((bS, H)),) * 4)


# ---------------------------------------------------------------------------------------------
# shape errors with a single culprit (inconsistent on its own or with everything else)
# ---------------------------------------------------------------------------------------------
CELL_SHAPE_CASES = [
    ("x", (N_IN,)),                  # rank 1
    ("x", (1, bS, N_IN)),            # rank 3
    ("hI", (H,)),
    ("hI", (1, bS, H)),
    ("Wx", (N_IN, 3 * H + 1)),
    ("Wx", (N_IN,)),
    ("Wh", (H, 3 * H - 1)),          # e.g. (4, 11)
    ("Wh", (H, 3 * H, 1)),
    ("b", (3 * H + 1,)),
    ("b", (3, 3 * H)),
    ("b", (2, 3 * H - 1)),
    ("b", (1, 2, 3 * H)),
    ("b", ()),
]


@pytest.mark.parametrize("name,shape", CELL_SHAPE_CASES)
@pytest.mark.parametrize("fn", ["gruCell", "gruCellBp", "gruTimeLoop", "gruTimeLoopBp"])
def test_shape_errors_single_culprit(fn, name, shape):
    seq = fn.startswith("gruTimeLoop")
    a = _seq_args() if seq else _cell_args()
    if name == "x" and seq:
        shape = (SL,) + shape if len(shape) != 3 else (1, SL, bS, N_IN)  # rank 2 / rank 4
    a[name] = np.zeros(shape)
    extra = _upstream(fn)
    with pytest.raises(ValueError) as ei:
        _call(getattr(cells, fn), a, extra)
    _check(ei, [(name, shape)])


def test_shape_error_message_example():
    a = _cell_args()
    a["Wh"] = np.zeros((4, 11))
    with pytest.raises(ValueError, match=r"(?s)(?=.*\bWh\b)(?=.*\(4, 11\))"):
        cells.gruCell(**a)


CROSS_CASES = [
    # (argument changed, new shape, arguments the message may blame)
    ("hI", (bS - 1, H), ["hI", "x"]),          # batch mismatch
    ("x", (bS, N_IN + 1), ["x", "Wx"]),        # nIn mismatch
    ("Wx", (N_IN + 1, 3 * H), ["Wx", "x"]),
    ("hI", (bS, H + 1), ["hI", "Wh", "Wx", "b"]),  # nOut mismatch
    ("Wh", (H + 1, 3 * H), ["Wh", "hI"]),
    ("b", (3 * H + 3,), ["b", "hI", "Wh", "Wx"]),
]


@pytest.mark.parametrize("name,shape,blame", CROSS_CASES)
@pytest.mark.parametrize("fn", ["gruCell", "gruCellBp", "gruTimeLoop", "gruTimeLoopBp"])
def test_shape_errors_mismatch(fn, name, shape, blame):
    seq = fn.startswith("gruTimeLoop")
    a = _seq_args() if seq else _cell_args()
    if name == "x" and seq:
        shape = (SL,) + shape
    a[name] = np.zeros(shape)
    extra = _upstream(fn)
    with pytest.raises(ValueError) as ei:
        _call(getattr(cells, fn), a, extra)
    _check(ei, [(n, a[n].shape) for n in blame])


@pytest.mark.parametrize("shape", [(bS, H + 1), (bS + 1, H), (H,), (1, bS, H)])
def test_gru_cell_bp_dLdh_shape(shape):
    with pytest.raises(ValueError) as ei:
        cells.gruCellBp(*_cell_args().values(), np.ones(shape))
    _check(ei, [("dLdh", shape)])


@pytest.mark.parametrize("shape", [(SL + 1, bS, H), (SL, bS, H + 1), (bS, H), (SL, bS + 1, H)])
def test_gru_time_loop_bp_dLdh_shape(shape):
    with pytest.raises(ValueError) as ei:
        cells.gruTimeLoopBp(*_seq_args().values(), np.ones(shape))
    _check(ei, [("dLdh", shape)])


@pytest.mark.parametrize("shape", [(bS, H + 1), (bS + 1, H), (1, bS, H), (H,)])
def test_gru_time_loop_bp_dLdhLast_shape(shape):
    with pytest.raises(ValueError) as ei:
        cells.gruTimeLoopBp(*_seq_args().values(), None, dLdhLast=np.ones(shape))
    _check(ei, [("dLdhLast", shape)])


BLOCK_CASES = [
    ("x", (N_IN,), ["x"]),
    ("hLast", (bS, H, 1), ["hLast"]),
    ("Wru", (N_IN + H, 2 * H + 1), ["Wru"]),
    ("Wru", (N_IN + H + 1, 2 * H), ["Wru", "x", "hLast"]),
    ("Wc", (N_IN + H, H + 1), ["Wc", "hLast"]),
    ("Wc", (N_IN + H - 1, H), ["Wc", "x", "hLast"]),
    ("bru", (2 * H + 1,), ["bru"]),
    ("bru", (1, 2 * H), ["bru"]),
    ("bc", (H + 1,), ["bc"]),
    ("hLast", (bS + 1, H), ["hLast", "x"]),
]


@pytest.mark.parametrize("name,shape,blame", BLOCK_CASES)
@pytest.mark.parametrize("bp", [False, True])
def test_block_shape_errors(bp, name, shape, blame):
    a = _block_args()
    a[name] = np.zeros(shape)
    with pytest.raises(ValueError) as ei:
        if bp:
            cells.gruBlockCellBp(*a.values(), None, None, None, np.ones((bS, H)))
        else:
            cells.gruBlockCell(**a)
    _check(ei, [(n, a[n].shape) for n in blame])


@pytest.mark.parametrize("pos,name", [(0, "dLdr"), (1, "dLdu"), (2, "dLdc"), (3, "dLdh")])
def test_block_bp_upstream_shape(pos, name):
    ups = [None] * 4
    ups[pos] = np.ones((bS, H + 1))
    with pytest.raises(ValueError) as ei:
        cells.gruBlockCellBp(*_block_args().values(), *ups)
    _check(ei, [(name, (bS, H + 1))])


# ---------------------------------------------------------------------------------------------
# type errors
# ---------------------------------------------------------------------------------------------
TYPE_CASES = {
    "Wh-float32": ("Wh", lambda a: a.astype(np.float32)),      # mixed float dtypes
    "hI-float32": ("hI", lambda a: a.astype(np.float32)),
    "b-float32": ("b", lambda a: a.astype(np.float32)),
    "Wx-int64": ("Wx", lambda a: a.astype(np.int64)),          # integer
    "x-int32": ("x", lambda a: a.astype(np.int32)),
    "Wh-float16": ("Wh", lambda a: a.astype(np.float16)),      # other float
    "Wh-complex128": ("Wh", lambda a: a.astype(np.complex128)),
    "x-list": ("x", lambda a: a.tolist()),                     # list
    "b-scalar": ("b", lambda a: 1.0),                          # scalar
    "Wh-None": ("Wh", lambda a: None),                         # not an array at all
    "x-None": ("x", lambda a: None),
}


@pytest.mark.parametrize("name,make", list(TYPE_CASES.values()), ids=list(TYPE_CASES))
@pytest.mark.parametrize("fn", ["gruCell", "gruCellBp", "gruTimeLoop", "gruTimeLoopBp"])
def test_type_errors(fn, name, make):
    seq = fn.startswith("gruTimeLoop")
    a = _seq_args() if seq else _cell_args()
    a[name] = make(a[name])
    extra = _upstream(fn)
    with pytest.raises(TypeError) as ei:
        _call(getattr(cells, fn), a, extra)
    _check(ei, [(name, None)])


def test_type_errors_on_upstream_and_float32_problem():
    a = _cell_args(np.float32)
    with pytest.raises(TypeError) as ei:
        cells.gruCellBp(*a.values(), np.ones((bS, H)))  # float64 dLdh with float32 inputs
    _check(ei, [("dLdh", None)])
    with pytest.raises(TypeError) as ei:
        cells.gruCellBp(*a.values(), np.ones((bS, H), np.float32), gates=np.ones((bS, 3 * H)))
    _check(ei, [("gates", None)])
    s = _seq_args(np.float32)
    with pytest.raises(TypeError) as ei:
        cells.gruTimeLoopBp(*s.values(), np.ones((SL, bS, H), np.float32),
                            dLdhLast=np.ones((bS, H)))
    _check(ei, [("dLdhLast", None)])
    with pytest.raises(TypeError) as ei:
        cells.gruTimeLoopBp(*s.values(), [[[0.0] * H] * bS] * SL)
    _check(ei, [("dLdh", None)])


BLOCK_TYPE_CASES = {
    "Wc-float32": ("Wc", lambda a: a.astype(np.float32)),
    "bru-int64": ("bru", lambda a: a.astype(np.int64)),
    "x-list": ("x", lambda a: a.tolist()),
    "bc-scalar": ("bc", lambda a: 0.5),
    "Wru-None": ("Wru", lambda a: None),
}


@pytest.mark.parametrize("name,make", list(BLOCK_TYPE_CASES.values()), ids=list(BLOCK_TYPE_CASES))
def test_block_type_errors(name, make):
    a = _block_args()
    a[name] = make(a[name])
    with pytest.raises(TypeError) as ei:
        cells.gruBlockCell(**a)
    _check(ei, [(name, None)])
    with pytest.raises(TypeError) as ei:
        cells.gruBlockCellBp(*a.values(), None, None, None, np.ones((bS, H)))
    _check(ei, [(name, None)])


def test_block_bp_upstream_dtype():
    a = _block_args(np.float32)
    with pytest.raises(TypeError) as ei:
        cells.gruBlockCellBp(*a.values(), None, np.ones((bS, H)), None, None)
    _check(ei, [("dLdu", None)])


# ---------------------------------------------------------------------------------------------
# keyword options
# ---------------------------------------------------------------------------------------------
def _each_fn():
    a, s, k = _cell_args(), _seq_args(), _block_args()
    yield "gruCell", lambda **kw: cells.gruCell(**a, **kw)
    yield "gruCellBp", lambda **kw: cells.gruCellBp(*a.values(), np.ones((bS, H)), **kw)
    yield "gruTimeLoop", lambda **kw: cells.gruTimeLoop(**s, **kw)
    yield "gruTimeLoopBp", lambda **kw: cells.gruTimeLoopBp(*s.values(), None, **kw)
    yield "gruBlockCell", lambda **kw: cells.gruBlockCell(**k, **kw)
    yield "gruBlockCellBp", lambda **kw: cells.gruBlockCellBp(*k.values(), None, None, None,
                                                              np.ones((bS, H)), **kw)


@pytest.mark.parametrize("value", [1, 0, "yes", None, 1.0])
def test_linear_before_reset_must_be_bool(value):
    for name, call in _each_fn():
        if name.startswith("gruBlock"):
            continue
        with pytest.raises((TypeError, ValueError)) as ei:
            call(linear_before_reset=value)
        _check(ei, [("linear_before_reset", None)])


@pytest.mark.parametrize("value", [0, -1, 1.5, 2.0, "2"])
def test_n_threads_must_be_positive_int(value):
    for _, call in _each_fn():
        with pytest.raises((TypeError, ValueError)) as ei:
            call(n_threads=value)
        _check(ei, [("n_threads", None)])


def test_n_threads_valid_values_accepted():
    for _, call in _each_fn():
        for nt in (None, 1, 2, 3):
            call(n_threads=nt)
