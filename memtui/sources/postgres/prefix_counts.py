"""A LangGraph ``PostgresStore``'s items per namespace, counted once per state of the
store and shared by every view that asks.

After a change the app asks for the counts several times at once: the tree's live and
hidden counts, the search bar's tiers and namespaces, the banner's totals. Each was a
``GROUP BY prefix`` of the whole table; the hidden one, with no condition, is planned
as an index-only scan that turns into a heap read per row when the visibility map
has been cleared by writes (2-2.7 s at a million items, against 0.35 s for a
parallel scan). ``PrefixCounts`` is one parallel scan that gives, per namespace, its
items and the expiries of those that have one (packed, 8 bytes each), from which the
live counts follow for any "now" (live while ``expires_at`` is null or later).

``KeptReads`` keeps such reads until the store's change probe moves on (the app's live
probe: ``change_watch``) or the source says to read again (F5, a forget made here).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def micros(moment: datetime) -> int:
    """Microseconds since the epoch, exactly (as the database's expiry sums)."""
    return (moment - EPOCH) // timedelta(microseconds=1)


@dataclass
class PrefixCounts:
    """Items per namespace, and per namespace the sorted expiries (microseconds)."""

    totals: dict[str, int]
    expiries: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def sql(table: str, has_ttl: bool) -> str:
        """Per namespace: items, their expiries packed, and the change probe's parts (the
        latest ``updated_at``, the expiries' count and sum), so that this one scan also
        says which state of the store it counted (``probe_of``)."""
        micros_sql = "(extract(epoch FROM s.expires_at) * 1000000)::bigint"
        expiries = (
            f"string_agg(int8send({micros_sql}), ''::bytea) "
            f"FILTER (WHERE s.expires_at IS NOT NULL), count(s.expires_at), sum({micros_sql})"
            if has_ttl
            else "NULL::bytea, 0, NULL"
        )
        return (
            f"SELECT s.prefix, count(*), {expiries}, max(s.updated_at) "
            f"FROM {table} AS s GROUP BY s.prefix"
        )

    @classmethod
    def of(cls, rows: Iterable[Sequence[Any]]) -> PrefixCounts:
        totals: dict[str, int] = {}
        expiries: dict[str, Any] = {}
        for prefix, count, packed, *_probe in rows:
            totals[str(prefix)] = int(count)
            if packed:
                expiries[str(prefix)] = np.sort(np.frombuffer(bytes(packed), dtype=">i8"))
        return cls(totals, expiries)

    @staticmethod
    def probe_of(rows: Sequence[Sequence[Any]]) -> tuple[int, Any, list[Any]]:
        """The change probe's answer (rows, latest ``updated_at``, the expiries' count and
        sum as text) from ``sql``'s rows: the sums of what the probe sums at once."""
        with_ttl = sum(int(r[3]) for r in rows)
        ttl_sum = sum(int(r[4]) for r in rows if r[4] is not None)
        latest = max((r[5] for r in rows if r[5] is not None), default=None)
        return (
            sum(int(r[1]) for r in rows),
            latest,
            [with_ttl, str(ttl_sum) if with_ttl else None],
        )

    def counts(self, now: datetime | None) -> list[tuple[str, int]]:
        """(namespace, items) of every namespace with any: all of them (``now`` None),
        else those live at ``now``."""
        if now is None:
            return list(self.totals.items())
        at = micros(now)
        out = []
        for prefix, total in self.totals.items():
            held = self.expiries.get(prefix)
            expired = int(np.searchsorted(held, at, side="right")) if held is not None else 0
            if total - expired:
                out.append((prefix, total - expired))
        return out


def tiers_of(by_prefix: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Items per tier (a namespace's first label), sorted by tier."""
    tiers: dict[str, int] = {}
    for prefix, count in by_prefix:
        tier = str(prefix).split(".", 1)[0]
        tiers[tier] = tiers.get(tier, 0) + int(count)
    return dict(sorted(tiers.items()))


class KeptReads:
    """Reads kept while ``token()`` (the store's change probe, paced) gives the same
    value and nobody called ``clear``; one reader reads while the others wait."""

    def __init__(self, token: Callable[[], Any]) -> None:
        self.token = token
        self._lock = threading.Lock()
        self._kept: dict[str, tuple[Any, Any]] = {}

    def get(self, name: str, read: Callable[[], Any]) -> Any:
        token = self.token()
        with self._lock:
            held = self._kept.get(name)
            if held is not None and held[0] == token:
                return held[1]
            value = read()
            self._kept[name] = (token, value)
            return value

    def get_versioned(self, name: str, read: Callable[[], tuple[Any, Any]]) -> Any:
        """``get`` of a read that also gives the store's version it saw (the probe's
        answer, from the same scan): with nothing kept, that one read is all; its
        version is then what later reads compare with ``token()``."""
        with self._lock:
            held = self._kept.get(name)
            if held is not None and held[0] == self.token():
                return held[1]
            value, version = read()
            self._kept[name] = (version, value)
            return value

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
