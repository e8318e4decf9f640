"""What the app shows of each foreign source, worked out by the very functions it shows
it with, without running the app: the Browse tree's counts, the search's results and
their breakdowns, why a forget is refused read-only, a forget's dialog and notice, and
F's erasure of a whole scope.

The app's code is the same for every source; tests/app/test_app_sources.py runs it
(with Pilot) on some of them, these tests on every one.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import fixed_clock
from fixtures.qdrant_support import copy_mem0_store
from fixtures.sources_support import LANGGRAPH, LANGGRAPH_VECTORS, TENANT, copy_fixture
from rich.text import Text
from test_app_sources import CASES, LG_NOW, make, opened

from memtui.core.arithmetic import lane_places
from memtui.core.embed import HashEmbedder
from memtui.core.search import SearchRequest
from memtui.sources import open_source
from memtui.sources.changes import Change, Saved, save_change, scope_plan
from memtui.tui.app import MemtuiApp, make_app
from memtui.tui.banners import SourceBanner
from memtui.tui.base import offers
from memtui.tui.breakdown import arithmetic, render_breakdown
from memtui.tui.changes import notice_parts
from memtui.tui.detail_format import detail_sections, record_detail
from memtui.tui.dialogs import ConfirmRecordAction, ForgetEngagementDialog
from memtui.tui.format import record_label, record_row
from memtui.tui.scope_tree import forget_noun, scope_nodes
from memtui.tui.search_results import result_prompt
from memtui.tui.search_view import RESULT_LIMIT


def app_search(source: Any, query: str, embedder: Any = None):
    """The search the Search tab runs (``SearchPane._search``)."""
    return source.search(SearchRequest(query, embedder=embedder, limit=RESULT_LIMIT))


def tree_nodes(source: Any) -> list:
    """The Browse tree's nodes as its worker counts them (``BrowsePane``)."""
    return scope_nodes(source, source.facets(), source.facets(include_hidden=True), False)


def banner_lines(source: Any, width: int) -> list[str]:
    """The source banner's lines as the app lays it out (``AppBase._render_banner``) on
    a read-only foreign store; what it would show, kept without an app to show it."""
    banner = SourceBanner()
    shown: list[Text] = []
    banner.update = shown.append  # type: ignore[method-assign]
    banner.kind_label = source.kind_label
    banner.writes_refused = True
    interrupted = len(source.interrupted_forgets()) if source.can("audit") else 0
    banner.notes = (list(source.header_notes()), interrupted)
    banner.lay_out(width)
    return shown[-1].plain.splitlines()


def confirm(source: Any, kind: str, target: Any) -> tuple[Saved, tuple]:
    """A confirmed change as the app saves it (``ChangeFlow._mutate``) and the notice's
    parts (its event, message, records removed)."""
    saved = save_change(
        source, Change(kind, target, "subject asked", "tester"), retries=0, delay=0.0
    )
    assert isinstance(saved, Saved)
    return saved, notice_parts(saved)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_each_source_gives_the_app_its_counts_results_and_refusal(case, tmp_path):
    source = opened(case, tmp_path / "store")
    try:
        app = make_app(source, embedder=HashEmbedder(8), poll_interval=None, check_on_start=False)
        assert isinstance(app, MemtuiApp) and app.source is source
        # The banner: the kind of store, that it is read-only, then its notes.
        assert source.kind_label.strip()
        banner = banner_lines(source, 140)
        assert banner[0].startswith(f"{source.kind_label} · read-only: forget needs --allow-writes")
        assert app._clock_text().plain.startswith("now ")  # the header's clock
        # The tree has every tier with the source's own counts.
        shown = {tier.tier: tier.live for tier, _children in tree_nodes(source)}
        for facet in source.facets():
            assert shown[facet.tier] == facet.count, f"the tree counts tier {facet.tier}"
        # The first tier's first page, as the table's rows; the first record's detail.
        first_tier = next(f.tier for f in source.facets() if f.count)
        page = source.page({"tier": first_tier}, limit=200).records
        scope_keys = tuple(source.facet_keys) or tuple(source.scope_keys)
        for record in page:
            cells = record_row(record, source.now(), 60, scope_keys=scope_keys)
            assert cells["content"].plain, record.id
        detail = record_detail(page[0], source.now()).plain
        assert "content" in detail, "the detail pane lists the record's fields"
        detail_sections(source.detail(page[0].id), notes=source.notes(page[0]))
        # Search: results with the source's ids; each breakdown adds up, and says so.
        response = app_search(source, case[3], app.embedder)
        assert response.results, case[3]
        places = lane_places(response.candidates or response.results, response.trace.pools)
        for result in response.results:
            assert arithmetic(result, response.trace).adds_up, result.id
            breakdown = render_breakdown(result, response.trace, None, places)
            assert "✓ adds up" in breakdown.plain, result.id
            record = source.get(result.id)
            assert record is not None, result.id
            # The result's line in the list, with its breakdown expanded below it.
            result_prompt(result, record, id_width=20, tier_width=10, breakdown=breakdown)
        # Read-only by default: f is offered, and refused with the reason (--allow-writes).
        assert app.read_only and not app.native
        assert offers(source, "forget") and not source.can("forget")
        assert "forget" in source.write_capabilities
        assert "--allow-writes" in source.read_only_message()
    finally:
        source.close()


