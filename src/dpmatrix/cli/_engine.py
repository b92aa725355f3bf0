"""The ``--on-unknown`` option of ``release``; the engines themselves are opened by the release
workflow (:func:`dpmatrix.workflow.open_source`)."""

from __future__ import annotations

from ._common import CLIError


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
