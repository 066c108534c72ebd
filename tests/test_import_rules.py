"""Tests of .ci/check_imports.py, CI's import rules (no import circle, no private name imported),
on small packages written under tmp_path: each test checks the exit status and every line printed.
"""

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / ".ci" / "check_imports.py"
CLEAN = "{} modules, {} imports: no import circle, no private name imported"


def check(tmp_path, files):
    """Write ``files`` ({path under tmp_path: text}) and check the package ``pkg`` among them.

    Returns the exit status and the lines printed.
    """
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "pkg")], capture_output=True, text=True
    )
    assert result.stderr == ""
    return result.returncode, result.stdout.splitlines()


def test_clean_package(tmp_path):
    rc, lines = check(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg import _mod\nfrom pkg.b import public\n",
            "pkg/_mod.py": "_own = 1\n\n\ndef helper():\n    return _own\n",
            # A private module, imported whole and by name; public names taken from it.
            "pkg/a.py": (
                "import pkg._mod\nfrom pkg import _mod\nfrom pkg._mod import helper\n\n\n"
                "def f():\n    return _mod.helper(), pkg._mod.helper(), helper()\n"
            ),
            "pkg/b.py": "from pkg import a\nfrom pkg.sub import thing\n\npublic = a.f, thing\n",
            # A subpackage whose __init__ imports its submodules, which import each other: the
            # submodules do not import pkg.sub, the package that holds them.
            "pkg/sub/__init__.py": "from pkg.sub import n\nfrom pkg.sub.m import thing\n",
            "pkg/sub/m.py": "from pkg.sub.n import value\n\nthing = value\n",
            "pkg/sub/n.py": "from pkg import _mod\n\nvalue = _mod.helper\n",
        },
    )
    assert (rc, lines) == (0, [CLEAN.format(7, 9)])


@pytest.mark.parametrize(
    "late_import",
    [
        "def late():\n    from pkg import a\n",
        "if TYPE_CHECKING:\n    from pkg.a import f\n",
        "try:\n    import pkg.a\nexcept ImportError:\n    pass\n",
    ],
    ids=["in a function", "TYPE_CHECKING", "try"],
)
def test_circle_made_by_a_deferred_import(tmp_path, late_import):
    rc, lines = check(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg import b\n\n\ndef f():\n    return b\n",
            "pkg/b.py": "from typing import TYPE_CHECKING\n\n" + late_import,
        },
    )
    assert (rc, lines) == (1, ["import circle: pkg.a (pkg/a.py:1) -> pkg.b (pkg/b.py:4) -> pkg.a"])


def test_circle_through_a_parent_package(tmp_path):
    # Importing pkg.sub.m runs pkg/sub/__init__.py first, which imports pkg.a back.
    rc, lines = check(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "import pkg.sub.m\n",
            "pkg/sub/__init__.py": '"""Sub."""\nfrom pkg import a\n',
            "pkg/sub/m.py": "x = 1\n",
        },
    )
    circle = "pkg.a (pkg/a.py:1) -> pkg.sub (pkg/sub/__init__.py:2) -> pkg.a"
    assert (rc, lines) == (1, [f"import circle: {circle}"])


@pytest.mark.parametrize(
    "imports, circle",
    [
        (
            ["pkg.b", "pkg.c", "pkg.a"],
            "pkg.a (pkg/a.py:1) -> pkg.b (pkg/b.py:1) -> pkg.c (pkg/c.py:1) -> pkg.a",
        ),
        (
            ["pkg.c", "pkg.a", "pkg.b"],
            "pkg.a (pkg/a.py:1) -> pkg.c (pkg/c.py:1) -> pkg.b (pkg/b.py:1) -> pkg.a",
        ),
        # Two circles through pkg.a, shown as one path through both.
        (
            ["pkg.b, pkg.c", "pkg.a", "pkg.a"],
            "pkg.a (pkg/a.py:1) -> pkg.b (pkg/b.py:1) -> pkg.a (pkg/a.py:1) -> pkg.c (pkg/c.py:1)"
            " -> pkg.a",
        ),
    ],
    ids=["one way", "the other way", "two circles"],
)
def test_circle_through_three_modules(tmp_path, imports, circle):
    files = {"pkg/__init__.py": ""}
    for name, imported in zip("abc", imports):
        files[f"pkg/{name}.py"] = f"import {imported}\n"
    rc, lines = check(tmp_path, files)
    assert (rc, lines) == (1, [f"import circle: {circle}"])


