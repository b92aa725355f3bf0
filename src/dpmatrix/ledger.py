"""A privacy-budget ledger: every release of a dataset is charged before any noise is drawn.

Storage: one SQLite file (stdlib :mod:`sqlite3`). Location, first that is set:

1. an explicit path (``Ledger(path)``, ``dpmatrix ... --ledger PATH``);
2. the environment variable ``DPMATRIX_LEDGER``;
3. ``$XDG_DATA_HOME/dpmatrix/ledger.sqlite3`` (``~/.local/share/dpmatrix/ledger.sqlite3`` when
   ``XDG_DATA_HOME`` is unset) — a per-user data file, as the XDG base-directory spec intends for
   state that must outlive a session.

The file is created with mode 0600: it holds the fingerprint key.

Accounting. Each release is one row of ``spends``: dataset name, content
fingerprint, ρ (zCDP) and ε (pure DP, for pure-DP mechanisms), status. A release first
*reserves* its spend in a ``BEGIN IMMEDIATE`` transaction that reads the total so far, compares it
with the cap and inserts the row — SQLite's write lock makes that read-compare-insert atomic
across processes, so two concurrent releases cannot both pass a cap they jointly exceed. The row
is ``reserved`` while the release runs, ``completed`` when it was written, ``failed`` when it
stopped with an error. A failed or crashed release keeps its charge: noise may already have been
drawn (and a killed run's leftover measurements hold it), so the budget counts as spent.

Composition: zCDP composes by adding ρ (Bun & Steinke 2016, Lemma 2.3), pure ε-DP by adding ε
(Dwork & Roth, Theorem 3.16); the two totals are kept apart and shown with the (ε, δ) the ρ total
gives at δ (:func:`dpmatrix.privacy.epsilon_from_zcdp`). The charge of a dataset is the sum over
its name AND over every row with the same fingerprint, so the same data released under another
name still counts against the cap.

Fingerprint. ``HMAC-SHA256(key, bytes of the data file(s))`` with a 256-bit key drawn from
:func:`secrets.token_bytes` when the ledger is created and stored only in the ledger. HMAC with a
secret key is a pseudorandom function (Bellare, Canetti, Krawczyk 1996): to anyone without the key
its output is indistinguishable from random, so a fingerprint reveals nothing about the data —
not even whether two ledgers hold the same dataset. Only a holder of the ledger file (who has the
key) can test whether a candidate file is the one recorded, which is the purpose; the ledger is
therefore as sensitive as a list of which files were released, not as the data.
"""

from __future__ import annotations

import datetime as _dt
import glob as _glob
import hashlib
import hmac
import math
import os
import secrets
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import BudgetError, DPMatrixError

__all__ = ["Ledger", "LedgerError", "BudgetExceededError", "Reservation", "default_ledger_path"]

ENV = "DPMATRIX_LEDGER"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS caps (
    dataset TEXT PRIMARY KEY,
    rho_cap REAL,
    epsilon_cap REAL
);
CREATE TABLE IF NOT EXISTS spends (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    rho REAL NOT NULL DEFAULT 0,
    epsilon REAL NOT NULL DEFAULT 0,
    status TEXT NOT NULL CHECK (status IN ('reserved', 'completed', 'failed')),
    started TEXT NOT NULL,
    finished TEXT,
    note TEXT
);
CREATE INDEX IF NOT EXISTS spends_dataset ON spends (dataset);
CREATE INDEX IF NOT EXISTS spends_fingerprint ON spends (fingerprint);
"""


class LedgerError(DPMatrixError, ValueError):
    """The ledger cannot be opened or used (bad path, corrupt file, bad cap)."""


class BudgetExceededError(BudgetError):
    """A release would take a dataset's total spend past its cap."""


