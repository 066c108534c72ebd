"""Every declared family (cells/_families/) against the checks that hold for all of them, drawn
from its declaration alone: a family declared there is checked here without a line of this file
changing.

- the declarations and the compiled family table (include/cells/family_rows.h) name the same
  families;
- the backward's gradients of every argument against central finite differences of the forward,
  float64, with random non-zero initial states, forward and reverse, with seq_len;
- results of the arguments' dtype and the declared shapes, float32 and float64, and empty
  batches and sequences;
- the workspace holds the declared arrays and the backward consumes the declared ones
  (tests/test_workspace.py checks what consuming means);
- input_grad=False skips dL/dx alone: every other gradient is the full pass's, bit for bit.

Each family's own tests (tests/test_<family>_*.py) hold it to its independent float64
reference, PyTorch and ONNX Runtime.
"""
import numpy as np
import pytest

import cells
from cells import _families, _family_table, _isa, _time_loop

# Every test here runs on each instruction set this CPU runs (conftest.py).
pytestmark = pytest.mark.usefixtures("each_instruction_set")


CASES = [pytest.param(family, options, id=f"{name}-{variant}")
         for name, family in _families.FAMILIES.items()
         for variant, (_, options) in family.variants.items()]
DIMS = _families.Dims(sL=4, bS=3, nIn=5, nOut=4)


def draw(family, dims, dtype, seed):
    """Random arguments for `family`: x ~ N(0, 1), states ~ U(-0.9, 0.9) (non-zero), weights
    ~ N(0, 1/(nIn + nOut)) (gates away from saturation, where differences are informative)."""
    rng = np.random.default_rng(seed)
    scale = {"input": 1.0, "state": 0.0, "weight": 1 / np.sqrt(dims.nIn + dims.nOut)}
    arrays = {}
    for a in family.arguments:
        shape = a.shape(dims)
        if a.kind == "state":
            arrays[a.name] = rng.uniform(-0.9, 0.9, shape).astype(dtype)
        else:
            arrays[a.name] = (scale[a.kind] * rng.standard_normal(shape)).astype(dtype)
    return arrays


def outputs(family, arrays, **options):
    """The time loop's results as a tuple in the order of family.outputs."""
    result = getattr(cells, family.time_loop)(*arrays.values(), **options)
    return result if isinstance(result, tuple) else (result,)


def test_declarations_name_the_compiled_families():
    rows = {row for family in _families.FAMILIES.values()
            for row, _ in family.variants.values()}
    assert rows == set(_family_table.FAMILIES)
    for family in _families.FAMILIES.values():
        assert len({_family_table.family(row).gates for row, _ in family.variants.values()}) == 1


@pytest.mark.parametrize("family, options", CASES)
@pytest.mark.parametrize("seq_len, forward", [(None, True), (None, False),
                                              (np.array([4, 0, 2]), True),
                                              (np.array([1, 4, 3]), False)])
def test_gradients_against_central_differences(family, options, seq_len, forward):
    """L = Σ wh∘h + Σ over the final states (without seq_len: with it, a GRU's or RNN's last
    step is not every row's final state) of w∘state; the backward's gradient of every
    argument along a random direction against the central difference D(ε) = (L(a + εv) -
    L(a - εv)) / 2ε, extrapolated: (4·D(ε/2) - D(ε)) / 3 cancels D's ε² term. float64 with
    ε = 1e-5: truncation O(ε⁴·L⁽⁵⁾) stays ~1e-10 even where a LayerNorm over 4 units makes
    L's derivatives large (D(1e-6) alone is off by 4e-6 there), and rounding ~1e-16·|L|/ε ~
    1e-10, far below the 1e-7 allowed; a wrong formula is off by 1e-3 or more."""
    options = dict(options, seq_len=seq_len, forward=forward)
    arrays = draw(family, DIMS, np.float64, seed=1)
    rng = np.random.default_rng(2)
    results = outputs(family, arrays, **options)
    wh = rng.standard_normal(results[0].shape)
    finals = {} if seq_len is not None else {
        keyword: rng.standard_normal(state.shape)
        for keyword, state in family.final_state_values(results, forward).items()}

    def loss(a):
        r = outputs(family, a, **options)
        states = family.final_state_values(r, forward)
        return np.sum(wh * r[0]) + sum(np.sum(w * states[k]) for k, w in finals.items())

    grads = getattr(cells, family.time_loop_bp)(*arrays.values(), wh, **finals, **options)
    for (name, value), grad in zip(arrays.items(), grads):
        direction = rng.standard_normal(value.shape)

        def central(eps):
            up = dict(arrays, **{name: value + eps * direction})
            down = dict(arrays, **{name: value - eps * direction})
            return (loss(up) - loss(down)) / (2 * eps)

        numeric = (4 * central(0.5e-5) - central(1e-5)) / 3
        analytic = np.sum(grad * direction)
        assert abs(numeric - analytic) <= 1e-7 * max(1.0, abs(analytic)), (name, numeric,
                                                                             analytic)


