"""Forget with proof in a LangGraph ``PostgresStore``: one transaction deleting the items
and their vectors, audited (intent before outcome, no password), vacuumed, the text
looked for in every text and jsonb column and in the tables' files, and LangGraph's
own store still working after it; the CLI's ``forget`` and ``forget-scope`` end to end."""

from __future__ import annotations

import itertools
import json
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import NOW, one_error_line

from memtui.cli import main
from memtui.sources import SourceError, open_source
from memtui.sources.base import encode_id

from .conftest import PASSWORD, PASSWORD_USER, admin, database_url, new_database
from .support import embed, open_library, sql

COPIES = itertools.count(1)
SECRET = "Window seat 14A on the Lisbon night train"
FIRST = "works on the ledger service in Rust"
ITEMS: list[tuple[tuple[str, ...], str, dict[str, Any]]] = [
    (("users", "u1", "work"), "stack", {"text": FIRST}),
    (("users", "u1", "work", "deep"), "desk", {"text": "standing desk by the east window"}),
    (("users", "u10"), "trip", {"text": "the u10 sibling keeps its Oslo ferry"}),
    (("users", "u2"), "pet", {"text": "a grey cat called Pixel", "api_key": "sk-zz-0000"}),
    (("users", "u1"), "trip", {"text": SECRET}),
]
"""Put in this order: SECRET is the newest tuple of the heap page (nearest its free
space, where pruning leaves a deleted tuple's bytes), FIRST the oldest (at the page's
end, where pruning moves the live tuples over it)."""


@pytest.fixture(scope="module")
def store_template(pg_server: Any) -> Iterator[str]:
    """A database holding the store, written once by the real library (HNSW index,
    vectors of ``text``): each test copies it (``CREATE DATABASE ... TEMPLATE``, a file
    copy, so every copy has the same pages)."""
    with new_database(pg_server) as url:
        with open_library(url) as store:
            store.setup()
            for namespace, key, value in ITEMS:
                store.put(namespace, key, value)
        yield url.split("?")[0].rsplit("/", 1)[1]


