"""Bulk ingest: prepared records (and optionally their vectors) loaded in one
transaction, indexed in one statement, with one summary audit event."""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from memtui.core.index import FTS_TABLE
from memtui.core.records import TIERS, normalize_timestamp
from memtui.core.store.connection import Progress
from memtui.core.store.errors import MemoryStoreError
from memtui.core.store.rows import _canonical
from memtui.core.store.schema import _INSERT_TRIGGER, purge_text_index, vector_triggers_off
from memtui.core.store.vectors import VectorWriter

# The stored timestamp form (format_timestamp): 4-digit year, microseconds, Z.
_STORED_TIMESTAMP = re.compile(r"[1-9]\d{3}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def _stored_timestamp(value: Any) -> str | None:
    """``normalize_timestamp`` with a fast path for text already in the stored form."""
    if value is None:
        return None
    if isinstance(value, str) and _STORED_TIMESTAMP.fullmatch(value):
        try:
            datetime.fromisoformat(value[:-1])  # a real date and time, or ValueError
        except ValueError:
            pass  # let normalize_timestamp word the error
        else:
            return value
    return normalize_timestamp(value)


def _ingest_batch(
    rows: Sequence[dict[str, Any]], start: int, size: int, now: str, by_tier: dict[str, int]
) -> list[tuple[Any, ...]]:
    """SQL parameters of ``rows[start:start + size]`` for ``ingest``; counts tiers as it goes."""
    batch: list[tuple[Any, ...]] = []
    for index in range(start, min(start + size, len(rows))):
        row = rows[index]
        get = row.get
        tier = get("tier")
        if tier not in TIERS:
            raise MemoryStoreError(f"record {index}: unknown tier {tier!r}")
        by_tier[tier] = by_tier.get(tier, 0) + 1
        batch.append(
            (
                tier,
                row["record_type"],
                row["content"],
                get("profile_hash"),
                get("engagement"),
                get("run_id"),
                get("tool_name"),
                get("url_pattern"),
                get("signature"),
                _canonical(get("metadata") or {}),
                1 if get("refuted") else 0,
                _stored_timestamp(get("created_at")) or now,
                _stored_timestamp(get("expires_at")),
            )
        )
    return batch


class BulkIngest(VectorWriter):
    """``ingest``: many records at once."""

    def ingest(
        self,
        rows: Sequence[dict[str, Any]],
        *,
        source: str | None = None,
        operator: str | None = None,
        progress: Progress | None = None,
        vectors: Any = None,
        embedder_name: str | None = None,
    ) -> list[int]:
        """Bulk-load prepared records (see ``memtui.core.corpus``) in one transaction.

        Rows are inserted with the per-row index trigger set aside and indexed in
        one statement afterwards; one summary audit event records the load.
        Anything wrong loads nothing.

        ``vectors`` optionally gives each row's embedding, precomputed (a
        sequence of equal-length float sequences, or a 2-D numpy array, one row
        per record): they are stored as they are, instead of being computed by
        the store's embedder, and the file records ``embedder_name`` (default:
        the store's embedder's name) with their dimension as the embedder that
        wrote them.
        """
        total = len(rows)
        bulk = None
        if vectors is not None:
            bulk = self._bulk_vectors_checked(vectors, total, embedder_name)
        with self._write():
            self._refuse_known_tactics(rows)
            before = self._conn.execute("SELECT coalesce(max(id), 0) FROM records").fetchone()[0]
            was_empty = self._conn.execute("SELECT 1 FROM records LIMIT 1").fetchone() is None
            self._conn.execute("DROP TRIGGER records_ai")
            by_tier = self._insert_rows(rows, progress)
            ids = self._new_ids(before, total)
            self._index_new_rows(before, total, was_empty)
            self._conn.execute(_INSERT_TRIGGER)
            if bulk is not None:
                self._load_bulk_vectors(ids, *bulk)
            elif self.embedder is not None:
                self._embed_new_rows(ids, rows)
            details: dict[str, Any] = {"count": total, "by_tier": by_tier}
            if ids:
                details["id_range"] = [ids[0], ids[-1]]
            if source:
                details["source"] = source
            if bulk is not None:
                details["embedder"] = bulk[1]
            elif self.embedder is not None:
                details["embedder"] = self.embedder.name
            self._append_audit(
                action="ingest",
                record_ids=[],
                operator=operator,
                reason=None,
                details=details,
            )
            if progress:
                progress(total, total)
            return ids

    def _refuse_known_tactics(self, rows: Sequence[dict[str, Any]]) -> None:
        """Refuse a load with a tactic (by signature) already in the database."""
        signatures = [row.get("signature") for row in rows if row.get("signature")]
        for start in range(0, len(signatures), 500):
            chunk = signatures[start : start + 500]
            marks = ",".join("?" * len(chunk))
            clash = self._conn.execute(
                f"SELECT id, signature FROM records WHERE signature IN ({marks}) LIMIT 1",
                chunk,
            ).fetchone()
            if clash is not None:
                index = next(i for i, r in enumerate(rows) if r.get("signature") == clash[1])
                raise MemoryStoreError(
                    f"record {index}: this tactic is already in the database as "
                    f"#{clash[0]}; a corpus is ingested once"
                )

    def _insert_rows(
        self, rows: Sequence[dict[str, Any]], progress: Progress | None
    ) -> dict[str, int]:
        """Insert ``rows`` in batches; returns how many went to each tier."""
        total = len(rows)
        now = self.now_text()
        insert = (
            "INSERT INTO records (tier, record_type, content, profile_hash, engagement, "
            "run_id, tool_name, url_pattern, signature, metadata, refuted, created_at, "
            "expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        by_tier: dict[str, int] = {}
        batch_size = 5000
        # Rows become SQL parameters in a helper thread while SQLite inserts the
        # previous batch (the sqlite3 module releases the GIL while it steps).
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="memtui-ingest") as pool:
            pending = pool.submit(_ingest_batch, rows, 0, batch_size, now, by_tier)
            for start in range(0, total, batch_size):
                batch = pending.result()
                if start + batch_size < total:
                    pending = pool.submit(
                        _ingest_batch, rows, start + batch_size, batch_size, now, by_tier
                    )
                self._conn.executemany(insert, batch)
                done = start + len(batch)
                if progress and done < total:
                    progress(done, total)
        return by_tier

    def _new_ids(self, before: int, total: int) -> list[int]:
        """The ids of the rows just inserted after the largest id ``before``."""
        last = self._conn.execute("SELECT coalesce(max(id), 0) FROM records").fetchone()[0]
        if last - before == total:
            # Fresh rowids are max + 1 each: the new ids are one contiguous run.
            return list(range(before + 1, last + 1))
        return [
            r[0]
            for r in self._conn.execute(
                "SELECT id FROM records WHERE id > ? ORDER BY id", (before,)
            ).fetchall()
        ]

    def _index_new_rows(self, before: int, total: int, was_empty: bool) -> None:
        """Index the rows after id ``before`` in one statement (the whole table, if new)."""
        if was_empty:
            self._conn.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('rebuild')")
        else:
            self._conn.execute(
                f"INSERT INTO {FTS_TABLE}(rowid, content) "
                "SELECT id, content FROM records WHERE id > ?",
                (before,),
            )
        if was_empty or total * 10 >= before:
            # A big load leaves the index in many segments; merge them now, so
            # that the first forget does not pay for it.
            purge_text_index(self._conn)

    def _load_bulk_vectors(self, ids: list[int], matrix: Any, name: str) -> None:
        """Store precomputed vectors (one matrix row per id) as they are."""
        self._adopt_bulk_vectors(name, matrix.shape[1])
        with vector_triggers_off(self._conn):
            step = 20000
            for start in range(0, len(ids), step):
                part = matrix[start : start + step]
                self._conn.executemany(
                    "INSERT OR REPLACE INTO vectors (record_id, vector) VALUES (?, ?)",
                    zip(ids[start : start + step], map(bytes, part), strict=True),
                )

    def _embed_new_rows(self, ids: list[int], rows: Sequence[dict[str, Any]]) -> None:
        """Compute and store the new rows' vectors with the store's embedder."""
        with vector_triggers_off(self._conn):
            for start in range(0, len(ids), 512):
                chunk_ids = ids[start : start + 512]
                texts = [rows[i]["content"] for i in range(start, start + len(chunk_ids))]
                self._store_vectors(list(zip(chunk_ids, texts, strict=True)))

    def _bulk_vectors_checked(
        self, vectors: Any, total: int, embedder_name: str | None
    ) -> tuple[Any, str]:
        """Precomputed vectors as a C-contiguous little-endian float32 matrix, checked."""
        import numpy as np

        name = embedder_name or (self.embedder.name if self.embedder is not None else None)
        if not name:
            raise MemoryStoreError(
                "precomputed vectors need the name of the embedder that made them "
                "(embedder_name=...)"
            )
        try:
            matrix = np.ascontiguousarray(vectors, dtype="<f4")
        except (TypeError, ValueError) as exc:
            raise MemoryStoreError(f"precomputed vectors are not a numeric matrix: {exc}") from None
        if matrix.ndim != 2 or matrix.shape[0] != total or matrix.shape[1] < 1:
            raise MemoryStoreError(
                f"precomputed vectors must be one vector per record ({total} rows of equal "
                f"length); got shape {matrix.shape}"
            )
        if not np.isfinite(matrix).all():
            raise MemoryStoreError("precomputed vectors contain a non-finite value")
        dim = int(matrix.shape[1])
        if self.embedder is not None and (self.embedder.name, self.embedder.dim) != (name, dim):
            raise MemoryStoreError(
                f"precomputed vectors are {name} ({dim} dims) but this store writes with "
                f"{self.embedder.name} ({self.embedder.dim} dims)"
            )
        recorded = self.recorded_embedder()
        if recorded and (recorded["name"], recorded["dim"]) != (name, dim):
            if self.query("SELECT 1 FROM vectors LIMIT 1"):
                raise MemoryStoreError(
                    f"this database's vectors were written by {recorded['name']} "
                    f"({recorded['dim']} dims), not {name} ({dim} dims); re-index first"
                )
        return matrix, name

    def _adopt_bulk_vectors(self, name: str, dim: int) -> None:
        recorded = self.recorded_embedder()
        if recorded != {"name": name, "dim": dim}:
            self._conn.execute(
                "DELETE FROM meta WHERE key IN ('embedder_name', 'embedder_dim', 'embedder_spec')"
            )
            self._conn.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?)",
                [("embedder_name", name), ("embedder_dim", str(dim))],
            )
