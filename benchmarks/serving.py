"""Serving: the time of one call of a recurrent net whose state is carried from call to call,
cells' prepared nets against ONNX Runtime and PyTorch, float32.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/serving.py --json serving.json
    python benchmarks/serving.py --quick           # smoke run: B=1 I=H=128, 1 thread, 2 rounds
    python benchmarks/serving.py --neighbours      # 2 threads against 1, with busy neighbours
    python benchmarks/serving.py --lowp            # int8 and bfloat16 nets: accuracy and speed

A served net gets one step (x [B, I]) or a chunk of steps (x [steps, B, I]) per call and carries
its state to the next call. The contenders, each on the thread count under test:

- cells: the net prepared once (cells.lstm.prepare, cells.gru.prepare), called with out=
  buffers that are reused, the state buffer being the state passed in: nothing is allocated
  per call;
- onnxruntime: one session per shape, reused, of a single LSTM or GRU node (opset 14, weights by
  cells.convert.lstm_to_onnx / gru_to_onnx, gates i, o, f, c and z, r, h), with
  intra_op_num_threads and inter_op_num_threads the thread count; each call feeds Y_h (and Y_c)
  of the previous one back as initial_h (and initial_c);
- torch: torch.nn.LSTM / torch.nn.GRU (weights by cells.convert.lstm_to_torch / gru_to_torch)
  under torch.inference_mode() and torch.set_num_threads, the state passed back in.

The GRU is PyTorch's in all three (linear before reset). Grid: LSTM and GRU; B = 1, 4, 16; one
step, chunks of 8 and of 32 steps; I = H = 64, 128, 256, 1024, and the LSTM at I=512 H=1024, the
GRU at I=64 H=256; 1 and 2 threads (--threads). Whole sequences, T=100 at B=1 I=H=128 and B=16
I=H=256, run through the prepared net, cells' plain time loop (cells.lstmLayerTimeLoop,
cells.gruTimeLoop: weights checked and read unpacked on every call) and ONNX Runtime. Inputs and
weights are harness.make_inputs's (PyTorch's initialisation, fixed seed).

Same math: before a shape is timed, every contender makes two calls from the same state on the
same input, and its outputs and state must agree with cells' prepared net within
harness.TOLERANCE (float32: 1e-4 x max(1, max |value|)); a contender that does not stops the
run. Timing (serving-peers.md's method, harness.time_alternating): warm-up calls, then --rounds
rounds of each contender in turn (A B C A B C ...); a round is as many calls in a loop as fill
ROUND_S (at least one), started after SETTLE_S of sleep, so that the previous contender's idle
pools stop spinning, and one untimed call, which wakes the contender's own threads. A
contender's time is the median over its rounds of the time per call.

Output (stdout, markdown): per thread count a table of the per-call µs and the ratios peer µs /
cells µs (above 1: cells is faster), then the issue's targets with the measured ratio, met or
MISSED. They hold at B=1 on 1 thread:
  - one step, H <= 256: >= 2x ONNX Runtime and >= 4x torch;
  - one step, H = 1024: >= 1.6x ONNX Runtime;
  - a chunk of 8 steps: >= 1.5x ONNX Runtime;
  - a whole sequence, T=100 B=1 I=H=128, through the prepared net: >= 1.3x ONNX Runtime.
The FMA peak (peak.py) and the thread pools come first; progress goes to stderr. --json writes
the environment, the peak, the settings, every row (with each round's µs) and the targets. The
default grid is sized to take about 10 minutes on a quiet 2-core machine (most of it the
settling sleeps and the H=1024 calls of torch); --quick runs a few shapes in seconds.

--neighbours measures something else: whether cells' 2-thread call stays fast when every core
is busy. It starts one CPU-bound process per core (a Python loop, ended at the end of the
measurement and in any case after NEIGHBOURS_LIMIT_S), and times the prepared LSTM on 2 threads
against 1, alternated, alone and then with the neighbours: a whole sequence (T=100) and a chunk
of 8 steps, at B=1 and B=16, I=H=256. The issue's target: with the neighbours, the 2-thread
call takes at most 1.3x the 1-thread call.

--lowp measures the int8 and bfloat16 prepared nets (prepare(..., weights="int8" |
"bfloat16")) on the issue's problem: torch.nn.LSTM's / GRU's initialisation, x ~ N(0, 1).
Accuracy: max and mean |h - h_f64| over every step of a whole sequence run from zero states in
one call, against benchmarks/numpy_cells.py's float64 net, for cells' float32, int8 and bf16
nets, ONNX Runtime's contrib DynamicQuantizeLSTM ("ORT-DQ": int8 weights symmetric per column,
as onnxruntime.quantization makes them; the LSTM only, ORT has no int8 GRU), torch's dynamic
quantization of nn.LSTM / nn.GRU ("torch qint8": per-tensor int8 weights, fbgemm) and a NumPy
emulation of plain bfloat16 ("bf16 rounding": weights, x and the states rounded to bfloat16,
float32 sums). Speed: per call as above, each case on its own thread count (LOWP_SPEED: one
step at I=512 H=1024 and at I=H=128, whole sequences of 200 steps at B=1 and B=8, I=H=256, on
1 thread; B=64 T=100 I=H=256 on 2), each of cells' nets first checked against the float64 net
over the same two calls (LOWP_TOLERANCE for the int8 and bfloat16 ones; a peer's error is
reported, never checked: ONNX Runtime's int8 products saturate on CPUs without AVX512_VNNI).
The issue's targets (LOWP_TARGETS, ACCURACY_TARGETS) are printed met or MISSED; --json has
every row.

torch and ONNX Runtime (with onnx, which builds the model) join when importable; cells, numpy,
scipy and threadpoolctl are required (see README.md for how the benchmarks import cells).
"""
import argparse
import contextlib
import json
import multiprocessing
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import median

import numpy as np

import cells
import harness
import numpy_cells
import peak
from cells import convert

