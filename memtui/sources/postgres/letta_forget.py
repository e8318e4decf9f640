"""Forgetting in a Letta server's Postgres: archival passages with their tag rows, in one
transaction; and the erasure gap Letta's soft deletes leave.

``forget`` (a passage) and ``forget-scope archive=… / tag=…`` run one read-write
transaction that locks the passages' rows (``SELECT ... FOR UPDATE`` in id
order), deletes their ``passage_tags`` rows explicitly (not trusting the
``ON DELETE CASCADE`` to be there) and then the passages: what Letta's passage
manager does when it deletes one (``hard_delete``). Any failure rolls the whole
transaction back. Core memory blocks are the agent's working context and are
never forgotten from here (as in Letta's SQLite file). The purge and its checks
follow (``memtui.sources.postgres.erasure``): the text is looked for in every text
and json column of Letta's memory tables, the vector (as stored: zero-padded) in
the table's files.

Letta's own delete of a passage through its API is a soft delete (``is_deleted``):
the row, its text and its embedding stay. ``info`` counts those passages as an
erasure gap and ``forget-gaps`` hard-deletes every one still soft-deleted, with
its tags, as ``forget`` deletes one (audited, purged, verified). With none left,
``forget-gaps`` clears what the tables' own deletes left in their pages
(``PostgresSource.forget_gaps``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memtui.sources.base import SourceError, SourceRecord, require_reason
from memtui.sources.foreign_erasure import Erasure, GapsOutcome
from memtui.sources.letta_records import BLOCK_REFUSAL, record_id
from memtui.sources.postgres.forget import (
    TOASTED,
    block_of,
    forgotten,
    in_one_transaction,
    note_blocks,
    vector_probes,
)


class LettaPostgresForget:
    """The forget of ``LettaPostgresSource`` (mixed in before ``PostgresSource``)."""

    forget_implemented = True

    if TYPE_CHECKING:  # what the source (``LettaPostgresSource``) gives this
        pg: Any
        has_tag_rows: bool
        vectors: Any
        read_only: bool

        def table(self, name: str) -> str: ...
        def query(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]: ...
        def get(self, record_id: str) -> SourceRecord | None: ...
        def forget_reach(self) -> str: ...
        def _refuse_unbuilt_forget(self) -> None: ...
        def _erasure_of(self, applied: dict[str, Any], ids: list[str]) -> Erasure: ...
        def _audited_erasure(self, **kwargs: Any) -> tuple[int, int, Erasure]: ...

    def _tag_rows(self, passage_ids: Sequence[str]) -> int:
        if not self.has_tag_rows or not passage_ids:
            return 0
        rows = self.query(
            f"SELECT count(*) FROM {self.table('passage_tags')} WHERE passage_id = ANY(%s)",
            [list(passage_ids)],
        )
        return int(rows[0][0])

    def forget_preview(self, record_id: str) -> dict[str, Any]:
        record = self.get(record_id)
        if record is None:
            raise SourceError(f"no record with id {record_id}")
        if record.tier != "archival":
            raise SourceError(BLOCK_REFUSAL)
        passage = str(record.metadata["passage_id"])
        return {
            "records": [record.id],
            "rule": (
                "The passage's row of archival_passages (its text and embedding) and its "
                f"passage_tags rows are deleted in one transaction; {self.forget_reach()}"
            ),
            "counts": {"passages": 1, "tag_rows": self._tag_rows([passage])},
        }

    def forget_scope_rule(self, key: str) -> str:
        return (
            f"Every archival passage whose {key} is this one, soft-deleted ones too, is "
            "deleted with its passage_tags rows in one transaction (core memory blocks stay), "
            f"and memtui's cached copy goes too; {self.forget_reach()}"
        )

    def _apply_forget(self, record: SourceRecord) -> dict[str, Any]:
        return self._apply_forget_many([record])

    def _apply_forget_many(self, records: Sequence[SourceRecord]) -> dict[str, Any]:
        if any(r.tier != "archival" for r in records):
            raise SourceError(BLOCK_REFUSAL)
        return self.delete_passages([str(r.metadata["passage_id"]) for r in records])

    def delete_passages(
        self, ids: Sequence[str], *, soft_deleted_only: bool = False
    ) -> dict[str, Any]:
        """Delete these passages and their tag rows in one transaction (only those still
        soft-deleted when ``soft_deleted_only``); check they are gone."""
        passages, tags = self.table("archival_passages"), self.table("passage_tags")
        only = " AND t.is_deleted" if soft_deleted_only else ""
        pages: dict[str, list[Any]] = {"archival_passages": [], "passage_tags": [], TOASTED: []}

        def delete(conn: Any) -> tuple[list[Any], int, int]:
            rows = conn.execute(
                f"SELECT t.id, t.text, t.embedding::real[], {block_of('text', 'embedding')} "
                f"FROM {passages} AS t WHERE t.id = ANY(%s){only} ORDER BY t.id FOR UPDATE",
                [list(ids)],
            ).fetchall()
            note_blocks(pages, "archival_passages", rows)
            locked = [row[0] for row in rows]
            removed_tags = 0
            if self.has_tag_rows:
                found = conn.execute(
                    f"SELECT {block_of('tag')} FROM {tags} AS t WHERE t.passage_id = ANY(%s) "
                    "ORDER BY t.id FOR UPDATE",
                    [locked],
                ).fetchall()
                note_blocks(pages, "passage_tags", found)
                removed_tags = conn.execute(
                    f"DELETE FROM {tags} WHERE passage_id = ANY(%s)", [locked]
                ).rowcount
            removed = conn.execute(f"DELETE FROM {passages} WHERE id = ANY(%s)", [locked])
            return rows, removed.rowcount, removed_tags

        rows, removed, removed_tags = in_one_transaction(self.pg, delete)
        gone = [str(row[0]) for row in rows]
        left = self.query(f"SELECT count(*) FROM {passages} WHERE id = ANY(%s)", [gone])
        checks = {"row_gone": not left[0][0]}
        if self.has_tag_rows:
            tags_left = self.query(
                f"SELECT count(*) FROM {tags} WHERE passage_id = ANY(%s)", [gone]
            )
            checks["tags_gone"] = not tags_left[0][0]
        self.vectors.forget_counts()
        embeddings = [row[2] for row in rows]
        done = forgotten(
            [],
            [str(row[1]) for row in rows if row[1]],
            vector_probes("archival_passages", "embedding", self.vectors.kind, embeddings),
            checks,
            {"passages_removed": removed, "tag_rows_removed": removed_tags},
            pages,
        )
        done["removed"] = [record_id(0, pid) for pid in gone]
        return done

    # -- the erasure gap: passages Letta soft-deleted

    def soft_deleted(self) -> list[str]:
        """The ids of the passages Letta soft-deleted (hidden, still in the table)."""
        rows = self.query(
            f"SELECT id FROM {self.table('archival_passages')} WHERE is_deleted ORDER BY id"
        )
        return [str(r[0]) for r in rows]

    def forget_gaps_preview(self) -> dict[str, Any]:
        pids = self.soft_deleted()
        if not pids:
            return super().forget_gaps_preview()  # type: ignore[misc]
        tags = self._tag_rows(pids)
        return {
            "records": [record_id(0, pid) for pid in pids],
            "rule": (
                "Every soft-deleted passage (Letta's is_deleted) is deleted with its "
                "passage_tags rows in one transaction, as forget deletes one; "
                f"{self.forget_reach()}"
            ),
            "counts": {"passages": len(pids), "tag_rows": tags},
            "nothing": "no erasure gap: no soft-deleted passage is left in the table",
            "question": (
                f"Delete the {len(pids)} soft-deleted passage(s) (text, embedding and {tags} "
                "tag row(s)) and purge the freed pages? This cannot be undone"
            ),
        }

    def forget_gaps(self, *, reason: str, operator: str | None = None) -> GapsOutcome:
        """Hard-delete every passage Letta soft-deleted, with its tags (audited, verified);
        with none, clear the tables' dead row versions (``PostgresSource.forget_gaps``)."""
        self._refuse_unbuilt_forget()
        require_reason(reason)
        pids = self.soft_deleted()
        if not pids:
            return super().forget_gaps(reason=reason, operator=operator)  # type: ignore[misc]
        preview = self.forget_gaps_preview()
        ids = list(preview["records"])

        def erase() -> Erasure:
            return self._erasure_of(self.delete_passages(pids, soft_deleted_only=True), ids)

        intent, event, done = self._audited_erasure(
            ids=ids,
            tier="archival",
            record_type="passage",
            reason=reason,
            operator=operator,
            plan={"rule": preview["rule"], "plan": preview["counts"]},
            erase=erase,
            failure="forget-gaps failed, nothing was changed",
            operation="forget-gaps",
        )
        return GapsOutcome.of(
            ids,
            (
                f"deleted {done.details['passages_removed']} soft-deleted passage(s) and "
                f"{done.details['tag_rows_removed']} tag row(s)"
            ),
            intent,
            event,
            done,
        )
