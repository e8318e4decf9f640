"""Launching, help, the command palette, footer keys and small screens."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from textual.command import CommandPalette
from textual.widgets import Footer

from memtui.core.store import MemoryStore, MemoryStoreError
from memtui.tui import launch
from memtui.tui.app import MemtuiApp, make_app
from memtui.tui.browse import RecordTable, ScopeTree
from memtui.tui.dialogs import ConfirmRecordAction
from memtui.tui.help import HelpScreen, key_sections
from memtui.tui.testing import build_sample_db, fixed_clock, screen_text, settle, wait_for

SIZE = (120, 40)


@pytest.fixture
def sample_path(tmp_path: Path) -> Path:
    return build_sample_db(tmp_path / "sample.db")


@pytest.fixture
def store(sample_path: Path):
    with MemoryStore(sample_path, clock=fixed_clock, operator="tester") as opened:
        yield opened


def test_run_app_refuses_a_missing_database_before_starting(tmp_path: Path):
    with pytest.raises(MemoryStoreError, match="no database at"):
        launch.run_app(tmp_path / "nope.db", read_only=False, operator=None, clock=None)
    assert not (tmp_path / "nope.db").exists()


def test_run_app_surfaces_open_errors(tmp_path: Path):
    bogus = tmp_path / "bogus.db"
    bogus.write_text("not a database")
    with pytest.raises(MemoryStoreError, match="not a SQLite database"):
        launch.run_app(bogus, read_only=True, operator=None, clock=None)


def test_cli_reports_open_errors_in_one_line(tmp_path: Path):
    """In process, as ``python -m memtui`` runs it (memtui/__main__.py calls ``main()``;
    tests/app/test_app_keymap.py starts that module in a process of its own)."""
    from click.testing import CliRunner

    from memtui.cli import main

    result = CliRunner().invoke(main, [str(tmp_path / "missing.db")])
    assert isinstance(result.exception, SystemExit)  # an exit, not an uncaught exception
    assert result.exit_code == 1
    assert "no database at" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_run_app_opens_the_store_and_runs_the_app(sample_path: Path, monkeypatch):
    seen = {}

    def fake_run(self: MemtuiApp) -> None:
        seen["read_only"] = self.source.read_only
        seen["operator"] = self.operator
        seen["label"] = self.db_label

    monkeypatch.setattr(MemtuiApp, "run", fake_run)
    launch.run_app(sample_path, read_only=True, operator="alice", clock=fixed_clock)
    assert seen == {"read_only": True, "operator": "alice", "label": "sample.db"}


async def test_help_lists_every_key(store: MemoryStore):
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=(120, 150)) as pilot:  # the whole help on screen
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        text = screen_text(app)
        for _, rows in key_sections(MemtuiApp):
            for key, what in rows:
                assert key in text
                assert what[:30] in text
        for key in ("1", "2", "3", "4", "5", "/", "?", "q", "r", "f", "F", "t", "[", "]", "=", "v"):
            assert any(k == key for _, rows in key_sections(MemtuiApp) for k, _ in rows), key
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, HelpScreen)


def app_binding_classes() -> list[type]:
    """Every class in the app's modules that declares its own bindings (the separate
    collection picker, an app of its own with its own footer, aside)."""
    import importlib
    import inspect
    import pkgutil

    import memtui.tui
    from memtui.tui.collection_picker import CollectionPicker

    found = []
    for info in pkgutil.iter_modules(memtui.tui.__path__):
        module = importlib.import_module(f"memtui.tui.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and cls.__dict__.get("BINDINGS"):
                found.append(cls)
    return [cls for cls in found if cls is not CollectionPicker]


def test_help_lists_every_declared_binding():
    """Each binding with a description, of each widget and screen that declares one, has
    a row in help: its key and what it does."""
    from textual.binding import Binding

    from memtui.tui.help import binding_text, help_classes, key_label

    classes = app_binding_classes()
    assert len(classes) >= 10
    listed = {cls for _, _, group, _ in help_classes(MemtuiApp) for cls in group}
    assert set(classes) <= listed, set(classes) - listed
    rows = [row for _, section in key_sections(MemtuiApp) for row in section]
    for cls in classes:
        for binding in cls.BINDINGS:
            binding = binding if isinstance(binding, Binding) else Binding(*binding)
            if not binding.description:
                continue
            key = key_label(binding)
            assert any(k == key and binding_text(binding) in what for k, what in rows), (
                cls.__name__,
                key,
                binding_text(binding),
            )


async def test_quitting_as_the_first_page_shows_is_clean(store: MemoryStore, monkeypatch):
    """A quit that lands between the first page and the mounting of the hidden tabs
    (a benchmark's pilot does exactly that) ends the app without an error."""
    app = make_app(store, poll_interval=None, check_on_start=False)
    mount_tabs = app._first_screen_shown

    async def quit_then_mount_tabs() -> None:
        app.exit()
        await mount_tabs()

    monkeypatch.setattr(app, "_first_screen_shown", quit_then_mount_tabs)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.return_code is not None)
    assert app.return_code == 0


