"""memtui's index file of a Postgres store: the keyword lane's rows and what a refresh
compares without reading every row.

Beside the records and their full-text index it keeps each row's key hash
(``key_hashes``), the rows per fine bucket of those hashes (``hash_buckets``) and
the count and sums of the expiries (``expiry_sums``), the last two kept by
triggers as the file is written, so that every path that writes it (a refresh, a
forget's purge) keeps them: ``memtui.sources.postgres.index_sync`` refreshes it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memtui.core.index import FTS_TABLE
from memtui.core.search.scores import Lane
from memtui.sources.foreign_index import CacheRow, ForeignIndex, StaleIndex, scope_column
from memtui.sources.postgres.key_buckets import FINE_BUCKETS, FINE_MASK
from memtui.sources.shapes import Progress

KEY_HASHES = "3"
"""The format of the index's ``key_hashes`` and ``hash_buckets`` tables (an index of
another format is rebuilt)."""
_COUNTING_TRIGGERS = (
    "CREATE TRIGGER hash_buckets_ai AFTER INSERT ON key_hashes BEGIN "
    f"INSERT INTO hash_buckets (bucket, rows) VALUES (new.hash & {FINE_MASK}, 1) "
    "ON CONFLICT (bucket) DO UPDATE SET rows = rows + 1; END",
    "CREATE TRIGGER hash_buckets_ad AFTER DELETE ON key_hashes BEGIN "
    f"UPDATE hash_buckets SET rows = rows - 1 WHERE bucket = old.hash & {FINE_MASK}; END",
    "CREATE TRIGGER hash_buckets_au AFTER UPDATE OF hash ON key_hashes BEGIN "
    f"UPDATE hash_buckets SET rows = rows - 1 WHERE bucket = old.hash & {FINE_MASK}; "
    f"INSERT INTO hash_buckets (bucket, rows) VALUES (new.hash & {FINE_MASK}, 1) "
    "ON CONFLICT (bucket) DO UPDATE SET rows = rows + 1; END",
)
"""``hash_buckets`` kept by every later write of ``key_hashes`` (a load counts its rows
in one pass, then adds these)."""
_SECONDS = "CAST(strftime('%s', substr({0}.expires_at, 1, 19)) AS INTEGER)"
_MICROS = "CAST(substr({0}.expires_at, 21, 6) AS INTEGER)"
_ADD_EXPIRY = (
    "UPDATE expiry_sums SET held = held + 1, "
    f"seconds = seconds + {_SECONDS.format('new')}, micros = micros + {_MICROS.format('new')}"
)
_TAKE_EXPIRY = (
    "UPDATE expiry_sums SET held = held - 1, "
    f"seconds = seconds - {_SECONDS.format('old')}, micros = micros - {_MICROS.format('old')}"
)
_EXPIRY_TRIGGERS = (
    "CREATE TRIGGER expiry_sums_ai AFTER INSERT ON records "
    f"WHEN new.expires_at IS NOT NULL BEGIN {_ADD_EXPIRY}; END",
    "CREATE TRIGGER expiry_sums_ad AFTER DELETE ON records "
    f"WHEN old.expires_at IS NOT NULL BEGIN {_TAKE_EXPIRY}; END",
    "CREATE TRIGGER expiry_sums_au AFTER UPDATE OF expires_at ON records BEGIN "
    f"{_TAKE_EXPIRY} WHERE old.expires_at IS NOT NULL; "
    f"{_ADD_EXPIRY} WHERE new.expires_at IS NOT NULL; END",
)
"""``expiry_sums`` (the count and sums of ``expiry_digest``) kept by every later write
of ``records``' expiries (a load sums them in one pass, then adds these)."""
MERGE_PAGES = 64
"""The full-text index's incremental merge after a refresh's deletions (pages, about)."""
VectorSearch = Callable[[Sequence[float], Mapping[str, Any], int, Callable[[], bool] | None], Lane]


