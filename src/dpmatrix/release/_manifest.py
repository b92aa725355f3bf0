"""The manifest of a release folder: its names, its JSON, the files it lists with their
SHA-256 digests, and the checks that a folder is a complete release whose stated privacy is its
noise scales' own.

Integrity. Threat model: accidental corruption and naive tampering (an edited
table, a lowered ρ in the manifest, a manifest path pointing outside the folder). Every file is
verified against the manifest's SHA-256 when it is read, the manifest against
``manifest.sha256``, every manifest path must resolve inside the folder, and the stated ρ and ε
must equal those recomputed from the manifest's own noise scales. A determined forger can
recompute all digests: this is not a signature (signing the manifest with a curator key is the
noted next step).
"""

from __future__ import annotations

import hashlib
import json
import math
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._jsonfile import loads_strict
from .._statement import privacy_summary
from .._version import __version__
from ..errors import DPMatrixError, ReleaseError

if TYPE_CHECKING:
    from ..planners._residual.plan import Plan


RELEASE_FORMAT = "dpmatrix.release/2"


#: formats :func:`load_release` reads: the per-marginal files of format 1, the dataset of format 2
READABLE_FORMATS = ("dpmatrix.release/1", RELEASE_FORMAT)


MANIFEST = "manifest.json"


MANIFEST_DIGEST = "manifest.sha256"


MEASUREMENTS = "measurements.parquet"


# Files written into a finished release from its own published contents (the HTML report,
# private-pgm post-processed tables): part of the folder, not of the measured release, so not
# listed in the manifest and rewritten by ``dpmatrix report`` / ``--postprocess``; they never
# make a folder "not a release" (a report left half-written by a kill included). The report's
# SHA-256 is a further line of ``manifest.sha256`` (the digest list), written while the output
# lock is held, so :func:`verify_files` finds a report that describes another release. Matched
# as prefixes of the relative path.
DERIVED_PATHS = ("report.html", ".report.html.partial", ".manifest.sha256.partial", "postprocessed/")


def digest_list(folder: Path) -> dict[str, str]:
    """``manifest.sha256`` as ``{file: SHA-256}``: the manifest's line first, then one line per
    derived file covered (``report.html``). Empty if unreadable."""
    try:
        lines = (Path(folder) / MANIFEST_DIGEST).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return {}
    out: dict[str, str] = {}
    for line in lines:
        digest, _, name = line.partition("  ")
        if digest and name:
            out[name] = digest
    return out


def write_digest_list(folder: Path, derived: Mapping[str, str]) -> None:
    """Rewrite ``manifest.sha256`` with its manifest line and one line per ``derived`` file
    (name -> SHA-256), atomically (a temporary file renamed over it)."""
    import os

    folder = Path(folder)
    first = (folder / MANIFEST_DIGEST).read_text(encoding="utf-8").splitlines()[0]
    text = first + "\n" + "".join(f"{d}  {n}\n" for n, d in derived.items())
    tmp = folder / f".{MANIFEST_DIGEST}.partial"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, folder / MANIFEST_DIGEST)


def verify_files(folder: str | Path, *, derived: bool = True) -> None:
    """Raise :class:`~dpmatrix.ReleaseError` unless every file of the release matches its
    SHA-256: the manifest (``manifest.sha256``), every file the manifest lists, and every
    derived file of the digest list (the report). Reads every byte: what ``dpmatrix report``
    and ``dpmatrix ledger verify`` run before trusting a folder.

    Parameters
    ----------
    folder : str or Path
    derived : bool
        Also check the derived files (``False`` before rewriting them).
    """
    folder = Path(folder)
    manifest = _read_manifest(folder, verify=True)
    for rel, want in _listed_files(manifest).items():
        _checked_file(folder, rel, want)
    for name, want in list(digest_list(folder).items())[1:] if derived else []:
        p = _inside(folder, name)
        if p.is_file() and sha256_file(p) != want:
            raise ReleaseError(
                f"{name} in {str(folder)!r} does not match the digest written with the release: it "
                "describes another release or was edited; rewrite it with 'dpmatrix report'"
            )


def _library_version() -> str:
    return __version__


