"""How a record is kept as a row: its columns, canonical JSON, vector bytes, and the
row read back as a ``MemoryRecord``."""

from __future__ import annotations

import json
import sqlite3
import struct
from collections.abc import Sequence
from typing import Any

from memtui.core.records import MemoryRecord, read_metadata, read_row_text

_RECORD_COLUMNS = (
    "id, tier, record_type, content, profile_hash, engagement, run_id, tool_name, "
    "url_pattern, metadata, created_at, expires_at, refuted, signature"
)

_TEXT_COLUMNS = (
    "tier",
    "record_type",
    "content",
    "profile_hash",
    "engagement",
    "run_id",
    "tool_name",
    "url_pattern",
    "created_at",
    "expires_at",
    "signature",
)


def pack_vector(values: Sequence[float]) -> bytes:
    """Little-endian float32 bytes of a vector."""
    return struct.pack(f"<{len(values)}f", *values)


def unpack_vector(blob: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(blob) // 4}f", blob))


_CANONICAL_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _canonical(value: Any) -> str:
    # The same text as json.dumps(value, sort_keys=True, separators=(",", ":"),
    # ensure_ascii=False), without building an encoder per call (bulk ingest).
    if not value and isinstance(value, dict):
        return "{}"
    return _CANONICAL_ENCODER.encode(value)


def _row_to_record(row: sqlite3.Row) -> MemoryRecord:
    """A stored row as a record; what another writer left unreadable is named in
    ``damage`` (see ``read_row_text``, ``read_metadata``), never raised."""
    fields: dict[str, Any] = {}
    damage: list[str] = []
    for name in _TEXT_COLUMNS:
        value = row[name]
        if value.__class__ is not str and value is not None:
            value, problem = read_row_text(value)
            if problem is not None:
                damage.append(f"{name} {problem}")
        fields[name] = value
    metadata, problem = read_metadata(row["metadata"])
    if problem is not None:
        damage.append(problem)
    return MemoryRecord(
        id=row["id"],
        metadata=metadata,
        refuted=bool(row["refuted"]),
        damage=tuple(damage),
        **fields,
    )
