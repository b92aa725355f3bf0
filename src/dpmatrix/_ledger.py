"""A privacy-budget ledger: every release of a dataset is charged before any noise is drawn.

Storage: one SQLite file (stdlib :mod:`sqlite3`). Location, first that is set:

1. an explicit path (``Ledger(path)``, ``dpmatrix ... --ledger PATH``);
2. the environment variable ``DPMATRIX_LEDGER``;
3. ``$XDG_DATA_HOME/dpmatrix/_ledger.sqlite3`` (``~/.local/share/dpmatrix/_ledger.sqlite3`` when
   ``XDG_DATA_HOME`` is unset) — a per-user data file, as the XDG base-directory spec intends for
   state that must outlive a session.

The file is created with mode 0600: it holds the fingerprint key. A ledger named by
``DPMATRIX_LEDGER`` must already exist (``Ledger.create`` / ``dpmatrix ledger init`` makes it):
a missing file where one was configured means it was deleted or the environment changed, and
starting a fresh, empty ledger there would silently forget every earlier spend.

Accounting. Each release is one row of ``spends``: dataset name, content fingerprint, ρ (zCDP),
ε (pure DP), status. A release first *reserves* its spend in a ``BEGIN IMMEDIATE`` transaction
that reads the total so far, compares it with every cap that applies and inserts the row —
SQLite's write lock makes that read-compare-insert atomic across processes, so two concurrent
releases cannot both pass a cap they jointly exceed. The row is ``reserved`` while the release
runs, ``completed`` when it was written, ``failed`` when it stopped with an error after noise may
have been drawn (it stays charged: a killed run's noisy measurements may exist), and ``refused``
when it stopped before any noise was drawn (bad data, bad output folder): a refused row records
why and charges nothing.

Composition: zCDP composes by adding ρ (Bun & Steinke 2016, Lemma 2.3), pure ε-DP by adding ε
(Dwork & Roth, Theorem 3.16). A pure ε-DP release is also (ε²/2)-zCDP (Bun & Steinke 2016,
Proposition 1.4), so it is charged ρ = ε²/2 as well: a ρ cap bounds every release, Gaussian or
Laplace. A Gaussian release has no finite pure ε and is charged ε = 0 against an ε cap.

Which caps apply. Rows are linked by dataset name and by content fingerprint: the *group* of a
release is every name and fingerprint reachable from its own through rows (and explicit
``bind`` records) sharing either. The total of the group is charged against the tightest cap of
any name in it, so the same bytes released under another name, or a copy of the file under its
default name, count against the original cap. ``spent`` (what ``dpmatrix ledger show`` prints)
uses the same group total.

Tamper evidence. Every change (reserve, status, cap, bind) is appended to ``journal`` as
``hash = SHA-256(prev_hash, event, canonical JSON body)``, the first ``prev_hash`` being the
ledger's random id: a hash chain (Haber & Stornetta 1991). :meth:`Ledger.verify` recomputes the
chain and replays it against the ``spends``/``caps`` tables, so an edited, deleted or inserted
row is found. Deleting the *last* entries (truncation) or recreating the file cannot be seen from
the file alone; each release's manifest therefore records the ledger id, its entry and the chain
hash at that entry (:meth:`Ledger.anchor`), and :meth:`Ledger.verify_anchor` finds a truncated or
recreated ledger from any release written against it. Threat model: accidental loss and naive
edits; whoever holds the file can rebuild a consistent chain (a signature by an external key is
the next step).

Fingerprint. ``HMAC-SHA256(key, bytes of the data file(s))`` with a 256-bit key drawn from
:func:`secrets.token_bytes` when the ledger is created and stored only in the ledger. HMAC with a
secret key is a pseudorandom function (Bellare, Canetti, Krawczyk 1996): to anyone without the key
its output is indistinguishable from random, so a fingerprint reveals nothing about the data.
A data source that is not a local file (a Spark table, a database) supplies its own identity
bytes through :class:`ContentIdentified`; the ledger keys them the same way.
"""

from __future__ import annotations

import datetime as _dt
import glob as _glob
import hashlib
import hmac
import json
import math
import os
import secrets
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .errors import BudgetError, DPMatrixError

