"""LangGraph stores written by the real langgraph-checkpoint-sqlite (the ``test`` extra),
built here rather than committed: a change in the library's format breaks these tests.

The vector half needs SQLite extension loading (LangGraph loads sqlite-vec); a Python
built without it skips that test and says so.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from langgraph.store.sqlite import SqliteStore

from memtui.core.embed import HashEmbedder
from memtui.sources import open_source
from memtui.sources.base import decode_id, encode_id
from memtui.sources.langgraph import LangGraphSource

# Labels may hold anything but "." and NUL (LangGraph refuses those); keys anything.
ODD_NAMESPACE = ("memories", "user 1/ä:%", "notes")
ODD_KEY = "trip/2026:paris 100% ✓"
ODD_VALUE = {"text": "Café crème at the Louvre", "tags": ["travel", "europe"], "n": 3}

CAN_LOAD_EXTENSIONS = hasattr(sqlite3.Connection, "enable_load_extension")


def connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)


def build(path: Path) -> tuple[sqlite3.Connection, SqliteStore]:
    """A store written by the library: an odd namespace and key, and TTL items."""
    conn = connect(path)
    store = SqliteStore(conn)
    store.setup()
    store.put(ODD_NAMESPACE, ODD_KEY, ODD_VALUE)
    store.put(("memories", "user-2"), "plain", {"text": "User two works on payroll"})
    store.put(("profile",), "main", {"name": "Ada", "bio": "Writes compilers"})
    store.put(("scratch",), "later", {"text": "scratch note with a long life"}, ttl=60)
    store.put(("scratch",), "past", {"text": "scratch note a second old"}, ttl=-1 / 60)
    return conn, store


def lg_id(namespace: tuple[str, ...], key: str) -> str:
    return encode_id("lg", ".".join(namespace), key)


def test_a_store_written_by_the_library_opens_with_its_records(tmp_path):
    path = tmp_path / "agent.sqlite"
    conn, store = build(path)
    conn.close()
    with open_source(path, now=datetime.now(UTC)) as source:
        assert isinstance(source, LangGraphSource) and source.read_only
        assert "vectors" not in source.capabilities
        record = source.get(lg_id(ODD_NAMESPACE, ODD_KEY))
        assert record is not None
        assert decode_id("lg", record.id, 2) == (".".join(ODD_NAMESPACE), ODD_KEY)
        assert record.tier == "memories"
        assert record.scope == {"namespace": "memories.user 1/ä:%.notes"}
        assert record.metadata["value"] == ODD_VALUE  # orjson bytes read back as JSON
        assert record.metadata["namespace"] == list(ODD_NAMESPACE)
        assert "Café crème at the Louvre" in record.content and "europe" in record.content
        every = {r.id: r for r in source.iter_records(include_hidden=True)}
        assert len(every) == 5
        for record_id, each in every.items():
            assert source.get(record_id) == each  # ids round-trip
        # The namespace filter takes the odd label as it is, segment-aware.
        under = source.page({"namespace": "memories.user 1/ä:%"}).records
        assert [r.id for r in under] == [lg_id(ODD_NAMESPACE, ODD_KEY)]
        assert source.page({"namespace": "memories.user 1"}).records == []
        assert [r.id for r in source.search("louvre").results] == [lg_id(ODD_NAMESPACE, ODD_KEY)]


def test_expiry_agrees_with_the_librarys_own_sweep(tmp_path):
    """memtui's verdict at a moment is the library's sweep at that moment; an item put
    with ttl=0 expires at put's own instant, so it is swept only a second later."""
    for _attempt in range(5):
        path = tmp_path / f"sweep-{_attempt}.sqlite"
        conn, store = build(path)
        store.put(("scratch",), "boundary", {"text": "scratch note at its boundary"}, ttl=0)
        before = tmp_path / f"before-{_attempt}.sqlite"
        shutil.copyfile(path, before)
        start = datetime.now(UTC)
        swept = store.sweep_ttl()  # DELETE ... WHERE expires_at < CURRENT_TIMESTAMP
        end = datetime.now(UTC)
        left = {r[0] for r in conn.execute("SELECT key FROM store WHERE prefix = 'scratch'")}
        expires = dict(conn.execute("SELECT key, expires_at FROM store"))
        conn.close()
        if start.replace(microsecond=0) == end.replace(microsecond=0) and "boundary" in left:
            break  # the sweep ran in the boundary item's own second
    else:
        pytest.skip("the clock kept crossing a second boundary during the sweep")
    assert swept == 1 and left == {"later", "boundary"}
    assert expires["boundary"].endswith("+00:00") and expires["boundary"][10] == " "  # put's form
    with open_source(before, now=start) as source:
        states = {
            r.metadata["key"]: r.state
            for r in source.iter_records({"namespace": "scratch"}, include_hidden=True)
        }
        assert states == {"later": "live", "past": "expired", "boundary": "live"}
        listed = {r.metadata["key"] for r in source.page({"namespace": "scratch"}).records}
        assert listed == left  # what the sweep kept is what memtui lists
        found = {source.get(r.id).metadata["key"] for r in source.search("scratch note").results}
        assert found == left
    # A second after the boundary item's second, the sweep's rule expires it.
    second = datetime.strptime(expires["boundary"][:19], "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    with open_source(before, now=second + timedelta(seconds=1)) as source:
        assert source.get(lg_id(("scratch",), "boundary")).state == "expired"


def test_forget_round_trip_the_library_reads_the_store_after(tmp_path):
    path = tmp_path / "agent.sqlite"
    conn, _store = build(path)
    conn.close()
    target = lg_id(ODD_NAMESPACE, ODD_KEY)
    with open_source(path, now=datetime.now(UTC), allow_writes=True, operator="ana") as source:
        outcome = source.forget(target, reason="the user asked")
        assert outcome.verified, outcome.problem
        assert outcome.checks["bytes_gone"] and outcome.checks["row_gone"]
        assert source.get(target) is None
        assert source.search("louvre").results == []
        event = source.audit_events()[0]
        assert event["action"] == "forget" and event["record_ids"] == [target]
        assert "Louvre" not in json.dumps(event)
    assert b"Louvre" not in path.read_bytes()
    # The library opens the vacuumed file and sees the rest, not the forgotten item.
    conn = connect(path)
    store = SqliteStore(conn)
    store.setup()
    assert store.get(ODD_NAMESPACE, ODD_KEY) is None
    assert store.get(("memories", "user-2"), "plain").value == {"text": "User two works on payroll"}
    assert {i.key for i in store.search(("memories",))} == {"plain"}
    conn.close()


@pytest.mark.skipif(
    not CAN_LOAD_EXTENSIONS,
    reason="this Python's sqlite3 cannot load extensions (no enable_load_extension), "
    "and LangGraph's vector index loads sqlite-vec",
)
def test_a_vector_store_written_by_the_library(tmp_path):
    path = tmp_path / "vectors.sqlite"
    conn = connect(path)
    store = SqliteStore(conn, index={"dims": 8, "embed": HashEmbedder(8), "fields": ["text"]})
    store.setup()
    store.put(ODD_NAMESPACE, ODD_KEY, ODD_VALUE)
    store.put(("memories", "user-2"), "gone", {"text": "deleted by langgraph itself"})
    store.delete(("memories", "user-2"), "gone")  # leaves its embedding behind
    conn.close()
    with open_source(path, now=datetime.now(UTC)) as source:
        assert "vectors" in source.capabilities and source.vector_dim() == 8
        assert source.summary().counts["orphaned_vectors"] == 1
        hit = source.search("Café crème at the Louvre", embedder=HashEmbedder(8))
        assert hit.trace.embedder == "hash-8"
        assert hit.results[0].id == lg_id(ODD_NAMESPACE, ODD_KEY)
        assert hit.results[0].trace.vector.raw is not None
    with open_source(path, now=datetime.now(UTC), allow_writes=True) as source:
        gaps = source.forget_gaps(reason="clear the erasure gap")
        assert gaps.verified and source.summary().counts["orphaned_vectors"] == 0
        assert source.forget(lg_id(ODD_NAMESPACE, ODD_KEY), reason="asked").verified
        assert source.query("SELECT count(*) FROM store_vectors")[0][0] == 0
