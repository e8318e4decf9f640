"""The erasure gap of a Postgres store: what LangGraph's own deletes leave in the tables'
pages (dead row versions, then bytes in the pages' free space after VACUUM), counted by
``info`` and cleared with proof by ``forget-gaps``; the page arithmetic on made-up pages."""

from __future__ import annotations

import itertools
import json
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import NOW, one_error_line

from memtui.cli import main
from memtui.sources import open_source
from memtui.sources.postgres.gaps import PAGE, free_space_remnants

from .conftest import admin, database_url, new_database
from .support import open_library, sql

COPIES = itertools.count(1)
SECRET = "the vault code is 4417 behind the blue door"
ITEMS = [
    (("users", "u1"), f"n{n}", {"text": f"note {n} about the harbour office"}) for n in range(6)
] + [(("users", "u1"), "vault", {"text": SECRET})]


def page(lower: int, upper: int, hole: bytes = b"") -> bytes:
    """One heap page: a header with ``pd_lower``/``pd_upper``, ``hole`` at the start of its
    free space, and tuple bytes (0xAB) from ``upper`` to the end."""
    data = bytearray(PAGE)
    struct.pack_into("<HH", data, 12, lower, upper)
    data[lower : lower + len(hole)] = hole
    data[upper:] = b"\xab" * (PAGE - upper)
    return bytes(data)


def test_free_space_remnants_counts_non_zero_bytes_between_lower_and_upper_only():
    clean = page(40, 8000)
    dirty = page(40, 8000, b"old text")
    never_written = bytes(PAGE)
    nonsense = page(9000, 100, b"zz")  # a header that does not make sense is not read
    assert free_space_remnants(clean) == (1, 0, 0)
    assert free_space_remnants(dirty) == (1, 1, len(b"old text"))
    assert free_space_remnants(clean + dirty + never_written + nonsense + dirty) == (5, 2, 16)
    assert free_space_remnants(b"") == (0, 0, 0)


@pytest.fixture(scope="module")
def store_template(pg_server: Any) -> Iterator[str]:
    """A store written by LangGraph's own PostgresStore, copied by each test."""
    with new_database(pg_server) as url:
        with open_library(url) as store:
            store.setup()
            for namespace, key, value in ITEMS:
                store.put(namespace, key, value)
        yield url.split("?")[0].rsplit("/", 1)[1]


@pytest.fixture
def store_url(pg_server: Any, store_template: str) -> Iterator[str]:
    name = f"{store_template}_{next(COPIES)}"
    admin(pg_server, f'CREATE DATABASE "{name}" TEMPLATE "{store_template}"')
    url = database_url(pg_server, name)
    for table in ("store", "store_vectors"):
        sql(url, f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    try:
        yield url
    finally:
        admin(pg_server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def library_delete(url: str) -> None:
    """The agent forgets the vault code the way LangGraph does: its own delete (and the
    server checkpoints, as it does every few minutes: the summary reads the files as they
    are, without forcing one)."""
    with open_library(url) as store:
        store.delete(("users", "u1"), "vault")
    sql(url, "CHECKPOINT")


def secret_in_files(url: str) -> int:
    with open_source(url, now=NOW) as source:
        erasure = source.erasure()
        root, why = erasure.data_directory()
        assert root is not None, why
        sql(url, "CHECKPOINT")
        return erasure.scan_files(root, ["store"], [SECRET.encode()])[SECRET.encode()]


def info(runner: Any, url: str) -> dict[str, Any]:
    result = runner.invoke(main, ["info", url, "--json", "--now", NOW.isoformat()])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_a_fresh_store_has_no_gap(runner, store_url):
    counts = info(runner, store_url)["counts"]
    assert counts["dead_row_versions"] == 0
    assert counts["free_space_remnant_bytes"] == 0
    result = runner.invoke(
        main, ["forget-gaps", store_url, "--allow-writes", "--reason", "audit", "--yes"]
    )
    assert result.exit_code == 0, result.output
    assert result.output.startswith("no erasure gap: none")


def test_langgraph_delete_leaves_the_text_and_info_counts_it(runner, store_url):
    library_delete(store_url)
    assert secret_in_files(store_url) == 1  # a dead row version still holds it
    summary = info(runner, store_url)
    assert summary["counts"]["dead_row_versions"] >= 1
    assert any(n.startswith("erasure gap: ") and "forget-gaps" in n for n in summary["notes"])
    sql(store_url, "VACUUM store, store_vectors")  # what autovacuum would do
    sql(store_url, "CHECKPOINT")
    summary = info(runner, store_url)
    assert summary["counts"]["dead_row_versions"] == 0
    assert summary["counts"]["free_space_remnant_bytes"] > 0  # pruning did not zero them
    assert any("free space" in n for n in summary["notes"])


def test_forget_gaps_rewrites_the_tables_and_proves_the_gap_closed(runner, store_url):
    library_delete(store_url)
    sql(store_url, "VACUUM store, store_vectors")
    args = ["forget-gaps", store_url, "--allow-writes", "--reason", "clean up", "--yes"]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "rewrote store" in result.output and "erasure verified" in result.output
    assert secret_in_files(store_url) == 0
    counts = info(runner, store_url)["counts"]
    assert counts["dead_row_versions"] == 0 and counts["free_space_remnant_bytes"] == 0
    with open_source(store_url, now=NOW) as source:
        events = source.audit_events(limit=2)
    by_action = {e["action"]: e for e in events}
    assert set(by_action) == {"forget-intent", "forget"}
    intent, outcome = by_action["forget-intent"], by_action["forget"]
    assert intent["id"] < outcome["id"]
    assert outcome["details"]["operation"] == "forget-gaps"
    assert outcome["details"]["erasure"] == {
        "dead_rows_gone": True,
        "free_space_zero": True,
        "cache_gone": True,
    }
    assert intent["details"]["plan"]["remnant_bytes"] > 0
    assert SECRET not in json.dumps(events, default=str)
    with open_library(store_url) as store:  # LangGraph's store still works
        assert store.get(("users", "u1"), "vault") is None
        store.put(("users", "u1"), "new", {"text": "a note after the rewrite"})
        assert store.get(("users", "u1"), "new").value["text"] == "a note after the rewrite"
        assert store.search(("users", "u1"), query="harbour office", limit=3)


def test_forget_gaps_needs_allow_writes(runner, store_url):
    library_delete(store_url)
    result = runner.invoke(main, ["forget-gaps", store_url, "--reason", "x", "--yes"])
    assert result.exit_code != 0
    assert "--allow-writes" in one_error_line(result)
    assert secret_in_files(store_url) == 1
