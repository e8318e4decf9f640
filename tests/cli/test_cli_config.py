"""The settings: one ``Config`` from the environment, current for the whole command."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from memtui import config as config_module
from memtui.cli import main
from memtui.config import APP_BUSY_TIMEOUT_MS, APP_POLL_INTERVAL, Config, activated, current
from memtui.core import vector_cache
from memtui.core.operator import resolve_operator
from memtui.sources import cache

HOME = {"HOME": "/home/op"}


def test_the_defaults_come_from_home():
    config = Config.from_environment(HOME)
    assert config.cache_home == Path("/home/op/.cache")
    assert config.data_home == Path("/home/op/.local/share")
    assert config.config_home == Path("/home/op/.config")
    assert config.vectors_cache == Path("/home/op/.cache/memtui/vectors")
    assert config.sources_cache == Path("/home/op/.cache/memtui/sources")
    assert config.data_dir == Path("/home/op/.local/share/memtui")
    assert config.keymap_path == Path("/home/op/.config/memtui/keymap.toml")
    assert (config.operator, config.now, config.cache_dir, config.mem0_dir) == (None,) * 4
    assert config.poll_interval == APP_POLL_INTERVAL == 1.0
    assert config.busy_timeout_ms == APP_BUSY_TIMEOUT_MS == 1000


def test_every_variable_is_read():
    config = Config.from_environment(
        {
            **HOME,
            "XDG_CACHE_HOME": "/c",
            "XDG_DATA_HOME": "/d",
            "XDG_CONFIG_HOME": "/k",
            "MEMTUI_CACHE_DIR": "/m",
            "MEMTUI_OPERATOR": "alice",
            "MEMTUI_NOW": "2026-11-30T12:00:00Z",
            "MEM0_DIR": "/mem0",
        }
    )
    assert config.vectors_cache == Path("/m/vectors")  # MEMTUI_CACHE_DIR wins over XDG
    assert config.sources_cache == Path("/m/sources")
    assert config.data_dir == Path("/d/memtui")
    assert config.keymap_path == Path("/k/memtui/keymap.toml")
    assert (config.operator, config.now) == ("alice", "2026-11-30T12:00:00Z")
    assert config.mem0_dir == Path("/mem0")
    without_memtui_dir = Config.from_environment({**HOME, "XDG_CACHE_HOME": "/c"})
    assert without_memtui_dir.vectors_cache == Path("/c/memtui/vectors")


def test_an_empty_variable_counts_as_unset():
    empty = {
        name: ""
        for name in (
            "XDG_CACHE_HOME",
            "XDG_DATA_HOME",
            "XDG_CONFIG_HOME",
            "MEMTUI_CACHE_DIR",
            "MEMTUI_OPERATOR",
            "MEMTUI_NOW",
            "MEM0_DIR",
        )
    }
    assert Config.from_environment({**HOME, **empty}) == Config.from_environment(HOME)


def test_outside_a_command_the_environment_is_read_at_each_call(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMTUI_CACHE_DIR", str(tmp_path / "one"))
    assert vector_cache.cache_dir() == tmp_path / "one" / "vectors"
    monkeypatch.setenv("MEMTUI_CACHE_DIR", str(tmp_path / "two"))
    assert cache.cache_root() == tmp_path / "two" / "sources"
    monkeypatch.setenv("MEMTUI_OPERATOR", "  bob ")
    assert resolve_operator() == "bob"
    assert resolve_operator("carol") == "carol"


def test_an_activated_config_is_current_until_its_block_ends(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMTUI_CACHE_DIR", str(tmp_path / "env"))
    pinned = Config.from_environment({**HOME, "MEMTUI_CACHE_DIR": str(tmp_path / "pinned")})
    with activated(pinned):
        monkeypatch.setenv("MEMTUI_CACHE_DIR", str(tmp_path / "changed"))
        assert current() is pinned
        assert vector_cache.cache_dir() == tmp_path / "pinned" / "vectors"
    assert vector_cache.cache_dir() == tmp_path / "changed" / "vectors"


def test_a_command_runs_with_the_config_of_its_start_and_leaves_none_behind(monkeypatch):
    seen: list[Config] = []

    @main.command("probe-config", hidden=True)
    @click.pass_obj
    def probe(obj: Config) -> None:
        seen.extend((obj, current()))

    try:
        result = CliRunner().invoke(
            main, ["probe-config"], env={"MEMTUI_OPERATOR": "dana", "XDG_DATA_HOME": "/d"}
        )
    finally:
        main.commands.pop("probe-config")
    assert result.exit_code == 0, result.output
    assert seen[0] is seen[1]
    assert seen[0].operator == "dana" and seen[0].data_dir == Path("/d/memtui")
    assert config_module._active is None


def test_a_bad_clock_fails_only_the_commands_that_need_one(tmp_path, sample_db):
    runner = CliRunner()
    env = {"MEMTUI_NOW": "yesterday", "XDG_CACHE_HOME": str(tmp_path)}
    assert runner.invoke(main, ["info", "--formats"], env=env).exit_code == 0
    result = runner.invoke(main, ["records", str(sample_db)], env=env)
    assert result.exit_code == 1
    assert result.output.startswith("Error: MEMTUI_NOW: 'yesterday' is not an ISO-8601")


@pytest.mark.parametrize("name", ["MEMTUI_OPERATOR", "MEMTUI_NOW", "MEMTUI_CACHE_DIR"])
def test_no_module_but_the_config_reads_a_memtui_variable(name):
    root = Path(__file__).resolve().parents[2] / "memtui"
    readers = [
        path.relative_to(root).as_posix()
        for path in root.rglob("*.py")
        if f'environ.get("{name}")' in path.read_text()
        or f"environ.get('{name}')" in path.read_text()
    ]
    assert readers == []
