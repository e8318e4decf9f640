"""The keymap file: binding ids rebound to other keys, and what a bad file says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from textual.widgets import TabbedContent

from memtui.config import Config, activated
from memtui.core.store import MemoryStore
from memtui.tui import launch
from memtui.tui.app import MemtuiApp, make_app
from memtui.tui.help import HelpScreen, key_sections
from memtui.tui.keymap import (
    KeymapError,
    declared_binding_ids,
    key_problem,
    load_keymap,
    parse_keymap,
)
from memtui.tui.testing import build_sample_db, fixed_clock, screen_text, settle

ROOT = Path(__file__).resolve().parents[2]


def keymap_config(tmp_path: Path, text: str | None) -> Config:
    """Settings whose config folder is under ``tmp_path``, holding ``text`` as the keymap."""
    config = Config.from_environment({"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)})
    if text is not None:
        config.keymap_path.parent.mkdir(parents=True, exist_ok=True)
        config.keymap_path.write_text(text)
    return config


def test_a_keymap_maps_ids_to_keys_as_textual_takes_them():
    text = 'help = "h"\nrefresh = ["f6", "ctrl+shift+r"]\ntab-audit = "a, question_mark"\n'
    assert parse_keymap(text) == {
        "help": "h",
        "refresh": "f6,ctrl+shift+r",
        "tab-audit": "a,question_mark",
    }
    assert parse_keymap("") == {}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('help = "h', "not valid TOML"),
        ("help = 3", "give a key or a list of keys"),
        ("help = []", "give a key or a list of keys"),
        ('[help]\nkey = "h"', "give a key or a list of keys"),
        ('help = ""', "an empty key"),
        ('help = "h,"', "an empty key"),
        ('help = "Ctrl+h"', "'Ctrl' is not a modifier"),
        ('help = "f55"', "'f55' is not a key name"),
        ('help = "ctrl+nokey"', "'nokey' is not a key name"),
        ('help = "h"\nhelp = "j"', "not valid TOML"),
    ],
)
def test_a_bad_keymap_is_one_line_naming_the_file(text, says):
    with pytest.raises(KeymapError) as error:
        parse_keymap(text, "/cfg/memtui/keymap.toml")
    message = str(error.value)
    assert message.startswith("keymap /cfg/memtui/keymap.toml: ")
    assert says in message
    assert "\n" not in message


def test_an_unknown_binding_id_is_refused_by_name():
    with pytest.raises(KeymapError, match="no binding has the id 'hepl'"):
        parse_keymap('hepl = "h"', known={"help"})
    assert parse_keymap('help = "h"', known={"help"}) == {"help": "h"}


@pytest.mark.parametrize(
    "key", ["x", "F", "?", "f5", "enter", "escape", "question_mark", "ctrl+r", "shift+tab", "plus"]
)
def test_key_names_textual_knows_are_accepted(key):
    assert key_problem(key) is None


def test_the_app_declares_its_binding_ids():
    ids = declared_binding_ids()
    assert {"help", "quit", "refresh", "search", "tab-browse", "tab-audit"} <= ids


def test_no_keymap_file_is_no_keymap(tmp_path):
    assert load_keymap(keymap_config(tmp_path, None).keymap_path) == {}


def test_an_unreadable_keymap_file_is_one_line(tmp_path):
    config = keymap_config(tmp_path, None)
    config.keymap_path.mkdir(parents=True)
    with pytest.raises(KeymapError, match="cannot be read"):
        load_keymap(config.keymap_path)
    config.keymap_path.rmdir()
    config.keymap_path.write_bytes(b'help = "\xff"\n')
    with pytest.raises(KeymapError, match="not UTF-8"):
        load_keymap(config.keymap_path)


async def test_a_rebound_key_runs_the_action_and_the_old_key_does_not(tmp_path):
    config = keymap_config(tmp_path, 'help = "h"\ntab-audit = "a"\n')
    database = build_sample_db(tmp_path / "sample.db")
    with MemoryStore(database, clock=fixed_clock, operator="tester") as store:
        app = make_app(store, poll_interval=None, check_on_start=False)
        app.set_keymap(load_keymap(config.keymap_path))
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            await pilot.press("4")
            await settle(pilot)
            assert app.query_one(TabbedContent).active == "browse"
            await pilot.press("a")
            await settle(pilot)
            assert app.query_one(TabbedContent).active == "audit"
            await pilot.press("question_mark")
            await settle(pilot)
            assert not isinstance(app.screen, HelpScreen)
            await pilot.press("h")
            await settle(pilot)
            assert isinstance(app.screen, HelpScreen)
            # Help names the keys in use: the rebound ones, not the defaults.
            rows = dict(dict(key_sections(MemtuiApp, app.key_overrides))["Anywhere"])
            assert rows["h"] == "Help" and "?" not in rows
            assert rows["a"] == "Audit tab" and "4" not in rows
            shown = screen_text(app)
            assert re.search(r"\S a +Audit tab ", shown) and re.search(r"\S h +Help ", shown)
            assert not re.search(r"\S 4 +Audit tab ", shown)


def test_run_app_applies_the_keymap_file(tmp_path, monkeypatch):
    config = keymap_config(tmp_path, 'quit = "ctrl+q"\n')
    seen: dict[str, object] = {}
    monkeypatch.setattr(MemtuiApp, "run", lambda self: seen.update(keymap=dict(self._keymap)))
    with activated(config):
        launch.run_app(build_sample_db(tmp_path / "sample.db"))
    assert seen == {"keymap": {"quit": "ctrl+q"}}


def test_run_app_refuses_a_bad_keymap_before_opening_anything(tmp_path, monkeypatch):
    config = keymap_config(tmp_path, 'nope = "x"\n')
    opened: list[object] = []
    monkeypatch.setattr(launch, "open_app_source", lambda *a, **k: opened.append(a))
    with activated(config), pytest.raises(KeymapError, match="no binding has the id 'nope'"):
        launch.run_app(tmp_path / "any.db")
    assert opened == []


def test_the_cli_says_what_is_wrong_with_the_keymap_in_one_line(tmp_path):
    config = keymap_config(tmp_path, 'help = "Ctrl+h"\n')
    database = build_sample_db(tmp_path / "sample.db")
    result = subprocess.run(
        [sys.executable, "-m", "memtui", str(database)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(ROOT),
            "HOME": str(tmp_path),
            "XDG_CONFIG_HOME": str(config.config_home),
            "XDG_CACHE_HOME": str(tmp_path / "cache"),
        },
    )
    assert result.returncode == 1
    assert result.stderr == (
        f"Error: keymap {config.keymap_path}: help: 'Ctrl+h': 'Ctrl' is not a modifier "
        "(ctrl, shift, alt, meta, super, hyper)\n"
    )


def test_docs_keymap_lists_every_binding_id():
    text = (ROOT / "docs" / "keymap.md").read_text()
    listed = {
        line.split("|")[1].strip().strip("`")
        for line in text.splitlines()
        if line.startswith("| `") and line.count("|") >= 4
    }
    ids = declared_binding_ids()
    assert not ids - listed, f"docs/keymap.md does not list the ids {sorted(ids - listed)}"
    assert not listed - ids, f"docs/keymap.md lists ids no binding has: {sorted(listed - ids)}"
