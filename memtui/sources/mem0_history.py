"""mem0's ``history.db``: its rows read with the columns each release gave them, and
cleared by a forget."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memtui.config import current
from memtui.sources.base import DetailSection, FileIdentity, SourceError
from memtui.sources.mem0_payload import text as _text
from memtui.sources.qdrant import BUSY_TIMEOUT_MS, sqlite_uri, stat_key

HISTORY_FILE = "history.db"
# logical column -> the names mem0 releases gave it, newest first
HISTORY_COLUMNS: dict[str, tuple[str, ...]] = {
    "id": ("id",),
    "memory_id": ("memory_id",),
    "old_memory": ("old_memory", "prev_value"),
    "new_memory": ("new_memory", "new_value"),
    "event": ("event",),
    "created_at": ("created_at", "timestamp"),
    "updated_at": ("updated_at",),
    "is_deleted": ("is_deleted",),
    "actor_id": ("actor_id",),
    "role": ("role",),
}
TEXT_COLUMNS = ("old_memory", "new_memory")


@dataclass(frozen=True)
class HistoryRow:
    rowid: int
    id: Any
    memory_id: str
    old_memory: str | None
    new_memory: str | None
    event: str | None
    created_at: Any
    updated_at: Any
    is_deleted: Any
    actor_id: Any
    role: Any

    def texts(self) -> list[str]:
        return [t for t in (self.old_memory, self.new_memory) if isinstance(t, str) and t]


class Mem0History:
    """mem0's ``history.db``, read with the columns it really has."""

    def __init__(self, path: Path, *, writable: bool, found: str) -> None:
        self.path = path
        self.found = found
        self.writable = writable
        self.identity = FileIdentity.of(path)  # before it is opened
        try:
            mode = "rw" if writable else "ro"
            self.conn = sqlite3.connect(
                sqlite_uri(path, mode=mode), uri=True, isolation_level=None, check_same_thread=False
            )
            self.conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            if writable:
                self.conn.execute("PRAGMA secure_delete = ON")
            else:
                self.conn.execute("PRAGMA query_only = ON")
            tables = {
                r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
        except sqlite3.Error as exc:
            raise SourceError(f"cannot open the mem0 history {path}: {exc}") from None
        if "history" not in tables:
            self.conn.close()
            raise SourceError(f"{path} has no history table: not a mem0 history.db")
        have = [r[1] for r in self.conn.execute("PRAGMA table_info(history)")]
        self.columns: dict[str, str | None] = {
            logical: next((c for c in names if c in have), None)
            for logical, names in HISTORY_COLUMNS.items()
        }
        if not self.columns["memory_id"] or not (
            self.columns["old_memory"] or self.columns["new_memory"]
        ):
            self.conn.close()
            raise SourceError(
                f"{path}: its history table has no memory_id/old_memory/new_memory columns "
                f"(found: {', '.join(have)})"
            )
        self.has_messages = "messages" in tables

    def _select(self) -> str:
        cols = ", ".join(
            f'"{self.columns[k]}"' if self.columns[k] else "NULL" for k in HISTORY_COLUMNS
        )
        return f"SELECT rowid, {cols} FROM history"

    def _order(self) -> str:
        created = self.columns["created_at"]
        updated = self.columns["updated_at"]
        keys = [f'"{created}"' if created else None, f'"{updated}"' if updated else None, "rowid"]
        return " ORDER BY " + ", ".join(k for k in keys if k)

    def rows(self, memory_id: str | None = None) -> list[HistoryRow]:
        sql = self._select()
        params: list[Any] = []
        if memory_id is not None:
            sql += f' WHERE "{self.columns["memory_id"]}" = ?'
            params.append(memory_id)
        try:
            found = self.conn.execute(sql + self._order(), params).fetchall()
        except sqlite3.Error as exc:
            raise SourceError(f"reading {self.path} failed: {exc}") from None
        return [HistoryRow(r[0], *r[1:]) for r in found if r[2] is not None]

    def by_memory(self) -> dict[str, list[HistoryRow]]:
        out: dict[str, list[HistoryRow]] = {}
        for row in self.rows():
            out.setdefault(str(row.memory_id), []).append(row)
        return out

    def memory_ids(self) -> set[str]:
        column = self.columns["memory_id"]
        return {
            str(r[0])
            for r in self.conn.execute(f'SELECT DISTINCT "{column}" FROM history')
            if r[0] is not None
        }

    def messages(self) -> int | None:
        if not self.has_messages:
            return None
        return self.conn.execute("SELECT count(*) FROM messages").fetchone()[0]

    def messages_containing(self, texts: Sequence[str]) -> int:
        if not self.has_messages or not texts:
            return 0
        have = [r[1] for r in self.conn.execute("PRAGMA table_info(messages)")]
        if "content" not in have:
            return 0
        count = 0
        for text in {t for t in texts if t}:
            count += self.conn.execute(
                "SELECT count(*) FROM messages WHERE instr(content, ?) > 0", (text,)
            ).fetchone()[0]
        return count

    def clear(self, memory_ids: Sequence[str]) -> int:
        """Clear the text of every history row of these memories (the events stay)."""
        sets = ", ".join(f'"{self.columns[c]}" = NULL' for c in TEXT_COLUMNS if self.columns[c])
        where = f'"{self.columns["memory_id"]}" = ?'
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            cleared = 0
            for memory_id in memory_ids:
                cleared += conn.execute(
                    f"UPDATE history SET {sets} WHERE {where}", (memory_id,)
                ).rowcount
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return cleared

    def state_key(self) -> Any:
        return [stat_key(self.path), stat_key(Path(str(self.path) + "-wal"))]

    def close(self) -> None:
        self.conn.close()


def history_candidates(folder: Path | None, explicit: Path | None) -> list[tuple[Path, str]]:
    if explicit is not None:
        return [(explicit, "given with --mem0-history")]
    out: list[tuple[Path, str]] = []
    if folder is not None:
        out.append((folder / HISTORY_FILE, "inside the Qdrant folder"))
        out.append((folder.parent / HISTORY_FILE, "next to the Qdrant folder"))
    env = current().mem0_dir
    if env:
        out.append((env / HISTORY_FILE, "in $MEM0_DIR"))
    out.append((Path.home() / ".mem0" / HISTORY_FILE, "in ~/.mem0"))
    return out


def history_detail(
    history: Mem0History | None, memory_id: str, notes: Sequence[str] = ()
) -> DetailSection:
    """A memory's ADD/UPDATE/DELETE events in mem0's history (a record's detail); without
    a history, why there is none."""
    if history is None:
        return DetailSection(
            title="mem0 history",
            note="no history.db found for this store: " + "; ".join(notes)
            if notes
            else "no history.db found for this store (give it with --mem0-history)",
        )
    rows = history.rows(memory_id)
    texts = sum(1 for r in rows if r.texts())
    return DetailSection(
        title=f"mem0 history ({history.path})",
        columns=("event", "at", "old memory", "new memory", "actor", "role", "deleted"),
        rows=[
            (
                r.event,
                _text(r.updated_at or r.created_at),
                r.old_memory,
                r.new_memory,
                r.actor_id,
                r.role,
                bool(r.is_deleted),
            )
            for r in rows
        ],
        note=(
            f"{texts} of {len(rows)} history row(s) still hold text"
            if rows
            else "no history rows for this memory"
        ),
    )
