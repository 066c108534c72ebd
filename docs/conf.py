"""Sphinx configuration of cells' documentation.

Build: ``python -m sphinx -W -b html docs build/html`` (after ``pip install -e ".[docs]"``);
run the examples of the pages: ``python -m sphinx -W -b doctest docs build/doctest``.
"""

import importlib.util

import cells

project = "cells"
author = "the cells authors"
copyright = "the cells authors, Apache-2.0"
release = cells.__version__
version = release

extensions = [
    "myst_parser",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.doctest",
    "sphinx.ext.mathjax",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build"]
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3

# The API reference: one page per public name, generated at build time (not committed).
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": False}
autodoc_typehints = "none"  # numpydoc's Parameters sections carry the types
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# cells.torch needs torch and cells.cuda's device path CuPy; the reference is built without
# them too (their pages then show the docstrings only).
autodoc_mock_imports = [m for m in ("torch", "cupy") if importlib.util.find_spec(m) is None]

# Examples in the pages run with this context (the doctest builder).
doctest_global_setup = """
import numpy as np
import cells
"""

html_theme = "pydata_sphinx_theme"
html_title = f"cells {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_static_path = []
