"""haste's layers on the CPU: cells' LayerNorm LSTM training step against cells' plain LSTM, a
PyTorch step loop, and itself with zoneout and DropConnect.

The contenders, each a training step (the forward with its workspace, the backward of
loss = Σ h), float32, x ~ U(-1, 1), weights U(-1/sqrt(H), 1/sqrt(H)), T = 100, I = H:
- lstm, ln: cells' plain LSTM and LayerNorm LSTM (the NumPy functions);
- haste, haste+reg: cells.haste.LayerNormLSTM in training mode, without and with zoneout 0.1
  and DropConnect 0.1 (the mask and the dropped kernel drawn per call, as haste draws them);
- torch: a PyTorch LayerNorm LSTM as users write one: nn.LayerNorm modules and matrix products
  in a Python step loop, autograd for the backward.

The issue's targets, each a ratio of medians from one alternated run (harness.time_alternating):
ln/lstm within 1.3; torch/haste at least 5 (module against module); haste+reg/haste - 1 under
10%.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=. python benchmarks/haste.py
    python benchmarks/haste.py --batches 1 --hidden 256 --threads 1 --repeats 3
"""
import argparse
import json
from statistics import median

import numpy as np

import cells
from harness import Contender, _torch_threads, environment, optional_torch, time_alternating

ZONEOUT, DROPOUT = 0.1, 0.1


def problem(T, B, H, seed=0):
    """The LayerNorm LSTM's and the plain LSTM's arguments for one shape, float32 (haste's
    initial gains and biases: gamma ones, beta_h zeros)."""
    rng = np.random.default_rng(seed)
    bound = 1 / np.sqrt(H)

    def uniform(*shape, scale=bound):
        return rng.uniform(-scale, scale, shape).astype(np.float32)

    x, hI, cI = uniform(T, B, H, scale=1.0), uniform(B, H, scale=0.5), uniform(B, H, scale=0.5)
    Wx, Wh, b = uniform(H, 4 * H), uniform(H, 4 * H), uniform(4 * H)
    ln = dict(x=x, Wx=Wx, Wh=Wh, b=b, gamma=np.ones((2, 4 * H), np.float32),
              gamma_h=np.ones(H, np.float32), beta_h=np.zeros(H, np.float32), hI=hI, cI=cI)
    lstm = dict(x=x, Wx=Wx, Wr=Wh, b=b, hI=hI, cI=cI)
    return ln, lstm, np.ones((T, B, H), np.float32)


def cells_lstm(lstm, dLdh, threads):
    """cells' plain LSTM training step."""
    args = tuple(lstm.values())

    def run():
        ws = cells.lstmLayerTimeLoop(*args, return_workspace=True, n_threads=threads).workspace
        return cells.lstmLayerTimeLoopBp(*args, dLdh, workspace=ws, n_threads=threads).dLdWr

    return Contender("lstm", run)


def cells_layer_norm(ln, dLdh, threads):
    """cells' LayerNorm LSTM training step."""
    args = tuple(ln.values())

    def run():
        ws = cells.layerNormLstmTimeLoop(*args, return_workspace=True,
                                         n_threads=threads).workspace
        return cells.layerNormLstmTimeLoopBp(*args, dLdh, workspace=ws, n_threads=threads).dLdWh

    return Contender("ln", run)


def haste_module(torch, ln, dLdh, threads, regularised):
    """cells.haste.LayerNormLSTM's training step, with zoneout and DropConnect or without."""
    import cells.haste
    H = ln["hI"].shape[1]
    rate = ZONEOUT if regularised else 0.0
    layer = cells.haste.LayerNormLSTM(H, H, zoneout=rate, dropout=DROPOUT if regularised else 0.0)
    with torch.no_grad():
        for name, value in (("kernel", ln["Wx"]), ("recurrent_kernel", ln["Wh"]),
                            ("bias", ln["b"])):
            getattr(layer, name).copy_(torch.from_numpy(value))
    x = torch.from_numpy(ln["x"])
    state = tuple(torch.from_numpy(ln[k])[None] for k in ("hI", "cI"))
    grad = torch.from_numpy(dLdh)

    def run():
        output, _ = layer(x, state)
        output.backward(grad)
        dWh = layer.recurrent_kernel.grad
        layer.zero_grad(set_to_none=True)
        return dWh.numpy()

    return Contender("haste+reg" if regularised else "haste", run,
                     lambda: _torch_threads(torch, threads))


def torch_layer_norm(torch, ln, dLdh, threads):
    """A PyTorch LayerNorm LSTM as users write one: nn.LayerNorm modules and matrix products in
    a Python step loop, autograd for the backward."""
    nn = torch.nn
    H = ln["hI"].shape[1]
    params = {k: nn.Parameter(torch.from_numpy(ln[k].copy())) for k in ("Wx", "Wh", "b")}
    norms = [nn.LayerNorm(4 * H, elementwise_affine=True, bias=False),
             nn.LayerNorm(4 * H, elementwise_affine=True, bias=False), nn.LayerNorm(H)]
    x, h0, c0 = (torch.from_numpy(ln[k]) for k in ("x", "hI", "cI"))
    grad = torch.from_numpy(dLdh)

    def run():
        h, c, outputs = h0, c0, []
        gx = norms[0](x @ params["Wx"])
        for t in range(x.shape[0]):
            v = gx[t] + norms[1](h @ params["Wh"]) + params["b"]
            i, g, f, o = v.chunk(4, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(norms[2](c))
            outputs.append(h)
        torch.stack(outputs).backward(grad)
        dWh = params["Wh"].grad
        for p in (*params.values(), *(q for n in norms for q in n.parameters())):
            p.grad = None
        return dWh.numpy()

    return Contender("torch", run, lambda: _torch_threads(torch, threads))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--hidden", type=int, nargs="+", default=[256, 512])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args(argv)
    torch = optional_torch()
    if torch is None:
        raise SystemExit("benchmarks/haste.py needs torch (cells.haste and the step loop)")
    print(f"cells from {cells.__file__}")
    print(f"T={args.steps}, I=H, float32, training step; medians of {args.repeats} samples (ms)")
    names = ("lstm", "ln", "haste", "haste+reg", "torch")
    print(f"{'B':>3} {'H':>4} {'thr':>3} " + " ".join(f"{n:>9}" for n in names)
          + f" {'ln/lstm':>8} {'torch/hst':>9} {'reg':>7}")
    rows = []
    for H in args.hidden:
        for B in args.batches:
            ln, lstm, dLdh = problem(args.steps, B, H)
            for threads in args.threads:
                contenders = [cells_lstm(lstm, dLdh, threads),
                              cells_layer_norm(ln, dLdh, threads),
                              haste_module(torch, ln, dLdh, threads, False),
                              haste_module(torch, ln, dLdh, threads, True),
                              torch_layer_norm(torch, ln, dLdh, threads)]
                samples, _ = time_alternating(contenders, repeats=args.repeats)
                ms = {name: 1e3 * median(s) for name, s in samples.items()}
                row = dict(B=B, H=H, threads=threads, **ms,
                           ln_over_lstm=ms["ln"] / ms["lstm"],
                           torch_over_haste=ms["torch"] / ms["haste"],
                           regularisation=ms["haste+reg"] / ms["haste"] - 1)
                rows.append(row)
                print(f"{B:>3} {H:>4} {threads:>3} "
                      + " ".join(f"{ms[n]:>9.2f}" for n in names)
                      + f" {row['ln_over_lstm']:>8.2f} {row['torch_over_haste']:>9.1f}"
                      f" {row['regularisation']:>+7.1%}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"environment": environment(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
