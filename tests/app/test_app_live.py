"""A live agent writing beside the app, a busy database, and the check banner.

The writer is a real second process (``python -c`` with ``MemoryStore.add_record`` in a
loop): the app notices its commits through ``PRAGMA data_version``, refreshes Browse
without moving the operator's cursor, and the operator's forget waits its turn. At the
end every row the writer wrote is on file, less the one the operator forgot.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from textual import events
from textual.widgets import Input, Static

from memtui.core.store import MemoryStore, MemoryStoreError
from memtui.tui import check_process, record_table
from memtui.tui.app import make_app
from memtui.tui.browse import RecordTable, ScopeTree
from memtui.tui.dialogs import ConfirmRecordAction
from memtui.tui.search_view import SearchPane
from memtui.tui.testing import build_sample_db, fixed_clock, screen_text, settle, wait_for

SIZE = (120, 40)
ENGAGEMENT = "live-agent"

WRITER = """
import os, sys, time
from memtui.core.store import MemoryStore, MemoryStoreError
path, seconds, pause = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
stop = path + ".stop"
store = MemoryStore(path, operator="agent")
print("ready", flush=True)
deadline = time.monotonic() + seconds
written = 0
while time.monotonic() < deadline and not os.path.exists(stop):
    try:
        store.add_record(tier="working", record_type="observation",
                         content=f"agent observation {written}", engagement=sys.argv[4])
    except MemoryStoreError as error:  # the app's forget held the lock past the timeout
        if "busy" not in str(error):
            raise
        continue  # as an agent does: try again
    written += 1
    time.sleep(pause)
store.close()
print(written, flush=True)
"""


@pytest.fixture
def sample_path(tmp_path: Path) -> Path:
    return build_sample_db(tmp_path / "sample.db")


@pytest.fixture
def short_sample_path():
    """The sample database at a short path: the check banner names the file's whole path
    at 120 columns only if it is short (pytest's folders are longer in a parallel run)."""
    with tempfile.TemporaryDirectory(prefix="memtui-") as folder:
        yield build_sample_db(Path(folder) / "sample.db")


def start_writer(path: Path, seconds: float, pause: float = 0.01) -> subprocess.Popen:
    """The agent: writes for ``seconds`` at most, or until ``stop_writer``."""
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(seconds), str(pause), ENGAGEMENT],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def agent_adds(path: Path, content: str) -> None:
    """One write by another process (a second store in this process would share its
    POSIX locks with the app's: not what an agent beside the app looks like)."""
    script = (
        "import sys\nfrom memtui.core.store import MemoryStore\n"
        "with MemoryStore(sys.argv[1], operator='agent') as s:\n"
        "    s.add_record(tier='working', record_type='note', content=sys.argv[2])\n"
    )
    subprocess.run([sys.executable, "-c", script, str(path), content], check=True, timeout=60)


def stop_writer(path: Path, proc: subprocess.Popen) -> int:
    """Stop the agent; the number of records it wrote."""
    Path(f"{path}.stop").touch()
    assert proc.stdout is not None
    written = int(proc.stdout.readline())
    assert proc.wait(timeout=30) == 0
    return written


def working_live(app) -> int:
    node = app.query_one(ScopeTree).find("tier", "working", "working")
    return node.data.live if node is not None and node.data is not None else -1


def current_id(table: RecordTable) -> str | None:
    return table.current.id if table.current is not None else None


def agent_rows(path: Path) -> list[str]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT content FROM records WHERE engagement = ? ORDER BY id", (ENGAGEMENT,)
        ).fetchall()
    return [r[0] for r in rows]


async def press_while_writing(
    pilot, key: str, done: Callable[[], bool], what: str, timeout: float = 10.0
) -> None:
    """One key press, sent as ``pilot.press`` sends it, then waited for by its effect.

    ``pilot.press`` waits (up to a second, twice) for the process to go idle, which the
    refreshes of a writing agent's commits keep it from: each key would cost seconds of
    refreshes. The key goes through the app's own key handling all the same."""
    event = events.Key(key, key if len(key) == 1 else None)
    event.set_sender(pilot.app)
    pilot.app.post_message(event)
    await wait_for(pilot, done, timeout=timeout, what=what)


