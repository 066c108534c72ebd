"""haste's LayerNorm LSTM, LayerNorm GRU and IndRNN as cells' families (cells.layer_norm_lstm,
cells.layer_norm_gru, cells.indrnn): against the independent references of
tests/haste_reference.py, forward (NumPy, float64 and float32, 1, 2 and 3 threads) and every
gradient (autograd of the PyTorch step loops, float64), with each zoneout mode; prepared nets
(the same bits for any chunks, threads and rows; zoneout's eval mode; pickling); bad input.
(Central differences, seq_len, reverse, dtypes, empty dimensions and workspaces:
tests/test_families.py, from the declarations.)"""
import pickle

import numpy as np
import pytest
import haste_reference as ref

import cells

torch = pytest.importorskip("torch")

# Every test here runs on each instruction set this CPU runs (conftest.py).
pytestmark = pytest.mark.usefixtures("each_instruction_set")


sL, bS, nIn, nOut = 5, 3, 4, 6
# float32 against the float64 reference on the same inputs: a LayerNorm divides by the row's
# standard deviation (~0.3 here, not small), so each pre-activation keeps the ~1e-6 rounding of
# its products; carried over 5 contractive steps the states stay within 2e-5.
F32_TOL = 2e-5


def draw(family, dtype=np.float64, seed=0, bS=bS, nOut=nOut):
    """Random arguments of `family`'s time loop by name, in its order: inputs N(0, 1), states
    U(-0.9, 0.9), weights N(0, 0.4²), gains 1 + N(0, 0.2²), biases N(0, 0.3²)."""
    rng = np.random.default_rng(seed)

    def n(*shape, scale):
        return (scale * rng.standard_normal(shape)).astype(dtype)

    x = n(sL, bS, nIn, scale=1.0)
    hI = rng.uniform(-0.9, 0.9, (bS, nOut)).astype(dtype)
    if family == "layer_norm_lstm":
        G = 4 * nOut
        return dict(x=x, Wx=n(nIn, G, scale=0.4), Wh=n(nOut, G, scale=0.4),
                    b=n(G, scale=0.3), gamma=1 + n(2, G, scale=0.2),
                    gamma_h=1 + n(nOut, scale=0.2), beta_h=n(nOut, scale=0.3), hI=hI,
                    cI=rng.uniform(-0.9, 0.9, (bS, nOut)).astype(dtype))
    if family == "layer_norm_gru":
        G = 3 * nOut
        return dict(x=x, Wx=n(nIn, G, scale=0.4), Wh=n(nOut, G, scale=0.4), b=n(G, scale=0.3),
                    bh=n(G, scale=0.3), gamma=1 + n(2, G, scale=0.2), hI=hI)
    return dict(x=x, hI=hI, Wx=n(nIn, nOut, scale=0.4),
                u=rng.uniform(-0.9, 0.9, nOut).astype(dtype), b=n(nOut, scale=0.3))


def zoneouts(dtype, seed=9):
    """The three modes: none, eval (p) and training (a Bernoulli(1 - p) mask)."""
    mask = (np.random.default_rng(seed).random((sL, bS, nOut)) >= 0.3).astype(dtype)
    return {"none": None, "eval": 0.3, "train": mask}


def reference(family, a, zoneout, lib=np):
    """The reference's outputs of `family` on arguments `a`: (h, c) or (h,)."""
    if family == "layer_norm_lstm":
        f = ref.layer_norm_lstm if lib is np else ref.torch_layer_norm_lstm
        return f(a["x"], a["Wx"], a["Wh"], a["b"], a["gamma"], a["gamma_h"], a["beta_h"],
                 a["hI"], a["cI"], zoneout=zoneout)
    if family == "layer_norm_gru":
        f = ref.layer_norm_gru if lib is np else ref.torch_layer_norm_gru
        return (f(a["x"], a["Wx"], a["Wh"], a["b"], a["bh"], a["gamma"], a["hI"],
                  zoneout=zoneout),)
    f = ref.indrnn if lib is np else ref.torch_indrnn
    return (f(a["x"], a["Wx"], a["u"], a["b"], a["hI"], zoneout=zoneout),)


