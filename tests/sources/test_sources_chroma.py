"""Chroma folders written by the real chromadb: read with SQL only, the erasure gap
Chroma's delete leaves, forget through chromadb, and chromadb still working after."""

from __future__ import annotations

import sqlite3
import struct
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import NOW, fixed_clock, one_error_line
from fixtures.chroma_support import (
    CANARY,
    COLLECTION,
    PURGED_COUNT,
    ChromaHashEmbedding,
    make_chroma_folder,
    make_purged_folder,
    purged_text,
    quiet_settings,
    tree_digest,
)

from memtui.cli import main
from memtui.core.embed import HashEmbedder
from memtui.sources import SourceError, open_source
from memtui.sources.chroma import ChromaCollectionChoice, ChromaSource

WIFI = b"old office wifi password"
DENTIST = b"dentist appointment"


@pytest.fixture
def chroma(tmp_path) -> Path:
    return make_chroma_folder(tmp_path / "store" / "chroma")


def every_file(*folders: Path) -> bytes:
    return b"".join(
        p.read_bytes() for f in folders if f.exists() for p in f.rglob("*") if p.is_file()
    )


def chromadb_collection(folder: Path):
    import chromadb

    client = chromadb.PersistentClient(path=str(folder), settings=quiet_settings())
    return client, client.get_collection(COLLECTION, embedding_function=ChromaHashEmbedding())


def test_documents_are_records_with_scopes_in_created_order(chroma):
    with open_source(chroma, clock=fixed_clock) as source:
        assert isinstance(source, ChromaSource) and source.read_only
        live = list(source.iter_records())
        assert [r.metadata["embedding_id"] for r in live] == [f"m0{i}" for i in range(1, 10)]
        first = live[0]
        assert first.id == "chroma:m01" and first.tier == COLLECTION
        assert first.content == "Alice prefers dark mode in every editor"
        assert first.scope == {
            "user_id": "alice",
            "agent_id": "helper",
            "run_id": None,
            "session_id": None,
        }
        assert source.get("chroma:m06").metadata["importance"] == 0.4
        assert source.get("chroma:m07").content == "Carol asked for daily summaries by email"
        facet = source.facets()[0]
        assert facet.scopes["user_id"] == {"alice": 4, "bob": 3, "carol": 1}
        assert [r.id for r in source.page({"run_id": "r1"}).records] == [
            "chroma:m02",
            "chroma:m08",
        ]
        assert source.id_hint("m03") == "Chroma ids are given as chroma:m03"


def test_deleted_documents_are_hidden_records_and_the_counted_gap(chroma):
    with open_source(chroma) as source:
        deleted = [r for r in source.iter_records(include_hidden=True) if r.state == "deleted"]
        assert [r.id for r in deleted] == ["chroma:m10", "chroma:m11"]
        assert deleted[1].scope["user_id"] == "bob"
        assert source.search("wifi password").results == []
        assert source.search("wifi password").trace.excluded["deleted"] == 1
        counts = source.summary().counts
        assert counts["deleted_with_text"] == 2 and counts["gap_queue_rows"] == 2
        assert counts["gap_copies_in_file"] >= 2
        assert counts["earlier_versions"] == 1  # m07's weekly text, kept by the update
        assert (
            source.summary()
            .notes[0]
            .startswith(
                "erasure gap: 2 document(s) deleted by Chroma still have text in chroma.sqlite3"
            )
        )


def test_the_tiers_are_counted_apart_from_their_scopes_and_agree_with_them(chroma):
    with open_source(chroma) as source:
        assert source.quick_tier_counts  # the app shows the tier first, the scopes follow
        assert source.tier_counts() == {COLLECTION: 9}
        assert source.tier_counts(include_hidden=True) == {COLLECTION: 11}
        for hidden in (False, True):
            facets = source.facets(include_hidden=hidden)
            assert source.tier_counts(include_hidden=hidden) == {f.tier: f.count for f in facets}


