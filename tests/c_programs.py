"""Building and running the C test programs of tests/c against include/cells, with the flags
setup.py gives the extensions; a test using it is skipped where no C compiler is found."""
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ["-O3", "-fno-wrapv", "-fno-trapping-math", "-pthread"]   # setup.py's EXTRA_COMPILE_ARGS


def run_c_test(name, tmp_path, timeout, extra_flags=()):
    """Compile tests/c/<name>.c (with extra_flags as well: skipped when the compiler refuses
    them) and run it; return its completed process (stdout as text)."""
    cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()
    if shutil.which(cc[0]) is None:
        pytest.skip(f"no C compiler ({cc[0]})")
    exe = tmp_path / name
    build = subprocess.run([*cc, *FLAGS, *extra_flags, "-I", str(ROOT / "include"),
                            str(ROOT / f"tests/c/{name}.c"), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    if build.returncode and extra_flags:
        pytest.skip(f"the compiler refuses {' '.join(extra_flags)}: {build.stderr[-500:]}")
    assert build.returncode == 0, build.stderr
    return subprocess.run([str(exe)], capture_output=True, text=True, timeout=timeout)
