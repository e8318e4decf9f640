"""How a refresh of memtui's index of a Postgres store reads and writes: the changed
rows' keys come with the probe's scan and the rows by key; the store's key hashes on
a second, read-only connection; the index's writes in a statement per kind, so the
full-text index adds one segment; the WAL's checkpoint beside the next probe."""

from __future__ import annotations

import pytest
from conftest import fixed_clock

from memtui.sources import open_source
from memtui.sources.postgres import index_sync
from memtui.sources.postgres import langgraph_feed as langgraph

from .support import index_rows, open_library, store_rows


def opened(url, **kwargs):
    return open_source(url, clock=fixed_clock, **kwargs)


def listened(source):
    """Every statement the source runs on its own connection, in order (the store is
    real: this only listens)."""
    statements: list[str] = []
    query = source.query

    def listening(sql, params=()):
        statements.append(" ".join(sql.split()))
        return query(sql, params)

    source.query = listening
    return statements


def scans_by_update_time(statements):
    return [s for s in statements if "WHERE s.updated_at >" in s and "FILTER (" not in s]


def change(url):
    """Two updates, one new item and two deletions, by LangGraph itself."""
    with open_library(url) as store:
        store.put(("memories", "user-1"), "trip", {"text": "Paris trip moved to July"})
        store.put(("bulk",), "b05", {"text": "bulk item five, now about tea"})
        store.put(("memories", "user-3"), "new", {"text": "a brand new memory about chess"})
        store.delete(("bulk",), "b06")
        store.delete(("notes",), "groceries")


@pytest.mark.parametrize(
    ("how", "by_key", "parallel_from"),
    [
        ("by key, from the probe's keys", index_sync.BY_KEY, langgraph.PARALLEL_ARRAY_AGG),
        ("past BY_KEY: one scan", 2, langgraph.PARALLEL_ARRAY_AGG),
        ("a server before Postgres 16: one scan", index_sync.BY_KEY, 10**9),
    ],
)
def test_the_changed_rows_come_by_key_from_the_probes_scan(
    lg_store, monkeypatch, how, by_key, parallel_from
):
    monkeypatch.setattr(index_sync, "BY_KEY", by_key)
    monkeypatch.setattr(langgraph, "PARALLEL_ARRAY_AGG", parallel_from)
    with opened(lg_store) as source:
        source.search("trip")
    change(lg_store)
    with opened(lg_store) as source:
        statements = listened(source)
        found = [r.id for r in source.search("july").results]
        scans = scans_by_update_time(statements)
        probes = [s for s in statements if "FILTER (WHERE s.updated_at >" in s]
        report = source.index.last_sync
        assert report.action == "refreshed"
        assert (report.rows_read, report.written, report.removed) == (3, 3, 2)
        assert found == ["lg:memories.user-1/trip"]
        assert index_rows(source) == store_rows(source)
        if how.startswith("by key"):
            assert scans == [] and len(probes) == 1  # the probe's scan read the keys
        else:
            assert len(scans) == 1, how
            assert len(probes) == (0 if "before" in how else 1)


def test_nothing_changed_reads_nothing_but_the_probe(lg_store):
    with opened(lg_store) as source:
        source.search("trip")
        statements = listened(source)
        source.search("coffee")
        assert source.index.last_sync.action == "built"  # no refresh after the build
        assert scans_by_update_time(statements) == []
        assert not [s for s in statements if "string_agg" in s]


def test_the_store_hashes_come_on_a_second_read_only_connection(lg_store):
    with opened(lg_store, allow_writes=True) as source:
        source.search("trip")
        assert source._side is None  # nothing deleted yet: no second connection
        change(lg_store)
        source.search("tea")
        assert source.index.last_sync.removed == 2
        side = source._side
        assert side is not None
        assert side.query("SHOW default_transaction_read_only") == [("on",)]
        assert source.query("SHOW default_transaction_read_only") == [("off",)]
        (mine,) = source.query("SELECT pg_backend_pid()")[0]
        (theirs,) = side.query("SELECT pg_backend_pid()")[0]
        assert mine != theirs
    assert source._side is None  # closed with the source


def fts_flushes(index, work):
    """How many times the full-text index wrote a segment's terms (its ``_idx`` rows)
    while ``work`` ran, from SQLite's trace of the statements it runs."""
    written: list[str] = []
    index._conn.set_trace_callback(
        lambda sql: written.append(sql) if "INSERT INTO 'main'.'records_fts_idx'" in sql else None
    )
    try:
        work()
    finally:
        index._conn.set_trace_callback(None)
    return len(written)


def test_a_refresh_writes_its_rows_as_one_full_text_segment(lg_store):
    with opened(lg_store) as source:
        index = source.index.store()
        with open_library(lg_store) as store:
            for n in range(12):
                store.put(("bulk",), f"b{n:02d}", {"text": f"bulk item {n} rewritten about tea"})
            for n in range(12):
                store.put(("fresh",), f"f{n:02d}", {"text": f"fresh item {n} about chess"})
        flushes = fts_flushes(index, source.index.store)
        assert source.index.last_sync.written == 24
        # a statement per row wrote a segment per row (24 and more); one per kind, at most
        # one each for the new rows and the new contents
        assert flushes <= 2
        hits = {r.id for r in source.search("rewritten", keyword_only=True, limit=50).results}
        assert hits == {f"lg:bulk/b{n:02d}" for n in range(12)}
        assert len(source.search("chess", keyword_only=True, limit=50).results) == 12
        old = {r.id for r in source.search("number", keyword_only=True, limit=50).results}
        assert old == {f"lg:bulk/b{n:02d}" for n in range(12, 24)}  # the old texts are gone
        # the full-text index agrees with its content table, row for row
        index.query("INSERT INTO records_fts(records_fts, rank) VALUES ('integrity-check', 1)")
        assert index_rows(source) == store_rows(source)


def wal_size(index) -> int:
    return index_sync.wal_bytes(index.path)


def test_the_refreshes_checkpoint_runs_beside_a_later_probe(lg_store, monkeypatch):
    """A refresh leaves its writes in the WAL; once it holds ``CHECKPOINT_BYTES`` the next
    look at the store checkpoints it while the probe runs."""
    with opened(lg_store) as source:
        index = source.index.store()
        index.checkpoint()
        change(lg_store)
        source.index.store()
        assert source.index.last_sync.action == "refreshed"
        left = wal_size(index)
        assert left > 0  # the refresh's writes wait in the WAL
        source.index.store()  # below CHECKPOINT_BYTES: they stay there
        assert wal_size(index) == left
        monkeypatch.setattr(index_sync, "CHECKPOINT_BYTES", left)
        with open_library(lg_store) as store:
            store.put(("memories", "user-3"), "more", {"text": "one more change"})
        source.index.store()  # a refresh, whose WAL is now past the mark
        source.index.store()  # nothing changed: the probe, and the checkpoint beside it
        assert wal_size(index) == 0
        assert index_rows(source) == store_rows(source)
