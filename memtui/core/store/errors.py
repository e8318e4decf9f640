"""``MemoryStoreError``, and the checks of a caller's arguments that raise it."""

from __future__ import annotations

from typing import Any


class MemoryStoreError(Exception):
    """A refused or impossible store operation, with a message meant for the operator."""


def _require_text(**values: Any) -> None:
    for name, value in values.items():
        if not isinstance(value, str) or not value.strip():
            raise MemoryStoreError(f"{name} is required and must be non-empty text")


def _shown(text: str, limit: int = 120) -> str:
    """Text read from the file (an embedder's name), cut short for a message."""
    return text if len(text) <= limit else text[:limit] + "..."


def _require_reason(reason: str) -> None:
    if not isinstance(reason, str) or not reason.strip():
        raise MemoryStoreError("a reason is required: say why, it goes into the audit log")
