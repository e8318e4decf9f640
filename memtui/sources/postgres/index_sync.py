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
- deletions (the agent's own, its TTL sweeper's): when the index holds more rows
  than the store, the rows per key-hash bucket are counted on both sides and only
  the index's ids in the buckets whose counts differ are looked up in the store
  (``memtui.sources.postgres.key_buckets``);
- expiries that moved without ``updated_at`` (LangGraph's ``refresh_ttl``): when the
  store's expiry digest differs from the index's own (``expiry_digest``, the same
  count and sum computed on memtui's copy), the feed reads the rows whose TTL was
  refreshed since the mark (``refreshed_expiries``); only if the digests still
  differ (or the feed cannot say) is every expiry read.

What a refresh costs on the server is one scan of the table for the changed rows
(LangGraph has no index on ``updated_at``) and, after deletions, one scan that
hashes the keys and a lookup by primary key of the index's ids in the buckets that
differ; what it transfers is the changed rows, the bucket counts and those ids.
``last_sync`` says what the last one read.

The index holds content only (the keyword lane): vectors stay in the database and
``PostgresIndex.database_vector_lane`` asks the store for the vector lane.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from memtui.core.index import FTS_TABLE
from memtui.core.search.scores import Lane
from memtui.sources.cache import SourceIndex, fingerprint_text, second_half
from memtui.sources.foreign_index import CacheRow, ForeignIndex, StaleIndex, scope_column
from memtui.sources.postgres.key_buckets import MOSTLY_DIFFERENT, StoreBuckets, bucket_count
from memtui.sources.shapes import Progress

KEY_HASHES = "2"
"""The format of the index's ``key_hashes`` table (an index without it is rebuilt)."""
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

    A feed may also have ``next_mark(now)`` (the mark a read beginning ``now`` leaves),
    ``refreshed_expiries(since)`` (the expiries moved since, by source id: then its
    probe's expiry digest is ``PostgresIndex.expiry_digest``'s) and
    ``build_values(scope_keys)`` (every row for a build as ``PostgresIndex.load_values``
    writes it, in any order; None when it cannot make them for these scope keys)."""

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

    # -- the key hashes (``key_buckets``): one row per record, gone with it

    def __init__(self, path: Path, *, create: bool = False, **kwargs: Any) -> None:
        super().__init__(path, create=create, **kwargs)
        if create:
            with self.write() as conn:
                conn.execute(
                    "CREATE TABLE key_hashes (record_id INTEGER PRIMARY KEY, hash INTEGER NOT NULL)"
                )
                conn.execute(
                    "CREATE TRIGGER key_hashes_ad AFTER DELETE ON records BEGIN "
                    "DELETE FROM key_hashes WHERE record_id = old.id; END"
                )
                self._set_meta(conn, {"key_hashes": KEY_HASHES})

    def _check_format(self) -> None:
        super()._check_format()
        if self.meta().get("key_hashes") != KEY_HASHES:
            raise StaleIndex(f"{self.path} has no key hashes of this format")

    def load(self, rows: Sequence[CacheRow], progress: Progress | None = None) -> None:
        super().load(rows, progress)
        with self.write() as conn:
            conn.executemany(
                "INSERT INTO key_hashes (record_id, hash) VALUES (?, ?)",
                [
                    (n, row.key_hash)
                    for n, row in enumerate(rows, start=1)
                    if row.key_hash is not None
                ],
            )

    def load_values(
        self, values: Sequence[Sequence[Any]], progress: Progress | None = None
    ) -> None:
        """``ForeignIndex.load_values``, each row's key hash last (after its scope values)."""
        super().load_values(values, progress)
        with self.write() as conn:
            conn.executemany(
                "INSERT INTO key_hashes (record_id, hash) VALUES (?, ?)",
                [(n, v[-1]) for n, v in enumerate(values, start=1) if v[-1] is not None],
            )

    def _write_hashes(self, conn: Any, rows: Sequence[CacheRow]) -> None:
        conn.executemany(
            "INSERT OR REPLACE INTO key_hashes (record_id, hash) "
            "SELECT id, ? FROM records WHERE source_id = ?",
            [(row.key_hash, row.source_id) for row in rows if row.key_hash is not None],
        )

    def bucket_counts(self, buckets: int) -> dict[int, int]:
        """Rows per key-hash bucket (a row without a hash is in none: its bucket then
        differs, and the refresh reads it again)."""
        rows = self.query("SELECT hash & ?, count(*) FROM key_hashes GROUP BY 1", (buckets - 1,))
        return {int(b): int(n) for b, n in rows}

    def ids_in_buckets(self, buckets: int, chosen: Sequence[int]) -> dict[int, set[str]]:
        """The source ids in these buckets, by bucket."""
        out: dict[int, set[str]] = {}
        if not chosen:
            return out
        rows = self.query(
            "SELECT k.hash & ?, r.source_id FROM key_hashes AS k "
            "JOIN records AS r ON r.id = k.record_id "
            "WHERE (k.hash & ?) IN (SELECT value FROM json_each(?))",
            (buckets - 1, buckets - 1, json.dumps(list(chosen))),
        )
        for bucket, source_id in rows:
            out.setdefault(int(bucket), set()).add(str(source_id))
        return out

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
        as text (None when there is none): a LangGraph store's probe computes the same."""
        count, seconds, micros = self.query(  # summed apart: their product overflows int64
            "SELECT count(*), sum(CAST(strftime('%s', substr(expires_at, 1, 19)) AS INTEGER)), "
            "sum(CAST(substr(expires_at, 21, 6) AS INTEGER)) FROM records "
            "WHERE expires_at IS NOT NULL"
        )[0]
        total = None if seconds is None else int(seconds) * 1_000_000 + int(micros)
        return [int(count), None if total is None else str(total)]

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

    def _fill(self, store: ForeignIndex, total: int, progress: Progress | None) -> None:
        """A feed with ``build_values`` gives the rows as the index writes them (no
        ``CacheRow`` made for each); any other, as every source does."""
        build_values = getattr(self.feed, "build_values", None)
        if build_values is None or not isinstance(store, PostgresIndex):
            super()._fill(store, total, progress)
            return
        at = self.feed.database_now()
        mark = self._next_mark(at)
        values = build_values(store.scope_keys)
        if values is None:
            super()._fill(store, total, progress)
            return
        self._at, self._mark, self._counted = at, mark, len(values)
        if progress:
            progress(len(values), len(values) * 2 or 1)
        values.sort()  # by source id (unique: no row is compared beyond it)
        store.load_values(values, second_half(progress, len(values)))

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
        again (most of its key-hash buckets differ from the store's)."""
        started = time.perf_counter()
        feed = self.feed
        at = feed.database_now()
        mark = self._next_mark(at)
        changed = list(feed.changed_rows(_minus_lag(meta["sync_mark"])))
        report = SyncReport(action="refreshed", at=at, rows_read=len(changed))
        report.written = index.upsert(changed)
        if index.record_count() != probe.rows:  # deleted rows (or rows the window missed)
            if not self._find_deletions(index, report):
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

    def _find_deletions(self, index: PostgresIndex, report: SyncReport) -> bool:
        """Compare rows per key-hash bucket. The index's ids in the buckets that differ are
        looked up in the store by key (its primary key: no scan); those it lacks are
        removed. Only a bucket where the store still holds more rows than the index
        found there (a row the refresh's window missed) has its ids read by a scan.
        The store's count runs in a thread: no caller holds the source's connection lock
        across a refresh (it is taken per query), or that thread would wait on it."""
        feed = self.feed
        buckets = bucket_count(index.record_count())
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="memtui-pg-buckets") as pool:
            # the server counts its rows while the index counts its own: two scans of the
            # whole store, one on each side, at once rather than one after the other
            counting = pool.submit(feed.buckets.counts, buckets)
            local = index.bucket_counts(buckets)
            remote = counting.result()
        report.buckets_compared = buckets
        differ = sorted(b for b in set(remote) | set(local) if remote.get(b, 0) != local.get(b, 0))
        if not differ:
            return True
        here = index.ids_in_buckets(buckets, differ)
        held = set().union(*here.values())
        if len(held) > MOSTLY_DIFFERENT * index.record_count():
            return False
        kept = feed.existing(sorted(held))
        report.ids_read = len(kept)
        report.removed = index.remove(sorted(held - kept))
        short = [b for b in differ if remote.get(b, 0) > len(here.get(b, set()) & kept)]
        if not short:
            return True
        there = feed.buckets.ids_in(buckets, short)
        report.ids_read += len(there)
        missed = sorted(there - held)  # rows the refresh's window could not see
        if missed:
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
        if self.last_sync is not None:
            out["last_sync"] = self.last_sync.to_json()
        return out


def _minus_lag(mark: str) -> str:
    return (datetime.fromisoformat(mark) - timedelta(seconds=LAG_SECONDS)).isoformat()
