"""``dpmatrix ledger``: the privacy-budget ledger: ``show`` totals per dataset, ``set-cap`` a
dataset's cap."""

from __future__ import annotations

import argparse
import math

from ._common import CLIError, _report_delta


def cmd_ledger_show(args: argparse.Namespace) -> int:
    import pandas as pd

    from ..ledger import Ledger
    from ..privacy import DISCRETE_ZCDP, stated_epsilon

    delta = _report_delta(args)
    led = Ledger(args.ledger)
    rows = led.datasets()
    print(f"ledger {led.path}: {len(rows)} dataset(s)")
    for d in rows:
        # a total of rho over releases of any noise: stated by the zCDP conversion, the function
        # (and the accounting) that states each discrete release and converts (epsilon, delta) asks
        eps = stated_epsilon(2 * d.rho, delta, DISCRETE_ZCDP) if d.rho > 0 else 0.0
        cap = f"cap rho {d.rho_cap:.6g}" if d.rho_cap is not None else "no rho cap"
        ecap = f", cap pure epsilon {d.epsilon_cap:.6g}" if d.epsilon_cap is not None else ""
        print(f"{d.dataset}: {d.releases} release(s); rho = {d.rho:.6g} (zCDP, sum; epsilon = {eps:.6g} "
              f"at delta = {delta:.3g}); pure epsilon = {d.epsilon:.6g} (sum); {cap}{ecap}")
    if args.all:
        print(pd.DataFrame(led.rows()).to_string(index=False) if led.rows() else "(no releases)")
    return 0


def cmd_ledger_set_cap(args: argparse.Namespace) -> int:
    from ..ledger import Ledger

    if args.rho is None and args.epsilon is None:
        raise CLIError("give --rho and/or --epsilon")
    for n in ("rho", "epsilon"):
        v = getattr(args, n)
        if v is not None and not (math.isfinite(v) and v >= 0):
            raise CLIError(f"--{n} must be a non-negative number, got {v!r}")
    led = Ledger(args.ledger)
    led.set_cap(args.dataset, rho=args.rho, epsilon=args.epsilon)
    s = led.spent(args.dataset)
    print(f"dataset {s.dataset!r}: cap rho = {s.rho_cap}, pure epsilon = {s.epsilon_cap}; spent so far "
          f"rho = {s.rho:.6g}, pure epsilon = {s.epsilon:.6g} in {s.releases} release(s)")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """The ``ledger`` command and its options, added to the ``dpmatrix`` parser's subcommands."""
    led = sub.add_parser("ledger", help="the privacy-budget ledger: show spends, set a dataset's cap",
                         description="Every release is charged to a ledger before any noise is drawn "
                         "(default file: $DPMATRIX_LEDGER or ~/.local/share/dpmatrix/ledger.sqlite3).")
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
    lc.add_argument("--ledger", metavar="PATH", help="ledger file")
    lc.set_defaults(func=cmd_ledger_set_cap)
    return lsub
