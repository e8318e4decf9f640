"""Who an audited action is attributed to."""

from __future__ import annotations

import getpass

from memtui.config import current


def resolve_operator(explicit: str | None = None) -> str:
    """The operator: the explicit name, else ``MEMTUI_OPERATOR``, else the OS user."""
    for candidate in (explicit, current().operator):
        if candidate and candidate.strip():
            return candidate.strip()
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