ROUND_S = 0.025     # a round's calls of one contender last at least this long
SETTLE_S = 0.1      # sleep before every round: the pools of the contender before stop spinning
WARMUP = 3          # untimed calls of each contender before its first round

BATCHES = (1, 4, 16)
STEPS = (1, 8, 32)
SIZES = {"lstm": ((64, 64), (128, 128), (256, 256), (1024, 1024), (512, 1024)),
         "gru": ((64, 64), (128, 128), (256, 256), (1024, 1024), (64, 256))}     # (I, H)
SEQUENCE_T = 100
SEQUENCES = ((1, 128), (16, 256))                                               # (B, I=H)

# The state arrays of harness.make_inputs, in the order of the family's State and ONNX's
# initial_h, initial_c.
STATE_NAMES = {"lstm": ("hI", "cI"), "gru": ("hI",)}

NEIGHBOURS_TARGET = 1.3
NEIGHBOURS_LIMIT_S = 900    # the neighbours end by themselves after this, whatever happens here


@dataclass(frozen=True)
class Case:
    """One shape: `steps` per call (1: x [B, I], else [steps, B, I]); `sequence`: a whole
    sequence, timed against cells' plain time loop instead of torch."""
    family: str
    B: int
    I: int
    H: int
    steps: int
    sequence: bool = False

    @property
    def kind(self):
        return "sequence" if self.sequence else "step" if self.steps == 1 else "chunk"

    def __str__(self):
        call = {"sequence": f"T={self.steps}", "step": "1 step", "chunk": f"{self.steps} steps"}
        return f"{self.family} B={self.B} I={self.I} H={self.H} {call[self.kind]}"


def grid(quick):
    """The cases: serving calls, then whole sequences."""
    if quick:
        serving = [Case(f, 1, 128, 128, s) for f in SIZES for s in (1, 8)]
        return serving + [Case(f, 1, 128, 128, SEQUENCE_T, True) for f in SIZES]
    serving = [Case(f, B, I, H, s) for f, sizes in SIZES.items() for I, H in sizes
               for B in BATCHES for s in STEPS]
    return serving + [Case(f, B, H, H, SEQUENCE_T, True) for f in SIZES for B, H in SEQUENCES]


# ----------------------------------------------------------------------------------------------
# Contenders
# ----------------------------------------------------------------------------------------------

@dataclass
class Served:
    """A contender bound to one case: call() makes one call from the carried state and carries
    the new one; result() is (h, *state) of the last call, copied, in cells' shapes; threads()
    is entered around calls."""
    name: str
    call: Callable[[], None]
    result: Callable[[], tuple]
    threads: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext


def cells_x(case, inp):
    """x as a prepared net takes it: [B, I] for one step, else [steps, B, I]."""
    return inp.x[0] if case.steps == 1 else inp.x


def prepare(case, inp, weights=None):
    """cells' prepared net of the case; `weights` as prepare takes it (None, "int8",
    "bfloat16")."""
    if case.family == "lstm":
        return cells.lstm.prepare(inp["Wx"], inp["Wr"], inp["b"], weights=weights)
    return cells.gru.prepare(inp["Wx"], inp["Wh"], inp["b"], linear_before_reset=True,
                             weights=weights)


def prepared_contender(case, inp, n_threads, name="cells", net=None):
    """cells' prepared net (`net`, else prepared here) with reused out= buffers: the state
    buffer is the state passed in, which the call reads before it writes it."""
    if net is None:
        net = prepare(case, inp)
    x = cells_x(case, inp)
    h = np.empty(x.shape[:-1] + (case.H,), np.float32)
    state = net.State(*(inp[s].copy() for s in STATE_NAMES[case.family]))
    out = (h, state)

    def call():
        net(x, state, out=out, n_threads=n_threads)

    return Served(name, call, lambda: tuple(a.copy() for a in (h, *state)))


def time_loop_contender(case, inp, n_threads):
    """cells' plain time loop on the unpacked weights, the final state fed back."""
    x, Wx, b = inp.x, inp["Wx"], inp["b"]
    h, state = None, [inp[s] for s in STATE_NAMES[case.family]]

    if case.family == "lstm":
        def call():
            nonlocal h
            h, hL, cL = cells.lstmLayerTimeLoop(x, Wx, inp["Wr"], b, *state,
                                                n_threads=n_threads)
            state[:] = hL, cL
    else:
        def call():
            nonlocal h
            h = cells.gruTimeLoop(x, state[0], Wx, inp["Wh"], b, linear_before_reset=True,
                                  n_threads=n_threads)
            state[0] = h[-1]

    return Served("cells_loop", call, lambda: tuple(a.copy() for a in (h, *state)))


def onnx_model(case, W, R, B):
    """A single LSTM or GRU node with the weights as initializers; inputs X, initial_h
    (initial_c), outputs Y, Y_h (Y_c)."""
    from onnx import helper

    states = ("initial_h", "initial_c")[:len(STATE_NAMES[case.family])]
    attributes = {"linear_before_reset": 1} if case.family == "gru" else {}
    node = helper.make_node(case.family.upper(), ["X", "W", "R", "B", "", *states],
                            onnx_outputs(case), hidden_size=case.H, **attributes)
    return one_node_model(case, node, {"W": W, "R": R, "B": B},
                          [helper.make_opsetid("", 14)])


def onnx_outputs(case):
    return ["Y", "Y_h", "Y_c"][:1 + len(STATE_NAMES[case.family])]


def one_node_model(case, node, initializers, opsets):
    """The model of one recurrent node whose graph inputs are X and the states, its outputs
    onnx_outputs(case), the weights `initializers` ({name: array})."""
    from onnx import TensorProto, helper, numpy_helper

    states = ("initial_h", "initial_c")[:len(STATE_NAMES[case.family])]

    def tensor(name, shape):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

    graph = helper.make_graph(
        [node], case.family,
        [tensor("X", [case.steps, case.B, case.I])] + [tensor(s, [1, case.B, case.H])
                                                      for s in states],
        [tensor("Y", [case.steps, 1, case.B, case.H])] + [tensor(o, [1, case.B, case.H])
                                                         for o in onnx_outputs(case)[1:]],
        initializer=[numpy_helper.from_array(np.ascontiguousarray(a), name)
                     for name, a in initializers.items()])
    return helper.make_model(graph, opset_imports=opsets)


