"""Issue 4's performance targets as data, and the check of benchmark rows against them.

Speed-up targets are for 2 threads and float32, every contender at the same thread count, the
ratio being contender ms / cells ms. "small" is T=100 B=1 I=H=128; "big" covers medium
(T=100 B=64 I=H=256) and large (T=50 B=128 I=H=512). Efficiency targets ask cells' GF/s (the
gemm FLOPs any implementation must do, see families.Family.gemm_flops) to reach a share of
a big-square gemm's GF/s at medium and large. At 1 thread cells must never be slower than torch.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """cells must be at least `small` (small shape) or `big` (medium, large) times faster than
    `contender` on `task`; variant None means every variant of the family."""
    name: str
    family: str
    variant: object
    task: str
    contender: str
    small: float
    big: float


SPEEDUP_TARGETS = (
    Target("GRU inference vs torch", "gru", "linear_before_reset", "inference", "torch", 8, 1.4),
    Target("GRU inference vs ONNX Runtime", "gru", None, "inference", "onnxruntime", 1.3, 1.1),
    Target("GRU training step vs torch", "gru", "linear_before_reset", "training", "torch",
           20, 1.4),
    Target("LSTM inference vs torch", "lstm", None, "inference", "torch", 2, 1.1),
    Target("LSTM inference vs ONNX Runtime", "lstm", None, "inference", "onnxruntime", 1.2, 1.0),
    Target("LSTM training step vs torch", "lstm", None, "training", "torch", 3, 1.1),
)

# Share (in %) of the big-square gemm GF/s that cells reaches at medium and large, 2 threads.
EFFICIENCY_TARGETS = {"inference": 80.0, "training": 75.0}


def _shape_class(row, shape_classes):
    """"small", "big" or None for a row, from shape_classes: shape name -> "small", "medium"
    or "large" and the shapes' (T, B, I, H)."""
    key = (row["T"], row["B"], row["I"], row["H"])
    cls = shape_classes.get(key)
    return None if cls is None else ("small" if cls == "small" else "big")


def _label(row):
    variant = "" if row["variant"] == "-" else f" {row['variant']}"
    return f"{row['family']}{variant} T={row['T']} B={row['B']} H={row['H']}"


def check(rows, shape_classes):
    """Every target that some row measures, as dicts: target, case, threads, measured, required,
    met. shape_classes maps (T, B, I, H) to "small", "medium" or "large"."""
    verdicts = []

    def verdict(target, row, measured, required):
        verdicts.append({"target": target, "case": _label(row), "threads": row["threads"],
                         "measured": measured, "required": required,
                         "met": measured >= required})

    for row in rows:
        cls = _shape_class(row, shape_classes)
        two_f32 = row["threads"] == 2 and row["dtype"] == "float32"
        for t in SPEEDUP_TARGETS:
            if (two_f32 and cls and row["family"] == t.family and row["task"] == t.task
                    and row["contender"] == t.contender
                    and t.variant in (None, row["variant"])):
                verdict(t.name, row, row["cells_speedup"], t.small if cls == "small" else t.big)
        if (two_f32 and cls == "big" and row["contender"] == "cells"
                and row["ceiling_pct"] is not None):
            verdict(f"{row['task']} share of the gemm ceiling (%)", row, row["ceiling_pct"],
                    EFFICIENCY_TARGETS[row["task"]])
        if row["threads"] == 1 and row["contender"] == "torch":
            verdict(f"1 thread, {row['dtype']} {row['task']}: never slower than torch", row,
                    row["cells_speedup"], 1.0)
    return verdicts


def format_verdicts(verdicts):
    """Text table of check()'s verdicts, missed ones marked."""
    if not verdicts:
        return "targets: no row of this run measures one (they need 2 threads, float32, and " \
               "the small, medium or large shape)"
    lines = [f"targets (issue 4): {sum(v['met'] for v in verdicts)} of {len(verdicts)} met"]
    width = max(len(v["target"]) for v in verdicts)
    case_width = max(len(v["case"]) for v in verdicts)
    for v in verdicts:
        lines.append(f"  {v['target']:{width}}  {v['case']:{case_width}}  thr {v['threads']}  "
                     f"{v['measured']:7.2f} >= {v['required']:<5g} "
                     f"{'met' if v['met'] else 'MISSED'}")
    return "\n".join(lines)