__all__ = [
    "BudgetExceededError",
    "ContentIdentified",
    "Ledger",
    "LedgerError",
    "LedgerProblem",
    "Reservation",
    "default_ledger_path",
]

ENV = "DPMATRIX_LEDGER"
STATUSES = ("reserved", "completed", "failed", "refused")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS caps (
    dataset TEXT PRIMARY KEY,
    rho_cap REAL,
    epsilon_cap REAL
);
CREATE TABLE IF NOT EXISTS bindings (
    dataset TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    PRIMARY KEY (dataset, fingerprint)
);
CREATE TABLE IF NOT EXISTS spends (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    rho REAL NOT NULL DEFAULT 0,
    epsilon REAL NOT NULL DEFAULT 0,
    status TEXT NOT NULL CHECK (status IN ('reserved', 'completed', 'failed', 'refused')),
    started TEXT NOT NULL,
    finished TEXT,
    note TEXT,
    reason TEXT
);
CREATE INDEX IF NOT EXISTS spends_dataset ON spends (dataset);
CREATE INDEX IF NOT EXISTS spends_fingerprint ON spends (fingerprint);
CREATE TABLE IF NOT EXISTS journal (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    event TEXT NOT NULL,
    body TEXT NOT NULL,
    prev TEXT NOT NULL,
    hash TEXT NOT NULL
);
"""


class LedgerError(DPMatrixError, ValueError):
    """The ledger cannot be opened or used (bad path, missing or corrupt file, bad cap)."""


class BudgetExceededError(BudgetError):
    """A release would take a dataset's total spend past its cap."""


@runtime_checkable
class ContentIdentified(Protocol):
    """A data source that can name its content: ``fingerprint()`` returns bytes that change
    whenever the records change (a content hash, a table's snapshot id and path). The ledger keys
    them with its secret (:meth:`Ledger.fingerprint_of`). Local files need none: the ledger hashes
    their bytes."""

    def fingerprint(self) -> bytes:
        """Bytes identifying the records this source reads."""
        ...


def default_ledger_path() -> Path:
    """``$DPMATRIX_LEDGER``, else ``$XDG_DATA_HOME/dpmatrix/_ledger.sqlite3`` (XDG default
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


def _canon(body: dict[str, Any]) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _link(prev: str, event: str, body: str) -> str:
    return hashlib.sha256(f"{prev}\n{event}\n{body}".encode()).hexdigest()


@dataclass(frozen=True)
class Spend:
    """Totals charged to a dataset's group (its name, the fingerprints released under it, every
    other name those fingerprints were released under, ...) and the tightest caps of the group."""

    dataset: str
    rho: float
    epsilon: float
    releases: int
    rho_cap: float | None
    epsilon_cap: float | None
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class LedgerProblem:
    """One finding of :meth:`Ledger.verify` / :meth:`Ledger.verify_anchor`."""

    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


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

    def fail(self, reason: str | None = None) -> None:
        """Mark the release stopped after noise may have been drawn; its spend stays charged."""
        self.ledger._finish(self.id, "failed", reason)

    def refuse(self, reason: str) -> None:
        """Mark the release stopped before any noise was drawn: nothing is charged."""
        self.ledger._finish(self.id, "refused", reason)

    def anchor(self) -> dict[str, Any]:
        """The ledger id, this entry and its chain hash, for the release's manifest."""
        return self.ledger.anchor(self.id)


