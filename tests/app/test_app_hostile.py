"""Hostile content is inert in every view, asserted on what would reach the terminal.

The database is written the way an attacker would write it (``build_hostile_db``):
Rich markup, ANSI/OSC sequences (clear screen, colour, cursor move, OSC 52 clipboard
write, OSC 8 link, title change), NUL/BEL/BS/DEL/C1, a 1 MB string, a 50,000-character
line, bidi overrides, RTL scripts, combining marks, wide CJK and emoji, in content,
scope fields, metadata keys and values, tool names, findings, audit reasons and the
operator's name.

Each view is checked twice: ``terminal_output`` is the exact byte stream a full repaint
writes (only Textual's own cursor moves and colours may be control sequences in it),
and ``screen_text`` is what the operator reads (the escapes and the markup are there
as visible text).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from rich.cells import cell_len
from textual.widgets import Input

from memtui.core.store import MemoryStore
from memtui.sources.base import DetailSection
from memtui.sources.native import NativeSource
from memtui.tui.app import make_app
from memtui.tui.browse import RecordDetail, RecordTable, ScopeTree
from memtui.tui.dialogs import ConfirmRecordAction, ForgetEngagementDialog, RevealDialog
from memtui.tui.format import DETAIL_CONTENT_CHARS
from memtui.tui.full_text import FullText, FullTextScreen
from memtui.tui.testing import (
    HOSTILE_LINE,
    MARKUP,
    build_hostile_db,
    fixed_clock,
    screen_text,
    settle,
    stray_controls,
    terminal_output,
)

SIZE = (120, 40)
SECRETS = ("tok-SECRET-0042", "hunter2-SECRET", "SECRET-COOKIE", "SECRET-T0KEN")
VISIBLE_ESCAPES = (
    "\\x1b[2J",
    "\\x1b[31m",
    "\\x1b[10;10H",
    "\\x1b]52;c;SGVsbG8=\\x07",
    "\\x1b]8;;https://evil.example\\x1b\\",
    "\\x1b]0;pwned\\x07",
    "ctl\\x00\\x07\\x08\\x7f\\x9bend",
    "\\u202eevil",
)


@pytest.fixture(scope="module")
def built_hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_hostile_db(tmp_path_factory.mktemp("hostile") / "hostile.db")


@pytest.fixture
def store(built_hostile: Path, tmp_path: Path):
    """The hostile database, built once for the module, copied for each test."""
    path = shutil.copy(built_hostile, tmp_path / "hostile.db")
    with MemoryStore(path, clock=fixed_clock, operator="tester") as opened:
        yield opened


def inert(app, where: str) -> str:
    """The screen as text, after checking that no control character from the data
    would reach the terminal and that no secret value is on screen."""
    output = terminal_output(app)
    assert stray_controls(output, app.size.height) == [], where
    text = screen_text(app)
    for line in text.splitlines():
        assert cell_len(line) <= app.size.width, (where, line)
    for secret in SECRETS:
        assert secret not in text, (where, secret)
    return text


def detail_text(app) -> str:
    return app.query_one("#detail-body").render().plain  # type: ignore[attr-defined]


async def test_browse_full_text_search_lanes_and_audit_are_inert(store: MemoryStore):
    """Every tab in one app run, each view checked on its own: the browse table, detail
    and tree, the full-text screen, search results and a breakdown, Lanes and Audit."""
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = inert(app, "browse")
        table = app.query_one(RecordTable)
        assert table.current is not None and table.current.id == "1"
        # The row: markup literal, escapes visible, cut to the column with an ellipsis.
        row = next(line for line in text.splitlines() if "hostile [bold red]boom[/]" in line)
        assert "note\\x1b[31" in row and "…" in row
        # The detail pane: every sequence shown as text, the markup as written.
        assert MARKUP in text
        assert app.query_one(RecordDetail).border_title == "record #1"
        detail = detail_text(app)
        for escape in VISIBLE_ESCAPES:
            assert escape in detail, escape
        assert "\x1b" not in detail and "\x07" not in detail and "\x00" not in detail
        # The tree: hostile scope names are escaped and cut to fit, their counts stay.
        tree = app.query_one(ScopeTree)
        node = tree.find("engagement", "working", f"eng{MARKUP}\x1b]0;pwned\x07")
        assert node is not None and node.data.kind == "engagement"
        assert str(node.label).startswith("eng[bold red]") and str(node.label).endswith(" 1")
        assert "pwned\\x07 1" in str(node.label)
        assert "\\x1b[2J" in text and "[bold red]" in text
        # Metadata: masked where the name says secret, the hostile key escaped.
        assert "password" in detail and "••••••••" in detail
        assert "masked: nested.api_token, password, token\\x1b]0;pwned\\x07[b]" in detail

        # -- the full-text screen of the same record shows its control characters as escapes.
        record = table.current
        assert record.content.startswith("hostile [bold red]")
        app.push_screen(FullTextScreen(record))
        await settle(pilot)
        text = inert(app, "full text of the hostile record")
        view = app.screen.query_one(FullText)
        shown = view.visible_text()
        assert all(line.strip() in text for line in shown.splitlines()), "full text: on screen"
        whole = shown.replace("\n", "")  # escapes may run across the wrap
        for escape in VISIBLE_ESCAPES:
            assert escape in whole, ("full text", escape)
        assert MARKUP in whole and "second line" in shown
        app.pop_screen()
        await settle(pilot)

        # -- wide and right-to-left text, combining marks: rows keep their width.
        assert app.focused is table
        await pilot.press("end")
        await settle(pilot)
        text = inert(app, "browse, international row")
        assert "漢字ツー" in text and "\\u202eright-to-left" in text
        assert "مرحبا بالعالم" in detail_text(app)

        # -- search: the results and a breakdown.
        await pilot.press("slash")
        query = app.query_one("#query", Input)
        query.value = "hostile tactic"  # typing is not what is tested here
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("enter")  # expand the first result's breakdown
        await settle(pilot)
        text = inert(app, "search")
        assert "#6 tactic  hostile tactic hostile [bold red]boom[/] [link=" in text
        assert "adds up" in text
        await pilot.press("slash")
        query.value = "hostile"
        await pilot.press("enter")
        await settle(pilot)
        text = inert(app, "search, every hostile record")
        assert "note\\x1b[31m" in text and "\\u202eright-to-left" in text

        # -- the Lanes and Audit tabs.
        await pilot.press("3")
        await settle(pilot)
        text = inert(app, "lanes")
        assert "burp\\x1b]52;c;SGVsbG8=\\x07" in text
        assert "hostile finding hostile [bold red" in text
        assert "F-high\\x1b[31m" in text
        # The engagement's name, in its Select (cut to fit) and the history's title.
        assert "eng[bold red…]0;pwned\\x07 ▼" in text
        assert f"host history: eng{MARKUP}\\x1b]0;pwned\\x07" in text
        await pilot.press("4")
        await settle(pilot)
        text = inert(app, "audit")
        assert f"mallory{MARKUP}\\x1b]0;pwned\\x07" in text
        assert "refuted hostile [bold red]boom[/]" in text
        assert "\\x1b[10;10H" in text


async def test_a_megabyte_record_is_capped_in_the_detail_and_m_shows_all_of_it(
    store: MemoryStore,
):
    """The detail pane stops at 100,000 characters and stays responsive; m shows the
    whole content, its end included, without holding the screen, and escape goes back.
    One app run: the capped detail, m from the table, the pane scrolled, m from the
    detail pane on a narrow terminal, then the 50,000-character line."""
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.query_one(RecordTable)
        assert len(table.current.content) < DETAIL_CONTENT_CHARS
        assert "Full text" not in screen_text(app).splitlines()[-1]  # only where it is cut
        await pilot.press("down")  # the 1 MB record
        await settle(pilot)
        # -- capped in the detail.
        record = table.current
        assert record is not None and len(record.content) > 1_000_000
        detail = detail_text(app)
        assert len(detail) < DETAIL_CONTENT_CHARS + 30_000, "capped"
        assert "TAILMARK" not in detail
        hidden = len(record.content) - DETAIL_CONTENT_CHARS
        assert f"… {hidden:,} more characters not shown — press m to show all" in detail
        # The 1 MB metadata value is capped too.
        assert "more characters not shown" in detail.split("blob", 1)[1], "capped: metadata"
        text = inert(app, "browse, 1 MB record")
        assert "TAILMARK" not in text
        assert "m Full text" in text.splitlines()[-1], "the footer offers m"

        # -- m from the table: the whole content.
        await pilot.press("m")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, FullTextScreen), "m opens the full text"
        view = screen.query_one(FullText)
        assert app.focused is view
        text = inert(app, "full text, start")
        content = table.current.content
        assert "megabyte hostile 0123456789" in text and f"{len(content):,} characters" in text
        assert "TAILMARK" not in text
        await pilot.press("end")
        await settle(pilot)
        text = inert(app, "full text, end")
        assert "0123456789 TAILMARK" in text, "full text: its end"
        assert "TAILMARK" in view.visible_text()
        # Every character is there, in order, once.
        assert "".join(view.lines) == content, "full text: every character"
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, FullTextScreen) and app.focused is table

        # -- the pane answers at once after rendering it: scroll it.
        app.query_one(RecordDetail).focus()
        await pilot.press("end")
        await settle(pilot)
        assert "more characters not shown" in screen_text(app), "the pane scrolled"

        # -- m from the detail pane too, on a narrow terminal.
        await pilot.resize_terminal(80, 24)
        assert app.focused is app.query_one(RecordDetail)
        await pilot.press("m")
        await settle(pilot)
        assert isinstance(app.screen, FullTextScreen), "m from the detail pane"
        await pilot.press("end")
        await settle(pilot)
        assert "TAILMARK" in inert(app, "full text at 80 columns")
        await pilot.press("escape")
        await settle(pilot)

        # -- move on: the 50,000-character line is under the cap, whole in the detail,
        # cut in the row (on the narrow terminal, where the row is cut the more).
        await pilot.press("shift+tab", "down")  # back to the table, next record
        await settle(pilot)
        assert app.query_one(RecordTable).current.content.endswith("LINEEND")
        assert "LINEEND" in detail_text(app), "long line: whole in the detail"
        text = inert(app, "browse, long line")
        row = next(line for line in text.splitlines() if "longline hostile" in line)
        assert cell_len(row) <= 80 and "…" in row, "long line: cut in the row"


async def test_the_source_notes_and_detail_sections_are_inert(store: MemoryStore):
    """What a source says about a record (``notes``, ``detail``) is as untrusted as the
    record: markup literal, escapes visible, secrets never shown."""

    class HostileSource(NativeSource):
        def notes(self, record):
            return f"note {HOSTILE_LINE}"

        def detail(self, record_id):
            return [
                DetailSection(
                    title=f"title {MARKUP}\x1b]0;pwned\x07",
                    columns=("col\x1b[31m", f"{MARKUP}"),
                    rows=[(HOSTILE_LINE, "cell\x07"), ("multi\nline\x1b[2J", None)],
                    note=f"section note {HOSTILE_LINE}",
                ),
                DetailSection(title="json", columns=("json",), rows=[(f"{{\n  {MARKUP}\n}}",)]),
            ]

    app = make_app(HostileSource(store), check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        detail = app.query_one(RecordDetail)
        text = detail.text()
        assert f"note hostile {MARKUP}" in text
        assert f"title {MARKUP}\\x1b]0;pwned\\x07" in text
        assert "col\\x1b[31m" in text and "cell\\x07" in text and "multi\\x0aline\\x1b[2J" in text
        assert f"section note hostile {MARKUP}" in text
        assert f"  {{\n    {MARKUP}\n  }}" in text  # one column: its lines kept, indented
        for escape in VISIBLE_ESCAPES:
            assert escape in text, escape
        assert "\x1b" not in text and "\x07" not in text and "\x00" not in text
        app.query_one(RecordDetail).focus()
        await pilot.press("end")
        await settle(pilot)
        assert "section note hostile" in inert(app, "detail sections")


async def test_the_header_dialogs_and_notifications_are_inert(built_hostile: Path, tmp_path: Path):
    """One app run on the hostile database under a hostile file name: the header, the
    forget, reveal and forget-engagement dialogs, then a forget and its notification."""
    path = shutil.copy(built_hostile, tmp_path / "evil\x1b]0;pwned\x07[b]x.db")
    with MemoryStore(path, clock=fixed_clock, operator="tester") as store:
        await header_dialogs_and_notifications(store)


async def header_dialogs_and_notifications(store: MemoryStore) -> None:
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        header = inert(app, "header").splitlines()[0]
        assert "evil\\x1b]0;pwned\\x07[b]x.db" in header, "the header"
        await pilot.press("f")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmRecordAction)
        text = inert(app, "forget dialog")
        assert "[bold red]boom[/]" in text and "\\x1b]52;c;SGVsbG8=\\x07" in text
        assert "sqlmap\\x1b[31m[b]" in text
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("v")
        await settle(pilot)
        assert isinstance(app.screen, RevealDialog)
        text = inert(app, "reveal dialog")
        assert "Reveal a masked field of record #1" in text
        app.screen.query_one("#field").focus()
        await pilot.press("enter")  # open the field list: names escaped, values never
        await settle(pilot)
        text = inert(app, "reveal dialog, field list")
        assert "token\\x1b]0;pwned\\x07[b]" in text
        await pilot.press("escape", "escape")
        await settle(pilot)
        tree = app.query_one(ScopeTree)
        tree.focus()
        tree.move_cursor(tree.find("engagement", "working", f"eng{MARKUP}\x1b]0;pwned\x07"))
        await settle(pilot)
        await pilot.press("F")
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, ForgetEngagementDialog)
        text = inert(app, "forget-engagement dialog")
        assert "[link=https://evil.example]x[/link]\\x1b]0;pwned\\x07  3 records" in text
        assert "note\\x1b[31m" in text
        # An ESC cannot be typed: the name as shown, escapes and all, confirms it.
        dialog.query_one("#reason", Input).value = "closing"
        name = dialog.query_one("#confirm-name", Input)
        name.focus()
        name.value = f"eng{MARKUP}\\x1b]0;pwned\\x0"
        await pilot.press("end", "7")
        assert name.value == f"eng{MARKUP}\\x1b]0;pwned\\x07"
        assert not dialog.query_one("#confirm").disabled
        await pilot.press("escape")
        await settle(pilot)

        # -- forget the hostile record: the notification names its type, escaped.
        tree.move_cursor(tree.find("tier", "working", "working"))
        await settle(pilot)
        table = app.query_one(RecordTable)
        table.focus()
        assert table.current is not None and table.current.id == "1"
        await pilot.press("f")
        await settle(pilot)
        reason = app.screen.query_one("#reason", Input)
        reason.value = "hostile test"
        reason.focus()
        await pilot.press("tab", "tab", "enter")
        await settle(pilot)
        assert store.get(1) is None, "forgotten"
        messages = [n.message for n in app._notifications]
        assert any("note\\x1b[31m #1" in m for m in messages), "the notification"
        assert not any("\x1b" in m for m in messages)
        inert(app, "after forget, with the notification on screen")


@pytest.mark.parametrize(
    "value",
    [
        "plain-engagement-name",
        "\x1b" * 500,
        "漢字" * 300,
        "👩‍💻🔥" * 200,
        "e\u0301\u0301\u0301" * 100,
        "x" * 1_000_000,
        f"eng{MARKUP}\x1b]0;pwned\x07",
    ],
)
@pytest.mark.parametrize("cells", [1, 2, 8, 17, 60])
def test_fit_never_exceeds_its_cells_and_keeps_escapes_visible(value: str, cells: int):
    from memtui.tui.format import fit

    text = fit(value, cells)
    assert text.cell_len <= cells
    assert "\x1b" not in text.plain and "\x07" not in text.plain
    if len(value) > 2 * cells:
        assert "…" in text.plain
