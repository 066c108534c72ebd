"""cells' GPU path on a machine with an NVIDIA GPU: correctness, then speed against cuDNN.

    python3 setup.py build_ext --inplace && python3 benchmarks/gpu_check.py

Needs CuPy (cupy-cuda13x) and a CUDA build of torch (for the timings only); nothing from a
package index. Under 5 minutes.

1. Every public function of cells on CuPy arrays against the same call on NumPy arrays (the
   CPU path): float64 within 1e-10, float32 within the CPU tests' tolerances (1e-5 forward,
   3e-5 gradients), relative to max(1, max|expected|). Each case prints PASS, FAIL (the error)
   or ERROR (the exception), and the script goes on.
2. cells.torch's modules on CUDA tensors against the same modules on CPU tensors (float64).
3. Timings (float32, CUDA events, medians) of the GRU (linear_before_reset, cuDNN's GRU) and
   the LSTM, inference and a training step (forward keeping the workspace, backward with
   dL/dx), cells' GPU backend against torch.nn.GRU / LSTM on cuDNN, at T=100 B=1 H=128,
   T=100 B=64 H=256, T=50 B=128 H=512 (I = H), printed as one table.
"""
import copy
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import cells  # noqa: E402
from cells import _gpu  # noqa: E402
from cells._families import gru, lstm  # noqa: E402
from cells import onnx as co  # noqa: E402

F64_TOL = 1e-10
F32_FWD_TOL, F32_GRAD_TOL = 1e-5, 3e-5
SHAPES = ((100, 1, 128), (100, 64, 256), (50, 128, 512))


def to_gpu(cupy, a):
    """Float arrays (and tuples of them) onto the device; integer arrays (lengths) stay."""
    if isinstance(a, np.ndarray) and a.dtype.kind == "f":
        return cupy.asarray(a)
    if isinstance(a, tuple) and not hasattr(a, "_fields"):
        return tuple(to_gpu(cupy, v) for v in a)
    return a


def leaves(result):
    """The arrays of a result (nested tuples, NamedTuples), in order; None for None."""
    if isinstance(result, tuple):
        return [leaf for v in result for leaf in leaves(v)]
    return [result]


def max_error(cupy, gpu, cpu):
    """The largest error relative to max(1, max|expected|) over the result's arrays, or a string
    saying what does not match."""
    worst = 0.0
    for k, (g, c) in enumerate(zip(leaves(gpu), leaves(cpu))):
        if not isinstance(c, np.ndarray):
            if not (c is None and g is None or isinstance(c, (bool, np.bool_)) and g == c):
                if not np.array_equal(np.asarray(c), np.asarray(g)):
                    return f"output {k}: {g!r} != {c!r}"
            continue
        if c.dtype.kind != "f":   # lengths: the call's own (NumPy) array
            if not np.array_equal(cupy.asnumpy(g) if isinstance(g, cupy.ndarray) else g, c):
                return f"output {k}: integers differ"
            continue
        if not isinstance(g, cupy.ndarray):
            return f"output {k}: a {type(g).__name__}, not a cupy.ndarray"
        g = cupy.asnumpy(g).astype(np.float64)
        if g.shape != c.shape:
            return f"output {k}: shape {g.shape} != {c.shape}"
        if c.size:
            scale = max(1.0, float(np.abs(c).max()))
            worst = max(worst, float(np.abs(g - c).max()) / scale)
    return worst


