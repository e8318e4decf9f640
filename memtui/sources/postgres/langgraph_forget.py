"""Forgetting in a LangGraph ``PostgresStore``: items and their vectors, in one transaction.

``forget`` (an item) and ``forget-scope namespace=NS`` (the namespace and every
namespace under it: ``prefix = NS OR prefix LIKE 'NS.%'``, so ``users.u1`` never
takes ``users.u10``) run one read-write transaction that locks the items' rows
(``SELECT ... FOR UPDATE``, the order LangGraph's own ``put`` locks in), deletes
every ``store_vectors`` row of them explicitly (not trusting an ``ON DELETE
CASCADE`` to be there) and then the ``store`` rows. Any failure rolls the whole
transaction back: nothing is half done. The purge and its checks follow
(``memtui.sources.postgres.erasure``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memtui.sources.base import SourceError, SourceRecord
from memtui.sources.postgres.erasure import string_leaves
from memtui.sources.postgres.forget import (
    TOASTED,
    block_of,
    forgotten,
    in_one_transaction,
    note_blocks,
    vector_probes,
)

KEYS = "(SELECT * FROM unnest(%s::text[], %s::text[]))"
"""The (prefix, key) pairs of a forget, as a relation (two text arrays)."""


class LangGraphPostgresForget:
    """The forget of ``LangGraphPostgresSource`` (mixed in before ``PostgresSource``)."""

    forget_implemented = True
    forget_scope_keys: tuple[str, ...] = ("namespace",)
    store_tables: tuple[str, ...] = (
        "store",
        "store_vectors",
        "store_migrations",
        "vector_migrations",
    )
    forget_tables: tuple[str, ...] = ("store", "store_vectors")

    if TYPE_CHECKING:  # what the source (``LangGraphPostgresSource``) gives this
        pg: Any
        _store: str
        vectors: Any

        def _key(self, record_id: str) -> tuple[str, str] | None: ...
        def get(self, record_id: str) -> SourceRecord | None: ...
        def has_vectors(self) -> bool: ...
        def forget_reach(self) -> str: ...

    def _keys(self, records: Sequence[SourceRecord]) -> list[list[str]]:
        pairs = [k for k in (self._key(r.id) for r in records) if k is not None]
        return [[p for p, _ in pairs], [k for _, k in pairs]]

    def forget_preview(self, record_id: str) -> dict[str, Any]:
        key = self._key(record_id)
        if key is None or self.get(record_id) is None:
            raise SourceError(f"no record with id {record_id}")
        vectors = 0
        if self.has_vectors():
            vectors = self.pg.query(
                f"SELECT count(*) FROM {self.vectors.table} WHERE prefix = %s AND key = %s",
                list(key),
            )[0][0]
        return {
            "records": [record_id],
            "rule": (
                "The store row and every store_vectors row of it are deleted in one "
                f"transaction; {self.forget_reach()}"
            ),
            "counts": {"rows": 1, "vectors": int(vectors)},
        }

    def forget_scope_rule(self, key: str) -> str:
        return (
            "Every item of this namespace and of each namespace under it, expired ones too, "
            "is deleted with all its store_vectors rows in one transaction (a sibling "
            "namespace that only starts with the same letters stays), and memtui's cached "
            f"copy goes too; {self.forget_reach()}"
        )

    def _apply_forget(self, record: SourceRecord) -> dict[str, Any]:
        return self._apply_forget_many([record])

    def _apply_forget_many(self, records: Sequence[SourceRecord]) -> dict[str, Any]:
        """Delete the records' items and vectors in one transaction; check they are gone."""
        keys = self._keys(records)
        store, vectors = self._store, self.vectors.table if self.has_vectors() else None

        pages: dict[str, list[Any]] = {"store": [], "store_vectors": [], TOASTED: []}

        def delete(conn: Any) -> tuple[list[Any], list[Any], int, int]:
            rows = conn.execute(
                f"SELECT value, {block_of('value')} FROM {store} AS t "
                f"WHERE (prefix, key) IN {KEYS} ORDER BY prefix, key FOR UPDATE",
                keys,
            ).fetchall()
            note_blocks(pages, "store", rows)
            embeddings: list[Any] = []
            removed_vectors = 0
            if vectors is not None:
                found = conn.execute(
                    f"SELECT embedding::real[], {block_of('embedding')} FROM {vectors} AS t "
                    f"WHERE (prefix, key) IN {KEYS} ORDER BY prefix, key, field_name FOR UPDATE",
                    keys,
                ).fetchall()
                note_blocks(pages, "store_vectors", found)
                embeddings = [row[0] for row in found]
                removed_vectors = conn.execute(
                    f"DELETE FROM {vectors} WHERE (prefix, key) IN {KEYS}", keys
                ).rowcount
            items = conn.execute(f"DELETE FROM {store} WHERE (prefix, key) IN {KEYS}", keys)
            return [row[0] for row in rows], embeddings, removed_vectors, items.rowcount

        values, embeddings, removed_vectors, items = in_one_transaction(self.pg, delete)
        left = self.pg.query(f"SELECT count(*) FROM {store} WHERE (prefix, key) IN {KEYS}", keys)
        vectors_left = (
            self.pg.query(f"SELECT count(*) FROM {vectors} WHERE (prefix, key) IN {KEYS}", keys)
            if vectors is not None
            else [(0,)]
        )
        return forgotten(
            records,
            [text for value in values for text in string_leaves(value)],
            vector_probes("store_vectors", "embedding", self.vectors.kind, embeddings),
            {"row_gone": not left[0][0], "vectors_gone": not vectors_left[0][0]},
            {"rows_removed": items, "vectors_removed": removed_vectors},
            pages,
        )