async def test_readable_at_80_by_24(store: MemoryStore):
    """Each tab, in turn, in one app."""
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        for tab in "1234":
            await pilot.press(tab)
            await settle(pilot)
            text = screen_text(app)
            lines = text.splitlines()
            assert len(lines) == 24, tab
            assert all(len(line) <= 80 for line in lines), tab
            assert "palette" in lines[-1], tab  # the footer is on screen
            if tab == "1":
                table = app.query_one(RecordTable)
                first = table.records[0]
                assert first.content[:10] in text


def table_columns(app) -> list[str]:
    return [str(c.label) for c in app.query_one(RecordTable).columns.values()]


async def test_wide_terminal_shows_every_column(store: MemoryStore):
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        tree = app.query_one(ScopeTree)
        tree.move_cursor(tree.find("tier", "longterm", "longterm"))  # tactics
        await settle(pilot)
        header = screen_text(app)
        for column in ("id", "type", "tool", "grade", "s/a", "created", "expires", "content"):
            assert column in header and column in table_columns(app)


def svg_text(svg: str) -> str:
    """The characters an SVG screenshot shows, without any whitespace."""
    texts = re.findall(r"<text[^>]*>(.*?)</text>", svg, re.S)
    return re.sub(r"\s", "", html.unescape("".join(texts)))


async def test_screen_text_reads_what_the_public_screenshot_shows(store: MemoryStore):
    """``screen_text`` reads Textual's private compositor (no public call returns the
    screen as text); the public ``export_screenshot`` draws the same characters, so a
    Textual that changes the private call fails here, by name."""
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for keys in ((), ("2",), ("question_mark",)):
            await pilot.press(*keys)
            await settle(pilot)
            shown = re.sub(r"\s", "", screen_text(app))
            assert len(shown) > 500, keys
            assert shown in svg_text(app.export_screenshot()), keys