def onnx_weights(case, inp):
    """W, R, B of the ONNX node (gates i, o, f, c and z, r, h)."""
    if case.family == "lstm":
        return convert.lstm_to_onnx(inp["Wx"], inp["Wr"], inp["b"])[:3]
    return convert.gru_to_onnx(inp["Wx"], inp["Wh"], inp["b"])


def onnx_contender(case, inp, n_threads, ort, name="onnxruntime", model=None):
    """A reused ONNX Runtime session of `model` (else the float32 node) on n_threads; Y_h
    (Y_c) fed back as initial_h (initial_c)."""
    if model is None:
        model = onnx_model(case, *onnx_weights(case, inp))
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = n_threads
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    names = STATE_NAMES[case.family]
    states = ("initial_h", "initial_c")[:len(names)]
    outputs = onnx_outputs(case)
    feeds = {"X": inp.x, **{s: inp[n][None] for s, n in zip(states, names)}}
    y = None

    def call():
        nonlocal y
        y, *state = session.run(outputs, feeds)
        feeds.update(zip(states, state))

    def result():
        # Y [steps, 1, B, H] and the states [1, B, H] in cells' shapes.
        return (y.reshape(cells_x(case, inp).shape[:-1] + (case.H,)),
                *(feeds[s][0].copy() for s in states))

    return Served(name, call, result)


def torch_contender(case, inp, n_threads, torch, quantized=False):
    """torch.nn.LSTM / GRU under inference_mode on n_threads, the state passed back in;
    `quantized`: the module through torch's dynamic int8 quantization ("torch qint8":
    int8 weights per tensor, activations quantized per call, fbgemm)."""
    if case.family == "lstm":
        module = torch.nn.LSTM(case.I, case.H)
        weights = convert.lstm_to_torch(inp["Wx"], inp["Wr"], inp["b"])
    else:
        module = torch.nn.GRU(case.I, case.H)
        weights = convert.gru_to_torch(inp["Wx"], inp["Wh"], inp["b"], linear_before_reset=True)
    with torch.no_grad():
        for parameter, a in zip((module.weight_ih_l0, module.weight_hh_l0, module.bias_ih_l0,
                                 module.bias_hh_l0), weights):
            parameter.copy_(torch.from_numpy(a))
    if quantized:
        # quantize_dynamic swaps the submodules of the given one, never itself: the LSTM goes
        # in a ModuleDict and comes out a DynamicQuantizedLSTM.
        with warnings.catch_warnings():     # "deprecated ... will be removed" (torch 2.13)
            warnings.simplefilter("ignore")
            module = torch.ao.quantization.quantize_dynamic(
                torch.nn.ModuleDict({"rnn": module}), {torch.nn.LSTM, torch.nn.GRU},
                dtype=torch.qint8)["rnn"]
        if "quantized" not in type(module).__module__:
            raise SystemExit(f"torch did not quantize {type(module).__name__}")
    x = torch.from_numpy(inp.x)
    states = tuple(torch.from_numpy(inp[n][None].copy()) for n in STATE_NAMES[case.family])
    state = states if case.family == "lstm" else states[0]
    y = None

    def call():
        nonlocal y, state
        with torch.inference_mode():
            y, state = module(x, state)

    def result():
        return (y.numpy().reshape(cells_x(case, inp).shape[:-1] + (case.H,)),
                *(s[0].numpy().copy() for s in (state if case.family == "lstm" else (state,))))

    return Served("torch qint8" if quantized else "torch", call, result,
                  lambda: harness._torch_threads(torch, n_threads))


def contenders(case, inp, n_threads, torch, ort):
    """cells' prepared net first (the reference of the check), then its peers: ONNX Runtime
    and torch for serving calls, the plain time loop and ONNX Runtime for whole sequences."""
    served = [prepared_contender(case, inp, n_threads)]
    if case.sequence:
        served.append(time_loop_contender(case, inp, n_threads))
    if ort is not None:
        served.append(onnx_contender(case, inp, n_threads, ort))
    if torch is not None and not case.sequence:
        served.append(torch_contender(case, inp, n_threads, torch))
    return served


def check_same_math(case, served):
    """Two calls of every contender from the same state; {name: max abs difference of h and
    the state to cells' prepared net}. Outside harness.TOLERANCE the run stops: the timings
    would compare different computations."""
    results = {}
    for s in served:
        with s.threads():
            s.call()
            s.call()
        results[s.name] = s.result()
    reference = results[served[0].name]
    diffs = {}
    for name, result in results.items():
        diffs[name] = max(harness.max_abs_diff(a, r) for a, r in zip(result, reference))
        if not all(a.shape == r.shape and harness.within_tolerance(diffs[name], r, np.float32)
                   for a, r in zip(result, reference)):
            raise SystemExit(f"{case}: {name} differs from cells' prepared net by "
                             f"{diffs[name]:.1e} (shapes {[a.shape for a in result]} against "
                             f"{[r.shape for r in reference]})")
    return diffs


def time_served(served, rounds):
    """{name: [µs per call of each round]}, the contenders alternated."""
    samples, _ = harness.time_alternating(
        [harness.Contender(s.name, s.call, s.threads) for s in served], repeats=rounds,
        warmup=WARMUP, min_sample_s=ROUND_S, settle_s=SETTLE_S)
    return {name: [1e6 * t for t in times] for name, times in samples.items()}


