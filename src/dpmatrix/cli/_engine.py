"""The data engine of ``release``: DuckDB, NumPy (pandas) or Spark opened from the options, and
the counting progress bar around it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..domain import Domain
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


def _na_values(text: str | None) -> tuple[str, ...]:
    """``--na-values NA,?``: the markers, comma separated (blanks around them ignored)."""
    return tuple(dict.fromkeys(t.strip() for t in (text or "").split(",") if t.strip()))


def _missing(text: str | None) -> str | dict[str, str] | None:
    """``--missing category`` or ``--missing col=policy,...`` (policies of domain.MISSING_POLICIES)."""
    from ..domain import MISSING_POLICIES

    if not text:
        return None
    text = text.strip()
    if "=" not in text:
        if text not in MISSING_POLICIES:
            raise CLIError(f"--missing must be one of {', '.join(MISSING_POLICIES)} or col=policy,..., got {text!r}")
        return text
    out: dict[str, str] = {}
    for part in text.split(","):
        col, eq, pol = part.partition("=")
        col, pol = col.strip(), pol.strip()
        if not eq or not col or pol not in MISSING_POLICIES:
            raise CLIError(f"--missing: bad entry {part!r}; write col=policy with policy in {', '.join(MISSING_POLICIES)}")
        out[col] = pol
    return out


def _open_engine(args: argparse.Namespace, domain: Domain, say: Out, temp_directory: Path | None = None,
                 attributes=None):
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
        if attributes is not None and len(set(attributes)) < len(domain):
            from ..engines.projected import ProjectedEngine, subdomain

            sub, pos = subdomain(domain, attributes)
            if isinstance(policy, dict):
                policy = {k: v for k, v in policy.items() if k in sub}
            return ProjectedEngine(_open_spark_engine(args, sub, policy, say), domain, pos)
        return _open_spark_engine(args, domain, policy, say)
    fmt = detect_format(args.data, args.data_format)
    csv_options = {"delim": args.delimiter} if args.delimiter else None
    if args.delimiter and fmt != "csv":
        raise CLIError("--delimiter applies to CSV files only")
    encoding = getattr(args, "encoding", "auto")
    na_values = _na_values(getattr(args, "na_values", None))
    say.note(f"reading {args.data} ({fmt}, encoding {encoding}) with {args.engine} ...")
    if args.engine == "duckdb":
        return engine_for(
            args.data, domain, encoding=encoding, format=fmt, on_unknown=policy,
            csv_options=csv_options, memory_limit=args.memory_limit, temp_directory=temp_directory,
            na_values=na_values, attributes=attributes,
        )  # fmt: skip
    # in-memory engine: the whole file is loaded with pandas (small data only)
    try:
        if fmt == "csv":
            raw = read_csv_text(args.data, domain, delimiter=args.delimiter)
        else:
            raw = pd.read_parquet(args.data)
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read {args.data!r}: {exc}") from None
    return engine_for(raw, domain, encoding=encoding, on_unknown=policy, na_values=na_values,
                      attributes=attributes)


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
    return SparkEngine(
        args.data, domain, encoding="raw", format=fmt, on_unknown=policy, master=args.spark_master,
        conf=conf, csv_options={"sep": args.delimiter} if args.delimiter else None,
        na_values=_na_values(getattr(args, "na_values", None)),
    )  # fmt: skip


class CountingBar:
    """Wraps a data engine to show a "counting" progress bar (marginal tables counted from the
    data) next to the "measuring" bar of :func:`dpmatrix.measure`."""

    def __init__(self, engine: Any, plan: Any, enabled: bool):
        from tqdm.auto import tqdm

        from ..engines import maximal_sets

        if hasattr(plan, "closure"):
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
