"""The documentation cannot drift: every code block of every page runs, and what it shows is
what it prints; the site builds with warnings as errors; the built page renders in Chromium.

Pages are ``docs/**/*.md`` (and ``docs/README.md``). Each page runs in its own temporary folder,
its blocks in order, its ```python blocks in one namespace:

* a fenced block with a ``title="NAME"`` that is not python or bash (```json title="D.json"```,
  ```csv title="survey.csv"```) is a file the reader is shown: it is written as ``NAME``;
* ```python blocks run statement by statement. A statement ending in ``# -> TEXT`` (or followed
  by a line ``# -> TEXT``) is checked:
  what it prints (for ``print(...)``) or the ``repr`` of its value must match ``TEXT``
  (doctest's ELLIPSIS and NORMALIZE_WHITESPACE: ``...`` stands for anything). A statement
  ending in ``# e.g. TEXT`` shows an *illustrative* value, one that depends on the privacy noise
  and changes on every run: it runs, its value is not compared — this explicit marker is the
  only way a shown value escapes the comparison (a ``# ->`` anywhere else fails the test).
  Blocks with ``>>>`` prompts are doctests;
* a ```text block titled ``Output`` right after a python block is that block's expected stdout
  (same matching rules);
* ```console blocks (```bash too) hold ``$ command`` lines, each followed by its expected output (nothing shown:
  nothing compared; same matching rules, on stdout, or on the ``dpmatrix: error:`` line when
  the command fails; the page's folder is removed from the paths printed). They run
  in bash with ``dpmatrix`` meaning ``python -m dpmatrix`` of this tree and a per-page ledger; a
  command fails the test unless it exits 0 or its shown output is a ``dpmatrix: error:`` line.
  Commands that install software or run for minutes (``NOT_RUN``) are not run here: the install
  commands are run from a fresh clone by ``.ci/run``.
"""

from __future__ import annotations

import ast
import contextlib
import doctest
import io
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md"))
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
NOT_RUN = (
    "python3 -m venv", ".venv/bin/pip install", "pip install", "bash dev/test.sh",
    ".venv/bin/mkdocs serve", "mkdocs serve", "python benchmarks/run.py", "git clone",
)  # fmt: skip

FENCE = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```[ \t]*$", re.S | re.M)


@dataclass(frozen=True)
class Block:
    lang: str
    title: str | None
    body: str
    line: int


def blocks(text: str) -> list[Block]:
    """The fenced code blocks of a Markdown page, in order (with their ``title="..."``)."""
    out = []
    for m in FENCE.finditer(text):
        title = re.search(r'title="([^"]*)"', m.group(2))
        out.append(Block(m.group(1), title.group(1) if title else None, m.group(3),
                         text.count("\n", 0, m.start()) + 1))
    return out


def matches(expected: str, got: str) -> bool:
    return doctest.OutputChecker().check_output(expected.strip() + "\n", got.strip() + "\n", FLAGS)


def run_python(block: Block, ns: dict, where: str) -> str:
    """Execute a python block statement by statement; check ``# ->``; return its stdout."""
    if ">>>" in block.body:
        test = doctest.DocTestParser().get_doctest(block.body, ns, where, where, block.line)
        out = io.StringIO()
        runner = doctest.DocTestRunner(optionflags=FLAGS)
        runner.run(test, out=out.write, clear_globs=False)
        assert runner.failures == 0, out.getvalue()
        return ""
    lines = block.body.splitlines()
    tree = ast.parse(block.body)
    stdout = io.StringIO()
    arrows = {i for i, line in enumerate(lines) if re.search(r"#\s*->", line)}
    for node in tree.body:
        rest = lines[node.end_lineno - 1][node.end_col_offset:]
        check = re.match(r"\s*#\s*->\s?(.*)$", rest)
        arrows.discard(node.end_lineno - 1)
        if not check and node.end_lineno < len(lines):  # the expected value on the next line
            check = re.match(r"\s*#\s*->\s?(.*)$", lines[node.end_lineno])
            arrows.discard(node.end_lineno)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            if isinstance(node, ast.Expr):
                value = eval(compile(ast.Expression(node.value), where, "eval", dont_inherit=True), ns)
            else:
                exec(compile(ast.Module([node], []), where, "exec", dont_inherit=True), ns)
                value = None
        stdout.write(buf.getvalue())
        if check:
            got = buf.getvalue() if buf.getvalue() else repr(value)
            src = ast.get_source_segment(block.body, node)
            assert matches(check.group(1), got), (
                f"{where}, line {block.line + node.lineno}: {src}\n"
                f"  shows: {check.group(1)}\n  gives: {got.strip()}")
    assert not arrows, (f"{where}: `# ->` not after a statement (lines "
                        f"{sorted(block.line + i + 1 for i in arrows)}): it would not be checked")
    return stdout.getvalue()


