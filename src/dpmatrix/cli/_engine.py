"""The data engine of ``release``: DuckDB, NumPy (pandas) or Spark opened from the options, and
the counting progress bar around it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..domain import Domain
from ..protocols import HasClosure
from ._common import CLIError
from ._output import Out


def _on_unknown(text: str) -> str | dict[str, str]:
    from ..encode import POLICIES

    text = text.strip()
    if "=" not in text:
        if text not in POLICIES:
            raise CLIError(f"--on-unknown must be one of {', '.join(POLICIES)} or col=policy,..., got {text!r}")
        return text
    out: dict[str, str] = {}
    for part in text.split(","):
        col, eq, pol = part.partition("=")
        col, pol = col.strip(), pol.strip()
        if not eq or not col or pol not in POLICIES:
            raise CLIError(f"--on-unknown: bad entry {part!r}; write col=policy with policy in {', '.join(POLICIES)}")
        out[col] = pol
    return out


def _open_engine(args: argparse.Namespace, domain: Domain, say: Out, temp_directory: Path | None = None):
    import pandas as pd

    from ..encode import read_csv_text
    from ..engines import engine_for
    from ..engines.duckdb_engine import detect_format
    from ..errors import DataError

    path = Path(args.data)
    spark = args.engine == "spark"  # paths, URIs (hdfs://, s3a://) and table names: Spark checks
    if not spark and not any(ch in args.data for ch in "*?[") and not path.exists():
        raise CLIError(f"data file {args.data!r} does not exist")
    policy = _on_unknown(args.on_unknown)
    if args.engine == "spark":
        return _open_spark_engine(args, domain, policy, say)
    fmt = detect_format(args.data, args.data_format)
    csv_options = {"delim": args.delimiter} if args.delimiter else None
    if args.delimiter and fmt != "csv":
        raise CLIError("--delimiter applies to CSV files only")
    encoding = getattr(args, "encoding", "auto")
    say.note(f"reading {args.data} ({fmt}, encoding {encoding}) with {args.engine} ...")
    if args.engine == "duckdb":
        return engine_for(
            args.data, domain, encoding=encoding, format=fmt, on_unknown=policy,
            csv_options=csv_options, memory_limit=args.memory_limit, temp_directory=temp_directory,
        )  # fmt: skip
    # in-memory engine: the whole file is loaded with pandas (small data only)
    try:
        if fmt == "csv":
            raw = read_csv_text(args.data, domain, delimiter=args.delimiter)
        else:
            raw = pd.read_parquet(args.data)
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read {args.data!r}: {exc}") from None
    return engine_for(raw, domain, encoding=encoding, on_unknown=policy)


def _open_spark_engine(args: argparse.Namespace, domain: Domain, policy, say: Out):
    from ..engines.spark_engine import SparkEngine, detect_spark_format

    conf: dict[str, str] = {}
    for item in args.spark_conf or []:
        k, eq, v = item.partition("=")
        if not eq or not k.strip():
            raise CLIError(f"--spark-conf: bad entry {item!r}; write key=value, e.g. spark.executor.memory=8g")
        conf[k.strip()] = v.strip()
    fmt = detect_spark_format(args.data, args.data_format)
    if args.delimiter and fmt != "csv":
        raise CLIError("--delimiter applies to CSV files only")
    say.note(f"reading {args.data} ({fmt}) with spark ...")  # the master is not echoed or recorded
    # Spark reads raw values unless the file is declared to hold codes (it has no "auto" reading)
    encoding = "codes" if getattr(args, "encoding", "auto") == "codes" else "raw"
    return SparkEngine(
        args.data, domain, encoding=encoding, format=fmt, on_unknown=policy, master=args.spark_master,
        conf=conf, csv_options={"sep": args.delimiter} if args.delimiter else None,
    )  # fmt: skip


class CountingBar:
    """Wraps a data engine to show a "counting" progress bar (marginal tables counted from the
    data) next to the "measuring" bar of :func:`dpmatrix.measure`."""

    def __init__(self, engine: Any, plan: Any, enabled: bool):
        from tqdm.auto import tqdm

        from ..engines import maximal_sets

        if isinstance(plan, HasClosure):
            measured = [s for s, m in zip(plan.closure.sets, plan.measured) if m]
        else:  # a plan that lists its mechanisms
            measured = list({m.attrs for m in plan.mechanisms()[1]})
        self._engine = engine
        self.bar = tqdm(total=len(maximal_sets(measured)), desc="counting", unit="marginal",
                        disable=not enabled)  # fmt: skip

    @property
    def domain(self) -> Domain:
        return self._engine.domain

    @property
    def n_records(self) -> int:
        return self._engine.n_records

    @property
    def preferred_batch(self) -> int | None:
        """The wrapped engine's batch size (``measure.counting.count_batch``)."""
        return getattr(self._engine, "preferred_batch", None)

    def count(self, attr_sets, progress: bool = False):
        out = self._engine.count(attr_sets)
        self.bar.update(len(out))
        return out

    def close(self) -> None:
        self.bar.close()
        close = getattr(self._engine, "close", None)
        if close is not None:
            close()