def cases(dtype):
    """(name, function, args, kwargs, is_gradient) for every public function."""
    rng = np.random.default_rng(0)

    def r(*shape):
        return rng.normal(0, 0.5, shape).astype(dtype)

    sL, bS, nIn, H = 5, 3, 4, 6
    lens = np.array([5, 0, 3], np.int64)
    x, hI, cI, dLdh = r(sL, bS, nIn), r(bS, H), r(bS, H), r(sL, bS, H)
    Wx3, Wh3, b3, b23 = r(nIn, 3 * H), r(H, 3 * H), r(3 * H), r(2, 3 * H)
    Wx4, Wr4, b4, Wp = r(nIn, 4 * H), r(H, 4 * H), r(4 * H), r(3 * H)
    W3 = r(3 * H, H + nIn)
    Wx1, Wh1, b1 = r(nIn, H), r(H, H), r(2, H)
    Wru, Wc, bru, bc = r(nIn + H, 2 * H), r(nIn + H, H), r(2 * H), r(H)
    out = []
    for lbr in (False, True):
        kw = dict(linear_before_reset=lbr)
        out += [
            (f"gruCell lbr={lbr}", cells.gruCell, (x[0], hI, Wx3, Wh3, b23), kw, False),
            (f"gruCellBp lbr={lbr}", cells.gruCellBp, (x[0], hI, Wx3, Wh3, b23, dLdh[0]), kw,
             True),
            (f"gruTimeLoop lbr={lbr}", cells.gruTimeLoop, (x, hI, Wx3, Wh3, b3), kw, False),
            (f"gruTimeLoop lbr={lbr} seq_len reverse", cells.gruTimeLoop,
             (x, hI, Wx3, Wh3, b23), dict(kw, seq_len=lens, forward=False), False),
            (f"gruTimeLoopBp lbr={lbr} seq_len reverse", cells.gruTimeLoopBp,
             (x, hI, Wx3, Wh3, b23, dLdh), dict(kw, seq_len=lens, forward=False, dLdhLast=hI),
             True),
            (f"gruTimeLoop lbr={lbr} workspace", cells.gruTimeLoop, (x, hI, Wx3, Wh3, b23),
             dict(kw, return_workspace=True), False),
        ]
    out += [
        ("gruBlockCell", cells.gruBlockCell, (x[0], hI, Wru, Wc, bru, bc), {}, False),
        ("gruBlockCellBp", cells.gruBlockCellBp,
         (x[0], hI, Wru, Wc, bru, bc, r(bS, H), None, r(bS, H), dLdh[0]), {}, True),
        ("lstmLayerCell", cells.lstmLayerCell, (x[0], Wx4, Wr4, b4, hI, cI), dict(Wp=Wp), False),
        ("lstmLayerCellBp", cells.lstmLayerCellBp,
         (x[0], Wx4, Wr4, b4, hI, cI, dLdh[0], r(bS, H)), dict(Wp=Wp, cell_clip=0.6), True),
        ("lstmLayerTimeLoop peepholes seq_len", cells.lstmLayerTimeLoop,
         (x, Wx4, Wr4, b4, hI, cI), dict(Wp=Wp, seq_len=lens), False),
        ("lstmLayerTimeLoop hard sigmoid, softsign", cells.lstmLayerTimeLoop,
         (x, Wx4, Wr4, b4, hI, cI), dict(gate_act=7, cell_act=9, out_act=9), False),
        ("lstmLayerTimeLoopBp peepholes clip reverse", cells.lstmLayerTimeLoopBp,
         (x, Wx4, Wr4, b4, hI, cI, dLdh),
         dict(Wp=Wp, cell_clip=0.6, forward=False, seq_len=lens, dLdcL=cI), True),
        ("lstmLayerTimeLoopBp projection seq_len", cells.lstmLayerTimeLoopBp,
         (x, Wx4, Wr4[:2], b4, hI[:, :2], cI, dLdh[..., :2]),
         dict(Wproj=Wr4[:, :2].copy(), seq_len=lens, dLdcL=cI), True),
        ("lstmLayer directionMode=3", cells.lstmLayer,
         (x, to_pair(Wx4), to_pair(Wr4), to_pair(b4)), dict(dataFormat=0, directionMode=3),
         False),
        ("lltm_forward", cells.lltm_forward, (x[0], W3, b3, hI, cI), {}, False),
        ("lltmTimeLoop seq_len", cells.lltmTimeLoop, (x, W3, b3, hI, cI), dict(seq_len=lens),
         False),
        ("lltmTimeLoopBp reverse", cells.lltmTimeLoopBp, (x, W3, b3, hI, cI, dLdh),
         dict(forward=False, dLdcL=cI), True),
        ("rnnCell relu", cells.rnnCell, (x[0], hI, Wx1, Wh1, b1), dict(activation="relu"),
         False),
        ("rnnCellBp", cells.rnnCellBp, (x[0], hI, Wx1, Wh1, b1, dLdh[0]), {}, True),
        ("rnnTimeLoop seq_len", cells.rnnTimeLoop, (x, hI, Wx1, Wh1, b1), dict(seq_len=lens),
         False),
        ("rnnTimeLoopBp reverse", cells.rnnTimeLoopBp, (x, hI, Wx1, Wh1, b1, dLdh),
         dict(forward=False, dLdhLast=hI), True),
        ("onnx gru bidirectional", co.gru,
         (x, r(2, 3 * H, nIn), r(2, 3 * H, H), r(2, 6 * H), lens.astype(np.int32)),
         dict(direction="bidirectional", linear_before_reset=1), False),
        ("onnx lstm", co.lstm, (x, r(1, 4 * H, nIn), r(1, 4 * H, H), r(1, 8 * H)), {}, False),
        ("onnx rnn_bp", co.rnn_bp, (x, r(1, H, nIn), r(1, H, H), r(1, 2 * H)),
         dict(dY=r(sL, 1, bS, H)), True),
        ("gruTimeLoopBp lbr=True on the workspace",
         training_step(cells.gruTimeLoop, cells.gruTimeLoopBp, 5, linear_before_reset=True,
                       seq_len=lens, forward=False), (x, hI, Wx3, Wh3, b23, dLdh), {}, True),
        ("lstmLayerTimeLoopBp projection on the workspace",
         training_step(cells.lstmLayerTimeLoop, cells.lstmLayerTimeLoopBp, 6, seq_len=lens),
         (x, Wx4, Wr4[:2], b4, hI[:, :2], cI, dLdh[..., :2]), dict(Wproj=Wr4[:, :2].copy()),
         True),
        ("lltmTimeLoopBp on the workspace",
         training_step(cells.lltmTimeLoop, cells.lltmTimeLoopBp, 5, forward=False),
         (x, W3, b3, hI, cI, dLdh), {}, True),
        ("rnnTimeLoopBp on the workspace",
         training_step(cells.rnnTimeLoop, cells.rnnTimeLoopBp, 5, seq_len=lens),
         (x, hI, Wx1, Wh1, b1, dLdh), {}, True),
        ("layerNormLstmTimeLoop zoneout seq_len", cells.layerNormLstmTimeLoop,
         (x, Wx4, Wr4, b4, 1 + r(2, 4 * H), 1 + r(H), r(H), hI, cI),
         dict(zoneout=0.25, seq_len=lens), False),
        ("layerNormLstmTimeLoopBp zoneout mask reverse on the workspace",
         training_step(cells.layerNormLstmTimeLoop, cells.layerNormLstmTimeLoopBp, 9,
                       forward=False),
         (x, Wx4, Wr4, b4, 1 + r(2, 4 * H), 1 + r(H), r(H), hI, cI, dLdh),
         dict(zoneout=(r(sL, bS, H) > 0).astype(dtype)), True),
        ("layerNormGruTimeLoopBp seq_len on the workspace",
         training_step(cells.layerNormGruTimeLoop, cells.layerNormGruTimeLoopBp, 7,
                       seq_len=lens),
         (x, Wx3, Wh3, b3, r(3 * H), 1 + r(2, 3 * H), hI, dLdh), {}, True),
        ("indRnnTimeLoop reverse", cells.indRnnTimeLoop, (x, hI, Wx1, r(H), r(H)),
         dict(forward=False), False),
        ("indRnnTimeLoopBp seq_len on the workspace",
         training_step(cells.indRnnTimeLoop, cells.indRnnTimeLoopBp, 5, seq_len=lens),
         (x, hI, Wx1, r(H), r(H), dLdh), {}, True),
        ("onnx gru_bp on the workspace",
         training_step(co.gru, co.gru_bp, 5, direction="bidirectional"),
         (x, r(2, 3 * H, nIn), r(2, 3 * H, H), r(2, 6 * H), lens.astype(np.int32), None,
          r(sL, 2, bS, H)), {}, True),
    ]
    return out


