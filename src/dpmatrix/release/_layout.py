"""Where a release is written: the output folder, its hidden siblings, the write lock, recovery
of what an interrupted write left, and the atomic swap into place.

Safe writes. Next to ``OUT`` live only hidden siblings:
``.OUT.lock`` (an ``fcntl`` lock held for the whole write: a second writer gets a clear error),
``.OUT.partial-XXXX`` (the new release being written), ``.OUT.old-XXXX`` (the previous release
during an overwrite) and ``.OUT.work-XXXX`` (DuckDB spill / on-disk store of the CLI). An overwrite
renames ``OUT`` to ``.OUT.old-*``, the finished ``.OUT.partial-*`` to ``OUT``, then removes the
old one: at every instant a complete release exists under ``OUT`` or one of those names, and
:func:`load_release` falls back to it when ``OUT`` is missing. Leftovers of a killed run are
removed (or the complete one restored) by the next write to ``OUT``, with a warning stating the
privacy meaning: a leftover measurement is budget already spent.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import stat
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .._release_tables import fsync_path
from ..errors import ReleaseError
from ._manifest import is_release, release_problem

WORK_MEANING = (
    "it held temporary files computed from the un-noised records (counting spill, on-disk "
    "measurements) in a folder only its owner could read; they are deleted, and the budget "
    "of that interrupted release stays charged in the ledger"
)
LEFTOVER_MEANING = (
    "it held noisy measurements of the data, so its privacy budget was already spent (the "
    "ledger keeps that spend); a new release is a new measurement and spends budget again"
)


class LeftoverWarning(UserWarning):
    """Files of an interrupted release were found next to the output folder and dealt with."""


def sibling_path(out: Path, kind: str) -> Path:
    import uuid  # here: reading a release never needs it

    return out.parent / f".{out.name}.{kind}-{uuid.uuid4().hex[:8]}"


def _siblings(out: Path, kind: str) -> list[Path]:
    prefix = f".{out.name}.{kind}-"
    try:
        return sorted(p for p in out.parent.iterdir() if p.name.startswith(prefix))
    except OSError:
        return []


_HELD: dict[str, list] = {}


_HELD_GUARD = threading.Lock()


@contextmanager
def output_lock(out_dir: str | Path) -> Iterator[bool]:
    """Hold the write lock of a release folder (``fcntl.flock`` on the hidden sibling
    ``.OUT.lock``, which is left in place) for the duration of the ``with`` block.

    Re-entrant within one process; a second process gets :class:`~dpmatrix.ReleaseError` at
    once instead of waiting. The lock is released by the OS when the process dies, so a killed
    writer never blocks the next one.

    Parameters
    ----------
    out_dir : str or Path
        The release folder (need not exist yet; its parent is created).

    Yields
    ------
    bool
        True if this call took the lock (False when the process already held it: then the
        outer holder has already recovered leftovers, and its own work files are not leftovers).
    """
    out = Path(out_dir).absolute()
    if out.is_symlink():
        raise ReleaseError(f"output {str(out)!r} is a symbolic link; refusing to write a release through it "
                           "(give the real folder)")  # fmt: skip
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReleaseError(f"cannot create {str(out.parent)!r}: {exc.strerror or exc}") from None
    lock = out.parent / f".{out.name}.lock"
    key = str(lock)
    with _HELD_GUARD:
        held = _HELD.get(key)
        if held is not None:
            held[1] += 1
    if held is None:
        fd = _acquire(lock, out)
        with _HELD_GUARD:
            _HELD[key] = [fd, 1]
    try:
        yield held is None
    finally:
        with _HELD_GUARD:
            entry = _HELD[key]
            entry[1] -= 1
            last = entry[1] == 0
            if last:
                del _HELD[key]
        if last:
            # unlink while still holding the lock: a process that opened the old file checks
            # (in _acquire) that what it locked is still the file at that path
            try:
                os.unlink(lock)
            except OSError:
                pass
            fcntl.flock(entry[0], fcntl.LOCK_UN)
            os.close(entry[0])


def _acquire(lock: Path, out: Path) -> int:
    for _ in range(100):
        try:
            # never through a symbolic link (a planted .OUT.lock -> /etc/... would be created or
            # truncated with the writer's rights): O_NOFOLLOW, and a regular file only
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise ReleaseError(f"the lock file {str(lock)!r} is not a regular file; remove it")
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ReleaseError(f"the lock file {str(lock)!r} is a symbolic link; refusing to follow it "
                                   "(remove it)") from None  # fmt: skip
            raise ReleaseError(f"cannot create the lock file {str(lock)!r}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise ReleaseError(
                f"another dpmatrix process is writing a release to {str(out)!r} (its lock "
                f"{lock.name} is held); wait for it to finish or choose another folder"
            ) from None
        try:
            same = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the holder removed the file after we opened it: lock the new one
    raise ReleaseError(f"cannot take the lock {str(lock)!r}: it keeps being replaced")


def recover_output(out_dir: str | Path) -> list[str]:
    """Deal with what an interrupted write to ``out_dir`` left behind; call with the lock held.

    If ``out_dir`` is missing (a kill between the two renames of an overwrite), the finished
    new release (a complete ``.OUT.partial-*``) or else the previous one (``.OUT.old-*``) is
    renamed into place. Every other leftover (``.OUT.partial-*``, ``.OUT.old-*``,
    ``.OUT.work-*``) is removed. Each action is returned as a message (and warned as
    :class:`LeftoverWarning`) stating its privacy meaning.

    Returns
    -------
    list of str
    """
    out = Path(out_dir).absolute()
    msgs: list[str] = []
    partials, olds, works = _siblings(out, "partial"), _siblings(out, "old"), _siblings(out, "work")
    if not out.exists():
        for cand in [p for p in partials if is_release(p)] + [p for p in olds if is_release(p)]:
            os.rename(cand, out)
            fsync_path(out.parent)
            which = "the finished new release" if cand in partials else "the previous release"
            msgs.append(f"an overwrite of {str(out)!r} was interrupted; restored {which} from {cand.name}")
            break
    for p in _siblings(out, "partial"):
        shutil.rmtree(p, ignore_errors=True)
        msgs.append(f"removed {p.name} left by an interrupted release to {str(out)!r}: {LEFTOVER_MEANING}")
    for p in works:
        shutil.rmtree(p, ignore_errors=True)
        msgs.append(f"removed {p.name} left by an interrupted release to {str(out)!r}: {WORK_MEANING}")
    for p in _siblings(out, "old"):
        shutil.rmtree(p, ignore_errors=True)
        msgs.append(f"removed {p.name}, the previous release left by an interrupted overwrite of {str(out)!r}")
    for m in msgs:
        warnings.warn(m, LeftoverWarning, stacklevel=2)
    return msgs


def check_target(out_dir: str | Path, overwrite: bool) -> None:
    """Refuse (with :class:`~dpmatrix.ReleaseError`) to write to ``out_dir`` unless it is
    missing, an empty folder, or — with ``overwrite`` — a complete dpmatrix release holding
    nothing else (a bare manifest or a curator's extra files are never wiped)."""
    out = Path(out_dir)
    if not out.exists():
        return
    if not out.is_dir():
        raise ReleaseError(f"output {str(out)!r} exists and is not a folder")
    if not any(out.iterdir()):
        return
    if not overwrite:
        raise ReleaseError(
            f"output folder {str(out)!r} is not empty; choose another folder or replace an earlier "
            "release with --overwrite"
        )
    problem = release_problem(out)
    if problem is not None:
        raise ReleaseError(
            f"output folder {str(out)!r} is not a dpmatrix release holding nothing else ({problem}); "
            "refusing to replace it (choose another --out)"
        )


_prepare_target = check_target  # former name


def _swap_into_place(stage: Path, out: Path) -> None:
    """``stage`` becomes ``out``; an existing ``out`` is renamed aside first and removed last,
    so a kill at any point leaves a complete release under ``out`` or a hidden sibling."""
    if out.exists() and any(out.iterdir()):
        trash = sibling_path(out, "old")
        os.rename(out, trash)
        try:
            os.rename(stage, out)
        except BaseException:
            os.rename(trash, out)  # put the previous release back
            raise
        fsync_path(out.parent)
        shutil.rmtree(trash, ignore_errors=True)
        return
    if out.exists():
        out.rmdir()
    os.rename(stage, out)
    fsync_path(out.parent)


def _fallback_folder(folder: Path) -> Path | None:
    """A complete hidden copy of ``folder`` left by an interrupted overwrite (the finished new
    release first, then the previous one)."""
    out = folder.absolute()
    for cand in _siblings(out, "partial") + _siblings(out, "old"):
        if is_release(cand):
            return cand
    return None


def _existing_folder(folder: Path) -> Path:
    """``folder``, or (warned) the complete hidden copy an interrupted overwrite left of it."""
    if not folder.exists():
        alt = _fallback_folder(folder)
        if alt is not None:
            warnings.warn(
                f"{str(folder)!r} is missing because an overwrite was interrupted; reading its "
                f"complete copy {alt.name} (the next release to that folder restores it)",
                LeftoverWarning, stacklevel=3,
            )  # fmt: skip
            return alt
    return folder
