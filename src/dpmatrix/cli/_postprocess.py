"""``dpmatrix postprocess``: non-negative, consistent tables of an existing release, written to a
new folder (private-pgm; no data, no new noise, no privacy cost, the ledger untouched)."""

from __future__ import annotations

import argparse

from ._common import CLIError
from ._options import _add_quiet
from ._output import Out, warn_line


def cmd_postprocess(args: argparse.Namespace) -> int:
    from .._postprocess import postprocess_release
    from ..errors import DPMatrixError

    say = Out(args.quiet)
    options = {"method": args.method}
    if args.iters is not None:
        if args.iters < 1:
            raise CLIError(f"--iters must be at least 1, got {args.iters}")
        options["iters"] = args.iters
    say(f"post-processing {args.release} (its saved measurements only: no data, no new noise, no privacy cost)")
    try:
        manifest = postprocess_release(args.release, args.out, overwrite=args.overwrite,
                                       verify=not args.no_verify, progress=say.progress, **options)
    except DPMatrixError as exc:
        raise CLIError(str(exc)) from None
    fit = manifest["fit"]
    say(f"wrote {len(manifest['marginals'])} post-processed tables ({manifest['method']}) to {args.out}/: "
        "non-negative and consistent, but biased and without variances or intervals")
    say(f"fit: chi2 = {fit['chi2']:.6g} over {fit['noisy_values']} noisy values (the truth would give "
        f"about {fit['expected_at_truth']}; poor above {fit['poor_above']:.6g})")
    if fit.get("warning"):
        warn_line(fit["warning"])
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``postprocess`` command and its options, added to the ``dpmatrix`` parser's subcommands."""
    p = sub.add_parser(
        "postprocess", help="non-negative, consistent tables of an existing release (no data, no privacy cost)",
        description="Fit non-negative, mutually consistent tables to a release's saved noisy "
        "measurements with private-pgm and write them to a new folder: one Parquet dataset laid out "
        "like the release's, a manifest labelled post-processed and biased, and the fit's chi-square "
        "against its expectation (warned when poor). Reads the release only: no data, no new noise, "
        "no privacy cost, the ledger untouched. The release's own tables stay the unbiased ones with "
        "exact intervals.")
    p.add_argument("release", metavar="DIR", help="release folder")
    p.add_argument("--out", required=True, metavar="DIR2", help="folder to write (created; outside the release)")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier post-processed --out folder")
    p.add_argument("--method", choices=["auto", "graphical_model", "mixture"], default="auto",
                   help="graphical model (exact maximum-likelihood fit) when its junction tree is small "
                   "enough, else a mixture of products (default: auto)")
    p.add_argument("--iters", type=int, help="optimizer iterations (default: 1000 graphical model, 2000 mixture)")
    p.add_argument("--no-verify", action="store_true", help="skip the SHA-256 checks of the release's files")
    _add_quiet(p)
    p.set_defaults(func=cmd_postprocess)
