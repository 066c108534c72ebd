"""Speed-up of cells against PyTorch and ONNX Runtime over batch size, from bench.py's JSON.

    python benchmarks/plot.py benchmarks/results.json benchmarks/speedup.png

One panel per family, float32: the batch sweep at T=100, I=H=256 (B = 1, 4, 16, 64, 256; the
rows bench.py's shapes B1, B4, B16, medium and B256 produce). A line per (task, contender) and
thread count (solid: 2 threads, dashed: 1); above 1, cells is faster. The GRU panel shows the
linear_before_reset variant, the only one PyTorch has; the RNN panel its tanh variant.
"""
import json
import sys
from pathlib import Path

SWEEP = {"T": 100, "I": 256, "H": 256}
LINES = (("inference", "torch"), ("inference", "onnxruntime"), ("training", "torch"))
FAMILY_VARIANT = {"gru": "linear_before_reset", "lstm": "-", "lltm": "-", "rnn": "tanh"}


def sweep_lines(rows, family):
    """{(task, contender, threads): [(B, speed-up), ...] sorted by B} for one family's float32
    batch-sweep rows."""
    lines = {}
    for r in rows:
        if (r["family"] == family and r["dtype"] == "float32"
                and r["variant"] == FAMILY_VARIANT[family]
                and all(r[k] == v for k, v in SWEEP.items())
                and (r["task"], r["contender"]) in LINES):
            lines.setdefault((r["task"], r["contender"], r["threads"]), []).append(
                (r["B"], r["cells_speedup"]))
    return {k: sorted(v) for k, v in lines.items() if len(v) > 1}


def plot_file(results, out):
    """Draw the plot of the JSON file `results` into the PNG `out`; return a one-line report."""
    try:
        import matplotlib
    except ImportError:
        return "no plot: matplotlib is not installed (pip install matplotlib)"
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    data = json.loads(Path(results).read_text())
    families = [f for f in FAMILY_VARIANT if sweep_lines(data["rows"], f)]
    if not families:
        return "no plot: the results hold no batch sweep (shapes B1 B4 B16 medium B256)"
    fig, axes = plt.subplots(1, len(families), figsize=(5 * len(families), 4), squeeze=False)
    for ax, family in zip(axes[0], families):
        for (task, contender, threads), points in sorted(sweep_lines(data["rows"], family).items()):
            b, speedup = zip(*points)
            ax.plot(b, speedup, marker="o", linestyle="-" if threads == 2 else "--",
                    label=f"{task} vs {contender}, {threads} thr")
        ax.axhline(1.0, color="gray", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("batch size B (T=100, I=H=256)")
        ax.set_ylabel("speed-up of cells (contender ms / cells ms)")
        variant = FAMILY_VARIANT[family]
        ax.set_title(f"{family.upper()} float32" + ("" if variant == "-" else f" ({variant})"))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    env = data["environment"]
    fig.suptitle(f"cells vs PyTorch {env['torch']} and ONNX Runtime {env['onnxruntime']} "
                 f"on {env['cpu']} ({env['cpus']} CPUs)", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return f"plot saved to {out}"


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    print(plot_file(sys.argv[1], sys.argv[2]))
