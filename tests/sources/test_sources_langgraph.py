"""LangGraph SqliteStore: scope tree, ids, values, expiry rule, vectors, erasure gap, forget,
forget-gaps (the orphaned vectors LangGraph's own delete leaves)."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner
from conftest import one_error_line
from fixtures.sources_support import (
    CANARY,
    LANGGRAPH,
    LANGGRAPH_VECTORS,
    copy_fixture,
    digest,
    file_bytes,
    occurrences,
)
from hypothesis import given
from hypothesis import strategies as st

from memtui.cli import main
from memtui.core.embed import HashEmbedder
from memtui.sources import SourceError, open_source
from memtui.sources.base import decode_id, encode_id
from memtui.sources.cache import cache_root, list_caches
from memtui.sources.langgraph import LangGraphSource

NOW = "2026-11-30T12:00:30Z"
SECRET = "sk-test-SECRETVALUE123"


@pytest.fixture
def plain(tmp_path):
    return copy_fixture(LANGGRAPH, tmp_path / "store")


@pytest.fixture
def vectors(tmp_path):
    return copy_fixture(LANGGRAPH_VECTORS, tmp_path / "store")


def stored(path, key):
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT expires_at FROM store WHERE key = ?", (key,)).fetchone()[0]
    finally:
        conn.close()


def test_recognized_by_tables_not_name(plain, tmp_path):
    renamed = tmp_path / "memory.db"
    renamed.write_bytes(plain.read_bytes())
    for path in (plain, renamed):
        with open_source(path) as source:
            assert isinstance(source, LangGraphSource)
            assert source.read_only and source.kind == "langgraph"


def test_namespaces_are_the_scope_tree(plain):
    with open_source(plain, now=NOW) as source:
        facets = {f.tier: f for f in source.facets()}
        assert set(facets) == {"memories", "profile", "scratch"}
        # The tier is the first label: it is not listed again as a namespace of itself.
        assert facets["memories"].scopes["namespace"] == {
            "memories.user-1": 3,
            "memories.user-2": 2,
            "memories.user-2.notes": 1,
        }
        under = [r.id for r in source.page({"namespace": "memories.user-2"}).records]
        assert under == [
            "lg:memories.user-2/with%20space%20%26%20100%25",
            "lg:memories.user-2.notes/unicod%C3%A9%20%E2%9C%93",
        ]
        # Segment-aware: "memories.user" is not a prefix of "memories.user-1".
        assert source.page({"namespace": "memories.user"}).records == []
        filtered = source.facets({"namespace": "memories.user-2"})
        assert [(f.tier, f.count) for f in filtered] == [("memories", 2)]
        assert filtered[0].scopes["namespace"] == {"memories.user-2": 2, "memories.user-2.notes": 1}
        assert "namespace" not in facets["profile"].scopes  # one label: the tier alone
        assert (
            source.facets({"namespace": "memories"})[0].scopes["namespace"]
            == (facets["memories"].scopes["namespace"])
        )
        # A scope tree nests a namespace under its parent (the tier for the second label).
        assert source.scope_parent("namespace", "memories.user-2.notes") == "memories.user-2"
        assert source.scope_parent("namespace", "memories.user-2") is None
        assert source.scope_parent("tier", "memories") is None


def test_odd_keys_round_trip(plain):
    with open_source(plain, now=NOW) as source:
        keys = {json.dumps(r.metadata["key"]): r for r in source.iter_records(include_hidden=True)}
        for key in ("trip/2026:paris", "with space & 100%", "unicodé ✓"):
            record = keys[json.dumps(key)]
            assert decode_id("lg", record.id, 2)[1] == key
            assert source.get(record.id) == record
            assert "/" not in record.id.split(":", 1)[1].split("/", 1)[1]


@given(st.text(), st.text())
def test_id_encoding_is_reversible_for_any_text(prefix, key):
    encoded = encode_id("lg", prefix, key)
    assert decode_id("lg", encoded, 2) == (prefix, key)
    assert encoded.count("/") == 1
    assert all(ch.isascii() and ch.isprintable() and ch != " " for ch in encoded)


def test_values_are_json_from_orjson_blobs_and_secrets_stay_masked(plain):
    raw = sqlite3.connect(plain).execute("SELECT typeof(value) FROM store LIMIT 1").fetchone()[0]
    assert raw == "blob"  # what langgraph-checkpoint-sqlite 3.1.2 writes
    with open_source(plain, now=NOW) as source:
        record = source.get("lg:memories.user-2/with%20space%20%26%20100%25")
        assert record.metadata["value"]["api_key"] == SECRET  # the full JSON is kept
        assert record.content == "User two works on payroll migrations"
        assert SECRET not in json.dumps(record.to_json())
        nested = source.get("lg:memories.user-2.notes/unicod%C3%A9%20%E2%9C%93")
        assert "budget up" in nested.content  # nested text fields are searchable
        detail = source.detail(record.id)
        assert SECRET not in json.dumps([s.rows for s in detail])
        assert source.search("sk test secretvalue123").results == []
    out = CliRunner().invoke(main, ["records", str(plain), "--json"])
    assert out.exit_code == 0 and SECRET not in out.output


def test_detail_json_keeps_text_readable_and_controls_visible(plain):
    from memtui.tui.detail_format import detail_sections

    conn = sqlite3.connect(plain)
    with conn:
        conn.execute(
            "UPDATE store SET value = ? WHERE key = 'pref-color'",
            (json.dumps({"text": "bidi \u202e and escape \x1b[31m", "api_key": "sk-x"}).encode(),),
        )
    conn.close()
    with open_source(plain, now=NOW) as source:
        nested = source.detail("lg:memories.user-2.notes/unicod%C3%A9%20%E2%9C%93")[0].rows[0][0]
        assert '"Café meeting notes about the quarterly budget"' in nested
        secret = source.detail("lg:memories.user-2/with%20space%20%26%20100%25")[0].rows[0][0]
        assert '"api_key": "•••••••• (masked)"' in secret and "\\u2022" not in secret
        hostile = source.detail("lg:memories.user-1/pref-color")
        shown = detail_sections(hostile[:1]).plain
        assert "\u202e" not in shown and "\x1b" not in shown  # never reach the terminal
        assert "bidi \\u202e and escape \\u001b[31m" in shown  # visible escapes instead


def test_text_fields_are_joined_on_one_line(plain):
    """memtui joins a value's text fields with " · ": no newline of its own in a row."""
    with open_source(plain, now=NOW) as source:
        trip = source.get("lg:memories.user-1/trip%2F2026%3Aparis")
        assert trip.content == "Planning a trip to Paris in spring · travel · europe"
        assert [r.id for r in source.search("spring europe").results] == [trip.id]
        nested = source.get("lg:memories.user-2.notes/unicod%C3%A9%20%E2%9C%93")
        assert nested.content == "Café meeting notes about the quarterly budget · budget up"


