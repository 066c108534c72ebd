"""The GPU backend (cells/_gpu.py) run on the CPU, as tests/test_gpu_emulation.py runs it (the
kernels compiled by g++ with the shim, NumPy standing in for CuPy), against the CPU backend on
the two generic loops, forward and backward, for every family of the table: haste's
LayerNorm LSTM and LayerNorm GRU (the per-row kernels of a row_reduction family, dL/dP summed
by the steps), IndRNN (no recurrent product, no dL/dWh) and the others, with seq_len, both
directions and the loop options zoneout (none, one share for all, one per element and step),
every step's c without keep (c_steps) and dL/dc arriving at every step's c; then haste's public
time loops on fake CuPy arrays (tests/fake_cupy.py), against the same calls on NumPy arrays.
"""
import shutil

import numpy as np
import pytest

import cells
import fake_cupy
from cells import _cpu, _family_table, _gpu, cuda
from gru_reference import F32_FWD_TOL, F32_SEQ_GRAD_TOL, F64_TOL, assert_close

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH")

sL, bS, nIn, nOut = 4, 3, 3, 4
LENGTHS = {"all": None, "mixed": np.array([4, 0, 2], np.int64)}
FAMILIES = list(_family_table.FAMILIES)
ZONES = ("none", "one", "each")
FORWARD = ("h", "hL", "cL", "gates", "c", "aux", "m")
BACKWARD = ("dLdx", "dLdhI", "dLdcI", "dLdWx", "dLdWh", "dLdb", "dLdP", "dLdWproj")


def tolerances(dtype):
    return (F64_TOL, F64_TOL) if dtype == np.float64 else (F32_FWD_TOL, F32_SEQ_GRAD_TOL)


def loop_arguments(family, dtype, zone, seed=11):
    """(forward keywords, backward-only keywords) of `family` for both backends' forward and
    _backward, every array random: weights as the family takes them (W for the LLTM, no Wh for
    the IndRNN, no loop bias for the LayerNorm cells, whose bias is in P), P where the family
    has one, cI where it has a cell state; zoneout by `zone`; dL/dh, dL/dhL, and dL/dcL and
    dL/dc where there is a c."""
    rng = np.random.default_rng(seed)
    fam = _family_table.family(family)
    G = fam.gates * nOut

    def normal(*shape, mean=0.0, scale=0.5):
        return rng.normal(mean, scale, shape).astype(dtype)

    fwd = dict(x=normal(sL, bS, nIn, scale=1.0), hI=normal(bS, nOut))
    if family == "lltm":
        fwd["W"] = normal(G, nOut + nIn)
    else:
        fwd["Wx"] = normal(nIn, G)
        if fam.recurrent_product:
            fwd["Wh"] = normal(nOut, G)
    if not family.startswith("layer_norm"):
        fwd["b"] = normal(G, scale=0.3)
    if fam.param_blocks:   # gains near 1 for the LayerNorm cells; u, peepholes, bh_c
        fwd["P"] = normal(fam.param_blocks * nOut, mean=0.6, scale=0.3)
    if fam.cell_state:
        fwd["cI"] = normal(bS, nOut)
    if zone == "one":
        fwd["zoneout"] = np.full(1, 0.7, dtype)
    elif zone == "each":
        fwd["zoneout"] = rng.uniform(0, 1, (sL, bS, nOut)).astype(dtype)
    back = dict(dLdh=normal(sL, bS, nOut), dLdhL=normal(bS, nOut))
    if fam.cell_state:
        back.update(dLdcL=normal(bS, nOut), dLdc=normal(sL, bS, nOut))
    return fwd, back


def copies(arrays):
    """Each backend's backward consumes its own copies of a workspace."""
    return tuple(None if a is None else a.copy() for a in arrays)


def run(backend, family, fwd_args, back_args, seq, direction):
    """(the forward with keep, its backward, the forward without keep returning every step's
    c, a backward that recomputes the forward without dL/dx) of `backend`."""
    dims = (sL, bS, nIn, nOut)
    a = dict(fwd_args)
    x, hI = a.pop("x"), a.pop("hI")
    kept = backend.forward(family, dims, x, hI, True, 1, seq, direction, **a)
    h, _, _, gates, c, aux, m = kept
    back = {k: v for k, v in a.items() if k != "b"}
    bias = "b" in a
    grads = backend.backward(family, dims, x, hI, copies((h, gates, c, aux, m)), 1, seq,
                              direction, bias=bias, **back, **back_args)
    light = backend.forward(family, dims, x, hI, False, 1, seq, direction, c_steps=True, **a)
    again = backend.forward(family, dims, x, hI, True, 1, seq, direction, **a)
    h, _, _, gates, c, aux, m = again
    no_dx = backend.backward(family, dims, x, hI, (h, gates, c, aux, m), 1, seq, direction,
                              bias=bias, input_grad=False, **back,
                              dLdh=back_args["dLdh"])
    return kept, grads, light, no_dx


