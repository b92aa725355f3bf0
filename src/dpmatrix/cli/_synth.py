"""``dpmatrix synth``: synthetic records from a release folder (private-pgm; no data, no privacy
cost)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._common import CLIError, check_out_file
from ._options import _add_quiet
from ._output import Out


def cmd_synth(args: argparse.Namespace) -> int:
    import numpy as np

    from .._postprocess import postprocess
    from ..release import load_release

    say = Out(args.quiet)
    if args.seed is not None:
        raise CLIError("--seed means seeded, NOT private noise (dpmatrix release/demo); the seed of "
                       "synth's record sampler is --sample-seed (post-processing: no privacy impact)")
    if args.rows is not None and args.rows < 1:
        raise CLIError(f"--rows must be at least 1, got {args.rows}")
    check_out_file(args.out, args.overwrite)
    out = Path(args.out)
    rel = load_release(args.release)
    pp = postprocess(rel.measurements, method=args.method, progress=say.progress)
    df = pp.synthetic(args.rows, rng=np.random.default_rng(args.sample_seed))
    if out.suffix.lower() == ".parquet":
        df.to_parquet(out, index=False)
    else:
        from .._csv_cells import escape_frame

        escape_frame(df).to_csv(out, index=False)  # labels made from data: no spreadsheet formulas
    say(f"wrote {len(df)} synthetic records ({pp.method}, fitted to the release's measurements) to {out}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``synth`` command and its options, added to the ``dpmatrix`` parser's subcommands."""
    y = sub.add_parser("synth", help="synthetic records from a release folder (private-pgm; no data, no privacy cost)",
                       description="Fit a distribution to a release's noisy measurements with private-pgm "
                       "(non-negative, consistent) and write records drawn from it, in the domain's labels.")
    y.add_argument("release", metavar="RELEASE_DIR", help="release folder")
    y.add_argument("--rows", type=int, help="number of records (default: the estimated total)")
    y.add_argument("--out", required=True, metavar="FILE", help="CSV (or .parquet) file to write")
    y.add_argument("--method", choices=["auto", "graphical_model", "mixture"], default="auto",
                   help="graphical model (exact fit) when its junction tree is small enough, else a "
                   "mixture of products (default: auto)")
    y.add_argument("--sample-seed", type=int, metavar="N",
                   help="seed of the record sampler (reproducible records; post-processing, so no privacy impact)")
    y.add_argument("--seed", type=int, help=argparse.SUPPRESS)  # one meaning across commands: refused here
    y.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    _add_quiet(y)
    y.set_defaults(func=cmd_synth)