def run_grid(cases, threads, rounds, torch, ort):
    """One row per case, thread count and contender: the case's fields, kind, threads,
    contender, us (the median), rounds_us, diff (to cells' prepared net, checked once per
    case)."""
    rows = []
    for case in cases:
        inp = harness.make_inputs(case.family, harness.Shape(case.steps, case.B, case.I, case.H))
        diffs = None
        for n_threads in threads:
            served = contenders(case, inp, n_threads, torch, ort)
            if diffs is None:
                diffs = check_same_math(case, served)
            rows += timed_rows(case, n_threads, served, diffs, rounds)
    return rows


def timed_rows(case, n_threads, served, diffs, rounds):
    """The served contenders of a case timed (time_served): one row each, with its difference
    to the case's check (diffs), and a line of progress on stderr."""
    times = time_served(served, rounds)
    print(f"{case}, {n_threads} thr: " + ", ".join(f"{name} {median(us):.1f} µs"
                                                  for name, us in times.items()),
          file=sys.stderr, flush=True)
    return [{**asdict(case), "kind": case.kind, "threads": n_threads, "contender": name,
             "us": median(us), "rounds_us": us, "diff": diffs[name]}
            for name, us in times.items()]


# ----------------------------------------------------------------------------------------------
# Tables and targets
# ----------------------------------------------------------------------------------------------

def by_case(rows):
    """{(case, threads): {contender: µs}}, in the order of the rows."""
    table = {}
    for r in rows:
        case = Case(r["family"], r["B"], r["I"], r["H"], r["steps"], r["sequence"])
        table.setdefault((case, r["threads"]), {})[r["contender"]] = r["us"]
    return table


def markdown(header, lines):
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                     + ["| " + " | ".join(line) + " |" for line in lines])


def fmt_us(us):
    return "-" if us is None else f"{us:.1f}" if us < 1000 else f"{us:.0f}"


def fmt_ratio(num, den):
    return "-" if num is None else f"{num / den:.2f}"


def tables(rows, threads):
    """Per thread count: the serving calls, then the whole sequences."""
    cases = by_case(rows)
    out = []
    for n in threads:
        serving = [(c, t) for (c, m), t in cases.items() if m == n and not c.sequence]
        sequences = [(c, t) for (c, m), t in cases.items() if m == n and c.sequence]
        if serving:
            out.append(f"### Serving calls, {n} thread{'s' * (n > 1)} (µs per call; "
                       f"ratio = peer / cells, above 1: cells is faster)\n")
            out.append(markdown(
                ("family", "B", "I", "H", "steps", "cells", "ORT", "torch", "ORT / cells",
                 "torch / cells"),
                [(c.family, str(c.B), str(c.I), str(c.H), str(c.steps), fmt_us(t["cells"]),
                  fmt_us(t.get("onnxruntime")), fmt_us(t.get("torch")),
                  fmt_ratio(t.get("onnxruntime"), t["cells"]),
                  fmt_ratio(t.get("torch"), t["cells"])) for c, t in serving]) + "\n")
        if sequences:
            out.append(f"### Whole sequences, {n} thread{'s' * (n > 1)} (µs per call; "
                       f"prepared = cells' prepared net, loop = cells' plain time loop)\n")
            out.append(markdown(
                ("family", "T", "B", "I", "H", "prepared", "loop", "ORT", "loop / prepared",
                 "ORT / prepared"),
                [(c.family, str(c.steps), str(c.B), str(c.I), str(c.H), fmt_us(t["cells"]),
                  fmt_us(t["cells_loop"]), fmt_us(t.get("onnxruntime")),
                  fmt_ratio(t["cells_loop"], t["cells"]),
                  fmt_ratio(t.get("onnxruntime"), t["cells"])) for c, t in sequences]) + "\n")
    return "\n".join(out)


@dataclass(frozen=True)
class Target:
    """cells must be `required` times faster than `contender` on every case `applies` to, at
    B=1 on 1 thread."""
    name: str
    applies: Callable[[Case], bool]
    contender: str
    required: float


TARGETS = (
    Target("one step, H <= 256, vs ORT", lambda c: c.kind == "step" and c.H <= 256,
           "onnxruntime", 2.0),
    Target("one step, H <= 256, vs torch", lambda c: c.kind == "step" and c.H <= 256,
           "torch", 4.0),
    Target("one step, H = 1024, vs ORT", lambda c: c.kind == "step" and c.H == 1024,
           "onnxruntime", 1.6),
    Target("chunk of 8 steps vs ORT", lambda c: c.kind == "chunk" and c.steps == 8,
           "onnxruntime", 1.5),
    Target("sequence T=100 H=128, prepared, vs ORT",
           lambda c: c.sequence and c.steps == 100 and c.I == c.H == 128, "onnxruntime", 1.3),
)


def check_targets(rows):
    """One dict per target and case measured at B=1 on 1 thread: target, case, required,
    ratio (peer µs / cells µs), met."""
    measured = [(case, times) for (case, n), times in by_case(rows).items()
                if n == 1 and case.B == 1]
    results = []
    for target in TARGETS:
        for case, times in measured:
            if target.applies(case) and target.contender in times:
                ratio = times[target.contender] / times["cells"]
                results.append({"target": target.name, "case": str(case),
                                "required": target.required, "ratio": ratio,
                                "met": ratio >= target.required})
    return results


def targets_table(results):
    return markdown(("target (B=1, 1 thread)", "case", "required", "measured", ""),
                    [(r["target"], r["case"], f">= {r['required']}x", f"{r['ratio']:.2f}x",
                      "met" if r["met"] else "MISSED") for r in results])


# ----------------------------------------------------------------------------------------------
# Neighbours
# ----------------------------------------------------------------------------------------------

def busy(deadline):
    """A CPU-bound neighbour: a Python loop until `deadline` (time.time())."""
    while time.time() < deadline:
        pass