@pytest.fixture
def store_url(pg_server: Any, store_template: str) -> Iterator[str]:
    """This test's copy of the store, named with a password (the role must give it:
    scram-sha-256)."""
    name = f"{store_template}_{next(COPIES)}"
    admin(pg_server, f'CREATE DATABASE "{name}" TEMPLATE "{store_template}"')
    try:
        yield database_url(pg_server, name, f"{PASSWORD_USER}:{PASSWORD}")
    finally:
        admin(pg_server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def lg_id(prefix: str, key: str) -> str:
    return encode_id("lg", prefix, key)


def opened(url: str, **options: Any) -> Any:
    return open_source(url, allow_writes=True, now=NOW, operator="tester", **options)


def keys(url: str) -> set[tuple[str, str]]:
    return {(p, k) for p, k in sql(url, "SELECT prefix, key FROM store")}


def vector_keys(url: str) -> set[tuple[str, str]]:
    return {(p, k) for p, k in sql(url, "SELECT prefix, key FROM store_vectors")}


def table_bytes(source: Any, probe: bytes) -> int:
    """Occurrences of ``probe`` in the files of the store's tables (after a checkpoint)."""
    erasure = source.erasure()
    root, why = erasure.data_directory()
    assert root is not None, why
    source.pg.query("CHECKPOINT")
    return erasure.scan_files(root, erasure.store_tables, [probe])[probe]


def vector_bytes(text: str) -> bytes:
    """The float4 bytes of ``text``'s embedding, as pgvector keeps them on disk."""
    values = embed([text])[0]
    return struct.pack(f"={len(values)}f", *values)


def test_forget_one_item_deletes_it_and_its_vectors_and_proves_it(store_url):
    with opened(store_url) as source:
        assert table_bytes(source, SECRET.encode()) == 1
        assert table_bytes(source, vector_bytes(SECRET)) == 2  # the heap and the HNSW index
        outcome = source.forget(lg_id("users.u1", "trip"), reason="asked")
        assert outcome.verified, outcome.checks
        assert {"row_gone", "vectors_gone", "text_gone", "bytes_gone"} <= set(outcome.checks)
        assert outcome.checks["statistics_gone"]
        assert outcome.remark is None  # no rewrite: the blocks were overwritten in place
        steps = source.audit_events(limit=1)[0]["details"]["purge"]
        assert "overwrote the freed space of 1 block(s) of store (" in " ".join(steps)
        assert not any("FULL" in step for step in steps)
        assert table_bytes(source, SECRET.encode()) == 0
        assert table_bytes(source, vector_bytes(SECRET)) == 0
        assert source.get(lg_id("users.u1", "trip")) is None
    assert ("users.u1", "trip") not in keys(store_url) | vector_keys(store_url)
    assert len(keys(store_url)) == len(ITEMS) - 1
    assert keys(store_url) == vector_keys(store_url)  # no orphan, none missing


def test_where_plain_vacuum_wipes_the_bytes_the_tables_are_not_rewritten(store_url):
    with opened(store_url) as source:
        outcome = source.forget(lg_id("users.u1.work", "stack"), reason="asked")
        assert outcome.verified, outcome.checks
        assert outcome.checks["bytes_gone"] and outcome.remark is None
        assert table_bytes(source, FIRST.encode()) == 0
        assert table_bytes(source, vector_bytes(FIRST)) == 0
        events = source.audit_events(limit=1)
    assert not any("FULL" in step for step in events[0]["details"]["purge"])


def test_a_vector_a_live_item_shares_is_allowed_for_and_no_table_is_rewritten(store_url):
    """An item stored twice has one embedding twice: the forgotten vector's bytes in its
    block are then also the live row's, counted as the text check counts live copies
    (they were taken for leftovers: the table rewritten, and still not verified)."""
    sql(
        store_url,
        "UPDATE store_vectors SET embedding = (SELECT embedding FROM store_vectors WHERE "
        "prefix = 'users.u1' AND key = 'trip') WHERE prefix = 'users.u2' AND key = 'pet'",
    )
    with opened(store_url) as source:
        outcome = source.forget(lg_id("users.u1", "trip"), reason="asked")
        assert outcome.verified, outcome.checks
        assert outcome.remark is None
        steps = source.audit_events(limit=1)[0]["details"]["purge"]
        assert not any("FULL" in step for step in steps)
        assert table_bytes(source, SECRET.encode()) == 0
        assert table_bytes(source, vector_bytes(SECRET)) == 2  # the live row and its element


def test_plain_vacuum_leaves_the_bytes_in_the_heap_page(store_url):
    """The measurement behind the rewrite: DELETE + plain VACUUM keeps the newest tuple's
    bytes in the page's free space; VACUUM FULL takes them."""
    sql(store_url, "DELETE FROM store_vectors WHERE key = 'trip' AND prefix = 'users.u1'")
    sql(store_url, "DELETE FROM store WHERE key = 'trip' AND prefix = 'users.u1'")
    with opened(store_url) as source:
        erasure = source.erasure()
        erasure.vacuum(["store", "store_vectors"], full=False)
        assert table_bytes(source, SECRET.encode()) == 1
        erasure.vacuum(["store", "store_vectors"], full=True)
        assert table_bytes(source, SECRET.encode()) == 0


def test_forget_scope_takes_nested_namespaces_and_never_a_sibling_prefix(store_url):
    """With the vectors' foreign key dropped (no ON DELETE CASCADE to lean on), the
    vectors go all the same: the forget deletes them itself."""
    (constraint,) = sql(
        store_url,
        "SELECT conname FROM pg_constraint WHERE conrelid = 'store_vectors'::regclass "
        "AND contype = 'f'",
    )[0]
    sql(store_url, f'ALTER TABLE store_vectors DROP CONSTRAINT "{constraint}"')
    with opened(store_url) as source:
        radius = source.blast_radius(scope=("namespace", "users.u1"))
        assert radius == {"users": {"item": 3}}
        outcome = source.forget_scope(scope=("namespace", "users.u1"), reason="erasure request")
        assert outcome.verified, outcome.checks
        assert outcome.forgotten == 3
    left = keys(store_url)
    assert left == {("users.u10", "trip"), ("users.u2", "pet")}
    assert vector_keys(store_url) == left
    assert sql(store_url, "SELECT value->>'text' FROM store WHERE prefix = 'users.u10'") == [
        ("the u10 sibling keeps its Oslo ferry",)
    ]


def test_without_allow_writes_the_refusal_is_one_line_and_nothing_changes(store_url):
    with open_source(store_url, now=NOW) as source:
        for attempt in (
            lambda: source.forget(lg_id("users.u1", "trip"), reason="r"),
            lambda: source.forget_scope(scope=("namespace", "users"), reason="r"),
        ):
            with pytest.raises(SourceError) as raised:
                attempt()
            message = str(raised.value)
            assert "\n" not in message and "--allow-writes" in message
            assert PASSWORD not in message
    assert len(keys(store_url)) == len(ITEMS)


def test_the_audit_has_intent_before_outcome_and_no_password(store_url, tmp_path):
    with opened(store_url) as source:
        outcome = source.forget(lg_id("users.u1", "trip"), reason="asked")
        audit_path = Path(source.audit_path)
        events = source.audit_events(limit=10)
    data_home = Path(os.environ["XDG_DATA_HOME"])
    assert audit_path.is_relative_to(data_home / "memtui" / "audit")
    assert outcome.intent_event_id is not None
    assert outcome.intent_event_id < outcome.event_id
    by_id = {e["id"]: e for e in events}
    intent, final = by_id[outcome.intent_event_id], by_id[outcome.event_id]
    assert intent["action"] == "forget-intent" and final["action"] == "forget"
    assert final["details"]["intent_event"] == intent["id"]
    assert final["details"]["erasure"]["bytes_gone"] is True
    assert any("overwrote the freed space" in step for step in final["details"]["purge"])
    stored = b"".join(p.read_bytes() for p in audit_path.parent.iterdir())
    assert PASSWORD.encode() not in stored
    assert SECRET.encode() not in stored  # the audit never holds a forgotten value
    assert PASSWORD not in json.dumps(events, default=str)


def test_a_failure_mid_forget_rolls_everything_back(store_url):
    """A trigger fails the delete of one item of the scope: the transaction had already
    deleted vectors and other items, and none of it stays."""
    sql(
        store_url,
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN IF OLD.key = 'desk' THEN RAISE EXCEPTION 'kept by policy'; END IF; "
        "RETURN OLD; END $$",
    )
    sql(
        store_url,
        "CREATE TRIGGER keep BEFORE DELETE ON store FOR EACH ROW EXECUTE FUNCTION refuse()",
    )
    with opened(store_url) as source:
        with pytest.raises(SourceError, match="rolled back and nothing was changed") as raised:
            source.forget_scope(scope=("namespace", "users.u1"), reason="r")
        assert "\n" not in str(raised.value)
        actions = [e["action"] for e in source.audit_events(limit=5)]
    assert actions[:2] == ["forget-failed", "forget-intent"]
    assert len(keys(store_url)) == len(ITEMS)
    assert vector_keys(store_url) == keys(store_url)


def test_the_keyword_index_purges_its_copy(store_url):
    with opened(store_url) as source:
        assert [r.id for r in source.search("Lisbon night train").results][:1] == [
            lg_id("users.u1", "trip")
        ]
        source.forget(lg_id("users.u1", "trip"), reason="r")
        assert source.search("Lisbon night train").results == []
        index_file = Path(source.index.path)
    assert SECRET.encode() not in index_file.read_bytes()


def test_langgraph_still_opens_reads_searches_and_writes_after(store_url):
    with opened(store_url) as source:
        source.forget_scope(scope=("namespace", "users.u1"), reason="r")
    with open_library(store_url) as store:
        store.setup()
        assert store.get(("users", "u1"), "trip") is None
        assert store.get(("users", "u10"), "trip").value["text"].startswith("the u10")
        found = store.search(("users",), query="grey cat", limit=5)
        assert {item.key for item in found} == {"trip", "pet"}
        store.put(("users", "u1"), "trip", {"text": "a new trip after the forget"})
        assert store.search(("users", "u1"), query="new trip")[0].key == "trip"
    assert keys(store_url) == vector_keys(store_url)
    assert sql(store_url, "SELECT count(*) FROM store_vectors WHERE embedding IS NULL") == [(0,)]


def test_the_dialog_and_info_name_what_erasure_cannot_reach(store_url):
    with opened(store_url) as source:
        rule = source.forget_preview(lg_id("users.u1", "trip"))["rule"]
        scope_rule = source.forget_scope_rule("namespace")
        notes = " ".join(source.summary().notes)
    for text in (rule, scope_rule, notes):
        assert "WAL segments" in text and "replicas" in text and "pg_dump" in text
    assert "Not reached, not verified" in rule
    assert "the tables' files are checked" in notes


def test_a_user_who_cannot_read_the_data_directory_is_told_the_bytes_were_not_checked(
    store_url,
):
    """A role that owns the store but may not see the server's settings (as on a managed
    server): the blocks are vacuumed and overwritten, not read, and the forget is not
    called verified (no rewrite behind the user's back)."""
    name = f"owner_{os.getpid()}"
    sql(store_url, f"CREATE ROLE {name} LOGIN")
    for table in ("store", "store_vectors", "store_migrations", "vector_migrations"):
        sql(store_url, f"ALTER TABLE {table} OWNER TO {name}")
    url = store_url.replace(f"{PASSWORD_USER}:{PASSWORD}@", f"{name}@")
    try:
        with opened(url) as source:
            outcome = source.forget(lg_id("users.u1", "trip"), reason="r")
            notes = " ".join(source.summary().notes)
    finally:
        sql(store_url, f"REASSIGN OWNED BY {name} TO postgres")
        sql(store_url, f"DROP OWNED BY {name}")
        sql(store_url, f"DROP ROLE {name}")
    assert not outcome.verified and outcome.checks["bytes_checked"] is False
    assert "bytes_gone" not in outcome.checks and "vacuum_full" not in outcome.checks
    assert outcome.checks["text_gone"] and outcome.checks["row_gone"]
    assert "overwritten once, the bytes not checked" in (outcome.remark or "")
    assert "their files cannot be read" in notes


FORGET = ["--reason", "asked by the user", "--allow-writes", "--yes"]


def test_forget_and_forget_scope_through_the_cli(runner, store_url):
    refused = runner.invoke(main, ["forget", store_url, lg_id("users.u1", "trip"), "--reason", "r"])
    assert refused.exit_code != 0
    assert "--allow-writes" in one_error_line(refused)
    result = runner.invoke(main, ["forget", store_url, lg_id("users.u1", "trip"), *FORGET])
    assert result.exit_code == 0, result.output
    assert "erasure verified" in result.output
    assert "VACUUM FULL" not in result.output
    assert ("users.u1", "trip") not in keys(store_url)
    result = runner.invoke(
        main, ["forget-scope", store_url, "--scope", "namespace=users.u1", *FORGET]
    )
    assert result.exit_code == 0, result.output
    assert "2 records" in result.output and "erasure verified" in result.output
    assert keys(store_url) == {("users.u10", "trip"), ("users.u2", "pet")} == vector_keys(store_url)
    info = runner.invoke(main, ["info", store_url])
    assert info.exit_code == 0, info.output
    assert "WAL segments" in info.output and "pg_dump" in info.output
    audit = runner.invoke(main, ["audit", store_url])
    assert audit.exit_code == 0, audit.output
    for output in (refused.output, result.output, info.output, audit.output):
        assert PASSWORD not in output


def test_forget_asks_first_and_a_no_changes_nothing(runner, store_url):
    result = runner.invoke(
        main,
        ["forget", store_url, lg_id("users.u1", "trip"), "--reason", "r", "--allow-writes"],
        input="n\n",
    )
    assert result.exit_code != 0
    assert "WAL segments" in result.output  # the question names what it cannot reach
    assert ("users.u1", "trip") in keys(store_url)


def test_a_copy_of_the_text_in_another_item_is_named_and_not_verified(store_url, runner):
    """The SQL scan over the store's text and jsonb columns finds a copy the forget did
    not take (another item quoting it): the forget says so and exits 3. The planner's
    statistics showed the text, so the purge analyzed again: they still show the copy."""
    sql(
        store_url,
        "UPDATE store SET value = jsonb_set(value, '{quote}', to_jsonb(%s::text)) "
        "WHERE prefix = 'users.u2'",
        [f"she said: {SECRET}!"],
    )
    sql(store_url, "ANALYZE store")
    result = runner.invoke(main, ["forget", store_url, lg_id("users.u1", "trip"), *FORGET])
    assert result.exit_code == 3, result.output
    assert "erasure NOT verified (statistics_gone, text_gone)" in result.output
    assert "the forgotten text is still in 1 place(s) of the store's tables" in result.output
    assert SECRET not in result.output
    with opened(store_url) as source:
        event = source.audit_events(limit=1)[0]
    assert event["details"]["erasure"]["text_gone"] is False
    assert event["details"]["erasure"]["bytes_gone"] is True  # the live copy accounts for it
    assert any(step.startswith("ANALYZE store") for step in event["details"]["purge"])
    assert event["details"]["text_elsewhere"] == 1


def test_the_dialog_warns_what_the_vacuum_will_read_when_it_is_large(store_url, monkeypatch):
    """The vacuum reads the tables' indexes whole and cleans what others deleted: the
    rule says so past a size or a number of such rows, with the figures, and not below."""
    from memtui.sources.postgres import source as pg_source

    record = lg_id("users.u1", "trip")
    with opened(store_url) as source:
        assert "The vacuum reads" not in source.forget_preview(record)["rule"]
        monkeypatch.setattr(pg_source, "VACUUM_WARN_BYTES", 1)
        rule = source.forget_preview(record)["rule"]
        assert "The vacuum reads the tables' indexes whole (" in rule
        assert "rows deleted by others" not in rule  # none waits
        assert rule.index("The vacuum reads") < rule.index("Not reached, not verified")
    with psycopg_connect(store_url) as conn:
        conn.execute("DELETE FROM store_vectors WHERE prefix = 'users.u2'")
        conn.execute("DELETE FROM store WHERE prefix = 'users.u2'")
        conn.execute("SELECT pg_stat_force_next_flush()")
    monkeypatch.setattr(pg_source, "VACUUM_WARN_BYTES", 2**62)
    monkeypatch.setattr(pg_source, "VACUUM_WARN_DEAD", 2)
    with opened(store_url) as source:
        rule = source.forget_preview(record)["rule"]
        assert "rows deleted by others since the last vacuum are cleaned with it" in rule


def psycopg_connect(url: str) -> Any:
    import psycopg

    return psycopg.connect(url, autocommit=True)
