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
  is still read), writes those that differ, then the new mark. A feed with
  ``probe_changed`` reads those rows' keys in the probe's own scan, and the rows by
  key (up to ``BY_KEY``); its writes leave their checkpoint to run beside a later
  probe, once the WAL holds ``CHECKPOINT_BYTES`` (``_checkpoint_beside``);
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

What a refresh costs on the server is the probe's scan (LangGraph has no index on
``updated_at``; without ``probe_changed``, one more scan for the changed rows), a
lookup by primary key of the changed rows and, after deletions, one scan that
hashes the keys (in parallel workers, on the source's second connection) and a
lookup by primary key of the index's ids of the hashes that differ; what it
transfers is the changed rows, 4 bytes per row of the store and those ids.
``last_sync`` says what the last one read.

The index holds content only (the keyword lane): vectors stay in the database and
``PostgresIndex.database_vector_lane`` asks the store for the vector lane.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from memtui.sources.cache import SourceIndex, fingerprint_text, second_half
from memtui.sources.foreign_index import CacheRow, ForeignIndex
from memtui.sources.postgres.index_file import PostgresIndex
from memtui.sources.postgres.key_buckets import (
    FINE_BUCKETS,
    FINE_MASK,
    MOSTLY_DIFFERENT,
    StoreBuckets,
    fine_counts,
)
from memtui.sources.shapes import Progress

BY_KEY = 10_000
"""The most changed rows a refresh reads by key (from the probe's keys); beyond, one scan
by ``updated_at`` reads them."""
CHECKPOINT_BYTES = 64 * 2**20
"""The WAL a refresh leaves unchecked until it holds this much: a checkpoint copies the
WAL into the index file and syncs it (0.1-0.3 s for a refresh of 1,000 changes, most
of it the sync), so several refreshes share one."""
LAG_SECONDS = 2.0
"""How far before the mark a refresh reads again: a writer's transaction that began before
the mark (its ``updated_at``) and committed after it is read by the next refresh."""


@dataclass(frozen=True)
class StoreProbe:
    """The change probe: rows, the latest ``updated_at``, and a digest of the expiries
    (``[count, sum]`` of the rows that have one). One cheap aggregate query."""

    rows: int
    latest: str | None
    expiries: Any = None
    changed: tuple[str, ...] | None = None
    """The ids of the rows updated after the mark less the lag, when the probe read them
    (``probe_changed``); not part of the fingerprint."""

    def to_json(self) -> list[Any]:
        return [self.rows, self.latest, self.expiries]


class ChangeFeed(Protocol):
    """What a Postgres source tells its index about the store (see the module docstring).

    A feed may also have ``next_mark(now)`` (the mark a read beginning ``now`` leaves),
    ``refreshed_expiries(since)`` (the expiries moved since, by source id: then its
    probe's expiry digest is ``PostgresIndex.expiry_digest``'s) and
    ``build_values(scope_keys)`` (every row for a build as ``PostgresIndex.load_values``
    writes it, in any order; None when it cannot make them for these scope keys) and
    ``probe_changed(since)`` (``probe`` with ``StoreProbe.changed``: the ids of the rows
    updated after ``since``, from the same scan)."""

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


class SyncedIndex(SourceIndex):
    """The index of one Postgres store: built once, then refreshed by what changed."""

    def __init__(
        self,
        *,
        feed: ChangeFeed,
        anchor: Path,
        fingerprint: Callable[[], str] | None = None,
        **kwargs: Any,
    ) -> None:
        """``fingerprint``: what ``status`` compares with the recorded probe (the source's
        paced probe, so that a status line does not scan the store each time it is
        drawn); ``store`` always probes afresh."""
        self.feed = feed
        self.last_sync: SyncReport | None = None
        self._mark: str | None = None
        self._at = ""
        self._counted = 0
        self._checkpoint_due = False
        self.on_open: Callable[[PostgresIndex], None] | None = None
        """Called with every index file opened (the source sets its vector lane)."""
        super().__init__(
            store_path=anchor,
            fingerprint=fingerprint or (lambda: fingerprint_text(feed.probe().to_json())),
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
        probe moved on since it was last brought up to date. A feed with
        ``probe_changed`` reads the changed rows' keys in the probe's own scan."""
        if self._store is None and self.path.exists():
            try:
                self._store = self._open(self.path)
            except Exception:
                self.discard()
        index = self._store
        meta = index.meta() if isinstance(index, PostgresIndex) else {}
        probe_changed = getattr(self.feed, "probe_changed", None)
        at = None
        with self._checkpoint_beside(index):
            if meta.get("sync_mark") and probe_changed is not None:
                at = self.feed.database_now()  # before the probe's snapshot: the next mark
                probe = probe_changed(_minus_lag(meta["sync_mark"]))
            else:
                probe = self.feed.probe()
        fingerprint = fingerprint_text(probe.to_json())
        if isinstance(index, PostgresIndex):
            if meta.get("source_fingerprint") == fingerprint:
                return index
            if meta.get("sync_mark") and self._refresh(index, meta, probe, fingerprint, at):
                return index
        self._build(probe, fingerprint, progress)
        assert self._store is not None
        return self._store

    @contextlib.contextmanager
    def _checkpoint_beside(self, index: ForeignIndex | None) -> Iterator[None]:
        """The refreshes' checkpoint, once their writes left in the WAL reach
        ``CHECKPOINT_BYTES`` (``_refresh``), in a thread while the block waits on the
        database, so that no refresh waits for one."""
        if not self._checkpoint_due or index is None:
            yield
            return
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="memtui-checkpoint") as pool:
            done = pool.submit(index.checkpoint)
            yield
            self._checkpoint_due = not done.result()

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
        self,
        index: PostgresIndex,
        meta: Mapping[str, str],
        probe: StoreProbe,
        fingerprint: str,
        at: str | None = None,
    ) -> bool:
        """Bring the index up to date by what changed; False when it had better be built
        again (most of its rows are in key-hash buckets that differ from the store's).
        ``at``: the database's clock before ``probe`` was read, when the probe holds the
        changed rows' keys (``StoreProbe.changed``): those rows are then read by key
        (up to ``BY_KEY``), not by another scan.

        When the rows the index will hold after writing the changed ones are not the
        store's count, rows were deleted (or the window missed some): the store then
        sends its key hashes from a thread, on the source's second connection, while
        the changed rows are read and written here. When the store holds fewer rows
        than the index, that read starts first (rows were deleted whatever changed).
        The comparison does not depend on which read saw the store first: whatever it
        finds missing is looked up by key before it is removed."""
        started = time.perf_counter()
        with index.autocheckpoint_off():
            done = self._catch_up(index, meta, probe, fingerprint, at)
        self._checkpoint_due = wal_bytes(index.path) >= CHECKPOINT_BYTES
        if done is not None:
            done.seconds = time.perf_counter() - started
            self.last_sync = done
        return done is not None

    def _catch_up(
        self,
        index: PostgresIndex,
        meta: Mapping[str, str],
        probe: StoreProbe,
        fingerprint: str,
        at: str | None,
    ) -> SyncReport | None:
        """``_refresh``'s work; its report, None when the index had better be built again."""
        feed = self.feed
        held = index.hashed_count()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="memtui-pg-hashes") as pool:
            # fewer rows than the index holds: rows were deleted, whatever the changed ones
            hashing = pool.submit(feed.buckets.hashes) if probe.rows < held else None
            if at is None or probe.changed is None or len(probe.changed) > BY_KEY:
                at = feed.database_now()
                changed = list(feed.changed_rows(_minus_lag(meta["sync_mark"])))
            else:
                changed = feed.rows_by_id(sorted(probe.changed))
            mark = self._next_mark(at)
            report = SyncReport(action="refreshed", at=at, rows_read=len(changed))
            after = held + len(changed) - index.held(r.source_id for r in changed)
            if hashing is None and after != probe.rows:
                hashing = pool.submit(feed.buckets.hashes)
            report.written = index.upsert(changed)
            if hashing is None and index.hashed_count() != probe.rows:
                hashing = pool.submit(feed.buckets.hashes)
            if hashing is not None:
                local = index.bucket_counts()  # while the store's hashes are on their way
                if not self._find_deletions(index, report, local, hashing.result()):
                    return None
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
        return report

    def _find_deletions(
        self, index: PostgresIndex, report: SyncReport, local: Any, store_hashes: Any
    ) -> bool:
        """Compare the store's key hashes (``store_hashes``) with the index's: first the
        rows per fine bucket, then, in the buckets that differ, the rows per full hash.
        The index's ids of a hash the store holds fewer of are looked up in the store by
        key (its primary key: no scan); those it lacks are removed. Only a hash of which
        the store still holds more rows than the index (a row the refresh's window
        missed) has its ids read by a scan. ``local``: the index's rows per fine bucket."""
        feed = self.feed
        report.buckets_compared = FINE_BUCKETS
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


def wal_bytes(path: Path | None) -> int:
    """The size of a SQLite file's WAL (0 when there is none)."""
    if path is None:
        return 0
    try:
        return (path.parent / f"{path.name}-wal").stat().st_size
    except OSError:
        return 0


def _minus_lag(mark: str) -> str:
    return (datetime.fromisoformat(mark) - timedelta(seconds=LAG_SECONDS)).isoformat()