def dump_json(obj: Any, indent: str = "") -> str:
    """JSON with one key per line, but lists of scalars (and small objects of scalars) kept on
    one line, and each item of a list of flat objects (values: scalars, lists or objects of
    scalars) on one line: readable manifests without one line per attribute name or field."""
    scalar = (str, int, float, bool, type(None))
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        if len(obj) <= 4 and all(isinstance(v, scalar) for v in obj.values()):
            return json.dumps(obj, allow_nan=False, ensure_ascii=False)
        inner = indent + " "
        items = [f"{inner}{json.dumps(str(k), ensure_ascii=False)}: {dump_json(v, inner)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(obj, (list, tuple)):
        if all(isinstance(v, scalar) for v in obj):
            return json.dumps(list(obj), allow_nan=False, ensure_ascii=False)
        inner = indent + " "

        def flat(v: Any) -> bool:
            return isinstance(v, scalar) or (
                isinstance(v, (list, tuple)) and all(isinstance(x, scalar) for x in v)) or (
                isinstance(v, dict) and all(isinstance(x, scalar) for x in v.values()))

        lines = [json.dumps(v, allow_nan=False, ensure_ascii=False)
                 if isinstance(v, dict) and all(flat(x) for x in v.values()) else dump_json(v, inner)
                 for v in obj]  # fmt: skip
        return "[\n" + ",\n".join(inner + line for line in lines) + "\n" + indent + "]"
    return json.dumps(obj, allow_nan=False, ensure_ascii=False)


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes (read in 1 MiB blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _inside(folder: Path, rel: Any) -> Path:
    """``folder / rel``, refused unless ``rel`` is a relative path that resolves inside
    ``folder`` (no absolute paths, no ``..`` escapes, no symlinks leading out)."""
    if not isinstance(rel, str) or not rel or "\x00" in rel or Path(rel).is_absolute():
        raise ReleaseError(f"the manifest of {str(folder)!r} names a file outside the release folder: {rel!r}")
    root = folder.resolve()
    target = (folder / rel).resolve()
    if target != root and root not in target.parents:
        raise ReleaseError(
            f"the manifest of {str(folder)!r} names a file outside the release folder: {rel!r}; "
            "refusing to read it"
        )
    return folder / rel


def _listed_files(manifest: Mapping[str, Any]) -> dict[str, str | None]:
    """Relative path -> SHA-256 (``None`` in manifests written before digests were recorded)."""
    files = manifest.get("files")
    if isinstance(files, dict):
        return {str(k): (v if isinstance(v, str) else None) for k, v in files.items()}
    out: dict[str, str | None] = {}
    meas = manifest.get("measurements", {})
    out[str(meas.get("file", MEASUREMENTS)) if isinstance(meas, dict) else MEASUREMENTS] = None
    for e in manifest.get("marginals", []) or []:
        if isinstance(e, dict) and isinstance(e.get("files"), dict):
            for rel in e["files"].values():
                out[str(rel)] = None
    return out


def release_problem(folder: str | Path) -> str | None:
    """Why ``folder`` is not a complete dpmatrix release (``None`` if it is): no or foreign
    manifest, a digest that does not match the manifest, a listed file missing, or files that
    the release does not list (a curator's own files). Reads no table contents."""
    folder = Path(folder)
    try:
        raw = (folder / MANIFEST).read_bytes()
    except OSError:
        return f"no readable {MANIFEST}"
    try:
        manifest = loads_strict(raw.decode("utf-8"), ReleaseError, MANIFEST)
    except (ReleaseError, UnicodeDecodeError) as exc:
        return str(exc)
    if not isinstance(manifest, dict) or manifest.get("format") not in READABLE_FORMATS:
        return f"{MANIFEST} is not a dpmatrix release manifest ({_format_note(manifest)})"
    for k in ("domain", "workload", "residuals", "privacy", "marginals"):
        if k not in manifest:
            return f"{MANIFEST} lacks {k!r}"
    expected = {MANIFEST}
    if isinstance(manifest.get("files"), dict):
        expected.add(MANIFEST_DIGEST)
        try:
            stated = (folder / MANIFEST_DIGEST).read_text().split()[0]
        except (OSError, IndexError, UnicodeDecodeError):
            return f"no {MANIFEST_DIGEST} (the release was not finished)"
        if stated != hashlib.sha256(raw).hexdigest():
            return f"{MANIFEST} does not match {MANIFEST_DIGEST}"
    for rel in _listed_files(manifest):
        try:
            p = _inside(folder, rel)
        except ReleaseError as exc:
            return str(exc)
        if not p.is_file():
            return f"listed file {rel!r} is missing"
        expected.add(rel)
    extra = []
    for p in folder.rglob("*"):
        if p.is_file() or p.is_symlink():
            rel = p.relative_to(folder).as_posix()
            if rel not in expected and not rel.startswith(DERIVED_PATHS):
                extra.append(rel)
    if extra:
        return f"it holds files that are not part of the release ({', '.join(sorted(extra)[:3])})"
    return None


def _format_note(manifest: Any) -> str:
    """Which format a manifest states, against the ones this version reads."""
    got = manifest.get("format") if isinstance(manifest, dict) else None
    known = ", ".join(READABLE_FORMATS)
    if isinstance(got, str) and got.startswith("dpmatrix.release/"):
        return (f"format {got!r}; dpmatrix {__version__} reads {known}: it was written by another "
                "version of dpmatrix, use that version to read it")
    return f"format {got!r}; dpmatrix {__version__} reads {known}"


def is_release(path: str | Path) -> bool:
    """True if ``path`` is a folder holding a complete dpmatrix release and nothing else."""
    return Path(path).is_dir() and release_problem(path) is None


def _stated_digest(manifest: Mapping[str, Any], folder: Path, rel: str, verify: bool) -> str | None:
    """The SHA-256 the manifest states for ``rel`` (``None``: not verifying, or a manifest
    written before digests were recorded)."""
    files = manifest.get("files")
    if not verify or not isinstance(files, dict):
        return None
    if rel not in files:
        raise ReleaseError(f"{rel!r} has no digest in the manifest of {str(folder)!r}")
    return files[rel]


def _checked_file(folder: Path, rel: str, want: str | None) -> Path:
    """``folder / rel``, confined to the folder and, if ``want`` is given, checked against it."""
    p = _inside(folder, rel)
    if want is not None:
        try:
            got = sha256_file(p)
        except OSError as exc:
            raise ReleaseError(f"cannot read {rel!r} of {str(folder)!r}: {exc.strerror or exc}") from None
        if got != want:
            raise ReleaseError(
                f"{rel} in {str(folder)!r} was modified after the release was written "
                "(SHA-256 mismatch); refusing to use it (--no-verify / verify=False skips the check)"
            )
    return p


def _read_manifest(folder: Path, verify: bool) -> dict:
    if not folder.is_dir():
        if folder.exists():
            raise ReleaseError(f"{str(folder)!r} is not a folder (give the release folder)")
        raise ReleaseError(f"release folder {str(folder)!r} does not exist")
    path = folder / MANIFEST
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ReleaseError(f"{str(folder)!r} is not a dpmatrix release: no {MANIFEST}") from None
    except OSError as exc:
        raise ReleaseError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ReleaseError(f"{str(path)!r} is not UTF-8 text") from None
    manifest = loads_strict(text, ReleaseError, repr(str(path)))
    if not isinstance(manifest, dict) or manifest.get("format") not in READABLE_FORMATS:
        raise ReleaseError(f"{str(path)!r} is not a release this dpmatrix can read ({_format_note(manifest)})")
    if verify and isinstance(manifest.get("files"), dict):
        try:
            stated = (folder / MANIFEST_DIGEST).read_text().split()[0]
        except (OSError, IndexError, UnicodeDecodeError):
            raise ReleaseError(
                f"{str(folder)!r} has no {MANIFEST_DIGEST}: the release is incomplete or was altered"
            ) from None
        if stated != hashlib.sha256(raw).hexdigest():
            raise ReleaseError(
                f"{MANIFEST} in {str(folder)!r} was modified after the release was written (it "
                f"does not match {MANIFEST_DIGEST}); refusing to use it (--no-verify / "
                "verify=False skips the check)"
            )
    elif verify:
        warnings.warn(
            f"{str(folder)!r} was written by an older dpmatrix without file digests: its files "
            "cannot be verified", UserWarning, stacklevel=3,
        )  # fmt: skip
    return manifest


def _check_privacy_consistent(manifest: dict, plan: Plan, folder: Path) -> None:
    """The stated ρ and ε must be those of the manifest's own noise scales."""
    p = manifest.get("privacy")
    if not isinstance(p, dict):
        raise ReleaseError(f"the manifest of {str(folder)!r} has no privacy statement")
    try:
        stated_rho, stated_eps, delta = float(p["rho"]), float(p["epsilon"]), float(p["delta"])
    except (KeyError, TypeError, ValueError):
        raise ReleaseError(f"the manifest of {str(folder)!r} has an incomplete privacy statement") from None
    noise = manifest.get("mechanism", {}).get("noise", "gaussian")
    if not (0 < delta < 1) and not (noise == "discrete_laplace" and delta == 0):
        raise ReleaseError(f"the manifest of {str(folder)!r} states delta = {delta!r}")
    want = privacy_summary(plan, noise=noise, delta=delta)
    if not math.isclose(stated_rho, want["rho"], rel_tol=1e-9) or not math.isclose(
        stated_eps, want["epsilon"], rel_tol=1e-6
    ):
        raise ReleaseError(
            f"the manifest of {str(folder)!r} states rho = {stated_rho:.6g}, epsilon = "
            f"{stated_eps:.6g}, but its noise scales spend rho = {want['rho']:.6g}, epsilon = "
            f"{want['epsilon']:.6g}: the manifest was altered; refusing to use it"
        )
    unit = p.get("unit")
    if unit is not None:  # the per-person statement must be k² (k for pure ε) times the record one
        try:
            k = int(unit["max_records"])
            person = unit["per_person"]
            pure = person.get("pure_epsilon") is not None
            stated, want_p = (float(person["pure_epsilon"]), k * float(p["pure_epsilon"])) if pure else (
                float(person["rho"]), k * k * stated_rho)
        except (KeyError, TypeError, ValueError):
            raise ReleaseError(f"the manifest of {str(folder)!r} has an incomplete privacy unit") from None
        if k < 1 or not math.isclose(stated, want_p, rel_tol=1e-9):
            raise ReleaseError(
                f"the manifest of {str(folder)!r} states {stated:.6g} per person with up to {k} records, but "
                f"its noise scales spend {want_p:.6g}: the manifest was altered; refusing to use it"
            )


def _checked_plan(manifest: dict, folder: Path, verify: bool = True):
    """The plan a manifest describes, its fields validated and its stated privacy checked
    against its own noise scales; its array files (:mod:`._arrays`) read and, with ``verify``,
    checked against their digests."""
    from .._plan_file import check_plan_spec

    check_plan_spec(manifest, f"the manifest of {str(folder)!r}")
    try:
        spec = manifest.get("plan")
        if spec is not None:
            from ._arrays import arrays_in

            spec = arrays_in(spec, folder, lambda rel: _stated_digest(manifest, folder, rel, verify), _inside)
        if spec is not None:  # its own planner module only (and the targets reader for a targets plan)
            from ..planners._read import plan_from_dict

            plan = plan_from_dict(spec)
        else:
            plan = _residual_plan(manifest)
    except KeyError as exc:
        raise ReleaseError(f"the manifest of {str(folder)!r} lacks {exc}") from None
    except DPMatrixError as exc:
        raise ReleaseError(f"the manifest of {str(folder)!r} does not describe a valid plan: {exc}") from None
    except (TypeError, ValueError, IndexError) as exc:
        raise ReleaseError(f"the manifest of {str(folder)!r} does not describe a valid plan: {exc}") from None
    _check_privacy_consistent(manifest, plan, folder)
    if "targets" not in manifest:  # the targets planner (and its solvers) imported only when needed
        return plan
    from ..planners._targets_io import with_manifest_targets  # a targets plan keeps its report

    return with_manifest_targets(plan, manifest)


def _residual_plan(manifest: dict) -> Plan:
    """The ResidualPlanner plan of a manifest (its fields are the plan's, at the top level)."""
    from ..planners._residual.plan import PLAN_FORMAT, Plan

    spec = {
        "format": manifest.get("plan_format", PLAN_FORMAT),
        **{k: manifest[k] for k in ("domain", "workload", "strategies", "objective", "residuals")},
        "construction": manifest.get("construction", "centred"),
    }
    return Plan.from_dict(spec)