def test_expiry_uses_langgraphs_rule_in_both_text_forms(plain):
    short = stored(plain, "short")
    refreshed = stored(plain, "refreshed")
    assert short == "2026-11-30 12:01:00+00:00"  # put's form
    assert len(refreshed) == 19 and refreshed[10] == " "  # a TTL refresh's DATETIME() form

    def state(key, now):
        with open_source(plain, now=now) as source:
            record = source.get(f"lg:scratch/{key}")
            listed = {r.id for r in source.page({"namespace": "scratch"}).records}
            found = {r.id for r in source.search("scratch note").results}
            assert (record.id in listed) == (record.state == "live")
            assert (record.id in found) == (record.state == "live")
            return record.state

    # The boundary second is live (LangGraph deletes only expires_at < CURRENT_TIMESTAMP).
    assert state("short", "2026-11-30T12:01:00Z") == "live"
    assert state("short", "2026-11-30T12:01:00.999Z") == "live"
    assert state("short", "2026-11-30T12:01:01Z") == "expired"
    at = refreshed.replace(" ", "T") + "Z"
    assert state("refreshed", at) == "live"
    assert state("refreshed", at[:-3] + f"{int(at[-3:-1]) + 1:02d}Z") == "expired"
    with open_source(plain, now="2026-11-30T12:01:01Z") as source:
        assert "boundary second is still live" in source.expiry_rule
        trace = source.search("scratch note").trace
        assert trace.excluded["expired"] == 2 and trace.now == "2026-11-30 12:01:01"


