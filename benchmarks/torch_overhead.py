"""The overhead of cells.torch's inference call: a module's call against the bare prepared net it
runs on, float32.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH=. python benchmarks/torch_overhead.py
    PYTHONPATH=. python benchmarks/torch_overhead.py --quick       # LSTM and LSTMCell, 50 rounds
    PYTHONPATH=. python benchmarks/torch_overhead.py --clock wall --rounds 3000 --json o.json

A module that needs no gradient runs on cells' prepared nets; what it adds to the net's own
call is plumbing: torch's argument checks, tensors as NumPy arrays and back, the check that
its parameters have not changed. Each case is a serving call, I = H = 128, the state carried
from call to call (the module's hx is the state its previous call returned):

- ct.LSTM, ct.GRU, ct.RNN, one layer, x [1, B, 128] (one step, batched 3-D), hx given or None,
  under torch.inference_mode() or torch.no_grad(); batch_first (x [B, 1, 128]); B = 1 and 4;
- ct.LSTMCell, ct.GRUCell, ct.RNNCell, x [1, 128], hx given;
- ct.LLTM(128, 128), x [1, 128], its state given.

Contenders: "net", the family's prepared net of the module's weights (cells.lstm.prepare, ...;
the same packing as the module's own net) called on NumPy arrays, ``h, state = net(x, state,
n_threads=k)``, with k the threads the module's call chooses (its net's choice for the call's
size, at most torch.get_num_threads()); and "module", the module's call on tensors. Both run
under the case's grad mode. Before a case is timed both make two calls from the same state and
their outputs and states must be equal bit for bit (the same net computes them), else the run
stops.

Timing (time_alternating): WARMUP calls of each contender, then --rounds rounds of each in
turn (net, module, net, module, ...), a round being as many calls in a loop as fill ROUND_S,
with no settling sleeps (the calls last µs, and cells' team stays awake between them). A
contender's time is the median over its rounds of the µs per call; overhead = module - net.
The clock (--clock) is by default the CPU time of the calling thread (time.thread_time): on a
shared machine a round's wall time also counts the time the thread waited for a core, which
the calls do not cost. --clock wall times the wall clock (time.perf_counter); on more than one
thread (--threads 2, a call large enough to use two) the CPU clock counts the calling thread
alone. Many short alternated rounds and their medians keep the comparison fair while a
neighbour's load comes and goes.

Output (stdout, markdown): per thread count (--threads, default 1) a table of the cases with the
net's µs, the module's µs and the overhead; --json writes the settings, the environment and
every round. See benchmarks/README.md for how the scripts import cells.
"""
import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import median

import numpy as np
import torch

import cells.torch as ct
from cells.torch._modules import Stack
import harness

ROUND_S = 0.001     # a round's calls of one contender last at least this long
WARMUP = 50         # untimed calls of each contender before its first round
SIZE = 128          # I = H
MODES = {"inference_mode": torch.inference_mode, "no_grad": torch.no_grad}
CLOCKS = {"cpu": time.thread_time, "wall": time.perf_counter}


@dataclass(frozen=True)
class Case:
    """One serving call: the module class, the batch B, whether hx is given, the grad mode,
    and batch_first (stacks only)."""

    cls: type
    B: int = 1
    hx: bool = True
    mode: str = "inference_mode"
    batch_first: bool = False

    @property
    def stack(self):
        return issubclass(self.cls, Stack)

    def __str__(self):
        x = ((self.B, 1) if self.batch_first else (1, self.B)) if self.stack else (self.B,)
        options = ["batch_first"] if self.batch_first else []
        return (f"{self.cls.__name__} x{list(x) + [SIZE]}, hx {'given' if self.hx else 'None'}, "
                f"{self.mode}{''.join(', ' + o for o in options)}")


def grid(quick):
    """The cases: every stack, cell and the LLTM in the common serving call; for the LSTM (the
    GRU and RNN too without --quick) hx None, no_grad, batch_first and B = 4."""
    stacks = (ct.LSTM,) if quick else (ct.LSTM, ct.GRU, ct.RNN)
    cases = []
    for cls in stacks:
        cases += [Case(cls), Case(cls, hx=False), Case(cls, mode="no_grad"),
                  Case(cls, batch_first=True), Case(cls, B=4)]
    cases += [Case(cls) for cls in ((ct.LSTMCell,) if quick else
                                    (ct.LSTMCell, ct.GRUCell, ct.RNNCell, ct.LLTM))]
    return cases


def bare_net(module):
    """The prepared net of a one-layer module's weights, as the module prepares its own
    (its _prepare on its first layer's weights, which it runs without autograd)."""
    with torch.no_grad():
        return module._prepare(module._layer_weights()[0])


