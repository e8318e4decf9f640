"""memtui's keyword index of a Postgres store, kept up to date by what changed.

A SQLite store's index is rebuilt when the file moves on; a Postgres store's is
refreshed in place (``SyncedIndex``), so that reopening after 1,000 changes
reads those rows, not the store:

- built once by reading every row through one server-side cursor; the *mark* is
  the database's clock when the read began;
- a refresh runs when the store's change probe (``ChangeFeed.probe``: counts,
  latest ``updated_at``, a digest of the expiries) differs from the one the index
  recorded. It reads the rows with ``updated_at`` after the mark less
  ``LAG_SECONDS`` (a transaction that began before the mark and committed after it
  is still read), writes those that differ, then the new mark;
- deletions (the agent's own, its TTL sweeper's): when the rows the index will
  hold are not the store's count, the store's key hashes are compared with the
  index's, per fine bucket and then per full hash where a bucket differs, and only
  the index's ids of a hash the store holds fewer of are looked up in the store
  (``memtui.sources.postgres.key_buckets``);
- expiries that moved without ``updated_at`` (LangGraph's ``refresh_ttl``): when the
  store's expiry digest differs from the index's own (``expiry_digest``, the same
  count and sum of memtui's copy, kept as it is written), the feed reads the rows
  whose TTL was refreshed since the mark (``refreshed_expiries``); only if the
  digests still differ (or the feed cannot say) is every expiry read.

The index keeps, as it is written (by triggers, so that every path that writes
it keeps them), the rows per fine bucket of its key hashes and the count and sums
of its expiries: a refresh reads neither from every row.

What a refresh costs on the server is one scan of the table for the changed rows
(LangGraph has no index on ``updated_at``) and, after deletions, one scan that
hashes the keys (in parallel workers) and a lookup by primary key of the index's
ids of the hashes that differ; what it transfers is the changed rows, 4 bytes per
row of the store and those ids. ``last_sync`` says what the last one read.

The index holds content only (the keyword lane): vectors stay in the database and
``PostgresIndex.database_vector_lane`` asks the store for the vector lane.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from memtui.core.index import FTS_TABLE
from memtui.core.search.scores import Lane
from memtui.sources.cache import SourceIndex, fingerprint_text
from memtui.sources.foreign_index import CacheRow, ForeignIndex, StaleIndex, scope_column
from memtui.sources.postgres.key_buckets import (
    FINE_BUCKETS,
    FINE_MASK,
    MOSTLY_DIFFERENT,
    StoreBuckets,
    fine_counts,
)
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
LAG_SECONDS = 2.0
"""How far before the mark a refresh reads again: a writer's transaction that began before
the mark (its ``updated_at``) and committed after it is read by the next refresh."""

VectorSearch = Callable[[Sequence[float], Mapping[str, Any], int, Callable[[], bool] | None], Lane]


@dataclass(frozen=True)
class StoreProbe:
    """The change probe: rows, the latest ``updated_at``, and a digest of the expiries
    (``[count, sum]`` of the rows that have one). One cheap aggregate query."""

    rows: int
    latest: str | None
    expiries: Any = None

    def to_json(self) -> list[Any]:
        return [self.rows, self.latest, self.expiries]


class ChangeFeed(Protocol):
    """What a Postgres source tells its index about the store (see the module docstring).

    A feed may also have ``next_mark(now)`` (the mark a read beginning ``now`` leaves)
    and ``refreshed_expiries(since)`` (the expiries moved since, by source id: then its
    probe's expiry digest is ``PostgresIndex.expiry_digest``'s)."""

    buckets: StoreBuckets
    """The store's side of the key-hash comparison that finds deletions."""

    def probe(self) -> StoreProbe:
        """A cheap value that changes whenever the store does."""
        ...

    def database_now(self) -> str:
        """The database's clock now, as ISO-8601 text (when a read began; the next mark
        unless the feed has ``next_mark``)."""
        ...

    def changed_rows(self, since: str | None) -> Iterable[CacheRow]:
        """Every row (``since`` None) or the rows updated after ``since``, as index rows
        (with their key hashes)."""
        ...

    def rows_by_id(self, ids: Sequence[str]) -> list[CacheRow]:
        """These rows as index rows (those that still exist)."""
        ...

    def existing(self, ids: Sequence[str]) -> set[str]:
        """Those of these source ids the store still holds (looked up by its key)."""
        ...

    def expiries(self) -> dict[str, str | None]:
        """The mapped expiry of every row that has one, by source id."""
        ...


