import sqlite3
from datetime import timedelta

import pytest
from conftest import NOW, fixed_clock

from memtui.core import store as store_module
from memtui.core.records import format_timestamp, tactic_signature
from memtui.core.store import FILTER_ALLOWLIST, SCHEMA_VERSION, MemoryStore, MemoryStoreError
from memtui.core.store import connection as store_connection

PROFILE = "python:postgresql:waf_present:generic_waf:rest:flask"
TACTIC = dict(profile_hash=PROFILE, tool="sqlmap", endpoint="/api/v2/items/17", param="q")


def test_in_memory_store_works_and_cannot_be_read_only():
    with MemoryStore(clock=fixed_clock) as mem:
        rid = mem.record_success(**TACTIC, proof="delay 5s")
        assert mem.get(rid).tier == "longterm"
    with pytest.raises(MemoryStoreError, match="in-memory"):
        MemoryStore(None, read_only=True)


def test_repeat_success_increments_instead_of_duplicating(store):
    first = store.record_success(**TACTIC)
    again = store.record_success(**{**TACTIC, "endpoint": "/api/v2/items/99"})
    assert first == again
    rows = store.fetch(record_type="tactic")
    assert len(rows) == 1
    meta = rows[0].metadata
    assert (meta["total_successes"], meta["total_attempts"]) == (2, 2)
    assert meta["signature"] == tactic_signature(**{**TACTIC, "profile_hash": PROFILE})
    assert rows[0].url_pattern == "/api/v2/items/*"


def test_tactic_text_defaults_to_tool_endpoint_param_and_technique(store):
    rid = store.record_success(**TACTIC, technique="time-based blind")
    assert store.get(rid).content == "sqlmap /api/v2/items/* param q time-based blind"
    rid2 = store.record_success(**{**TACTIC, "param": "sort"}, content="custom words")
    assert store.get(rid2).content == "custom words"


def test_failure_on_unknown_signature_creates_nothing(store):
    assert store.record_failure(**TACTIC) is None
    assert store.record_count() == 0


def test_failure_counts_attempts_and_lowers_confidence(store):
    rid = store.record_success(**TACTIC)
    before = store.get(rid).metadata["confidence"]
    assert store.record_failure(**TACTIC) == rid
    meta = store.get(rid).metadata
    assert (meta["total_successes"], meta["total_attempts"]) == (1, 2)
    assert meta["success_rate"] == 0.5
    assert meta["confidence"] < before


def test_confidence_is_the_wilson_bound(store):
    rid = store.record_success(**TACTIC)
    assert round(store.get(rid).metadata["confidence"], 6) == 0.206543


def test_grade_moves_up_only(store):
    rid = store.record_success(**TACTIC)
    assert store.get(rid).metadata["evidence_grade"] == "hypothesis"
    store.record_success(**TACTIC, proof="response delayed 5.04 s")
    assert store.get(rid).metadata["evidence_grade"] == "proven"
    store.record_success(**TACTIC)
    store.record_failure(**TACTIC)
    assert store.get(rid).metadata["evidence_grade"] == "proven"


def test_refutation_keeps_the_row_but_hides_it(store):
    rid = store.record_success(**TACTIC, proof="p")
    assert store.record_refuted(**TACTIC, reason="WAF now blocks it") == rid
    assert store.fetch() == []
    kept = store.fetch(include_refuted=True)
    assert [r.id for r in kept] == [rid]
    meta = kept[0].metadata
    assert kept[0].refuted and meta["refuted"] is True
    assert meta["evidence_grade"] == "hypothesis" and meta["confidence"] == 0.0
    assert store.tier_counts()["longterm"] == 0
    assert store.tier_counts(include_refuted=True)["longterm"] == 1


def test_agent_refutation_of_unknown_signature_creates_nothing(store):
    assert store.record_refuted(**TACTIC, reason="x") is None
    assert store.record_count() == 0
    assert store.audit_events() == []


