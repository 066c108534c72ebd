"""Check two import rules on a package's modules: no import circle, no private name imported.

Usage: python .ci/check_imports.py [PACKAGE_DIR]   (default: cells, beside .ci)

Rule 1, no import circle. No module imports, directly or through others, a module that imports
it back. In a circle, whichever module is imported first runs while the other is only half
initialised, so a name it takes from that one is missing or not, depending on which module a
program happens to import first; and modules in a circle can only be read, tested and changed
together. Imports count wherever they are: inside functions, ``if``/``try`` and
``TYPE_CHECKING`` blocks too, since deferring an import hides the circle without removing it.
Importing ``a.b.c`` also runs the packages ``a`` and ``a.b`` above it, so those are imported as
well, except the packages that hold the importing module itself (a module of ``a`` importing
its sibling does not import ``a``: ``a`` is already being imported). Each circle is printed as
a path through its modules, each one followed by the file:line of its import of the next.

Rule 2, no private name imported. A module imports no name that starts with an underscore
(dunders such as ``__version__`` aside) from another module, neither with ``from m import _x``
nor as an attribute ``m._x`` of a module it imported. The underscore says that the name is its
module's own business, free to change with it; what modules share is public, or lives in a
private module (``_name.py``), which the package's modules import freely.

The modules are the package's ``*.py`` files (``__init__.py`` is its package's module) and its
Cython ``*.pyx`` files, whose Python import statements are found line by line (``cimport``
statements name compile-time ``.pxd`` declarations, not modules; the ``.pxd`` files are no
modules either). Only imports of the package's own modules count.

Exits 0 with a one-line summary (the modules, and the imports between them: each pair of
importer and imported counted once), or 1 printing every violation, one per line, sorted.
"""

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# A Python import statement of Cython source: `import a.b as m, c` or `from a import (x, y)`
# (parentheses may span lines). `cimport` statements do not match: `import` opens the statement.
PYX_IMPORT = re.compile(r"^[ \t]*((?:from[ \t]+[.\w]+[ \t]+)?import[ \t]+(?:\([^)]*\)|.*))", re.M)


def module_files(package_dir):
    """Each module file of the package, as (path, module name), sorted by path.

    A ``.py`` and a ``.pyx`` of the same name are both kept: they are one module, whose imports
    are those of both files.
    """
    files = sorted([*package_dir.rglob("*.py"), *package_dir.rglob("*.pyx")])
    modules = []
    for path in files:
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules.append((path, ".".join(parts)))
    return modules


def parse(path):
    """The syntax tree of a module file; of a ``.pyx`` file, a tree of its Python imports only."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        return ast.parse(text, filename=str(path))
    body = []
    for match in PYX_IMPORT.finditer(text):
        try:
            statements = ast.parse(match.group(1)).body
        except SyntaxError:
            continue  # prose of a docstring or comment that starts like an import
        for statement in statements:
            ast.increment_lineno(statement, text.count("\n", 0, match.start()))
        body += statements
    return ast.Module(body=body, type_ignores=[])


def is_private(name):
    """Whether a name starts with an underscore and is no dunder."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def deepest_module(dotted, modules):
    """The longest prefix of a dotted name that is a module of the package, or None."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in modules:
            return ".".join(parts[:n])
    return None


def packages_above(name, modules):
    """The package's packages that hold a module (a.b.c: a and a.b), outermost first."""
    parts = name.split(".")
    return [".".join(parts[:n]) for n in range(1, len(parts)) if ".".join(parts[:n]) in modules]


def base_of(node, package):
    """The module a ``from ... import`` reads from; a relative one resolved in ``package``."""
    if node.level == 0:
        return node.module
    parts = package.split(".")
    base = ".".join(parts[: len(parts) - node.level + 1])
    return f"{base}.{node.module}" if node.module else base