TIME_LOOPS = {"layer_norm_lstm": (cells.layerNormLstmTimeLoop, cells.layerNormLstmTimeLoopBp),
              "layer_norm_gru": (cells.layerNormGruTimeLoop, cells.layerNormGruTimeLoopBp),
              "indrnn": (cells.indRnnTimeLoop, cells.indRnnTimeLoopBp)}
FAMILIES = list(TIME_LOOPS)


def run(family, a, **options):
    """cells' forward: (h, c or None, hL, cL or None)."""
    result = TIME_LOOPS[family][0](*a.values(), **options)
    if family == "layer_norm_lstm":
        return result.h, None, result.hL, result.cL
    return result, None, None, None


@pytest.mark.parametrize("mode", ["none", "eval", "train"])
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, F32_TOL)],
                         ids=["f64", "f32"])
def test_forward_matches_the_reference(family, mode, dtype, tol):
    a = draw(family, dtype)
    zoneout = zoneouts(dtype)[mode]
    a64 = {k: v.astype(np.float64) for k, v in a.items()}
    z64 = zoneout if not isinstance(zoneout, np.ndarray) else zoneout.astype(np.float64)
    want = reference(family, a64, z64)
    for n_threads in (1, 2, 3):
        h, _, hL, cL = run(family, a, zoneout=zoneout, n_threads=n_threads)
        assert h.dtype == dtype
        np.testing.assert_allclose(h, want[0], rtol=0, atol=tol)
        if family == "layer_norm_lstm":
            np.testing.assert_allclose(hL, want[0][-1], rtol=0, atol=tol)
            np.testing.assert_allclose(cL, want[1][-1], rtol=0, atol=tol * sL)


def autograd(family, a, zoneout, seed):
    """Autograd of the PyTorch step loop on arguments `a` for L = Σ w∘h + Σ wL∘(final states)
    (+ Σ wc∘c + Σ wcL∘cL for the LSTM: its every step's c, through dLdc), float64, the weights
    random: (h, {name: dL/dname}, and the backward's dLdh = w and keywords)."""
    rng = np.random.default_rng(seed)
    bS, nOut = a["hI"].shape
    t = {k: torch.tensor(v, requires_grad=True) for k, v in a.items()}
    tz = torch.tensor(zoneout) if isinstance(zoneout, np.ndarray) else zoneout
    outs = reference(family, t, tz, lib=torch)
    w, wL = rng.standard_normal((sL, bS, nOut)), rng.standard_normal((bS, nOut))
    loss = (outs[0] * torch.tensor(w)).sum() + (outs[0][-1] * torch.tensor(wL)).sum()
    extra = {"dLdhLast": wL}
    if family == "layer_norm_lstm":
        wc, wcL = rng.standard_normal((sL, bS, nOut)), rng.standard_normal((bS, nOut))
        loss = loss + (outs[1] * torch.tensor(wc)).sum() + (outs[1][-1] * torch.tensor(wcL)).sum()
        extra = {"dLdhL": wL, "dLdc": wc, "dLdcL": wcL}
    loss.backward()
    return outs[0].detach().numpy(), {k: v.grad.numpy() for k, v in t.items()}, w, extra


@pytest.mark.parametrize("mode", ["none", "eval", "train"])
@pytest.mark.parametrize("family", FAMILIES)
def test_every_gradient_matches_torch_autograd(family, mode):
    """Every gradient (autograd's loss), float64: cells' backward on 1, 2 and 3 threads
    against autograd of the PyTorch step loop."""
    a = draw(family, seed=1)
    zoneout = zoneouts(np.float64)[mode]
    _, want, dLdh, extra = autograd(family, a, zoneout, seed=2)
    for n_threads in (1, 2, 3):   # whole rows per thread, or the steps' rows split (row_steps)
        grads = TIME_LOOPS[family][1](*a.values(), dLdh, zoneout=zoneout, n_threads=n_threads,
                                      **extra)
        for name, grad in zip(a, grads):
            np.testing.assert_allclose(grad, want[name], rtol=0, atol=1e-11,
                                       err_msg=f"{family} {mode} d/d{name} {n_threads}")