def training_step(loop, loop_bp, n_inputs, **options):
    """A function running `loop_bp` on the workspace that `loop` (on the first n_inputs
    arguments) kept, both with `options` and the function's keywords (arrays moved with the
    arguments)."""
    def step(*args, **arrays):
        kept = loop(*args[:n_inputs], return_workspace=True, **options, **arrays)
        return loop_bp(*args, workspace=kept[-1], **options, **arrays)
    return step


def to_pair(a):
    """A bidirectional op's [2, ...] weights from one direction's."""
    return np.stack([a, a[::-1].copy()])


def torch_models(torch, ct):
    """(name, module, inputs) for each cells.torch family, float64 CPU tensors (every input
    needs a gradient; the packed GRU runs seq_len)."""
    torch.manual_seed(0)
    sL, bS, nIn, H = 5, 3, 4, 3
    x = torch.randn(sL, bS, nIn, dtype=torch.float64)
    packed = torch.nn.utils.rnn.pack_padded_sequence(x, [5, 3, 2])
    h0 = torch.randn(2, bS, H, dtype=torch.float64)
    return [
        ("GRU bidirectional packed", ct.GRU(nIn, H, bidirectional=True).double(),
         (packed, h0)),
        ("LSTM projection, two layers", ct.LSTM(nIn, H, num_layers=2, proj_size=2).double(),
         (x,)),
        ("RNN relu", ct.RNN(nIn, H, nonlinearity="relu").double(), (x, h0[:1])),
        ("LLTM", ct.LLTM(nIn, H).double(), (x[0], (h0[0], h0[1]))),
    ]