def test_the_apps_embedder_runs_the_vector_lane_on_langgraph_vectors(tmp_path):
    source = open_source(copy_fixture(LANGGRAPH_VECTORS, tmp_path), now=LG_NOW)
    try:
        app = make_app(source, embedder=HashEmbedder(8), poll_interval=None, check_on_start=False)
        response = app_search(source, "paris trip", app.embedder)
        assert response.results
        assert not response.trace.fallback
        assert any(r.vector_score for r in response.results)
    finally:
        source.close()


@pytest.mark.parametrize(
    ("kind", "now", "query"),
    [(TENANT, 50, "queue"), (LANGGRAPH, LG_NOW, "paris trip")],
    ids=["tenant", "langgraph"],
)
def test_a_forget_of_a_search_result_shows_the_rule_and_audits(kind, now, query, tmp_path):
    """The steps of tests/app/test_app_sources.py's forget through the dialog."""
    source = open_source(
        make(kind, tmp_path / "store"), now=now, clock=fixed_clock, allow_writes=True
    )
    try:
        response = app_search(source, query)
        assert response.results
        target = response.results[0].id
        # The dialog (``ChangeFlow._prepare``, ``_ask``): the record, the store's own rule.
        record = source.get(target)
        preview = source.forget_preview(target)
        removes = [str(r) for r in preview.get("records", [target])]
        dialog = ConfirmRecordAction(
            "forget", record, rule=str(preview["rule"]), removes=len(removes)
        )
        # A foreign id is shown as it is (only a memtui database's numbers get "#").
        assert record_label(target) == target
        assert dialog.what_happens().plain == f"This cannot be undone. {preview['rule']}"
        saved, (event, message, removed, _value) = confirm(source, "forget", target)
        assert source.get(target) is None or source.get(target).state == "deleted"
        events = source.audit_events()
        assert any(target in [str(i) for i in e["record_ids"]] for e in events)
        assert event == events[0]["id"], "the notice names the forget's audit event"
        assert "erasure verified" in message and removed == 1
        page = source.page({"tier": record.tier}, limit=200)
        assert target not in [r.id for r in page.records], "the table's reload leaves it out"
    finally:
        source.close()


def test_F_forgets_a_mem0_user(tmp_path):
    """The steps of tests/app/test_app_sources.py's F on a namespace, on a mem0 user."""
    key, tier, value = "user_id", "memory", "alice"
    source = open_source(copy_mem0_store(tmp_path / "store"), clock=fixed_clock, allow_writes=True)
    try:
        doomed = [r.id for r in source.iter_records({key: value}, include_hidden=True)]
        assert doomed
        # The tree lists the user; F is offered on it, named by what it forgets here.
        listed = [c for t, children in tree_nodes(source) if t.tier == tier for c in children]
        assert any(c.kind == key and c.value == value for c in listed)
        assert key in source.forget_scope_keys and offers(source, "forget_scope")
        assert forget_noun(source) == "scope"  # mem0 has several scope keys
        # The dialog (``ChangeFlow._blast_radius``): the blast radius and the store's rule.
        radius, rule = scope_plan(source, (key, value))
        dialog = ForgetEngagementDialog(value, radius, key=key, rule=rule)
        assert dialog.total == len(doomed), "N records will be erased"
        assert rule == source.forget_scope_rule(key)
        assert dialog.matches(value)
        saved, (event, message, removed, _value) = confirm(source, "forget-scope", (key, value))
        assert source.get_many(doomed) == {}
        events = source.audit_events()
        assert [e["action"] for e in events] == ["forget", "forget-intent"]
        assert events[0]["details"]["scope"] == {key: value}
        assert f"Forgot {len(doomed)} records of {key} {value}" in message
        assert event == events[0]["id"], "the notice names the forget's audit event"
        assert removed == len(doomed)
        # The tree, recounted, no longer lists the user.
        listed = [c for t, children in tree_nodes(source) if t.tier == tier for c in children]
        assert not any(c.kind == key and c.value == value for c in listed)
    finally:
        source.close()
