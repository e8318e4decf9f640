"""A LanceDB row as a memtui record: crewAI 1.x memory, or any table's columns.

crewAI 1.x (``crewai/memory/storage/lancedb_storage.py``) writes one row per
memory: ``id``, ``content``, ``scope`` (a path such as ``/crew/research``),
``categories_str`` and ``metadata_str`` (JSON), ``importance`` (float),
``created_at`` and ``last_accessed`` (ISO text, naive UTC), ``source``,
``private`` (bool) and ``vector`` (fixed-size float32 list).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from memtui.sources.base import FIELD_SEPARATOR, SourceRecord

ID_PREFIX = "lance"
CREWAI_COLUMNS = frozenset({"id", "content", "scope", "categories_str", "metadata_str"})
TEXT_COLUMNS = ("content", "text", "memory", "document", "page_content", "data", "chunk")
ROWID = "_rowid"


def record_id_of(key: Any) -> str:
    return f"{ID_PREFIX}:{key}"


def key_of(record_id: str) -> str | None:
    prefix, sep, rest = str(record_id).partition(":")
    return rest if sep and prefix == ID_PREFIX and rest else None


def vector_column(schema: Any) -> tuple[str, int] | None:
    """The (name, dimension) of the table's float vector column (``vector`` first)."""
    import pyarrow as pa  # type: ignore[import-untyped]

    found = []
    for field in schema:
        kind = field.type
        if pa.types.is_fixed_size_list(kind) and pa.types.is_floating(kind.value_type):
            found.append((field.name, kind.list_size))
    found.sort(key=lambda f: f[0] != "vector")
    return found[0] if found else None


def is_crewai(columns: set[str]) -> bool:
    return CREWAI_COLUMNS <= columns


def text_column(schema: Any) -> str | None:
    """The column that holds a row's text: a known name, else the first text column."""
    import pyarrow as pa

    strings = [
        f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
    ]
    for name in TEXT_COLUMNS:
        if name in strings:
            return name
    rest = [n for n in strings if n != "id"]
    return rest[0] if rest else None


def id_column(schema: Any) -> str:
    """``id`` when the table has one, else Lance's own row id."""
    return "id" if "id" in schema.names else ROWID


def json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)} bytes>"
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def _loads(text: Any, default: Any) -> Any:
    if not isinstance(text, str) or not text:
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default


def utc_text(value: Any) -> str | None:
    """crewAI's naive ISO times are UTC: say so."""
    if not isinstance(value, str) or not value:
        return None
    if value.endswith("Z") or "+" in value[10:] or value[10:].count("-") > 0:
        return value
    return value + "+00:00"


def crewai_record(row: Mapping[str, Any], key: str) -> SourceRecord:
    categories = _loads(row.get("categories_str"), [])
    if not isinstance(categories, list):
        categories = []
    metadata = _loads(row.get("metadata_str"), {})
    return SourceRecord(
        id=record_id_of(key),
        tier="memories",
        record_type="memory",
        content=str(row.get("content") or ""),
        scope={
            "scope": str(row.get("scope") or "/"),
            "categories": [str(c) for c in categories],
            "source": str(row.get("source") or "") or None,
        },
        created_at=utc_text(row.get("created_at")),
        expires_at=None,
        state="live",
        metadata={
            "memory_id": row.get("id"),
            "importance": json_safe(row.get("importance")),
            "last_accessed": utc_text(row.get("last_accessed")),
            "private": bool(row.get("private", False)),
            "metadata": json_safe(metadata),
        },
    )


def table_record(
    row: Mapping[str, Any], key: str, *, table: str, text: str | None, skip: set[str]
) -> SourceRecord:
    fields = {k: json_safe(v) for k, v in row.items() if k not in skip}
    content = str(row.get(text) or "") if text else ""
    if not content:
        content = FIELD_SEPARATOR.join(str(v) for v in fields.values() if isinstance(v, str))
    created = row.get("created_at")
    return SourceRecord(
        id=record_id_of(key),
        tier=table,
        record_type="row",
        content=content,
        scope={},
        created_at=utc_text(created) if isinstance(created, str) else None,
        expires_at=None,
        state="live",
        metadata={"columns": fields},
    )
