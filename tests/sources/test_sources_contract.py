"""The MemorySource contract, run against every implementation on real files.

Each case opens a real store (the native sample database, a copy of a
committed fixture written by the real library or the documented schema, or a
Qdrant folder written in the test by qdrant-client).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import NOW, SAMPLE_CORPUS, fixed_clock
from fixtures.chroma_support import make_chroma_folder
from fixtures.lancedb_support import make_crewai_db, memory_id
from fixtures.qdrant_support import MEM0_IDS, copy_mem0_store, make_cyber_folder
from fixtures.qdrant_support import record_id as cyber_id
from fixtures.sources_support import (
    LANGGRAPH,
    LANGGRAPH_VECTORS,
    LETTA,
    PREFERENCES,
    TENANT,
    copy_fixture,
    digest,
    folder_listing,
)

from memtui.core.corpus import load_corpus
from memtui.core.embed import HashEmbedder
from memtui.core.search import SearchResponse
from memtui.core.store import MemoryStore
from memtui.sources import (
    MemorySource,
    SourceError,
    SourceMovedError,
    SourceRecord,
    SourceSearchResult,
    TierFacet,
    open_source,
)

LG_NOW = "2026-11-30T12:00:30Z"


@dataclass(frozen=True)
class Case:
    name: str
    query: str  # a query with keyword hits
    forget_id: str | None  # a live record found by the query, to forget
    embedder: Any = None
    now: Any = None
    has_hidden: bool = True


CASES = [
    Case("native", "sql injection", None, embedder=HashEmbedder()),
    # Before the 'short' TTL and after the 'refreshed' one (both are in the fixture).
    Case("langgraph", "paris trip", "lg:memories.user-1/trip%2F2026%3Aparis", now=LG_NOW),
    Case(
        "langgraph-vectors",
        "dark mode",
        "lg:memories.user-1/pref-color",
        embedder=HashEmbedder(8),
        now=LG_NOW,
        has_hidden=False,
    ),
    Case("preferences", "qwphlumbix", "pref:4"),
    Case("tenant", "queue", "ev:acme/r-1", now=50),
    Case(
        "letta",
        "bullet points",
        "archival:passage-00000000-0000-4000-8000-000000000005",
        embedder=HashEmbedder(8),
    ),
    Case("cyber-autoagent", "staging credential", cyber_id(8), embedder=HashEmbedder(8)),
    Case("mem0", "passport", MEM0_IDS["passport"], embedder=HashEmbedder(8)),
    Case(
        "lancedb",
        "staging credential",
        f"lance:{memory_id(3)}",
        embedder=HashEmbedder(8),
        has_hidden=False,
    ),
    Case("chroma", "dark mode", "chroma:m01", embedder=HashEmbedder(8)),
]


def make_store(case: Case, folder: Path) -> Path:
    if case.name == "native":
        path = folder / "native.db"
        folder.mkdir(parents=True, exist_ok=True)
        with MemoryStore(path, clock=fixed_clock, embedder=HashEmbedder(), operator="t") as store:
            store.ingest(load_corpus(SAMPLE_CORPUS), source="memory-corpus.json")
        return path
    if case.name == "cyber-autoagent":
        return make_cyber_folder(folder / "qdrant")
    if case.name == "mem0":
        return copy_mem0_store(folder)
    if case.name == "lancedb":
        return make_crewai_db(folder / "memory", docs=False)
    if case.name == "chroma":
        return make_chroma_folder(folder / "chroma")
    source = {
        "langgraph": LANGGRAPH,
        "langgraph-vectors": LANGGRAPH_VECTORS,
        "preferences": PREFERENCES,
        "tenant": TENANT,
        "letta": LETTA,
    }[case.name]
    return copy_fixture(source, folder)


def opened(case: Case, path: Path, **kwargs: Any) -> MemorySource:
    return open_source(path, now=case.now, clock=fixed_clock, **kwargs)


@pytest.fixture(params=CASES, ids=[c.name for c in CASES])
def case(request) -> Case:
    return request.param


@pytest.fixture
def store_path(case, tmp_path) -> Path:
    return make_store(case, tmp_path / "store")


def all_records(
    source: MemorySource, include_hidden: bool, /, **filters: Any
) -> list[SourceRecord]:
    return list(source.iter_records(filters or None, include_hidden=include_hidden, page_size=3))


@pytest.mark.parametrize("include_hidden", [False, True])
def test_facets_add_up_to_page_totals(case, store_path, include_hidden):
    with opened(case, store_path, read_only=True) as source:
        facets = source.facets(include_hidden=include_hidden)
        assert all(isinstance(f, TierFacet) for f in facets)
        records = all_records(source, include_hidden)
        assert sum(f.count for f in facets) == len(records) > 0
        for facet in facets:
            in_tier = all_records(source, include_hidden, tier=facet.tier)
            assert len(in_tier) == facet.count, facet.tier
            assert {r.tier for r in in_tier} <= {facet.tier}
            for key, values in facet.scopes.items():
                assert key in source.scope_keys
                for value, count in values.items():
                    scoped = all_records(source, include_hidden, tier=facet.tier, **{key: value})
                    assert len(scoped) == count, (facet.tier, key, value)
        if not include_hidden:
            assert all(r.state == "live" for r in records)


def test_hidden_records_exist_and_are_left_out_by_default(case, store_path):
    with opened(case, store_path, read_only=True) as source:
        every = all_records(source, True)
        live = all_records(source, False)
        assert {r.id for r in live} == {r.id for r in every if r.state == "live"}
        if case.has_hidden:
            assert {r.state for r in every} - {"live"}, "the fixture has hidden records too"
        assert {r.state for r in every} <= {"live", "refuted", "expired", "inactive", "deleted"}


def test_paging_visits_every_record_once(case, store_path):
    with opened(case, store_path, read_only=True) as source:
        whole = source.page(limit=5000, include_hidden=True)
        assert whole.next_cursor is None
        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            page = source.page(after=cursor, limit=2, include_hidden=True)
            assert len(page.records) <= 2
            seen.extend(r.id for r in page.records)
            pages += 1
            if page.next_cursor is None:
                break
            assert page.next_cursor == page.records[-1].id
            cursor = page.next_cursor
        assert seen == [r.id for r in whole.records]
        assert len(set(seen)) == len(seen)
        assert pages >= len(seen) // 2
        with pytest.raises(SourceError, match="page limit"):
            source.page(limit=0)
        with pytest.raises(SourceError, match="page limit"):
            source.page(limit=100_000)


def test_ids_round_trip_through_get_and_json(case, store_path):
    with opened(case, store_path, read_only=True) as source:
        records = all_records(source, True)
        for record in records:
            assert isinstance(record.id, str)
            assert source.get(record.id) == record
            shape = json.loads(json.dumps(record.to_json()))
            assert list(shape) == [
                "id",
                "tier",
                "record_type",
                "content",
                "scope",
                "created_at",
                "expires_at",
                "state",
                "metadata",
            ]
            assert shape["id"] == record.id
            assert source.get(shape["id"]) == record
            assert set(shape["scope"]) <= set(source.scope_keys)
            assert "vector" not in json.dumps(shape["metadata"]).lower().replace(
                "vector_fields", ""
            )
        many = source.get_many([r.id for r in records] + ["nope:1", "lg:x"])
        assert set(many) == {r.id for r in records}
        assert source.get("no-such-id") is None


def test_unknown_filter_keys_are_refused_loudly(case, store_path):
    with opened(case, store_path, read_only=True) as source:
        message = "filter 'hostname' is not in the scope-key allowlist ("
        with pytest.raises(SourceError) as raised:
            source.page({"hostname": "db01"})
        assert message in str(raised.value)
        for key in source.filter_keys:
            assert key in str(raised.value)
        with pytest.raises(SourceError, match="scope-key allowlist"):
            source.facets({"hostname": "db01"})
        with pytest.raises(SourceError, match="scope-key allowlist"):
            source.search(case.query, filters={"hostname": "db01"})


def test_search_returns_the_native_breakdown(case, store_path):
    with opened(case, store_path, read_only=True) as source:
        response = source.search(case.query, embedder=case.embedder, limit=5)
        assert isinstance(response, SearchResponse)
        assert response.results, case.query
        assert response.trace.terms
        assert response.trace.source.kind == source.kind
        weights = response.trace.weights
        if case.embedder is not None:
            assert response.trace.fallback is None, response.trace.fallback
        previous = None
        for rank, result in enumerate(response.results, start=1):
            assert isinstance(result, SourceSearchResult)
            assert result.rank == rank
            assert result.trace.weights == weights
            assert result.score == (
                result.trace.weights["keyword"] * result.trace.keyword.normalized
                + result.trace.weights["vector"] * result.trace.vector.normalized
            )
            key = (-result.score, result.record_id)
            assert previous is None or previous < key
            previous = key
            record = source.get(result.id)
            assert record is not None and record.state == "live"
            assert result.expires_at == record.expires_at
            if result.trace.keyword.raw is not None:
                detail = source.explain(case.query, result.id)
                assert detail["id"] == result.id
                assert detail["total"] == pytest.approx(result.trace.keyword.raw, abs=1e-6)
        reranked = source.rerank(response, (0.5, 0.5))
        assert {r.id for r in reranked.candidates} == {r.id for r in response.candidates}
        assert all(isinstance(r, SourceSearchResult) for r in reranked.results)


def test_read_only_refuses_forget_and_changes_nothing(case, store_path):
    before = digest(store_path)
    listing = folder_listing(store_path.parent)
    with opened(case, store_path, read_only=True) as source:
        assert source.read_only
        assert "forget" not in source.capabilities
        every = {"search", "vectors", "history", "audit", "forget", "forget_scope", "lanes"}
        for capability in every | set(source.capabilities):  # one asked alone, or all at once
            assert source.can(capability) == (capability in source.capabilities), capability
        record = all_records(source, False)[0]
        source.search(case.query, embedder=case.embedder)
        with pytest.raises(SourceError, match="read-only"):
            source.forget(record.id, reason="r")
        assert source.get(record.id) == record
        assert source.audit_events() == [] or source.kind == "memtui"
    assert digest(store_path) == before
    # Nothing beside the store either: no audit file, no cache, no journal left.
    assert folder_listing(store_path.parent) == listing


def test_forget_removes_the_record_everywhere_and_audits(case, store_path):
    kwargs = {} if case.name == "native" else {"allow_writes": True}
    with opened(case, store_path, **kwargs) as source:
        assert not source.read_only and "forget" in source.capabilities
        found = source.search(case.query, embedder=case.embedder)
        target = case.forget_id or found.results[0].id
        assert target in {r.id for r in found.candidates}
        with pytest.raises(SourceError, match="reason is required"):
            source.forget(target, reason=" ")
        with pytest.raises(SourceError, match="no record with id"):
            source.forget("no-such-id", reason="r")
        outcome = source.forget(target, reason="contract test", operator="ana")
        assert outcome.verified, outcome
        assert outcome.record_id == target and target in outcome.removed
        assert source.get(target) is None
        assert target not in {r.id for r in all_records(source, True)}
        again = source.search(case.query, embedder=case.embedder)
        assert target not in {r.id for r in again.candidates}
        events = source.audit_events()
        forget_event = next(e for e in events if e["id"] == outcome.event_id)
        assert forget_event["action"] == "forget"
        assert [str(i) for i in forget_event["record_ids"]] == [target]
        assert forget_event["operator"] == "ana" and forget_event["reason"] == "contract test"
        assert source.verify_audit() is None
        assert source.interrupted_forgets() == []
    if case.name != "native":
        assert Path(str(store_path) + ".memtui-audit.db").exists()
    with opened(case, store_path, read_only=True) as reopened:
        assert reopened.get(target) is None
        assert any(e["id"] == outcome.event_id for e in reopened.audit_events())


def test_the_forget_rule_is_a_sentence(case, store_path):
    """The app's dialog reads "This cannot be undone. <rule> Removes N records." and the
    CLI "Rule: <rule>. This cannot be undone": the rule is one whole sentence."""
    with opened(case, store_path, read_only=True) as source:
        target = case.forget_id or source.search(case.query).results[0].id
        rule = source.forget_preview(target)["rule"]
        assert rule[:1].isupper() and rule.endswith(".") and not rule.endswith(".."), rule


def test_clock_is_injectable(case, store_path):
    with opened(case, store_path, read_only=True) as source:
        assert source.expiry_rule
        if case.name == "native":
            assert source.search(case.query).trace.now == "2026-11-30T12:00:00.000000Z"
            assert NOW.year == 2026


def test_calls_from_many_threads_agree(case, store_path):
    from concurrent.futures import ThreadPoolExecutor

    with opened(case, store_path, read_only=True) as source:
        expected_page = [r.id for r in source.page(include_hidden=True, limit=50).records]
        expected_search = [r.id for r in source.search(case.query, embedder=case.embedder).results]

        def work(i: int) -> tuple[list[str], list[str], int]:
            page = [r.id for r in source.page(include_hidden=True, limit=50).records]
            found = [r.id for r in source.search(case.query, embedder=case.embedder).results]
            facets = sum(f.count for f in source.facets(include_hidden=True))
            return page, found, facets

        with ThreadPoolExecutor(max_workers=8) as pool:
            outcomes = list(pool.map(work, range(32)))
        total = sum(f.count for f in source.facets(include_hidden=True))
        assert all(o == (expected_page, expected_search, total) for o in outcomes)


def test_exclusions_are_counted_in_the_stores_own_words(case, store_path):
    """Overall and in every lane: a store's hidden state replaces memtui's ``refuted``, and
    a store with no refute concept (its only hidden state is expiry) reports no refuted."""
    with opened(case, store_path, read_only=True) as source:
        trace = source.search(case.query, embedder=case.embedder, limit=5).trace
        hidden = source.hidden_state
        words = {hidden, "expired", "out_of_scope"}
        assert set(trace.excluded) == words
        assert set(trace.excluded_by_lane) == {"keyword", "vector"}
        for lane, counts in trace.excluded_by_lane.items():
            assert set(counts) == words, lane
        if case.name != "native":
            assert "refuted" not in json.dumps([trace.excluded, trace.excluded_by_lane])


def test_preferences_name_inactive_in_each_lane(tmp_path):
    path = make_store(Case("preferences", "tone", None), tmp_path / "store")
    with open_source(path) as source:
        trace = source.search("tone").trace
        assert trace.excluded == {"inactive": 1, "expired": 0, "out_of_scope": 0}
        assert trace.excluded_by_lane["keyword"] == {
            "inactive": 1,
            "expired": 0,
            "out_of_scope": 0,
        }


# ---------------------------------------------------------------- a replaced file


def watched_paths(case: Case, store_path: Path) -> list[Path]:
    """Every file (or folder) a forget on the store reads or writes."""
    if case.name == "cyber-autoagent":
        return [store_path, store_path / "collection/cyber_autoagent_memories/storage.sqlite"]
    if case.name == "mem0":
        return [
            store_path,
            store_path / "collection/mem0/storage.sqlite",
            store_path.parent / "history.db",
        ]
    if case.name == "chroma":
        return [store_path, store_path / "chroma.sqlite3"]
    return [store_path]


def put_a_copy_in_place(path: Path) -> None:
    """Another file (or folder) at the same path, as a restore from a backup makes one:
    the same bytes, another inode."""
    if path.is_dir():
        old = path.with_name(path.name + ".old")
        path.rename(old)
        shutil.copytree(old, path)
        return
    copy = path.with_name(path.name + ".copy")
    shutil.copyfile(path, copy)
    os.replace(copy, path)


def test_a_change_is_refused_once_a_path_names_another_file(case, store_path):
    for path in watched_paths(case, store_path):
        with opened(case, store_path, allow_writes=True) as source:
            assert not source.read_only
            assert [f.path for f in source.opened_files] == watched_paths(case, store_path)
            assert source.path_changed() is None
            source.require_same_path()
            put_a_copy_in_place(path)
            said = f"{path} was replaced by another file since memtui opened it"
            assert source.path_changed() == said
            with pytest.raises(SourceMovedError) as refused:
                source.require_same_path()
            assert str(refused.value) == (
                f"{said}; nothing was changed: open the store again to change the file now "
                "at that path"
            )


def test_a_change_is_refused_once_the_store_is_deleted(case, store_path):
    with opened(case, store_path, allow_writes=True) as source:
        if store_path.is_dir():
            shutil.rmtree(store_path)
        else:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{store_path}{suffix}").unlink(missing_ok=True)
        assert source.path_changed() == f"{store_path} was deleted since memtui opened it"
        with pytest.raises(SourceMovedError):
            source.require_same_path()