@contextlib.contextmanager
def neighbours(count):
    """`count` busy processes while the block runs (at most NEIGHBOURS_LIMIT_S)."""
    deadline = time.time() + NEIGHBOURS_LIMIT_S
    processes = [multiprocessing.Process(target=busy, args=(deadline,), daemon=True)
                 for _ in range(count)]
    for p in processes:
        p.start()
    try:
        time.sleep(0.5)     # every neighbour running before the first call
        yield
    finally:
        for p in processes:
            p.terminate()
        for p in processes:
            p.join()
    if time.time() > deadline:
        raise SystemExit("the neighbours ended before the measurement: raise "
                         "NEIGHBOURS_LIMIT_S")


def neighbour_cases(quick):
    return [Case("lstm", B, 256, 256, steps, steps == SEQUENCE_T)
            for B in ((1,) if quick else (1, 16)) for steps in (SEQUENCE_T, 8)]


def time_threads(cases, rounds, label):
    """{case: {1: µs, 2: µs}}: the prepared net on 1 and on 2 threads, alternated."""
    times = {}
    for case in cases:
        inp = harness.make_inputs(case.family, harness.Shape(case.steps, case.B, case.I, case.H))
        net = prepare(case, inp)
        served = [prepared_contender(case, inp, n, name=str(n), net=net) for n in (1, 2)]
        times[case] = {int(name): median(us) for name, us in time_served(served, rounds).items()}
        print(f"{case}, {label}: 1 thr {times[case][1]:.1f} µs, 2 thr {times[case][2]:.1f} µs",
              file=sys.stderr, flush=True)
    return times


def run_neighbours(quick, rounds):
    """Rows (case, neighbours, us_1, us_2, ratio = us_2 / us_1), alone then with one busy
    process per core."""
    cases = neighbour_cases(quick)
    alone = time_threads(cases, rounds, "alone")
    with neighbours(harness.default_threads()):
        busy_times = time_threads(cases, rounds, "with neighbours")
    return [{"case": str(case), "neighbours": label, "us_1": t[1], "us_2": t[2],
             "ratio": t[2] / t[1]}
            for label, times in (("none", alone), ("one per core", busy_times))
            for case, t in times.items()]


def neighbours_table(rows):
    return markdown(
        ("case", "neighbours", "1 thread µs", "2 threads µs", "2 thr / 1 thr",
         f"target <= {NEIGHBOURS_TARGET}"),
        [(r["case"], r["neighbours"], fmt_us(r["us_1"]), fmt_us(r["us_2"]), f"{r['ratio']:.2f}",
          "-" if r["neighbours"] == "none"
          else "met" if r["ratio"] <= NEIGHBOURS_TARGET else "MISSED") for r in rows])


# ----------------------------------------------------------------------------------------------
# Low precision (--lowp): int8 and bfloat16 prepared nets
# ----------------------------------------------------------------------------------------------

# The nets of cells compared, by contender name: prepare's `weights`.
LOWP_NETS = {"cells float32": None, "cells int8": "int8", "cells bf16": "bfloat16"}
GATES = {"lstm": 4, "gru": 3}

# Accuracy: whole sequences from zero states (T = steps).
LOWP_ACCURACY = [Case(f, B, I, H, T, True) for f in ("lstm", "gru")
                 for I, H, B, T in ((256, 256, 1, 200), (256, 256, 8, 200), (512, 1024, 1, 50))]
LOWP_ACCURACY_QUICK = [Case(f, 1, 64, 64, 20, True) for f in ("lstm", "gru")]

# Speed: (case, threads, the peers timed beside cells' three nets).
LOWP_SPEED = (
    (Case("lstm", 1, 512, 1024, 1), 1, ("ORT-DQ", "torch qint8")),
    (Case("gru", 1, 512, 1024, 1), 1, ("torch qint8",)),
    (Case("lstm", 1, 128, 128, 1), 1, ("ORT-DQ", "torch qint8")),
    (Case("lstm", 1, 256, 256, 200, True), 1, ("ORT-DQ", "torch qint8")),
    (Case("lstm", 8, 256, 256, 200, True), 1, ("ORT-DQ", "torch qint8")),
    (Case("lstm", 64, 256, 256, 100, True), 2, ()),
)
LOWP_SPEED_QUICK = (
    (Case("lstm", 1, 128, 128, 1), 1, ("ORT-DQ", "torch qint8")),
    (Case("lstm", 8, 64, 64, 20, True), 2, ()),
)

# Before timing, each of cells' nets' h and state after two calls must agree with the float64
# reference within this (absolute; |h| < 1) for the int8 and bfloat16 ones, within
# harness.TOLERANCE for cells float32; the accuracy runs are held to it too. The peers' errors
# are measured and reported, never held to it (lowp_check). The quantized
# contenders stay below 5e-2 on every shape here (torch qint8's GRU at B=8 T=200: 4.3e-2); a
# net with two of its gate blocks swapped differs by 0.26 and more.
LOWP_TOLERANCE = 0.1


def lowp_inputs(case, seed=0):
    """The issue's problem as a harness.Inputs (float32): the weights as torch.nn.LSTM / GRU
    initialise them (every weight and both biases U(-1/sqrt(H), 1/sqrt(H))), drawn in torch's
    layout and converted to cells'; x ~ N(0, 1) [steps, B, I]; zero states."""
    rng = np.random.default_rng(seed)
    n, k = GATES[case.family] * case.H, 1 / np.sqrt(case.H)
    torch_weights = [rng.uniform(-k, k, shape).astype(np.float32)
                     for shape in ((n, case.I), (n, case.H), (n,), (n,))]
    if case.family == "lstm":
        names, weights = ("Wx", "Wr", "b"), convert.lstm_from_torch(*torch_weights)
    else:
        names, weights = ("Wx", "Wh", "b"), convert.gru_from_torch(*torch_weights)
    x = rng.standard_normal((case.steps, case.B, case.I)).astype(np.float32)
    states = {s: np.zeros((case.B, case.H), np.float32) for s in STATE_NAMES[case.family]}
    args = {"x": x, **dict(zip(names, map(np.ascontiguousarray, weights))), **states}
    return harness.Inputs(args, dLdh=None)