def test_puts_fractional_expiry_form_keeps_its_whole_second_live(plain):
    """put writes ``str(datetime)``: ``...:SS.ffffff+00:00`` unless the microseconds are 0
    (the fixture pins whole seconds). The sweep's ``expires_at < CURRENT_TIMESTAMP``
    compares text to the second (CURRENT_TIMESTAMP has no fraction), so the item is
    live through 12:01:00.999 and swept from 12:01:01."""
    conn = sqlite3.connect(plain)
    with conn:
        conn.execute(
            "UPDATE store SET expires_at = '2026-11-30 12:01:00.500000+00:00' WHERE key = 'short'"
        )
    conn.close()

    def state(now):
        with open_source(plain, now=now) as source:
            record = source.get("lg:scratch/short")
            listed = {r.id for r in source.page({"namespace": "scratch"}).records}
            found = {r.id for r in source.search("expires soon").results}
            assert (record.id in listed) == (record.id in found) == (record.state == "live")
            return record.state

    assert state("2026-11-30T12:01:00.400Z") == "live"
    assert state("2026-11-30T12:01:00.900Z") == "live"  # past the fraction, same second
    assert state("2026-11-30T12:01:01Z") == "expired"
    # The same verdicts as SQLite's own comparison, the one the sweep runs.
    conn = sqlite3.connect(plain)
    swept = conn.execute(
        "SELECT expires_at < '2026-11-30 12:01:00', expires_at < '2026-11-30 12:01:01' "
        "FROM store WHERE key = 'short'"
    ).fetchone()
    conn.close()
    assert swept == (0, 1)


def test_vector_lane_uses_the_stores_vectors_with_a_matching_embedder(vectors, plain):
    with open_source(vectors, now=NOW) as source:
        assert "vectors" in source.capabilities
        hit = source.search("dark mode editor", embedder=HashEmbedder(8))
        assert hit.trace.fallback is None and hit.trace.embedder == "hash-8"
        assert hit.trace.pools["vector"].size > 0
        best = hit.results[0]
        assert best.id == "lg:memories.user-1/pref-color"
        assert best.trace.vector.raw is not None
        wrong = source.search("dark mode editor", embedder=HashEmbedder(256))
        assert wrong.trace.fallback == (
            "no embedder for these 8-dim vectors: hash-256 makes 256-dim vectors"
        )
        assert wrong.trace.weights == {"keyword": 1.0, "vector": 0.0}
        none = source.search("dark mode editor")
        assert none.trace.fallback.startswith("no embedder for these 8-dim vectors")
        assert all(r.trace.fallback == none.trace.fallback for r in none.results)
    with open_source(plain, now=NOW) as source:
        assert "vectors" not in source.capabilities
        assert "has no stored vectors" in source.search("dark mode").trace.fallback


def test_orphaned_vectors_are_an_erasure_gap(vectors):
    with open_source(vectors, now=NOW) as source:
        summary = source.summary()
        assert summary.counts["orphaned_vectors"] == 1  # LangGraph's own delete left it
        assert any(n.startswith("erasure gap: 1 orphaned vector") for n in summary.notes)
    # LangGraph's delete is this statement; its ON DELETE CASCADE never fires.
    conn = sqlite3.connect(vectors)
    conn.execute("DELETE FROM store WHERE prefix = ? AND key IN (?)", ("memories.user-1", "canary"))
    conn.commit()
    conn.close()
    with open_source(vectors, now=NOW) as source:
        assert source.summary().counts["orphaned_vectors"] == 2
        sections = {s.title: s for s in source.detail("lg:memories.user-1/pref-color")}
        assert sections["vectors"].rows[0][:2] == ("$", 8)
        assert sections["vectors"].note.startswith("erasure gap: 1 orphaned vector")
    out = CliRunner().invoke(main, ["info", str(vectors)])
    assert out.exit_code == 0 and "erasure gap: 2 orphaned vector(s)" in out.output


