"""memtui's keyword index of a Postgres store is refreshed by what changed: after puts,
updates and deletes by LangGraph itself, reopening reads those rows, not the store."""

from __future__ import annotations

import pytest
from conftest import fixed_clock

from memtui.sources import open_source
from memtui.sources.postgres.key_buckets import FINE_BUCKETS, fine_counts

from .support import ITEMS, index_rows, open_library, sql, store_rows


def opened(url, **kwargs):
    return open_source(url, clock=fixed_clock, **kwargs)


def looked_up(source):
    """The id lists a refresh asks the store about by key (``ChangeFeed.existing``),
    filled as it runs (the store is real: this only listens)."""
    asked = []
    existing = source.feed.existing

    def listening(ids):
        asked.append(sorted(ids))
        return existing(ids)

    source.feed.existing = listening
    return asked


def test_reopening_after_changes_reads_only_the_changed_rows(lg_store):
    with opened(lg_store) as source:
        assert not source.index_status().get("refreshes")  # none yet: it is built
        source.search("trip")
        built = source.index.last_sync
        assert (built.action, built.rows_read) == ("built", len(ITEMS))
        version = source.data_version()
    with open_library(lg_store) as store:
        store.put(("memories", "user-3"), "new-1", {"text": "a brand new memory about tea"})
        store.put(("memories", "user-3"), "new-2", {"text": "another new one"})
        store.put(("memories", "user-1"), "trip", {"text": "Paris trip moved to July"})
        store.delete(("bulk",), "b03")
        store.delete(("bulk",), "b04")
        store.delete(("memories", "user-2", "sub"), "deep")
    with opened(lg_store) as source:
        assert source.data_version() != version  # the app's live probe sees it
        assert not source.index_status()["ready"]
        assert source.index_status()["refreshes"]  # the app says "refreshing", not "building"
        asked = looked_up(source)
        response = source.search("july")
        report = source.index.last_sync
        assert report.action == "refreshed"
        assert report.rows_read == 3  # the two puts and the update: nothing else came over
        assert report.written == 3
        assert report.removed == 3
        # the full key hashes were compared in the fine buckets that differ: only the
        # deleted rows' ids were looked up in the store, and none came back
        assert report.buckets_compared == FINE_BUCKETS
        assert asked == [["lg:bulk/b03", "lg:bulk/b04", "lg:memories.user-2.sub/deep"]]
        assert report.ids_read == 0
        assert [r.id for r in response.results] == ["lg:memories.user-1/trip"]
        assert index_rows(source) == store_rows(source)
        assert response.trace.source.index_refreshed.startswith("refreshed ")
        assert "3 rows read, 3 removed" in response.trace.source.index_refreshed
    with opened(lg_store) as source:
        source.search("tea")
        assert source.index.last_sync is None  # nothing changed: the index was used as is
        assert source.index_status()["ready"]


def test_a_refreshed_ttl_reaches_the_index_without_updated_at(lg_store):
    with opened(lg_store) as source:
        source.search("scratch")
        assert "lg:sessions.s-1/short" not in {r.id for r in source.search("scratch").results}
    # LangGraph's get refreshes an item's TTL: expires_at moves, updated_at does not
    before = sql(lg_store, "SELECT max(updated_at) FROM store")
    with open_library(lg_store) as store:
        store.get(("sessions", "s-1"), "short", refresh_ttl=True)
    assert sql(lg_store, "SELECT max(updated_at) FROM store") == before
    with opened(lg_store) as source:
        found = {r.id for r in source.search("scratch").results}
        report = source.index.last_sync
        assert report.rows_read == 0
        assert report.expiries_read == 1  # the refreshed one only, not every expiry
        assert "lg:sessions.s-1/short" in found  # live again, in the store and in the index
        assert index_rows(source) == store_rows(source)


def test_a_row_the_window_missed_is_found_by_the_counts(lg_store):
    """A row whose updated_at is older than the mark (a writer's clock, a long
    transaction) is still found when its group's count differs: that group's ids are read.
    (A missed row and as many deletions between two refreshes cancel out in the counts:
    docs/sources.md says so.)"""
    with opened(lg_store) as source:
        source.search("trip")
    sql(
        lg_store,
        "INSERT INTO store (prefix, key, value, created_at, updated_at) "
        "VALUES ('notes', 'late', '{\"text\": \"a late arrival\"}', now() - interval '1 day', "
        "now() - interval '1 day')",
    )
    sql(lg_store, "DELETE FROM store WHERE prefix = 'bulk' AND key IN ('b07', 'b08')")
    with opened(lg_store) as source:
        assert [r.id for r in source.search("late arrival").results] == ["lg:notes/late"]
        report = source.index.last_sync
        assert report.removed == 2 and report.rows_read == 1
        assert index_rows(source) == store_rows(source)


