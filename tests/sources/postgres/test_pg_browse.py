"""Browsing a LangGraph ``PostgresStore`` in the database: facets, keyset pages, get,
filters and TTL, against LangGraph's own view of the same store."""

from __future__ import annotations

import json
from datetime import timedelta

import psycopg
import pytest
from conftest import NOW, fixed_clock

from memtui.sources import SourceError, open_source

from .support import EXPIRES, ITEMS, LG_NOW, open_library, sql


def opened(url, **kwargs):
    return open_source(url, clock=fixed_clock, **kwargs)


def library_items(url):
    """Every item as LangGraph's own ``PostgresStore`` returns it (expired ones too)."""
    with open_library(url) as store:
        return {
            (tuple(item.namespace), item.key): item
            for item in store.search((), limit=1000, refresh_ttl=False)
        }


def test_facets_count_what_langgraph_holds(lg_url):
    items = library_items(lg_url)
    with opened(lg_url) as source:
        assert source.kind == "langgraph-postgres"
        facets = {f.tier: f for f in source.facets(include_hidden=True)}
        tiers: dict[str, int] = {}
        spaces: dict[str, int] = {}
        for namespace, _key in items:
            tiers[namespace[0]] = tiers.get(namespace[0], 0) + 1
            for depth in range(2, len(namespace) + 1):
                name = ".".join(namespace[:depth])
                spaces[name] = spaces.get(name, 0) + 1
        assert {t: f.count for t, f in facets.items()} == tiers
        found = {k: v for f in facets.values() for k, v in f.scopes.get("namespace", {}).items()}
        assert found == spaces
        assert source.tier_counts(include_hidden=True) == tiers
        live = source.tier_counts()
        assert live["sessions"] == tiers["sessions"] - 1  # the expired one


def test_every_record_is_langgraphs_item(lg_url):
    items = library_items(lg_url)
    with opened(lg_url) as source:
        records = list(source.iter_records(include_hidden=True, page_size=7))
        assert len(records) == len(items) == len(ITEMS)
        for record in records:
            namespace, key = tuple(record.metadata["namespace"]), record.metadata["key"]
            item = items[(namespace, key)]
            assert record.metadata["value"] == item.value
            assert record.created_at == item.created_at.isoformat()
            assert source.get(record.id) == record
        groceries = source.get("lg:notes/groceries")
        assert groceries.content == "milk, eggs and coffee"  # the api_key field is left out
        assert "sk-zz-secret" not in groceries.content


def test_keyset_pages_have_no_duplicates_and_no_gaps(lg_url):
    expected = [
        f"{p}/{k}" for p, k in sql(lg_url, "SELECT prefix, key FROM store ORDER BY prefix, key")
    ]
    with opened(lg_url) as source:
        seen = []
        cursor = None
        while True:
            page = source.page(after=cursor, limit=4, include_hidden=True)
            seen.extend(page.records)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert [f"{'.'.join(r.metadata['namespace'])}/{r.metadata['key']}" for r in seen] == (
            expected
        )
        assert len({r.id for r in seen}) == len(seen) == len(ITEMS)
        with pytest.raises(SourceError, match="not a LangGraph PostgresStore record id"):
            source.page(after="pref:3")


@pytest.mark.parametrize(
    ("filters", "keys"),
    [
        ({"namespace": "memories.user-2"}, {"memories.user-2/trip", "memories.user-2.sub/deep"}),
        ({"namespace": "memories.user_2"}, {"memories.user_2/note"}),  # _ is no wildcard
        ({"tier": "odd%ns"}, {"odd%ns/pct"}),  # nor is %
        ({"namespace": "memories.user-1.work"}, {"memories.user-1.work/stack"}),
        ({"tier": "sessions"}, {"sessions.s-1/long"}),  # the expired one is hidden
        ({"tier": "sessions", "record_type": "item"}, {"sessions.s-1/long"}),
        ({"record_type": "vector"}, set()),
    ],
)
def test_filters_run_in_sql_with_like_escaped(lg_url, filters, keys):
    with opened(lg_url) as source:
        found = {
            f"{'.'.join(r.metadata['namespace'])}/{r.metadata['key']}"
            for r in source.iter_records(filters)
        }
        assert found == keys
        facets = source.facets(filters)
        assert sum(f.count for f in facets) == len(keys)


def test_ttl_follows_langgraphs_read_rule(lg_url):
    with opened(lg_url) as source:
        short = source.get("lg:sessions.s-1/short")
        long = source.get("lg:sessions.s-1/long")
        assert short.state == "expired" and long.state == "live"
        assert short.expires_at == EXPIRES["short"].isoformat()
        live = {r.id for r in source.iter_records()}
        every = {r.id for r in source.iter_records(include_hidden=True)}
        assert every - live == {short.id}
        assert short.metadata["ttl_minutes"] == 60
    # at the instant it expires it is no longer live (expires_at > now, strict)
    with open_source(lg_url, now=EXPIRES["long"].isoformat()) as later:
        assert later.get("lg:sessions.s-1/long").state == "expired"
    with open_source(lg_url, now=(EXPIRES["long"] - timedelta(microseconds=1)).isoformat()) as s:
        assert s.get("lg:sessions.s-1/long").state == "live"
    with open_source(lg_url, now=LG_NOW) as source:
        assert source.now() == NOW


def explain(url: str, statement: str, params) -> str:
    """The plan of ``statement`` with sequential scans priced out: the store is small, so
    the planner would rightly scan it; at scale it takes the index this shows it can use."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")
        plan = conn.execute(f"EXPLAIN (FORMAT JSON) {statement}", params).fetchone()[0]
    return json.dumps(plan)


def test_a_page_and_a_get_use_the_stores_indexes(lg_url):
    with opened(lg_url) as source:
        statement, params = source.page_sql(
            None, after="lg:memories.user-1/trip", limit=200, include_hidden=False
        )
        assert '"Index Name": "store_pkey"' in explain(lg_url, statement, params)
        statement, params = source.page_sql(
            {"namespace": "memories.user-1"}, after=None, limit=200, include_hidden=False
        )
        plan = explain(lg_url, statement, params)
        assert '"Index Name": "store_pkey"' in plan or '"store_prefix_idx"' in plan
        get = f"{source.select()} WHERE s.prefix = %s AND s.key = %s"
        assert '"Index Name": "store_pkey"' in explain(lg_url, get, ["notes", "groceries"])
        first = explain(lg_url, *source.page_sql(None, after=None, limit=5, include_hidden=True))
        assert '"Index Name": "store_pkey"' in first
        assert '"Node Type": "Sort"' not in first  # the key order is the index's order
