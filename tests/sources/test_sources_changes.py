"""The change pipeline the app and the CLI share (``memtui.sources.changes``), and the
capability protocols it asks: busy retries, a try that got through before the busy
error, a replaced file, and the refusals."""

from __future__ import annotations

import sqlite3

import pytest
from conftest import fixed_clock
from fixtures.sources_support import LANGGRAPH_VECTORS, copy_fixture

from memtui.core.store import MemoryStore, MemoryStoreError
from memtui.sources import SourceError, open_source
from memtui.sources.capabilities import (
    Forgettable,
    HasLanes,
    Refutable,
    Revealable,
    ScopeForgettable,
    able,
    lanes_refusal,
)
from memtui.sources.changes import (
    Change,
    NotSaved,
    Saved,
    apply_change,
    is_busy,
    save_change,
    scope_plan,
)
from memtui.sources.native import NativeSource
from memtui.sources.outcome import ForgetOutcome


@pytest.fixture
def native(tmp_path):
    path = tmp_path / "memory.db"
    with MemoryStore(path, clock=fixed_clock, operator="tester") as store:
        store.ingest(
            [
                {"tier": "knowledge", "record_type": "note", "content": "first note"},
                {
                    "tier": "episodic",
                    "record_type": "finding",
                    "content": "a finding",
                    "engagement": "acme",
                    "metadata": {"session_cookie": "s3cr3t"},
                },
                {
                    "tier": "episodic",
                    "record_type": "finding",
                    "content": "another finding",
                    "engagement": "acme",
                },
            ]
        )
    with open_source(path, clock=fixed_clock) as source:
        yield source


def test_a_memtui_database_implements_every_write_and_the_lanes(native):
    for protocol in (Forgettable, ScopeForgettable, Refutable, Revealable, HasLanes):
        assert isinstance(native, protocol)
    assert able(native, "refute") is native


def test_a_foreign_store_refuses_what_it_cannot_do_in_the_operators_words(tmp_path):
    path = copy_fixture(LANGGRAPH_VECTORS, tmp_path)
    with open_source(path, clock=fixed_clock) as source:
        assert not isinstance(source, Refutable)
        assert isinstance(source, ScopeForgettable)
        with pytest.raises(SourceError, match="refute is not supported by LangGraph"):
            able(source, "refute")
        with pytest.raises(SourceError, match="open read-only"):
            able(source, "forget")
        with pytest.raises(SourceError, match="need a memtui database: this is a LangGraph"):
            able(source, "lanes")


def test_a_forget_and_a_scope_forget_return_the_same_outcome(native):
    one = apply_change(native, Change("forget", "1", "wrong profile", "ana"))
    assert isinstance(one.outcome, ForgetOutcome) and one.outcome.record_id == "1"
    assert one.outcome.verified and int(one.outcome) == 1
    assert one.record is not None and one.record.content == "first note"
    assert one.event_id == one.outcome.event_id == native.audit_head()["id"]
    assert one.outcome.report("record #1") == (
        f"forgot record #1: erasure verified (audit event #{one.event_id})"
    )
    radius, rule = scope_plan(native, ("engagement", "acme"))
    assert radius == {"episodic": {"finding": 2}} and "engagement" in rule
    scope = apply_change(native, Change("forget-scope", ("engagement", "acme"), "ended"))
    assert isinstance(scope.outcome, ForgetOutcome) and scope.outcome.scope == (
        "engagement",
        "acme",
    )
    assert scope.outcome.forgotten == 2 and scope.outcome.verified
    assert scope.outcome.to_dict()["forgotten"] == 2
    assert native.audit_events(limit=1)[0]["action"] == "forget-scope"


def test_a_reveal_names_its_audit_event(native):
    saved = apply_change(native, Change("reveal", ("2", "session_cookie"), "support ticket"))
    assert saved.value == "s3cr3t"
    event = native.audit_events(limit=1)[0]
    assert event["action"] == "reveal" and saved.event_id == event["id"]


def test_a_busy_database_is_tried_again_and_then_given_up(native, monkeypatch):
    tries: list[int] = []

    def busy(*args, **kwargs):
        tries.append(1)
        raise MemoryStoreError("database is locked")

    monkeypatch.setattr(native, "forget", busy)
    told: list[tuple[int, int, float]] = []
    pauses: list[float] = []
    result = save_change(
        native,
        Change("forget", "1", "r"),
        retries=3,
        delay=0.5,
        on_busy=lambda *args: told.append(args),
        sleep=pauses.append,
    )
    assert isinstance(result, NotSaved) and result.tries == 4 and result.moved is None
    assert len(tries) == 4
    assert told == [(1, 3, 0.5), (2, 3, 1.0), (3, 3, 2.0)] and pauses == [0.5, 1.0, 2.0]


def test_a_retry_finds_a_change_that_got_through_before_the_busy_error(native, monkeypatch):
    real_forget = native.forget

    def forgets_then_busy(record_id, **kwargs):
        real_forget(record_id, **kwargs)
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(native, "forget", forgets_then_busy)
    result = save_change(
        native, Change("forget", "1", "r"), retries=2, delay=0, sleep=lambda _: None
    )
    assert isinstance(result, Saved) and result.already and result.outcome is None
    assert result.event_id == native.audit_events(limit=1)[0]["id"]
    assert native.get("1") is None


def test_other_errors_are_not_retried(native):
    with pytest.raises(SourceError, match="no record with id 99"):
        save_change(native, Change("forget", "99", "r"), retries=3, delay=0, sleep=lambda _: None)
    assert is_busy(MemoryStoreError("database is busy")) and not is_busy("no such record")


def test_a_replaced_file_is_refused_before_anything_changes(native, monkeypatch):
    monkeypatch.setattr(NativeSource, "path_changed", lambda self: "x.db was replaced")
    result = save_change(native, Change("forget", "1", "r"), retries=2, delay=0)
    assert isinstance(result, NotSaved) and result.moved == "x.db was replaced"
    assert native.get("1") is not None


def test_the_lanes_refusal_names_the_store_with_its_article():
    assert lanes_refusal("explicit-preference store").endswith(
        "this is an explicit-preference store"
    )
    assert lanes_refusal("LangGraph SqliteStore").endswith("this is a LangGraph SqliteStore")