def float64_run(case, inp, x):
    """(h [T, B, H], *final states) of the net in float64 over x [T, B, I] from inp's
    states: benchmarks/numpy_cells.py's plain NumPy LSTM and GRU (linear before reset)."""
    a = {name: v.astype(np.float64) for name, v in inp.args.items()}
    x = x.astype(np.float64)
    if case.family == "lstm":
        (h, hL, cL), _ = numpy_cells.numpy_lstm(x, a["Wx"], a["Wr"], a["b"], a["hI"], a["cI"])
        return h, hL, cL
    (h,), _ = numpy_cells.numpy_gru(x, a["hI"], a["Wx"], a["Wh"], a["b"],
                                    linear_before_reset=True)
    return h, h[-1]


def bf16_rounded(a):
    """float32 values rounded to bfloat16, to nearest even, as float32."""
    u = np.asarray(a, np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)


def plain_bf16_run(case, inp):
    """h [T, B, H] of a plain bfloat16 net, emulated in NumPy: the weights, x and the states
    (h and c) rounded to bfloat16, the products summed in float32 (BLAS), the bias and the
    gate math in float32, each new state rounded to bfloat16 as a bfloat16 tensor stores it."""
    def sigmoid(z):
        return 1 / (1 + np.exp(-z))

    r, H = bf16_rounded, case.H
    hs, h = [], r(inp["hI"])
    if case.family == "lstm":
        Wx, Wr, b, c = r(inp["Wx"]), r(inp["Wr"]), inp["b"], r(inp["cI"])
        for x in r(inp.x):
            i, f, g, o = np.split(x @ Wx + h @ Wr + b, 4, axis=1)      # cells' gates i, f, g, o
            c = r(sigmoid(f) * c + sigmoid(i) * np.tanh(g))
            h = r(sigmoid(o) * np.tanh(c))
            hs.append(h)
    else:
        Wx, Wh, (bx, bh) = r(inp["Wx"]), r(inp["Wh"]), inp["b"]
        for x in r(inp.x):
            gx, gh = x @ Wx + bx, h @ Wh + bh                           # gates r, u, c
            reset, update = np.split(sigmoid(gx[:, :2 * H] + gh[:, :2 * H]), 2, axis=1)
            candidate = np.tanh(gx[:, 2 * H:] + reset * gh[:, 2 * H:])
            h = r((1 - update) * candidate + update * h)
            hs.append(h)
    return np.stack(hs)


def onnx_dq_model(case, inp):
    """ONNX Runtime's contrib DynamicQuantizeLSTM (com.microsoft, opset 1) on the case's
    weights: W and R int8 [1, K, 4H] (the LSTM node's transposed, gates i, o, f, c), quantized
    symmetric per column as onnxruntime.quantization does (scale max |w| / 127, zero point 0);
    the operator quantizes x and h per call to uint8."""
    from onnx import helper

    W, R, B = onnx_weights(case, inp)
    initializers = {"B": B}
    for name, w in (("W", W), ("R", R)):
        w = w[0].T                                              # [K, 4H]
        scale = np.abs(w).max(axis=0) / np.float32(127)
        scale = np.where(scale > 0, scale, np.float32(1))
        initializers[name] = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)[None]
        initializers[name + "_scale"] = scale[None]
        initializers[name + "_zero_point"] = np.zeros((1, 4 * case.H), np.int8)
    node = helper.make_node(
        "DynamicQuantizeLSTM",
        ["X", "W", "R", "B", "", "initial_h", "initial_c", "", "W_scale", "W_zero_point",
         "R_scale", "R_zero_point"],
        onnx_outputs(case), domain="com.microsoft", hidden_size=case.H)
    return one_node_model(case, node, initializers,
                          [helper.make_opsetid("", 14), helper.make_opsetid("com.microsoft", 1)])


def lowp_contenders(case, inp, n_threads, torch, ort, peers=("ORT-DQ", "torch qint8")):
    """cells' float32, int8 and bfloat16 nets, then those of `peers` that can run the case:
    ORT-DQ (ONNX Runtime's DynamicQuantizeLSTM: the LSTM only) and torch qint8."""
    served = [prepared_contender(case, inp, n_threads, name, prepare(case, inp, weights))
              for name, weights in LOWP_NETS.items()]
    if "ORT-DQ" in peers and ort is not None and case.family == "lstm":
        served.append(onnx_contender(case, inp, n_threads, ort, "ORT-DQ",
                                     onnx_dq_model(case, inp)))
    if "torch qint8" in peers and torch is not None:
        served.append(torch_contender(case, inp, n_threads, torch, quantized=True))
    return served


def lowp_check(case, name, diff, reference):
    """Stops the run when one of cells' nets is outside its tolerance to the float64 reference.
    A peer's difference is reported in the rows, never checked: how accurate ONNX Runtime's or
    torch's int8 operator is depends on the CPU (ONNX Runtime's saturates without AVX512_VNNI)."""
    if name not in LOWP_NETS:
        return
    ok = (harness.within_tolerance(diff, reference, np.float32) if name == "cells float32"
          else diff <= LOWP_TOLERANCE)
    if not ok:
        raise SystemExit(f"{case}: {name} differs from the float64 reference by {diff:.1e}")


def run_accuracy(cases, torch, ort):
    """One row per case and contender: the case's fields, contender, max and mean |h - h_f64|
    over every step and row of a whole sequence, run from zero states in one call."""
    rows = []
    for case in cases:
        inp = lowp_inputs(case)
        reference = float64_run(case, inp, inp.x)[0]
        hs = {}
        for s in lowp_contenders(case, inp, 1, torch, ort):
            with s.threads():
                s.call()
            hs[s.name] = s.result()[0]
        hs["bf16 rounding"] = plain_bf16_run(case, inp)
        for name, h in hs.items():
            error = np.abs(h - reference)
            lowp_check(case, name, error.max(), reference)
            rows.append({**asdict(case), "contender": name, "max": float(error.max()),
                         "mean": float(error.mean())})
        print(f"{case}: max |h - h_f64| " + ", ".join(f"{r['contender']} {r['max']:.1e}"
                                                    for r in rows[-len(hs):]),
              file=sys.stderr, flush=True)
    return rows


