"""Peak memory of one training step (forward + backward, loss = h.sum()): cells, NumPy, PyTorch.

    python benchmarks/memory.py                        # every family at the medium shape
    python benchmarks/memory.py --family gru --shapes small medium large

Each measurement runs in a fresh Python process (Linux only: it reads /proc/self/status). The
contender is built and called twice (warm-up: library caches and thread pools are allocated),
then the process's peak resident set is reset (writing 5 to /proc/self/clear_refs) and one
more step runs; the result is the rise of the peak above the resident set before that step:
everything the step allocated at once (workspace, scratch, gradients, autograd's saved tensors),
not the inputs and weights, which exist before it. glibc's malloc would serve the measured
step from memory the warm-up freed but kept (resident, so no rise), so the child runs with
MALLOC_MMAP_THRESHOLD_=16384 and MALLOC_TRIM_THRESHOLD_=0: every block of 16 KiB or more is
mapped when allocated and unmapped when freed, in NumPy and in PyTorch alike. Smaller blocks
(PyTorch's per-step tensors at B=1) still come from memory the warm-up left resident: results
below about 1 MiB are under this method's resolution.
"""
import argparse
import gc
import json
import os
import subprocess
import sys

import numpy as np

import harness
from bench import SHAPES
from families import FAMILIES, get_family

CONTENDERS = {"cells": harness.cells_contender, "numpy": harness.numpy_contender,
              "torch": harness.torch_contender}
# The variant measured: the GRU's linear_before_reset (PyTorch's), else each family's first.
VARIANTS = {"gru": "linear_before_reset"}


def _status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def measure_here(family, shape, contender, threads):
    """Peak rise (MiB) of one training step, in this process; None when the contender does not
    apply (e.g. no PyTorch)."""
    family = get_family(family)
    inp = harness.make_inputs(family, shape, np.float32)
    variant = VARIANTS.get(family.name, family.default_variant())
    c = CONTENDERS[contender](family, inp, True, variant, threads)
    if c is None:
        return None
    with c.threads():
        c.run()
        c.run()
        gc.collect()
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        before = _status_kib("VmRSS")
        c.run()
        return (_status_kib("VmHWM") - before) / 1024


def measure(family, shape_name, contender, threads):
    """measure_here in a fresh process."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="16384", MALLOC_TRIM_THRESHOLD_="0")
    out = subprocess.run(
        [sys.executable, __file__, "--one", family, shape_name, contender, str(threads)],
        check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--family", nargs="+", choices=FAMILIES,
                        default=[name for name, f in FAMILIES.items() if f.available()])
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=["medium"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        family, shape_name, contender, threads = args.one
        print(json.dumps(measure_here(family, SHAPES[shape_name], contender, int(threads))))
        return 0
    print(f"peak memory rise of one float32 training step, MiB ({args.threads} threads; "
          "GRU: linear_before_reset)")
    print(f"{'family':6}  {'shape':22}  " + "  ".join(f"{c:>8}" for c in CONTENDERS)
          + "  torch / cells")
    for family in args.family:
        for name in args.shapes:
            mib = {c: measure(family, name, c, args.threads) for c in CONTENDERS}
            ratio = (f"{mib['torch'] / mib['cells']:.2f}" if mib["torch"] and mib["cells"]
                     else "-")
            print(f"{family:6}  {str(SHAPES[name]):22}  "
                  + "  ".join("       -" if v is None else f"{v:8.1f}" for v in mib.values())
                  + f"  {ratio:>13}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