@pytest.mark.parametrize("rows", [1, 2, 3])
@pytest.mark.parametrize("family", ["layer_norm_lstm", "layer_norm_gru"])
def test_split_units_run_the_steps_of_whole_rows(family, rows):
    """20 units, which 2 and 3 threads split for the products (8 + 12, 8 + 8 + 4), each
    running the steps of whole rows (fewer rows than 8 a thread): the forward and every
    gradient against autograd of the PyTorch step loop, with a zoneout mask; with seq_len (a
    row of length 0) and in reverse, against one thread."""
    a = draw(family, seed=3, bS=rows, nOut=20)
    mask = (np.random.default_rng(4).random((sL, rows, 20)) >= 0.3).astype(np.float64)
    want_h, want, dLdh, extra = autograd(family, a, mask, seed=5)
    forward, backward = TIME_LOOPS[family]
    for n_threads in (2, 3):
        h = run(family, a, zoneout=mask, n_threads=n_threads)[0]
        np.testing.assert_allclose(h, want_h, rtol=0, atol=1e-12)
        grads = backward(*a.values(), dLdh, zoneout=mask, n_threads=n_threads, **extra)
        for name, grad in zip(a, grads):
            np.testing.assert_allclose(grad, want[name], rtol=0, atol=1e-11,
                                       err_msg=f"d/d{name} on {n_threads} threads")
    seq_len = np.array([5, 0, 2][:rows], np.int64)
    for direction in (True, False):
        options = dict(zoneout=mask, seq_len=seq_len, forward=direction)
        one = forward(*a.values(), n_threads=1, return_workspace=True, **options)
        want = backward(*a.values(), dLdh, workspace=one.workspace, n_threads=1, **options,
                        **extra)
        for n_threads in (2, 3):
            got = forward(*a.values(), n_threads=n_threads, return_workspace=True, **options)
            grads = backward(*a.values(), dLdh, workspace=got.workspace, n_threads=n_threads,
                             **options, **extra)
            for name, g, w in zip(("h", *a), (got[0], *grads), (one[0], *want)):
                np.testing.assert_allclose(g, w, rtol=0, atol=1e-12,
                                           err_msg=f"{name}, {n_threads} threads, {direction}")


PREPARE = {"layer_norm_lstm": (cells.layer_norm_lstm.prepare,
                               ("Wx", "Wh", "b", "gamma", "gamma_h", "beta_h")),
           "layer_norm_gru": (cells.layer_norm_gru.prepare, ("Wx", "Wh", "b", "bh", "gamma")),
           "indrnn": (cells.indrnn.prepare, ("Wx", "u", "b"))}


@pytest.mark.parametrize("weights", [None, "int8", "bfloat16"])
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("units", [nOut, 160])
def test_a_prepared_net_is_the_time_loop_in_any_chunks(family, weights, units):
    """Its values are the time loop's (float32 weights; int8 and bfloat16 weights to their
    rounding, the Serving guide's model); its bits do not depend on the chunks a sequence is
    cut into, the threads or the rows beside a row. 160 units are 3 panels, tasks that the
    threads claim (for a LayerNorm cell its products; its steps are tasks of whole rows); 16
    rows on 2 threads split the rows."""
    a = draw(family, np.float32, seed=4, nOut=units)
    prepare, names = PREPARE[family]
    net = prepare(*(a[n] for n in names), weights=weights)
    state = net.State(*(a[n] for n in ("hI", "cI") if n in a))
    h, after = net(a["x"], state, n_threads=1)
    if weights is None:
        want = run(family, a)
        np.testing.assert_allclose(h, want[0], rtol=0, atol=1e-5)
    for n_threads in (1, 2, 3):
        parts, s = [], state
        for t in range(sL):
            step, s = net(a["x"][t], s, n_threads=n_threads)
            parts.append(step)
        assert np.array_equal(np.stack(parts), h)
        for got, want in zip(s, after):
            assert np.array_equal(got, want)
    alone = net(a["x"][:, 1:2], net.State(*(v[1:2] for v in state)), n_threads=2)
    assert np.array_equal(alone.h, h[:, 1:2])
    rows = np.arange(16) % bS
    many = net(a["x"][:, rows], net.State(*(v[rows] for v in state)), n_threads=2)
    assert np.array_equal(many.h, h[:, rows])