async def _live_writer_beside_the_app(sample_path: Path, seconds: float, pause: float) -> None:
    """The agent writes for ``seconds`` (more if the steps take longer), one record every
    ``pause`` seconds at most; the operator watches, then forgets one of its records while
    it writes. ``seconds`` 0: the agent stops once it has written after the forget."""
    with MemoryStore(sample_path, clock=fixed_clock, operator="tester") as store:
        working_at_open = store.tier_counts()["working"]
        app = make_app(store, poll_interval=0.2)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            table = app.query_one(RecordTable)
            first = table.current
            assert first is not None and working_live(app) == working_at_open
            # The operator looks at the third row while the agent writes.
            await pilot.press("down", "down")
            await settle(pilot)
            watched = table.current
            proc = start_writer(sample_path, 120, pause)
            started = time.monotonic()
            try:
                # The tree, the header and the table follow the agent's writes.
                await wait_for(pilot, lambda: working_live(app) >= working_at_open + 5)
                await wait_for(
                    pilot,
                    lambda: any(r.scope.get("engagement") == ENGAGEMENT for r in table.records),
                )
                assert table.current is not None and table.current.id == watched.id
                # (the header's new count and its width are laid out a frame apart; the
                # screen is read once the count is there, not on every look)
                await wait_for(pilot, lambda: app.query_one("#live", Static).display)
                await wait_for(pilot, lambda: "new since open" in screen_text(app).splitlines()[0])
                # The screen answers while the agent writes: both keys are handled (waited
                # for by their effect: the agent's commits keep the app's workers busy).
                await press_while_writing(
                    pilot, "down", lambda: current_id(table) not in (None, watched.id), "down"
                )
                await press_while_writing(
                    pilot, "up", lambda: current_id(table) == watched.id, "up"
                )
                # Forget one of the agent's records while it keeps writing.
                tree = app.query_one(ScopeTree)
                await wait_for(
                    pilot, lambda: tree.find("engagement", "working", ENGAGEMENT) is not None
                )
                tree.move_cursor(tree.find("engagement", "working", ENGAGEMENT))
                # Until its first page arrives the table still shows the rows before.
                await wait_for(
                    pilot,
                    lambda: (
                        table.scope is not None
                        and table.scope.value == ENGAGEMENT
                        and bool(table.records)
                        and all(r.scope.get("engagement") == ENGAGEMENT for r in table.records)
                    ),
                )
                table.focus()
                # The dialog is up once its reason box (mounted with it) has the focus.
                await press_while_writing(
                    pilot,
                    "f",
                    lambda: (
                        isinstance(app.screen, ConfirmRecordAction)
                        and getattr(app.focused, "id", None) == "reason"
                    ),
                    "the dialog",
                )
                dialog = app.screen
                target = dialog.record
                assert target.scope.get("engagement") == ENGAGEMENT
                dialog.query_one("#reason", Input).value = "mistake"
                # From the reason: tab to Cancel, tab to Forget, enter presses it.
                for key, focused in (("tab", "cancel"), ("tab", "confirm")):
                    await press_while_writing(
                        pilot, key, lambda f=focused: getattr(app.focused, "id", None) == f, key
                    )
                await press_while_writing(
                    pilot,
                    "enter",
                    lambda: store.get(int(target.id)) is None and app.saving is None,
                    "the forget",
                    timeout=30,  # its checkpoint waits out the agent's writes
                )
                assert proc.poll() is None, "the writer was still writing during the forget"
                # The agent goes on writing after the forget, then stops.
                before = working_live(app)
                await wait_for(pilot, lambda: working_live(app) > before)
                if seconds > 0:  # the soak: the agent goes on for its whole time
                    await pilot.pause(max(0.0, seconds - (time.monotonic() - started)))
            finally:
                written = stop_writer(sample_path, proc)
            # After the writer stopped: one last poll and every view agrees with the file.
            total = written - 1
            await wait_for(
                pilot,
                lambda: working_live(app) == working_at_open + total and not app.browse.refreshing,
            )
            await settle(pilot)
            assert table.scope is not None and table.scope.live == total
            while not table.exhausted:  # the table pages; scroll to its end
                await pilot.press("end")
                await settle(pilot)
            assert [r.content for r in table.records] == agent_rows(sample_path)
            assert app.new_since_open == written
            assert f"live: {written} new since open" in screen_text(app).splitlines()[0]
            events = store.audit_events()
            assert events[0]["action"] == "forget" and events[0]["record_ids"] == [int(target.id)]
            assert events[0]["reason"] == "mistake"
            await pilot.press("4")  # the Audit tab, built now, shows the forget first
            await settle(pilot)
            assert app.query_one("#audit-pane").events[0]["id"] == events[0]["id"]
            assert store.verify_audit() is None
    rows = agent_rows(sample_path)
    expected = [f"agent observation {i}" for i in range(written)]
    expected.remove(target.content)
    assert rows == expected, "every row the writer wrote is on file, less the forgotten one"