def commands(body: str) -> list[tuple[str, str]]:
    """``$ command`` lines (continued with a trailing backslash) and the output shown after each."""
    out: list[tuple[str, list[str]]] = []
    cont = False
    for line in body.splitlines():
        if cont:
            out[-1][0].append(line)
            cont = line.endswith("\\")
        elif line.startswith("$ "):
            out.append(([line[2:]], []))
            cont = line.endswith("\\")
        elif out:
            out[-1][1].append(line)
    return [("\n".join(c), "\n".join(o)) for c, o in out]


def shell_env(tmp: Path) -> dict:
    shim = tmp / ".bin"
    shim.mkdir(exist_ok=True)
    (shim / "dpmatrix").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m dpmatrix "$@"\n')
    (shim / "dpmatrix").chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = f"{shim}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    env["DPMATRIX_LEDGER"] = str(tmp / ".ledger.sqlite3")
    env["COLUMNS"] = "100"
    from dpmatrix._ledger import Ledger

    Ledger(env["DPMATRIX_LEDGER"])  # the page's own ledger exists before its first release
    return env


def run_bash(block: Block, tmp: Path, where: str) -> None:
    env = shell_env(tmp)
    cmds = commands(block.body)
    assert cmds, f"{where}: a ```console block without a `$ command` line"
    for cmd, shown in cmds:
        if cmd.startswith(NOT_RUN):
            continue
        r = subprocess.run(["bash", "-c", cmd], cwd=tmp, env=env, capture_output=True,
                           text=True, timeout=600)
        failing = shown.strip().startswith("dpmatrix: error:")
        assert (r.returncode != 0) == failing, f"{where}: $ {cmd}\n{r.stdout}\n{r.stderr}"
        if shown.strip():
            got = r.stdout
            for d in {str(tmp), str(tmp.resolve())}:  # paths shown relative to where you run
                got = got.replace(d + os.sep, "")
            if failing:  # the one-line error (progress and ledger lines also go to stderr)
                got = "\n".join(x for x in r.stderr.splitlines() if x.startswith("dpmatrix: error:"))
                for d in {str(tmp), str(tmp.resolve())}:
                    got = got.replace(d + os.sep, "")
            assert matches(shown, got), f"{where}: $ {cmd}\n  shows:\n{shown}\n  gives:\n{got}"


def run_page(page: Path, tmp: Path) -> int:
    """Run every block of a page in ``tmp``; the number of blocks run or written."""
    text = page.read_text()
    ns: dict = {"__name__": f"docs.{page.stem}"}
    last_stdout: str | None = None
    done = 0
    for b in blocks(text):
        where = f"{page.relative_to(ROOT)}:{b.line}"
        if b.lang == "python":
            last_stdout = run_python(b, ns, where)
        elif b.lang in ("console", "bash"):
            run_bash(b, tmp, where)
            last_stdout = None
        elif b.title == "Output":
            assert last_stdout is not None, f"{where}: an Output block not after a python block"
            assert matches(b.body, last_stdout), (
                f"{where}: shows\n{b.body}\n  gives\n{last_stdout}")
            last_stdout = None
        elif b.title:
            (tmp / b.title).parent.mkdir(parents=True, exist_ok=True)
            (tmp / b.title).write_text(b.body)
            last_stdout = None
        else:
            continue
        done += 1
    return done


def _marks(page: Path) -> list:
    # Spark starts a JVM and a local cluster (a minute on two cores): slow, but never skipped
    text = page.read_text()
    return [pytest.mark.slow] if '"spark"' in text or "--engine spark" in text else []


@pytest.mark.parametrize("page", [pytest.param(p, marks=_marks(p), id=str(p.relative_to(DOCS))) for p in PAGES])
def test_page_blocks_run_as_shown(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DPMATRIX_LEDGER", str(tmp_path / ".ledger.sqlite3"))
    monkeypatch.syspath_prepend(str(ROOT / "src"))
    from dpmatrix._ledger import Ledger

    Ledger(tmp_path / ".ledger.sqlite3")  # dm.publish in a python block charges the page's ledger
    run_page(page, tmp_path)


def test_every_runnable_block_has_a_known_language():
    """A block in a language the runner does not know would escape the test silently."""
    allowed = {"python", "console", "bash", "text", "json", "csv", "toml", "yaml", ""}
    for page in PAGES:
        for b in blocks(page.read_text()):
            assert b.lang in allowed, f"{page}:{b.line}: ```{b.lang} is neither run nor allowed"
            if b.lang in ("json", "csv", "toml", "yaml") and not b.title:
                pytest.fail(f"{page}:{b.line}: a ```{b.lang} block needs title=\"FILE\" (it is "
                            "written and used by the page's commands)")
