"""A few snapshots: each tab and an expanded breakdown, at 120x40 with a fixed clock.

Behaviour is covered by the Pilot tests; these catch layout regressions. Regenerate with
``pytest tests/app/test_app_snapshots.py --snapshot-update`` and look at the report.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memtui.core.store import MemoryStore
from memtui.tui.app import make_app
from memtui.tui.testing import build_sample_db, fixed_clock, settle

SIZE = (120, 40)


@pytest.fixture
def store(tmp_path: Path):
    path = build_sample_db(tmp_path / "sample.db")
    with MemoryStore(path, clock=fixed_clock, operator="tester") as opened:
        yield opened


async def _search(pilot, query: str = "sql injection") -> None:
    await settle(pilot)
    await pilot.press("slash")
    await settle(pilot)
    for char in query:
        await pilot.press("space" if char == " " else char)
    await pilot.press("enter")
    await settle(pilot)


def test_browse_tab(snap_compare, store: MemoryStore):
    assert snap_compare(
        make_app(store, db_label="sample.db"), terminal_size=SIZE, run_before=settle
    )


def test_search_tab_with_what_if_weights(snap_compare, store: MemoryStore):
    async def run_before(pilot) -> None:
        await _search(pilot)
        await pilot.press("left_square_bracket", "left_square_bracket", "left_square_bracket")
        await settle(pilot)

    assert snap_compare(
        make_app(store, db_label="sample.db"), terminal_size=SIZE, run_before=run_before
    )


def test_search_breakdown_expanded(snap_compare, store: MemoryStore):
    async def run_before(pilot) -> None:
        await _search(pilot)
        await pilot.press("enter")
        await settle(pilot)

    assert snap_compare(
        make_app(store, db_label="sample.db"), terminal_size=SIZE, run_before=run_before
    )


def test_lanes_tab(snap_compare, store: MemoryStore):
    async def run_before(pilot) -> None:
        await settle(pilot)
        await pilot.press("3")
        await settle(pilot)

    assert snap_compare(
        make_app(store, db_label="sample.db"), terminal_size=SIZE, run_before=run_before
    )


def test_audit_tab(snap_compare, store: MemoryStore):
    store.refute(1, reason="payload patched upstream")

    async def run_before(pilot) -> None:
        await settle(pilot)
        await pilot.press("4")
        await settle(pilot)

    assert snap_compare(
        make_app(store, db_label="sample.db"), terminal_size=SIZE, run_before=run_before
    )


def test_eval_tab(snap_compare, store: MemoryStore, monkeypatch):
    """The sample questions run (their path as typed, relative), a miss's results shown."""
    monkeypatch.chdir(Path(__file__).resolve().parents[2])

    async def run_before(pilot) -> None:
        await settle(pilot)
        await pilot.press("5")
        await settle(pilot)
        await pilot.press(*["down"] * 9, "enter")
        await settle(pilot)

    app = make_app(store, db_label="sample.db", questions="sample_corpus/questions.json")
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_every_saved_snapshot_belongs_to_a_test():
    """Run in parallel (pytest-xdist), syrupy no longer fails on a snapshot no test uses;
    this does: each saved screenshot is the one of a snapshot test of this module."""
    import ast

    folder = Path(__file__).parent / "__snapshots__" / Path(__file__).stem
    tree = ast.parse(Path(__file__).read_text())
    tests = {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and "snap_compare" in [a.arg for a in node.args.args]
    }
    saved = {path.stem for path in folder.iterdir()}
    assert len(tests) >= 5
    assert saved == tests