def contenders(case):
    """(net, module): the harness.Contenders of a case, each carrying its state from call to
    call (from the same random state, or from zeros with hx None), and a function that returns
    each one's output and states of its last call, as flat NumPy arrays (the LLTM's output is
    its new h)."""
    torch.manual_seed(0)
    module = (ct.LLTM(SIZE, SIZE) if case.cls is ct.LLTM else
              case.cls(SIZE, SIZE, batch_first=True) if case.batch_first else
              case.cls(SIZE, SIZE))
    net = bare_net(module)
    x = 2 * torch.rand(1, case.B, SIZE) - 1
    states = [torch.rand(1, case.B, SIZE) - 0.5 for _ in net.State._fields]
    k = net._default_threads(case.B, torch.get_num_threads)
    xa = x.numpy() if case.stack else x[0].numpy()
    start = net.State(*(s[0].numpy().copy() for s in states)) if case.hx else None
    if not case.stack:
        x, states = x[0], [s[0] for s in states]
    elif case.batch_first:
        x = x.transpose(0, 1).contiguous()
    hx = (tuple(states) if len(states) == 2 else states[0]) if case.hx else None
    results = {}

    def net_call():
        state = results["net"][1] if case.hx and "net" in results else start
        results["net"] = net(xa, state, n_threads=k)

    def module_call():
        state = results["module"][1] if case.hx and "module" in results else hx
        result = module(x) if state is None else module(x, state)
        if case.stack:
            results["module"] = result
        else:   # a cell returns its state, whose h is its output
            results["module"] = (result[0] if isinstance(result, tuple) else result), result

    def last(name):
        h, state = results[name]
        if isinstance(state, torch.Tensor):
            state = (state,)
        return [np.asarray(a).reshape(-1) for a in (h, *state)]

    mode = MODES[case.mode]
    return (harness.Contender("net", net_call, mode),
            harness.Contender("module", module_call, mode)), last


def check_same_bits(case, served, last):
    """Two calls of each contender from the same state: their outputs and states must be equal
    bit for bit."""
    for c in served:
        with c.threads():
            c.run()
            c.run()
    net, module = last("net"), last("module")
    if len(net) != len(module) or not all(np.array_equal(a, b) for a, b in zip(net, module)):
        raise SystemExit(f"{case}: the module's results differ from its bare net's")


def time_alternating(contenders, rounds, clock):
    """{name: [µs per call of each round]} of the contenders (harness.Contenders, each run
    inside its threads()), alternated round by round after WARMUP calls of each; a round is
    as many calls as the warm-up says fill ROUND_S."""
    numbers = {}
    for c in contenders:
        with c.threads():
            t0 = clock()
            for _ in range(WARMUP):
                c.run()
            numbers[c.name] = max(1, int(ROUND_S * WARMUP / max(clock() - t0, 1e-9)))
    us = {c.name: [] for c in contenders}
    for _ in range(rounds):
        for c in contenders:
            n = numbers[c.name]
            with c.threads():
                t0 = clock()
                for _ in range(n):
                    c.run()
                us[c.name].append(1e6 * (clock() - t0) / n)
    return us


def run(cases, threads, rounds, clock):
    """One row per case and thread count: case, threads, net_us, module_us (medians),
    overhead_us, rounds_us ({contender: [µs per call of each round]})."""
    rows = []
    for n in threads:
        torch.set_num_threads(n)
        for case in cases:
            served, last = contenders(case)
            check_same_bits(case, served, last)
            us = time_alternating(served, rounds, clock)
            net_us, module_us = median(us["net"]), median(us["module"])
            rows.append({"case": str(case), "threads": n, "net_us": net_us,
                         "module_us": module_us, "overhead_us": module_us - net_us,
                         "rounds_us": us})
            print(f"  {case}, {n} thread(s): overhead {module_us - net_us:.1f} µs",
                  file=sys.stderr, flush=True)
    return rows


def table(rows, n):
    """The markdown table of the rows of n threads."""
    lines = ["| case | net µs | module µs | overhead µs |", "|---|---|---|---|"]
    lines += [f"| {r['case']} | {r['net_us']:.1f} | {r['module_us']:.1f} | "
              f"{r['overhead_us']:.1f} |" for r in rows if r["threads"] == n]
    return "\n".join(lines)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", nargs="+", type=int, default=[1],
                        help="torch.set_num_threads of each pass (default 1)")
    parser.add_argument("--rounds", type=int,
                        help="timed rounds per contender (default 1000; --quick: 50)")
    parser.add_argument("--clock", choices=CLOCKS, default="cpu",
                        help="cpu: the calling thread's CPU time (default); wall: wall time")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: the LSTM's cases and the LSTMCell, 50 rounds")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    args.rounds = args.rounds or (50 if args.quick else 1000)
    return args


def main(argv=None):
    args = parse_args(argv)
    t0 = time.perf_counter()
    env = harness.environment()
    print(f"cells {env['cells']} ({env['cells_path']}); CPU: {env['cpu']}, {env['cpus']} CPUs, "
          f"load average {env['load_average']}; torch {env['torch']}", flush=True)
    rows = run(grid(args.quick), args.threads, args.rounds, CLOCKS[args.clock])
    for n in args.threads:
        print(f"\n### {n} thread(s): median µs per call ({args.clock} clock) over {args.rounds} "
              f"alternated rounds; overhead = module - net\n\n{table(rows, n)}")
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    if args.json:
        settings = {"threads": args.threads, "rounds": args.rounds, "clock": args.clock,
                    "quick": args.quick, "round_s": ROUND_S, "warmup": WARMUP, "size": SIZE}
        args.json.write_text(json.dumps({"environment": env, "settings": settings,
                                         "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
