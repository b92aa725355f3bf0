#!/usr/bin/env python3
"""Make dpmatrix's implementation modules private and rewrite every reference to them.

Run from anywhere (the repository is this file's grandparent, or ``--root``)::

    python dev/privatize.py            # dry run: what would move, which files would change
    python dev/privatize.py --apply    # do it (``git mv`` for tracked files)
    python dev/privatize.py --check    # exit 1 if anything is left to do (for CI / after a merge)

The rule (scikit-learn style): a module is private when any part of its dotted name starts with
``_``. The public surface is

* the packages in ``PUBLIC_PACKAGES`` (each with a curated ``__init__``/``__all__``), and
* the modules in ``PUBLIC_MODULES`` (what users must name: ``errors``, ``protocols``,
  ``__main__``).

Every other child (module or subpackage) of a public package gets a leading underscore; the
children of a private package keep their names (they are private through their package).
``RENAMES`` is the table this rule produced on the tree before the first run; it stays in the
script so that references to the *old* names are rewritten even after the files have moved (a
branch merged later that imports ``dpmatrix.measure.measure_plan`` is fixed by a re-run). A new
module added under an old-style name is renamed by the rule and reported, so that it can be
added to the table.

What is rewritten, in ``src/ tests/ benchmarks/ docs/ dev/ pyproject.toml README.md mkdocs.yml``
(not ``tests/data/``: persisted files keep the bytes they were written with):

* dotted paths ``dpmatrix.pkg.module[.name]`` anywhere (imports, strings such as monkeypatch
  targets and the architecture test's LAYERS, mkdocstrings ``:::`` lines, prose), matched on
  word boundaries and segment by segment; a dotted name followed by ``/`` is a file-format
  identifier (``dpmatrix.release/2``) and is left alone;
* slash paths ``dpmatrix/pkg/module.py`` and ``src/dpmatrix/pkg/`` (mypy's file list, notes);
* private names listed in ``NAME_RENAMES`` (imported by another package) become public;
* in Python files, relative imports (``from .module import x``, ``from ..pkg.module import x``)
  resolved against the file's package, and ``from pkg import module`` (becomes
  ``from pkg import _module as module`` so the code that uses the name is unchanged).

A bare ``dpmatrix.measure`` / ``dpmatrix.report`` / ``dpmatrix.postprocess`` is ambiguous: the
package root exports *functions* of those names. It is rewritten only in an import statement or
when it is a whole string literal (``"dpmatrix.measure"``, a module name); other occurrences are
listed for a human to read.

Re-running on a converted tree changes nothing (every new name starts with ``_`` and no old name
does).
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

PUBLIC_PACKAGES = {
    "dpmatrix",
    "dpmatrix.planners",  # plan(), the planner registry and plan formats (adding a planner)
    "dpmatrix.engines",  # CountEngine and the engines (adding or choosing an engine)
    "dpmatrix.release",  # Release, load_release, write_release
    "dpmatrix.cli",  # main() (the console script's entry point)
}
PUBLIC_MODULES = {
    "dpmatrix.__main__",
    "dpmatrix.cli.__main__",
    "dpmatrix.errors",  # the typed errors users catch
    "dpmatrix.protocols",  # the runtime-checkable capability protocols users test plans with
}

# old dotted name -> new last segment. Produced by the rule above on main at be833de; keep it.
RENAMES: dict[str, str] = {
    "dpmatrix.accounting": "_accounting",
    "dpmatrix.csv_cells": "_csv_cells",
    "dpmatrix.dates": "_dates",  # added by a branch merged later (the rule renames it too)
    "dpmatrix.defaults": "_defaults",
    "dpmatrix.domain": "_domain",
    "dpmatrix.encode": "_encode",
    "dpmatrix.engines.base": "_base",
    "dpmatrix.engines.bincount": "_bincount",
    "dpmatrix.engines.data_source": "_data_source",
    "dpmatrix.engines.duckdb_engine": "_duckdb_engine",
    "dpmatrix.engines.infer": "_infer",
    "dpmatrix.engines.numpy_engine": "_numpy_engine",
    "dpmatrix.engines.projected": "_projected",
    "dpmatrix.engines.spark_count": "_spark_count",
    "dpmatrix.engines.spark_engine": "_spark_engine",
    "dpmatrix.engines.sql": "_sql",
    "dpmatrix.jsonfile": "_jsonfile",
    "dpmatrix.ledger": "_ledger",
    "dpmatrix.linalg": "_linalg",
    "dpmatrix.measure": "_measure",
    "dpmatrix.mechanisms": "_mechanisms",
    "dpmatrix.plan_file": "_plan_file",
    "dpmatrix.planners.base": "_base",
    "dpmatrix.planners.builtin": "_builtin",
    "dpmatrix.planners.compare": "_compare",
    "dpmatrix.planners.dispatch": "_dispatch",
    "dpmatrix.planners.explicit": "_explicit",
    "dpmatrix.planners.formats": "_formats",
    "dpmatrix.planners.optimality": "_optimality",
    "dpmatrix.planners.pure": "_pure",
    "dpmatrix.planners.querysmasher": "_querysmasher",
    "dpmatrix.planners.registry": "_registry",
    "dpmatrix.planners.residual": "_residual",
    "dpmatrix.planners.targets": "_targets",
    "dpmatrix.planners.targets_io": "_targets_io",
    "dpmatrix.postprocess": "_postprocess",
    "dpmatrix.privacy": "_privacy",
    "dpmatrix.provenance": "_provenance",
    "dpmatrix.queries": "_queries",
    "dpmatrix.reconstruct": "_reconstruct",
    "dpmatrix.release_tables": "_release_tables",
    "dpmatrix.report": "_report",
    "dpmatrix.selection": "_selection",
    "dpmatrix.sizing": "_sizing",
    "dpmatrix.solvers": "_solvers",
    "dpmatrix.statement": "_statement",
    "dpmatrix.table_text": "_table_text",
    "dpmatrix.unit": "_unit",
    "dpmatrix.values": "_values",
    "dpmatrix.version": "_version",
    "dpmatrix.workflow": "_workflow",
    "dpmatrix.workload": "_workload",
    "dpmatrix.workload_spec": "_workload_spec",
}

# Private names that another package imports become public names (a private name never crosses a
# package): name -> (new name, the only files it is renamed in, or None for every Python file).
# Done by the script, not by hand, so that it applies to code merged after the first run.
NAME_RENAMES: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "_check_formats": ("check_formats", None),
    "_sibling": ("sibling_path", None),
    "_subset_masks": ("subset_masks", None),
    "_z": ("z_score", ("src/dpmatrix/_reconstruct/measurements.py", "src/dpmatrix/reconstruct/measurements.py",
                       "src/dpmatrix/_release_tables.py", "src/dpmatrix/release_tables.py")),
}

# the package root exports a function of the same name as these (old) modules
AMBIGUOUS = {"dpmatrix.measure", "dpmatrix.report", "dpmatrix.postprocess"}

SCAN_DIRS = ("src", "tests", "benchmarks", "docs", "dev")
SCAN_FILES = ("pyproject.toml", "README.md", "mkdocs.yml")
TEXT_SUFFIXES = {".py", ".md", ".toml", ".yml", ".yaml", ".txt", ".cfg", ".ini", ".json", ".sh", ".html"}
SKIP_PARTS = {".git", ".venv", "__pycache__", "site", "node_modules", ".pytest_cache", ".mypy_cache",
              ".ruff_cache"}
SKIP_PREFIXES = ("tests/data/",)  # persisted files written by earlier versions: never rewritten
SELF = "dev/privatize.py"
SKIP_FILES = {SELF, "tests/test_privatize.py"}  # the table and the tests of the rewrite name old paths

DOTTED = re.compile(r"(?<![\w.])dpmatrix(?:\.[A-Za-z_]\w*)+")
SLASHED = re.compile(r"(?<![\w.\-])dpmatrix(?:/[A-Za-z_]\w*)+(?:\.py)?")


# -- the mapping ---------------------------------------------------------------------------------
def map_dotted(name: str, renames: dict[str, str]) -> str:
    """``name`` with every renamed segment replaced (the parents of renamed nodes are public
    packages, never renamed, so looking up the old prefix is exact)."""
    segs = name.split(".")
    out = list(segs)
    for i in range(1, len(segs)):
        new = renames.get(".".join(segs[: i + 1]))
        if new is not None:
            out[i] = new
    return ".".join(out)


def tree_renames(src: Path) -> dict[str, str]:
    """What the rule renames in the tree as it is now (old dotted name -> new segment)."""
    found: dict[str, str] = {}

    def children(pkg_dir: Path):
        for p in sorted(pkg_dir.iterdir()):
            if p.is_dir() and (p / "__init__.py").exists():
                yield p.name, p, True
            elif p.suffix == ".py" and p.name != "__init__.py":
                yield p.stem, p, False

    def walk(pkg: str, pkg_dir: Path) -> None:
        for name, path, is_pkg in children(pkg_dir):
            full = f"{pkg}.{name}"
            if name.startswith("_") or full in PUBLIC_MODULES or full in PUBLIC_PACKAGES:
                if is_pkg and full in PUBLIC_PACKAGES:
                    walk(full, path)
                continue
            found[full] = "_" + name

    walk("dpmatrix", src / "dpmatrix")
    return found


# -- moving files --------------------------------------------------------------------------------
def _tracked(root: Path, path: Path) -> bool:
    r = subprocess.run(["git", "ls-files", "--error-unmatch", str(path.relative_to(root))], cwd=root,
                       capture_output=True)
    return r.returncode == 0


def _move(root: Path, old: Path, new: Path, apply: bool, log: list[str]) -> None:
    rel_old, rel_new = old.relative_to(root), new.relative_to(root)
    if new.exists():
        if old.is_dir() and new.is_dir():  # both: a branch merged later added files to the old folder
            for f in sorted(old.rglob("*")):
                if f.is_file() and "__pycache__" not in f.parts:
                    target = new / f.relative_to(old)
                    if target.exists():
                        log.append(f"CONFLICT {f.relative_to(root)} and {target.relative_to(root)} both exist: merge by hand")
                    else:
                        _move(root, f, target, apply, log)
            return
        log.append(f"CONFLICT {rel_old} and {rel_new} both exist: merge by hand")
        return
    log.append(f"move {rel_old} -> {rel_new}")
    if not apply:
        return
    new.parent.mkdir(parents=True, exist_ok=True)
    if _tracked(root, old) or (old.is_dir() and subprocess.run(
            ["git", "ls-files", str(rel_old)], cwd=root, capture_output=True, text=True).stdout.strip()):
        subprocess.run(["git", "mv", str(rel_old), str(rel_new)], cwd=root, check=True)
        if old.exists():  # untracked leftovers (caches) of a moved folder
            for f in sorted(old.rglob("*"), reverse=True):
                if f.is_file() and "__pycache__" not in f.parts:
                    _move(root, f, new / f.relative_to(old), apply, log)
    else:
        os.rename(old, new)


def move_modules(root: Path, renames: dict[str, str], apply: bool, log: list[str]) -> None:
    src = root / "src"
    for old, seg in sorted(renames.items()):
        parts = old.split(".")
        base = src.joinpath(*parts[:-1])
        for cand, target in ((base / parts[-1], base / seg), (base / f"{parts[-1]}.py", base / f"{seg}.py")):
            if cand.exists():
                _move(root, cand, target, apply, log)


# -- rewriting text ------------------------------------------------------------------------------
def _line_starts(text: str) -> list[int]:
    starts = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            starts.append(i + 1)
    return starts


def _module_of(rel: Path) -> tuple[str, bool] | None:
    """The dotted module of a file under src/ (and whether it is a package's ``__init__``)."""
    parts = rel.parts
    if len(parts) < 2 or parts[0] != "src" or rel.suffix != ".py":
        return None
    mod = list(parts[1:])
    mod[-1] = mod[-1][:-3]
    is_pkg = mod[-1] == "__init__"
    if is_pkg:
        mod = mod[:-1]
    return ".".join(mod), is_pkg


def _ast_edits(text: str, rel: Path, renames: dict[str, str]) -> list[tuple[int, int, str]]:
    """(start, end, replacement) edits for relative imports and ``from pkg import module``."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    starts = _line_starts(text)
    mod = _module_of(rel)
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            if mod is None:
                continue
            name, is_pkg = mod
            base = name.split(".") if is_pkg else name.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            # the file may sit at an old or a new path: its package's segments map like any name
            base_new = map_dotted(".".join(base), renames).split(".")
            target_old = ".".join(base + (node.module.split(".") if node.module else []))
            target_new = map_dotted(target_old, renames)
            if node.module:
                new_rel = target_new.split(".")[len(base_new):]
                if ".".join(new_rel) != node.module:
                    seg = text[starts[node.lineno - 1] + node.col_offset:]
                    m = re.match(r"from\s+(\.+)\s*" + re.escape(node.module).replace(r"\.", r"\s*\.\s*"), seg)
                    if m:
                        s = starts[node.lineno - 1] + node.col_offset
                        edits.append((s, s + m.end(), f"from {m.group(1)}{'.'.join(new_rel)}"))
            pkg_old = target_old
        else:
            if not node.module or not (node.module == "dpmatrix" or node.module.startswith("dpmatrix.")):
                continue
            pkg_old = node.module
        for alias in node.names:
            full = f"{pkg_old}.{alias.name}"
            seg = renames.get(full)
            if seg is None or not hasattr(alias, "lineno"):
                continue
            s = starts[alias.lineno - 1] + alias.col_offset
            e = starts[alias.end_lineno - 1] + alias.end_col_offset
            repl = f"{seg} as {alias.asname}" if alias.asname else f"{seg} as {alias.name}"
            edits.append((s, e, repl))
    return edits


def _string_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the *contents* of Python string literals that are one dotted name."""
    spans = []
    for m in re.finditer(r"""(['"])(dpmatrix(?:\.\w+)+)\1""", text):
        spans.append((m.start(2), m.end(2)))
    return spans


def _import_line(text: str, pos: int) -> bool:
    """Whether ``pos`` is in an import statement, also one written inside a string of code
    (``"def g():\\n    import dpmatrix.measure\\n"``)."""
    start = max(text.rfind("\n", 0, pos), text.rfind("\\n", 0, pos) + 1, text.rfind('"', 0, pos),
                text.rfind("'", 0, pos)) + 1
    line = text[start:pos].lstrip()
    return line.startswith(("import ", "from "))


def rename_names(text: str, rel: Path) -> str:
    """Apply ``NAME_RENAMES`` to a Python file (whole identifiers only)."""
    if rel.suffix != ".py":
        return text
    for old, (new, only) in NAME_RENAMES.items():
        if only is None or rel.as_posix() in only:
            text = re.sub(rf"(?<![\w.]){re.escape(old)}\b", new, text)
    return text


def rewrite_text(text: str, rel: Path, renames: dict[str, str], notes: list[str]) -> str:
    text = rename_names(text, rel)
    edits = _ast_edits(text, rel, renames) if rel.suffix == ".py" else []
    taken = [(s, e) for s, e, _ in edits]

    def free(s: int, e: int) -> bool:
        return all(e <= a or s >= b for a, b in taken)

    strings = set(_string_spans(text))
    for m in DOTTED.finditer(text):
        old = m.group(0)
        if m.end() < len(text) and text[m.end()] == "/":
            continue  # a file-format identifier such as "dpmatrix.release/2"
        if old.endswith(".py") and "/" in text[max(0, m.start() - 1):m.start()]:
            continue
        new = map_dotted(old, renames)
        if new == old or not free(m.start(), m.end()):
            continue
        if old in AMBIGUOUS:
            ok = (m.start(), m.end()) in strings or (rel.suffix == ".py" and _import_line(text, m.start()))
            if not ok:
                line = text.count("\n", 0, m.start()) + 1
                notes.append(f"{rel}:{line}: left '{old}' as it is (the function or the module?)")
                continue
        edits.append((m.start(), m.end(), new))
        taken.append((m.start(), m.end()))
    for m in SLASHED.finditer(text):
        old = m.group(0)
        if not free(m.start(), m.end()):
            continue
        suffix = ".py" if old.endswith(".py") else ""
        dotted = old[: len(old) - len(suffix)].replace("/", ".")
        new = map_dotted(dotted, renames).replace(".", "/") + suffix
        if new != old:
            edits.append((m.start(), m.end(), new))
            taken.append((m.start(), m.end()))
    if not edits:
        return text
    out = []
    pos = 0
    for s, e, r in sorted(edits):
        if s < pos:
            continue
        out.append(text[pos:s])
        out.append(r)
        pos = e
    out.append(text[pos:])
    return "".join(out)


def files_to_scan(root: Path):
    for d in SCAN_DIRS:
        base = root / d
        if not base.exists():
            continue
        for p in sorted(base.rglob("*")):
            rel = p.relative_to(root)
            if not p.is_file() or p.suffix not in TEXT_SUFFIXES or SKIP_PARTS & set(rel.parts):
                continue
            if rel.as_posix() in SKIP_FILES or rel.as_posix().startswith(SKIP_PREFIXES):
                continue
            yield p
    for f in SCAN_FILES:
        if (root / f).exists():
            yield root / f


def _sort_imports(root: Path, files: list[Path]) -> None:
    """Renamed modules sort differently (``_x`` first) and ``from p import _m as m`` goes on its
    own line: let ruff's isort rule (the project's linter) put the imports in order again."""
    exe = Path(sys.executable).parent / "ruff"
    ruff = str(exe) if exe.exists() else shutil.which("ruff")
    if not ruff or not files:
        print("ruff not found: run `ruff check --fix --select I src tests` yourself" if not ruff else "", end="")
        return
    for i in range(0, len(files), 200):
        subprocess.run([ruff, "check", "--fix", "--select", "I", "--quiet", *map(str, files[i:i + 200])], cwd=root)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--apply", action="store_true", help="move files and rewrite references")
    mode.add_argument("--check", action="store_true", help="exit 1 if anything is left to do")
    args = ap.parse_args(argv)
    root = args.root.resolve()
    unmerged = subprocess.run(["git", "ls-files", "-u"], cwd=root, capture_output=True, text=True).stdout.strip()
    if unmerged:
        print("unmerged paths (a merge in progress?): resolve them first, then run again", file=sys.stderr)
        return 2

    for path in files_to_scan(root):
        try:
            marked = re.search(r"^(<<<<<<<|>>>>>>>) ", path.read_text(encoding="utf-8"), re.MULTILINE)
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        if marked:
            print(f"{path.relative_to(root)} has merge conflict markers: resolve them first", file=sys.stderr)
            return 2

    log: list[str] = []
    found = tree_renames(root / "src")
    new_by_rule = {k: v for k, v in found.items() if k not in RENAMES}
    for k, v in sorted(new_by_rule.items()):
        log.append(f"NEW module {k} is not in RENAMES: renamed by the rule to {v} (add it to the table)")
    renames = {**RENAMES, **new_by_rule}
    move_modules(root, renames, args.apply, log)

    notes: list[str] = []
    changed = []
    for path in files_to_scan(root):
        rel = path.relative_to(root)
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        new = rewrite_text(text, rel, renames, notes)
        if new != text:
            changed.append(rel)
            if args.apply:
                path.write_text(new, encoding="utf-8")
    if args.apply:
        _sort_imports(root, [r for r in changed if r.suffix == ".py"])
    for line in log:
        print(line)
    for rel in changed:
        print(f"rewrite {rel}")
    for n in notes:
        print(f"note: {n}")
    moves = [x for x in log if x.startswith("move ")]
    conflicts = [x for x in log if x.startswith("CONFLICT")]
    print(f"{len(moves)} moves, {len(changed)} files rewritten, {len(new_by_rule)} new modules, "
          f"{len(conflicts)} conflicts, {len(notes)} notes ({'applied' if args.apply else 'dry run'})")
    if args.check:
        return 1 if (moves or changed or conflicts) else 0
    return 1 if conflicts else 0


if __name__ == "__main__":
    sys.exit(main())
