"""The settings memtui runs with, resolved once when a command starts.

``memtui.cli.main`` resolves one ``Config`` from the environment before any command
runs and makes it current for the whole command, the app included; code that needs a
setting takes it from ``current()`` instead of reading ``os.environ`` itself. Library
code run outside a command (a script, a test) gets a ``Config`` resolved from the
environment at the call, as it always did. docs/commands.md lists the variables.

This module imports nothing of memtui's, so every layer may use it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

APP_POLL_INTERVAL = 1.0
"""Seconds between the app's looks for another process's writes (``PRAGMA data_version``)."""

APP_BUSY_TIMEOUT_MS = 1000
"""How long one try of a change waits for another process's write lock inside SQLite.

Short, so that the app says "database busy — retrying (k/N)" within a second instead of
waiting silently; the app retries a bounded number of times (``memtui.tui.app``).
Reads do not wait on writers in WAL mode, so browsing is unaffected.
"""

KEYMAP_FILE = "keymap.toml"


class ConfigError(ValueError):
    """A setting or settings file memtui cannot use; its message is one line for the user."""


@dataclass(frozen=True)
class Config:
    """Everything memtui takes from its environment, and the app's timing settings.

    ``operator`` and ``now`` are kept as given (``MEMTUI_OPERATOR``, ``MEMTUI_NOW``):
    the operator is trimmed where it is used, and the clock is parsed only by the
    commands that need one, so a bad ``MEMTUI_NOW`` fails those commands alone.
    """

    cache_home: Path
    """``$XDG_CACHE_HOME``, else ``~/.cache``."""
    data_home: Path
    """``$XDG_DATA_HOME``, else ``~/.local/share``."""
    config_home: Path
    """``$XDG_CONFIG_HOME``, else ``~/.config``."""
    cache_dir: Path | None = None
    """``$MEMTUI_CACHE_DIR``: memtui's cache folder, instead of ``cache_home/memtui``."""
    operator: str | None = None
    """``$MEMTUI_OPERATOR``: who acts, when ``--operator`` does not say."""
    now: str | None = None
    """``$MEMTUI_NOW``: an ISO-8601 moment that pins the clock (reproducible runs)."""
    mem0_dir: Path | None = None
    """``$MEM0_DIR``: where mem0 keeps its ``history.db`` (mem0's own variable)."""
    poll_interval: float = APP_POLL_INTERVAL
    busy_timeout_ms: int = APP_BUSY_TIMEOUT_MS

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Config:
        """The settings ``environ`` gives; an empty variable counts as unset."""

        def given(name: str) -> str | None:
            return environ.get(name) or None

        home = Path(given("HOME") or Path.home())

        def folder(name: str, fallback: Path) -> Path:
            value = given(name)
            return Path(value) if value else fallback

        cache_dir, mem0_dir = given("MEMTUI_CACHE_DIR"), given("MEM0_DIR")
        return cls(
            cache_home=folder("XDG_CACHE_HOME", home / ".cache"),
            data_home=folder("XDG_DATA_HOME", home / ".local" / "share"),
            config_home=folder("XDG_CONFIG_HOME", home / ".config"),
            cache_dir=Path(cache_dir) if cache_dir else None,
            operator=given("MEMTUI_OPERATOR"),
            now=given("MEMTUI_NOW"),
            mem0_dir=Path(mem0_dir) if mem0_dir else None,
        )

    @property
    def memtui_cache(self) -> Path:
        """memtui's cache folder: ``$MEMTUI_CACHE_DIR``, else ``cache_home/memtui``."""
        return self.cache_dir if self.cache_dir is not None else self.cache_home / "memtui"

    @property
    def vectors_cache(self) -> Path:
        """Where cached vector matrices go (``memtui.core.vector_cache``)."""
        return self.memtui_cache / "vectors"

    @property
    def sources_cache(self) -> Path:
        """Where foreign stores' cached indexes go (``memtui.sources.cache``)."""
        return self.memtui_cache / "sources"

    @property
    def data_dir(self) -> Path:
        """memtui's data folder: the demo database, Qdrant servers' audit logs."""
        return self.data_home / "memtui"

    @property
    def keymap_path(self) -> Path:
        """The optional keymap file of the app (docs/keymap.md)."""
        return self.config_home / "memtui" / KEYMAP_FILE


_active: Config | None = None


def current() -> Config:
    """The command's settings; outside a command, those of the environment now."""
    return _active if _active is not None else Config.from_environment(os.environ)


@contextmanager
def activated(config: Config) -> Iterator[Config]:
    """Make ``config`` current until the block ends (the CLI, for one command)."""
    global _active
    previous, _active = _active, config
    try:
        yield config
    finally:
        _active = previous