def test_refuted_tactic_refuses_a_new_success_loudly(store):
    rid = store.record_success(**TACTIC)
    store.refute(rid, reason="false positive", operator="ana")
    with pytest.raises(MemoryStoreError, match="refuted"):
        store.record_success(**TACTIC, proof="again")
    assert store.get(rid).metadata["total_successes"] == 1


def test_operator_refute_writes_one_audit_event_without_content(store):
    rid = store.record_success(**TACTIC, content="canarywordxyzzy sql injection")
    event_id = store.refute(rid, reason="WAF blocks it now", operator="ana")
    events = store.audit_events()
    assert [e["id"] for e in events] == [event_id]
    event = events[0]
    assert event["action"] == "refute" and event["operator"] == "ana"
    assert event["record_ids"] == [rid] and event["reason"] == "WAF blocks it now"
    assert event["tier"] == "longterm" and event["record_type"] == "tactic"
    assert event["signature"] == store.get(rid).signature
    assert "canarywordxyzzy" not in repr(event)


def test_refute_refuses_non_tactics_missing_ids_and_repeats(store):
    note = store.add_record(tier="working", record_type="note", content="scratch")
    with pytest.raises(MemoryStoreError, match="not a tactic"):
        store.refute(note, reason="x")
    with pytest.raises(MemoryStoreError, match="no record with id 999"):
        store.refute(999, reason="x")
    rid = store.record_success(**TACTIC)
    store.refute(rid, reason="x")
    with pytest.raises(MemoryStoreError, match="already refuted"):
        store.refute(rid, reason="x")
    with pytest.raises(MemoryStoreError, match="reason is required"):
        store.refute(rid, reason="  ")


def test_expiry_boundary_is_strict_in_reads(db_path):
    moments = {"now": NOW}
    with MemoryStore(db_path, clock=lambda: moments["now"]) as st:
        at_now = st.add_record(tier="working", record_type="note", content="a", expires_at=NOW)
        later = st.add_record(
            tier="working",
            record_type="note",
            content="b",
            expires_at=format_timestamp(NOW + timedelta(seconds=1)),
        )
        forever = st.add_record(tier="working", record_type="note", content="c")
        assert [r.id for r in st.fetch()] == [later, forever]
        assert [r.id for r in st.fetch(include_expired=True)] == [at_now, later, forever]
        moments["now"] = NOW + timedelta(seconds=1)
        assert [r.id for r in st.fetch()] == [forever]


def test_expires_at_accepts_iso_text_and_rejects_garbage(store):
    rid = store.add_record(
        tier="working", record_type="note", content="x", expires_at="2027-01-01T00:00:00+01:00"
    )
    assert store.get(rid).expires_at == "2026-12-31T23:00:00.000000Z"
    with pytest.raises(MemoryStoreError, match="expires_at"):
        store.add_record(tier="working", record_type="note", content="x", expires_at="soon")


def test_filters_restrict_and_unknown_keys_are_refused(store):
    store.add_record(tier="working", record_type="note", content="a", engagement="e1")
    b = store.add_record(tier="working", record_type="note", content="b", engagement="e2")
    assert [r.id for r in store.fetch(engagement="e2")] == [b]
    assert "tier" in FILTER_ALLOWLIST and "hostname" not in FILTER_ALLOWLIST
    with pytest.raises(MemoryStoreError) as info:
        store.fetch(hostname="db01.acme.example")
    assert str(info.value).startswith("filter 'hostname' is not in the scope-key allowlist")


def test_filter_values_are_bound_not_interpolated(store):
    store.add_record(tier="working", record_type="note", content="a", engagement="e1")
    assert store.fetch(engagement="e1' OR '1'='1") == []
    assert len(store.fetch(engagement="e1")) == 1


