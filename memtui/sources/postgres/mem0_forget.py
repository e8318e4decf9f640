"""Forgetting in a mem0 pgvector collection: memories (row, vector and payload) in one
transaction, and the text of their history rows when the history is attached.

``forget`` (a memory) and ``forget-scope user_id=… / agent_id=… / run_id=…`` (every
memory whose payload names that session id, expired ones too: the keys of the
Qdrant-backed mem0 source) run one read-write transaction that locks the rows
(``SELECT ... FOR UPDATE`` in id order) and deletes them: a memory is one row of the
collection, its vector and payload with it. Any failure rolls the whole transaction
back. With ``--mem0-history`` the text of every history row of the memories is
cleared after the commit (``Mem0History.clear``: the events stay) and the history
file vacuumed and read for the bytes, as the Qdrant-backed mem0 forget does. The
purge of the collection and its checks follow (``memtui.sources.postgres.erasure``).

What is looked for afterwards is the memory's text (``data``, ``text_lemmatized``)
and its history's texts, not every string of the payload: the session ids and the
times are shared with the memories that stay.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memtui.sources.base import SourceError, SourceRecord
from memtui.sources.postgres.forget import (
    TOASTED,
    block_of,
    forgotten,
    in_one_transaction,
    note_blocks,
    vector_probes,
)
from memtui.sources.postgres.gaps import OutsideGap

if TYPE_CHECKING:
    from memtui.sources.mem0_history import Mem0History

TEXT_KEYS = ("data", "text_lemmatized")
"""The payload keys holding the memory's text (what a forget checks is gone)."""
PROBE_LIMIT = 256
"""The most bytes of one text the history file is read for (as the Qdrant forget)."""


