"""The public API has a boundary: these names, these modules, and nothing private crosses a package.

The expected lists are written here from the API reference (``docs/reference/api.md``) and the
how-to pages (adding a planner, adding an engine), not read from the code: a name that appears or
disappears is a decision, made by editing this file.

A module is private when a part of its dotted name starts with ``_`` (scikit-learn's rule):
``dpmatrix._measure.secure`` and ``dpmatrix.planners._registry`` are private. Importing a
private *module* is fine anywhere inside the package; importing a private *name* (``_helper``)
from a module of another package is not.
"""

from __future__ import annotations

import ast
import importlib
import types
from pathlib import Path

import pytest

import dpmatrix as dm

SRC = Path(dm.__file__).parent

ROOT_NAMES = {
    # describing what is asked
    "Attribute", "Domain", "Workload", "QueryWorkload", "codes", "code_of", "infer_domain",
    # planning
    "plan", "plan_from_dict", "plan_pure", "plan_querysmasher", "Budget", "lower_bound", "SVDBound",
    "evaluate", "compare",
    # protecting a person
    "Unit", "bound_contributions", "record_budget",
    # plans
    "Plan", "PlanBase", "PlanFacts", "ResidualPlan", "QuerySmasherPlan", "PurePlan", "ExplicitStrategyPlan",
    # measuring and reconstructing
    "measure", "Measurements", "QueryAnswer",
    # releases and after
    "publish", "write_release", "load_release", "Release", "Ledger", "report", "postprocess",
    # errors
    "DPMatrixError", "BudgetError", "BudgetExceededError", "DataError", "DomainError", "NotMeasuredError",
    "PlanError", "ReleaseError", "SamplerArgumentError", "SamplerEnvironmentError", "TargetError",
    "UnknownAttributeError", "WorkloadError",
}

PACKAGE_NAMES = {
    "dpmatrix.planners": {
        "plan", "plan_from_dict", "compare", "Plan", "PlanBase",
        "PlannerSpec", "register_planner", "find_planner", "planner_names", "plan_format",
        "LinearMechanism", "Estimator", "EntryAnswer", "PrivacyReport", "axis_labels",
    },
    "dpmatrix.engines": {
        "CountEngine", "Closable", "NumpyEngine", "DuckDBEngine", "SparkEngine", "engine_for", "ENCODINGS",
        "marginals_from_maximal", "maximal_sets", "project",
    },
    "dpmatrix.release": {
        "Release", "load_release", "write_release", "SavedTable", "read_saved_table", "read_checked_manifest",
        "RELEASE_FORMAT",
        "LeftoverWarning", "output_lock", "recover_output",
    },
    "dpmatrix.cli": {"main"},
}

# every public module: the packages above, and the few modules users name
PUBLIC_MODULES = {"dpmatrix", *PACKAGE_NAMES, "dpmatrix.errors", "dpmatrix.protocols", "dpmatrix.__main__",
                  "dpmatrix.cli.__main__"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_private(module: str) -> bool:
    return any(p.startswith("_") and not (p.startswith("__") and p.endswith("__")) for p in module.split("."))


def test_the_root_exports_exactly_the_documented_names():
    assert set(dm.__all__) == ROOT_NAMES
    assert len(dm.__all__) == len(ROOT_NAMES)
    for name in sorted(ROOT_NAMES):
        obj = getattr(dm, name)
        assert not isinstance(obj, types.ModuleType), f"dm.{name} is a module"


def test_measure_report_postprocess_are_the_functions_even_after_their_modules_are_imported():
    importlib.import_module("dpmatrix._measure")
    importlib.import_module("dpmatrix._report")
    importlib.import_module("dpmatrix._postprocess")
    for name in ("measure", "report", "postprocess"):
        assert callable(getattr(dm, name)) and not isinstance(getattr(dm, name), types.ModuleType)


@pytest.mark.parametrize("package", sorted(PACKAGE_NAMES))
def test_a_public_package_exports_exactly_its_documented_names(package):
    pkg = importlib.import_module(package)
    assert set(pkg.__all__) == PACKAGE_NAMES[package]
    for name in pkg.__all__:
        getattr(pkg, name)


def test_every_other_module_is_private():
    public = {m for m in MODULES if not _is_private(m)}
    assert public == PUBLIC_MODULES, (
        f"public by name but not intended: {sorted(public - PUBLIC_MODULES)}; "
        f"intended but missing: {sorted(PUBLIC_MODULES - public)} "
        "(rename with dev/privatize.py, or add the module here on purpose)"
    )


def _private_names_imported_across_packages() -> list[str]:
    bad = []
    for module, path in sorted(MODULES.items()):
        is_pkg = path.name == "__init__.py"
        package = module if is_pkg else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if not source.startswith("dpmatrix"):
                continue
            source_pkg = source if source in MODULES and MODULES[source].name == "__init__.py" else source.rpartition(".")[0]
            for alias in node.names:
                name = alias.name
                if not name.startswith("_") or name.startswith("__") or f"{source}.{name}" in MODULES:
                    continue  # a public name, a dunder, or a private module (fine)
                if source_pkg != package:
                    bad.append(f"{module} imports {name} from {source}")
    return bad


def test_no_private_name_is_imported_across_packages():
    bad = _private_names_imported_across_packages()
    assert not bad, "private names crossing packages:\n" + "\n".join(bad)


def test_the_private_name_check_sees_a_violation(tmp_path, monkeypatch):
    """The check is not vacuous: a planner module importing ``_z`` from the measure package fails."""
    fake = tmp_path / "dpmatrix" / "planners" / "_x.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("from .._measure.secure import _z\nfrom .._measure import secure\nfrom ._dispatch import plan\n")
    monkeypatch.setitem(MODULES, "dpmatrix.planners._x", fake)
    got = [b for b in _private_names_imported_across_packages() if b.startswith("dpmatrix.planners._x ")]
    assert got == ["dpmatrix.planners._x imports _z from dpmatrix._measure.secure"]
