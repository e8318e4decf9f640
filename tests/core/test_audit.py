import sqlite3

import pytest

from memtui.core.store import MemoryStore

PROFILE = "php:mysql:no_waf:none:html:laravel"


def _three_events(store):
    a = store.record_success(profile_hash=PROFILE, tool="sqlmap", endpoint="/a", param="x")
    b = store.record_success(profile_hash=PROFILE, tool="ffuf", endpoint="/b", param="y")
    note = store.add_record(tier="working", record_type="note", content="scratch")
    store.refute(a, reason="first", operator="ana")
    store.refute(b, reason="second", operator="ana")
    store.forget(note, reason="third", operator="ana")


def test_chain_holds_and_links_each_event_to_the_previous(store):
    _three_events(store)
    events = list(reversed(store.audit_events()))
    assert [e["action"] for e in events] == ["refute", "refute", "forget"]
    assert events[0]["prev_hash"] == "0" * 64
    assert events[1]["prev_hash"] == events[0]["hash"]
    assert events[2]["prev_hash"] == events[1]["hash"]
    assert store.verify_audit() is None


def test_audit_log_is_append_only(store):
    _three_events(store)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        store.connection.execute("UPDATE audit_events SET reason = 'x' WHERE id = 1")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        store.connection.execute("DELETE FROM audit_events WHERE id = 1")


def _tamper(path, sql):
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER audit_events_no_update")
    conn.execute("DROP TRIGGER audit_events_no_delete")
    conn.execute(sql)
    conn.commit()
    conn.close()


def test_verify_names_an_edited_event(db_path, clock):
    with MemoryStore(db_path, clock=clock) as st:
        _three_events(st)
    _tamper(db_path, "UPDATE audit_events SET reason = 'nothing to see' WHERE id = 2")
    with MemoryStore(db_path, clock=clock, read_only=True) as st:
        assert st.verify_audit() == "event #2: its contents do not match its hash (edited)"


def test_verify_names_the_link_after_a_removed_event(db_path, clock):
    with MemoryStore(db_path, clock=clock) as st:
        _three_events(st)
    _tamper(db_path, "DELETE FROM audit_events WHERE id = 2")
    with MemoryStore(db_path, clock=clock, read_only=True) as st:
        problem = st.verify_audit()
    assert problem.startswith("event #3: its prev_hash does not match event #1")


def test_a_rehashed_edit_still_breaks_the_next_link(db_path, clock):
    with MemoryStore(db_path, clock=clock) as st:
        _three_events(st)
    _tamper(
        db_path, "UPDATE audit_events SET reason = 'x', hash = 'f' || substr(hash, 2) WHERE id = 1"
    )
    with MemoryStore(db_path, clock=clock, read_only=True) as st:
        assert st.verify_audit().startswith("event #1")


def test_operator_falls_back_to_environment_then_os_user(store, monkeypatch):
    rid = store.record_success(profile_hash=PROFILE, tool="t", endpoint="/e", param="p")
    monkeypatch.setenv("MEMTUI_OPERATOR", "from-env")
    plain = MemoryStore(store.path, clock=store.clock)
    plain.refute(rid, reason="r")
    assert plain.audit_events()[0]["operator"] == "from-env"
    plain.close()


def test_ingest_writes_one_summary_event(sample_store):
    events = sample_store.audit_events()
    assert len(events) == 1
    event = events[0]
    assert event["action"] == "ingest" and event["record_ids"] == []
    assert event["details"]["count"] == 72
    assert event["details"]["by_tier"] == {
        "episodic": 31,
        "knowledge": 9,
        "longterm": 18,
        "working": 14,
    }
