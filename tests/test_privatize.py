"""``dev/privatize.py`` (the rename to private modules) can be re-run after a merge: on a tree
that is already converted it changes nothing, it fixes a file added later that imports an old
path, and it renames a module added later under an old-style name."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "dev" / "privatize.py"


def _load():
    spec = importlib.util.spec_from_file_location("privatize", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["privatize"] = mod
    spec.loader.exec_module(mod)
    return mod


pz = _load()


def _rw(text: str, rel: str = "src/dpmatrix/planners/_residual/plan.py") -> str:
    return pz.rewrite_text(text, Path(rel), pz.RENAMES, [])


def test_the_converted_repository_has_nothing_left_to_do():
    r = subprocess.run([sys.executable, str(SCRIPT), "--check"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize(("old", "new"), [
    ("from dpmatrix.measure.measure_plan import measure\n", "from dpmatrix._measure.measure_plan import measure\n"),
    ("import dpmatrix.planners.dispatch as d\n", "import dpmatrix.planners._dispatch as d\n"),
    ("from ...measure.secure import draw\n", "from ..._measure.secure import draw\n"),
    ("from ..base import PlanBase\n", "from .._base import PlanBase\n"),
    ("from .coefficients import x\n", "from .coefficients import x\n"),  # a private package's own module
    ("from dpmatrix.planners import dispatch\n", "from dpmatrix.planners import _dispatch as dispatch\n"),
    ('monkeypatch.setattr("dpmatrix.engines.spark_engine.X", 1)\n',
     'monkeypatch.setattr("dpmatrix.engines._spark_engine.X", 1)\n'),
    ('LAYERS = [("dpmatrix.measure",), ("dpmatrix.report", "dpmatrix.postprocess")]\n',
     'LAYERS = [("dpmatrix._measure",), ("dpmatrix._report", "dpmatrix._postprocess")]\n'),
    ('FORMAT = "dpmatrix.release/2"; OTHER = "dpmatrix.postprocessed/1"\n',
     'FORMAT = "dpmatrix.release/2"; OTHER = "dpmatrix.postprocessed/1"\n'),
    ("x = dpmatrix.measure(plan, data)\n", "x = dpmatrix.measure(plan, data)\n"),  # the function
    ('files = ["src/dpmatrix/planners/formats.py"]\n', 'files = ["src/dpmatrix/planners/_formats.py"]\n'),
    ("from ..release import _check_formats, _sibling\n", "from ..release import check_formats, sibling_path\n"),
    ("from dpmatrix.errors import PlanError\nfrom dpmatrix.protocols import HasClosure\n",
     "from dpmatrix.errors import PlanError\nfrom dpmatrix.protocols import HasClosure\n"),
])
def test_a_reference_to_an_old_path_is_rewritten_and_a_new_one_is_left_alone(old, new):
    assert _rw(old) == new
    assert _rw(new) == new  # idempotent


def test_markdown_directives_and_relative_imports_of_an_old_file_location():
    assert _rw("::: dpmatrix.measure.measure_plan.measure\n", "docs/x.md") == "::: dpmatrix._measure.measure_plan.measure\n"
    # a file merged later into the old folder still resolves its relative imports
    assert _rw("from ..engines.base import X\n", "src/dpmatrix/measure/new.py") == "from ..engines._base import X\n"


def test_a_new_old_style_module_is_renamed_by_the_rule(tmp_path):
    pkg = tmp_path / "src" / "dpmatrix"
    (pkg / "engines").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "engines" / "__init__.py").write_text("from .polars_engine import PolarsEngine\n")
    (pkg / "engines" / "polars_engine.py").write_text("from ..domain import Domain\nclass PolarsEngine: ...\n")
    (pkg / "errors.py").write_text("")
    (pkg / "_hidden.py").write_text("")
    assert pz.tree_renames(tmp_path / "src") == {"dpmatrix.engines.polars_engine": "_polars_engine"}
    r = subprocess.run([sys.executable, str(SCRIPT), "--root", str(tmp_path), "--apply"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "NEW module dpmatrix.engines.polars_engine" in r.stdout
    assert (pkg / "engines" / "_polars_engine.py").read_text().startswith("from .._domain import Domain")
    assert (pkg / "engines" / "__init__.py").read_text() == "from ._polars_engine import PolarsEngine\n"
    again = subprocess.run([sys.executable, str(SCRIPT), "--root", str(tmp_path), "--check"], capture_output=True,
                           text=True, timeout=120)
    assert again.returncode == 0, again.stdout
