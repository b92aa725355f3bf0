"""Child-process body of the concurrent-ledger test, in a module of its own: a ``spawn``ed child
imports the module of its target, and this one imports only :mod:`dpmatrix._ledger` (not the
command line, pandas and numpy that ``_support`` pulls in), so each child starts in about half the
time."""

from __future__ import annotations


def reserve_in_process(path, barrier, results, i):
    """Reserve rho 0.6 against a shared cap once both children are ready; report ok/refused."""
    import time

    from dpmatrix._ledger import BudgetExceededError, Ledger

    led = Ledger(path)
    barrier.wait()
    try:
        with led.reserve("shared", "fp", rho=0.6):
            time.sleep(0.2)
        results.put((i, "ok"))
    except BudgetExceededError:
        results.put((i, "refused"))