def test_keyset_paging_walks_every_record_once(store):
    ids = [
        store.add_record(tier="knowledge", record_type="reference", content=f"r{i}")
        for i in range(7)
    ]
    seen, after = [], None
    while True:
        page = store.fetch(tier="knowledge", limit=3, after_id=after)
        if not page:
            break
        seen += [r.id for r in page]
        after = page[-1].id
    assert seen == ids


def test_counts_by_tier_and_scope_come_from_sql(sample_store):
    counts = sample_store.tier_counts()
    assert set(counts) == {"working", "episodic", "longterm", "knowledge"}
    everything = sample_store.tier_counts(include_refuted=True, include_expired=True)
    assert sum(everything.values()) == sample_store.record_count() == 72
    assert everything["longterm"] - counts["longterm"] == 1
    scopes = sample_store.scope_counts("episodic")
    assert set(scopes["engagement"]) == {"acme-2026-q4", "globex-retest", "vandelay-soap"}
    assert sum(scopes["engagement"].values()) == counts["episodic"]
    with pytest.raises(MemoryStoreError, match="unknown tier"):
        sample_store.scope_counts("hot")


def test_findings_are_episodic_with_title_as_content_and_dedup_by_id(store):
    fid = store.record_finding(
        finding_id="F-1",
        run_id="r1",
        engagement="acme",
        severity="high",
        title="SQL injection in items API",
        url="https://shop.acme.example/api/v2/items/17?q=1",
        type="sqli",
    )
    record = store.get(fid)
    assert (record.tier, record.record_type, record.content) == (
        "episodic",
        "finding",
        "SQL injection in items API",
    )
    assert record.url_pattern == "/api/v2/items/*"
    again = store.record_finding(
        finding_id="F-1",
        run_id="r2",
        engagement="acme",
        severity="critical",
        title="SQL injection in items API (confirmed)",
        url="https://shop.acme.example/api/v2/items/17",
        type="sqli",
    )
    assert again == fid and store.record_count() == 1
    assert store.get(fid).metadata["severity"] == "critical"
    with pytest.raises(MemoryStoreError, match="severity"):
        store.record_finding(
            finding_id="F-2",
            run_id="r",
            engagement="e",
            severity="urgent",
            title="t",
            url="u",
            type="x",
        )


def test_read_only_refuses_every_mutation(db_path):
    with MemoryStore(db_path, clock=fixed_clock) as writer:
        rid = writer.record_success(**TACTIC)
    size = db_path.stat().st_size
    with MemoryStore(db_path, read_only=True, clock=fixed_clock) as ro:
        assert ro.get(rid) is not None
        for mutate in (
            lambda: ro.record_success(**TACTIC),
            lambda: ro.record_failure(**TACTIC),
            lambda: ro.refute(rid, reason="x"),
            lambda: ro.forget(rid, reason="x"),
            lambda: ro.forget_scope(engagement="e", reason="x"),
            lambda: ro.add_record(tier="working", record_type="note", content="x"),
        ):
            with pytest.raises(MemoryStoreError, match="read-only"):
                mutate()
    assert db_path.stat().st_size == size


def test_read_only_open_of_a_missing_file_is_an_error_not_a_new_file(tmp_path):
    missing = tmp_path / "nope.db"
    with pytest.raises(MemoryStoreError, match="no database at"):
        MemoryStore(missing, read_only=True)
    assert not missing.exists()


def test_a_file_that_is_not_sqlite_is_refused(tmp_path):
    bogus = tmp_path / "notes.db"
    bogus.write_text("this is a text file, not a database\n")
    with pytest.raises(MemoryStoreError, match="is not a SQLite database"):
        MemoryStore(bogus)
    assert bogus.read_text() == "this is a text file, not a database\n"


