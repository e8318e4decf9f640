"""The audit log: hash-chained, append-only events, written in the transaction of
the change they record."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from memtui.core.operator import resolve_operator
from memtui.core.records import read_row_text
from memtui.core.store.connection import StoreConnection
from memtui.core.store.rows import _canonical

GENESIS_HASH = "0" * 64

AUDIT_TEXT_COLUMNS = (
    "at",
    "operator",
    "action",
    "record_ids",
    "tier",
    "record_type",
    "signature",
    "reason",
    "details",
    "prev_hash",
    "hash",
)


def audit_value_problem(row: dict[str, Any]) -> str | None:
    """Why an audit event's stored values cannot be hashed as memtui wrote them: a
    column that is not text (a BLOB reason, say), which only another writer stores."""
    for name in AUDIT_TEXT_COLUMNS:
        problem = read_row_text(row.get(name))[1]
        if problem is not None:
            return f"its {name} {problem}: memtui writes text there, so another program wrote it"
    return None


def audit_hash(prev_hash: str, row: dict[str, Any]) -> str:
    """The chained hash of one audit event over its stored column values."""
    body = [
        prev_hash,
        row["at"],
        row["operator"],
        row["action"],
        row["record_ids"],
        row["tier"],
        row["record_type"],
        row["signature"],
        row["reason"],
        row["details"],
    ]
    return hashlib.sha256(_canonical(body).encode("utf-8")).hexdigest()


def _audit_row(row: sqlite3.Row) -> dict[str, Any]:
    """An audit event with its JSON columns decoded; a value another writer stored that
    is not text, or not JSON, is kept as its text (``verify_audit`` reports the event)."""
    data = dict(row)
    for name in AUDIT_TEXT_COLUMNS:
        if name in data:
            data[name] = read_row_text(data[name])[0]
    for name in ("record_ids", "details"):
        try:
            data[name] = json.loads(data[name])
        except (TypeError, ValueError, RecursionError):
            pass
    return data


class AuditLog(StoreConnection):
    """Appends, reads and verifies the audit chain."""

    default_operator: str | None  # who an event names when its writer names no one
    last_event_id: int | None  # the newest event this store appended

    def _append_audit(
        self,
        *,
        action: str,
        record_ids: Sequence[int | str],
        operator: str | None,
        tier: str | None = None,
        record_type: str | None = None,
        signature: str | None = None,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> int:
        """Append one chained audit event; call only inside a write transaction."""
        last = self._conn.execute(
            "SELECT hash FROM audit_events ORDER BY id DESC LIMIT 1"
        ).fetchone()
        prev_hash = last[0] if last else GENESIS_HASH
        row = {
            "at": self.now_text(),
            "operator": resolve_operator(operator or self.default_operator),
            "action": action,
            # Native ids are integers; a foreign store's audit log names string ids.
            "record_ids": _canonical([i if isinstance(i, str) else int(i) for i in record_ids]),
            "tier": tier,
            "record_type": record_type,
            "signature": signature,
            "reason": reason,
            "details": _canonical(details or {}),
        }
        digest = audit_hash(prev_hash, row)
        cursor = self._conn.execute(
            "INSERT INTO audit_events (at, operator, action, record_ids, tier, record_type, "
            "signature, reason, details, prev_hash, hash) VALUES "
            "(:at, :operator, :action, :record_ids, :tier, :record_type, :signature, :reason, "
            ":details, :prev_hash, :hash)",
            {**row, "prev_hash": prev_hash, "hash": digest},
        )
        event_id = cursor.lastrowid
        assert event_id is not None  # set by every INSERT
        self.last_event_id = event_id
        return event_id

    def audit_events(
        self, *, limit: int | None = None, before_id: int | None = None
    ) -> list[dict[str, Any]]:
        """Audit events, newest first, with JSON columns decoded."""
        sql = "SELECT * FROM audit_events"
        params: list[Any] = []
        if before_id is not None:
            sql += " WHERE id < ?"
            params.append(int(before_id))
        sql += " ORDER BY id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [_audit_row(row) for row in self.query(sql, params)]

    def audit_head(self) -> dict[str, Any] | None:
        rows = self.query("SELECT id, hash FROM audit_events ORDER BY id DESC LIMIT 1")
        return {"id": rows[0][0], "hash": rows[0][1]} if rows else None

    def verify_audit(self) -> str | None:
        """None when the hash chain holds, else a description of the first broken link."""
        prev_hash = GENESIS_HASH
        prev_id = 0
        for row in self.query("SELECT * FROM audit_events ORDER BY id"):
            data = dict(row)
            unhashable = audit_value_problem(data)
            if unhashable is not None:
                return f"event #{data['id']}: {unhashable}"
            if data["prev_hash"] != prev_hash:
                after = f"event #{prev_id}" if prev_id else "the start of the log"
                return (
                    f"event #{data['id']}: its prev_hash does not match {after} "
                    "(an event was removed, inserted or rewritten)"
                )
            if audit_hash(prev_hash, data) != data["hash"]:
                return f"event #{data['id']}: its contents do not match its hash (edited)"
            prev_hash = data["hash"]
            prev_id = data["id"]
        # audit_events is AUTOINCREMENT: sqlite_sequence keeps the largest id written.
        sequence = self.query("SELECT seq FROM sqlite_sequence WHERE name = 'audit_events'")
        written = int(sequence[0][0]) if sequence else 0
        if written > prev_id:
            return (
                f"the newest events were deleted (the log ends at #{prev_id}, "
                f"events up to #{written} were written)"
            )
        return None