class PostgresIndex(ForeignIndex):
    """memtui's index file of a Postgres store: the keyword lane here, the vector lane in
    the database (``vector_search``, set by the source when the store has vectors)."""

    vector_search: VectorSearch | None = None
    vector_dim: int | None = None

    def recorded_embedder(self) -> dict[str, Any] | None:
        if self.vector_search is None or self.vector_dim is None:
            return None
        return {"name": f"store-vectors-{self.vector_dim}", "dim": self.vector_dim}

    def database_vector_lane(
        self,
        query_vector: Sequence[float],
        filters: Mapping[str, Any],
        pool_size: int,
        cancelled: Callable[[], bool] | None,
    ) -> Lane:
        assert self.vector_search is not None
        return self.vector_search(query_vector, filters, pool_size, cancelled)

    # -- the key hashes (``key_buckets``): one row per record, gone with it, and the rows
    # per fine bucket (``hash_buckets``), kept as they are written: a refresh compares
    # counts without reading every hash

    def __init__(self, path: Path, *, create: bool = False, **kwargs: Any) -> None:
        super().__init__(path, create=create, **kwargs)
        if create:
            with self.write() as conn:
                conn.execute(
                    "CREATE TABLE key_hashes (record_id INTEGER PRIMARY KEY, hash INTEGER NOT NULL)"
                )
                conn.execute(
                    "CREATE TABLE hash_buckets (bucket INTEGER PRIMARY KEY, rows INTEGER NOT NULL)"
                )
                conn.execute(
                    "CREATE TABLE expiry_sums (id INTEGER PRIMARY KEY CHECK (id = 0), "
                    "held INTEGER NOT NULL, seconds INTEGER NOT NULL, micros INTEGER NOT NULL)"
                )
                conn.execute(
                    "CREATE TRIGGER key_hashes_ad AFTER DELETE ON records BEGIN "
                    "DELETE FROM key_hashes WHERE record_id = old.id; END"
                )

    def _check_format(self) -> None:
        super()._check_format()
        if self.meta().get("key_hashes") != KEY_HASHES:
            raise StaleIndex(f"{self.path} has no key hashes of this format")

    def load(self, rows: Sequence[CacheRow], progress: Progress | None = None) -> None:
        super().load(rows, progress)
        self._load_hashes(
            [(n, row.key_hash) for n, row in enumerate(rows, start=1) if row.key_hash is not None]
        )

    def load_values(
        self, values: Sequence[Sequence[Any]], progress: Progress | None = None
    ) -> None:
        """``ForeignIndex.load_values``, each row's key hash last (after its scope values)."""
        super().load_values(values, progress)
        self._load_hashes([(n, v[-1]) for n, v in enumerate(values, start=1) if v[-1] is not None])

    def _load_hashes(self, hashed: Sequence[tuple[int, int]]) -> None:
        """After a load's records: their key hashes, the rows per fine bucket and the
        expiries' sums counted once, then the triggers that keep those two."""
        with self.write() as conn:
            conn.executemany("INSERT INTO key_hashes (record_id, hash) VALUES (?, ?)", hashed)
            conn.execute(f"CREATE INDEX key_hashes_bucket ON key_hashes(hash & {FINE_MASK})")
            conn.executemany(
                "INSERT INTO hash_buckets (bucket, rows) VALUES (?, ?)",
                sorted(Counter(h & FINE_MASK for _, h in hashed).items()),
            )
            conn.execute(
                "INSERT INTO expiry_sums (id, held, seconds, micros) "
                f"SELECT 0, count(*), coalesce(sum({_SECONDS.format('r')}), 0), "
                f"coalesce(sum({_MICROS.format('r')}), 0) FROM records AS r "
                "WHERE r.expires_at IS NOT NULL"
            )
            for trigger in _COUNTING_TRIGGERS + _EXPIRY_TRIGGERS:
                conn.execute(trigger)
            self._set_meta(conn, {"key_hashes": KEY_HASHES})

    def _write_hashes(self, conn: Any, rows: Sequence[CacheRow]) -> None:
        """A new record's hash (a record keeps its key, so a held hash stays)."""
        conn.executemany(
            "INSERT OR IGNORE INTO key_hashes (record_id, hash) "
            "SELECT id, ? FROM records WHERE source_id = ?",
            [(row.key_hash, row.source_id) for row in rows if row.key_hash is not None],
        )

    def hashed_count(self) -> int:
        """The rows that have a key hash (all of a Postgres store's), from the counts."""
        return int(self.query("SELECT coalesce(sum(rows), 0) FROM hash_buckets")[0][0])

    def held(self, source_ids: Iterable[str]) -> int:
        """How many of these source ids the index holds."""
        ids = list(source_ids)
        sql = "SELECT count(*) FROM records WHERE source_id IN (SELECT value FROM json_each(?))"
        return sum(
            int(self.query(sql, (json.dumps(ids[start : start + 500]),))[0][0])
            for start in range(0, len(ids), 500)
        )

    def bucket_counts(self) -> Any:
        """Rows per fine bucket (an int64 array of ``FINE_BUCKETS``; a row without a
        hash is in none: its bucket then differs, and the refresh reads it again)."""
        counts = np.zeros(FINE_BUCKETS, dtype=np.int64)
        (packed,) = self.query_tuples(  # one text, not 65,536 rows made into tuples
            "SELECT group_concat(bucket || ' ' || rows, ' ') FROM hash_buckets WHERE rows != 0"
        )[0]
        if packed:
            pairs = np.fromstring(packed, dtype=np.int64, sep=" ").reshape(-1, 2)
            counts[pairs[:, 0]] = pairs[:, 1]
        return counts

    def hashes_in_buckets(self, chosen: Any) -> list[tuple[str, int]]:
        """The source ids and key hashes of the rows in these fine buckets (through the
        index of the buckets: no scan)."""
        if not len(chosen):
            return []
        rows = self.query(
            "SELECT r.source_id, k.hash FROM key_hashes AS k "
            "JOIN records AS r ON r.id = k.record_id "
            f"WHERE (k.hash & {FINE_MASK}) IN (SELECT value FROM json_each(?))",
            (json.dumps([int(b) for b in chosen]),),
        )
        return [(str(source_id), int(key_hash)) for source_id, key_hash in rows]

    # -- keeping it in line with the store

    def upsert(self, rows: Sequence[CacheRow]) -> int:
        """Write these rows (new ones appended, changed ones rewritten); returns how many
        were written (a row that holds the same already is left alone).

        New rows and new contents go through a temporary table, each kind in one
        statement and in rowid order: the full-text index then buffers the whole write
        and adds one segment, where a statement per row (each in its own savepoint) made
        it write a segment per row and merge them."""
        if not rows:
            return 0
        columns = "source_id, content, tier, record_type, refuted, expires_at" + "".join(
            f", {scope_column(k)}" for k in self.scope_keys
        )
        held = {
            r[0]: (r[1], tuple(r[2:]))
            for start in range(0, len(rows), 500)
            for r in self.query(
                f"SELECT source_id, id, {columns.removeprefix('source_id, ')} FROM records "
                "WHERE source_id IN (SELECT value FROM json_each(?))",
                (json.dumps([row.source_id for row in rows[start : start + 500]]),),
            )
        }
        inserts: list[tuple[Any, ...]] = []
        states: list[tuple[Any, ...]] = []
        contents: list[tuple[int, str]] = []
        for row in rows:
            state = self._state_params(row)
            content = row.content or ""
            current = held.get(row.source_id)
            if current is None:
                inserts.append((row.source_id, content, *state))
                continue
            record_id, (held_content, *held_state) = current
            if tuple(held_state) != state:
                states.append((*state, record_id))
            if held_content != content:
                contents.append((record_id, content))
        states.sort(key=lambda params: int(params[-1]))  # by rowid, as the contents
        written = len(inserts) + len({r[-1] for r in states} | {r[0] for r in contents})
        if not written:
            with self.write() as conn:
                self._write_hashes(conn, rows)
            return 0
        with self.write() as conn:
            conn.execute(
                "CREATE TEMP TABLE IF NOT EXISTS upsert_new AS "
                f"SELECT {columns} FROM records WHERE 0"
            )
            conn.execute(
                "CREATE TEMP TABLE IF NOT EXISTS upsert_content "
                "(id INTEGER PRIMARY KEY, content TEXT)"
            )
            marks = ", ".join("?" * (6 + len(self.scope_keys)))
            conn.executemany(f"INSERT INTO temp.upsert_new ({columns}) VALUES ({marks})", inserts)
            conn.execute(
                f"INSERT INTO records (created_at, {columns}) SELECT ?, {columns} "
                "FROM temp.upsert_new ORDER BY rowid",
                (self.now_text(),),
            )
            conn.executemany(
                "UPDATE records SET tier = ?, record_type = ?, refuted = ?, expires_at = ?"
                f"{self._scope_assignments()} WHERE id = ?",
                states,
            )
            conn.executemany(
                "INSERT INTO temp.upsert_content (id, content) VALUES (?, ?)", contents
            )
            conn.execute(
                "UPDATE records SET content = "
                "(SELECT u.content FROM temp.upsert_content AS u WHERE u.id = records.id) "
                "WHERE id IN (SELECT id FROM temp.upsert_content)"
            )
            conn.execute("DELETE FROM temp.upsert_new")
            conn.execute("DELETE FROM temp.upsert_content")
            self._write_hashes(conn, rows)
        return written

    def remove(self, source_ids: Iterable[str]) -> int:
        """Delete these rows (their postings, vectors and key hashes with them), then one
        bounded, incremental merge of the full-text index (``merge``, not ``optimize``:
        its cost does not grow with the index); a forget's purge merges it whole."""
        ids = list(source_ids)
        if not ids:
            return 0
        removed = 0
        with self.write() as conn:
            record_ids = sorted(  # in rowid order, as ``upsert`` writes
                r[0]
                for start in range(0, len(ids), 500)
                for r in conn.execute(
                    "SELECT id FROM records WHERE source_id IN (SELECT value FROM json_each(?))",
                    (json.dumps(ids[start : start + 500]),),
                )
            )
            for start in range(0, len(record_ids), 500):
                removed += conn.execute(
                    "DELETE FROM records WHERE id IN (SELECT value FROM json_each(?))",
                    (json.dumps(record_ids[start : start + 500]),),
                ).rowcount
            conn.execute(
                f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rank) VALUES ('merge', ?)", (MERGE_PAGES,)
            )
        return removed

    def expiry_digest(self) -> list[Any]:
        """``[count, sum]`` of the expiries held, the sum in microseconds since the epoch,
        as text (None when there is none): a LangGraph store's probe computes the same.
        Kept as the rows are written (``expiry_sums``): seconds and microseconds summed
        apart, as their product would overflow SQLite's int64."""
        held, seconds, micros = self.query_tuples(
            "SELECT held, seconds, micros FROM expiry_sums WHERE id = 0"
        )[0]
        total = int(seconds) * 1_000_000 + int(micros) if held else None
        return [int(held), None if total is None else str(total)]

    def update_expiries(self, expiries: Mapping[str, str | None]) -> int:
        """Set these rows' expiries (the others are left alone); returns how many moved."""
        if not expiries:
            return 0
        current = {
            r[0]: r[1]
            for r in self.query(
                "SELECT source_id, expires_at FROM records "
                "WHERE source_id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(expiries)),),
            )
        }
        changes = [(v, k) for k, v in expiries.items() if k in current and current[k] != v]
        if changes:
            with self.write() as conn:
                conn.executemany("UPDATE records SET expires_at = ? WHERE source_id = ?", changes)
        return len(changes)

    def set_expiries(self, expiries: Mapping[str, str | None]) -> int:
        """Bring every row's expiry in line (those not given have none); returns how many
        changed."""
        current = dict(
            self.query("SELECT source_id, expires_at FROM records WHERE expires_at IS NOT NULL")
        )
        changes = [
            (value, source_id)
            for source_id, value in expiries.items()
            if current.get(source_id) != value
        ]
        changes += [(None, source_id) for source_id in current if source_id not in expiries]
        if changes:
            with self.write() as conn:
                conn.executemany("UPDATE records SET expires_at = ? WHERE source_id = ?", changes)
        return len(changes)
