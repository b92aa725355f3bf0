"""The package's import graph reads as its architecture: acyclic, and imports only go down.

The graph is built from the source with :mod:`ast` (module-level and function-level imports
alike; only imports under ``if TYPE_CHECKING:`` are skipped, they never run). Importing
``dpmatrix.a.b`` also executes the package ``dpmatrix.a``, so it counts as an edge to both.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import dpmatrix

SRC = Path(dpmatrix.__file__).parent

# Lowest first. A module may import modules of its own layer or of lower layers only.
LAYERS: list[tuple[str, ...]] = [
    ("dpmatrix.errors", "dpmatrix._hooks", "dpmatrix._jsonfile", "dpmatrix._jsonarray", "dpmatrix._version", "dpmatrix._defaults", "dpmatrix._provenance", "dpmatrix._csv_cells",
     "dpmatrix._dates", "dpmatrix._bytesize"),
    ("dpmatrix._linalg",),
    ("dpmatrix._domain", "dpmatrix._privacy", "dpmatrix._accounting", "dpmatrix._statement", "dpmatrix._ledger", "dpmatrix._selection",
     "dpmatrix._values"),
    ("dpmatrix._workload", "dpmatrix._queries", "dpmatrix._workload_spec", "dpmatrix._encode", "dpmatrix._sizing",
     "dpmatrix._unit"),
    ("dpmatrix._mechanisms",),
    ("dpmatrix._solvers",),
    ("dpmatrix.engines",),
    ("dpmatrix.protocols",),
    ("dpmatrix._reconstruct",),
    ("dpmatrix._measure",),
    ("dpmatrix.planners",),
    ("dpmatrix._plan_file",),
    ("dpmatrix._release_tables",),
    ("dpmatrix.release",),
    ("dpmatrix._report", "dpmatrix._postprocess"),
    ("dpmatrix._workflow",),
    ("dpmatrix.cli", "dpmatrix.__main__", "dpmatrix._table_text"),
    ("dpmatrix",),  # the package root only re-exports the public API
]


def layer_of(module: str) -> int:
    best, rank = -1, None
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, rank = len(p), i
    assert rank is not None, f"module {module} is in no layer: add it to LAYERS"
    return rank


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    """Every dpmatrix module that importing/running ``module`` may import."""
    tree = ast.parse(path.read_text())
    is_pkg = path.name == "__init__.py"
    package = module if is_pkg else module.rpartition(".")[0]
    targets: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for c in child.orelse:
                    visit(c)
                continue
            if isinstance(child, ast.Import):
                targets.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[: len(base) - (child.level - 1)]
                    mod = ".".join(base + ([child.module] if child.module else []))
                else:
                    mod = child.module or ""
                targets.add(mod)
                for a in child.names:  # `from pkg import submodule`
                    if f"{mod}.{a.name}" in known:
                        targets.add(f"{mod}.{a.name}")
            visit(child)

    visit(tree)
    edges = set()
    for t in targets:
        if not (t == "dpmatrix" or t.startswith("dpmatrix.")):
            continue
        parts = t.split(".")
        for k in range(2, len(parts) + 1):  # the module and the packages it executes
            anc = ".".join(parts[:k])
            if anc in known and anc != module and not module.startswith(anc + "."):
                edges.add(anc)
        if t == "dpmatrix" and module != "dpmatrix":
            edges.add("dpmatrix")
    return edges


MODULES = _modules()
GRAPH = {m: _imports(m, p, set(MODULES)) for m, p in MODULES.items()}


def test_every_module_has_a_layer():
    for m in MODULES:
        layer_of(m)


def test_imports_only_go_down():
    bad = [
        f"{m} (layer {layer_of(m)}) imports {t} (layer {layer_of(t)})"
        for m, ts in GRAPH.items()
        for t in ts
        if layer_of(t) > layer_of(m)
    ]
    assert not bad, "upward imports:\n" + "\n".join(sorted(bad))


def test_import_graph_is_acyclic():
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def dfs(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(GRAPH[m]):
            if state.get(t) == 1:
                cycles.append(stack[stack.index(t) :] + [t])
            elif t not in state:
                dfs(t)
        stack.pop()
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state:
            dfs(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_checker_sees_cycles_and_upward_imports(tmp_path):
    """The graph builder is not vacuous: it finds function-level, relative and submodule imports."""
    f = tmp_path / "m.py"
    f.write_text(
        "from .a import x\n"
        "def g():\n    from ..release import _reader\n    import dpmatrix._measure\n"
        "if TYPE_CHECKING:\n    from ..cli import main\n"
    )
    known = {"dpmatrix.engines.a", "dpmatrix.release", "dpmatrix.release._reader", "dpmatrix._measure", "dpmatrix.cli"}
    got = _imports("dpmatrix.engines.m", f, known)
    assert got == {"dpmatrix.engines.a", "dpmatrix.release", "dpmatrix.release._reader", "dpmatrix._measure"}
    assert layer_of("dpmatrix.release._reader") > layer_of("dpmatrix.engines.m")


@pytest.mark.parametrize("package", sorted(m for m, p in MODULES.items() if p.name == "__init__.py" and m != "dpmatrix"))
def test_no_name_shadows_a_submodule(package):
    """``from dpmatrix.X import name`` gives what it says: a subpackage never exports a function
    (or class) under the name of one of its own submodules. (The root package's ``plan`` and
    ``measure`` functions are the public API and have no subpackage of that name shadowed
    inside their own package.)"""
    pkg = importlib.import_module(package)
    for info in pkgutil.iter_modules(pkg.__path__):
        sub = importlib.import_module(f"{package}.{info.name}")
        got = getattr(pkg, info.name)
        assert got is sub, f"{package}.{info.name} is {got!r}, not the submodule"


def test_public_functions_are_what_their_import_says():
    import dpmatrix as dm
    from dpmatrix._measure import measure
    from dpmatrix.planners import plan

    assert callable(plan) and plan is dm.plan and plan.__module__ == "dpmatrix.planners._dispatch"
    assert callable(measure) and measure is dm.measure