def test_forget_erases_row_vectors_and_freed_pages(vectors, tmp_path):
    target = "lg:memories.user-1/canary"
    with open_source(vectors, now=NOW, allow_writes=True, operator="ana") as source:
        assert source.search(CANARY).results[0].id == target  # builds the cache
        cache_file = source.index.path
        assert cache_file.parent == cache_root() and cache_file.parent != vectors.parent
        before = occurrences(vectors, CANARY)
        assert before["word"] >= 1, "the test must see the word first"
        assert occurrences(cache_file, CANARY)["tail"] >= 1
        blob = (
            sqlite3.connect(vectors)
            .execute("SELECT embedding FROM store_vectors WHERE key = 'canary'")
            .fetchone()[0]
        )
        assert blob in file_bytes(vectors)
        outcome = source.forget(target, reason="leaked a code word")
        assert outcome.verified
        assert outcome.checks == {
            "row_gone": True,
            "vectors_gone": True,
            "bytes_gone": True,
            "cache_gone": True,
        }
        assert source.summary().counts["orphaned_vectors"] == 1  # ours left none behind
        assert source.search(CANARY).results == []
        events = source.audit_events()
        assert [e["action"] for e in events] == ["forget", "forget-intent"]
        assert events[1]["status"] == "completed"
        assert events[0]["details"]["intent_event"] == events[1]["id"]
        assert events[0]["details"]["vectors_removed"] == 1
        assert CANARY not in json.dumps(events)
        assert source.verify_audit() is None
    assert occurrences(vectors, CANARY) == {"word": 0, "tail": 0}
    assert blob not in file_bytes(vectors)
    assert occurrences(cache_file, CANARY) == {"word": 0, "tail": 0}
    audit = tmp_path / "store" / "langgraph_vectors.sqlite.memtui-audit.db"
    assert audit.exists() and CANARY not in file_bytes(audit).decode("latin-1")


def add_twin(path, key, twin):
    """A second item whose value and field vector are byte-identical to ``key``'s (a
    deterministic embedder gives equal text equal vectors)."""
    conn = sqlite3.connect(path)
    conn.execute(
        "INSERT INTO store (prefix, key, value, created_at, updated_at) "
        "SELECT prefix, ?, value, created_at, updated_at FROM store WHERE key = ?",
        (twin, key),
    )
    conn.execute(
        "INSERT INTO store_vectors (prefix, key, field_name, embedding) "
        "SELECT prefix, ?, field_name, embedding FROM store_vectors WHERE key = ?",
        (twin, key),
    )
    conn.commit()
    conn.close()


def test_forget_is_verified_when_a_live_item_holds_the_same_bytes(vectors):
    add_twin(vectors, "canary", "canary-twin")
    target, twin = "lg:memories.user-1/canary", "lg:memories.user-1/canary-twin"
    result = CliRunner().invoke(
        main, ["forget", str(vectors), target, "--reason", "leaked", "--allow-writes", "--yes"]
    )
    assert result.exit_code == 0, result.output
    assert "erasure verified" in result.output
    with open_source(vectors, now=NOW) as source:
        assert source.get(target) is None
        kept = source.get(twin)
        assert kept is not None and CANARY in kept.content
        assert source.audit_events()[0]["details"]["erasure"]["bytes_gone"] is True
    assert occurrences(vectors, CANARY)["word"] == 1  # the twin's own copy, no other


