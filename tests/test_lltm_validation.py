"""Bad input to the LLTM functions is rejected before any compiled code runs: ValueError for a
shape or value, TypeError for a kind or dtype, each naming the argument (and quoting a given
shape as Python prints the tuple)."""
import re

import numpy as np
import pytest

import cells

B, N_IN, S, SL = 3, 5, 4, 2


def _cell(dtype=np.float64):
    rng = np.random.default_rng(0)
    return dict(input=rng.normal(size=(B, N_IN)), weights=rng.normal(size=(3 * S, S + N_IN)),
                bias=rng.normal(size=3 * S), old_h=rng.normal(size=(B, S)),
                old_cell=rng.normal(size=(B, S)))


def _bp():
    a = _cell()
    out = cells.lltm_forward(**a)
    rng = np.random.default_rng(1)
    return dict(grad_h=rng.normal(size=(B, S)), grad_cell=rng.normal(size=(B, S)),
                new_cell=out[1], input_gate=out[2], output_gate=out[3], candidate_cell=out[4],
                X=out[5], gate_weights=out[6], weights=a["weights"])


def _seq():
    rng = np.random.default_rng(2)
    return dict(x=rng.normal(size=(SL, B, N_IN)), W=rng.normal(size=(3 * S, S + N_IN)),
                b=rng.normal(size=3 * S), hI=rng.normal(size=(B, S)), cI=rng.normal(size=(B, S)))


def _seq_bp():
    return dict(_seq(), dLdh=np.ones((SL, B, S)))


def _named(msg, name, shape=None):
    named = re.search(r"(?<![A-Za-z0-9_.])" + re.escape(name) + r"(?![A-Za-z0-9_])", msg)
    return named is not None and (shape is None or str(tuple(shape)) in msg)


def test_valid_calls_work():
    cells.lltm_forward(**_cell())
    cells.lltm_backward(**_bp())
    cells.lltmTimeLoop(**_seq(), seq_len=np.array([2, 0, 1]), forward=False)
    cells.lltmTimeLoopBp(**_seq_bp(), dLdhL=np.ones((B, S)), dLdcL=np.ones((B, S)),
                         seq_len=np.array([2, 0, 1]), forward=False)


CASES = {
    "lltm_forward": (cells.lltm_forward, _cell, [
        ("input", (N_IN,)), ("input", (1, B, N_IN)), ("old_h", (B,)), ("old_h", (B + 1, S)),
        ("old_cell", (B, S + 1)), ("weights", (3 * S, S + N_IN + 1)), ("weights", (S, 3 * S)),
        ("bias", (3 * S + 1,)), ("bias", (1, 3 * S)),
    ]),
    "lltm_backward": (cells.lltm_backward, _bp, [
        ("grad_h", (B,)), ("grad_cell", (B, S + 1)), ("new_cell", (B + 1, S)),
        ("input_gate", (B, 2)), ("output_gate", (S,)), ("candidate_cell", (B, S, 1)),
        ("X", (B + 1, S + N_IN)), ("X", (B, S - 1)), ("gate_weights", (B, 2 * S)),
        ("weights", (3 * S, S + N_IN + 2)),
    ]),
    "lltmTimeLoop": (cells.lltmTimeLoop, _seq, [
        ("x", (B, N_IN)), ("hI", (B, S, 1)), ("hI", (B + 1, S)), ("cI", (B, S + 1)),
        ("W", (3 * S + 1, S + N_IN)), ("b", (2 * S,)),
    ]),
    "lltmTimeLoopBp": (cells.lltmTimeLoopBp, _seq_bp, [
        ("x", (SL, B)), ("W", (3 * S, S)), ("cI", (B,)), ("dLdh", (SL, B, S + 1)),
        ("dLdh", (B, S)),
    ]),
}


@pytest.mark.parametrize("fn,name,shape", [(f, n, s) for f, (_, _, cases) in CASES.items()
                                           for n, s in cases])
def test_shape_errors_name_the_argument(fn, name, shape):
    func, make, _ = CASES[fn]
    args = make()
    args[name] = np.zeros(shape)
    with pytest.raises(ValueError) as ei:
        func(**args)
    assert _named(str(ei.value), name, shape), str(ei.value)


@pytest.mark.parametrize("fn", sorted(CASES))
def test_type_errors_name_the_argument(fn):
    func, make, _ = CASES[fn]
    names = list(make())
    for name in (names[0], names[-1]):
        for bad in (make()[name].tolist(), make()[name].astype(np.int64),
                    make()[name].astype(np.float32), None):
            if bad is None and name == "dLdh":
                continue  # dLdh=None is valid: no gradient arrives at the outputs
            args = make()
            args[name] = bad
            with pytest.raises(TypeError) as ei:
                func(**args)
            assert _named(str(ei.value), name), str(ei.value)


@pytest.mark.parametrize("name,value", [("dLdhL", np.ones((B, S + 1))),
                                        ("dLdcL", np.ones((B + 1, S)))])
def test_final_state_gradient_shapes(name, value):
    with pytest.raises(ValueError) as ei:
        cells.lltmTimeLoopBp(**_seq_bp(), **{name: value})
    assert _named(str(ei.value), name, value.shape)


@pytest.mark.parametrize("fn", ["lltmTimeLoop", "lltmTimeLoopBp"])
def test_seq_len_errors(fn):
    func, make = CASES[fn][:2]
    for bad, err in ((np.array([0, 3, 1]), ValueError), (np.array([-1, 1, 1]), ValueError),
                     (np.array([1, 1]), ValueError), (np.array([1.0, 1.0, 1.0]), TypeError),
                     ([1, 1, 1], TypeError)):
        with pytest.raises(err) as ei:
            func(**make(), seq_len=bad)
        assert _named(str(ei.value), "seq_len"), str(ei.value)
    with pytest.raises(ValueError, match=r"seq_len.*\(2,\)"):
        func(**make(), seq_len=np.array([1, 1]))


@pytest.mark.parametrize("fn", sorted(CASES))
def test_flag_and_thread_errors(fn):
    func, make = CASES[fn][:2]
    for bad in (0, "2", 1.5):
        with pytest.raises((TypeError, ValueError), match="n_threads"):
            func(**make(), n_threads=bad)
    if fn.startswith("lltmTime"):
        with pytest.raises(TypeError, match="forward"):
            func(**make(), forward=1)
    if fn == "lltmTimeLoop":
        with pytest.raises(TypeError, match="return_workspace"):
            func(**make(), return_workspace="yes")