@pytest.mark.parametrize(
    "python_import",
    ["from pkg import a", "import pkg.a as a", "from pkg import (\n    a,  # the module\n)"],
    ids=["from", "import as", "parenthesised"],
)
def test_pyx_imports_but_not_cimports(tmp_path, python_import):
    # pkg._x imports the extension, which cimports pkg/_x.pxd: no circle, since a cimport reads
    # the declarations at compile time. Its Python import of pkg.a, which imports it, is one.
    pyx = (
        "# cython: language_level=3\n"
        '"""The extension.\n'
        "\n"
        "import of pkg._x happens at compile time: this line is prose, not an import.\n"
        '"""\n'
        "cimport numpy as cnp\n"
        "from pkg._x cimport (\n"
        "    y,\n"
        ")\n"
        "from libc.math cimport INFINITY\n"
        "\n"
        "import numpy as np\n" + python_import + "\n"
    )
    rc, lines = check(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/_ext.pyx": pyx,
            "pkg/_x.pxd": "cdef int y\n",
            "pkg/_x.py": "import pkg._ext\n",
            "pkg/a.py": "from pkg import _ext\n",
        },
    )
    circle = "pkg._ext (pkg/_ext.pyx:13) -> pkg.a (pkg/a.py:1) -> pkg._ext"
    assert (rc, lines) == (1, [f"import circle: {circle}"])


# The modules that user modules read from: private names in pkg.m and pkg.sub, a private module.
NEIGHBOURS = {
    "pkg/__init__.py": 'from pkg._private_module import VALUE\n\n__version__ = "1"\n',
    "pkg/_private_module.py": "VALUE = 1\n",
    "pkg/m.py": "_helper = 1\n",
    "pkg/sub/__init__.py": "_thing = 1\n",
}


def users(codes):
    """The modules pkg.user00, pkg.user01, ... of the codes given, as files for check()."""
    return {f"pkg/user{i:02}.py": code + "\n" for i, code in enumerate(codes)}


# Each reported once, on the code's last line: (code, the private name it reads).
REPORTED = [
    ("from pkg.m import _helper", "pkg.m._helper"),
    ("from pkg.m import _helper as helper", "pkg.m._helper"),
    ("import pkg.m as mm\n\nmm._helper", "pkg.m._helper"),
    ("import pkg.m as mm\n\nmm._helper + mm._helper", "pkg.m._helper"),
    ("from pkg import m\n\nm._helper", "pkg.m._helper"),
    ("import pkg.sub\n\npkg.sub._thing", "pkg.sub._thing"),
    ("import pkg.sub\n\npkg.sub._thing.bit_length()", "pkg.sub._thing"),
    ("from pkg import sub\n\n\ndef f():\n    sub._thing = 2", "pkg.sub._thing"),
    ("from pkg import _private_module\n\n_private_module._SECRET", "pkg._private_module._SECRET"),
]

# Each imports one module of the package and no private name.
NOT_REPORTED = [
    "from pkg import _private_module",
    "import pkg._private_module\n\npkg._private_module.VALUE",
    "from pkg._private_module import VALUE",
    "from pkg import __version__",
    "import pkg.m\n\npkg.m.__name__",
    "from pkg.m import __doc__",
    "import pkg.m as mm\n\n\ndef f(self):\n    return mm, self._helper",
]


def test_private_names_reported(tmp_path):
    codes = [code for code, _ in REPORTED]
    rc, lines = check(tmp_path, {**NEIGHBOURS, **users(codes)})
    expected = [
        f"pkg/user{i:02}.py:{len(code.splitlines())}: pkg.user{i:02} imports {name}, "
        "a private name of another module"
        for i, (code, name) in enumerate(REPORTED)
    ]
    assert (rc, lines) == (1, expected)


def test_no_private_name_reported(tmp_path):
    rc, lines = check(tmp_path, {**NEIGHBOURS, **users(NOT_REPORTED)})
    # The modules: NEIGHBOURS' and the users'; the imports: pkg's own and one per user.
    assert (rc, lines) == (0, [CLEAN.format(4 + len(NOT_REPORTED), 1 + len(NOT_REPORTED))])


def test_own_private_names(tmp_path):
    rc, lines = check(
        tmp_path,
        {
            # A package reading its own private names.
            "pkg/__init__.py": (
                "import pkg\n\n_registry = {}\n\n\ndef registry():\n    return pkg._registry\n"
            ),
            "pkg/m.py": (
                "import pkg\n\n_own = pkg.registry\n\n\n"
                "def f():\n    import pkg.m\n    from pkg.m import _own\n\n    return pkg.m._own\n"
            ),
        },
    )
    assert (rc, lines) == (0, [CLEAN.format(2, 1)])


def test_relative_imports(tmp_path):
    rc, lines = check(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from . import b\n\n_x = 1\n",
            "pkg/b.py": "from .a import _x\n\n_y = _x\n",
            # In a package's __init__, `.` is the package itself: pkg.sub._c, a private module.
            "pkg/sub/__init__.py": "from . import _c\n",
            "pkg/sub/_c.py": "from ..b import _y\n",
        },
    )
    assert (rc, lines) == (
        1,
        [
            "import circle: pkg.a (pkg/a.py:1) -> pkg.b (pkg/b.py:1) -> pkg.a",
            "pkg/b.py:1: pkg.b imports pkg.a._x, a private name of another module",
            "pkg/sub/_c.py:1: pkg.sub._c imports pkg.b._y, a private name of another module",
        ],
    )