def test_a_copy_beyond_what_the_live_items_account_for_is_not_verified(vectors):
    add_twin(vectors, "canary", "canary-twin")
    conn = sqlite3.connect(vectors)
    conn.execute("CREATE TABLE notes (body BLOB)")  # a copy outside the store's items
    conn.execute("INSERT INTO notes SELECT value FROM store WHERE key = 'canary'")
    conn.commit()
    conn.close()
    with open_source(vectors, now=NOW, allow_writes=True) as source:
        outcome = source.forget("lg:memories.user-1/canary", reason="leaked")
    assert not outcome.verified and outcome.checks["bytes_gone"] is False
    assert outcome.checks["row_gone"] and outcome.checks["vectors_gone"]


def test_without_secure_delete_the_word_would_survive(vectors):
    """The byte check can fail: LangGraph's own delete leaves the value in free space."""
    conn = sqlite3.connect(vectors)
    conn.execute("PRAGMA secure_delete = OFF")
    conn.execute("DELETE FROM store WHERE key = 'canary'")
    conn.commit()
    conn.close()
    assert occurrences(vectors, CANARY)["word"] >= 1


def test_read_only_forget_is_refused_and_the_file_is_untouched(vectors):
    before = digest(vectors)
    result = CliRunner().invoke(
        main, ["forget", str(vectors), "lg:memories.user-1/canary", "--reason", "r", "--yes"]
    )
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "pass --allow-writes" in result.output
    assert digest(vectors) == before
    assert not (vectors.parent / "langgraph_vectors.sqlite.memtui-audit.db").exists()


def test_cli_forget_with_allow_writes_and_an_audit_db_elsewhere(vectors, tmp_path):
    audit = tmp_path / "elsewhere" / "audit.db"
    audit.parent.mkdir()
    runner = CliRunner()
    result = runner.invoke(
        main,
        [
            "forget",
            str(vectors),
            "lg:memories.user-1/canary",
            "--reason",
            "erase",
            "--allow-writes",
            "--audit-db",
            str(audit),
        ],
        input="y\n",
    )
    assert result.exit_code == 0, result.output
    # the rule, before confirming
    assert "Rule: The store row and every vector of it are deleted" in result.output
    assert "erasure verified (audit events #1 intent, #2 outcome)" in result.output
    listed = runner.invoke(main, ["audit", str(vectors), "--audit-db", str(audit), "--json"])
    assert [e["action"] for e in json.loads(listed.output)] == ["forget", "forget-intent"]
    verify = runner.invoke(main, ["audit", "verify", str(vectors), "--audit-db", str(audit)])
    assert verify.exit_code == 0 and "audit chain verified: 2 events" in verify.output
    assert not (vectors.parent / "langgraph_vectors.sqlite.memtui-audit.db").exists()


def vector_rows(path):
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT prefix, key, field_name, embedding FROM store_vectors "
            "ORDER BY prefix, key, field_name"
        ).fetchall()
        live = {(p, k) for p, k in conn.execute("SELECT prefix, key FROM store").fetchall()}
    finally:
        conn.close()
    return {(p, k, f): bytes(e) for p, k, f, e in rows}, live


def delete_like_langgraph(path, prefix, key):
    """LangGraph's delete is this statement; its ON DELETE CASCADE never fires.

    secure_delete off (SQLite's usual default): the value stays in free space.
    """
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA secure_delete = OFF")
    conn.execute("DELETE FROM store WHERE prefix = ? AND key IN (?)", (prefix, key))
    conn.commit()
    conn.close()