async def test_at_120_columns_a_scope_without_tactics_shows_its_dates(store: MemoryStore):
    """Notes and findings have no grade or successes/attempts: those columns give their
    room to created and expires; a scope of tactics shows its grade and s/a. In the same
    app: the counts have thousands separators, and q (focus still on the records, as at
    start) quits."""
    from memtui.tui.browse import ScopeNode

    app = make_app(store, check_on_start=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.query_one(RecordTable).current.record_type != "tactic"
        assert table_columns(app) == ["id", "type", "tool", "created", "expires", "content"]
        assert "2026-10-03" in screen_text(app)
        tree = app.query_one(ScopeTree)
        tree.move_cursor(tree.find("tier", "longterm", "longterm"))
        await settle(pilot)
        columns = table_columns(app)
        assert {"grade", "s/a"} <= set(columns) and columns[-1] == "content"
        tree.move_cursor(tree.find("tier", "episodic", "episodic"))  # findings
        await settle(pilot)
        assert "grade" not in table_columns(app) and "created" in table_columns(app)

        # The counts have thousands separators.
        app.update_summary({"working": (47_000, 1_234), "episodic": (226, 0)})
        await pilot.pause()
        assert "47,226 live records · 1,234 refuted/expired" in screen_text(app).splitlines()[0]
        label = tree.label_for(ScopeNode("tier", "working", "working", 47_226, 1_234))
        assert label.plain.endswith("working 47,226 +1,234 hidden")

        # q quits.
        assert isinstance(app.focused, RecordTable)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


@pytest.mark.parametrize("press_early", [False, True], ids=["waits", "key-pressed-early"])
async def test_the_tabs_after_browse_are_built_when_first_shown(
    store: MemoryStore, monkeypatch, press_early
):
    """Search, Lanes, Audit and Eval are built the first time they are shown, never at
    start (at a million records they would compete with Browse's first page); a key
    pressed before that page still works, and builds only its own tab."""
    import threading

    from textual.widgets import Input

    app = make_app(store, poll_interval=None, check_on_start=False)
    release = threading.Event()
    original = app.source.page

    def slow_page(*args, **kwargs):
        release.wait(10)
        return original(*args, **kwargs)

    hidden = ("search", "lanes", "audit", "eval")
    monkeypatch.setattr(app.source, "page", slow_page)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.2)
        assert app.mounted_pane("browse") is not None
        assert [app.mounted_pane(t) for t in hidden] == [None] * 4
        if press_early:
            await pilot.press("2")
            await pilot.pause(0.3)
        release.set()
        await settle(pilot)
        assert app.query_one(RecordTable).records
        built = [t for t in hidden if app.mounted_pane(t) is not None]
        if press_early:
            assert built == ["search"]
            assert app.active_tab == "search"
            assert app.focused is app.query_one("#query", Input)
        else:
            assert built == []
            assert app.active_tab == "browse"
        await press_each(pilot, ("escape", "3") if press_early else ("3",))
        assert app.active_tab == "lanes" and app.mounted_pane("lanes") is not None
        assert app.focused is not None and app.focused.id == "lanes-profile"
        assert FLASK_PROFILE in screen_text(app)


async def test_the_source_banner_reflows_on_resize(store: MemoryStore):
    """Laid out for the width at start; a narrower terminal gets it again, note by note."""
    app = make_app(store, check_on_start=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)

        def banner_lines() -> list[str]:
            return str(app.query_one("#source-banner").render()).splitlines()

        wide = banner_lines()
        assert len(wide) == 1 and "256 dims" in wide[0]
        await pilot.resize_terminal(70, 24)
        await settle(pilot)
        narrow = banner_lines()
        assert len(narrow) > 1
        assert all(len(line) <= 68 for line in narrow)
        assert any(line.endswith("256 dims") for line in narrow)  # a note is never split
        text = screen_text(app)
        assert all(line in text for line in narrow)
        await pilot.resize_terminal(160, 40)
        await settle(pilot)
        assert banner_lines() == wide


LOGICAL_NOWS = [
    (100, "now 100 (logical time)"),
    (None, "now none given (logical time; pass --now N)"),
]


@pytest.mark.parametrize(("now", "shown"), LOGICAL_NOWS)
def test_a_logical_time_stores_clock_is_its_own_now(tmp_path: Path, now, shown):
    """A tenant store's clock is the --now it was given, not the wall clock: the text
    the header's clock shows (test below: on screen, the longer of the two)."""
    from fixtures.sources_support import TENANT, copy_fixture

    from memtui.sources import open_source

    source = open_source(copy_fixture(TENANT, tmp_path), now=now)
    try:
        assert make_app(source, check_on_start=False)._clock_text().plain == shown
    finally:
        source.close()


