"""The machine's FMA peak, measured now: benchmarks/fma_peak.c built for this CPU and run.

    python benchmarks/peak.py            # float32 and float64 GF/s on 1 ... all CPUs

The efficiency yardstick of bench.py: GF/s of independent fused multiply-adds on the widest
vectors the compiler targets with -march=native (AVX-512 here), the rate no gemm can beat. It
is measured in the same run as the timings because it moves with the load of a shared host.
"""
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("fma_peak.c")


def compiler():
    """The C compiler: $CC, else Python's own, else cc."""
    cc = os.environ.get("CC") or (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        raise RuntimeError(f"benchmarks/peak.py needs a C compiler ({cc!r} is not on PATH)")
    return cc


def fma_peak(max_threads):
    """{(dtype name, threads): GF/s} for "float32" and "float64" on 1 ... max_threads threads."""
    with tempfile.TemporaryDirectory(prefix="cells-peak-") as tmp:
        program = Path(tmp) / "fma_peak"
        build = subprocess.run([compiler(), "-O2", "-march=native", "-fopenmp", str(SOURCE),
                                "-o", str(program)], capture_output=True, text=True)
        if build.returncode != 0:
            raise RuntimeError(f"building {SOURCE.name} failed:\n{build.stderr}")
        run = subprocess.run([str(program), str(max_threads)], capture_output=True, text=True,
                             check=True)
    peaks = {}
    for line in run.stdout.split("\n"):
        if line:
            dtype, threads, gflops = line.split()
            peaks[dtype, int(threads)] = float(gflops)
    return peaks


def main():
    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    for (dtype, n), gflops in fma_peak(threads).items():
        print(f"FMA peak {dtype}, {n} thread(s): {gflops:.1f} GF/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
