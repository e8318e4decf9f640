"""LangGraph ``SqliteStore`` (langgraph-checkpoint-sqlite 3.x) as a memory source.

- Records are the ``store`` rows: namespace (the dotted ``prefix``) and key.
  The namespace is the scope tree: its first label is the tier (not listed
  again as a namespace value), ``scope_parent`` nests each deeper namespace
  under its parent, and the ``namespace`` filter matches a namespace and
  everything under it.
- ``value`` is JSON (in 3.1.2 a BLOB of orjson bytes): its text fields, joined
  with " · ", are the searchable content (secret-named fields left out); the
  whole JSON is in ``metadata["value"]`` (masked when shown).
- Expiry is LangGraph's own rule: its sweep deletes ``expires_at <
  CURRENT_TIMESTAMP`` (text comparison against ``YYYY-MM-DD HH:MM:SS``), so the
  boundary second is still live. Both of the library's ``expires_at`` forms
  (``put``'s ``...ffffff+00:00`` and a refresh's ``DATETIME(...)``) compare
  correctly that way, and memtui uses the same comparison.
- ``store_vectors`` embeddings are little-endian float32, read directly. An item
  with several indexed text fields has a vector per field; as LangGraph's own search,
  it scores as its best field for the query (the breakdown names the field).
  LangGraph's own delete leaves them behind (its ``ON DELETE CASCADE`` never
  fires): those orphaned vectors are an erasure gap, counted in the summary.
- Forget (with ``--allow-writes``) deletes the row and every vector of it in
  one transaction with ``secure_delete`` on, then purges the freed pages.
  ``forget_gaps`` does the same for the orphaned vectors of items LangGraph
  deleted itself (audited, byte-checked).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from memtui.sources.base import SourceError, SourceRecord, encode_id, require_reason
from memtui.sources.capabilities import GapClearable
from memtui.sources.foreign import Erasure, GapsOutcome
from memtui.sources.langgraph_read import ID_PREFIX, LangGraphReads


class LangGraphSource(LangGraphReads, GapClearable):
    """A LangGraph ``SqliteStore``: read by ``LangGraphReads``; forget, forget a namespace
    (and what nests under it), and clear the orphaned vectors LangGraph's delete leaves."""

    forget_scope_keys = LangGraphReads.scope_keys
    write_capabilities = frozenset({"forget", "forget_scope"})

    # -- forget

    def forget_preview(self, record_id: str) -> dict[str, Any]:
        key = self._key(record_id)
        if key is None or self.get(record_id) is None:
            raise SourceError(f"no record with id {record_id}")
        vectors = (
            self.query("SELECT count(*) FROM store_vectors WHERE prefix = ? AND key = ?", key)[0][0]
            if self.has_vectors()
            else 0
        )
        return {
            "records": [record_id],
            "rule": (
                "The store row and every vector of it are deleted, and the freed pages "
                "purged (VACUUM)."
            ),
            "counts": {"rows": 1, "vectors": vectors},
        }

    def record_value_columns(self) -> list[tuple[str, str]]:
        return [("store", "value"), ("store_vectors", "embedding")]

    def _apply_forget(self, record: SourceRecord) -> dict[str, Any]:
        key = self._key(record.id)
        assert key is not None
        conn = self._conn
        raw = conn.execute("SELECT value FROM store WHERE prefix = ? AND key = ?", key).fetchone()
        probes: list[bytes] = []
        if raw and raw[0] is not None:
            blob = raw[0] if isinstance(raw[0], bytes) else str(raw[0]).encode("utf-8")
            probes.append(blob[:64])
        vectors = 0
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("DELETE FROM store WHERE prefix = ? AND key = ?", key)
            if self.has_vectors():
                for (blob,) in conn.execute(
                    "SELECT embedding FROM store_vectors WHERE prefix = ? AND key = ?", key
                ).fetchall():
                    if isinstance(blob, bytes) and len(blob) >= 16:
                        probes.append(blob[:32])
                vectors = conn.execute(
                    "DELETE FROM store_vectors WHERE prefix = ? AND key = ?", key
                ).rowcount
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        row_gone = (
            conn.execute("SELECT 1 FROM store WHERE prefix = ? AND key = ?", key).fetchone() is None
        )
        vectors_gone = (
            not self.has_vectors()
            or conn.execute(
                "SELECT 1 FROM store_vectors WHERE prefix = ? AND key = ?", key
            ).fetchone()
            is None
        )
        return {
            "removed": [record.id],
            "checks": {"row_gone": row_gone, "vectors_gone": vectors_gone},
            "probes": probes,
            "details": {"vectors_removed": vectors},
        }

    def forget_scope_rule(self, key: str) -> str:
        return (
            "Every item of this namespace and of each namespace under it, expired ones too, "
            "is deleted with all its vectors, as forget deletes one; the freed pages are "
            "purged (VACUUM), the bytes checked, and memtui's cached copy goes too."
        )

    # -- forget the erasure gap

    _ORPHANS = (
        "SELECT v.prefix, v.key, v.field_name, v.embedding FROM store_vectors AS v "
        "WHERE NOT EXISTS (SELECT 1 FROM store AS s WHERE s.prefix = v.prefix AND s.key = v.key) "
        "ORDER BY v.prefix, v.key, v.field_name"
    )

    def _orphan_rows(self) -> list[tuple[Any, ...]]:
        return self.query(self._ORPHANS) if self.has_vectors() else []

    @staticmethod
    def _orphan_ids(rows: Iterable[tuple[Any, ...]]) -> list[str]:
        return list(dict.fromkeys(encode_id(ID_PREFIX, r[0], r[1]) for r in rows))

    def gap_ids(self) -> list[str]:
        """Record ids of deleted items whose vectors are still in store_vectors."""
        return self._orphan_ids(self._orphan_rows())

    def forget_gaps_preview(self) -> dict[str, Any]:
        rows = self._orphan_rows()
        ids = self._orphan_ids(rows)
        return {
            "records": ids,
            "rule": "the orphaned vectors of deleted items; freed pages purged (VACUUM)",
            "counts": {"items": len(ids), "vectors": len(rows)},
            "nothing": "no erasure gap: no orphaned vectors of deleted items",
            "question": (
                f"Delete the {len(rows)} orphaned vector(s) of {len(ids)} deleted item(s) and "
                "purge the freed pages? This cannot be undone"
            ),
        }

    def forget_gaps(self, *, reason: str, operator: str | None = None) -> GapsOutcome:
        """Delete the vectors LangGraph's own deletes left behind (audited, verified)."""
        self._require_writable()
        require_reason(reason)
        plan = self._orphan_rows()
        ids = self._orphan_ids(plan)
        if not ids:
            raise SourceError("no erasure gap: no orphaned vectors of deleted items to clear")
        keys = [(r[0], r[1], r[2]) for r in plan]
        probes = [
            bytes(r[3])[:32]
            for r in plan
            if isinstance(r[3], bytes | bytearray) and len(r[3]) >= 16
        ]
        orphan = (
            "prefix = ? AND key = ? AND field_name = ? AND NOT EXISTS "
            "(SELECT 1 FROM store AS s WHERE s.prefix = store_vectors.prefix "
            "AND s.key = store_vectors.key)"
        )

        def erase() -> Erasure:
            conn = self._conn
            conn.execute("PRAGMA secure_delete = ON")
            removed = 0
            conn.execute("BEGIN IMMEDIATE")
            try:
                # Only the planned rows, and only while their item is still gone.
                for key in keys:
                    removed += conn.execute(
                        f"DELETE FROM store_vectors WHERE {orphan}", key
                    ).rowcount
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            checks = {
                "orphaned_vectors_gone": not any(
                    conn.execute(f"SELECT 1 FROM store_vectors WHERE {orphan}", key).fetchone()
                    for key in keys
                )
            }
            file_checks, details = self._purge_file(probes)
            checks.update(file_checks)
            return Erasure(
                checks=checks, details={"vectors_removed": removed, **details}, removed=ids
            )

        intent, event, done = self._audited_erasure(
            ids=ids,
            tier="item",
            record_type="vector",
            reason=reason,
            operator=operator,
            plan={"plan": {"items": len(ids), "vectors": len(plan)}},
            erase=erase,
            failure="forget-gaps failed, nothing was changed",
            operation="forget-gaps",
        )
        return GapsOutcome.of(
            ids,
            (
                f"deleted {done.details['vectors_removed']} orphaned vector(s) of {len(ids)} "
                "deleted item(s)"
            ),
            intent,
            event,
            done,
        )
