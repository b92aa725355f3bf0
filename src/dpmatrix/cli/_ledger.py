"""``dpmatrix ledger``: the privacy-budget ledger: ``init`` a new one, ``show`` totals per
dataset, ``set-cap`` a dataset's cap, ``verify`` the hash chain and the releases charged to it."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from ..errors import DPMatrixError
from ._common import CLIError, _report_delta


def cmd_ledger_show(args: argparse.Namespace) -> int:
    import pandas as pd

    from .._ledger import Ledger
    from .._privacy import DISCRETE_ZCDP, stated_epsilon

    delta = _report_delta(args)
    led = Ledger(args.ledger, create=False)
    rows = led.datasets()
    print(f"ledger {led.path}: {len(rows)} dataset(s)")
    for d in rows:
        # a total of rho over releases of any noise: stated by the zCDP conversion, the function
        # (and the accounting) that states each discrete release and converts (epsilon, delta) asks
        eps = stated_epsilon(2 * d.rho, delta, DISCRETE_ZCDP) if d.rho > 0 else 0.0
        cap = f"cap rho {d.rho_cap:.6g}" if d.rho_cap is not None else "no rho cap"
        ecap = f", cap pure epsilon {d.epsilon_cap:.6g}" if d.epsilon_cap is not None else ""
        others = [n for n in d.names if n != d.dataset]
        linked = f"; same data as {', '.join(map(repr, others))} (one total)" if others else ""
        print(f"{d.dataset}: {d.releases} release(s); rho = {d.rho:.6g} (zCDP, sum; epsilon = {eps:.6g} "
              f"at delta = {delta:.3g}); pure epsilon = {d.epsilon:.6g} (sum); {cap}{ecap}{linked}")
    if args.all:
        print(pd.DataFrame(led.rows()).to_string(index=False) if led.rows() else "(no releases)")
    return 0


def cmd_ledger_set_cap(args: argparse.Namespace) -> int:
    from .._ledger import Ledger

    if args.rho is None and args.epsilon is None:
        raise CLIError("give --rho and/or --epsilon")
    for n in ("rho", "epsilon"):
        v = getattr(args, n)
        if v is not None and not (math.isfinite(v) and v >= 0):
            raise CLIError(f"--{n} must be a non-negative number, got {v!r}")
    led = Ledger(args.ledger)
    fp = led.fingerprint(args.data) if args.data else None
    led.set_cap(args.dataset, rho=args.rho, epsilon=args.epsilon, fingerprint=fp)
    s = led.spent(args.dataset)
    print(f"dataset {s.dataset!r}: cap rho = {s.rho_cap}, pure epsilon = {s.epsilon_cap}; spent so far "
          f"rho = {s.rho:.6g}, pure epsilon = {s.epsilon:.6g} in {s.releases} release(s)")
    return 0


def cmd_ledger_init(args: argparse.Namespace) -> int:
    from .._ledger import Ledger, default_ledger_path

    path = args.ledger or default_ledger_path()
    if Path(path).exists():
        raise CLIError(f"the ledger {str(path)!r} exists already; it keeps its history (nothing was changed)")
    led = Ledger.create(path)
    print(f"created an empty privacy-budget ledger {led.path} (id {led.id})")
    return 0


def cmd_ledger_verify(args: argparse.Namespace) -> int:
    """Check the ledger's hash chain, then every release folder given against it."""
    from .._jsonfile import loads_strict
    from .._ledger import Ledger
    from ..release import MANIFEST, verify_files

    problems: list[str] = []
    anchors = []
    for folder in args.releases:
        try:
            verify_files(folder)
            manifest = loads_strict((Path(folder) / MANIFEST).read_text(encoding="utf-8"), CLIError, MANIFEST)
        except (DPMatrixError, OSError) as exc:
            problems.append(f"{folder}: {exc}")
            continue
        anchor = manifest.get("ledger") if isinstance(manifest, dict) else None
        if not isinstance(anchor, dict) or "ledger" not in anchor:
            problems.append(f"{folder}: the release is not in any ledger")
            continue
        anchors.append((folder, anchor))
    path = args.ledger or (anchors[0][1].get("path") if anchors else None)
    led = Ledger(path, create=False)  # missing where a release points to it: an error
    for p in led.verify():
        problems.append(f"ledger {led.path}: {p}")
    for folder, anchor in anchors:
        problems += [f"{folder}: {p.what}" for p in led.verify_anchor(anchor, str(folder))]
    for p in problems:
        print(p)
    if problems:
        raise CLIError(f"the ledger {str(led.path)!r} failed verification: {len(problems)} problem(s), "
                       f"first: {problems[0]}")
    print(f"ledger {led.path}: hash chain intact ({led.head()[0]} entries)"
          + (f"; {len(anchors)} release(s) match their entries" if anchors else ""))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """The ``ledger`` command and its options, added to the ``dpmatrix`` parser's subcommands."""
    led = sub.add_parser("ledger", help="the privacy-budget ledger: show spends, set a dataset's cap",
                         description="Every release is charged to a ledger before any noise is drawn "
                         "(default file: $DPMATRIX_LEDGER or ~/.local/share/dpmatrix/_ledger.sqlite3).")
    lsub = led.add_subparsers(dest="ledger_command", required=True, metavar="ACTION")
    ls = lsub.add_parser("show", help="totals per dataset (and every spend with --all)")
    ls.add_argument("--ledger", metavar="PATH", help="ledger file")
    ls.add_argument("--all", action="store_true", help="also list every release")
    ls.add_argument("--delta", type=float, help="delta at which the rho totals are shown as epsilon (default 1e-9)")
    ls.set_defaults(func=cmd_ledger_show)
    lc = lsub.add_parser("set-cap", help="set a dataset's total budget (releases beyond it are refused)")
    lc.add_argument("dataset", metavar="NAME", help="dataset name (as given to release --dataset)")
    lc.add_argument("--rho", type=float, help="cap on the total rho (zCDP)")
    lc.add_argument("--epsilon", type=float, help="cap on the total pure epsilon")
    lc.add_argument("--data", metavar="FILE",
                    help="also bind this data file's content to NAME: the cap applies to these bytes under any name")
    lc.add_argument("--ledger", metavar="PATH", help="ledger file")
    lc.set_defaults(func=cmd_ledger_set_cap)
    li = lsub.add_parser("init", help="create a new, empty ledger (needed once when $DPMATRIX_LEDGER names it)")
    li.add_argument("--ledger", metavar="PATH", help="ledger file")
    li.set_defaults(func=cmd_ledger_init)
    lv = lsub.add_parser("verify", help="check the ledger's hash chain and the releases charged to it",
                         description="Recompute the ledger's hash chain (edited or deleted entries) and "
                         "check each RELEASE_DIR's recorded entry (a truncated, replaced or recreated ledger).")
    lv.add_argument("releases", nargs="*", metavar="RELEASE_DIR", help="release folders to check against the ledger")
    lv.add_argument("--ledger", metavar="PATH", help="ledger file (default: the one the first release names)")
    lv.set_defaults(func=cmd_ledger_verify)
    return lsub
