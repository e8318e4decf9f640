"""What a Postgres store's own deletes and updates leave in its tables, measured.

LangGraph's ``PostgresStore.delete`` and mem0's pgvector delete are plain ``DELETE``s,
and every ``put`` that replaces an item leaves its old row version behind. The old
version keeps its text in the table's page until ``VACUUM`` prunes it, and pruning
does not zero the space it frees: it compacts the page's live tuples and leaves the
rest of the old bytes in the page's free space (measured on Postgres 16: pages
freshly written, or rewritten by ``VACUUM FULL``, have a free space of zeros; after a
delete and a ``VACUUM`` the free space of that page holds the bytes the compaction
did not overwrite). So the erasure gap of a Postgres store is, per table (and its
TOAST table, where long texts live):

- the dead row versions not yet vacuumed (the server's own count,
  ``pg_stat_all_tables.n_dead_tup``), and
- on a server whose files memtui can read, the pages whose free space is not zero,
  and how many bytes it holds (read from the heap files after a ``CHECKPOINT``:
  the free space is the page header's ``pd_lower`` .. ``pd_upper``).

``forget-gaps`` closes it by rewriting the tables (``VACUUM (FULL, ANALYZE)``), then
measures again: verified when no dead row version and no non-zero free space is left;
on a server whose files cannot be read, the rewrite is said, not verified.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memtui.sources.postgres.erasure import (
    SEGMENTS,
    PgErasure,
    flush_statistics,
    recount_dead_rows,
)
from memtui.sources.shapes import SourceError

PAGE = 8192
"""The server's block size (``block_size``; 8 KiB unless it was compiled otherwise)."""
PAGE_HEADER = 24
SCAN_LIMIT = 64 * 1024 * 1024
"""The most bytes of heap files the summary reads to measure the gap (``forget-gaps``
reads them all)."""


@dataclass
class TableGap:
    """The gap of one table: dead row versions, and (files read) free space not zero."""

    table: str
    dead_rows: int
    pages: int | None = None
    pages_with_remnants: int | None = None
    remnant_bytes: int | None = None

    @property
    def open(self) -> bool:
        return bool(self.dead_rows or self.remnant_bytes)


@dataclass
class GapReport:
    """The gap of the store's tables, and why their files were not read (if not)."""

    tables: list[TableGap] = field(default_factory=list)
    unread: str = ""

    @property
    def dead_rows(self) -> int:
        return sum(t.dead_rows for t in self.tables)

    @property
    def remnant_bytes(self) -> int:
        return sum(t.remnant_bytes or 0 for t in self.tables)

    @property
    def pages_with_remnants(self) -> int:
        return sum(t.pages_with_remnants or 0 for t in self.tables)

    @property
    def open(self) -> bool:
        return any(t.open for t in self.tables)

    def holding(self) -> list[str]:
        """The tables that hold a gap."""
        return [t.table for t in self.tables if t.open]

    def sentence(self) -> str:
        """The gap in words (without the command that clears it)."""
        parts = []
        if self.dead_rows:
            parts.append(f"{self.dead_rows} deleted or replaced row version(s) not yet vacuumed")
        if self.remnant_bytes:
            parts.append(
                f"{self.remnant_bytes} byte(s) of earlier rows in the free space of "
                f"{self.pages_with_remnants} page(s)"
            )
        where = ", ".join(self.holding())
        text = "; ".join(parts) + f" in {where}" if parts else "none"
        if self.unread:
            text += f" (the pages' free space was not read: {self.unread})"
        return text

    def to_dict(self) -> dict[str, object]:
        return {
            "dead_rows": self.dead_rows,
            "remnant_bytes": None if self.unread else self.remnant_bytes,
            "pages_with_remnants": None if self.unread else self.pages_with_remnants,
            "tables": self.holding(),
        }


def free_space_remnants(data: bytes) -> tuple[int, int, int]:
    """``(pages, pages whose free space is not zero, its non-zero bytes)`` of heap pages.

    A page's free space runs from ``pd_lower`` to ``pd_upper`` (offsets 12 and 14 of its
    header); a page never written (all zeros) or whose header does not make sense is
    counted as a page and not read further.
    """
    pages = len(data) // PAGE
    holding = 0
    remnants = 0
    view = memoryview(data)
    for number in range(pages):
        start = number * PAGE
        lower, upper = struct.unpack_from("<HH", data, start + 12)
        if not PAGE_HEADER <= lower <= upper <= PAGE:
            continue
        hole = view[start + lower : start + upper]
        nonzero = len(hole) - bytes(hole).count(0)
        if nonzero:
            holding += 1
            remnants += nonzero
    return pages, holding, remnants