def default_ledger_path() -> Path:
    """``$DPMATRIX_LEDGER``, else ``$XDG_DATA_HOME/dpmatrix/ledger.sqlite3`` (XDG default
    ``~/.local/share``)."""
    env = os.environ.get(ENV)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "dpmatrix" / "ledger.sqlite3"


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _amount(name: str, value: Any, allow_zero: bool = True) -> float:
    if isinstance(value, (str, bytes, bool)) or value is None:
        raise LedgerError(f"{name} must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise LedgerError(f"{name} must be a {'non-negative' if allow_zero else 'positive'} finite number, got {value!r}")
    return v


@dataclass(frozen=True)
class Spend:
    """Totals charged to a dataset (by name, and by fingerprint when one is given)."""

    dataset: str
    rho: float
    epsilon: float
    releases: int
    rho_cap: float | None
    epsilon_cap: float | None


@dataclass(frozen=True)
class Reservation:
    """One reserved spend (a row of ``spends``); see :meth:`Ledger.reserve`."""

    ledger: Ledger
    id: int
    dataset: str
    rho: float
    epsilon: float

    def complete(self) -> None:
        """Mark the release written."""
        self.ledger._finish(self.id, "completed")

    def fail(self) -> None:
        """Mark the release stopped; its spend stays charged."""
        self.ledger._finish(self.id, "failed")


class Ledger:
    """A privacy-budget ledger in a SQLite file (see the module docstring).

    Parameters
    ----------
    path : str or Path, optional
        The ledger file (created with its folder if missing); default
        :func:`default_ledger_path`.

    Examples
    --------
    >>> import tempfile, os
    >>> led = Ledger(os.path.join(tempfile.mkdtemp(), "l.sqlite3"))
    >>> led.set_cap("census", rho=1.0)
    >>> with led.reserve("census", "fp", rho=0.4):
    ...     pass  # measure and write the release here
    >>> led.spent("census").rho
    0.4
    """

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path).expanduser() if path is not None else default_ledger_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not self.path.exists():
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
                os.close(fd)
        except FileExistsError:
            pass
        except OSError as exc:
            raise LedgerError(f"cannot create the ledger {str(self.path)!r}: {exc.strerror or exc}") from None
        if self.path.is_dir():
            raise LedgerError(f"the ledger {str(self.path)!r} is a folder; give a file path")
        try:
            with self._connect() as con:
                con.executescript(_SCHEMA)
                con.execute("BEGIN IMMEDIATE")
                row = con.execute("SELECT value FROM meta WHERE name = 'hmac_key'").fetchone()
                if row is None:
                    con.execute("INSERT INTO meta VALUES ('hmac_key', ?)", (secrets.token_bytes(32),))
                con.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"{str(self.path)!r} is not a usable dpmatrix ledger: {exc}") from None

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE); a generous timeout
        # makes concurrent writers queue instead of failing
        con = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
        try:
            yield con
        finally:
            con.close()

    # -- fingerprints ----------------------------------------------------------------------------
    def _key(self) -> bytes:
        with self._connect() as con:
            return bytes(con.execute("SELECT value FROM meta WHERE name = 'hmac_key'").fetchone()[0])

    def fingerprint(self, data: str | Path | bytes) -> str:
        """``HMAC-SHA256(ledger key, content)`` in hex: of ``bytes``, of a file, or of every file a
        glob pattern matches (sorted; each file's name and size are mixed in so that splitting
        the same bytes differently gives another fingerprint).

        Parameters
        ----------
        data : bytes, str or Path

        Returns
        -------
        str
        """
        mac = hmac.new(self._key(), digestmod=hashlib.sha256)
        if isinstance(data, bytes):
            mac.update(data)
            return mac.hexdigest()
        p = str(data)
        paths = sorted(_glob.glob(p)) if any(ch in p for ch in "*?[") else [p]
        if not paths:
            raise LedgerError(f"no data file matches {p!r}")
        for f in paths:
            try:
                mac.update(f"{os.path.getsize(f)}\0".encode())
                with open(f, "rb") as fh:
                    for block in iter(lambda: fh.read(1 << 20), b""):
                        mac.update(block)
            except OSError as exc:
                raise LedgerError(f"cannot read {f!r} to fingerprint it: {exc.strerror or exc}") from None
        return mac.hexdigest()

    # -- caps and totals -------------------------------------------------------------------------
    def set_cap(self, dataset: str, *, rho: float | None = None, epsilon: float | None = None) -> None:
        """Set (replace) the cap of ``dataset``: total ρ (zCDP) and/or total pure ε.

        Parameters
        ----------
        dataset : str
        rho, epsilon : float, optional
            At least one; a missing one means no cap of that kind.
        """
        dataset = _name(dataset)
        if rho is None and epsilon is None:
            raise LedgerError("set_cap needs rho= and/or epsilon=")
        r = None if rho is None else _amount("rho cap", rho)
        e = None if epsilon is None else _amount("epsilon cap", epsilon)
        with self._connect() as con:
            con.execute("BEGIN IMMEDIATE")
            con.execute(
                "INSERT INTO caps VALUES (?, ?, ?) ON CONFLICT(dataset) DO UPDATE SET "
                "rho_cap = excluded.rho_cap, epsilon_cap = excluded.epsilon_cap",
                (dataset, r, e),
            )
            con.execute("COMMIT")

    @staticmethod
    def _totals(con: sqlite3.Connection, dataset: str, fingerprint: str | None) -> tuple[float, float, int]:
        row = con.execute(
            "SELECT COALESCE(SUM(rho), 0), COALESCE(SUM(epsilon), 0), COUNT(*) FROM spends "
            "WHERE dataset = ? OR fingerprint = ?",
            (dataset, fingerprint if fingerprint is not None else "\0none"),
        ).fetchone()
        return float(row[0]), float(row[1]), int(row[2])

    @staticmethod
    def _caps(con: sqlite3.Connection, dataset: str) -> tuple[float | None, float | None]:
        row = con.execute("SELECT rho_cap, epsilon_cap FROM caps WHERE dataset = ?", (dataset,)).fetchone()
        return (None, None) if row is None else (row[0], row[1])

    def spent(self, dataset: str, fingerprint: str | None = None) -> Spend:
        """Totals charged to ``dataset`` (and to ``fingerprint`` under any name), every status."""
        dataset = _name(dataset)
        with self._connect() as con:
            rho, eps, n = self._totals(con, dataset, fingerprint)
            rc, ec = self._caps(con, dataset)
        return Spend(dataset, rho, eps, n, rc, ec)

    def rows(self) -> list[dict[str, Any]]:
        """Every spend, oldest first (fingerprints shortened to 12 hex digits)."""
        with self._connect() as con:
            cur = con.execute(
                "SELECT id, dataset, substr(fingerprint, 1, 12) AS fingerprint, rho, epsilon, status, started, "
                "finished, note FROM spends ORDER BY id"
            )
            cols = [c[0] for c in cur.description]
            return [dict(zip(cols, r)) for r in cur.fetchall()]

    def datasets(self) -> list[Spend]:
        """Totals of every dataset with a cap or a spend."""
        with self._connect() as con:
            names = [r[0] for r in con.execute("SELECT dataset FROM caps UNION SELECT dataset FROM spends ORDER BY 1")]
        return [self.spent(n) for n in names]

    # -- reservations ----------------------------------------------------------------------------
    def _reserve(self, dataset: str, fingerprint: str, rho: float, epsilon: float, note: str | None) -> Reservation:
        dataset = _name(dataset)
        rho = _amount("rho", rho)
        epsilon = _amount("epsilon", epsilon)
        if not isinstance(fingerprint, str) or not fingerprint:
            raise LedgerError("a reservation needs the data's fingerprint (Ledger.fingerprint)")
        with self._connect() as con:
            con.execute("BEGIN IMMEDIATE")  # the write lock: read-compare-insert is atomic
            try:
                total_rho, total_eps, n = self._totals(con, dataset, fingerprint)
                rho_cap, eps_cap = self._caps(con, dataset)
                _check_cap(dataset, "rho (zCDP)", total_rho, rho, rho_cap, n)
                _check_cap(dataset, "pure epsilon", total_eps, epsilon, eps_cap, n)
                cur = con.execute(
                    "INSERT INTO spends (dataset, fingerprint, rho, epsilon, status, started, note) "
                    "VALUES (?, ?, ?, ?, 'reserved', ?, ?)",
                    (dataset, fingerprint, rho, epsilon, _now(), note),
                )
                rid = int(cur.lastrowid)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        return Reservation(self, rid, dataset, rho, epsilon)

    def _finish(self, rid: int, status: str) -> None:
        with self._connect() as con:
            con.execute("BEGIN IMMEDIATE")
            con.execute(
                "UPDATE spends SET status = ?, finished = ? WHERE id = ? AND status = 'reserved'",
                (status, _now(), rid),
            )
            con.execute("COMMIT")

    @contextmanager
    def reserve(
        self, dataset: str, fingerprint: str, *, rho: float = 0.0, epsilon: float = 0.0, note: str | None = None
    ) -> Iterator[Reservation]:
        """Charge a release to ``dataset`` before it draws noise; use around measurement and
        writing. Raises :class:`BudgetExceededError` (charging nothing) if the spend would take
        the dataset past its cap. On leaving the block the row becomes ``completed``, or
        ``failed`` if an exception escaped — the spend stays charged either way.

        Parameters
        ----------
        dataset : str
            A name the user chooses for the data (one per population, not per file version).
        fingerprint : str
            :meth:`fingerprint` of the data.
        rho : float
            zCDP cost of the release.
        epsilon : float
            Pure-DP cost (0 for Gaussian mechanisms).
        note : str, optional
            Free text (e.g. the output folder); nothing computed from the data.

        Yields
        ------
        Reservation
        """
        r = self._reserve(dataset, fingerprint, rho, epsilon, note)
        try:
            yield r
        except BaseException:
            r.fail()
            raise
        r.complete()


def _name(dataset: Any) -> str:
    if not isinstance(dataset, str) or not dataset.strip():
        raise LedgerError(f"a dataset name must be a non-empty string, got {dataset!r}")
    return dataset.strip()


def _check_cap(dataset: str, what: str, total: float, amount: float, cap: float | None, n: int) -> None:
    if cap is None or amount == 0:
        return
    # a relative slack of 1e-12 so that spending exactly the cap in several parts is allowed
    if total + amount > cap * (1 + 1e-12):
        raise BudgetExceededError(
            f"dataset {dataset!r}: this release would spend {what} {amount:.6g}, but {total:.6g} of "
            f"its cap {cap:.6g} is already spent by {n} earlier release(s) (failed and interrupted "
            f"ones included: their noise may have been drawn); nothing was measured. Lower the "
            f"budget to at most {max(cap - total, 0):.6g}, or raise the cap with 'dpmatrix ledger "
            "set-cap' if the data owner agrees"
        )