def outputs_and_grads(torch, module, inputs):
    """The module's outputs (tensors, a packed sequence's data) and the gradients of their sum
    of squares with respect to the parameters and the float inputs, as NumPy arrays."""
    tree_leaves = torch.utils._pytree.tree_leaves
    inputs = [t.detach().requires_grad_() if isinstance(t, torch.Tensor) else t for t in inputs]
    outputs = [t for t in tree_leaves(module(*inputs))
               if isinstance(t, torch.Tensor) and t.is_floating_point()]
    wrt = list(module.parameters()) + [t for t in tree_leaves(inputs)
                                       if isinstance(t, torch.Tensor) and t.requires_grad]
    grads = torch.autograd.grad(sum((t ** 2).sum() for t in outputs), wrt)
    return [t.detach().cpu().numpy() for t in outputs + list(grads)]


def to_cuda(torch, value):
    """A module's input on the GPU: a tensor or a packed sequence, or a tuple of tensors."""
    if isinstance(value, tuple) and not hasattr(value, "to"):
        return tuple(t.cuda() for t in value)
    return value.to("cuda")


def check_torch_modules():
    """cells.torch's modules on CUDA tensors against the same modules on CPU tensors, float64:
    outputs and every gradient within F64_TOL."""
    import torch

    import cells.torch as ct

    print("\n2. cells.torch on CUDA tensors against the CPU")
    failures = 0
    for name, module, inputs in torch_models(torch, ct):
        try:
            expected = outputs_and_grads(torch, module, inputs)
            on_gpu = [to_cuda(torch, t) for t in inputs]
            got = outputs_and_grads(torch, copy.deepcopy(module).cuda(), on_gpu)
            torch.cuda.synchronize()
            err = max(float(np.abs(g - e).max() / max(1.0, np.abs(e).max()))
                      for g, e in zip(got, expected))
        except Exception as e:   # noqa: BLE001 - report and go on
            failures += 1
            print(f"  {name}: ERROR {type(e).__name__}: {str(e).splitlines()[0][:150]}")
            continue
        ok = err <= F64_TOL
        failures += not ok
        print(f"  {name}: {'PASS' if ok else 'FAIL'} {err:.1e}")
    return failures


def check_correctness(cupy):
    print("1. Every function on CuPy arrays against the CPU path")
    failures = 0
    for dtype in (np.float64, np.float32):
        for name, fn, args, kwargs, gradient in cases(dtype):
            tol = F64_TOL if dtype == np.float64 else (F32_GRAD_TOL if gradient else F32_FWD_TOL)
            label = f"  {np.dtype(dtype).name:7s} {name}"
            try:
                expected = fn(*args, **kwargs)
                got = fn(*(to_gpu(cupy, a) for a in args),
                         **{k: to_gpu(cupy, v) for k, v in kwargs.items()})
                cupy.cuda.Device().synchronize()
                err = max_error(cupy, got, expected)
            except Exception as e:   # noqa: BLE001 - report and go on
                failures += 1
                print(f"{label}: ERROR {type(e).__name__}: {str(e).splitlines()[0][:150]}")
                continue
            if isinstance(err, str) or err > tol:
                failures += 1
                print(f"{label}: FAIL {err if isinstance(err, str) else f'{err:.2e} > {tol:.0e}'}")
            else:
                print(f"{label}: PASS {err:.1e}")
    print(f"  {failures} failed or raised" if failures else "  all passed")
    return failures


