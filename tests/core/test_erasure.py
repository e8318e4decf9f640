"""Forget means gone: the forgotten words are not in the database's bytes."""

import sqlite3
from pathlib import Path

import pytest
from conftest import fixed_clock

from memtui.core.embed import HashEmbedder
from memtui.core.store import MemoryStore, MemoryStoreError

CANARY = "zqxjvortex"  # a rare prefix, so FTS5's prefix compression keeps it findable
CANARY2 = "qwphlumbix"


def file_bytes(path: Path) -> bytes:
    data = b""
    for suffix in ("", "-wal"):
        part = Path(str(path) + suffix)
        if part.exists():
            data += part.read_bytes()
    return data


def occurrences(path: Path, word: str) -> dict[str, int]:
    """Counts of the whole word and of its tail (the index may keep only a suffix)."""
    data = file_bytes(path)
    return {"word": data.count(word.encode()), "tail": data.count(word[3:].encode())}


def _populate(store: MemoryStore, n: int = 300) -> None:
    for i in range(n):
        store.add_record(
            tier="episodic",
            record_type="observation",
            content=f"observation {i} about host {i % 17} with banner nginx {i % 5}",
            engagement="acme" if i % 2 else "globex",
        )


def test_forget_leaves_no_copy_in_file_or_wal(db_path):
    with MemoryStore(db_path, clock=fixed_clock, embedder=HashEmbedder()) as store:
        _populate(store)
        target = store.add_record(
            tier="working",
            record_type="note",
            content=f"the password reset token leaks via {CANARY} header",
            metadata={"note": f"seen {CANARY} twice"},
            engagement="acme",
        )
        _populate(store, 50)
        before = occurrences(db_path, CANARY)
        assert before["word"] >= 1 and before["tail"] >= 2, "the test must see the word first"
        assert store.forget(target, reason="leaked secret", operator="ana") is True
        assert occurrences(db_path, CANARY) == {"word": 0, "tail": 0}
        assert store.get(target) is None
        assert store.vector_of(target) is None
        hits = store.query("SELECT rowid FROM records_fts WHERE records_fts MATCH ?", (CANARY,))
        assert hits == []
        event = store.audit_events()[0]
        assert event["action"] == "forget"
        assert event["details"]["erasure"] == {
            "index_gone": True,
            "row_gone": True,
            "vector_gone": True,
        }
        assert CANARY not in repr(event)
    assert occurrences(db_path, CANARY) == {"word": 0, "tail": 0}


def test_forget_scope_erases_every_record_of_the_engagement(db_path):
    with MemoryStore(db_path, clock=fixed_clock) as store:
        _populate(store)
        store.record_success(
            profile_hash="a:b:c", tool="sqlmap", endpoint="/x", param="q", content="tactic stays"
        )
        for i in range(5):
            store.add_record(
                tier="episodic",
                record_type="observation",
                content=f"{CANARY2} marker {i}",
                engagement="doomed",
            )
        assert occurrences(db_path, CANARY2)["word"] >= 1
        total = store.record_count()
        assert store.forget_scope(engagement="doomed", reason="contract ended") == 5
        assert store.record_count() == total - 5
        assert store.fetch(engagement="doomed", include_expired=True, include_refuted=True) == []
        assert len(store.fetch(record_type="tactic")) == 1
        assert occurrences(db_path, CANARY2) == {"word": 0, "tail": 0}
        events = store.audit_events()
        assert len(events) == 1 and events[0]["action"] == "forget-scope"
        assert events[0]["details"]["count"] == 5 and len(events[0]["record_ids"]) == 5
    assert occurrences(db_path, CANARY2) == {"word": 0, "tail": 0}


def _cache_bytes(folder: Path) -> list[tuple[str, bytes]]:
    return [(p.name, p.read_bytes()) for p in sorted(folder.rglob("*")) if p.is_file()]