@pytest.mark.starts_first
async def test_a_live_writer_shows_up_and_a_forget_during_its_writes_succeeds(
    sample_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # The agent writes a few pages of rows, not hundreds: pages of 25, not 200, keep the
    # final check paging the table to its end.
    monkeypatch.setattr(record_table, "PAGE_SIZE", 25)
    # The agent stops once the forget is done and its next write is seen (seconds 0),
    # writing at most 20 records a second: a few pages of rows for the final check.
    await _live_writer_beside_the_app(sample_path, seconds=0, pause=0.05)


@pytest.mark.soak
async def test_a_live_writer_soak(sample_path: Path):
    await _live_writer_beside_the_app(sample_path, seconds=30, pause=0.01)


async def test_the_search_says_when_the_database_changed_and_f5_reruns_it(sample_path: Path):
    with MemoryStore(sample_path, clock=fixed_clock, operator="tester") as store:
        app = make_app(store, poll_interval=0.1)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("slash")
            await settle(pilot)
            app.query_one("#query", Input).value = "sqlmap"
            await pilot.press("enter")
            await settle(pilot)
            pane = app.query_one(SearchPane)
            before = len(pane.response.results)
            agent_adds(sample_path, "sqlmap found a new injection")
            await wait_for(pilot, lambda: pane.results_stale)
            assert "database changed — F5 re-runs the search" in screen_text(app)
            assert len(pane.response.results) == before  # not re-ranked under the cursor
            await pilot.press("f5")
            await settle(pilot)
            assert not pane.results_stale
            assert len(pane.response.results) == before + 1
            assert "database changed" not in screen_text(app)
            # ctrl+r does the same, for terminals where F5 is taken.
            agent_adds(sample_path, "sqlmap again")
            await wait_for(pilot, lambda: pane.results_stale)
            await pilot.press("ctrl+r")
            await settle(pilot)
            assert not pane.results_stale and len(pane.response.results) == before + 2


async def test_an_agent_side_refutation_shows_up_on_the_open_audit_and_lanes_tabs(
    sample_path: Path,
):
    """First, the check on start: a healthy database shows no check banner. The check
    runs in a child process: closing any descriptor of the database file in the app's
    process would cancel the app's POSIX locks; a reader in another process closing its
    connection would then delete the WAL and shared memory the app still uses."""
    with MemoryStore(sample_path, clock=fixed_clock, operator="tester") as store:
        tactic = store.fetch(record_type="tactic", limit=1)[0]
        app = make_app(store, poll_interval=0.1)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            # The check on a healthy database: no banner.
            await wait_for(pilot, lambda: app.check_report is not None)
            assert app.check_report["ok"]
            assert not app.query_one("#check-banner").display
            assert "memtui check" not in screen_text(app)
            # The app's locks outlive the check: another reader's close keeps the WAL.
            assert Path(f"{sample_path}-wal").exists() and Path(f"{sample_path}-shm").exists()
            subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
                    "c.execute('SELECT count(*) FROM records').fetchall(); c.close()",
                    str(sample_path),
                ],
                check=True,
                timeout=60,
            )
            assert Path(f"{sample_path}-wal").exists(), "the WAL outlives another reader's close"
            assert Path(f"{sample_path}-shm").exists(), "so does the shared memory"
            # The agent refutes a tactic while Lanes (built, then left) and Audit are open.
            await pilot.press("3")  # Lanes built (tabs are built when first shown), then left
            await settle(pilot)
            await pilot.press("4")
            await settle(pilot)
            audit = app.query_one("#audit-pane")
            before = len(audit.events)
            script = (
                "import sys\nfrom memtui.core.store import MemoryStore\n"
                "with MemoryStore(sys.argv[1], operator='agent') as s:\n"
                "    s.refute(int(sys.argv[2]), reason='agent saw it fail')\n"
            )
            subprocess.run(
                [sys.executable, "-c", script, str(sample_path), str(tactic.id)],
                check=True,
                timeout=60,
            )
            await wait_for(pilot, lambda: len(audit.events) == before + 1)
            assert audit.events[0]["reason"] == "agent saw it fail"
            assert "agent saw it fail" in screen_text(app)
            assert "✓ chain verified" in screen_text(app)
            # The Lanes tab was hidden: it reloads when shown, without the refuted tactic.
            assert app.query_one("#lanes-pane").stale
            await pilot.press("3")
            await settle(pilot)
            lanes = app.query_one("#lanes-pane")
            assert not lanes.stale
            shown = [row["record_id"] for row in lanes.data.get("tactics", [])]
            assert tactic.id not in shown