class Mem0PgvectorForget:
    """The forget of ``Mem0PgvectorSource`` (mixed in before ``PostgresSource``)."""

    forget_implemented = True

    if TYPE_CHECKING:  # what the source (``Mem0PgvectorSource``) gives this
        pg: Any
        _table: str
        table_name: str
        vectors: Any
        history: Mem0History | None

        def get(self, record_id: str) -> SourceRecord | None: ...
        def forget_reach(self) -> str: ...
        def history_gap_ids(self) -> list[str]: ...

    def forget_preview(self, record_id: str) -> dict[str, Any]:
        record = self.get(record_id)
        if record is None:
            raise SourceError(f"no record with id {record_id}")
        memory_id = str(record.metadata["memory_id"])
        vectors = self.pg.query(
            f"SELECT count(vector) FROM {self._table} WHERE id = %s::uuid", [memory_id]
        )[0][0]
        counts: dict[str, int] = {"rows": 1, "vectors": int(vectors)}
        history = ""
        if self.history is not None:
            rows = self.history.rows(memory_id)
            counts["history_rows"] = len(rows)
            counts["history_rows_with_text"] = sum(1 for r in rows if r.texts())
            history = (
                f", the text of its {len(rows)} history row(s) cleared (the events stay) and "
                "the history file vacuumed"
            )
        return {
            "records": [record.id],
            "rule": (
                f"The memory's row of {self.table_name} (its vector and payload) is deleted in "
                f"one transaction{history}; {self.forget_reach()}"
            ),
            "counts": counts,
        }

    def forget_scope_rule(self, key: str) -> str:
        history = (
            ", the text of their history rows is cleared (the events stay)"
            if self.history is not None
            else ""
        )
        return (
            f"Every memory whose {key} is this one, expired ones too, is deleted (its row: "
            f"vector and payload) in one transaction{history}, and memtui's cached copy goes "
            f"too; {self.forget_reach()}"
        )

    def _apply_forget(self, record: SourceRecord) -> dict[str, Any]:
        return self._apply_forget_many([record])

    def _apply_forget_many(self, records: Sequence[SourceRecord]) -> dict[str, Any]:
        """Delete the memories' rows in one transaction; check they are gone; clear their
        history's text."""
        ids = [str(r.metadata["memory_id"]) for r in records]
        table = self._table

        pages: dict[str, list[Any]] = {self.table_name: [], TOASTED: []}

        def delete(conn: Any) -> tuple[list[Any], int]:
            rows = conn.execute(
                f"SELECT payload, vector::real[], {block_of('payload', 'vector')} FROM {table} "
                "AS t WHERE id = ANY(%s::uuid[]) ORDER BY id FOR UPDATE",
                [ids],
            ).fetchall()
            note_blocks(pages, self.table_name, rows)
            removed = conn.execute(f"DELETE FROM {table} WHERE id = ANY(%s::uuid[])", [ids])
            return rows, removed.rowcount

        rows, removed = in_one_transaction(self.pg, delete)
        left = self.pg.query(f"SELECT count(*) FROM {table} WHERE id = ANY(%s::uuid[])", [ids])
        texts = [
            value
            for payload, *_ in rows
            if isinstance(payload, dict)
            for key in TEXT_KEYS
            if isinstance(value := payload.get(key), str)
        ]
        checks = {"row_gone": not left[0][0]}
        details: dict[str, Any] = {"rows_removed": removed}
        if self.history is not None:
            texts += [t for m in ids for r in self.history.rows(m) for t in r.texts()]
            history_checks, history_details = self._clear_history(ids, texts)
            checks.update(history_checks)
            details.update(history_details)
        embeddings = [row[1] for row in rows]
        return forgotten(
            records,
            texts,
            vector_probes(self.table_name, "vector", self.vectors.kind, embeddings),
            checks,
            details,
            pages,
        )

    def outside_gap(self) -> OutsideGap | None:
        """The memories mem0 deleted whose text the attached history still holds."""
        if self.history is None:
            return None
        ids = self.history_gap_ids()
        if not ids:
            return None
        rows = sum(1 for m in ids for r in self.history.rows(m) if r.texts())
        memories = f"{len(ids)} deleted memor{'y' if len(ids) == 1 else 'ies'}"
        return OutsideGap(
            place="history.db",
            key="history_memories_with_text",
            count=len(ids),
            action=(
                f"clear the text of {memories} in history.db ({rows} history rows; "
                "the events stay) and purge its freed pages"
            ),
            done=f"cleared the history text of {memories}",
        )

    def clear_outside_gap(self) -> tuple[dict[str, bool], dict[str, Any], str]:
        """Clear the history text of the memories mem0 deleted (the ones still gone from
        the collection now), as a forget clears a memory's."""
        assert self.history is not None
        ids = self.history_gap_ids()
        texts = [t for m in ids for r in self.history.rows(m) for t in r.texts()]
        checks, details = self._clear_history(ids, texts)
        return checks, details, f"cleared the text of {len(ids)} memories' history rows"

    def _clear_history(
        self, memory_ids: Sequence[str], texts: Sequence[str]
    ) -> tuple[dict[str, bool], dict[str, Any]]:
        """Clear the text of the memories' history rows, vacuum the history file and read it
        for the forgotten bytes (beyond the other memories' equal texts). The collection's
        delete is committed: a failure here is a failed check, not a raise."""
        from memtui.sources.mem0_history import TEXT_COLUMNS
        from memtui.sources.qdrant.folder import purge_sqlite

        history = self.history
        assert history is not None
        details: dict[str, Any] = {
            "messages_with_same_text": history.messages_containing(sorted(set(texts)))
        }
        try:
            details["history_rows_cleared"] = history.clear(memory_ids)
        except sqlite3.Error as exc:
            details["history_problem"] = str(exc)[:300]
            return {"history_text_cleared": False}, details
        left = [r for m in memory_ids for r in history.rows(m) if r.texts()]
        checks = {"history_text_cleared": not left}
        probes = [t.encode("utf-8")[:PROBE_LIMIT] for t in dict.fromkeys(texts)]
        columns = [("history", name) for c in TEXT_COLUMNS if (name := history.columns[c])]
        file_checks, file_details = purge_sqlite(history.conn, history.path, probes, columns)
        checks.update(file_checks)
        details.update(file_details)
        return checks, details
