"""A LangGraph ``PostgresStore``'s items per namespace are counted by one scan per state
of the store and shared by every view (the tree, the search bar, the banner): live
counts follow the clock from the kept expiries, a change the probe sees or ``reread``
(F5, a forget made here) counts again."""

from __future__ import annotations

import itertools
from datetime import timedelta

from conftest import NOW

from memtui.sources import open_source
from memtui.sources.postgres.prefix_counts import PrefixCounts, micros

from .support import open_library, sql


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self):
        return self.now


def listened(source):
    """Every statement the source runs, in order (the store is real: this only listens)."""
    seen: list[str] = []
    query = source.query

    def listening(statement, params=()):
        seen.append(statement)
        return query(statement, params)

    source.query = listening
    return seen


def grouped(statements):
    return [s for s in statements if "GROUP BY s.prefix" in s]


def direct(url, live_at=None):
    """Items per namespace by a plain GROUP BY (live at ``live_at`` when given)."""
    where = "" if live_at is None else "WHERE expires_at IS NULL OR expires_at > %s"
    params = [] if live_at is None else [live_at]
    rows = sql(url, f"SELECT prefix, count(*) FROM store {where} GROUP BY prefix", params)
    return {p: n for p, n in rows}


def test_every_view_shares_one_scan_and_the_counts_are_the_databases(lg_url):
    clock = Clock()
    with open_source(lg_url, clock=clock) as source:
        statements = listened(source)
        live = source.facets()
        every = source.facets(include_hidden=True)
        tiers = source.tier_counts()
        every_tier = source.tier_counts(include_hidden=True)
        values = source.scope_values("namespace")
        source.summary()
        assert len(grouped(statements)) == 1  # the tree, the search bar, the banner
        by_prefix = source._by_prefix(include_hidden=False)
        assert dict(by_prefix) == direct(lg_url, NOW)
        assert dict(source._by_prefix(include_hidden=True)) == direct(lg_url)
        assert sum(f.count for f in live) == sum(direct(lg_url, NOW).values())
        assert sum(f.count for f in every) == sum(direct(lg_url).values())
        assert sum(tiers.values()) + 1 == sum(every_tier.values())  # the expired session
        assert "sessions.s-1" in values
        # the clock moves past the other session item's expiry: the kept expiries say so
        clock.now = NOW + timedelta(days=2)
        assert dict(source._by_prefix(include_hidden=False)) == direct(lg_url, clock.now)
        assert source.tier_counts().get("sessions", 0) == 0
        assert len(grouped(statements)) == 1


def test_a_change_the_probe_sees_counts_again(lg_store):
    with open_source(lg_store, clock=lambda: NOW) as source:
        source._watch.cheap_seconds = float("inf")  # a small store: probed whenever asked
        statements = listened(source)
        before = source.tier_counts()
        with open_library(lg_store) as store:
            store.put(("memories", "user-9"), "new", {"text": "written meanwhile"})
        after = source.tier_counts()
        assert after["memories"] == before["memories"] + 1
        assert len(grouped(statements)) == 2


def test_reread_counts_again_where_the_paced_probe_has_not_run(lg_store):
    """At a million items the probe is paced (``change_watch``): until it runs again the
    counts are kept; F5 (``reread``) has the next read probe and count afresh."""
    with open_source(lg_store, clock=lambda: NOW) as source:
        ticks = itertools.count()
        source._watch.clock = lambda: float(next(ticks))  # each probe "takes" a second
        source._watch.cheap_seconds = 0.0  # and is paced, as a large store's
        before = source.tier_counts()
        with open_library(lg_store) as store:
            store.put(("memories", "user-9"), "new", {"text": "written meanwhile"})
        assert source.tier_counts() == before  # kept: the paced probe did not run again
        source.reread()
        assert source.tier_counts()["memories"] == before["memories"] + 1


def test_a_forget_made_here_counts_again(lg_store):
    with open_source(lg_store, clock=lambda: NOW, allow_writes=True, operator="t") as source:
        ticks = itertools.count()
        source._watch.clock = lambda: float(next(ticks))
        source._watch.cheap_seconds = 0.0
        before = source.tier_counts()
        source.forget("lg:memories.user-1/trip", reason="test")
        assert source.tier_counts()["memories"] == before["memories"] - 1


def test_the_live_counts_follow_the_expiries_to_the_microsecond():
    """An item is live while its expiry is later than now (strictly), as LangGraph reads."""
    at = NOW + timedelta(microseconds=7)
    packed = b"".join(micros(at + timedelta(microseconds=d)).to_bytes(8, "big") for d in (1, 0))
    counts = PrefixCounts.of([("a", 3, packed), ("b", 1, None)])
    assert counts.counts(None) == [("a", 3), ("b", 1)]
    assert counts.counts(at - timedelta(microseconds=1)) == [("a", 3), ("b", 1)]
    assert counts.counts(at) == [("a", 2), ("b", 1)]  # expires_at == now: expired
    assert counts.counts(at + timedelta(microseconds=1)) == [("a", 1), ("b", 1)]


def test_the_index_status_asks_the_paced_probe_not_the_store(lg_store):
    """A status line is drawn often: it compares the index with the paced probe's answer
    (``data_version``), while a search always probes afresh."""
    with open_source(lg_store, clock=lambda: NOW) as source:
        ticks = itertools.count()
        source._watch.clock = lambda: float(next(ticks))
        source._watch.cheap_seconds = 0.0
        source.search("trip")
        statements = listened(source)
        assert source.index_status()["ready"]
        with open_library(lg_store) as store:
            store.put(("memories", "user-9"), "new", {"text": "written meanwhile"})
        for _ in range(3):
            source.index_status()
        probes = [s for s in statements if "max(s.updated_at)" in s]
        assert len(probes) <= 1  # the watch's one probe at most, not one per status
        assert [r.id for r in source.search("meanwhile").results] == ["lg:memories.user-9/new"]


def test_the_count_also_answers_the_change_probe(lg_store):
    """With nothing kept (a first screen, F5) the one scan that counts the namespaces also
    gives the probe's answer, the same the probe gives: no probe runs before it."""
    with open_source(lg_store, clock=lambda: NOW) as source:
        ticks = itertools.count()
        source._watch.clock = lambda: float(next(ticks))
        source._watch.cheap_seconds = 0.0
        statements = listened(source)
        source.tier_counts()
        source.facets(include_hidden=True)
        probes = [s for s in statements if "max(s.updated_at)" in s and "GROUP BY" not in s]
        assert probes == [] and len(grouped(statements)) == 1
        assert source._watch._last.version == source.fingerprint()
        with open_library(lg_store) as store:
            store.delete(("bulk",), "b00")
        source.reread()
        assert source.tier_counts()["bulk"] == 23
        assert source._watch._last.version == source.fingerprint()


def test_an_empty_store_counts_as_its_probe_says():
    assert PrefixCounts.probe_of([]) == (0, None, [0, None])