def test_zoneout_is_checked():
    a = draw("indrnn")
    args = tuple(a.values())
    with pytest.raises(ValueError, match=r"zoneout: expected a probability in \[0, 1\]"):
        cells.indRnnTimeLoop(*args, zoneout=1.5)
    with pytest.raises(ValueError, match=r"zoneout: expected shape \(5, 3, 6\)"):
        cells.indRnnTimeLoop(*args, zoneout=np.ones((sL, bS, nOut + 1)))
    with pytest.raises(TypeError, match="zoneout: expected a mask of x's dtype float64"):
        cells.indRnnTimeLoop(*args, zoneout=np.ones((sL, bS, nOut), np.float32))
    with pytest.raises(TypeError, match="zoneout: expected None, a probability"):
        cells.indRnnTimeLoop(*args, zoneout="0.1")


def test_shapes_are_checked_with_the_argument_named():
    a = draw("layer_norm_lstm")
    with pytest.raises(ValueError, match=r"gamma: expected shape \(2, 24\) = \[2, 4\*nOut\]"):
        cells.layerNormLstmTimeLoop(*dict(a, gamma=a["gamma"][0]).values())
    g = draw("layer_norm_gru")
    with pytest.raises(ValueError, match=r"bh: expected shape \(18,\)"):
        cells.layerNormGruTimeLoop(*dict(g, bh=g["bh"][:-1]).values())
    i = draw("indrnn")
    with pytest.raises(ValueError, match=r"u: expected shape \(6,\)"):
        cells.indRnnTimeLoop(*dict(i, u=np.ones(5)).values())
    with pytest.raises(TypeError, match="u: expected dtype float64"):
        cells.indRnnTimeLoop(*dict(i, u=i["u"].astype(np.float32)).values())


@pytest.mark.parametrize("family", FAMILIES)
def test_a_prepared_net_runs_zoneout_in_eval_mode(family):
    """prepare(zoneout=p): each step's h = p·hPrev + (1 - p)·hNew, the time loop's zoneout=p,
    and a pickled net keeps it."""
    a = draw(family, seed=5)
    prepare, names = PREPARE[family]
    net = prepare(*(a[n] for n in names), zoneout=0.25)
    state = net.State(*(a[n] for n in ("hI", "cI") if n in a))
    h, _ = net(a["x"], state)
    np.testing.assert_allclose(h, run(family, a, zoneout=0.25)[0], rtol=0, atol=1e-13)
    assert np.abs(h - run(family, a)[0]).max() > 1e-3   # zoneout changes the values
    again = pickle.loads(pickle.dumps(net))
    assert np.array_equal(again(a["x"], state).h, h)
    with pytest.raises(ValueError, match=r"zoneout: expected a probability in \[0, 1\]"):
        prepare(*(a[n] for n in names), zoneout=-0.1)


@pytest.mark.parametrize("weights", [None, "int8"])
@pytest.mark.parametrize("family", FAMILIES)
def test_a_prepared_net_pickles(family, weights):
    a = draw(family, np.float32, seed=6)
    prepare, names = PREPARE[family]
    net = prepare(*(a[n] for n in names), weights=weights)
    state = net.State(*(a[n] for n in ("hI", "cI") if n in a))
    again = pickle.loads(pickle.dumps(net))
    assert np.array_equal(again(a["x"], state).h, net(a["x"], state).h)