async def test_a_forget_waits_while_another_connection_holds_the_write_lock(sample_path: Path):
    with MemoryStore(
        sample_path, clock=fixed_clock, operator="tester", busy_timeout_ms=50
    ) as store:
        app = make_app(store, busy_retries=40, retry_delay=0.05)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            record = app.query_one(RecordTable).current
            assert record is not None
            await pilot.press("f")
            await settle(pilot)
            assert isinstance(app.screen, ConfirmRecordAction)
            app.screen.query_one("#reason", Input).value = "erase while the agent writes"
            holder = sqlite3.connect(sample_path, isolation_level=None)
            try:
                holder.execute("BEGIN IMMEDIATE")  # the agent's write lock
                await pilot.press("tab", "tab", "enter")
                badge = app.query_one("#busy", Static)
                await wait_for(pilot, lambda: "retrying" in str(badge.render()))
                header = screen_text(app).splitlines()[0]
                assert "database busy — retrying (" in header and "/40)" in header
                assert any("database is busy" in n.message for n in app._notifications)
                assert store.get(int(record.id)) is not None
                # The screen answers while the forget waits.
                await pilot.press("2")
                await wait_for(pilot, lambda: app.active_tab == "search")
                await pilot.press("1")
            finally:
                holder.execute("ROLLBACK")
                holder.close()
            await wait_for(pilot, lambda: app.saving is None, timeout=15)
            await settle(pilot)
            assert store.get(int(record.id)) is None
            event = store.audit_events()[0]
            assert event["action"] == "forget" and event["record_ids"] == [int(record.id)]
            assert event["reason"] == "erase while the agent writes"
            assert not badge.display
            assert any(f"audit event #{event['id']}" in n.message for n in app._notifications)


# ---------------------------------------------------------------- check banner


# A healthy database's check (no banner; run in a child process so the app keeps its
# locks) is checked at the start of the agent-side refutation test above.


async def test_an_edited_audit_row_raises_the_check_banner(short_sample_path: Path):
    sample_path = short_sample_path
    conn = sqlite3.connect(sample_path, isolation_level=None)
    conn.execute("DROP TRIGGER audit_events_no_update")
    conn.execute("UPDATE audit_events SET reason = 'nothing to see [b]\x1b[2J' WHERE id = 1")
    conn.close()
    with MemoryStore(sample_path, clock=fixed_clock, operator="tester") as store:
        app = make_app(store)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await wait_for(pilot, lambda: app.check_report is not None)
            await settle(pilot)
            assert app.query_one("#check-banner").display
            text = screen_text(app)
            assert "memtui check found" in text
            assert "audit: audit chain broken at event #1" in text
            assert f"memtui check {sample_path}" in text
            # The app still works below the banner.
            await pilot.press("down")
            await settle(pilot)
            assert app.query_one(RecordTable).cursor_row == 1


@pytest.mark.parametrize("how", ["raises", "child-fails"])
async def test_a_check_that_cannot_complete_leaves_a_banner(
    short_sample_path: Path, monkeypatch, how
):
    """Not a passing toast: a banner that stays, with the reason in one line and the
    command that shows more."""
    sample_path = short_sample_path
    if how == "raises":

        def broken(path, started=None):
            raise MemoryStoreError("file is not a database\n(second line of detail)")

        monkeypatch.setattr(check_process, "run_check", broken)
        reason = "(second line of detail)"
    else:  # the check's own process dies as it would on a file with random bytes in it
        monkeypatch.setattr(
            check_process,
            "CHECK_SCRIPT",
            "import sqlite3\nraise sqlite3.DatabaseError('database disk image is malformed')",
        )
        reason = (
            "memtui check could not run: sqlite3.DatabaseError: database disk image is malformed"
        )
    with MemoryStore(sample_path, clock=fixed_clock, operator="tester") as store:
        app = make_app(store)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            banner = app.query_one("#check-banner")
            await wait_for(pilot, lambda: banner.display, timeout=30)
            await pilot.pause(0.5)
            await settle(pilot)
            assert banner.display
            text = screen_text(app)
            assert "memtui check could not complete on this file" in text
            assert reason in text
            assert f"Run memtui check {sample_path} to see more" in text
            await pilot.resize_terminal(100, 30)
            await settle(pilot)
            assert banner.display and reason in screen_text(app)


def test_the_live_writer_script_runs(tmp_path: Path):
    """The writer the live tests use works on its own (a quick, separate failure)."""
    path = build_sample_db(tmp_path / "w.db")
    proc = start_writer(path, 0.3)
    assert proc.stdout is not None
    written = int(proc.stdout.readline())
    assert proc.wait(timeout=30) == 0
    assert written > 0
    assert agent_rows(path) == [f"agent observation {i}" for i in range(written)]
