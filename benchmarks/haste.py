"""haste's layers on the CPU: cells' LayerNorm LSTM training step against cells' plain LSTM, a
PyTorch step loop, and itself with zoneout and DropConnect.

The issue's targets, each a ratio of medians from one alternated run (harness.time_alternating):
- ln/lstm: a LayerNorm LSTM training step within 1.3x of cells' plain LSTM at the same shape;
- torch/ln: at least 5x faster than a PyTorch step loop built from nn.LayerNorm and matrix
  products (how users run the layer on a CPU today; autograd for the backward);
- reg/ln - 1: zoneout (a Bernoulli mask drawn per call, as haste draws it) and DropConnect (the
  recurrent kernel dropped and rescaled per call, its gradient masked) under 10% of a step.

A training step is the forward with its workspace and the backward of loss = Σ h, float32,
x ~ U(-1, 1), weights U(-1/sqrt(H), 1/sqrt(H)), T = 100, I = H.

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


def cells_layer_norm(ln, dLdh, threads, regularised=False, seed=1):
    """cells' LayerNorm LSTM training step; `regularised`: with a zoneout mask and a dropped
    recurrent kernel drawn per call."""
    rng = np.random.default_rng(seed)

    def run():
        args, zoneout, keep = dict(ln), None, None
        if regularised:
            T, B, H = dLdh.shape
            zoneout = (rng.random((T, B, H), np.float32) >= ZONEOUT).astype(np.float32)
            keep = (rng.random(ln["Wh"].shape, np.float32) >= DROPOUT) / np.float32(1 - DROPOUT)
            args["Wh"] = ln["Wh"] * keep
        values = tuple(args.values())
        ws = cells.layerNormLstmTimeLoop(*values, zoneout=zoneout, return_workspace=True,
                                         n_threads=threads).workspace
        grads = cells.layerNormLstmTimeLoopBp(*values, dLdh, workspace=ws, zoneout=zoneout,
                                              n_threads=threads)
        return grads.dLdWh if keep is None else grads.dLdWh * keep

    return Contender("ln+reg" if regularised else "ln", run)


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
    print(f"cells from {cells.__file__}")
    print(f"T={args.steps}, I=H, float32, training step; medians of {args.repeats} samples (ms)")
    print(f"{'B':>3} {'H':>4} {'thr':>3} {'lstm':>9} {'ln':>9} {'ln+reg':>9} {'torch':>9}"
          f" {'ln/lstm':>8} {'torch/ln':>8} {'reg/ln-1':>8}")
    rows = []
    for H in args.hidden:
        for B in args.batches:
            ln, lstm, dLdh = problem(args.steps, B, H)
            for threads in args.threads:
                contenders = [cells_lstm(lstm, dLdh, threads),
                              cells_layer_norm(ln, dLdh, threads),
                              cells_layer_norm(ln, dLdh, threads, regularised=True)]
                if torch is not None:
                    contenders.append(torch_layer_norm(torch, ln, dLdh, threads))
                samples, _ = time_alternating(contenders, repeats=args.repeats)
                ms = {name: 1e3 * median(s) for name, s in samples.items()}
                row = dict(B=B, H=H, threads=threads, **ms,
                           ln_over_lstm=ms["ln"] / ms["lstm"],
                           torch_over_ln=ms.get("torch", np.nan) / ms["ln"],
                           regularisation=ms["ln+reg"] / ms["ln"] - 1)
                rows.append(row)
                print(f"{B:>3} {H:>4} {threads:>3} {ms['lstm']:>9.2f} {ms['ln']:>9.2f} "
                      f"{ms['ln+reg']:>9.2f} {ms.get('torch', np.nan):>9.2f} "
                      f"{row['ln_over_lstm']:>8.2f} {row['torch_over_ln']:>8.1f} "
                      f"{row['regularisation']:>+8.1%}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"environment": environment(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
