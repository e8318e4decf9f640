"""Qdrant local folders and servers: detection, the restricted unpickler, the agent's lock,
Cyber-AutoAgent's collections (scopes, memory modes, inactive points, web-search cache),
fallback messages, forget with its audit events, and a server through qdrant-client.

Every folder here is written by the real qdrant-client (a test dependency).
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import fixed_clock, one_error_line
from fixtures.qdrant_support import (
    DIMS,
    HOST,
    OP_A,
    OP_B,
    SHOP,
    WEB_CACHE,
    make_cyber_folder,
    memory,
    pid,
    record_id,
    tree_bytes,
)

from memtui.cli import main
from memtui.core.embed import HashEmbedder
from memtui.sources import CollectionChoiceError, SourceError, open_source, recognize
from memtui.sources.cyber_autoagent import CyberAutoAgentSource, WebSearchCacheSource
from memtui.sources.qdrant import QdrantSource, lock_holders
from memtui.sources.safe_pickle import UnsafePickleError, load_point

NOW = "2026-11-30T12:00:00Z"
STORAGE = Path("collection") / "cyber_autoagent_memories" / "storage.sqlite"
CYBER_TEXT_8 = "Temporary staging credential zqxjvortex seen in a JS bundle"


@pytest.fixture(autouse=True)
def private_dirs(tmp_path, monkeypatch):
    monkeypatch.delenv("QDRANT_API_KEY", raising=False)
    monkeypatch.setenv("COLUMNS", "250")


@pytest.fixture
def folder(tmp_path) -> Path:
    return make_cyber_folder(tmp_path / "outputs" / "qdrant")


def opened(path, **kwargs):
    return open_source(path, clock=fixed_clock, **kwargs)


# ---------------------------------------------------------------- detection


def test_a_qdrant_folder_is_recognized_by_its_layout(folder, tmp_path):
    assert recognize(folder)[0] == "qdrant"
    assert recognize(folder.parent)[0] == "qdrant"  # outputs/ holding qdrant/
    assert recognize(folder / STORAGE)[0] == "qdrant"  # a collection's storage.sqlite
    for path in (folder, folder.parent, folder / STORAGE):
        with opened(path) as source:
            assert isinstance(source, CyberAutoAgentSource)
            assert source.info.name == "cyber_autoagent_memories" and source.read_only
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SourceError, match="is a folder; memtui opens SQLite files and Qdrant"):
        open_source(empty)


def test_collection_choice_defaults_and_errors(tmp_path):
    from qdrant_client import QdrantClient, models

    path = tmp_path / "q"
    client = QdrantClient(path=str(path))
    for name, size in (("alpha", 4), ("beta", 1024)):
        client.create_collection(
            name, vectors_config=models.VectorParams(size=size, distance=models.Distance.DOT)
        )
    client.upsert(
        "alpha",
        [
            models.PointStruct(id=7, vector=[1, 0, 0, 0], payload={"text": "x"}),
            # No text key: every string of the payload, joined on one line.
            models.PointStruct(
                id=8, vector=[0, 1, 0, 0], payload={"title": "t1", "notes": ["n1", "n2"]}
            ),
        ],
    )
    client.update_collection_aliases(
        [
            models.CreateAliasOperation(
                create_alias=models.CreateAlias(collection_name="alpha", alias_name="current")
            )
        ]
    )
    client.close()
    with pytest.raises(CollectionChoiceError) as raised:
        open_source(path)
    message = str(raised.value)
    assert "holds 2 Qdrant collections; pick one with --collection NAME" in message
    assert "alpha (2 points, 4 dims, Dot" in message and "beta (0 points, 1024 dims" in message
    assert [c.to_json()["points"] for c in raised.value.collections] == [2, 0]
    with pytest.raises(SourceError, match="has no collection 'gamma'; it holds: alpha"):
        open_source(path, collection="gamma")
    with opened(path, collection="current") as source:  # an alias
        assert type(source) is QdrantSource and source.info.name == "alpha"
        record = source.get("qd:7")
        assert record is not None and record.content == "x" and record.metadata["point_id"] == 7
        assert source.get("qd:8").content == "t1 · n1 · n2"
    line = one_error_line(CliRunner().invoke(main, ["records", str(path)]))
    assert "pick one with --collection NAME" in line
    result = CliRunner().invoke(main, ["records", str(path), "--collection", "alpha", "--json"])
    assert json.loads(result.output)[0]["id"] == "qd:7"


def test_qdrant_options_on_another_store_are_refused(tmp_path, folder):
    with pytest.raises(SourceError, match="--memory-mode applies to Qdrant stores"):
        open_source(
            Path(__file__).parent.parent / "fixtures" / "preferences.sqlite", memory_mode="shared"
        )
    with pytest.raises(SourceError, match="--mem0-history does not apply to Cyber-AutoAgent"):
        open_source(folder, mem0_history=tmp_path / "history.db")
    with pytest.raises(SourceError, match="--memory-mode does not apply to Cyber-AutoAgent web"):
        open_source(folder, collection=WEB_CACHE, memory_mode="shared")


# ---------------------------------------------------------------- the restricted unpickler


class _System:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class _Exec:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        import builtins

        return (builtins.exec, (f"open({str(self.marker)!r}, 'w').write('ran')",))


def _plant(folder: Path, blob: bytes, point_id: str) -> None:
    key = base64.b64encode(pickle.dumps(point_id, protocol=4)).decode()
    conn = sqlite3.connect(folder / STORAGE)
    conn.execute("INSERT INTO points VALUES (?, ?)", (key, blob))
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda m: pickle.dumps(_System(m)), f"{os.system.__module__}.system"),
        (lambda m: pickle.dumps(_Exec(m)), "builtins.exec"),
    ],
    ids=["os.system", "builtins.exec"],
)
def test_a_crafted_point_is_refused_and_nothing_runs(folder, tmp_path, make, named):
    marker = tmp_path / "pwned"
    _plant(folder, make(marker), pid(999))
    with pytest.raises(SourceError) as raised:
        open_source(folder)
    message = str(raised.value)
    assert f"is a pickle that loads {named}, which is not a Qdrant point class" in message
    assert "nothing in it was run" in message and "do not open it with qdrant-client" in message
    assert not marker.exists()
    line = one_error_line(CliRunner().invoke(main, ["records", str(folder)]))
    assert named in line
    assert not marker.exists()


def test_a_crafted_payload_inside_a_real_point_is_refused_too(folder, tmp_path):
    from qdrant_client.http import models

    marker = tmp_path / "pwned"
    point = models.PointStruct.model_construct(
        id=pid(998), vector=[0.0] * DIMS, payload={"memory": _System(marker)}
    )
    blob = pickle.dumps(point)
    with pytest.raises(UnsafePickleError) as raised:
        load_point(blob)
    assert raised.value.name == "system"
    _plant(folder, blob, pid(998))
    with pytest.raises(SourceError, match="not a Qdrant point class"):
        open_source(folder)
    assert not marker.exists()


def test_a_real_point_references_only_the_admitted_classes(folder):
    import pickletools

    conn = sqlite3.connect(folder / STORAGE)
    blob = conn.execute("SELECT point FROM points LIMIT 1").fetchone()[0]
    conn.close()
    globals_named = [
        arg for op, arg, _pos in pickletools.genops(blob) if op.name == "SHORT_BINUNICODE"
    ]
    assert "qdrant_client.http.models.models" in globals_named and "PointStruct" in globals_named
    point = load_point(blob)
    assert type(point).__name__ == "StoredPointStruct"
    assert set(point.fields) == {"id", "vector", "payload"}
    from qdrant_client.http import models

    stored = models.PointStruct(
        id=3,
        vector={"": [0.5, 0.25], "bm25": models.SparseVector(indices=[1], values=[2.0])},
        payload={"a": [1, None, True]},
    )
    for protocol in (2, 3, 4, 5):  # older Pythons wrote older protocols
        fields = load_point(pickle.dumps(stored, protocol=protocol)).fields
        assert fields["id"] == 3 and fields["payload"] == {"a": [1, None, True]}
        assert fields["vector"]["bm25"].fields == {"indices": [1], "values": [2.0]}


def test_reading_works_without_qdrant_client(folder):
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules["qdrant_client"] = None  # import qdrant_client now fails
        from memtui.sources import open_source, SourceError
        with open_source({str(folder)!r}) as source:
            print(len(source.page(include_hidden=True).records), source.kind)
            print(source.search("sql injection").results[0].id)
        try:
            open_source(None, qdrant_url="http://127.0.0.1:9")
        except SourceError as exc:
            print(exc)
        """
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(folder.parent / "cache")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    lines = out.stdout.splitlines()
    assert lines[0] == "10 cyber-autoagent"
    assert lines[1] == record_id(2)
    assert lines[2] == (
        "opening a Qdrant server needs qdrant-client, which is not installed: "
        "pip install 'memtui[qdrant]'"
    )