class Ledger:
    """A privacy-budget ledger in a SQLite file (see the module docstring).

    Parameters
    ----------
    path : str or Path, optional
        The ledger file; default :func:`default_ledger_path`.
    create : bool, optional
        Create the file (and its folder) if missing. Default: yes for an explicit ``path`` and
        for the per-user default, no for a file named by ``DPMATRIX_LEDGER`` (a configured
        ledger that is missing is an error, see the module docstring).

    Examples
    --------
    >>> import tempfile, os
    >>> led = Ledger(os.path.join(tempfile.mkdtemp(), "l.sqlite3"))
    >>> led.set_cap("census", rho=1.0)
    >>> with led.reserve("census", "fp", rho=0.4):
    ...     pass  # measure and write the release here
    >>> led.spent("census").rho
    0.4
    >>> led.verify()
    []
    """

    def __init__(self, path: str | Path | None = None, *, create: bool | None = None):
        from_env = path is None and bool(os.environ.get(ENV))
        self.path = Path(path).expanduser() if path is not None else default_ledger_path()
        if create is None:
            create = not from_env
        self.created = False
        if not self.path.exists():
            if not create:
                why = f"${ENV} names it" if from_env else "it is expected here"
                raise LedgerError(
                    f"the privacy-budget ledger {str(self.path)!r} does not exist, but {why}; it may "
                    "have been deleted or moved. Restore it from a backup, or create a new empty "
                    f"one deliberately with 'dpmatrix ledger init --ledger {self.path}'"
                )
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                os.close(fd)
                self.created = True
            except FileExistsError:
                pass
            except OSError as exc:
                raise LedgerError(f"cannot create the ledger {str(self.path)!r}: {exc.strerror or exc}") from None
        if self.path.is_dir():
            raise LedgerError(f"the ledger {str(self.path)!r} is a folder; give a file path")
        try:
            with self._connect() as con:
                _migrate(con)
                con.executescript(_SCHEMA)
                con.execute("BEGIN IMMEDIATE")
                row = con.execute("SELECT value FROM meta WHERE name = 'hmac_key'").fetchone()
                if row is None:
                    con.execute("INSERT INTO meta VALUES ('hmac_key', ?)", (secrets.token_bytes(32),))
                if con.execute("SELECT value FROM meta WHERE name = 'ledger_id'").fetchone() is None:
                    con.execute("INSERT INTO meta VALUES ('ledger_id', ?)", (secrets.token_hex(16),))
                    _journal_existing(con)
                con.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            raise LedgerError(f"{str(self.path)!r} is not a usable dpmatrix ledger: {exc}") from None

    @classmethod
    def create(cls, path: str | Path | None = None) -> Ledger:
        """Open ``path`` (default :func:`default_ledger_path`), creating an empty ledger if
        missing: the deliberate first step that a ``DPMATRIX_LEDGER`` setup needs."""
        return cls(path if path is not None else default_ledger_path(), create=True)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE); a generous timeout
        # makes concurrent writers queue instead of failing
        con = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
        try:
            yield con
        finally:
            con.close()

    @property
    def id(self) -> str:
        """The ledger's random id (drawn when the file was created): a recreated ledger has
        another."""
        with self._connect() as con:
            return str(con.execute("SELECT value FROM meta WHERE name = 'ledger_id'").fetchone()[0])

    # -- fingerprints ----------------------------------------------------------------------------
    def _key(self) -> bytes:
        with self._connect() as con:
            return bytes(con.execute("SELECT value FROM meta WHERE name = 'hmac_key'").fetchone()[0])

    def fingerprint_of(self, identity: bytes | str) -> str:
        """``HMAC-SHA256(ledger key, identity)`` in hex, for a source's own identity bytes
        (:class:`ContentIdentified`)."""
        raw = identity.encode() if isinstance(identity, str) else bytes(identity)
        return hmac.new(self._key(), b"identity\0" + raw, hashlib.sha256).hexdigest()

    def fingerprint(self, data: str | Path | bytes | ContentIdentified) -> str:
        """``HMAC-SHA256(ledger key, content)`` in hex: of ``bytes``, of a file, of every file a
        glob pattern matches or of every file below a folder (sorted; each file's size is mixed
        in so that splitting the same bytes differently gives another fingerprint), or of a
        source's own identity.

        Parameters
        ----------
        data : bytes, str, Path or ContentIdentified

        Returns
        -------
        str
        """
        if isinstance(data, ContentIdentified) and not isinstance(data, (str, bytes, Path)):
            return self.fingerprint_of(data.fingerprint())
        mac = hmac.new(self._key(), digestmod=hashlib.sha256)
        if isinstance(data, bytes):
            mac.update(data)
            return mac.hexdigest()
        p = str(data)
        paths = sorted(_glob.glob(p, recursive=True)) if any(ch in p for ch in "*?[") else [p]
        # a folder (a Parquet dataset, Spark's part files): every file below it, sorted
        paths = [str(f) for q in paths for f in (sorted(x for x in Path(q).rglob("*") if x.is_file())
                                                  if Path(q).is_dir() else [Path(q)])]  # fmt: skip
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

    # -- the journal -----------------------------------------------------------------------------
    @staticmethod
    def _append(con: sqlite3.Connection, event: str, body: dict[str, Any]) -> tuple[int, str]:
        """Append one chained journal entry (inside the caller's transaction)."""
        row = con.execute("SELECT hash FROM journal ORDER BY seq DESC LIMIT 1").fetchone()
        prev = row[0] if row else str(con.execute("SELECT value FROM meta WHERE name = 'ledger_id'").fetchone()[0])
        text = _canon(body)
        h = _link(prev, event, text)
        cur = con.execute("INSERT INTO journal (event, body, prev, hash) VALUES (?, ?, ?, ?)", (event, text, prev, h))
        return int(cur.lastrowid), h

    def anchor(self, spend_id: int) -> dict[str, Any]:
        """``{ledger, path, entry, seq, hash}``: where spend ``spend_id`` was reserved in the
        chain — what a release's manifest records so that :meth:`verify_anchor` can later find a
        truncated, edited or recreated ledger."""
        with self._connect() as con:
            lid = str(con.execute("SELECT value FROM meta WHERE name = 'ledger_id'").fetchone()[0])
            for seq, event, body, h in con.execute(
                "SELECT seq, event, body, hash FROM journal WHERE event = 'reserve' ORDER BY seq DESC"
            ):
                if json.loads(body).get("id") == spend_id:
                    return {"ledger": lid, "path": str(self.path.absolute()), "entry": int(spend_id),
                            "seq": int(seq), "hash": h}  # fmt: skip
        raise LedgerError(f"spend {spend_id} is not in the ledger's journal")

    def head(self) -> tuple[int, str]:
        """The last journal entry: ``(seq, hash)`` (``(0, ledger id)`` when empty)."""
        with self._connect() as con:
            row = con.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1").fetchone()
            if row is None:
                return 0, str(con.execute("SELECT value FROM meta WHERE name = 'ledger_id'").fetchone()[0])
            return int(row[0]), str(row[1])

    def verify(self) -> list[LedgerProblem]:
        """Recompute the hash chain and replay it against the tables.

        Returns
        -------
        list of LedgerProblem
            Empty when every entry links to the one before and the ``spends``, ``caps`` and
            ``bindings`` tables hold exactly what the journal says.
        """
        problems: list[LedgerProblem] = []
        with self._connect() as con:
            prev = str(con.execute("SELECT value FROM meta WHERE name = 'ledger_id'").fetchone()[0])
            spends: dict[int, dict[str, Any]] = {}
            caps: dict[str, tuple[Any, Any]] = {}
            binds: set[tuple[str, str]] = set()
            last_seq = 0
            for seq, event, body, p, h in con.execute("SELECT seq, event, body, prev, hash FROM journal ORDER BY seq"):
                where = f"journal entry {seq}"
                if seq != last_seq + 1:
                    problems.append(LedgerProblem(where, f"entries {last_seq + 1}..{seq - 1} are missing (deleted)"))
                last_seq = seq
                if p != prev:
                    problems.append(LedgerProblem(where, "does not link to the entry before it (an entry was deleted or edited)"))
                if _link(p, event, body) != h:
                    problems.append(LedgerProblem(where, "its hash does not match its contents (edited)"))
                prev = h
                try:
                    b = json.loads(body)
                except ValueError:
                    problems.append(LedgerProblem(where, "unreadable body"))
                    continue
                if event == "reserve":
                    spends[int(b["id"])] = {k: b.get(k) for k in ("dataset", "fingerprint", "rho", "epsilon", "status", "reason")}
                elif event == "finish" and int(b.get("id", -1)) in spends:
                    spends[int(b["id"])].update(status=b.get("status"), reason=b.get("reason"))
                elif event == "cap":
                    caps[str(b["dataset"])] = (b.get("rho_cap"), b.get("epsilon_cap"))
                elif event == "bind":
                    binds.add((str(b["dataset"]), str(b["fingerprint"])))
            table = {int(r[0]): {"dataset": r[1], "fingerprint": r[2], "rho": r[3], "epsilon": r[4], "status": r[5],
                                 "reason": r[6]}
                     for r in con.execute("SELECT id, dataset, fingerprint, rho, epsilon, status, reason FROM spends")}  # fmt: skip
            for i in sorted(set(spends) | set(table)):
                if i not in table:
                    problems.append(LedgerProblem(f"spend {i}", "is in the journal but was deleted from the spends table"))
                elif i not in spends:
                    problems.append(LedgerProblem(f"spend {i}", "is in the spends table but not in the journal (inserted)"))
                elif any(table[i][k] != spends[i][k] for k in ("dataset", "fingerprint", "rho", "epsilon", "status")):
                    problems.append(LedgerProblem(f"spend {i}", "differs from the journal (edited)"))
            tcaps = {str(r[0]): (r[1], r[2]) for r in con.execute("SELECT dataset, rho_cap, epsilon_cap FROM caps")}
            if tcaps != caps:
                bad = sorted(k for k in set(tcaps) | set(caps) if tcaps.get(k) != caps.get(k))
                problems.append(LedgerProblem("caps", f"differ from the journal for {', '.join(map(repr, bad))} (edited)"))
            tbind = {(str(r[0]), str(r[1])) for r in con.execute("SELECT dataset, fingerprint FROM bindings")}
            if tbind != binds:
                problems.append(LedgerProblem("bindings", "differ from the journal (edited)"))
        return problems

    def verify_anchor(self, anchor: dict[str, Any], where: str = "release") -> list[LedgerProblem]:
        """Check an anchor recorded in a release's manifest (:meth:`anchor`) against this
        ledger: same ledger id, the entry still present with the same chain hash.

        Returns
        -------
        list of LedgerProblem
        """
        if not isinstance(anchor, dict) or not {"ledger", "seq", "hash"} <= set(anchor):
            return [LedgerProblem(where, "records no ledger entry")]
        if anchor["ledger"] != self.id:
            return [LedgerProblem(where, f"was charged to ledger {anchor['ledger']}, but {str(self.path)!r} is "
                                         f"ledger {self.id}: the ledger was recreated or replaced")]  # fmt: skip
        with self._connect() as con:
            row = con.execute("SELECT hash FROM journal WHERE seq = ?", (int(anchor["seq"]),)).fetchone()
        if row is None:
            return [LedgerProblem(where, f"its entry {anchor['seq']} is no longer in the ledger (truncated or deleted)")]
        if row[0] != anchor["hash"]:
            return [LedgerProblem(where, f"its entry {anchor['seq']} has another hash than when it was charged "
                                         "(the ledger's history was rewritten)")]  # fmt: skip
        return []

    # -- caps and totals -------------------------------------------------------------------------
    def set_cap(
        self, dataset: str, *, rho: float | None = None, epsilon: float | None = None, fingerprint: str | None = None
    ) -> None:
        """Set the cap of ``dataset``: total ρ (zCDP) and/or total pure ε. A kind not given
        keeps its current cap (setting a ρ cap never removes an ε cap).

        Parameters
        ----------
        dataset : str
        rho, epsilon : float, optional
            At least one.
        fingerprint : str, optional
            Also bind this content fingerprint (:meth:`fingerprint`) to ``dataset``, so the cap
            applies to these bytes under any name before they were ever released.
        """
        dataset = _name(dataset)
        if rho is None and epsilon is None:
            raise LedgerError("set_cap needs rho= and/or epsilon=")
        r = None if rho is None else _amount("rho cap", rho)
        e = None if epsilon is None else _amount("epsilon cap", epsilon)
        with self._connect() as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                old = self._own_caps(con, dataset)
                r = old[0] if r is None else r
                e = old[1] if e is None else e
                con.execute(
                    "INSERT INTO caps VALUES (?, ?, ?) ON CONFLICT(dataset) DO UPDATE SET "
                    "rho_cap = excluded.rho_cap, epsilon_cap = excluded.epsilon_cap",
                    (dataset, r, e),
                )
                self._append(con, "cap", {"dataset": dataset, "rho_cap": r, "epsilon_cap": e, "at": _now()})
                if fingerprint is not None:
                    self._bind(con, dataset, fingerprint)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise

    def bind(self, dataset: str, fingerprint: str) -> None:
        """Record that ``fingerprint`` is (a version of) ``dataset``: its caps apply to it."""
        dataset = _name(dataset)
        with self._connect() as con:
            con.execute("BEGIN IMMEDIATE")
            self._bind(con, dataset, fingerprint)
            con.execute("COMMIT")

    def _bind(self, con: sqlite3.Connection, dataset: str, fingerprint: str) -> None:
        if not isinstance(fingerprint, str) or not fingerprint:
            raise LedgerError("bind needs a fingerprint (Ledger.fingerprint)")
        if con.execute("SELECT 1 FROM bindings WHERE dataset = ? AND fingerprint = ?", (dataset, fingerprint)).fetchone():
            return
        con.execute("INSERT INTO bindings VALUES (?, ?)", (dataset, fingerprint))
        self._append(con, "bind", {"dataset": dataset, "fingerprint": fingerprint, "at": _now()})

    @staticmethod
    def _own_caps(con: sqlite3.Connection, dataset: str) -> tuple[float | None, float | None]:
        row = con.execute("SELECT rho_cap, epsilon_cap FROM caps WHERE dataset = ?", (dataset,)).fetchone()
        return (None, None) if row is None else (row[0], row[1])

    @staticmethod
    def _group(con: sqlite3.Connection, dataset: str, fingerprint: str | None) -> tuple[set[str], set[str]]:
        """Every name and fingerprint linked to ``dataset``/``fingerprint`` through spends and
        bindings (a fixed point: the connected component)."""
        names, fps = {dataset}, ({fingerprint} if fingerprint else set())
        links = con.execute(
            "SELECT dataset, fingerprint FROM spends WHERE status != 'refused' UNION SELECT dataset, fingerprint FROM bindings"
        ).fetchall()
        changed = True
        while changed:
            changed = False
            for n, f in links:
                if (n in names) != (f in fps):
                    names.add(n)
                    fps.add(f)
                    changed = True
        return names, fps

    def _group_spend(self, con: sqlite3.Connection, dataset: str, fingerprint: str | None) -> tuple[Spend, dict]:
        names, fps = self._group(con, dataset, fingerprint)
        rho = eps = 0.0
        n = 0
        for name, fp, r, e in con.execute("SELECT dataset, fingerprint, rho, epsilon FROM spends WHERE status != 'refused'"):
            if name in names or fp in fps:
                rho += float(r)
                eps += float(e)
                n += 1
        rcap: tuple[float, str] | None = None
        ecap: tuple[float, str] | None = None
        for name in sorted(names):
            rc, ec = self._own_caps(con, name)
            if rc is not None and (rcap is None or rc < rcap[0]):
                rcap = (float(rc), name)
            if ec is not None and (ecap is None or ec < ecap[0]):
                ecap = (float(ec), name)
        spend = Spend(dataset, rho, eps, n, None if rcap is None else rcap[0], None if ecap is None else ecap[0],
                      tuple(sorted(names)))  # fmt: skip
        return spend, {"rho": rcap, "epsilon": ecap}

    def spent(self, dataset: str, fingerprint: str | None = None) -> Spend:
        """Totals charged to the group of ``dataset`` (and ``fingerprint``), refused entries
        excluded, with the tightest caps of the group: the numbers the cap check uses."""
        dataset = _name(dataset)
        with self._connect() as con:
            return self._group_spend(con, dataset, fingerprint)[0]

    def rows(self) -> list[dict[str, Any]]:
        """Every spend, oldest first (fingerprints shortened to 12 hex digits)."""
        with self._connect() as con:
            cur = con.execute(
                "SELECT id, dataset, substr(fingerprint, 1, 12) AS fingerprint, rho, epsilon, status, started, "
                "finished, note, reason FROM spends ORDER BY id"
            )
            cols = [c[0] for c in cur.description]
            return [dict(zip(cols, r)) for r in cur.fetchall()]

    def datasets(self) -> list[Spend]:
        """Totals of every dataset name with a cap or a spend (each its group's total)."""
        with self._connect() as con:
            names = [r[0] for r in con.execute("SELECT dataset FROM caps UNION SELECT dataset FROM spends ORDER BY 1")]
        return [self.spent(n) for n in names]

    # -- reservations ----------------------------------------------------------------------------
    def _charges(self, rho: Any, epsilon: Any) -> tuple[float, float]:
        rho = _amount("rho", rho)
        epsilon = _amount("epsilon", epsilon)
        if epsilon > 0 and rho == 0:
            rho = epsilon * epsilon / 2  # pure eps-DP implies (eps^2/2)-zCDP (Bun & Steinke, Prop. 1.4)
        return rho, epsilon

    def _reserve(self, dataset: str, fingerprint: str, rho: float, epsilon: float, note: str | None) -> Reservation:
        dataset = _name(dataset)
        rho, epsilon = self._charges(rho, epsilon)
        if not isinstance(fingerprint, str) or not fingerprint:
            raise LedgerError("a reservation needs the data's fingerprint (Ledger.fingerprint)")
        with self._connect() as con:
            con.execute("BEGIN IMMEDIATE")  # the write lock: read-compare-insert is atomic
            try:
                spend, caps = self._group_spend(con, dataset, fingerprint)
                _check_zcdp_allowed(dataset, rho, epsilon, caps)
                _check_cap(dataset, "rho (zCDP)", spend.rho, rho, caps["rho"], spend.releases)
                _check_cap(dataset, "pure epsilon", spend.epsilon, epsilon, caps["epsilon"], spend.releases)
                started = _now()
                cur = con.execute(
                    "INSERT INTO spends (dataset, fingerprint, rho, epsilon, status, started, note) "
                    "VALUES (?, ?, ?, ?, 'reserved', ?, ?)",
                    (dataset, fingerprint, rho, epsilon, started, note),
                )
                rid = int(cur.lastrowid)
                self._append(con, "reserve", {"id": rid, "dataset": dataset, "fingerprint": fingerprint, "rho": rho,
                                              "epsilon": epsilon, "status": "reserved", "reason": None,
                                              "started": started, "note": note})  # fmt: skip
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        return Reservation(self, rid, dataset, rho, epsilon)

    def record_refusal(
        self, dataset: str, fingerprint: str, *, rho: float = 0.0, epsilon: float = 0.0, reason: str,
        note: str | None = None,
    ) -> int:  # fmt: skip
        """Record a release that was refused before any noise was drawn (charged nothing).

        Returns
        -------
        int
            The entry's id.
        """
        dataset = _name(dataset)
        rho, epsilon = self._charges(rho, epsilon)
        with self._connect() as con:
            con.execute("BEGIN IMMEDIATE")
            now = _now()
            cur = con.execute(
                "INSERT INTO spends (dataset, fingerprint, rho, epsilon, status, started, finished, note, reason) "
                "VALUES (?, ?, ?, ?, 'refused', ?, ?, ?, ?)",
                (dataset, fingerprint or "-", rho, epsilon, now, now, note, reason),
            )
            rid = int(cur.lastrowid)
            self._append(con, "reserve", {"id": rid, "dataset": dataset, "fingerprint": fingerprint or "-", "rho": rho,
                                          "epsilon": epsilon, "status": "refused", "reason": reason, "started": now,
                                          "note": note})  # fmt: skip
            con.execute("COMMIT")
        return rid

    def _finish(self, rid: int, status: str, reason: str | None = None) -> None:
        with self._connect() as con:
            con.execute("BEGIN IMMEDIATE")
            cur = con.execute(
                "UPDATE spends SET status = ?, finished = ?, reason = ? WHERE id = ? AND status = 'reserved'",
                (status, _now(), reason, rid),
            )
            if cur.rowcount:
                self._append(con, "finish", {"id": rid, "status": status, "reason": reason})
            con.execute("COMMIT")

    @contextmanager
    def reserve(
        self, dataset: str, fingerprint: str, *, rho: float = 0.0, epsilon: float = 0.0, note: str | None = None
    ) -> Iterator[Reservation]:
        """Charge a release to ``dataset`` before it draws noise; use around measurement and
        writing. Raises :class:`BudgetExceededError` (charging nothing) if the spend would take
        the dataset's group past a cap. On leaving the block the row becomes ``completed``, or
        ``failed`` if an exception escaped — the spend stays charged either way — unless the
        block already marked it (:meth:`Reservation.refuse`).

        Parameters
        ----------
        dataset : str
            A name the user chooses for the data (one per population, not per file version).
        fingerprint : str
            :meth:`fingerprint` of the data.
        rho : float
            zCDP cost of the release (for a pure ε-DP release given only ``epsilon``: ε²/2).
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
        except BaseException as exc:
            r.fail(f"{type(exc).__name__}: {exc}"[:500])
            raise
        r.complete()


def _migrate(con: sqlite3.Connection) -> None:
    """Bring a ledger written by an earlier dpmatrix (no ``refused`` status, no reason column,
    no journal) to the current schema, keeping every row."""
    cols = [r[1] for r in con.execute("PRAGMA table_info(spends)")]
    if not cols or "reason" in cols:
        return
    spends = _SCHEMA[_SCHEMA.index("CREATE TABLE IF NOT EXISTS spends"):_SCHEMA.index("CREATE INDEX IF NOT EXISTS spends_dataset")]
    con.executescript(
        "BEGIN IMMEDIATE; ALTER TABLE spends RENAME TO spends_v1; " + spends +
        "INSERT INTO spends (id, dataset, fingerprint, rho, epsilon, status, started, finished, note) "
        "SELECT id, dataset, fingerprint, rho, epsilon, status, started, finished, note FROM spends_v1; "
        "DROP TABLE spends_v1; DELETE FROM meta WHERE name = 'ledger_id'; COMMIT;"
    )


def _journal_existing(con: sqlite3.Connection) -> None:
    """Start the journal of a migrated ledger with its current rows."""
    for name, r, e in con.execute("SELECT dataset, rho_cap, epsilon_cap FROM caps ORDER BY dataset").fetchall():
        Ledger._append(con, "cap", {"dataset": name, "rho_cap": r, "epsilon_cap": e, "at": "migrated"})
    for row in con.execute("SELECT id, dataset, fingerprint, rho, epsilon, status, started, note FROM spends ORDER BY id").fetchall():
        Ledger._append(con, "reserve", {"id": row[0], "dataset": row[1], "fingerprint": row[2], "rho": row[3],
                                        "epsilon": row[4], "status": row[5], "reason": None, "started": row[6],
                                        "note": row[7]})  # fmt: skip


def _name(dataset: Any) -> str:
    if not isinstance(dataset, str) or not dataset.strip():
        raise LedgerError(f"a dataset name must be a non-empty string, got {dataset!r}")
    return dataset.strip()


def _check_zcdp_allowed(dataset: str, rho: float, epsilon: float, caps: dict) -> None:
    """Refuse a zCDP-only release (ρ > 0, no pure ε) where the data's group has a pure-ε cap
    and no ρ cap: a Gaussian mechanism satisfies no finite pure ε-DP, so it cannot be checked
    against an ε cap, and charging it ε = 0 would let it through unlimited. The data owner who
    accepts zCDP releases says so with a ρ cap (which pure releases then also count against,
    ρ = ε²/2)."""
    if epsilon > 0 or rho <= 0 or caps["epsilon"] is None or caps["rho"] is not None:
        return
    limit, owner = caps["epsilon"]
    whose = f"{dataset!r}" if owner == dataset else f"{owner!r} (same data as {dataset!r})"
    raise BudgetExceededError(
        f"dataset {whose} has a pure epsilon cap ({limit:.6g}) and no rho cap: this Gaussian release "
        f"(rho = {rho:.6g} zCDP) has no finite pure epsilon, so the cap cannot cover it; nothing was "
        f"measured. Release with pure epsilon-DP (--delta 0 / delta=0), or, if the data owner accepts "
        f"zCDP releases, set a rho cap as well: dpmatrix ledger set-cap {owner} --rho R"
    )


def _check_cap(dataset: str, what: str, total: float, amount: float, cap: tuple[float, str] | None, n: int) -> None:
    if cap is None or amount == 0:
        return
    limit, owner = cap
    # a relative slack of 1e-12 so that spending exactly the cap in several parts is allowed
    if total + amount > limit * (1 + 1e-12):
        whose = "its cap" if owner == dataset else f"the cap of {owner!r} (same data under another name)"
        raise BudgetExceededError(
            f"dataset {dataset!r}: this release would spend {what} {amount:.6g}, but {total:.6g} of "
            f"{whose} {limit:.6g} is already spent by {n} earlier release(s) (failed and interrupted "
            f"ones included: their noise may have been drawn); nothing was measured. Lower the "
            f"budget to at most {max(limit - total, 0):.6g}, or raise the cap with 'dpmatrix ledger "
            "set-cap' if the data owner agrees"
        )
