"""The ``--on-unknown`` option of ``release``; the engines themselves are opened by the release
workflow (:func:`dpmatrix._workflow.open_source`)."""

from __future__ import annotations

from ._common import CLIError


def _column_policies(text: str, option: str, policies) -> str | dict[str, str]:
    """Parse ``POLICY`` or ``col=policy,...`` for the CLI option *option*; every policy must be one
    of *policies* (a one-line :class:`CLIError` names the option and the allowed policies otherwise)."""
    text = text.strip()
    if "=" not in text:
        if text not in policies:
            raise CLIError(f"{option} must be one of {', '.join(policies)} or col=policy,..., got {text!r}")
        return text
    out: dict[str, str] = {}
    for part in text.split(","):
        col, eq, pol = part.partition("=")
        col, pol = col.strip(), pol.strip()
        if not eq or not col or pol not in policies:
            raise CLIError(f"{option}: bad entry {part!r}; write col=policy with policy in {', '.join(policies)}")
        out[col] = pol
    return out


def _on_unknown(text: str) -> str | dict[str, str]:
    from .._encode import POLICIES

    return _column_policies(text, "--on-unknown", POLICIES)


def _na_values(text: str | None) -> tuple[str, ...]:
    """``--na-values NA,?``: the markers, comma separated (blanks around them ignored)."""
    return tuple(dict.fromkeys(t.strip() for t in (text or "").split(",") if t.strip()))


def _missing(text: str | None) -> str | dict[str, str] | None:
    """``--missing category`` or ``--missing col=policy,...`` (policies of domain.MISSING_POLICIES)."""
    from .._domain import MISSING_POLICIES

    if not text:
        return None
    return _column_policies(text, "--missing", MISSING_POLICIES)