@dataclass(frozen=True)
class OutsideGap:
    """What a store keeps outside its tables of records it deleted (mem0's history.db,
    which keeps a deleted memory's text), for ``forget-gaps`` to clear with the tables."""

    place: str
    """Where, in a word or two (``history.db``)."""
    key: str
    """Its count's name in the preview and the audit event's plan."""
    count: int
    action: str
    """What clearing it does, for the question (``clear the text of ...``)."""
    done: str
    """What was done, for the outcome line."""


class PgGaps:
    """Measures and clears the gap of a store's tables, on the store's connection."""

    def __init__(self, erasure: PgErasure, tables: Sequence[str]) -> None:
        self.erasure = erasure
        self.tables = [t for t in tables if t in erasure.columns]

    def dead_rows(self) -> dict[str, int]:
        """Dead row versions per table (its TOAST table's counted with it)."""
        names = [self.erasure.qualified(t) for t in self.tables]
        rows = self.erasure.pg.query(
            "SELECT n.name, coalesce(s.n_dead_tup, 0) + coalesce(ts.n_dead_tup, 0) "
            "FROM unnest(%s::text[]) WITH ORDINALITY AS n(name, i) "
            "JOIN pg_catalog.pg_class AS c ON c.oid = to_regclass(n.name) "
            "LEFT JOIN pg_catalog.pg_stat_all_tables AS s ON s.relid = c.oid "
            "LEFT JOIN pg_catalog.pg_stat_all_tables AS ts ON ts.relid = c.reltoastrelid "
            "ORDER BY n.i",
            [names],
        )
        by_name = {str(name): int(dead) for name, dead in rows}
        return {t: by_name.get(self.erasure.qualified(t), 0) for t in self.tables}

    def heap_files(self, table: str) -> list[str]:
        """The table's and its TOAST table's main files, relative to the data directory."""
        rows = self.erasure.pg.query(
            "SELECT pg_relation_filepath(c.oid), pg_relation_filepath(nullif(c.reltoastrelid, 0))"
            " FROM pg_catalog.pg_class AS c WHERE c.oid = to_regclass(%s)",
            [self.erasure.qualified(table)],
        )
        return [str(p) for p in (rows[0] if rows else ()) if p]

    def measure(self, *, limit: int | None = None, checkpoint: bool = True) -> GapReport:
        """The gap now: dead rows always; the free space when the files are readable (and,
        with ``limit``, no larger than it). Without ``checkpoint`` the files are read as
        the server last wrote them (an inspection does not make a busy server flush its
        buffers): pages changed since its last checkpoint may show an older state."""
        report = GapReport()
        dead = self.dead_rows()
        root, why = self.erasure.data_directory()
        if root is not None and checkpoint:
            try:
                self.erasure.pg.run(lambda conn: conn.execute("CHECKPOINT"))
            except SourceError as exc:
                root, why = None, f"a CHECKPOINT is not allowed to this user ({exc})"
        if root is not None and limit is not None:
            size = sum(self._size(root, t) for t in self.tables)
            if size > limit:
                root, why = None, f"the tables' files are over {limit // 2**20} MiB"
        report.unread = why if root is None else ""
        for table in self.tables:
            gap = TableGap(table=table, dead_rows=dead.get(table, 0))
            if root is not None:
                gap.pages, gap.pages_with_remnants, gap.remnant_bytes = 0, 0, 0
                for part in self._segments(root, table):
                    pages, holding, remnants = free_space_remnants(part.read_bytes())
                    gap.pages += pages
                    gap.pages_with_remnants += holding
                    gap.remnant_bytes += remnants
            report.tables.append(gap)
        return report

    def _segments(self, root: Path, table: str) -> list[Path]:
        parts = []
        for relative in self.heap_files(table):
            base = root / relative
            for segment in range(SEGMENTS):
                part = base if segment == 0 else Path(f"{base}.{segment}")
                if not part.exists():
                    break
                parts.append(part)
        return parts

    def _size(self, root: Path, table: str) -> int:
        return sum(part.stat().st_size for part in self._segments(root, table))

    def rewrite(self, tables: Sequence[str]) -> str:
        """``VACUUM (FULL, ANALYZE)`` of ``tables``, with no statement timeout (a rewrite
        costs the whole table and its indexes)."""
        names = ", ".join(self.erasure.qualified(t) for t in tables)
        timeout = self.erasure.pg.statement_timeout_ms

        def run(conn: Any) -> None:
            conn.execute("SET statement_timeout = 0")
            try:
                flush_statistics(conn)
                conn.execute(f"VACUUM (FULL, ANALYZE) {names}")
                recount_dead_rows(conn, names)
            finally:
                conn.execute(f"SET statement_timeout = {int(timeout)}")

        self.erasure.pg.run(run)
        return f"VACUUM (FULL, ANALYZE) {', '.join(tables)}"