def plain_scope_counts(source) -> list[tuple]:
    """The counts by SQLite's own plan: the metadata joined to the collection's rows."""
    return sorted(
        source.query(
            "SELECT m.key, m.string_value, count(*) FROM embeddings AS e "
            "JOIN embedding_metadata AS m ON m.id = e.id WHERE e.segment_id = ? "
            "AND m.key IN ('user_id', 'agent_id', 'run_id', 'session_id') "
            "AND m.string_value IS NOT NULL GROUP BY m.key, m.string_value",
            (source.segment_id,),
        )
    )


def test_every_plan_of_the_scope_counts_gives_the_plain_joins_counts(tmp_path, monkeypatch):
    # one collection: the metadata index alone; the bigger of two: the index minus the
    # other's; the smaller of two: its own rows walked to their metadata
    import memtui.sources.chroma.scope_counts as plans

    alone = make_chroma_folder(tmp_path / "one" / "chroma")
    shared = make_chroma_folder(tmp_path / "two" / "chroma", second=True)
    used: list[str] = []
    for name in ("_EVERY", "_THEIRS", "_OURS"):
        monkeypatch.setattr(plans, name, f"/* {name} */ " + getattr(plans, name))
    with (
        open_source(alone) as one,
        open_source(shared, options={"collection": COLLECTION}) as two,
        open_source(shared, options={"collection": "notes"}) as notes,
    ):
        for source in (one, two, notes):
            query = source.query

            def spying(sql, params=(), query=query):
                used.extend(n for n in ("_EVERY", "_THEIRS", "_OURS") if f"/* {n} */" in sql)
                return query(sql, params)

            monkeypatch.setattr(source, "query", spying)
            counted = sorted(source._scope_counts("", ()))
            assert counted == plain_scope_counts(source)
        assert used == ["_EVERY", "_EVERY", "_THEIRS", "_OURS"]
        for hidden in (False, True):
            assert one.facets(include_hidden=hidden) == two.facets(include_hidden=hidden)
        assert one.facets()[0].scopes == {
            "agent_id": {"helper": 2, "planner": 1},
            "run_id": {"r1": 2, "r2": 1},
            "user_id": {"alice": 4, "bob": 3, "carol": 1},
        }
        assert one.facets({"user_id": "bob"})[0].scopes["agent_id"] == {"helper": 1}
        assert notes.facets()[0].count == 1 and notes.facets()[0].scopes == {}


def test_get_many_reads_live_and_deleted_documents_at_once(chroma):
    with open_source(chroma) as source:
        wanted = ["chroma:m03", "chroma:m10", "chroma:nope", "m01", "chroma:m07"]
        found = source.get_many(wanted)
        assert sorted(found) == ["chroma:m03", "chroma:m07", "chroma:m10"]
        assert found["chroma:m10"].state == "deleted" and found["chroma:m03"].state == "live"
        for record_id, record in found.items():
            assert source.get(record_id) == record


def test_collections_name_their_space_as_chromadb_keeps_it(tmp_path):
    import chromadb

    from memtui.sources.chroma import folder_collections
    from memtui.sources.chroma.folder import collection_space

    folder = tmp_path / "spaces"
    client = chromadb.PersistentClient(path=str(folder), settings=quiet_settings())
    try:
        client.create_collection("plain", embedding_function=None)
        client.create_collection(
            "angles", embedding_function=None, metadata={"hnsw:space": "cosine"}
        )
        client.create_collection(
            "inner", embedding_function=None, configuration={"hnsw": {"space": "ip"}}
        )
    finally:
        client.close()
    spaces = {c.name: c.distance for c in folder_collections(folder)}
    assert spaces == {"angles": "cosine", "inner": "ip", "plain": "l2"}
    # older chromadb: no schema, the space in the metadata or the configuration
    assert collection_space(None, "cosine", None) == "cosine"
    assert collection_space(None, None, '{"hnsw": {"space": "ip"}}') == "ip"
    assert collection_space("not json", None, "{}") == "l2"


def test_reading_changes_no_byte_of_the_folder(chroma, tmp_path):
    before = tree_digest(chroma)
    with open_source(chroma, clock=fixed_clock) as source:
        list(source.iter_records(include_hidden=True))
        source.summary()
        source.search("dark mode", embedder=HashEmbedder(8))
        source.detail("chroma:m01")
    assert tree_digest(chroma) == before
    assert not any(p.name.endswith(("-wal", "-shm", "-journal")) for p in chroma.rglob("*"))
    assert sorted(p.name for p in chroma.parent.iterdir()) == ["chroma"]  # no audit log