def read_imports(tree, package, modules):
    """What a module's import statements import and bind.

    Returns ``imported``, the line of each import of a package module; ``bound``, the local
    names bound to package modules; and ``taken``, each name ``from m import`` takes from a
    package module ``m`` that is not a module itself, as (line, m, name).
    """
    imported, bound, taken = [], {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                imported.append((node.lineno, deepest_module(alias.name, modules)))
                # `import a.b` binds `a`; `import a.b as m` binds `m` to `a.b`.
                name, module = alias.asname, alias.name
                if name is None:
                    name = module = alias.name.partition(".")[0]
                if module in modules:
                    bound[name] = module
        elif isinstance(node, ast.ImportFrom):
            base = base_of(node, package)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                imported.append((node.lineno, deepest_module(full, modules)))
                if full in modules:
                    bound[alias.asname or alias.name] = full
                elif base in modules:
                    taken.append((node.lineno, base, alias.name))
    return [(line, module) for line, module in imported if module], bound, taken


def attribute_chains(tree):
    """Each dotted name ``a.b.c`` of the code, and its parts ``a.b``, as (line, ["a", "b", "c"])."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            line, parts = node.lineno, []
            while isinstance(node, ast.Attribute):
                parts.insert(0, node.attr)
                node = node.value
            if isinstance(node, ast.Name):
                yield line, [node.id, *parts]


def names_read(tree, bound, modules):
    """Each name a module reads as an attribute of a package module, as (line, module, name).

    ``m.a.b`` resolves as far as its attributes name modules; the first one that does not is the
    name read. A name bound by an import anywhere in the module counts everywhere in it: the
    package's modules do not reuse the name of a module they import for something else.
    """
    for line, (root, *attributes) in attribute_chains(tree):
        if root not in bound:
            continue
        module = bound[root]
        for attribute in attributes:
            if f"{module}.{attribute}" not in modules:
                yield line, module, attribute
                break
            module = f"{module}.{attribute}"


def strongly_connected(graph):
    """The strongly connected components of a graph, each sorted (Tarjan's algorithm).

    Iterative, so that a long chain of imports needs no deep recursion.
    """
    index, low, stack, on_stack, components = {}, {}, [], set(), []
    # The depth-first search's path: each node with the iterator over its successors left.
    work = []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        work.append((node, iter(sorted(graph[node]))))

    for root in sorted(graph):
        if root in index:
            continue
        visit(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    visit(successor)
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while not component or component[-1] != node:
                        component.append(stack.pop())
                        on_stack.discard(component[-1])
                    components.append(sorted(component))
    return sorted(components)


def shortest_path(start, goals, graph, members):
    """The shortest path from ``start`` to the nearest of ``goals``, through ``members`` only.

    Of goals equally near, the first by name; the search visits successors in sorted order.
    """
    came_from, frontier = {start: None}, [start]
    while frontier and not goals & came_from.keys():
        next_frontier = []
        for node in frontier:
            for successor in sorted(graph[node] & members - came_from.keys()):
                came_from[successor] = node
                next_frontier.append(successor)
        frontier = next_frontier
    path = [min(goals & came_from.keys())]
    while came_from[path[0]] is not None:
        path.insert(0, came_from[path[0]])
    return path


def circle_through(component, graph):
    """A closed path through every module of a circle, from its first module.

    Each step goes to the nearest module not yet on the path, and the last one back to the first:
    a plain circle comes out as itself, a tangle of circles as one path that shows them all.
    """
    members = set(component)
    path, left = [component[0]], members - {component[0]}
    while left:
        path += shortest_path(path[-1], left, graph, members)[1:]
        left -= set(path)
    return path + shortest_path(path[-1], {path[0]}, graph, members)[1:]


def main():
    """Check the package, print the result, and return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "package_dir",
        nargs="?",
        type=Path,
        default=ROOT / "cells",
        help="the package's directory (default: cells, beside .ci)",
    )
    package_dir = parser.parse_args().package_dir.resolve()
    files = module_files(package_dir)
    modules = {name for _, name in files}

    # The import graph: for each (importer, imported), the first "file:line" that imports it.
    graph = {name: set() for name in modules}
    where = {}
    # A set: `m._x.y` and its part `m._x` read the same name on the same line.
    private = set()
    for path, name in files:
        shown = path.relative_to(package_dir.parent).as_posix()
        tree = parse(path)
        package = name if path.stem == "__init__" else name.rpartition(".")[0]
        imported, bound, taken = read_imports(tree, package, modules)
        above_importer = set(packages_above(name, modules))
        for line, module in imported:
            # Importing a.b.c runs the packages a and a.b as well, but for those that hold the
            # importer: they are being imported already.
            for target in [module, *packages_above(module, modules)]:
                if target == name or (target != module and target in above_importer):
                    continue
                graph[name].add(target)
                where[name, target] = min(where.get((name, target), (shown, line)), (shown, line))
        for line, module, attribute in [*taken, *names_read(tree, bound, modules)]:
            if is_private(attribute) and module != name:
                private.add((shown, line, name, module, attribute))

    problems = []
    for component in strongly_connected(graph):
        if len(component) > 1:
            circle = circle_through(component, graph)
            steps = ""
            for importer, target in zip(circle, circle[1:]):
                shown, line = where[importer, target]
                steps += f"{importer} ({shown}:{line}) -> "
            problems.append(f"import circle: {steps}{circle[-1]}")
    for shown, line, name, module, attribute in sorted(private):
        problems.append(
            f"{shown}:{line}: {name} imports {module}.{attribute}, a private name of another module"
        )

    for problem in problems:
        print(problem)
    if problems:
        return 1
    print(
        f"{len(modules)} modules, {len(where)} imports: no import circle, no private name imported"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
