"""Build the sdist and check its manifest: everything its own tests need is in it, and nothing
generated or measured. Usage: python .ci/check_sdist.py [sdist.tar.gz] (builds one without)."""

import subprocess
import sys
import tarfile
import tempfile
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Each pattern must match at least one file of the sdist.
REQUIRED = [
    "LICENSE",
    "CHANGELOG.md",
    "README.md",
    "pyproject.toml",
    "setup.py",
    "MANIFEST.in",
    "cells/__init__.py",
    "cells/py.typed",
    "cells/_time_loop.pyx",
    "cells/_family_table.pyx",
    "cells/*.pxd",
    "cells/kernels/*.cu",
    "cells/kernels/*.cuh",
    "include/cells/*.h",
    "tests/conftest.py",
    "tests/test_*.py",
    "tests/c/*.c",
    "examples/char_lm.py",
    "examples/ddp_train.py",
    "examples/streaming.py",
    "benchmarks/gpu_check.py",
    "docs/conf.py",
    "docs/index.md",
    "docs/api/index.rst",
]
# No file of the sdist may match these.
FORBIDDEN = [
    "*.so",
    "*.o",
    "cells/*.c",
    "*.json",
    "*.png",
    "*.html",
    "*.pyc",
    "docs/api/generated/*",
    "build/*",
    "dist/*",
]


def build_sdist(out):
    subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--outdir", str(out), str(ROOT)], check=True
    )
    return next(Path(out).glob("*.tar.gz"))


def main(argv):
    with tempfile.TemporaryDirectory() as tmp:
        sdist = Path(argv[1]) if len(argv) > 1 else build_sdist(tmp)
        with tarfile.open(sdist) as tar:
            names = [n.split("/", 1)[1] for n in tar.getnames() if "/" in n]
    missing = [p for p in REQUIRED if not any(fnmatch(n, p) for n in names)]
    forbidden = sorted(n for n in names if any(fnmatch(n, p) for p in FORBIDDEN))
    for p in missing:
        print(f"missing from the sdist: {p}")
    for n in forbidden:
        print(f"in the sdist, but generated or measured: {n}")
    print(f"{sdist.name}: {len(names)} entries, {len(missing)} missing, {len(forbidden)} forbidden")
    return 1 if missing or forbidden else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
