"""A store whose file is replaced or deleted under the open app.

The app's connection still reads and writes the file it opened, which is no longer at
the path: a forget there would report "erasure verified" about a file that is gone while
the file now at the path keeps the record. Before every change (and on each live poll)
the app checks that the path still names the file it opened; if not, it refuses the
change in one line and offers to reopen (``o``).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from fixtures.sources_support import LANGGRAPH, copy_fixture
from textual.widgets import Input

from memtui.sources import open_source
from memtui.tui.app import make_app
from memtui.tui.browse import RecordTable
from memtui.tui.dialogs import ConfirmRecordAction
from memtui.tui.launch import open_app_source
from memtui.tui.testing import build_sample_db, fixed_clock, screen_text, settle, wait_for

SIZE = (120, 40)
LG_NOW = "2026-11-30T12:00:30Z"


@pytest.fixture
def sample_path(tmp_path: Path) -> Path:
    return build_sample_db(tmp_path / "sample.db")


def replace_file(path: Path, new: Path) -> None:
    """Move ``new`` over ``path`` as a restore or a rebuild does (the old file's WAL and
    shared memory removed first, so they are never read as the new file's)."""
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    os.replace(new, path)


def record_ids_on_disk(path: Path) -> list[int]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return [r[0] for r in conn.execute("SELECT id FROM records ORDER BY id")]


def audit_actions_on_disk(path: Path) -> list[str]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return [r[0] for r in conn.execute("SELECT action FROM audit_events ORDER BY id")]


def messages(app) -> list[str]:
    return [n.message for n in app._notifications]


async def confirm_forget_dialog(pilot, reason: str) -> None:
    """Give the open dialog its reason (filled in, not typed) and confirm from the keyboard."""
    pilot.app.screen.query_one("#reason", Input).value = reason
    await pilot.press("tab", "tab", "enter")
    await settle(pilot)


def native_app(path: Path, **kwargs):
    source = open_app_source(path, clock=fixed_clock)
    return make_app(
        source,
        operator="tester",
        check_on_start=False,
        reopen=lambda: open_app_source(path, clock=fixed_clock),
        **kwargs,
    )


async def test_a_forget_on_a_replaced_file_is_refused_and_o_reopens_the_new_file(
    sample_path: Path, tmp_path: Path
):
    app = native_app(sample_path, poll_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        record = app.query_one(RecordTable).current
        assert record is not None
        await pilot.press("f")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmRecordAction)
        # While the dialog is open, the file at the path is replaced by a rebuilt one.
        replace_file(sample_path, build_sample_db(tmp_path / "rebuilt.db"))
        await confirm_forget_dialog(pilot, "client asked")
        refusal = (
            f"Nothing was changed: {sample_path} was replaced by another file since memtui "
            "opened it. Press o to reopen the store at its path."
        )
        assert refusal in messages(app)
        assert not any("erasure verified" in m for m in messages(app))
        assert int(record.id) in record_ids_on_disk(sample_path)
        assert audit_actions_on_disk(sample_path) == ["ingest"]
        text = screen_text(app)
        assert f"✗ {sample_path} was replaced by another file" in text
        assert "o reopens it" in text and "o Reopen" in text
        # The next change is refused before its dialog asks for a reason.
        await pilot.press("f")
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmRecordAction)
        assert messages(app).count(refusal) == 2
        await pilot.press("o")
        await settle(pilot)
        assert app.moved is None
        assert f"Reopened {sample_path}: showing the file now at that path." in messages(app)
        assert "o reopens it" not in screen_text(app)
        await pilot.press("f")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmRecordAction)
        await confirm_forget_dialog(pilot, "client asked")
        assert any(m.endswith("erasure verified · audit event #2") for m in messages(app))
        assert int(record.id) not in record_ids_on_disk(sample_path)
        assert audit_actions_on_disk(sample_path) == ["ingest", "forget"]
    app.source.close()


async def test_the_live_poll_says_when_the_file_was_deleted(sample_path: Path):
    app = native_app(sample_path, poll_interval=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{sample_path}{suffix}").unlink(missing_ok=True)
        await wait_for(pilot, lambda: app.moved is not None)
        await settle(pilot)
        assert app.moved == f"{sample_path} was deleted since memtui opened it"
        assert any(m.startswith(f"{sample_path} was deleted since") for m in messages(app))
        assert f"✗ {sample_path} was deleted" in screen_text(app)
        await pilot.press("f")
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmRecordAction)
        assert any(m.startswith("Nothing was changed: ") for m in messages(app))
        await pilot.press("o")
        await settle(pilot)
        assert (
            f"Could not reopen the store: nothing is at {sample_path} now. Press o to try "
            "again, or q to quit." in messages(app)
        )
        assert app.moved is not None
    app.source.close()


async def test_a_foreign_store_replaced_under_the_app_refuses_the_forget(tmp_path: Path):
    path = copy_fixture(LANGGRAPH, tmp_path / "store")
    source = open_source(path, allow_writes=True, now=LG_NOW)
    app = make_app(source, operator="tester", poll_interval=None, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        record = app.query_one(RecordTable).current
        assert record is not None
        await pilot.press("f")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmRecordAction)
        replace_file(path, copy_fixture(LANGGRAPH, tmp_path / "restored"))
        await confirm_forget_dialog(pilot, "client asked")
        assert any(
            m.startswith(f"Nothing was changed: {path} was replaced by another file")
            for m in messages(app)
        )
        # No reopen was given to this app: o says how to open it again.
        await pilot.press("o")
        await settle(pilot)
        assert f"Quit (q) and open {path} again." in messages(app)
    source.close()
    with open_source(path, now=LG_NOW) as reopened:
        assert reopened.get(record.id) is not None