def test_the_vector_lane_reads_the_queues_float32_vectors(chroma):
    with open_source(chroma) as source:
        assert "vectors" in source.capabilities
        vectors = source.cache_vectors()
        assert len(vectors) == 9
        embed = HashEmbedder(8)
        for record_id, blob in vectors.items():
            stored = struct.unpack("<8f", blob)
            wanted = embed.embed_one(source.get(record_id).content)
            assert stored == pytest.approx(wanted, abs=1e-6), record_id  # the updated text's
        response = source.search("Bob is allergic to peanuts", embedder=embed, limit=3)
        assert response.trace.fallback is None
        top = response.results[0]
        assert top.id == "chroma:m03" and top.trace.vector.raw == pytest.approx(1.0)


def test_without_readable_vectors_search_is_keyword_only_and_says_why(chroma):
    conn = sqlite3.connect(chroma / "chroma.sqlite3")
    conn.execute("UPDATE embeddings_queue SET vector = NULL")  # as after Chroma's log purge
    conn.commit()
    conn.close()
    with open_source(chroma) as source:
        assert "vectors" not in source.capabilities
        assert any("search is keyword-only" in n for n in source.summary().notes)
        response = source.search("peanuts", embedder=HashEmbedder(8))
        assert "no stored vectors" in (response.trace.fallback or "")
        assert response.results[0].id == "chroma:m03"


def test_several_collections_ask_for_one(tmp_path):
    folder = make_chroma_folder(tmp_path / "two" / "chroma", second=True)
    with pytest.raises(ChromaCollectionChoice) as several:
        open_source(folder)
    assert [c.name for c in several.value.collections] == [COLLECTION, "notes"]
    assert "holds 2 Chroma collections; pick one with --collection NAME" in str(several.value)
    with open_source(folder, options={"collection": "notes"}) as source:
        assert [r.content for r in source.iter_records()] == ["a second collection's note"]
    with pytest.raises(SourceError, match="has no Chroma collection 'nope'"):
        open_source(folder, options={"collection": "nope"})
    with open_source(folder / "chroma.sqlite3", options={"collection": COLLECTION}) as source:
        assert source.record_count() == 11


def test_forget_deletes_through_chromadb_and_every_copy(chroma, tmp_path):
    with open_source(chroma, allow_writes=True, clock=fixed_clock) as source:
        source.search("summaries")  # memtui's index holds the text too
        outcome = source.forget("chroma:m07", reason="user asked", operator="ana")
        assert outcome.verified, outcome
        assert outcome.checks["folder_files_clean"] and outcome.checks["bytes_gone"]
        # chromadb writes heap memory (texts among it) into the HNSW files' unused room
        assert outcome.checks["hnsw_unused_zero"]
        events = source.audit_events()
        assert [e["action"] for e in reversed(events)] == ["forget-intent", "forget"]
        assert events[0]["details"]["deleted_through_chromadb"] == 1
        assert source.summary().counts["deleted_rows_purged"] == 0  # memtui's own, not a gap
    files = every_file(chroma, tmp_path / "cache", Path(str(chroma) + ".memtui-audit.db").parent)
    for text in (b"daily summaries", b"weekly summaries"):
        assert text not in files
    client, collection = chromadb_collection(chroma)
    try:
        assert collection.count() == 8
        assert collection.get(ids=["m07"])["ids"] == []
        assert collection.get(ids=["m01"])["documents"] == [
            "Alice prefers dark mode in every editor"
        ]
        collection.add(
            ids=["m20"], documents=["Dana likes green tea"], metadatas=[{"user_id": "d"}]
        )
        found = collection.query(query_texts=["Dana green tea"], n_results=1)
        assert found["ids"] == [["m20"]]
        assert collection.count() == 9
    finally:
        client.close()