@pytest.mark.parametrize("scope", [False, True])
def test_forget_leaves_no_copy_of_the_vectors_in_the_cache(db_path, tmp_path, monkeypatch, scope):
    """The cache files stay (no rebuild) but hold none of the forgotten vectors' bytes."""
    import os

    import numpy as np

    from memtui.core import vector_cache
    from memtui.core.search import hybrid_search
    from memtui.core.store import pack_vector

    cache = tmp_path / "cache"
    monkeypatch.setenv(vector_cache.CACHE_DIR_ENV, str(cache))
    monkeypatch.setattr(vector_cache, "FILE_CACHE_MIN_VECTORS", 0)
    with MemoryStore(db_path, clock=fixed_clock, embedder=HashEmbedder()) as store:
        _populate(store, 60)
        doomed = [
            store.add_record(
                tier="working",
                record_type="note",
                content=f"{CANARY} secret {i} {CANARY2}",
                engagement="doomed",
            )
            for i in range(1 if not scope else 6)
        ]
        _populate(store, 20)
        hybrid_search(store, CANARY)
        vector_cache.wait_for_writes()
        matrix = next(cache.rglob("*.f32.npy"))
        os.link(matrix, tmp_path / "blocks.npy")  # the blocks of the file the cache maps
        payloads = [pack_vector(store.vector_of(i)) for i in doomed]
        assert all(any(p in data for _, data in _cache_bytes(cache)) for p in payloads)
        assert all(p in (tmp_path / "blocks.npy").read_bytes() for p in payloads)
        if scope:
            assert store.forget_scope(engagement="doomed", reason="contract ended") == 6
        else:
            assert store.forget(doomed[0], reason="leaked secret") is True
        erasure = store.audit_events()[0]["details"]["erasure"]
        assert erasure["vector_cache_erased"] is True
        assert all(erasure.values())
        for payload in payloads:
            assert [name for name, data in _cache_bytes(cache) if payload in data] == []
            assert payload not in (tmp_path / "blocks.npy").read_bytes()
        assert matrix.exists()  # kept: the next search maps it, without the rows
        cached = vector_cache.load(store)
        assert set(doomed).isdisjoint(cached.live_ids().tolist())
        assert not np.asarray(cached.matrix)[cached.removed].any()
        assert set(doomed).isdisjoint(r.record_id for r in hybrid_search(store, CANARY).candidates)


def test_without_the_purge_the_word_would_survive(db_path):
    """The byte check can fail: a DELETE without secure_delete leaves the word behind."""
    with MemoryStore(db_path, clock=fixed_clock) as store:
        _populate(store)
        target = store.add_record(tier="working", record_type="note", content=f"a {CANARY} b")
    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA secure_delete = OFF")
    conn.execute("DELETE FROM records WHERE id = ?", (target,))
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    assert occurrences(db_path, CANARY)["tail"] >= 1


def test_forget_reports_unverified_when_a_reader_pins_the_wal(db_path, monkeypatch):
    from memtui.core import index_db

    monkeypatch.setattr(index_db, "CHECKPOINT_RETRIES", 2)
    monkeypatch.setattr(index_db, "CHECKPOINT_RETRY_DELAY", 0.001)
    with MemoryStore(db_path, clock=fixed_clock) as store:
        _populate(store, 20)
        target = store.add_record(tier="working", record_type="note", content=f"x {CANARY}")
        reader = sqlite3.connect(db_path)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM records").fetchone()
        try:
            assert store.forget(target, reason="r") is False
        finally:
            reader.rollback()
            reader.close()
        actions = [e["action"] for e in store.audit_events()]
        assert actions == ["erasure-incomplete", "forget"]
        assert store.audit_events()[0]["details"]["problem"].startswith("another connection")
        assert store.checkpoint() is True
    assert occurrences(db_path, CANARY) == {"word": 0, "tail": 0}


def test_forgetting_a_missing_id_is_an_error_and_writes_nothing(store):
    with pytest.raises(MemoryStoreError, match="no record with id 42"):
        store.forget(42, reason="x")
    with pytest.raises(MemoryStoreError, match="has no records"):
        store.forget_scope(engagement="nobody", reason="x")
    with pytest.raises(MemoryStoreError, match="reason is required"):
        store.forget(1, reason="")
    assert store.audit_events() == []