async def test_a_logical_time_store_shows_its_own_now(tmp_path: Path):
    """A tenant store's clock is the --now it was given, not the wall clock."""
    from fixtures.sources_support import TENANT, copy_fixture

    from memtui.sources import open_source

    now, shown = LOGICAL_NOWS[1]
    source = open_source(copy_fixture(TENANT, tmp_path), now=now)
    try:
        app = make_app(source, check_on_start=False)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            header = screen_text(app).splitlines()[0]
            assert header.rstrip().endswith(shown)
            assert "Z" not in header.split("now", 1)[1]  # no wall-clock time
    finally:
        source.close()


FLASK_PROFILE = "python:postgresql:waf_present:generic_waf:rest:flask"
STARTING_FOCUS = {
    "records table": (),
    "records table paged down": ("pagedown",),
    "tree": ("shift+tab",),
    "detail": ("tab",),
    "detail paged down": ("tab", "pagedown"),
    "detail at its end": ("tab", "end"),
    "detail back at its top": ("tab", "end", "home"),
    "lanes profile select": ("3",),
    "lanes select open": ("3", "enter"),
    "audit table at its end": ("4", "end"),
    "after a dialog closes": ("f", "escape"),
    "after help closes over a scrolled detail": ("tab", "end", "question_mark", "escape"),
}
"""Keys that leave focus somewhere, from the app's first screen (focus in the records)."""


@pytest.fixture(scope="module")
def built_sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_sample_db(tmp_path_factory.mktemp("focus") / "sample.db")


@pytest.fixture
def sample_copy(built_sample: Path, tmp_path: Path):
    """The sample database, built once for the module, copied for each test."""
    import shutil

    path = tmp_path / "sample.db"
    shutil.copy(built_sample, path)
    with MemoryStore(path, clock=fixed_clock, operator="tester") as opened:
        yield opened


async def press_each(pilot, keys: tuple[str, ...]) -> None:
    """Press the keys one by one, each handled (with the work it starts) before the next."""
    for key in keys:
        await pilot.press(key)
        await settle(pilot)


async def search_tactic(pilot) -> None:
    """2, "tactic" typed into the query box, enter: the search's results have focus."""
    await press_each(pilot, ("2",))
    await pilot.press(*"tactic")
    await press_each(pilot, ("enter",))


async def type_q_into_the_query_box(app: MemtuiApp, pilot, came_from: str) -> None:
    """The query box has focus and takes the letter q, the app's quit key: the app runs on
    and the box holds just "q" (the key that brought focus there did not type itself).

    One letter stands for all: the box takes every printable key before any binding
    but a priority one, and q (quit) is the binding a typed query must never fire."""
    from memtui.tui.search_view import QueryInput

    box = app.query_one(QueryInput)
    assert app.active_tab == "search", came_from
    assert app.focused is box, came_from
    await press_each(pilot, ("q",))
    assert app.return_code is None, came_from  # still running
    assert box.value == "q", came_from
    box.value = ""


async def back_to_browses_first_focus(app: MemtuiApp, pilot, came_from: str) -> None:
    """Browse shown, focus on its records, as at start: what the 1 key does from any
    place where it is not typed (the query box takes it as a letter)."""
    await app.run_action("switch_tab('browse')")
    await settle(pilot)
    assert app.active_tab == "browse", came_from
    assert isinstance(app.focused, RecordTable), came_from