def test_forget_gaps_clears_what_chromas_delete_left(chroma, tmp_path):
    assert WIFI in every_file(chroma) and DENTIST in every_file(chroma)
    with open_source(chroma, allow_writes=True) as source:
        preview = source.forget_gaps_preview()
        assert preview["records"] == ["chroma:m10", "chroma:m11"]
        done = source.forget_gaps(reason="close the gap", operator="ana")
        assert done.verified, done
        assert done.record_ids == ("chroma:m10", "chroma:m11")
        counts = source.summary().counts
        assert counts["deleted_with_text"] == 0 and counts["free_pages"] == 0
        assert counts["hnsw_files_with_heap_bytes"] == 0 and done.checks["hnsw_unused_zero"]
        with pytest.raises(SourceError, match="no erasure gap"):
            source.forget_gaps(reason="again")
    files = every_file(chroma, tmp_path / "cache")
    assert WIFI not in files and DENTIST not in files
    client, collection = chromadb_collection(chroma)
    try:
        assert collection.count() == 9
        collection.add(ids=["m10"], documents=["a new m10"])
        assert collection.get(ids=["m10"])["documents"] == ["a new m10"]
    finally:
        client.close()


def test_forget_scope_erases_a_users_documents_deleted_ones_too(chroma):
    with open_source(chroma, allow_writes=True) as source:
        assert source.blast_radius(scope=("user_id", "bob")) == {COLLECTION: {"document": 4}}
        outcome = source.forget_scope(scope=("user_id", "bob"), reason="gdpr", operator="ana")
        assert outcome.verified, outcome
        assert sorted(outcome.removed) == ["chroma:m03", "chroma:m04", "chroma:m09", "chroma:m11"]
    assert b"peanuts" not in every_file(chroma) and DENTIST not in every_file(chroma)
    client, collection = chromadb_collection(chroma)
    try:
        assert collection.count() == 6
        assert collection.get(where={"user_id": "bob"})["ids"] == []
    finally:
        client.close()


def test_forget_without_chromadb_is_refused_with_the_install_hint(chroma, monkeypatch):
    before = tree_digest(chroma)
    monkeypatch.setitem(sys.modules, "chromadb", None)  # an import of it fails, as uninstalled
    with open_source(chroma, allow_writes=True) as source:
        with pytest.raises(SourceError, match=r"pip install 'memtui\[chroma\]'"):
            source.forget("chroma:m01", reason="r")
        with pytest.raises(SourceError, match="not installed"):
            source.forget_scope(scope=("user_id", "alice"), reason="r")
        assert source.audit_events() == []
    assert tree_digest(chroma) == before


def test_cli_info_names_the_gap_and_a_forget_needs_allow_writes(chroma, monkeypatch):
    monkeypatch.setenv("MEMTUI_NOW", NOW.isoformat())
    runner = CliRunner()
    info = runner.invoke(main, ["info", str(chroma)])
    assert info.exit_code == 0, info.output
    assert "erasure gap: 2 document(s) deleted by Chroma" in info.output
    refused = runner.invoke(main, ["forget", str(chroma), "chroma:m01", "--reason", "r", "--yes"])
    assert "read-only" in one_error_line(refused)
    assert CANARY.encode() in every_file(chroma)


def test_a_purged_queue_keeps_the_vector_lane_and_a_gap_a_vacuum_clears(tmp_path):
    folder = make_purged_folder(tmp_path / "purged" / "chroma")
    deleted_text = purged_text(5).encode()
    assert deleted_text in every_file(folder)  # in unused space: Chroma deletes without zeroing
    with open_source(folder, allow_writes=True) as source:
        assert source.record_count() == PURGED_COUNT - 1
        assert "vectors" in source.capabilities  # from the HNSW segment's files
        summary = source.summary()
        assert summary.counts["deleted_rows_purged"] == 1
        assert summary.counts["stale_queue_fragments"] > 0
        assert not any("search is keyword-only" in n for n in summary.notes)
        found = source.search(purged_text(7), embedder=HashEmbedder(8))
        assert found.trace.fallback is None
        assert found.results[0].id == "chroma:p0007"
        done = source.forget_gaps(reason="vacuum", operator="ana")
        assert done.verified and done.record_ids == ()
        assert source.summary().counts["stale_queue_fragments"] == 0
    assert deleted_text not in every_file(folder)
    client, collection = chromadb_collection(folder)
    try:
        assert collection.count() == PURGED_COUNT - 1
        assert collection.get(ids=["p0009"])["documents"] == [purged_text(9)]
        assert len(collection.query(query_texts=[purged_text(9)], n_results=5)["ids"][0]) == 5
    finally:
        client.close()