def test_forget_gaps_erases_exactly_the_orphaned_vectors(vectors):
    delete_like_langgraph(vectors, "memories.user-1", "canary")
    before, live = vector_rows(vectors)
    orphans = {k: v for k, v in before.items() if k[:2] not in live}
    kept = {k: v for k, v in before.items() if k[:2] in live}
    assert len(orphans) == 2 and kept, "the test needs orphans and live vectors"
    canary_blob = orphans[("memories.user-1", "canary", "$")]
    assert canary_blob not in b"".join(kept.values())
    assert all(blob in file_bytes(vectors) for blob in orphans.values())
    assert occurrences(vectors, CANARY)["word"] >= 1  # LangGraph's delete left the value too
    with open_source(vectors, now=NOW) as source:
        assert source.summary().counts["orphaned_vectors"] == 2
        assert any(
            n.startswith("erasure gap: 2 orphaned vector") and "memtui forget-gaps" in n
            for n in source.summary().notes
        )
    runner = CliRunner()
    untouched = digest(vectors)
    line = one_error_line(runner.invoke(main, ["forget-gaps", str(vectors), "--reason", "x"]))
    assert "pass --allow-writes to change it" in line
    refused = runner.invoke(main, ["forget-gaps", str(vectors), "--reason", "x", "--allow-writes"])
    assert "2 orphaned vector(s) of 2 deleted item(s)" in refused.output
    assert "not confirmed; nothing was changed" in refused.output
    assert digest(vectors) == untouched
    assert not (vectors.parent / "langgraph_vectors.sqlite.memtui-audit.db").exists()
    result = runner.invoke(
        main,
        [
            "forget-gaps",
            str(vectors),
            "--reason",
            "x",
            "--allow-writes",
            "--yes",
            "--operator",
            "ana",
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.output.strip() == (
        "deleted 2 orphaned vector(s) of 2 deleted item(s): erasure verified "
        "(audit events #1 intent, #2 outcome)"
    )
    after, _ = vector_rows(vectors)
    assert after == kept  # the live items' vectors stay, byte for byte
    data = file_bytes(vectors)
    assert not any(blob in data for blob in orphans.values())
    assert canary_blob not in data
    assert occurrences(vectors, CANARY)["word"] == 0  # VACUUM purged the freed pages too
    with open_source(vectors, now=NOW) as source:
        summary = source.summary()
        assert summary.counts["orphaned_vectors"] == 0 and source.orphaned_vectors() == 0
        assert not any(n.startswith("erasure gap") for n in summary.notes)
        assert summary.counts["vectors"] == len(kept)
        assert source.record_count() == len(live)
        events = source.audit_events()
        assert [e["action"] for e in events] == ["forget", "forget-intent"]
        outcome, intent = events
        assert intent["status"] == "completed" and intent["operator"] == "ana"
        assert intent["details"]["plan"] == {"items": 2, "vectors": 2}
        details = outcome["details"]
        assert details["operation"] == "forget-gaps" and details["intent_event"] == intent["id"]
        assert details["vectors_removed"] == 2 and details["verified"] is True
        assert details["erasure"] == {
            "orphaned_vectors_gone": True,
            "bytes_gone": True,
            "cache_gone": True,
        }
        assert "lg:memories.user-1/canary" in outcome["record_ids"]
        assert len(outcome["record_ids"]) == 2
        assert CANARY not in json.dumps(events)
        assert source.verify_audit() is None
    again = runner.invoke(
        main, ["forget-gaps", str(vectors), "--reason", "x", "--allow-writes", "--yes"]
    )
    assert again.exit_code == 0
    assert again.output.strip() == "no erasure gap: no orphaned vectors of deleted items"


def test_forget_gaps_refuses_read_only_and_without_orphans(vectors, plain):
    before = digest(vectors)
    with open_source(vectors, now=NOW) as source:
        assert source.forget_gaps_preview()["counts"] == {"items": 1, "vectors": 1}
        with pytest.raises(SourceError, match="read-only"):
            source.forget_gaps(reason="r")
    assert digest(vectors) == before
    with open_source(plain, now=NOW, allow_writes=True) as source:
        assert source.forget_gaps_preview()["records"] == []
        with pytest.raises(SourceError, match="no erasure gap"):
            source.forget_gaps(reason="r")
        assert source.audit_events() == []
    out = CliRunner().invoke(
        main, ["forget-gaps", str(plain), "--reason", "x", "--allow-writes", "--yes"]
    )
    assert out.exit_code == 0 and "no erasure gap: no orphaned vectors" in out.output


def test_an_intent_without_an_outcome_shows_as_an_interrupted_forget(vectors, monkeypatch):
    source = open_source(vectors, now=NOW, allow_writes=True)

    def crash(record):
        raise KeyboardInterrupt  # the process stopped between the intent and the outcome

    monkeypatch.setattr(source, "_apply_forget", crash)
    with pytest.raises(KeyboardInterrupt):
        source.forget("lg:memories.user-1/canary", reason="r")
    source.close()
    with open_source(vectors, now=NOW) as reopened:
        interrupted = reopened.interrupted_forgets()
        assert [e["record_ids"] for e in interrupted] == [["lg:memories.user-1/canary"]]
        assert any(n.startswith("1 interrupted forget") for n in reopened.summary().notes)
        assert reopened.get("lg:memories.user-1/canary") is not None
    listed = CliRunner().invoke(main, ["audit", str(vectors)], env={"COLUMNS": "250"})
    assert "INTERRUPTED" in listed.output and "1 interrupted forget(s)" in listed.output


def test_a_failed_forget_writes_its_outcome_and_changes_nothing(vectors, monkeypatch):
    with open_source(vectors, now=NOW, allow_writes=True) as source:
        source._conn.execute(
            "CREATE TEMP TRIGGER refuse BEFORE DELETE ON store_vectors "
            "BEGIN SELECT RAISE(ABORT, 'refused by test'); END"
        )
        with pytest.raises(SourceError, match="forget failed, nothing was changed"):
            source.forget("lg:memories.user-1/canary", reason="r")
        assert source.get("lg:memories.user-1/canary") is not None
        events = source.audit_events()
        assert [e["action"] for e in events] == ["forget-failed", "forget-intent"]
        assert events[1]["status"] == "completed" and source.interrupted_forgets() == []


def test_the_cache_is_rebuilt_when_the_store_changes_and_can_be_cleared(plain, tmp_path):
    seen = []
    with open_source(plain, now=NOW) as source:
        assert source.index_status()["ready"] is False
        source.build_index(progress=lambda done, total: seen.append((done, total)))
        assert seen and seen[-1][0] == seen[-1][1]
        assert source.index_status()["ready"] is True
        assert source.search("harpsichord").results == []
    conn = sqlite3.connect(plain)
    conn.execute(
        "INSERT INTO store (prefix, key, value, created_at, updated_at) "
        "VALUES ('memories.user-1', 'new', ?, '2026-11-30 12:00:00', '2026-11-30 12:00:00')",
        (b'{"text": "learning the harpsichord"}',),
    )
    conn.commit()
    conn.close()
    with open_source(plain, now=NOW) as source:
        assert source.index_status()["ready"] is False
        assert [r.id for r in source.search("harpsichord").results] == ["lg:memories.user-1/new"]
    # The same file elsewhere (another inode) is another store with its own cache.
    other = copy_fixture(plain, tmp_path / "other")
    with open_source(other, now=NOW) as source:
        source.build_index()
    caches = list_caches()
    assert sorted(c["source"] for c in caches) == sorted(
        [str(plain.resolve()), str(other.resolve())]
    )
    runner = CliRunner()
    listed = runner.invoke(main, ["cache", "list", "--json"])
    assert len(json.loads(listed.output)["caches"]) == 2
    cleared = runner.invoke(main, ["cache", "clear"])
    assert cleared.exit_code == 0 and "removed 2 cached indexes" in cleared.output
    assert list_caches() == []
    assert sorted(p.name for p in plain.parent.iterdir()) == ["langgraph_store.sqlite"]


def test_browsing_is_not_blocked_while_the_index_builds(plain):
    import threading

    with open_source(plain, now=NOW) as source:
        reached = threading.Event()
        release = threading.Event()

        def progress(done, total):
            reached.set()
            release.wait(10)

        worker = threading.Thread(target=source.build_index, kwargs={"progress": progress})
        worker.start()
        try:
            assert reached.wait(10)
            page = source.page(limit=3)  # from another thread, mid-build
            # A page that waited for the build's lock would return only once the build had
            # given up waiting and finished; this one came while the build is still held.
            assert worker.is_alive() and not release.is_set()
            assert len(page.records) == 3
        finally:
            release.set()
            worker.join(10)
        assert source.index_status()["ready"]