@dataclass
class SyncReport:
    """What the last build or refresh did: ``rows_read`` is what came over the wire."""

    action: str
    at: str
    rows_read: int = 0
    written: int = 0
    removed: int = 0
    ids_read: int = 0
    buckets_compared: int = 0
    expiries_read: int = 0
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "at": self.at,
            "rows_read": self.rows_read,
            "written": self.written,
            "removed": self.removed,
            "ids_read": self.ids_read,
            "buckets_compared": self.buckets_compared,
            "expiries_read": self.expiries_read,
        }

    def line(self) -> str:
        """``refreshed 2026-11-30T12:00:00+00:00: 3 rows read, 1 removed``."""
        parts = [f"{self.rows_read} row{'' if self.rows_read == 1 else 's'} read"]
        if self.removed:
            parts.append(f"{self.removed} removed")
        if self.expiries_read:
            parts.append(f"{self.expiries_read} expiries read")
        return f"{self.action} {self.at}: {', '.join(parts)}"


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
        hashed = [
            (n, row.key_hash) for n, row in enumerate(rows, start=1) if row.key_hash is not None
        ]
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
        were written (a row that holds the same already is left alone)."""
        if not rows:
            return 0
        held = {
            r[0]: tuple(r[1:])
            for start in range(0, len(rows), 500)
            for r in self.query(
                "SELECT source_id, content, tier, record_type, refuted, expires_at"
                + "".join(f", {scope_column(k)}" for k in self.scope_keys)
                + " FROM records WHERE source_id IN (SELECT value FROM json_each(?))",
                (json.dumps([row.source_id for row in rows[start : start + 500]]),),
            )
        }
        columns = "".join(f", {scope_column(key)}" for key in self.scope_keys)
        marks = ", ?" * len(self.scope_keys)
        insert = (
            "INSERT INTO records (source_id, created_at, content, tier, record_type, refuted, "
            f"expires_at{columns}) VALUES (?, ?, ?, ?, ?, ?, ?{marks})"
        )
        update = (
            "UPDATE records SET tier = ?, record_type = ?, refuted = ?, expires_at = ?"
            f"{self._scope_assignments()} WHERE source_id = ?"
        )
        now = self.now_text()
        inserts: list[tuple[Any, ...]] = []
        updates: list[tuple[Any, ...]] = []
        contents: list[tuple[str, str]] = []
        for row in rows:
            state = self._state_params(row)
            current = held.get(row.source_id)
            if current is None:
                inserts.append((row.source_id, now, row.content or "", *state))
            elif current != (row.content or "", *state):
                updates.append((*state, row.source_id))
                if current[0] != (row.content or ""):
                    contents.append((row.content or "", row.source_id))
        with self.write() as conn:
            conn.executemany(insert, inserts)
            conn.executemany(update, updates)
            conn.executemany("UPDATE records SET content = ? WHERE source_id = ?", contents)
            self._write_hashes(conn, rows)
        return len(inserts) + len(updates)

    def remove(self, source_ids: Iterable[str]) -> int:
        """Delete these rows (their postings, vectors and key hashes with them), then one
        bounded, incremental merge of the full-text index (``merge``, not ``optimize``:
        its cost does not grow with the index); a forget's purge merges it whole."""
        ids = list(source_ids)
        if not ids:
            return 0
        removed = 0
        with self.write() as conn:
            for start in range(0, len(ids), 500):
                removed += conn.execute(
                    "DELETE FROM records WHERE source_id IN (SELECT value FROM json_each(?))",
                    (json.dumps(ids[start : start + 500]),),
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


class SyncedIndex(SourceIndex):
    """The index of one Postgres store: built once, then refreshed by what changed."""

    def __init__(self, *, feed: ChangeFeed, anchor: Path, **kwargs: Any) -> None:
        self.feed = feed
        self.last_sync: SyncReport | None = None
        self._mark: str | None = None
        self._at = ""
        self._counted = 0
        self.on_open: Callable[[PostgresIndex], None] | None = None
        """Called with every index file opened (the source sets its vector lane)."""
        super().__init__(
            store_path=anchor,
            fingerprint=lambda: fingerprint_text(feed.probe().to_json()),
            rows=self._all_rows,
            **kwargs,
        )

    def _open(self, path: Path, *, create: bool = False) -> ForeignIndex:
        index = PostgresIndex(
            path,
            allowed=self._allowed,
            filter_sql=self._filter_sql,
            clock=self._clock,
            create=create,
        )
        if self.on_open is not None:
            self.on_open(index)
        return index

    def _next_mark(self, now: str) -> str:
        """The mark a read that begins ``now`` leaves: ``now``, or what the feed says (a
        store whose writers stamp ``updated_at`` with their own clocks marks by the
        latest stamp it holds, ``next_mark``)."""
        next_mark = getattr(self.feed, "next_mark", None)
        return str(next_mark(now)) if next_mark is not None else now

    def _all_rows(self) -> Iterable[CacheRow]:
        self._at = self.feed.database_now()
        self._mark = self._next_mark(self._at)
        self._counted = 0
        for row in self.feed.changed_rows(None):
            self._counted += 1
            yield row

    def store(self, progress: Progress | None = None) -> ForeignIndex:
        """The index: built when missing (or of another format), refreshed when the store's
        probe moved on since it was last brought up to date."""
        probe = self.feed.probe()
        fingerprint = fingerprint_text(probe.to_json())
        if self._store is None and self.path.exists():
            try:
                self._store = self._open(self.path)
            except Exception:
                self.discard()
        index = self._store
        if isinstance(index, PostgresIndex):
            meta = index.meta()
            if meta.get("source_fingerprint") == fingerprint:
                return index
            if meta.get("sync_mark") and self._refresh(index, meta, probe, fingerprint):
                return index
        self._build(probe, fingerprint, progress)
        assert self._store is not None
        return self._store

    def _build(self, probe: StoreProbe, fingerprint: str, progress: Progress | None) -> None:
        started = time.perf_counter()
        self._rebuild(fingerprint, progress)
        index = self._store
        assert isinstance(index, PostgresIndex) and self._mark is not None
        index.set_meta(
            {
                "sync_mark": self._mark,
                "sync_expiries": json.dumps(probe.expiries),
                "refreshed_at": self._at,
            }
        )
        self.last_sync = SyncReport(
            action="built",
            at=self._at,
            rows_read=self._counted,
            written=self._counted,
            seconds=time.perf_counter() - started,
        )

    def _refresh(
        self, index: PostgresIndex, meta: Mapping[str, str], probe: StoreProbe, fingerprint: str
    ) -> bool:
        """Bring the index up to date by what changed; False when it had better be built
        again (most of its rows are in key-hash buckets that differ from the store's).

        When the rows the index will hold after writing the changed ones are not the
        store's count, rows were deleted (or the window missed some): the store then
        sends its key hashes from a thread while the changed rows are written here, the
        server's scan and the index's writes at once. No caller holds the source's
        connection lock across a refresh (it is taken per query), or that thread would
        wait on it."""
        started = time.perf_counter()
        feed = self.feed
        at = feed.database_now()
        mark = self._next_mark(at)
        changed = list(feed.changed_rows(_minus_lag(meta["sync_mark"])))
        report = SyncReport(action="refreshed", at=at, rows_read=len(changed))
        after = index.hashed_count() + len(changed) - index.held(r.source_id for r in changed)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="memtui-pg-hashes") as pool:
            hashing = pool.submit(feed.buckets.hashes) if after != probe.rows else None
            report.written = index.upsert(changed)
            if hashing is None and index.hashed_count() != probe.rows:
                hashing = pool.submit(feed.buckets.hashes)
            if hashing is not None and not self._find_deletions(index, report, hashing.result()):
                return False
        if json.dumps(probe.expiries) != meta.get("sync_expiries"):
            self._sync_expiries(index, probe, meta["sync_mark"], report)
        index.set_meta(
            {
                "sync_mark": mark,
                "sync_expiries": json.dumps(probe.expiries),
                "source_fingerprint": fingerprint,
                "refreshed_at": at,
            }
        )
        index.checkpoint()
        report.seconds = time.perf_counter() - started
        self.last_sync = report
        return True

    def _find_deletions(self, index: PostgresIndex, report: SyncReport, store_hashes: Any) -> bool:
        """Compare the store's key hashes (``store_hashes``) with the index's: first the
        rows per fine bucket, then, in the buckets that differ, the rows per full hash.
        The index's ids of a hash the store holds fewer of are looked up in the store by
        key (its primary key: no scan); those it lacks are removed. Only a hash of which
        the store still holds more rows than the index (a row the refresh's window
        missed) has its ids read by a scan."""
        feed = self.feed
        report.buckets_compared = FINE_BUCKETS
        local = index.bucket_counts()
        differ = np.flatnonzero(fine_counts(store_hashes) != local)
        if not len(differ):
            return True
        if int(local[differ].sum()) > MOSTLY_DIFFERENT * int(local.sum()):
            return False
        here = index.hashes_in_buckets(differ)
        in_differ = store_hashes[np.isin(store_hashes & FINE_MASK, differ)]
        there = Counter(int(h) for h in in_differ)
        ours: dict[int, list[str]] = {}
        for source_id, key_hash in here:
            ours.setdefault(key_hash, []).append(source_id)
        suspects = sorted(i for h, ids in ours.items() if len(ids) > there.get(h, 0) for i in ids)
        kept = feed.existing(suspects)
        gone = set(suspects) - kept
        report.ids_read = len(kept)
        report.removed = index.remove(sorted(gone))
        short = sorted(
            h for h, n in there.items() if n > sum(1 for i in ours.get(h, ()) if i not in gone)
        )
        if not short:
            return True
        found = feed.buckets.ids_with(short)
        report.ids_read += len(found)
        missed = sorted(found - {i for h in short for i in ours.get(h, ())})
        if missed:  # rows the refresh's window could not see
            rows = feed.rows_by_id(missed)
            report.rows_read += len(rows)
            report.written += index.upsert(rows)
        return True

    def _sync_expiries(
        self, index: PostgresIndex, probe: StoreProbe, mark: str, report: SyncReport
    ) -> None:
        """The store's expiry digest moved: when the index's own digest now agrees (the
        changed and deleted rows explained it) nothing more is read; else the expiries
        refreshed since the mark, and only if that does not explain it, every expiry."""
        refreshed = getattr(self.feed, "refreshed_expiries", None)
        wanted = json.dumps(probe.expiries)
        if refreshed is not None:
            if json.dumps(index.expiry_digest()) == wanted:
                return
            moved = refreshed(_minus_lag(mark))
            report.expiries_read += len(moved)
            index.update_expiries(moved)
            if json.dumps(index.expiry_digest()) == wanted:
                return
        expiries = self.feed.expiries()
        report.expiries_read += len(expiries)
        index.set_expiries(expiries)

    def status(self) -> dict[str, Any]:
        out = super().status()
        if self._store is not None:
            meta = self._store.meta()
            out["built_at"] = meta.get("built_at")
            out["refreshed_at"] = meta.get("refreshed_at") or meta.get("sync_mark")
            # not ready but held: the next search brings it up to date rather than builds it
            out["refreshes"] = not out["ready"] and bool(meta.get("sync_mark"))
        if self.last_sync is not None:
            out["last_sync"] = self.last_sync.to_json()
        return out


def _minus_lag(mark: str) -> str:
    return (datetime.fromisoformat(mark) - timedelta(seconds=LAG_SECONDS)).isoformat()