def test_a_refresh_matches_a_fresh_build(lg_store, tmp_path):
    """A deletion in the biggest namespace, an update, a new namespace and LangGraph's
    TTL sweeper deleting the expired items: the refreshed index holds what a build from
    scratch holds, and the sweep reads no expiry (the index's own digest explains it)."""
    with opened(lg_store) as source:
        source.search("coffee")
    with open_library(lg_store) as store:
        store.delete(("bulk",), "b11")
        store.put(("bulk",), "b12", {"text": "bulk item twelve, rewritten about tea"})
        store.put(("projects", "apollo"), "kickoff", {"text": "kickoff on Monday"})
        swept = store.sweep_ttl()  # the server's clock: both pinned TTL items have passed
    assert swept == 2
    with opened(lg_store) as source:
        source.search("tea")
        report = source.index.last_sync
        assert (report.rows_read, report.written, report.removed) == (2, 2, 3)
        assert report.expiries_read == 0
        refreshed = full_index(source)
    with opened(lg_store, cache_root=tmp_path / "fresh") as fresh:
        fresh.search("tea")
        assert fresh.index.last_sync.action == "built"
        assert refreshed == full_index(fresh)
    assert ("lg:projects.apollo/kickoff", "projects", "kickoff on Monday", None) in [
        row[:4] for row in refreshed
    ]


def full_index(source):
    """Every row of memtui's index, with its scope and key hash."""
    index = source.index.store()
    return sorted(
        tuple(r)
        for r in index.query(
            "SELECT r.source_id, r.tier, r.content, r.expires_at, r.scope_namespace, k.hash "
            "FROM records AS r LEFT JOIN key_hashes AS k ON k.record_id = r.id"
        )
    )


ODD_VALUES = [
    (("shapes",), "flat", {"text": "plain words", "n": 3, "ok": True, "none": None}, None),
    (
        ("shapes",),
        "nested",
        {"text": "outer", "inner": {"deep": "inner words", "k": [1, "two"]}},
        None,
    ),
    (("shapes",), "list", {"items": ["alpha", {"beta": "gamma"}]}, None),
    (("shapes",), "secret", {"note": "kept", "api_key": "sk-hidden", "sessionId": "x1"}, None),
    (("shapes",), "empty", {}, None),
    (("shapes", "ünï"), "cödé/é", {"text": "non-ASCII namespace and key"}, None),
]


def test_a_build_joins_the_content_as_text_fields_does(pg_url):
    """The content a build joins in the database (flat objects) or decodes here (the
    rest) is the content a fresh read of the store gives; no secret-named field's text."""
    from .support import write_store

    write_store(pg_url, ODD_VALUES)
    with opened(pg_url) as source:
        assert index_rows(source) == store_rows(source)
        held = " ".join(row[1] for row in index_rows(source))
        assert "sk-hidden" not in held and "x1" not in held and "kept" in held
        assert "lg:shapes.%C3%BCn%C3%AF/c%C3%B6d%C3%A9%2F%C3%A9" in {
            r[0] for r in index_rows(source)
        }


def test_an_index_without_key_hashes_is_built_again(lg_url, tmp_path):
    """An index file an older memtui wrote (no ``key_hashes``) is rebuilt, not refreshed."""
    import contextlib
    import sqlite3

    with opened(lg_url, cache_root=tmp_path) as source:
        source.search("trip")
        path = source.index.path
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("DELETE FROM meta WHERE key = 'key_hashes'")
        conn.execute("DROP TABLE key_hashes")
    with opened(lg_url, cache_root=tmp_path) as source:
        source.search("trip")
        assert source.index.last_sync.action == "built"
        assert source.index.store().query("SELECT count(*) FROM key_hashes")[0][0] == len(ITEMS)


def test_key_hashes_that_no_longer_agree_build_the_index_again(lg_store, tmp_path):
    """When most of the index's rows are in buckets that differ (its key hashes are not the
    server's any more: a restore on another machine), the refresh gives way to a build."""
    import contextlib
    import sqlite3

    with opened(lg_store, cache_root=tmp_path) as source:
        source.search("trip")
        path = source.index.path
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE key_hashes SET hash = 0")  # every row in bucket 0
    sql(lg_store, "DELETE FROM store WHERE prefix = 'bulk' AND key = 'b05'")
    with opened(lg_store, cache_root=tmp_path) as source:
        source.search("trip")
        assert source.index.last_sync.action == "built"
        assert index_rows(source) == store_rows(source)
        assert bucket_mismatches(source) == 0


def bucket_mismatches(source):
    """Fine buckets whose counts differ between the store and memtui's index."""
    index = source.index.store()
    return int((fine_counts(source.feed.buckets.hashes()) != index.bucket_counts()).sum())