def test_a_foreign_sqlite_database_is_refused_with_its_tables(tmp_path):
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE passages (id TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(MemoryStoreError, match=r"not a memtui one \(tables: passages\)"):
        MemoryStore(other)


def test_a_newer_schema_is_refused_untouched(db_path):
    MemoryStore(db_path).close()
    conn = sqlite3.connect(db_path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    with pytest.raises(MemoryStoreError, match="newer memtui"):
        MemoryStore(db_path)
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1
    conn.close()


def test_schema_version_is_recorded(db_path):
    MemoryStore(db_path).close()
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_sqlite_without_fts5_fails_clearly_and_creates_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(store_connection, "fts5_available", lambda: False)
    path = tmp_path / "new.db"
    with pytest.raises(MemoryStoreError, match="without FTS5"):
        MemoryStore(path)
    assert not path.exists()


def test_fts5_probe_reports_this_interpreter():
    assert store_module.fts5_available() is True


def test_the_store_speaks_the_search_index_protocol_and_shares_its_lock(store):
    """What the search engine calls on a database (``SearchIndex``), with the public lock
    that every statement on the main connection holds."""
    import threading

    from memtui.core.index import SearchIndex

    assert isinstance(store, SearchIndex)
    held = threading.Event()
    with store.lock:  # reentrant: a read under it still runs
        assert store.record_count() == 0

        def read_elsewhere() -> None:
            store.record_count()
            held.set()

        other = threading.Thread(target=read_elsewhere)
        other.start()
        assert not held.wait(0.2)  # another thread's read waits for the lock
    other.join(5)
    assert held.is_set()


def test_index_stays_in_step_with_writes(store):
    rid = store.add_record(tier="working", record_type="note", content="alpha bravo")
    found = store.query("SELECT rowid FROM records_fts WHERE records_fts MATCH 'bravo'")
    assert [r[0] for r in found] == [rid]
    store.record_finding(
        finding_id="F",
        run_id="r",
        engagement="e",
        severity="low",
        title="charlie",
        url="/",
        type="t",
    )
    store.record_finding(
        finding_id="F", run_id="r", engagement="e", severity="low", title="delta", url="/", type="t"
    )
    assert store.query("SELECT rowid FROM records_fts WHERE records_fts MATCH 'charlie'") == []
    assert len(store.query("SELECT rowid FROM records_fts WHERE records_fts MATCH 'delta'")) == 1


def test_opening_a_second_store_keeps_the_first_connections_locks(db_path):
    """Closing any Python descriptor of the file would drop SQLite's POSIX locks.

    If that happened, another process closing its connection would delete the
    WAL and shared-memory files under this still-open store.
    """
    import subprocess
    import sys

    with MemoryStore(db_path, clock=fixed_clock) as first:
        first.add_record(tier="working", record_type="note", content="a")
        MemoryStore(db_path, read_only=True, clock=fixed_clock).close()
        other = (
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
            "c.execute('SELECT count(*) FROM records').fetchall(); c.close()"
        )
        subprocess.run([sys.executable, "-c", other, str(db_path)], check=True)
        assert db_path.with_name(db_path.name + "-wal").exists()
        assert db_path.with_name(db_path.name + "-shm").exists()


@pytest.mark.parametrize("hidden", [False, True], ids=["live", "with-hidden"])
def test_scope_facets_equal_tier_and_scope_counts_and_follow_every_write(sample_db, hidden):
    from memtui.core.records import TIERS

    with MemoryStore(sample_db, clock=fixed_clock) as store:
        flags = {"include_refuted": hidden, "include_expired": hidden}
        facets = store.scope_facets(**flags)
        assert {tier: count for tier, (count, _) in facets.items()} == store.tier_counts(**flags)
        for tier in TIERS:
            assert facets[tier][1] == store.scope_counts(tier, **flags)
        assert sum(count for count, _ in facets.values()) > 0
        # The cached totals follow this store's own writes...
        store.add_record(tier="working", record_type="note", content="x", engagement="new-eng")
        assert store.scope_facets(**flags)["working"][1]["engagement"]["new-eng"] == 1
        assert store.tier_counts(**flags)["working"] == facets["working"][0] + 1
        # ...and another process's.
        with MemoryStore(sample_db, clock=fixed_clock) as other:
            other.add_record(tier="episodic", record_type="note", content="y", engagement="far")
        assert store.scope_facets(**flags)["episodic"][1]["engagement"]["far"] == 1
        assert store.tier_counts(**flags)["episodic"] == facets["episodic"][0] + 1


def test_a_derived_value_is_kept_until_the_data_changes(db_path):
    """``derived`` builds once per state of the data: this store's writes and
    another connection's commits each make the next look build again."""
    builds = []

    def count_notes(store):
        builds.append(store.query("SELECT count(*) FROM records")[0][0])
        return builds[-1]

    with MemoryStore(db_path, clock=fixed_clock) as store:
        store.add_record(tier="knowledge", record_type="note", content="first")
        assert [store.derived("notes", count_notes) for _ in range(3)] == [1, 1, 1]
        assert builds == [1]
        store.add_record(tier="knowledge", record_type="note", content="second")
        assert store.derived("notes", count_notes) == 2
        with MemoryStore(db_path, clock=fixed_clock) as other:
            other.add_record(tier="knowledge", record_type="note", content="third")
        assert store.derived("notes", count_notes) == 3
        assert store.derived("notes", count_notes) == 3
        assert builds == [1, 2, 3]
        assert store.derived("other name", lambda s: "apart") == "apart"


SUCCESS_KEYS = dict(
    proof="p",
    content="words",
    technique="t",
    target="shop.acme.example",
    expires_at="2030-01-01T00:00:00Z",
    metadata={"k": 1},
)


def test_failure_and_refutation_take_the_same_keys_as_success(store):
    rid = store.record_success(**TACTIC, **SUCCESS_KEYS)
    assert store.record_failure(**TACTIC, **SUCCESS_KEYS) == rid
    assert store.record_refuted(**TACTIC, **SUCCESS_KEYS, reason="blocked", operator="a") == rid
    meta = store.get(rid).metadata
    assert (meta["total_successes"], meta["total_attempts"]) == (1, 2)


@pytest.mark.parametrize("writer", ["record_failure", "record_refuted"])
def test_failure_and_refutation_refuse_a_misspelled_key(store, writer):
    rid = store.record_success(**TACTIC)
    extra = {"reason": "r"} if writer == "record_refuted" else {}
    with pytest.raises(TypeError, match="hostname"):
        getattr(store, writer)(**TACTIC, **extra, hostname="db01.acme.example")
    record = store.get(rid)
    assert record.metadata["total_attempts"] == 1 and not record.refuted
    assert store.audit_events() == []


def test_a_repeat_success_with_an_expiry_sets_the_tactics_expiry(store):
    rid = store.record_success(**TACTIC, expires_at="2020-01-01T00:00:00Z")
    assert store.fetch() == []  # expired in 2020
    assert store.record_success(**TACTIC) == rid  # no expiry given: it stays expired
    assert store.fetch() == [] and store.get(rid).expires_at == "2020-01-01T00:00:00.000000Z"
    assert store.record_success(**TACTIC, expires_at="2030-01-01T00:00:00Z") == rid
    live = store.fetch()
    assert [r.id for r in live] == [rid]  # the same row, live again, counts carried on
    assert live[0].expires_at == "2030-01-01T00:00:00.000000Z"
    assert live[0].metadata["total_successes"] == 3
    assert store.record_count() == 1
    store.record_success(**TACTIC, expires_at=NOW)  # an explicit earlier expiry applies too
    assert store.fetch() == []


def test_an_unknown_tier_is_refused_not_an_empty_answer(store):
    store.add_record(tier="working", record_type="note", content="x")
    with pytest.raises(MemoryStoreError, match="unknown tier 'bogus'; tiers are working, "):
        store.fetch(tier="bogus")
    with pytest.raises(MemoryStoreError, match="unknown tier"):
        store.scope_clause({"tier": "Working"})
    assert len(store.fetch(tier="working")) == 1
