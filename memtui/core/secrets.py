"""Masking metadata fields whose names look like secrets.

Agents store what they capture: session cookies, API keys, passwords. Every
view and every ``--json`` output shows such fields masked unless the operator
reveals one explicitly, and each reveal is audited (``MemoryStore.reveal``).
"""

from __future__ import annotations

import re
from typing import Any

SECRET_NAME = re.compile(
    r"passw(or)?d|passphrase|(^|[_-])pass($|[_-])|pwd|secret|token|api[_-]?key|apikey|credential|cookie|authorization"
    r"|private[_-]?key|session[_-]?id|bearer",
    re.IGNORECASE,
)

MASK = "••••••••"


def is_secret_key(name: str) -> bool:
    """Whether a metadata field name looks like it holds a secret."""
    return bool(SECRET_NAME.search(name))


def masked_value(value: Any) -> str:
    """What a masked field shows: never the value, nor its length."""
    return f"{MASK} (masked)"


def mask_metadata(metadata: Any, *, path: str = "") -> Any:
    """A copy of ``metadata`` with every secret-named field masked, at any depth."""
    if isinstance(metadata, dict):
        out: dict[str, Any] = {}
        for key, value in metadata.items():
            where = f"{path}.{key}" if path else str(key)
            if is_secret_key(str(key)) and value not in (None, "", [], {}):
                out[key] = masked_value(value)
            else:
                out[key] = mask_metadata(value, path=where)
        return out
    if isinstance(metadata, list):
        return [mask_metadata(item, path=f"{path}[{i}]") for i, item in enumerate(metadata)]
    return metadata


def secret_paths(metadata: Any, *, path: str = "") -> list[str]:
    """Dotted paths of every secret-named field that holds a value."""
    found: list[str] = []
    if isinstance(metadata, dict):
        for key, value in metadata.items():
            where = f"{path}.{key}" if path else str(key)
            if is_secret_key(str(key)) and value not in (None, "", [], {}):
                found.append(where)
            else:
                found.extend(secret_paths(value, path=where))
    elif isinstance(metadata, list):
        for i, item in enumerate(metadata):
            found.extend(secret_paths(item, path=f"{path}[{i}]"))
    return found


def value_at(metadata: Any, dotted: str) -> Any:
    """The value at a path produced by ``secret_paths``; KeyError if absent."""
    current = metadata
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", dotted):
        if part.startswith("["):
            index = int(part[1:-1])
            if not isinstance(current, list) or index >= len(current):
                raise KeyError(dotted)
            current = current[index]
        else:
            if not isinstance(current, dict) or part not in current:
                raise KeyError(dotted)
            current = current[part]
    return current