def counted_as_held(source):
    """Whether what the index keeps as it is written (the rows per fine bucket, the count
    and sums of its expiries) is a recount of what it holds."""
    index = source.index.store()
    held = [h for (h,) in index.query("SELECT hash FROM key_hashes")]
    count, seconds, micros = index.query(
        "SELECT count(*), sum(CAST(strftime('%s', substr(expires_at, 1, 19)) AS INTEGER)), "
        "sum(CAST(substr(expires_at, 21, 6) AS INTEGER)) FROM records "
        "WHERE expires_at IS NOT NULL"
    )[0]
    assert count > 0  # the fixture has expiries: the sums are exercised
    return (
        bool((index.bucket_counts() == fine_counts(held)).all())
        and len(held) == len(index.query("SELECT id FROM records"))
        and index.expiry_digest() == [count, str(seconds * 1_000_000 + micros)]
    )


def test_the_counts_per_bucket_follow_every_write_of_the_index(lg_store):
    """The counts a refresh compares are kept as the index is written (a build, a refresh's
    puts, updates and deletes, memtui's own forget), never recounted: each step leaves them
    equal to a recount, and equal to the store's."""
    with opened(lg_store, allow_writes=True, operator="tester") as source:
        source.search("trip")
        assert counted_as_held(source) and bucket_mismatches(source) == 0
    with open_library(lg_store) as store:
        store.put(("memories", "user-3"), "n1", {"text": "new and counted"}, ttl=60)
        store.put(("memories", "user-1"), "trip", {"text": "Paris trip moved to July"})
        store.delete(("bulk",), "b02")
        store.get(("sessions", "s-1"), "short", refresh_ttl=True)
    with opened(lg_store, allow_writes=True, operator="tester") as source:
        source.search("counted")
        assert source.index.last_sync.action == "refreshed"
        assert counted_as_held(source) and bucket_mismatches(source) == 0
        assert source.forget("lg:memories.user-3/n1", reason="test").verified
        assert counted_as_held(source) and bucket_mismatches(source) == 0
        assert "lg:memories.user-3/n1" not in {row[0] for row in index_rows(source)}


def test_a_build_holds_what_the_rows_read_one_by_one_give(pg_url):
    """A build (the rows as the index writes them, read in one pass) holds what the store's
    rows read one at a time by key give, each through ``row_values`` as any source's row:
    content, tier, type, hidden flag, expiry, namespace and key hash, at ids 1, 2... in
    source-id order; every row's words are found by the full-text index."""
    from memtui.core.index import FTS_TABLE
    from memtui.sources.base import encode_id

    from .support import ITEMS, write_store

    write_store(pg_url, [*ITEMS, *ODD_VALUES])
    keys = sql(pg_url, "SELECT prefix, key FROM store")
    with opened(pg_url) as source:
        index = source.index.store()
        assert source.index.last_sync.action == "built"
        built = [
            tuple(row)
            for row in index.query(
                "SELECT r.id, r.source_id, r.content, r.tier, r.record_type, r.refuted, "
                "r.expires_at, r.scope_namespace, k.hash FROM records AS r "
                "JOIN key_hashes AS k ON k.record_id = r.id ORDER BY r.id"
            )
        ]
        ids = sorted(encode_id("lg", prefix, key) for prefix, key in keys)
        one_by_one = [source.feed.rows_by_id([i]) for i in ids]
        assert all(len(rows) == 1 for rows in one_by_one)
        expected = [
            (n, *index.row_values(row), row.key_hash)
            for n, (row,) in enumerate(one_by_one, start=1)
        ]
        assert built == expected
        # the row-by-row build's read (``CacheRow``s, as other index kinds load) gives the same
        streamed = [(*index.row_values(r), r.key_hash) for r in source.feed.changed_rows(None)]
        assert sorted(streamed) == [row[1:] for row in built]
        assert any(row[6] is not None for row in built)  # the TTL items' expiries
        for cache_id, source_id, content, *_ in built:
            words = [w for w in content.split() if w.isalpha()][:1]
            if words:
                found = index.query(
                    f"SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH ?",
                    ('"' + words[0] + '"',),
                )
                assert cache_id in {r[0] for r in found}, source_id


def test_a_build_leaves_a_wal_file_in_place_and_a_failed_one_nothing(lg_url, tmp_path):
    """The build is written without a journal beside its final name: once in place the
    file is in WAL mode; a build that fails half way leaves no file behind."""
    import contextlib
    import sqlite3

    with opened(lg_url, cache_root=tmp_path / "ok") as source:
        source.search("trip")
        path = source.index.path
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    with opened(lg_url, cache_root=tmp_path / "failed") as source:
        written = []

        def fail(values, progress=None):
            written.append(len(values))
            raise RuntimeError("the build stops half way")

        original = source.index._open

        def opening(path, *, create=False):
            index = original(path, create=create)
            if create:
                index.load_values = fail
            return index

        source.index._open = opening
        with pytest.raises(RuntimeError, match="half way"):
            source.search("trip")
        assert written == [len(ITEMS)]
        name = source.index.path.name
        assert [p.name for p in source.index.root.iterdir() if p.name.startswith(name)] == []