def test_a_hostile_segment_pickle_is_never_unpickled(tmp_path):
    folder = make_purged_folder(tmp_path / "hostile" / "chroma")
    marker = tmp_path / "pwned"
    pickles = list(folder.rglob("index_metadata.pickle"))
    assert pickles, "Chroma wrote its HNSW id map as a pickle"
    hostile = (
        b"cos\nsystem\n(S'touch " + str(marker).encode() + b"'\ntR."
    )  # os.system('touch ...') when unpickled
    pickles[0].write_bytes(hostile)
    with open_source(folder) as source:
        list(source.iter_records(include_hidden=True))
        source.summary()
        source.search("kwyjibo3q")
    assert not marker.exists()


def test_cli_forget_gaps_vacuums_a_gap_that_names_no_document(tmp_path, monkeypatch):
    folder = make_purged_folder(tmp_path / "cli" / "chroma")
    monkeypatch.setenv("MEMTUI_NOW", NOW.isoformat())
    argv = ["forget-gaps", str(folder), "--reason", "old deletes", "--yes", "--allow-writes"]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, result.output
    assert "erasure verified" in result.output
    assert purged_text(5).encode() not in every_file(folder)
    again = CliRunner().invoke(main, argv)
    assert again.exit_code == 0 and "no erasure gap" in again.output


AGENT = """
import sys, warnings
warnings.simplefilter("ignore")
import chromadb
from chromadb.config import Settings
client = chromadb.PersistentClient(path=sys.argv[1], settings=Settings(anonymized_telemetry=False))
client.get_collection(sys.argv[2], embedding_function=None).count()
print("ready", flush=True)
sys.stdin.read()
"""


def test_a_running_chromadb_client_makes_every_write_wait_for_it_to_stop(chroma):
    """A client in another process keeps the folder's files open (and its HNSW index in
    memory, which it writes back): memtui refuses to write, and writes once it is gone."""
    import subprocess

    from memtui.sources.chroma.live import folder_openers

    agent = subprocess.Popen(
        [sys.executable, "-c", AGENT, str(chroma), COLLECTION],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert agent.stdout is not None and agent.stdout.readline().strip() == "ready"
        assert folder_openers(chroma) == [agent.pid]
        before = tree_digest(chroma)  # the client writes the folder too, as it opens
        with open_source(chroma, allow_writes=True, clock=fixed_clock) as source:
            for write in (
                lambda: source.forget("chroma:m07", reason="asked"),
                lambda: source.forget_scope(scope=("user_id", "bob"), reason="asked"),
                lambda: source.forget_gaps(reason="asked"),
            ):
                with pytest.raises(SourceError) as refused:
                    write()
                assert str(refused.value).startswith(
                    f"the agent is live: process {agent.pid} has files of {chroma} open"
                )
                assert "stop the agent first" in str(refused.value)
            assert source.audit_events() == []  # refused before any intent
        assert tree_digest(chroma) == before  # memtui wrote nothing
    finally:
        agent.communicate("")
    assert folder_openers(chroma) == []
    with open_source(chroma, allow_writes=True, clock=fixed_clock) as source:
        assert source.forget("chroma:m07", reason="asked").verified


def test_open_files_are_found_by_proc_fd_links(tmp_path):
    from memtui.sources.chroma.live import folder_openers

    folder = tmp_path / "chroma"
    folder.mkdir()
    assert folder_openers(folder, proc=tmp_path / "no-proc") is None  # cannot be told
    proc = tmp_path / "proc"
    for pid, target in (
        (11, folder / "chroma.sqlite3"),
        (12, tmp_path / "elsewhere"),
        (13, folder),
    ):
        (proc / str(pid) / "fd").mkdir(parents=True)
        (proc / str(pid) / "fd" / "3").symlink_to(target)
    (proc / "self" / "fd").mkdir(parents=True)
    (proc / "14").mkdir()  # a process whose fd folder cannot be read
    assert folder_openers(folder, proc=proc) == [11, 13]