def check_lowp_math(case, inp, served):
    """Two calls of every contender from the same state, against the float64 net over the
    same two inputs: {name: max abs difference of h and the state}; lowp_check stops the run
    outside the tolerance."""
    h, *state = float64_run(case, inp, np.concatenate([inp.x, inp.x]))
    reference = (h[case.steps:].reshape(cells_x(case, inp).shape[:-1] + (case.H,)), *state)
    diffs = {}
    for s in served:
        with s.threads():
            s.call()
            s.call()
        result = s.result()
        diffs[s.name] = max(harness.max_abs_diff(a, r) for a, r in zip(result, reference))
        lowp_check(case, s.name, diffs[s.name], reference[0])
    return diffs


def run_lowp_speed(cases, rounds, torch, ort):
    """One row per case and contender, as run_grid's (diff: to the float64 reference)."""
    rows = []
    for case, n_threads, peers in cases:
        inp = lowp_inputs(case)
        served = lowp_contenders(case, inp, n_threads, torch, ort, peers)
        rows += timed_rows(case, n_threads, served, check_lowp_math(case, inp, served), rounds)
    return rows


@dataclass(frozen=True)
class AccuracyTarget:
    """cells' net `net` must reach a max error at most `factor` times `peer`'s."""
    name: str
    net: str
    peer: str
    factor: float


ACCURACY_TARGETS = (
    AccuracyTarget("int8 <= ORT-DQ", "cells int8", "ORT-DQ", 1.0),
    AccuracyTarget("int8 <= 0.5x torch qint8", "cells int8", "torch qint8", 0.5),
    AccuracyTarget("bf16 <= 1.5x bf16 rounding", "cells bf16", "bf16 rounding", 1.5),
)


@dataclass(frozen=True)
class LowpTarget:
    """cells' net `net` must be `required` times faster than `peer` on every case (and thread
    count) `applies` to."""
    name: str
    applies: Callable[[Case, int], bool]
    net: str
    peer: str
    required: float


def _step_1024(case, n):
    return case.kind == "step" and case.I == 512 and case.H == 1024


def _sequence_200(case, n):
    return case.sequence and case.steps == 200 and case.H == 256


def _batch_64(case, n):
    return n == 2 and case.B == 64


LOWP_TARGETS = (
    LowpTarget("int8, one step I=512 H=1024, vs ORT-DQ", _step_1024, "cells int8", "ORT-DQ",
               1.3),
    LowpTarget("int8, one step I=512 H=1024, vs torch qint8", _step_1024, "cells int8",
               "torch qint8", 1.6),
    LowpTarget("int8, one step I=512 H=1024, vs float32", _step_1024, "cells int8",
               "cells float32", 3.0),
    LowpTarget("bf16, one step I=512 H=1024, vs float32", _step_1024, "cells bf16",
               "cells float32", 1.8),
    LowpTarget("int8, one step H=128, vs ORT-DQ",
               lambda c, n: c.kind == "step" and c.H == 128, "cells int8", "ORT-DQ", 2.0),
    LowpTarget("int8, T=200 H=256, vs ORT-DQ", _sequence_200, "cells int8", "ORT-DQ", 2.0),
    LowpTarget("int8, T=200 H=256, vs torch qint8", _sequence_200, "cells int8",
               "torch qint8", 3.0),
    LowpTarget("int8, B=64 T=100 H=256 2 threads, vs float32", _batch_64, "cells int8",
               "cells float32", 2.0),
    LowpTarget("bf16, B=64 T=100 H=256 2 threads, vs float32", _batch_64, "cells bf16",
               "cells float32", 1.6),
)


def check_accuracy_targets(rows):
    """One dict per target and case with both contenders: target, case, value (the net's max
    error), bound (factor x the peer's), met."""
    errors = {}
    for r in rows:
        case = Case(r["family"], r["B"], r["I"], r["H"], r["steps"], r["sequence"])
        errors.setdefault(case, {})[r["contender"]] = r["max"]
    return [{"target": t.name, "case": str(case), "value": e[t.net],
             "bound": t.factor * e[t.peer], "met": e[t.net] <= t.factor * e[t.peer]}
            for t in ACCURACY_TARGETS for case, e in errors.items() if t.peer in e]


def check_lowp_targets(rows):
    """One dict per target and case measured: target, case, threads, required, ratio (peer
    µs / net µs), met."""
    return [{"target": t.name, "case": str(case), "threads": n, "required": t.required,
             "ratio": times[t.peer] / times[t.net], "met": times[t.peer] / times[t.net]
             >= t.required}
            for t in LOWP_TARGETS for (case, n), times in by_case(rows).items()
            if t.applies(case, n) and t.peer in times]


def fmt_error(row):
    return "-" if row is None else f"{row['max']:.1e} ({row['mean']:.1e})"


ACCURACY_COLUMNS = (*LOWP_NETS, "ORT-DQ", "torch qint8", "bf16 rounding")


def accuracy_table(rows):
    """One line per case: every contender's max (mean) |h - h_f64|."""
    lines = {}
    for r in rows:
        lines.setdefault((r["family"], r["I"], r["H"], r["B"], r["steps"]), {})[
            r["contender"]] = r
    return markdown(("family", "I", "H", "B", "T", *ACCURACY_COLUMNS),
                    [(*map(str, key), *(fmt_error(found.get(c)) for c in ACCURACY_COLUMNS))
                     for key, found in lines.items()])


def accuracy_targets_table(results):
    return markdown(("target (max error)", "case", "cells", "bound", ""),
                    [(r["target"], r["case"], f"{r['value']:.1e}", f"{r['bound']:.1e}",
                      "met" if r["met"] else "MISSED") for r in results])


