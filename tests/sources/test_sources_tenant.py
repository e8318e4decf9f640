"""Tenant evidence stores: tenants and revisions as scopes, logical-time expiry, scoped forget."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner
from fixtures.sources_support import CANARY, TENANT, copy_fixture, occurrences

from memtui.cli import main
from memtui.sources import SourceError, open_source
from memtui.sources.tenant import TenantEvidenceSource


@pytest.fixture
def evidence(tmp_path):
    return copy_fixture(TENANT, tmp_path / "store")


def test_kinds_are_tiers_tenants_and_revisions_scopes(evidence):
    with open_source(evidence) as source:
        assert isinstance(source, TenantEvidenceSource)
        assert source.table == "evidence" and source.id_column == "record_id"
        facets = {f.tier: f for f in source.facets()}
        assert list(facets) == ["working", "incident", "runbook"]
        assert facets["runbook"].scopes == {
            "tenant": {"acme": 1, "globex": 1},
            "revision": {"1": 1, "2": 1},
        }
        assert [r.id for r in source.page({"revision": "2"}).records] == [
            "ev:acme/r-2",
            "ev:globex/r-2",
        ]
        odd = source.get("ev:acme/r%2F4%20odd%3Aid")
        assert odd.metadata == {"record_id": "r/4 odd:id", "citation": "notes://shift-7"}
        assert source.notes(odd) == "cites notes://shift-7 · expiry 20"
        assert "no --now" in source.expiry_rule
        assert all(r.state == "live" for r in source.iter_records(include_hidden=True))


@pytest.mark.parametrize(("now", "state"), [(49, "live"), (50, "expired"), (51, "expired")])
def test_logical_expiry_is_strict(evidence, now, state):
    with open_source(evidence, now=now) as source:
        assert source.get("ev:acme/r-2").state == state  # expiry 50
        listed = {r.id for r in source.page().records}
        assert ("ev:acme/r-2" in listed) == (state == "live")
        response = source.search("payment queue")
        assert ({r.id for r in response.results} == {"ev:acme/r-2"}) == (state == "live")
        assert response.trace.excluded["expired"] == (0 if state == "live" else 1)
        assert response.trace.now == str(now)


def test_now_must_be_a_whole_number(evidence):
    with pytest.raises(SourceError, match="whole number"):
        open_source(evidence, now="2026-11-30T12:00:00Z")
    result = CliRunner().invoke(main, ["records", str(evidence), "--now", "soon"])
    assert result.exit_code == 1 and "whole number" in result.output


def test_forget_is_scoped_to_one_tenant(evidence):
    with open_source(evidence, now=10, allow_writes=True) as source:
        assert source.forget_preview("ev:globex/r-1")["rule"].endswith(
            "the same id in other tenants stays."
        )
        assert occurrences(evidence, CANARY)["word"] == 1
        outcome = source.forget("ev:globex/r-1", reason="tenant offboarded")
        assert outcome.verified and outcome.removed == ("ev:globex/r-1",)
        assert source.get("ev:globex/r-1") is None
        assert source.get("ev:acme/r-1").content == "queue depth alarm fires at 10k messages"
        event = source.audit_events()[0]
        assert event["details"]["tenant"] == "globex"
        assert source.search("disk").results[0].id == "ev:globex/r-2"
    assert occurrences(evidence, CANARY) == {"word": 0, "tail": 0}
    conn = sqlite3.connect(evidence)
    assert conn.execute("SELECT tenant FROM evidence WHERE record_id = 'r-1'").fetchall() == [
        ("acme",)
    ]
    conn.close()


def test_cli_lists_with_now_and_citations(evidence):
    runner = CliRunner()
    result = runner.invoke(
        main, ["records", str(evidence), "--now", "50", "--filter", "tenant=acme", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [r["id"] for r in data] == ["ev:acme/r-1", "ev:acme/r-3"]
    assert data[0]["metadata"]["citation"] == "runbook://queue/v1"
    assert data[0]["expires_at"] == 100 and data[0]["scope"] == {"tenant": "acme", "revision": 1}
    table = runner.invoke(
        main, ["records", str(evidence), "--now", "50", "--all"], env={"COLUMNS": "250"}
    )
    assert "cites pager://INC-42" in table.output and "expired" in table.output
    assert "live while expiry > now (strict); now = 50" in table.output


def test_another_table_name_and_key_are_recognized(tmp_path):
    path = tmp_path / "kb"
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE tenant_facts (tenant TEXT, fact_key TEXT, revision INTEGER, kind TEXT, "
        "body TEXT, source TEXT, expiry INTEGER, PRIMARY KEY (tenant, fact_key))"
    )
    conn.execute(
        "INSERT INTO tenant_facts VALUES ('t1', 'k1', 1, 'runbook', 'drain first', 'rb://1', 9)"
    )
    conn.commit()
    conn.close()
    with open_source(path, now=3) as source:
        assert source.table == "tenant_facts" and source.id_column == "fact_key"
        assert [r.id for r in source.iter_records()] == ["ev:t1/k1"]
        assert source.search("drain").results[0].id == "ev:t1/k1"


def test_the_clock_label_is_the_logical_now(evidence, tmp_path):
    """A header clock shows the store's own time: a tenant store's logical now, never
    the wall clock; stores on wall-clock time leave the label to the app (None)."""
    from fixtures.sources_support import LANGGRAPH

    with open_source(evidence, now=100) as source:
        assert source.clock_label() == "100 (logical time)"
    with open_source(evidence) as source:
        assert source.clock_label() == "none given (logical time; pass --now N)"
    with open_source(copy_fixture(LANGGRAPH, tmp_path / "lg"), now="2026-11-30T12:00:00Z") as lg:
        assert lg.clock_label() is None


def _cache_bytes(tmp_path) -> bytes:
    folder = tmp_path / "cache" / "memtui" / "sources"
    return b"".join(p.read_bytes() for p in sorted(folder.glob("tenant-evidence-*.db*")))


def test_search_and_explain_work_without_now(evidence, monkeypatch):
    """No --now: every record is live, and search (its cache's clock) still works."""
    monkeypatch.delenv("MEMTUI_NOW", raising=False)
    runner = CliRunner()
    result = runner.invoke(main, ["search", str(evidence), "queue"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "ev:acme/r-1" in result.output and "ev:acme/r-2" in result.output
    explained = runner.invoke(
        main, ["search", str(evidence), "queue", "--explain"], env={"COLUMNS": "200"}
    )
    assert explained.exit_code == 0, explained.output
    assert "ev:acme/r-2" in explained.output and "no --now N was given" in explained.output
    with open_source(evidence) as source:
        response = source.search("payment queue")
        assert [r.id for r in response.results] == ["ev:acme/r-2"]  # expiry 50: live
        assert response.trace.now == "none given"


@pytest.mark.parametrize("search_now", [[], ["--now", "10"]], ids=["no-now", "now"])
def test_forget_without_now_after_a_search_purges_the_cache(
    evidence, tmp_path, monkeypatch, search_now
):
    """A cache exists (built with or without a now): a forget without --now purges it."""
    monkeypatch.delenv("MEMTUI_NOW", raising=False)
    runner = CliRunner()
    built = runner.invoke(main, ["search", str(evidence), "disk", *search_now])
    assert built.exit_code == 0, built.output
    assert CANARY.encode() in _cache_bytes(tmp_path)  # the cache holds globex's r-1
    result = runner.invoke(
        main,
        [
            "forget",
            str(evidence),
            "ev:globex/r-1",
            "--reason",
            "tenant offboarded",
            "--allow-writes",
            "--yes",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    assert CANARY.encode() not in _cache_bytes(tmp_path)
    assert CANARY[3:].encode() not in _cache_bytes(tmp_path)
    assert occurrences(evidence, CANARY) == {"word": 0, "tail": 0}
    with open_source(evidence) as source:
        events = source.audit_events()
        assert [e["action"] for e in events] == ["forget", "forget-intent"]
        assert events[1]["status"] == "completed"
        assert events[0]["details"]["verified"] is True
        assert events[0]["details"]["erasure"]["cache_gone"] is True
        assert source.interrupted_forgets() == []
        assert [r.id for r in source.search("disk").results] == ["ev:globex/r-2"]


def _logical_store(path, rows):
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE evidence (tenant TEXT, record_id TEXT, revision INTEGER, kind TEXT, "
        "body TEXT, source TEXT, expiry INTEGER, PRIMARY KEY (tenant, record_id))"
    )
    conn.executemany("INSERT INTO evidence VALUES ('t', ?, 1, 'working', ?, 'rb://1', ?)", rows)
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize(
    ("now", "live"),
    [
        (1_699_999_999_999, {"a", "b", "c"}),
        (1_700_000_000_000, {"a", "b"}),  # expiry == now: expired (strict)
        (1_700_000_000_001, {"b"}),
        (1_700_000_000_002, set()),
    ],
)
def test_epoch_millisecond_logical_times_keep_the_strict_rule(tmp_path, now, live):
    """Logical time may be epoch milliseconds: values a unit apart stay apart in the cache."""
    path = _logical_store(
        tmp_path / "ms.sqlite",
        [
            ("a", "alpha queue note", 1_700_000_000_001),
            ("b", "beta queue note", 1_700_000_000_002),
            ("c", "gamma queue note", 1_700_000_000_000),
        ],
    )
    with open_source(path, now=now) as source:
        assert {r.metadata["record_id"] for r in source.page().records} == live
        response = source.search("queue note")
        assert {r.id.split("/")[-1] for r in response.results} == live
        assert response.trace.excluded["expired"] == 3 - len(live)


FAR = 9_000_000_000_000_000_000  # near SQLite's largest integer, past datetime's years


def test_far_logical_times_are_clamped_not_an_error(tmp_path):
    path = _logical_store(
        tmp_path / "far.sqlite",
        [("a", "alpha queue note", FAR), ("b", "beta queue note", -FAR)],
    )
    for now in (None, 0, FAR, -FAR):
        with open_source(path, now=now) as source:
            assert source.search("queue note").trace.matched == 2


def test_a_cache_built_with_the_older_time_mapping_is_rebuilt(evidence):
    """The fingerprint names the mapping: a cache from the seconds mapping is not reused."""
    from memtui.sources.foreign import ForeignSqliteSource

    with open_source(evidence, now=50) as source:
        source.search("queue")
        old = ForeignSqliteSource.fingerprint(source) + "|now"  # the earlier fingerprint
        source.index.current().set_meta({"source_fingerprint": old})
        assert source.index_status()["ready"] is False
        assert [r.id for r in source.search("queue").results] == ["ev:acme/r-1"]
        assert source.index_status()["ready"] is True


def _older_format_cache(source, content: str) -> None:
    """Put at the source's cache path the index an older memtui built there: a memtui
    database (the source's tier kept in ``engagement``) marked current for the store."""
    from pathlib import Path

    from memtui.core.store import MemoryStore

    path = source.index.path
    source.index.discard()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with MemoryStore(path) as old:
        old.ingest(
            [
                {
                    "tier": "knowledge",
                    "record_type": "incident",
                    "content": content,
                    "engagement": "incident",
                    "metadata": {"scope": {"tenant": "acme", "revision": "1"}},
                }
            ]
        )
        old.connection.executemany(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
            [("cache_format", "1"), ("source_fingerprint", source.fingerprint())],
        )
        old.connection.execute("CREATE TABLE source_ids (cache_id INTEGER, source_id TEXT)")
        old.connection.execute("INSERT INTO source_ids VALUES (1, 'ev:acme/r-1')")
        old.checkpoint()


def test_a_cache_file_of_the_older_format_is_rebuilt(evidence, tmp_path):
    """An index file an older memtui built, current for the store by its fingerprint,
    is not read: the next search builds the index again, in this memtui's format."""
    from memtui.sources.cache import CACHE_FORMAT

    with open_source(evidence, now=50) as source:
        built = source.search("queue")
        _older_format_cache(source, "queue copy kept by an older memtui")
        assert source.index.path.exists()
        assert source.index_status()["ready"] is False
        response = source.search("queue")
        assert [r.id for r in response.results] == ["ev:acme/r-1"]
        assert response.trace.matched == built.trace.matched
        assert source.index_status()["ready"] is True
        assert source.index.current().meta()["cache_format"] == CACHE_FORMAT
    assert b"kept by an older memtui" not in _cache_bytes(tmp_path)


def test_a_forget_removes_a_cache_file_of_the_older_format(evidence, tmp_path):
    """memtui cannot purge a copy from an index of another format: a forget removes the
    file (the next search builds it again) and says the cached copy is gone."""
    with open_source(evidence, now=10, allow_writes=True) as source:
        _older_format_cache(source, f"the older index still holds {CANARY}")
        outcome = source.forget("ev:globex/r-1", reason="tenant offboarded")
        assert outcome.verified and outcome.checks["cache_gone"] is True
        assert not source.index.path.exists()
        assert _cache_bytes(tmp_path) == b""
        assert source.search("disk").results[0].id == "ev:globex/r-2"


def test_the_index_has_its_own_schema_with_the_store_tiers_and_scope_keys(evidence):
    """memtui's index of a foreign store is no memtui database: the store's tiers and
    scope keys are columns of its own, and it has no table the search engine does not
    read but its ids (no audit log, no tactic columns)."""
    from memtui.core.index import SearchIndex
    from memtui.core.store import MemoryStore

    with open_source(evidence, now=50) as source:
        source.build_index()
        index = source.index.current()
        assert isinstance(index, SearchIndex) and not isinstance(index, MemoryStore)
        columns = [r[1] for r in index.query("PRAGMA table_info(records)")]
        assert columns == [
            "id",
            "source_id",
            "tier",
            "record_type",
            "content",
            "refuted",
            "created_at",
            "expires_at",
            "scope_revision",
            "scope_tenant",
        ]
        tables = {r[0] for r in index.query("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"records", "vectors", "meta", "records_fts"} <= tables
        assert "audit_events" not in tables
        rows = index.query(
            "SELECT source_id, tier, scope_tenant, scope_revision FROM records "
            "WHERE source_id = 'ev:globex/r-2'"
        )
        assert [tuple(r) for r in rows] == [("ev:globex/r-2", "runbook", "globex", "2")]
        assert [r.id for r in source.search("disk", filters={"tier": "runbook"}).results] == [
            "ev:globex/r-2"
        ]
