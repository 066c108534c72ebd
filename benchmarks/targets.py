"""Issue 12's performance targets as data, and the check of benchmark rows against them.

Every contender runs at the same thread count; a speed-up is contender ms / cells ms. Shape
classes (bench.py's SHAPE_CLASSES): "B1" is T=100 B=1 I=H=128, "B16" is T=100 B=16 I=H=256,
"big" covers T=100 B=64 I=H=128 and 256 and T=50 B=128 I=H=512.

  - speed-ups (SPEEDUP_TARGETS), float32, at 1 and at 2 threads; against "the faster of
    torch and ONNX Runtime" the ratio is taken against the faster contender's time. Each also
    says what it asks of the machine: the share of the FMA peak cells' call would reach at
    the time the target allows (the contender's / the ratio asked), above 100 beyond it;
  - efficiency at the big shapes, 2 threads, float32: cells' GF/s (the gemm FLOPs any
    implementation must do, families.Family.gemm_flops) as a share of the FMA peak measured
    in the same run (benchmarks/peak.py);
  - scaling at the big shapes: cells' 1-thread time / its 2-thread time;
  - float64 at every shape and thread count: cells against torch.
n_threads=None against the best fixed count is threads_default.py's, peak memory memory.py's.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """cells must be `required[shape class]` times faster than the fastest of `contenders` on
    `task`; variant None means every variant of the family."""
    name: str
    family: str
    variant: object
    task: str
    contenders: tuple
    required: dict


SPEEDUP_TARGETS = (
    Target("LSTM inference vs the faster of torch and ORT", "lstm", None, "inference",
           ("torch", "onnxruntime"), {"B1": 1.3, "B16": 1.1, "big": 1.1}),
    Target("LSTM training step vs torch", "lstm", None, "training", ("torch",),
           {"B1": 3, "B16": 1.2, "big": 1.2}),
    Target("GRU inference vs ORT", "gru", None, "inference", ("onnxruntime",),
           {"B1": 1.3, "B16": 1.3, "big": 1.3}),
    Target("GRU inference vs torch", "gru", "linear_before_reset", "inference", ("torch",),
           {"B1": 8, "B16": 2.5, "big": 2.5}),
    Target("GRU training step vs torch", "gru", "linear_before_reset", "training", ("torch",),
           {"B1": 20, "B16": 3, "big": 2.5}),
)

# Share (in %) of the FMA peak that cells reaches at the big shapes, 2 threads, float32.
EFFICIENCY_TARGETS = {"inference": 85.0, "training": 80.0}
EFFICIENCY_FAMILIES = ("gru", "lstm")

# cells' 1-thread ms / 2-thread ms at the big shapes.
SCALING_TARGET = 1.85

# float64: cells against torch at every shape and thread count.
FLOAT64_TARGET = 1.5


def _label(row):
    variant = "" if row["variant"] == "-" else f" {row['variant']}"
    return f"{row['family']}{variant} T={row['T']} B={row['B']} H={row['H']}"


def _case(row):
    """A row's case without its contender: what the contenders of one timing share."""
    return (row["family"], row["variant"], row["task"], row["dtype"], row["threads"], row["T"],
            row["B"], row["I"], row["H"])


def check(rows, shape_classes):
    """Every target that some rows measure, as dicts: target, case, threads, measured, required,
    met, and for a speed-up needs_pct, the share of the FMA peak (%) cells would reach at the
    time the target allows (None without a measured peak). shape_classes maps (T, B, I, H) to
    "B1", "B16" or "big"."""
    verdicts = []

    def verdict(target, row, measured, required, needs_pct=None):
        verdicts.append({"target": target, "case": _label(row), "threads": row["threads"],
                         "measured": measured, "required": required,
                         "met": measured >= required, "needs_pct": needs_pct})

    def shape_class(row):
        return shape_classes.get((row["T"], row["B"], row["I"], row["H"]))

    by_case = {}
    for row in rows:
        by_case.setdefault(_case(row), {})[row["contender"]] = row
    for contenders in by_case.values():
        cells = contenders.get("cells")
        if cells is None:
            continue
        cls, f32 = shape_class(cells), cells["dtype"] == "float32"
        for t in SPEEDUP_TARGETS:
            times = [contenders[c]["ms"] for c in t.contenders if c in contenders]
            if (f32 and cls and times and cells["family"] == t.family
                    and cells["task"] == t.task and t.variant in (None, cells["variant"])):
                speedup, required = min(times) / cells["ms"], t.required[cls]
                needs = (None if cells["peak_pct"] is None
                         else cells["peak_pct"] * required / speedup)
                verdict(t.name, cells, speedup, required, needs)
        if (f32 and cls == "big" and cells["threads"] == 2
                and cells["family"] in EFFICIENCY_FAMILIES and cells["peak_pct"] is not None):
            verdict(f"{cells['task']} share of the FMA peak (%)", cells, cells["peak_pct"],
                    EFFICIENCY_TARGETS[cells["task"]])
        if cells["dtype"] == "float64" and "torch" in contenders:
            verdict(f"float64 {cells['task']} vs torch", cells,
                    contenders["torch"]["cells_speedup"], FLOAT64_TARGET)
        if cells["threads"] == 2 and cls == "big" and cells["family"] in EFFICIENCY_FAMILIES:
            case = _case(cells)
            one = by_case.get(case[:4] + (1,) + case[5:], {}).get("cells")
            if one is not None:
                verdict(f"{cells['dtype']} {cells['task']}: 2 threads vs 1", cells,
                        one["ms"] / cells["ms"], SCALING_TARGET)
    return verdicts


def format_verdicts(verdicts):
    """Text table of check()'s verdicts, missed ones marked."""
    if not verdicts:
        return "targets: no row of this run measures one (see benchmarks/targets.py)"
    lines = [f"targets (issue 12): {sum(v['met'] for v in verdicts)} of {len(verdicts)} met"]
    width = max(len(v["target"]) for v in verdicts)
    case_width = max(len(v["case"]) for v in verdicts)
    for v in verdicts:
        needs = v.get("needs_pct")
        asks = "" if needs is None else f"  (asks {needs:.0f}% of the FMA peak)"
        lines.append(f"  {v['target']:{width}}  {v['case']:{case_width}}  thr {v['threads']}  "
                     f"{v['measured']:7.2f} >= {v['required']:<5g} "
                     f"{'met' if v['met'] else 'MISSED'}{asks}")
    return "\n".join(lines)
