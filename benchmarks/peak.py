"""The machine's FMA peak, measured now: benchmarks/fma_peak.c built for one instruction set
and run.

    python benchmarks/peak.py                 # cells' path (cells.instruction_set())
    python benchmarks/peak.py --isa avx2      # the AVX2 path's peak, on any x86 CPU that has it

The efficiency yardstick of bench.py: GF/s of independent fused multiply-adds on the vectors of
the instruction set cells' kernels run (CELLS_ISA chooses it), the rate no gemm on that path can
beat. It is measured in the same run as the timings because it moves with the load of a shared
host.
"""
import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

SOURCE = Path(__file__).with_name("fma_peak.c")

# Per instruction set (cells.instruction_set()'s names): the compiler's target and the width of
# a vector register in bytes.
TARGETS = {"avx512": ("x86-64-v4", 64), "avx2": ("x86-64-v3", 32), "generic": ("x86-64", 16)}


def default_isa():
    """The path cells' kernels run (cells.instruction_set()), else the widest GCC's -march=native
    has (cells not importable)."""
    try:
        import cells
        return cells.instruction_set()
    except ImportError:
        return "avx512"


def compiler():
    """The C compiler: $CC, else Python's own, else cc."""
    cc = os.environ.get("CC") or (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        raise RuntimeError(f"benchmarks/peak.py needs a C compiler ({cc!r} is not on PATH)")
    return cc


def fma_peak(max_threads, runs=3, pause_s=1.0, isa=None):
    """{(dtype name, threads): GF/s} for "float32" and "float64" on 1 ... max_threads threads,
    on the vectors of instruction set `isa` (TARGETS; None: default_isa()): the best of `runs`
    runs of the program, `pause_s` apart (a shared host lends its cores unevenly: a run whose
    second core was busy elsewhere measures that, not the machine)."""
    march, vector_bytes = TARGETS[isa or default_isa()]
    peaks = {}
    with tempfile.TemporaryDirectory(prefix="cells-peak-") as tmp:
        program = Path(tmp) / "fma_peak"
        build = subprocess.run([compiler(), "-O2", f"-march={march}", "-mtune=native",
                                f"-DVECTOR_BYTES={vector_bytes}", "-fopenmp", str(SOURCE),
                                "-o", str(program)], capture_output=True, text=True)
        if build.returncode != 0:
            raise RuntimeError(f"building {SOURCE.name} failed:\n{build.stderr}")
        for run in range(runs):
            if run:
                time.sleep(pause_s)
            out = subprocess.run([str(program), str(max_threads)], capture_output=True,
                                 text=True, check=True).stdout
            for line in out.split("\n"):
                if line:
                    dtype, threads, gflops = line.split()
                    key = dtype, int(threads)
                    peaks[key] = max(peaks.get(key, 0.0), float(gflops))
    return peaks


def uneven_cores(peaks):
    """A warning when the peak on n threads is below 0.9·n times the 1-thread one (the host did
    not give this process n cores of its own), else None."""
    for (dtype, n), gflops in peaks.items():
        if gflops < 0.9 * n * peaks[dtype, 1]:
            return (f"warning: the {dtype} FMA peak on {n} threads is {gflops:.0f} GF/s, "
                    f"{gflops / peaks[dtype, 1]:.2f}x the 1-thread {peaks[dtype, 1]:.0f}: this "
                    f"process does not have {n} cores to itself, and timings on {n} threads "
                    f"are not trustworthy")
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--isa", choices=list(TARGETS), default=None,
                        help="the instruction set (default: the one cells' kernels run)")
    isa = parser.parse_args(argv).isa or default_isa()
    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    peaks = fma_peak(threads, isa=isa)
    for (dtype, n), gflops in peaks.items():
        print(f"FMA peak {dtype} ({isa}), {n} thread(s): {gflops:.1f} GF/s")
    warning = uneven_cores(peaks)
    if warning:
        print(warning)
    return 0


if __name__ == "__main__":
    sys.exit(main())
