"""LangGraph ``PostgresStore`` fixtures, written by the real library, times pinned.

LangGraph stamps ``created_at``/``updated_at`` with the server's clock; the fixture
then pins them (and the TTL items' ``expires_at``) around the suite's fixed ``NOW``,
so the tests' clock decides what is expired.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
from conftest import NOW

from memtui.core.embed import HashEmbedder

EMBEDDER = HashEmbedder(8)
LG_NOW = NOW.isoformat().replace("+00:00", "Z")


def embed(texts: list[str]) -> list[list[float]]:
    return [[float(v) for v in vector] for vector in EMBEDDER(list(texts))]


INDEX = {"dims": 8, "embed": embed, "fields": ["text"]}

ITEMS: list[tuple[tuple[str, ...], str, dict[str, Any], float | None]] = [
    (("memories", "user-1"), "trip", {"text": "Paris trip booked for June"}, None),
    (("memories", "user-1"), "pref-color", {"text": "prefers dark mode in every editor"}, None),
    (("memories", "user-1", "work"), "stack", {"text": "works on the billing service in Go"}, None),
    (("memories", "user-2"), "trip", {"text": "Rome trip with the family in May"}, None),
    (("memories", "user-2", "sub"), "deep", {"text": "a note nested under user-2"}, None),
    (("memories", "user_2"), "note", {"text": "the underscore namespace, not user-2"}, None),
    (("notes",), "groceries", {"text": "milk, eggs and coffee", "api_key": "sk-zz-secret"}, None),
    (("odd%ns",), "pct", {"text": "a namespace with a percent sign"}, None),
    (("sessions", "s-1"), "short", {"text": "scratch note about the trip, expired"}, 60),
    (("sessions", "s-1"), "long", {"text": "scratch note about the trip, still live"}, 60),
    *(
        (("bulk",), f"b{n:02d}", {"text": f"bulk item number {n} about coffee"}, None)
        for n in range(24)
    ),
]
EXPIRES = {"short": NOW - timedelta(hours=1), "long": NOW + timedelta(days=1)}
"""The pinned ``expires_at`` of the two TTL items (by key)."""


def open_library(url: str, *, index: bool = True) -> Any:
    """LangGraph's own ``PostgresStore`` on ``url`` (a context manager)."""
    from langgraph.store.postgres import PostgresStore

    return PostgresStore.from_conn_string(url, index=INDEX if index else None)  # type: ignore[arg-type]


def write_store(url: str, items: Any = None, *, index: bool = True) -> None:
    """``items`` (default ``ITEMS``) put by LangGraph's ``PostgresStore``, times pinned:
    item n created and updated at ``NOW - (count - n) hours``."""
    rows = list(ITEMS if items is None else items)
    with open_library(url, index=index) as store:
        store.setup()
        for namespace, key, value, ttl in rows:
            store.put(namespace, key, value, ttl=ttl)
    pin_times(url, rows)


def pin_times(url: str, rows: list[Any]) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for n, (namespace, key, _value, ttl) in enumerate(rows):
            moment = NOW - timedelta(hours=len(rows) - n)
            expires = EXPIRES.get(key) if ttl else None
            conn.execute(
                "UPDATE store SET created_at = %s, updated_at = %s, expires_at = %s "
                "WHERE prefix = %s AND key = %s",
                (moment, moment, expires, ".".join(namespace), key),
            )


def sql(url: str, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    """One statement on ``url`` by a connection of its own (as another client would)."""
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(statement, params)
        return list(cursor.fetchall()) if cursor.description else []


def vector_text_casts(source: Any, statement: tuple[str, list[Any]], column: str) -> list[str]:
    """The plan nodes of a lane's ``statement`` (its ``<query>`` bound to a vector) whose
    output turns ``column`` into text, top node first (``EXPLAIN VERBOSE``)."""
    sql_text, params = statement
    query = "[" + ",".join(["0.1"] * source.vectors.dims) + "]"
    bound = [query if p == "<query>" else p for p in params]
    plan = source.pg.query(f"EXPLAIN (VERBOSE, FORMAT JSON) {sql_text}", bound)[0][0]
    found: list[str] = []

    def walk(node: dict[str, Any], depth: int) -> None:
        if any(f"{column})::text" in str(item) for item in node.get("Output", [])):
            found.append(f"{depth}:{node['Node Type']}")
        for child in node.get("Plans", []):
            walk(child, depth + 1)

    walk(plan[0]["Plan"], 0)
    return found


def index_rows(source):
    """What memtui's index holds: source id, content, expiry."""
    index = source.index.store()
    return sorted(
        tuple(r) for r in index.query("SELECT source_id, content, expires_at FROM records")
    )


def store_rows(source):
    """What a fresh read of the store gives for the same columns."""
    return sorted(
        (r.id, r.content, source.cache_expiry(r)) for r in source.iter_records(include_hidden=True)
    )
