"""The documentation's promises: every public name has an entry in the API reference, and every
example runs, those of the docstrings (doctest) and those of the pages and the README (each
page's ```python blocks, in order, in one namespace)."""

import doctest
import importlib
import os
import re
from pathlib import Path

import pytest

import cells
from cells import _families

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# The sdist ships docs/ and the README; a checkout without them has nothing to check here.
needs_docs = pytest.mark.skipif(not (DOCS / "conf.py").exists(), reason="no docs/ here")

# The modules whose docstrings carry examples (every declared family's among them); cells.torch
# needs torch.
MODULES = [f"cells.{family}" for family in _families.FAMILIES] + [
    "cells.lstm_layer",
    "cells._prepared",
    "cells.convert",
    "cells.onnx",
    "cells.cuda",
    "cells.torch",
    "cells.haste",
]
NEEDS = {"cells.torch": "torch", "cells.haste": "torch", "cells.convert": "torch"}


def public_names():
    """Every public name: cells' __all__, the families' prepare, and the submodules' __all__."""
    names = [f"cells.{n}" for n in cells.__all__]
    names += [f"cells.{f}.prepare" for f in _families.FAMILIES]
    for module in ("convert", "onnx", "cuda", "torch", "haste"):
        if module in ("torch", "haste"):
            pytest.importorskip("torch")
        m = importlib.import_module(f"cells.{module}")
        names += [f"cells.{module}.{n}" for n in m.__all__]
    return names


@needs_docs
def test_every_public_name_has_an_api_entry():
    text = (DOCS / "api" / "index.rst").read_text()
    entries, module = set(), None
    for line in text.splitlines():
        m = re.match(r"\.\. module:: (\S+)", line)
        if m:
            module = m.group(1)
        m = re.match(r"   ([A-Za-z_][\w.]*)$", line)
        if m and module:
            entries.add(f"{module}.{m.group(1)}")
    missing = [n for n in public_names() if n not in entries]
    assert not missing


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    if name in NEEDS:
        pytest.importorskip(NEEDS[name])
    module = importlib.import_module(name)
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    tests = finder.find(module, name, globs={})
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0


def python_blocks(path):
    """The ```python blocks of a Markdown file, in order."""
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), flags=re.S | re.M)


PAGES = sorted(
    p.relative_to(ROOT).as_posix()
    for p in [ROOT / "README.md", *DOCS.rglob("*.md")]
    if p.exists() and python_blocks(p)
)


@pytest.mark.parametrize("page", PAGES)
def test_page_examples_run(page, monkeypatch, tmp_path):
    text = (ROOT / page).read_text()
    # Keras 3 on PyTorch, as the pages' Keras example sets it (before keras is first imported).
    monkeypatch.setitem(os.environ, "KERAS_BACKEND", os.environ.get("KERAS_BACKEND", "torch"))
    for module in ("torch", "onnx", "onnxruntime", "keras"):
        if re.search(rf"^\s*import {module}\b", text, flags=re.M):
            pytest.importorskip(module)
    monkeypatch.chdir(tmp_path)  # an example that writes a file writes it here
    namespace = {"__name__": "__docs__"}
    for block in python_blocks(ROOT / page):
        exec(compile(block, page, "exec"), namespace)