def median_ms(run, sync, reps):
    """The median of `reps` timed calls of run() (after 3 warm-up calls), in ms: each call
    bracketed by CUDA events on the current stream."""
    import torch

    for _ in range(3):
        run()
    sync()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return float(np.median(times))


def cells_runs(cupy, family, T, B, H):
    """(inference, training step) closures of cells' GPU backend on float32 CuPy arrays."""
    rng = np.random.default_rng(1)

    def r(*shape):
        return cupy.asarray(rng.normal(0, 0.1, shape).astype(np.float32))

    x, hI, cI, dLdh = r(T, B, H), r(B, H), r(B, H), r(T, B, H)
    dims = (T, B, H, H)
    if family == "GRU":
        Wx, Wh, b = r(H, 3 * H), r(H, 3 * H), r(2, 3 * H)

        def inference():
            gru.forward(_gpu, dims, x, hI, Wx, Wh, b, True, False, 1)

        def training():
            saved = gru.forward(_gpu, dims, x, hI, Wx, Wh, b, True, True, 1)
            gru.backward(_gpu, dims, x, hI, Wx, Wh, b, True, saved, dLdh, None, None, 1)
    else:
        Wx, Wr, b = r(H, 4 * H), r(H, 4 * H), r(4 * H)

        def inference():
            lstm.forward(_gpu, dims, x, Wx, Wr, b, hI, cI, None, None, 0.0, None, True, False,
                         1)

        def training():
            h, _, _, c, gates, m = lstm.forward(_gpu, dims, x, Wx, Wr, b, hI, cI, None, None,
                                                0.0, None, True, True, 1)
            lstm.backward(_gpu, dims, x, Wx, Wr, b, hI, cI, None, None, 0.0, None, True,
                          (h, c, gates, m), dLdh, None, None, 1)
    return inference, training


def torch_runs(family, T, B, H):
    """(inference, training step) closures of torch.nn.GRU / LSTM on cuDNN, float32."""
    import torch

    torch.backends.cudnn.enabled = True
    module = getattr(torch.nn, family)(H, H).cuda()
    x = torch.randn(T, B, H, device="cuda", requires_grad=True)
    dy = torch.randn(T, B, H, device="cuda")

    def inference():
        with torch.no_grad():
            module(x)

    def training():
        y = module(x)[0]
        torch.autograd.backward(y, dy)
    return inference, training


def time_against_cudnn(cupy):
    import torch

    print("\n3. Timings, float32, ms (medians of CUDA-event-timed calls); ratio = cuDNN / cells")
    print(f"  GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}, CuPy {cupy.__version__}")
    rows = []
    for family in ("GRU", "LSTM"):
        for T, B, H in SHAPES:
            reps = 20 if B * H < 64 * 256 else 10
            ours, theirs = cells_runs(cupy, family, T, B, H), torch_runs(family, T, B, H)
            for mode, k in (("inference", 0), ("training step", 1)):
                c = median_ms(ours[k], cupy.cuda.Device().synchronize, reps)
                t = median_ms(theirs[k], torch.cuda.synchronize, reps)
                rows.append((family, mode, f"T={T} B={B} H={H}", c, t))
    print(f"  | {'family':6s} | {'mode':13s} | {'shape':17s} | cells ms | cuDNN ms | ratio |")
    print("  |--------|---------------|-------------------|----------|----------|-------|")
    for family, mode, shape, c, t in rows:
        print(f"  | {family:6s} | {mode:13s} | {shape:17s} | {c:8.3f} | {t:8.3f} | {t / c:5.2f} |")


def main():
    start = time.time()
    try:
        import cupy
    except ImportError:
        sys.exit("needs CuPy (cupy-cuda13x)")
    print(f"cells {cells.__file__}; CuPy {cupy.__version__}, device "
          f"{cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    failures = check_correctness(cupy)
    failures += check_torch_modules()
    try:
        time_against_cudnn(cupy)
    except Exception:   # noqa: BLE001 - the correctness part has been printed
        traceback.print_exc()
        failures += 1
    print(f"\n{time.time() - start:.0f} s")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