def compare(gpu, cpu, names, tol, what):
    assert len(gpu) == len(cpu)
    for name, g, c in zip(names, gpu, cpu):
        if c is None:
            assert g is None, f"{what} {name}"
            continue
        assert g is not None, f"{what} {name}"
        assert_close(g, c, tol, f"{what} {name}", c.dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("lengths", LENGTHS)
@pytest.mark.parametrize("direction", [True, False], ids=["forward", "reverse"])
@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_and_loop_option_matches_the_cpu(family, direction, lengths, zone, dtype):
    fam = _family_table.family(family)
    seq = LENGTHS[lengths]
    fwd_args, back_args = loop_arguments(family, dtype, zone)
    ftol, gtol = tolerances(dtype)
    gpu = run(_gpu, family, fwd_args, back_args, seq, direction)
    cpu = run(_cpu, family, fwd_args, back_args, seq, direction)
    compare(gpu[0], cpu[0], FORWARD, ftol, "kept forward")
    compare(gpu[1], cpu[1], BACKWARD, gtol, "backward")
    compare(gpu[2], cpu[2], FORWARD, ftol, "forward with c_steps")
    compare(gpu[3], cpu[3], BACKWARD, gtol, "backward without dL/dx")
    # What the family's declaration says the results are.
    _, _, _, dLdWx, dLdWh, dLdb, dLdP, _ = gpu[1]
    assert (dLdWh is None) == (not fam.recurrent_product or family == "lltm")
    assert (dLdb is None) == family.startswith("layer_norm")
    assert (dLdP is None) == (fam.param_blocks == 0)
    if fam.cell_state:
        assert gpu[2][4] is not None and gpu[2][3] is None   # c without keep; no gates
    if fam.aux_kept:
        assert gpu[0][5].shape == (sL, bS, fam.aux * nOut)


@pytest.mark.parametrize("family", ["layer_norm_lstm", "lstm"])
def test_dldc_and_zoneout_change_the_gradients(family):
    """The cases above are not vacuous: dL/dc and zoneout each change the gradients."""
    fwd_args, back_args = loop_arguments(family, np.float64, "each")
    plain = {k: v for k, v in fwd_args.items() if k != "zoneout"}
    base = run(_gpu, family, plain, dict(back_args, dLdc=None), None, True)[1]
    with_dldc = run(_gpu, family, plain, back_args, None, True)[1]
    zoned = run(_gpu, family, fwd_args, dict(back_args, dLdc=None), None, True)[1]
    assert np.abs(with_dldc[0] - base[0]).max() > 1e-3
    assert np.abs(zoned[0] - base[0]).max() > 1e-3


# ---------------------------------------------------------------------------------------------
# haste's public time loops on (fake) CuPy arrays
# ---------------------------------------------------------------------------------------------

@pytest.fixture
def fake_gpu(monkeypatch):
    """cells' GPU backend on fake_cupy and the shim's kernels."""
    monkeypatch.setattr(cuda, "import_cupy", lambda: fake_cupy)
    monkeypatch.setattr(cuda, "device_launcher", cuda.cpu_launcher)
    return fake_cupy


def face_arguments(family, rng):
    """The positional arguments of `family`'s public time loop, by name."""
    def n(*shape, mean=0.0):
        return rng.normal(mean, 0.4, shape)

    x, hI = n(sL, bS, nIn), n(bS, nOut)
    if family == "layer_norm_lstm":
        G = 4 * nOut
        return dict(x=x, Wx=n(nIn, G), Wh=n(nOut, G), b=n(G), gamma=n(2, G, mean=1),
                    gamma_h=n(nOut, mean=1), beta_h=n(nOut), hI=hI, cI=n(bS, nOut))
    if family == "layer_norm_gru":
        G = 3 * nOut
        return dict(x=x, Wx=n(nIn, G), Wh=n(nOut, G), b=n(G), bh=n(G), gamma=n(2, G, mean=1),
                    hI=hI)
    return dict(x=x, hI=hI, Wx=n(nIn, nOut), u=n(nOut, mean=0.5), b=n(nOut))


FACES = {"layer_norm_lstm": (cells.layerNormLstmTimeLoop, cells.layerNormLstmTimeLoopBp),
         "layer_norm_gru": (cells.layerNormGruTimeLoop, cells.layerNormGruTimeLoopBp),
         "indrnn": (cells.indRnnTimeLoop, cells.indRnnTimeLoopBp)}


def on_host(value, gpu):
    """A result on the host: a GPU call's arrays must be (fake) CuPy ones."""
    if value is None:
        return None
    if gpu:
        assert isinstance(value, fake_cupy.ndarray), type(value)
        return value.get()
    return value


@pytest.mark.parametrize("zoneout", [None, 0.25, "mask"])
@pytest.mark.parametrize("family", list(FACES))
def test_haste_time_loops_run_on_cupy_arrays(fake_gpu, family, zoneout):
    rng = np.random.default_rng(5)
    a = face_arguments(family, rng)
    mask = (rng.random((sL, bS, nOut)) >= 0.3).astype(np.float64)
    dLdh = rng.normal(0, 1, (sL, bS, nOut))
    seq_len = np.array([4, 1, 3], np.int64)
    forward, backward = FACES[family]
    results = {}
    for kind in ("gpu", "cpu"):
        to = fake_gpu.asarray if kind == "gpu" else np.asarray
        args = [to(v) for v in a.values()]
        zone = to(mask) if isinstance(zoneout, str) else zoneout
        out = forward(*args, zoneout=zone, seq_len=seq_len, forward=False,
                      return_workspace=True)
        grads = backward(*args, to(dLdh), workspace=out.workspace, zoneout=zone,
                         seq_len=seq_len, forward=False)
        outputs = [v for k, v in out._asdict().items() if k != "workspace"]
        results[kind] = [(name, on_host(v, kind == "gpu")) for name, v in
                         zip(["h", "hL", "cL"], outputs)] + [
            (name, on_host(v, kind == "gpu")) for name, v in grads._asdict().items()]
    assert [n for n, _ in results["gpu"]] == [n for n, _ in results["cpu"]]
    for (name, g), (_, c) in zip(results["gpu"], results["cpu"]):
        if c is None:
            assert g is None, name
        else:
            assert_close(g, c, F64_TOL, f"{family} {name}", np.float64)