# ---------------------------------------------------------------- the agent's lock, read-only


HOLDER = textwrap.dedent(
    """
    import sys
    from qdrant_client import QdrantClient
    client = QdrantClient(path=sys.argv[1])
    print("ready", flush=True)
    sys.stdin.readline()
    client.close()
    """
)


@pytest.fixture
def live_agent(folder):
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        proc.stdin.write("\n")
        proc.stdin.flush()
        proc.wait(timeout=60)


def test_a_folder_held_by_a_running_agent_is_read_without_the_lock(folder, live_agent):
    assert lock_holders(folder / ".lock") == [live_agent.pid]
    before = tree_bytes(folder)
    with opened(folder, allow_writes=True) as source:
        assert source.live and source.read_only and "forget" not in source.capabilities
        summary = source.summary()
        assert summary.notes[0].startswith("the agent is live: read-only")
        assert len(source.page().records) == 9
        assert source.search("sql injection").results[0].id == record_id(2)
        with pytest.raises(SourceError, match="the agent is live"):
            source.forget(record_id(1), reason="r")
    result = CliRunner().invoke(
        main, ["forget", str(folder), record_id(1), "--reason", "r", "--yes", "--allow-writes"]
    )
    assert "the agent is live" in one_error_line(result)
    assert "the agent is live" in CliRunner().invoke(main, ["info", str(folder)]).output
    assert tree_bytes(folder) == before
    assert live_agent.poll() is None  # the agent still runs, its lock untouched


