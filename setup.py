"""Build the Cython extensions of `cells`.

The kernels' threads come from OpenMP where it works and from cells' own team of POSIX threads
elsewhere (include/cells/team.h), hence -pthread always. OpenMP is probed by compiling and linking
a tiny program with the extension compiler; where that fails (or CELLS_NO_OPENMP=1 is set) the
extensions are built without it, with a notice: their threads all come from cells' team.
"""
import glob
import os
import sys
import tempfile
import textwrap

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

OPENMP_PROBE = textwrap.dedent(
    """
    #include <omp.h>
    int main(void) {
        int n = 0;
        #pragma omp parallel reduction(+:n)
        n += 1;
        return n > 0 ? 0 : 1;
    }
    """
)

# -fno-wrapv undoes Python's -fwrapv, which stops gcc from vectorising loops over int indices.
# -fno-trapping-math lets gcc if-convert clamps; neither changes the value of any IEEE operation.
EXTRA_COMPILE_ARGS = ["-O3", "-fno-wrapv", "-fno-trapping-math", "-pthread"]


def compiler_has_openmp(compiler):
    """True when `compiler` compiles and links an OpenMP program with -fopenmp."""
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "probe.c")
        with open(source, "w") as f:
            f.write(OPENMP_PROBE)
        try:
            objects = compiler.compile([source], output_dir=tmp, extra_postargs=["-fopenmp"])
            compiler.link_executable(objects, os.path.join(tmp, "probe"),
                                     extra_postargs=["-fopenmp"])
        except Exception:
            return False
    return True


class BuildExt(build_ext):
    """build_ext that adds -fopenmp when the compiler supports it."""

    def build_extensions(self):
        if os.environ.get("CELLS_NO_OPENMP") == "1":
            print("cells: CELLS_NO_OPENMP=1, building without OpenMP (threads from cells' team)")
            openmp = []
        elif compiler_has_openmp(self.compiler):
            openmp = ["-fopenmp"]
        else:
            print(
                "cells: the compiler cannot build OpenMP programs; building without OpenMP "
                "(threads from cells' team)",
                file=sys.stderr,
            )
            openmp = []
        for ext in self.extensions:
            ext.extra_compile_args = EXTRA_COMPILE_ARGS + openmp
            ext.extra_link_args = ["-pthread"] + openmp
        super().build_extensions()


def extension(name):
    return Extension(
        f"cells.{name}",
        [f"cells/{name}.pyx"],
        include_dirs=["include", numpy.get_include()],
        depends=glob.glob("include/cells/*.h"),  # rebuild when the gate math changes
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )


# Every cells/_*.pyx is an extension module: the BLAS layer, the families' table and the time loop
# of every family.
KERNEL_MODULES = sorted(os.path.basename(p)[:-4] for p in glob.glob("cells/_*.pyx"))

setup(
    ext_modules=cythonize(
        [extension(name) for name in KERNEL_MODULES],
        compiler_directives={
            "language_level": 3,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    ),
    cmdclass={"build_ext": BuildExt},
)
