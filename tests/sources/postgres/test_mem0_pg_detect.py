"""Which mem0 collection a postgresql:// URL opens: the only one, the one --collection
names, or one line listing them; mem0's telemetry table is never one."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import fixed_clock, one_error_line

from memtui.cli import main
from memtui.sources import SourceError, open_source

from .conftest import new_database
from .mem0_support import record_id, sql, write_collection, write_telemetry

pytest.importorskip("mem0")

TEAM = [("standup", "standup moved to 10:00", {"agent_id": "team-bot"}, {})]


@pytest.fixture(scope="module")
def two_collections(pg_server):
    """``memories`` and ``team_memories`` (and mem0's telemetry table) in one database."""
    with new_database(pg_server) as url:
        write_collection(url).connection_pool.close()
        write_collection(url, "team_memories", TEAM).connection_pool.close()
        write_telemetry(url)
        yield url


def test_several_collections_need_collection_and_the_line_lists_them(two_collections):
    with pytest.raises(SourceError) as raised:
        open_source(two_collections)
    message = str(raised.value)
    assert "\n" not in message
    assert message.endswith(
        "(schema public) holds 2 mem0 collections; pick one with --collection NAME: "
        "memories, team_memories"
    )
    assert "mem0migrations" not in message


def test_collection_picks_one(two_collections):
    with open_source(two_collections, collection="team_memories", clock=fixed_clock) as team:
        assert team.collection == "team_memories"
        assert [r.content for r in team.page().records] == ["standup moved to 10:00"]
    with open_source(two_collections, collection="memories", clock=fixed_clock) as source:
        assert source.get(record_id("paris")).content == "Paris trip booked for June"
    with pytest.raises(SourceError, match=r"has no mem0 collection 'nope' \(mem0 collections: "):
        open_source(two_collections, collection="nope")


def test_the_telemetry_table_alone_is_no_store(pg_server):
    with new_database(pg_server) as url:
        write_telemetry(url)
        with pytest.raises(SourceError) as raised:
            open_source(url)
        assert str(raised.value).endswith(
            "holds 1 table (mem0migrations) but no LangGraph store, mem0 pgvector collection "
            "or Letta server passages"
        )


def test_an_empty_collection_opens(pg_server):
    with new_database(pg_server) as url:
        write_collection(url, memories=[]).connection_pool.close()
        with open_source(url, clock=fixed_clock) as source:
            assert source.collection == "memories" and source.page().records == []
            assert source.search("anything").results == []


def test_beside_a_langgraph_store_collection_names_the_mem0_one(pg_server):
    from langgraph.store.postgres import PostgresStore

    with new_database(pg_server) as url:
        with PostgresStore.from_conn_string(url) as store:
            store.setup()
            store.put(("notes",), "n1", {"text": "a LangGraph item"})
        write_collection(url).connection_pool.close()
        with open_source(url, clock=fixed_clock) as source:
            assert source.kind == "langgraph-postgres"  # tried first
        with open_source(url, collection="memories", clock=fixed_clock) as source:
            assert source.kind == "mem0-pgvector"
        with pytest.raises(SourceError, match="--mem0-history applies to mem0 collections"):
            open_source(url, mem0_history="history.db")


def test_collection_on_a_file_store_names_both_kinds_that_take_it():
    path = Path(__file__).parents[2] / "fixtures" / "preferences.sqlite"
    with pytest.raises(SourceError) as raised:
        open_source(path, collection="x")
    assert (
        "--collection applies to Qdrant stores, LanceDB databases, Chroma folders and Postgres stores"
        in str(raised.value)
    )


def test_the_cli_says_so_in_one_line(runner, two_collections):
    line = one_error_line(runner.invoke(main, ["records", two_collections]))
    assert "pick one with --collection NAME: memories, team_memories" in line
    result = runner.invoke(main, ["records", two_collections, "--collection", "team_memories"])
    assert result.exit_code == 0, result.output
    assert "standup moved to 10:00" in result.output
    assert sql(two_collections, "SELECT count(*) FROM team_memories") == [(1,)]