SPEED_COLUMNS = (*LOWP_NETS, "ORT-DQ", "torch qint8")


def lowp_speed_table(rows):
    """One line per case and thread count: µs per call of every contender, then float32's
    time over int8's and bf16's."""
    return markdown(
        ("family", "B", "I", "H", "steps", "threads", *SPEED_COLUMNS, "float32 / int8",
         "float32 / bf16"),
        [(c.family, str(c.B), str(c.I), str(c.H), str(c.steps), str(n),
          *(fmt_us(t.get(name)) for name in SPEED_COLUMNS),
          fmt_ratio(t["cells float32"], t["cells int8"]),
          fmt_ratio(t["cells float32"], t["cells bf16"]))
         for (c, n), t in by_case(rows).items()])


def lowp_targets_table(results):
    return markdown(("target (1 thread unless said)", "case", "required", "measured", ""),
                    [(r["target"], r["case"], f">= {r['required']}x", f"{r['ratio']:.2f}x",
                      "met" if r["met"] else "MISSED") for r in results])


def run_lowp(args, settings):
    """--lowp: accuracy, then speed; prints the tables, returns the results for --json."""
    # Imported before the thread pools are listed, so that theirs are among them.
    torch, ort = harness.optional_torch(), optional_onnx()
    env, peaks = print_machine([1, 2], args.quick)
    accuracy = run_accuracy(LOWP_ACCURACY_QUICK if args.quick else LOWP_ACCURACY, torch, ort)
    rows = run_lowp_speed(LOWP_SPEED_QUICK if args.quick else LOWP_SPEED, args.rounds, torch,
                          ort)
    accuracy_targets, targets = check_accuracy_targets(accuracy), check_lowp_targets(rows)
    print("\n### Accuracy: max (mean) |h - h_f64| over every step, a whole sequence from zero "
          "states\n\n" + accuracy_table(accuracy))
    print("\n### Speed (µs per call, the state carried; ratio above 1: int8 or bf16 is "
          "faster)\n\n" + lowp_speed_table(rows))
    print("\n### The issue's targets: accuracy\n\n" + accuracy_targets_table(accuracy_targets))
    print("\n### The issue's targets: speed (ratio = peer µs / cells µs)\n\n"
          + lowp_targets_table(targets))
    return {"environment": env, "peak": peaks, "settings": settings, "accuracy": accuracy,
            "accuracy_targets": accuracy_targets, "rows": rows, "targets": targets}


# ----------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------

def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", nargs="+", type=int,
                        help="thread counts (default 1 2; --quick: 1)")
    parser.add_argument("--rounds", type=int,
                        help="timed rounds per contender (default 5; --quick: 2)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: B=1 I=H=128 only (with --neighbours: B=1 only)")
    parser.add_argument("--neighbours", action="store_true",
                        help="time cells on 2 threads against 1, alone and with a busy "
                             "process on every core, instead of the grid")
    parser.add_argument("--lowp", action="store_true",
                        help="the int8 and bfloat16 prepared nets: accuracy against float64 "
                             "and speed against ORT's and torch's int8 LSTMs, instead of the "
                             "grid (each case on its own thread count: --threads is ignored)")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    args.threads = args.threads or ([1] if args.quick else [1, 2])
    args.rounds = args.rounds or (2 if args.quick else 5)
    return args


def optional_onnx():
    """onnxruntime when it and onnx (which builds the models) import, else None."""
    try:
        import onnx  # noqa: F401
    except ImportError:
        return None
    return harness.optional_onnxruntime()


def print_machine(threads, quick):
    """The FMA peak and the thread pools, before any timing; returns the peak as JSON."""
    env = harness.environment()
    print(f"cells {env['cells']} ({env['cells_path']}); CPU: {env['cpu']}, {env['cpus']} CPUs, "
          f"load average {env['load_average']}; torch {env['torch']}, onnxruntime "
          f"{env['onnxruntime']}\n")
    try:
        peaks = peak.fma_peak(max(threads), runs=1 if quick else 3)
    except RuntimeError as e:     # no C compiler: the timings do not need the peak
        print(f"FMA peak: not measured ({e})")
        peaks = {}
    for (dtype, n), gflops in peaks.items():
        if dtype == "float32":
            print(f"FMA peak float32, {n} thread(s): {gflops:.1f} GF/s")
    if peaks and (warning := peak.uneven_cores(peaks)):
        print(warning)
    print("\nthread pools:\n" + "\n".join("  " + line for line in harness.threadpool_summary()),
          flush=True)
    return env, {f"{dtype} {n}": gflops for (dtype, n), gflops in peaks.items()}


def main(argv=None):
    args = parse_args(argv)
    t0 = time.perf_counter()
    settings = {"threads": args.threads, "rounds": args.rounds, "quick": args.quick,
                "round_s": ROUND_S, "settle_s": SETTLE_S, "warmup": WARMUP}
    if args.lowp:
        results = run_lowp(args, settings)
    elif args.neighbours:
        env, peaks = print_machine([1, 2], args.quick)
        rows = run_neighbours(args.quick, args.rounds)
        print("\n### cells' prepared LSTM, 2 threads against 1, alone and with one busy "
              "process per core (µs per call)\n\n" + neighbours_table(rows))
        results = {"environment": env, "peak": peaks, "settings": settings,
                   "neighbours": rows}
    else:
        # Imported before the thread pools are listed, so that theirs are among them.
        torch, ort = harness.optional_torch(), optional_onnx()
        env, peaks = print_machine(args.threads, args.quick)
        rows = run_grid(grid(args.quick), args.threads, args.rounds, torch, ort)
        targets = check_targets(rows)
        print("\n" + tables(rows, args.threads))
        print("### The issue's targets\n\n" + targets_table(targets))
        results = {"environment": env, "peak": peaks, "settings": settings, "rows": rows,
                   "targets": targets}
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
