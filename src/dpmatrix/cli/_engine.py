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