def test_forget_scope_reports_unverified_when_a_reader_pins_the_wal(db_path, monkeypatch):
    from memtui.core import index_db

    monkeypatch.setattr(index_db, "CHECKPOINT_RETRIES", 2)
    monkeypatch.setattr(index_db, "CHECKPOINT_RETRY_DELAY", 0.001)
    with MemoryStore(db_path, clock=fixed_clock) as store:
        _populate(store, 20)
        reader = sqlite3.connect(db_path)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM records").fetchone()
        try:
            result = store.forget_scope(engagement="acme", reason="contract ended")
        finally:
            reader.rollback()
            reader.close()
        events = store.audit_events()
        assert [e["action"] for e in events] == ["erasure-incomplete", "forget-scope"]
        # Still the count (the API), and it says what did not happen.
        assert result == 10 and int(result) == 10 and result + 0 == 10
        assert result.verified is False
        assert result.problem.startswith("another connection holds a read transaction")
        assert result.event_id == events[1]["id"]
        assert result.incomplete_event_id == events[0]["id"]
        assert events[0]["details"]["forget_event"] == result.event_id
        assert result.checks == events[1]["details"]["erasure"]
        assert store.checkpoint() is True
        done = store.forget_scope(engagement="globex", reason="contract ended")
        assert done == 10 and done.verified is True and done.problem is None
        assert done.incomplete_event_id is None
        assert done.event_id == store.audit_events()[0]["id"]
        # The event says which engagement went (the scope's name, not a record's value).
        assert store.audit_events()[0]["details"]["scope"] == {
            "engagement": "globex",
            "engagement_records": 10,
        }


def _add_copying_trigger(path: Path) -> None:
    """What a hostile store can hold: a table and trigger of its own that keep every
    deleted record's text."""
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE kept (content TEXT);"
        "CREATE TRIGGER keep_on_delete AFTER DELETE ON records BEGIN "
        "INSERT INTO kept VALUES (old.content); END;"
    )
    conn.close()


def test_a_trigger_that_copies_on_delete_makes_forget_unverified(db_path):
    """The whole file is read after the checkpoint: a copy in a table memtui did not
    create is found, and the forget says it is not verified (audited, no text quoted)."""
    with MemoryStore(db_path, clock=fixed_clock) as store:
        _populate(store, 20)
        target = store.add_record(
            tier="working", record_type="note", content=f"{CANARY} rides the copy"
        )
    _add_copying_trigger(db_path)
    with MemoryStore(db_path, clock=fixed_clock) as store:
        assert store.forget(target, reason="leaked") is False
        incomplete, forget = store.audit_events()[:2]
        assert (incomplete["action"], forget["action"]) == ("erasure-incomplete", "forget")
        assert incomplete["details"]["check"] == "bytes_gone"
        assert incomplete["details"]["problem"].startswith(
            "a forgotten record's text is still in the database file"
        )
        assert CANARY not in repr(incomplete)
        result = store.forget_scope(engagement="acme", reason="contract ended")
        assert result.verified is False and result.checks["bytes_gone"] is False
        assert "memtui check names it" in result.problem
    assert occurrences(db_path, CANARY)["word"] == 1  # the copy is there: the report is true


def test_text_another_record_still_holds_is_not_a_copy(db_path):
    """Two records with the same text: forgetting one is verified, the other keeps it; so
    is a text memtui's own data holds elsewhere."""
    with MemoryStore(db_path, clock=fixed_clock) as store:
        _populate(store, 20)
        text = f"{CANARY} said twice"
        first = store.add_record(tier="working", record_type="note", content=text)
        second = store.add_record(tier="working", record_type="note", content=text)
        assert store.forget(first, reason="duplicate") is True
        assert store.get(second) is not None
        # Text that memtui's own data holds elsewhere: other records' tier, a record type.
        for text in ("episodic", "observation"):
            other = store.add_record(tier="working", record_type="note", content=text)
            assert store.forget(other, reason="a word memtui also writes") is True
        result = store.forget_scope(engagement="acme", reason="contract ended")
        assert result.verified is True and result.checks["bytes_gone"] is True


def test_the_cli_forget_fails_when_a_trigger_kept_a_copy(db_path):
    from click.testing import CliRunner

    from memtui.cli import main

    with MemoryStore(db_path, clock=fixed_clock) as store:
        target = store.add_record(tier="working", record_type="note", content=f"{CANARY} x y")
    _add_copying_trigger(db_path)
    result = CliRunner().invoke(
        main, ["forget", str(db_path), str(target), "--reason", "r", "--yes"]
    )
    assert result.exit_code != 0
    assert "erasure NOT verified" in result.output and "erasure verified" not in result.output
    assert "still in the database file" in result.output