def test_memtui_holds_no_lock_while_it_reads(folder):
    from qdrant_client import QdrantClient

    with opened(folder) as source:
        assert not source.live and lock_holders(folder / ".lock") == []
        client = QdrantClient(path=str(folder))  # an agent can start while memtui is open
        try:
            assert client.count("cyber_autoagent_memories").count == 10
        finally:
            client.close()
        assert len(source.page(include_hidden=True).records) == 10


def test_reading_changes_no_byte_and_leaves_nothing_beside(folder):
    before = tree_bytes(folder)
    beside = sorted(p.name for p in folder.parent.iterdir())
    with opened(folder) as source:
        source.summary()
        source.facets(include_hidden=True)
        for record in source.iter_records(include_hidden=True):
            source.detail(record.id)
        source.search("waf comments", embedder=HashEmbedder(8))
        source.explain("waf comments", record_id(4))
        source.audit_events()
        with pytest.raises(SourceError, match="open read-only: memtui opens foreign stores"):
            source.forget(record_id(1), reason="r")
    with opened(folder, collection=WEB_CACHE) as cache:
        cache.search("jinja2")
    assert tree_bytes(folder) == before
    assert sorted(p.name for p in folder.parent.iterdir()) == beside


def test_a_locked_storage_file_is_read_as_it_is_on_disk(folder):
    holder = sqlite3.connect(folder / STORAGE, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # a writer mid-transaction: readers are locked out
    try:
        with opened(folder) as source:
            assert len(source.page().records) == 9
            assert any("immutable" in note for note in source.summary().notes)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


# ---------------------------------------------------------------- Cyber-AutoAgent


def test_cyber_scopes_inactive_points_and_finding_metadata(folder):
    with opened(folder) as source:
        assert source.scope_keys == ("target", "operation", "category")
        facets = {f.tier: f for f in source.facets()}
        assert list(facets) == ["finding", "objective", "observation", "knowledge"]
        assert facets["observation"].scopes["target"] == {HOST: 2, SHOP: 3}
        assert facets["finding"].scopes["category"] == {
            "finding": 1,
            "finding_candidate": 1,
            "validation_failure": 1,
        }
        inactive = source.get(record_id(6))
        assert inactive.state == "inactive" and inactive.metadata["active"] is False
        assert record_id(6) not in {r.id for r in source.iter_records()}
        assert source.search("admin legacy").results == []
        assert source.search("admin legacy").trace.excluded["inactive"] == 1
        finding = source.get(record_id(2))
        assert finding.metadata["finding"] == {
            "title": "SQL injection in orders API",
            "severity": "HIGH",
            "validation_status": "verified",
            "status": "verified",
            "finding_uid": "F-0001",
            "technique": "sqli",
            "target": SHOP,
        }
        assert source.notes(finding).startswith(
            "HIGH · SQL injection in orders API · validation: verified"
        )
        assert finding.metadata["user_id"] == f"cyber-agent-{OP_A}"
        assert finding.metadata["user_id_stored"] == f'"cyber-agent-{OP_A}"'
        assert finding.created_at == "2026-11-30T10:02:00"
        assert source.get(record_id(9)).scope["target"] == [SHOP, HOST]
        assert [s.title for s in source.detail(record_id(2))][0] == "finding"
        summary = source.summary()
        assert summary.counts["inactive"] == 1 and summary.counts["operations"] == 2
        assert any(WEB_CACHE in note for note in summary.notes)
    result = CliRunner().invoke(main, ["records", str(folder), "--all"])
    assert "HIGH · SQL injection in orders API" in result.output and "inactive" in result.output


def test_memory_modes_apply_the_agents_scope_rule(folder):
    shop_a = {"target": SHOP, "operation": OP_A}
    with opened(folder, memory_mode="operation") as source:
        assert {r.id for r in source.page(shop_a).records} == {
            record_id(1),
            record_id(2),
            record_id(7),
            record_id(8),
        }
        with pytest.raises(SourceError, match="add --filter operation=ID"):
            source.page({"target": SHOP})
        found = source.search("waf comments", filters=shop_a)
        assert found.results == [] and found.trace.memory_mode.mode == "operation"
    with opened(folder, memory_mode="shared") as source:
        ids = {r.id for r in source.page(shop_a).records}
        assert ids == {record_id(n) for n in (1, 2, 3, 4, 7, 8, 9, 10)}
        found = source.search("waf comments", filters=shop_a)
        assert [r.id for r in found.results] == [record_id(4)]
        assert found.trace.memory_mode.dropped == ["operation"]
        assert {r.id for r in source.page({"target": HOST}).records} == {record_id(5), record_id(9)}
    with opened(folder) as source:  # no mode: plain filters
        assert {r.id for r in source.page({"operation": OP_B}).records} == {
            record_id(n) for n in (3, 4, 5, 9, 10)
        }
    runner = CliRunner()
    result = runner.invoke(
        main,
        [
            "search",
            str(folder),
            "waf",
            "--memory-mode",
            "shared",
            "--filter",
            f"target={SHOP}",
            "--filter",
            f"operation={OP_A}",
        ],
    )
    assert "memory mode shared" in result.output and "operation filter was dropped" in result.output
    line = one_error_line(
        runner.invoke(
            main,
            ["records", str(folder), "--memory-mode", "operation", "--filter", f"target={SHOP}"],
        )
    )
    assert "add --filter operation=ID" in line


def test_the_web_search_cache_is_recognized_and_labelled(folder):
    with opened(folder, collection=WEB_CACHE, now=NOW) as source:
        assert isinstance(source, WebSearchCacheSource)
        assert source.kind_label == "Cyber-AutoAgent web-search cache (Qdrant)"
        assert source.summary().notes[0].startswith("a Cyber-AutoAgent web-search cache")
        live = source.get(record_id(101))
        gone = source.get(record_id(102))
        assert live.state == "live" and live.expires_at == "2026-12-06T12:00:00.000000Z"
        assert gone.state == "expired" and record_id(102) not in {
            r.id for r in source.iter_records()
        }
        assert live.metadata["cache"].endswith("(not agent memory)")
        # The query and the results' text fields, joined on one line.
        assert live.content == (
            "CVE-2024 jinja2 sandbox escape · Result for CVE-2024 jinja2 sandbox escape · "
            "https://advisories.example/1 · advisory text"
        )
        assert [r.id for r in source.search("flask debug").results] == []
        assert source.search("flask debug").trace.excluded["expired"] == 1
    later = "2026-12-07T00:00:00Z"
    with opened(folder, collection=WEB_CACHE, now=later) as source:
        assert source.get(record_id(101)).state == "expired"
    from datetime import UTC, datetime

    clock = {"now": datetime(2026, 12, 6, 11, 59, 59, tzinfo=UTC)}
    with open_source(folder, collection=WEB_CACHE, clock=lambda: clock["now"]) as source:
        assert source.get(record_id(101)).state == "live"
        assert [r.id for r in source.search("jinja2").results] == [record_id(101)]
        clock["now"] = datetime(2026, 12, 6, 12, 0, 0, tzinfo=UTC)  # the boundary instant
        assert source.get(record_id(101)).state == "expired"
        assert list(source.iter_records()) == []
        assert source.search("jinja2").results == []
    info = json.loads(CliRunner().invoke(main, ["info", str(folder), "--json"]).output)
    kinds = {c["name"]: c["label"] for c in info["collections"]}
    assert kinds[WEB_CACHE] == "Cyber-AutoAgent web-search cache"
    assert kinds["cyber_autoagent_memories"] == "Cyber-AutoAgent memories"


def test_a_custom_collection_name_is_recognized_by_its_payload(tmp_path):
    from qdrant_client import QdrantClient, models

    path = tmp_path / "q"
    client = QdrantClient(path=str(path))
    client.create_collection(
        "team_memories", vectors_config=models.VectorParams(size=DIMS, distance="Cosine")
    )
    item = memory(1, "Port 8443 serves the admin API", "observation", OP_A, [SHOP])
    client.upsert(
        "team_memories",
        [
            models.PointStruct(
                id=pid(1), vector=HashEmbedder(8).embed_one("port admin"), payload=item["payload"]
            )
        ],
    )
    client.close()
    with opened(path) as source:
        assert isinstance(source, CyberAutoAgentSource) and source.info.name == "team_memories"


def test_fallback_messages_name_the_dimension(folder):
    with opened(folder) as source:
        trace = source.search("sql injection").trace
        assert trace.fallback == (
            "no embedder for these 8-dim vectors: give one that makes 8-dim vectors with "
            "--embedder module:callable"
        )
        trace = source.search("sql injection", embedder=HashEmbedder(16)).trace
        assert trace.fallback == (
            "no embedder for these 8-dim vectors: hash-16 makes 16-dim vectors"
        )
        trace = source.search("sql injection", embedder=HashEmbedder(8)).trace
        assert trace.fallback is None and trace.embedder == "hash-8"
    result = CliRunner().invoke(main, ["search", str(folder), "sql", "--embedder", "hash-16"])
    assert "no embedder for these 8-dim vectors: hash-16 makes 16-dim vectors" in result.output


def test_a_big_collection_names_its_1024_dims(tmp_path):
    from qdrant_client import QdrantClient, models

    path = tmp_path / "q"
    client = QdrantClient(path=str(path))
    client.create_collection(
        "cyber_autoagent_memories",
        vectors_config=models.VectorParams(size=1024, distance=models.Distance.COSINE),
    )
    item = memory(1, "Port 8443 serves the admin API", "observation", OP_A, [SHOP])
    client.upsert(
        "cyber_autoagent_memories",
        [models.PointStruct(id=pid(1), vector=[0.5] * 1024, payload=item["payload"])],
    )
    client.close()
    with opened(path) as source:
        fallback = source.search("admin api").trace.fallback
        assert fallback.startswith("no embedder for these 1024-dim vectors")


# ---------------------------------------------------------------- forget


def test_forget_on_a_folder_deletes_the_point_purges_the_file_and_audits(folder):
    storage = folder / STORAGE
    assert storage.read_bytes().count(b"zqxjvortex") == 1  # the check can fail
    with opened(folder, allow_writes=True) as source:
        assert "forget" in source.capabilities
        source.search("staging credential")  # the cache holds a copy too
        preview = source.forget_preview(record_id(8))
        assert preview["rule"] == (
            "The point (payload and vectors) is deleted from storage.sqlite (then VACUUM)."
        )
        outcome = source.forget(record_id(8), reason="leaked secret", operator="ana")
        assert outcome.verified, outcome
        assert outcome.checks == {
            "point_gone": True,
            "storage.sqlite_bytes_gone": True,
            "cache_gone": True,
        }
        events = source.audit_events()
        assert [e["action"] for e in events] == ["forget", "forget-intent"]
        assert events[1]["status"] == "completed"
        assert events[0]["details"]["intent_event"] == events[1]["id"]
        assert events[0]["details"]["storage.sqlite_free_pages_after"] == 0
        assert "zqxjvortex" not in json.dumps(events)
        assert source.verify_audit() is None
        assert source.get(record_id(8)) is None
        assert source.search("staging credential").results == []
        assert lock_holders(folder / ".lock") == []  # released
    data = storage.read_bytes()
    assert b"zqxjvortex" not in data and b"xjvortex" not in data
    assert pid(8).encode() not in data
    from qdrant_client import QdrantClient

    client = QdrantClient(path=str(folder))
    try:
        assert client.count("cyber_autoagent_memories").count == 9
        assert client.retrieve("cyber_autoagent_memories", [pid(8)]) == []
    finally:
        client.close()
    assert (folder.parent / "qdrant.memtui-audit.db").exists()


def test_forget_is_verified_when_a_live_point_holds_the_same_text(tmp_path):
    """Memory 11 has memory 8's text, so its payload and (hash-embedder) vector are equal:
    the byte check counts its copy as its own, not as one of the forgotten point's."""
    text = CYBER_TEXT_8
    folder = make_cyber_folder(
        tmp_path / "twin" / "qdrant", extra=[memory(11, text, "observation", OP_A, [SHOP])]
    )
    storage = folder / STORAGE
    assert storage.read_bytes().count(b"zqxjvortex") == 2
    with opened(folder, allow_writes=True) as source:
        outcome = source.forget(record_id(8), reason="leaked secret", operator="ana")
        assert outcome.verified, outcome.problem
        assert outcome.checks["storage.sqlite_bytes_gone"] is True
        assert source.get(record_id(8)) is None
        assert source.get(record_id(11)).content == text
    assert storage.read_bytes().count(b"zqxjvortex") == 1


def test_forget_from_the_cli_and_read_only_refusal(folder):
    runner = CliRunner()
    line = one_error_line(
        runner.invoke(main, ["forget", str(folder), record_id(1), "--reason", "r", "--yes"])
    )
    assert "pass --allow-writes to change it" in line
    result = runner.invoke(
        main,
        ["forget", str(folder), record_id(1), "--reason", "r", "--yes", "--allow-writes"],
    )
    assert result.exit_code == 0, result.output
    assert "erasure verified (audit events #1 intent, #2 outcome)" in result.output
    audit = runner.invoke(main, ["audit", "verify", str(folder)])
    assert "audit chain verified: 2 events" in audit.output


# ---------------------------------------------------------------- a server through qdrant-client


@pytest.fixture
def server():
    """An in-process qdrant-client (":memory:"): the same client API a server answers."""
    from fixtures.qdrant_support import CYBER_MEMORIES
    from qdrant_client import QdrantClient, models

    client = QdrantClient(":memory:")
    client.create_collection(
        "cyber_autoagent_memories",
        vectors_config=models.VectorParams(size=DIMS, distance=models.Distance.COSINE),
    )
    embed = HashEmbedder(8)
    client.upsert(
        "cyber_autoagent_memories",
        [
            models.PointStruct(
                id=pid(item["n"]),
                vector=embed.embed_one(item["payload"]["memory"]),
                payload=item["payload"],
            )
            for item in CYBER_MEMORIES
        ],
    )
    yield client
    client.close()


def test_a_server_reads_searches_and_forgets_through_the_client(server, tmp_path):
    audit = tmp_path / "server-audit.db"
    with open_source(
        None, qdrant_client=server, clock=fixed_clock, allow_writes=True, audit_db=audit
    ) as source:
        assert source.is_server and isinstance(source, CyberAutoAgentSource)
        assert (
            source.label
            == "cyber_autoagent_memories @ :memory: (Cyber-AutoAgent memories (Qdrant))"
        )
        assert len(source.page().records) == 9
        assert source.get(record_id(6)).state == "inactive"
        found = source.search("sql injection", embedder=HashEmbedder(8))
        assert found.results[0].id == record_id(2) and found.trace.fallback is None
        outcome = source.forget(record_id(2), reason="false positive", operator="ana")
        assert outcome.verified and outcome.checks == {"point_gone": True, "cache_gone": True}
        events = source.audit_events()
        assert [e["action"] for e in events] == ["forget", "forget-intent"]
        assert "not byte-checked" in events[0]["details"]["server_storage"]
        assert source.get(record_id(2)) is None
    assert server.retrieve("cyber_autoagent_memories", [pid(2)]) == []
    assert server.count("cyber_autoagent_memories").count == 9


def test_the_cli_opens_a_server_with_qdrant_url(server, tmp_path, monkeypatch):
    seen = {}

    def fake_client(url, api_key, timeout=None):
        seen.update(url=url, api_key=api_key)
        return server

    monkeypatch.setattr("memtui.sources.qdrant.opening.make_client", fake_client)
    monkeypatch.setattr(server, "close", lambda **kw: None)  # the fixture closes it
    url = "http://qdrant.test:6333"
    runner = CliRunner()
    result = runner.invoke(
        main, ["records", "--qdrant-url", url, "--api-key", "k3y", "--all", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.output)) == 10
    assert seen == {"url": url, "api_key": "k3y"}
    result = runner.invoke(main, ["search", "sql injection", "--qdrant-url", url, "--json"])
    assert json.loads(result.stdout)["results"][0]["id"] == record_id(2)
    result = runner.invoke(
        main,
        [
            "forget",
            record_id(5),
            "--qdrant-url",
            url,
            "--reason",
            "r",
            "--yes",
            "--allow-writes",
            "--audit-db",
            str(tmp_path / "a.db"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "erasure verified" in result.output
    assert server.retrieve("cyber_autoagent_memories", [pid(5)]) == []
    audit = runner.invoke(
        main, ["audit", "--qdrant-url", url, "--audit-db", str(tmp_path / "a.db"), "--json"]
    )
    assert [e["action"] for e in json.loads(audit.output)] == ["forget", "forget-intent"]
    line = one_error_line(runner.invoke(main, ["records"]))
    assert "give a store PATH (or --qdrant-url URL" in line
    line = one_error_line(runner.invoke(main, ["records", str(tmp_path), "--qdrant-url", url]))
    assert "not both" in line
    assert "k3y" not in json.dumps(json.loads(audit.output))


async def test_the_app_says_the_agent_is_live_and_refuses_to_forget(folder, live_agent):
    from memtui.tui.app import make_app
    from memtui.tui.dialogs import ConfirmRecordAction
    from memtui.tui.testing import screen_text, settle

    before = tree_bytes(folder)
    with opened(folder, allow_writes=True) as source:
        app = make_app(source, poll_interval=None)
        async with app.run_test(size=(140, 45)) as pilot:
            await settle(pilot)
            assert "the agent is live: read-only" in screen_text(app)
            await pilot.press("f")
            await settle(pilot)
            assert not isinstance(app.screen, ConfirmRecordAction)
            messages = " ".join(str(n.message) for n in app._notifications)
            assert "the agent is live" in messages
    assert tree_bytes(folder) == before
    assert live_agent.poll() is None