@pytest.mark.parametrize("family, options", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dims", [DIMS, DIMS._replace(bS=0), DIMS._replace(sL=0)],
                         ids=["filled", "no-rows", "no-steps"])
def test_results_keep_the_dtype_and_the_declared_shapes(family, options, dtype, dims):
    arrays = draw(family, dims, dtype, seed=3)
    *results, workspace = outputs(family, arrays, return_workspace=True, **options)
    shapes = family.shapes(dims)
    state_shape = shapes["hI"]
    assert results[0].shape == (dims.sL, dims.bS, dims.nOut)
    assert all(r.shape == state_shape for r in results[1:])
    for name in family.workspace:
        kept = getattr(workspace, name)
        assert kept is None or (kept.shape[:2] == (dims.sL, dims.bS) and kept.dtype == dtype)
    dLdh = np.ones_like(results[0])
    grads = getattr(cells, family.time_loop_bp)(*arrays.values(), dLdh, workspace=workspace,
                                                **options)
    for name, grad in zip(shapes, grads[:len(shapes)]):
        assert grad.shape == shapes[name] and grad.dtype == dtype, name
    for name in family.consumed:
        kept = getattr(workspace, name)
        assert kept is None or not kept.flags.writeable, name
    assert [r.dtype for r in results] == [np.dtype(dtype)] * len(results)


@pytest.mark.parametrize("family, options", CASES)
def test_without_input_grad_the_other_gradients_are_the_same(family, options):
    options = dict(options, seq_len=np.array([4, 1, 3]), forward=False)
    arrays = draw(family, DIMS, np.float64, seed=4)
    dLdh = np.random.default_rng(5).standard_normal((DIMS.sL, DIMS.bS, DIMS.nOut))
    backward = getattr(cells, family.time_loop_bp)
    full = backward(*arrays.values(), dLdh, **options)
    partial = backward(*arrays.values(), dLdh, input_grad=False, **options)
    assert type(partial) is type(full)
    assert full.dLdx.shape == arrays["x"].shape and partial.dLdx is None
    for name, a, b in zip(full._fields[1:], full[1:], partial[1:]):
        if a is None:
            assert b is None, name
        else:
            np.testing.assert_array_equal(b, a, err_msg=name)


@pytest.mark.parametrize("family, options", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("nOut", [40, 64])
def test_every_thread_count_gives_one_threads_results(family, options, dtype, nOut):
    """Results and gradients at 2 to 64 threads (on 2 cores: oversubscribed) against one
    thread's on the baseline instruction set, whose products multiply every gate block on
    panels of its own. The counts split the units into shares of 8 to 40 (a cache line's
    multiples), at 2 threads the 17 rows, and at 4, 8, 16 and 64 the rows into 2 groups
    (row_groups), each on a group of the threads that split its units; on AVX-512 the shares
    narrower than their panels run on gate blocks packed side by side (both nOut's have
    counts that do and that do not, in each dtype). Only the order of the sums over K changes
    with the split: float64 agrees to 1e-12, float32 to 1e-5 (its ε times sums of ~50 terms
    over 6 steps); a unit or a gate in the wrong place is off by 1e-2 or more."""
    dims = DIMS._replace(sL=6, bS=17, nOut=nOut)
    arrays = draw(family, dims, dtype, seed=6)
    options = dict(options, seq_len=np.array([6, 0, 3] + [6, 5] * 7), forward=False)
    dLdh = np.random.default_rng(7).standard_normal((dims.sL, dims.bS, nOut)).astype(dtype)
    backward = getattr(cells, family.time_loop_bp)

    def run(n_threads):
        results = outputs(family, arrays, n_threads=n_threads, **options)
        return results + tuple(g for g in backward(*arrays.values(), dLdh, n_threads=n_threads,
                                                   **options) if g is not None)

    # One thread's share, every unit: side by side at nOut = 40 alone, on AVX-512 alone.
    assert (_time_loop.packs_gates_side_by_side(4, 4, nOut, dtype)
            == (nOut == 40 and _isa.instruction_set() == "avx512"))
    assert [_time_loop.row_groups(n, dims.bS, nOut, nOut, family.gates, False,
                                  np.dtype(dtype).itemsize)
            for n in (2, 3, 4, 5, 8, 16, 64)] == [1, 1, 2, 1, 2, 2, 2]
    with _isa.forced("generic"):
        expected = run(1)
    tol = 1e-12 if dtype == np.float64 else 1e-5
    for n_threads in (1, 2, 3, 4, 5, 8, 16, 64):
        for k, (a, b) in enumerate(zip(run(n_threads), expected)):
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol,
                                       err_msg=f"{n_threads} threads, output {k}")
