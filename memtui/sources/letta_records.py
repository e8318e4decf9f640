"""A Letta passage or block as a memtui record: one mapping for every Letta store.

Letta keeps the same ORM tables in its SQLite file (``memtui.sources.letta``) and in
a server's Postgres (``memtui.sources.postgres.letta``); both read the same columns
and turn them into records here, so the ids, tiers, scopes, states and metadata
are one thing whichever database holds them:

- an archival passage is ``archival:<passage id>``, scoped by ``archive`` (the
  archive's name) and ``tag`` (its JSON list of tags);
- a core memory block is ``core:<block id>``, scoped by ``label``;
- ``is_deleted`` (Letta's soft delete) is the state ``deleted``.

The values come as the database gives them: JSON as text (SQLite) or already
parsed (Postgres's ``json``), times as text or datetimes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memtui.sources.base import DetailSection, SourceRecord, decode_id, encode_id

TIERS = ("archival", "core")
PART = {"archival": 0, "core": 1}
"""Each tier's part of the two-table view: 0 for passages, 1 for blocks."""
ID_HINT = (
    "a Letta record's id is archival:PASSAGE_ID or core:BLOCK_ID, as `memtui records` lists it"
)
BLOCK_REFUSAL = (
    "core memory blocks are the agent's working context and are not forgotten from "
    "memtui; forget archival passages"
)


def json_value(value: Any) -> Any:
    """A JSON column's value: text parsed (text that is not JSON stays as it is), a value
    the driver already parsed as it is."""
    if value is None or not isinstance(value, str | bytes | bytearray):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def tag_list(value: Any) -> list[str]:
    """A passage's ``tags`` column as a list of text (anything but a list: no tags)."""
    parsed = json_value(value)
    return [str(t) for t in parsed] if isinstance(parsed, list) else []


def embedding_dim(config: Any) -> int | None:
    """The real dimension of a passage's embedding (``embedding_config.embedding_dim``):
    Letta zero-pads every embedding to 4096 components."""
    parsed = json_value(config)
    dim = parsed.get("embedding_dim") if isinstance(parsed, dict) else None
    return dim if isinstance(dim, int) and not isinstance(dim, bool) and dim > 0 else None


def moment_text(value: Any) -> Any:
    """A time as the record shows it: a datetime as ISO-8601 text, text as it is."""
    return value.isoformat() if isinstance(value, datetime) else value


def view_key(record_id: str) -> tuple[int, str] | None:
    """``(part, id in its table)`` of a Letta record id; None when it is not one."""
    for tier, part in PART.items():
        parts = decode_id(tier, str(record_id), 1)
        if parts is not None:
            return part, parts[0]
    return None


def record_id(part: int, rid: str) -> str:
    """The record id of a row of part ``part`` (0: a passage, 1: a block)."""
    return encode_id(TIERS[part], str(rid))


def passage_record(row: Sequence[Any]) -> SourceRecord:
    """An ``archival_passages`` row: id, text, embedding_config, metadata_, tags,
    created_at, updated_at, is_deleted, archive_id, the archive's name, stored dims."""
    pid, text, config, meta, tags, created, updated, deleted, archive_id, archive, stored = row
    parsed = json_value(config)
    return SourceRecord(
        id=encode_id("archival", pid),
        tier="archival",
        record_type="passage",
        content=text or "",
        scope={"archive": archive, "tag": tag_list(tags), "label": None},
        created_at=moment_text(created),
        expires_at=None,
        state="deleted" if deleted else "live",
        metadata={
            "passage_id": pid,
            "archive_id": archive_id,
            "metadata": json_value(meta),
            "embedding_model": parsed.get("embedding_model") if isinstance(parsed, dict) else None,
            "embedding_dim": embedding_dim(parsed),
            "stored_dims": stored,
            "updated_at": moment_text(updated),
        },
    )


def block_record(row: Sequence[Any]) -> SourceRecord:
    """A ``block`` row: id, label, value, limit, description, metadata_, created_at,
    updated_at, is_deleted, version."""
    bid, label, value, limit, description, meta, created, updated, deleted, version = row
    return SourceRecord(
        id=encode_id("core", bid),
        tier="core",
        record_type="block",
        content=value or "",
        scope={"archive": None, "tag": [], "label": label},
        created_at=moment_text(created),
        expires_at=None,
        state="deleted" if deleted else "live",
        metadata={
            "block_id": bid,
            "description": description,
            "limit": limit,
            "metadata": json_value(meta),
            "version": version,
            "updated_at": moment_text(updated),
        },
    )


def record_notes(record: SourceRecord) -> str:
    """The records list's notes column: a passage's model and tags, a block's version."""
    if record.tier == "archival":
        tags = ", ".join(record.scope.get("tag") or [])
        return f"{record.metadata.get('embedding_model')} · tags: {tags or 'none'}"
    return f"version {record.metadata.get('version')}"


def tag_cache_filter(key: str, value: Any, column: str) -> tuple[str, list[Any]] | None:
    """The ``tag`` filter on memtui's index of a Letta store, whose tag column holds a
    JSON list (``FilterSql``); other keys: None, the index's own equality."""
    if key != "tag":
        return None
    return (
        f"EXISTS (SELECT 1 FROM json_each(coalesce({column}, '[]')) WHERE json_each.value = ?)",
        [str(value)],
    )


EXPIRY_RULE = (
    "no expiry: a passage or block is live until deleted; soft-deleted ones "
    "(is_deleted) are shown as deleted and left out by default"
)


def record_sections(
    record: SourceRecord, block_history: Sequence[Sequence[Any]] | None
) -> list[DetailSection]:
    """The detail of a passage (its embedding's real and stored dimensions) or of a core
    block (``block_history``: its earlier values, ``(sequence_number, value, actor_type,
    actor_id, created_at)`` rows; None when the store has no history table)."""
    meta = record.metadata
    if record.tier == "archival":
        return [
            DetailSection(
                title="embedding",
                columns=("model", "real dims", "stored dims (padded)"),
                rows=[(meta["embedding_model"], meta["embedding_dim"], meta["stored_dims"])],
            )
        ]
    if block_history is None:
        return []
    return [
        DetailSection(
            title="block history (earlier values stay on file)",
            columns=("#", "value", "actor", "actor id", "at"),
            rows=[tuple(r) for r in block_history],
            note=None if block_history else "no history",
        )
    ]