@pytest.mark.starts_first
async def test_2_and_slash_put_focus_in_the_query_box_from_every_focus(sample_copy: MemoryStore):
    """Before any search, 2 and / reach the query box wherever focus was (a scrolled
    detail pane, a Lanes select, a closed dialog): typing a query never quits the app.
    Every place in one app: between them the app goes back to Browse's first focus."""
    app = make_app(sample_copy, poll_interval=None, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for place, before in STARTING_FOCUS.items():
            for key in ("2", "slash"):
                came_from = f"{key} after {place} {before}"
                await press_each(pilot, (*before, key))
                await type_q_into_the_query_box(app, pilot, came_from)
                await back_to_browses_first_focus(app, pilot, came_from)


@pytest.mark.starts_first
async def test_from_a_scrolled_detail_each_tab_key_focuses_the_tabs_main_widget(
    sample_copy: MemoryStore,
):
    """Lanes (its profile select, with the profiles read), Audit (its table) and Browse
    (its records) take focus from a scrolled detail pane. Once a search has results,
    they are Search's main widget: 2 focuses them and / the query box, from a scrolled
    detail pane as from anywhere."""
    from memtui.tui.search_view import ResultList

    app = make_app(sample_copy, poll_interval=None, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for key, main in (("3", "lanes-profile"), ("4", "audit-table"), ("1", "records")):
            back = ("1",) if key != "3" else ()  # at start Browse's records have focus
            await press_each(pilot, (*back, "tab", "pagedown", key))
            assert app.focused is not None and app.focused.id == main, key
            if key == "3":
                assert FLASK_PROFILE in screen_text(app)
        # With results (focus on Browse's records again, as at start).
        await search_tactic(pilot)
        await press_each(pilot, ("1",))
        for before in ((), ("tab", "pagedown"), ("4",)):
            await press_each(pilot, (*before, "2"))
            assert app.focused is app.query_one(ResultList), before
            await press_each(pilot, ("1", *before, "slash"))
            await type_q_into_the_query_box(app, pilot, f"/ after {before}")
            await back_to_browses_first_focus(app, pilot, f"/ after {before}")


def help_section_of(widget) -> str:
    """The help section that describes the keys of a widget that can have focus."""
    from textual.widgets._tabbed_content import ContentTabs

    from memtui.tui.audit_view import AuditTable
    from memtui.tui.browse import RecordDetail
    from memtui.tui.eval_view import PathInput, QuestionTable
    from memtui.tui.search_view import QueryInput, ResultList

    by_class = {
        ScopeTree: "Browse: tree",
        RecordTable: "Browse: records",
        RecordDetail: "Browse: detail",
        QueryInput: "Search: query box",
        ResultList: "Search: results",
        AuditTable: "Audit",
        PathInput: "Eval: path box",
        QuestionTable: "Eval",
        ContentTabs: "Moving around",
    }
    by_id = {"filter-": "Search: filters", "lanes-": "Lanes", "audit-": "Audit", "eval-": "Eval"}
    for cls, section in by_class.items():
        if isinstance(widget, cls):
            return section
    for prefix, section in by_id.items():
        if (widget.id or "").startswith(prefix):
            return section
    raise AssertionError(f"no help section for {widget!r}")


def palette_keys(app: MemtuiApp) -> set[str]:
    """The keys the palette's commands name: the last parenthesis of their help text
    (``(asks for a reason; f)`` names f, ``(F5 or ctrl+r)`` both, ``(v on the Audit tab)`` v)."""
    from memtui.tui.commands import MemtuiCommands

    named: set[str] = set()
    for _, _, help_text in MemtuiCommands(app.screen).commands():
        if not help_text.endswith(")"):
            continue
        last = help_text.rsplit("(", 1)[1].rstrip(")").split("; ")[-1]
        named.update(part.split(" on ")[0] for part in last.split(" or "))
    return named


def palette_offers(app: MemtuiApp, words: str) -> bool:
    """The open palette's best hit names ``words`` (it gathers its hits in a task of its own)."""
    from textual.command import CommandList

    hits = app.screen.query_one(CommandList)
    return bool(hits.option_count) and words in str(hits.get_option_at_index(0).prompt).lower()


async def run_palette_command(app: MemtuiApp, pilot, words: str) -> None:
    """Open the palette, type ``words`` and run the best hit once it names them."""
    from textual.command import CommandInput

    await press_each(pilot, ("ctrl+p",))
    assert isinstance(app.screen, CommandPalette)
    # The words go in at once (typing into the palette: the tests further up).
    app.screen.query_one(CommandInput).value = words
    await wait_for(
        pilot, lambda: palette_offers(app, words), what=f"a palette command named {words!r}"
    )
    await press_each(pilot, ("enter",))


def footer_keys(app: MemtuiApp) -> set[str]:
    """The keys the footer offers where focus is (shown, enabled, described)."""
    from memtui.tui.help import key_label

    return {
        key_label(active.binding)
        for active in app.screen.active_bindings.values()
        if active.enabled and active.binding.show and active.binding.description
    }


def assert_help_has_the_keys_of_the_tabs_focusable_widgets(app: MemtuiApp, tab: str) -> None:
    """Each widget of ``tab`` that can take focus now, and the tab bar, has a help
    section with rows."""
    from textual.widgets._tabbed_content import ContentTabs

    sections = dict(key_sections(MemtuiApp))
    assert app.active_tab == tab
    focusable = [w for w in app.pane(tab).query("*") if w.focusable and w.display]
    assert len(focusable) >= 2, tab
    for widget in [*focusable, app.query_one(ContentTabs)]:
        name = help_section_of(widget)
        found = [rows for section, rows in sections.items() if section.startswith(name)]
        assert found and found[0], (widget, name)


async def test_the_footer_the_palette_and_help_wherever_focus_is(
    sample_copy: MemoryStore, monkeypatch
):
    """One walk through the places focus can be, from the first screen, with four checks
    along it, each with its own messages:

    - the footer shows the keys of the focused widget (a note's records: Forget and Show
      hidden, no Refute, which is for tactics; the query box: no Quit, q types there);
    - several changes of the bindings in one frame (a search makes four or five) cost
      one look at the keys; the same keys rebuild nothing, other keys are written into
      the footer's widgets, and it then shows what a rebuild by Textual shows;
    - each key the footer offers is a palette command too (the what-if weights [ ] =
      among them);
    - each widget of each tab that can take focus (the Lanes selects and scroll, the
      Search filter boxes, the tab bar) has its keys in a help section."""
    from memtui.tui.footer import KeysFooter

    app = make_app(sample_copy, poll_interval=None, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        looked, rebuilt = [], []
        keys_for, recompose = KeysFooter._keys_for, Footer.recompose

        def counted_look(self, screen):
            looked.append(self)
            return keys_for(self, screen)

        async def counted_rebuild(self) -> None:
            rebuilt.append(self)
            await recompose(self)

        monkeypatch.setattr(KeysFooter, "_keys_for", counted_look)
        monkeypatch.setattr(Footer, "recompose", counted_rebuild)
        for _ in range(5):
            app.screen.refresh_bindings()
        await settle(pilot)
        assert (len(looked), len(rebuilt)) == (1, 0), "one look for a frame's changes"

        shown: set[str] = set()

        def palette_names_the_footers_keys(place: str) -> None:
            keys = footer_keys(app)
            assert keys - palette_keys(app) == set(), place
            shown.update(keys)

        # The first screen: a note's records.
        footer = screen_text(app).splitlines()[-1]
        assert app.query_one(RecordTable).current.record_type == "observation"
        assert "Refute" not in footer  # tactics only
        assert "Forget" in footer and "Show hidden" in footer
        assert "Forget engagement" not in footer
        palette_names_the_footers_keys("records")
        assert_help_has_the_keys_of_the_tabs_focusable_widgets(app, "browse")
        await press_each(pilot, ("shift+tab",))
        assert isinstance(app.focused, ScopeTree)
        footer = screen_text(app).splitlines()[-1]  # the footer follows a frame after the focus
        assert "Refute" not in footer and "Show hidden" in footer, "tree"
        palette_names_the_footers_keys("tree")
        await press_each(pilot, ("2",))  # the query box takes the focus: its keys replace Browse's
        footer = screen_text(app).splitlines()[-1]
        assert "Run search" in footer and "Refute" not in footer, "query box"
        assert "Quit" not in footer, "query box"  # q types into the box
        assert rebuilt == []  # written in place
        assert_help_has_the_keys_of_the_tabs_focusable_widgets(app, "search")
        footer_widget = app.query_one(KeysFooter)
        places = {
            "query box": (),
            "results": (*"tactic", "enter"),
            "filter": ("slash", "tab"),
            "lanes": ("3",),
            "audit": ("4",),
            "records": ("1",),
            "tree": ("shift+tab",),
            "detail": ("tab", "tab"),
            "records again": ("shift+tab",),
        }
        for place, keys in places.items():
            await press_each(pilot, keys)
            palette_names_the_footers_keys(place)
            if place in ("lanes", "audit"):
                assert_help_has_the_keys_of_the_tabs_focusable_widgets(app, place)
            written = screen_text(app).splitlines()[-1]
            app.screen.query_one(KeysFooter).refresh(recompose=True)  # Textual's rebuild
            await settle(pilot)
            assert screen_text(app).splitlines()[-1] == written, place
        assert len(rebuilt) == len(places)
        assert app.query_one(KeysFooter) is footer_widget
        await press_each(pilot, ("5",))
        palette_names_the_footers_keys("eval path box")
        assert_help_has_the_keys_of_the_tabs_focusable_widgets(app, "eval")
        assert {"[", "]", "=", "f", "t", "v", "/", "q"} <= shown


def test_help_says_how_to_move_through_the_filters_and_lanes():
    """The Search filters' and the Lanes' help sections name tab, enter and esc; Lanes
    names its profile, engagement and scroll; Moving around names the arrow keys."""
    sections = dict(key_sections(MemtuiApp))
    filters = next(rows for section, rows in sections.items() if section.startswith("Search: f"))
    for rows in (filters, sections["Lanes"]):
        keys = " ".join(key for key, _ in rows)
        assert "tab" in keys and "enter" in keys and "esc" in keys
    lanes = " ".join(what for _, what in sections["Lanes"])
    assert "profile" in lanes and "engagement" in lanes and "scroll" in lanes
    assert any("←" in key and "tab" in what for key, what in sections["Moving around"])


async def test_the_command_palette_runs_memtui_commands(sample_copy: MemoryStore):
    """Typed into, the palette offers memtui's commands: forget record opens its dialog
    for the highlighted record (cancelled: the record stays). With a search's results,
    its weight commands re-rank; and it switches tabs."""
    from memtui.tui.search_view import DEFAULT_KEYWORD_TENTHS

    store = sample_copy
    app = make_app(store, poll_interval=None, check_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        record = app.query_one(RecordTable).current
        await pilot.press("ctrl+p")
        await settle(pilot)
        assert isinstance(app.screen, CommandPalette)
        for char in "forget record":
            await pilot.press("space" if char == " " else char)
        # the palette gathers its hits in a task of its own
        await wait_for(pilot, lambda: f"Forget record #{record.id}" in screen_text(app))
        text = screen_text(app)
        assert f"Forget record #{record.id}" in text
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmRecordAction)
        assert app.screen.record.id == record.id
        await pilot.press("escape")
        await settle(pilot)
        assert store.get(int(record.id)) is not None

        await search_tactic(pilot)
        search = app.search
        for command, tenths in (
            ("from the vector lane to the keyword", DEFAULT_KEYWORD_TENTHS + 1),
            ("restore the default weights", DEFAULT_KEYWORD_TENTHS),
            ("from the keyword lane to the vector", DEFAULT_KEYWORD_TENTHS - 1),
        ):
            await run_palette_command(app, pilot, command)
            assert search.keyword_tenths == tenths, command
            assert search.response is not None and search.response.results

        await run_palette_command(app, pilot, "audit tab")
        assert app.active_tab == "audit"
