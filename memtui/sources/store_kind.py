"""One kind of memory store memtui opens: how it is recognized, opened, and what it takes.

A ``StoreKind`` is one entry of the registry (``memtui.sources.registry``):
its name, label and what the recognizer looks for (``memtui info --formats``),
``recognize`` (a ``Probe`` of the path: its tables and columns, or a folder),
``open`` (with the ``OpenRequest`` every kind shares and the kind's own options
object), and optionally a way to open a store the options name without a path
(``Remote``: a server) or a store a URL names in place of the path (``schemes``
and ``open_url``: a database server).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, is_dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from memtui.core.embed import Embedder
from memtui.core.records import parse_timestamp
from memtui.sources.base import MemorySource, SourceError

Schema = dict[str, set[str]]
Clock = Callable[[], datetime]


@dataclass(frozen=True)
class Probe:
    """What recognizing a path read: its tables with their columns and ``user_version``
    (empty for a folder, or for an empty file)."""

    path: Path
    schema: Schema
    version: int

    @property
    def is_folder(self) -> bool:
        return self.path.is_dir()


@dataclass(frozen=True)
class OpenRequest:
    """What every kind's opener is given (``open_source``'s keyword arguments)."""

    read_only: bool | None = None
    allow_writes: bool = False
    audit_db: str | Path | None = None
    now: Any = None
    clock: Clock | None = None
    embedder: Embedder | None = None
    operator: str | None = None
    cache_root: Path | None = None

    @property
    def foreign_read_only(self) -> bool:
        """A foreign store opens read-only unless ``allow_writes`` (and not ``read_only``)."""
        return self.read_only is True or not self.allow_writes

    def fixed_clock(self) -> Clock | None:
        """``now`` as the clock of a time-based store (an ISO-8601 time or aware datetime)."""
        now = self.now
        if isinstance(now, datetime):
            if now.tzinfo is None:
                raise SourceError("--now needs a timezone (e.g. 2026-11-30T12:00:00Z)")
            aware: datetime = now
            return lambda: aware
        if isinstance(now, str) and now.strip():
            try:
                moment = parse_timestamp(now)
            except ValueError as exc:
                raise SourceError(f"--now: {exc}") from None
            return lambda: moment
        return self.clock

    def foreign(self, *, clock: bool = True) -> dict[str, Any]:
        """The keyword arguments every foreign adapter takes (with the clock unless not)."""
        common: dict[str, Any] = {
            "read_only": self.foreign_read_only,
            "operator": self.operator,
            "audit_db": self.audit_db,
            "cache_root": self.cache_root,
        }
        if clock:
            common["clock"] = self.fixed_clock()
        return common


Opener = Callable[[Probe, OpenRequest, Any], MemorySource]
"""``open(probe, request, options)``: the store at ``probe.path``, opened."""

UrlOpener = Callable[[str, OpenRequest, Any], MemorySource]
"""``open_url(url, request, options)``: the store the URL names, opened (the kind
recognizes what it holds itself: it connects to read it)."""


@dataclass(frozen=True)
class Remote:
    """A store a kind opens from its options alone, with no path (a server)."""

    flag: str
    """The option that names it (``--qdrant-url``)."""
    what: str
    """It, in words (``a Qdrant server``)."""
    named_by: Callable[[Any], bool]
    """Whether the kind's options name one."""
    open: Callable[[OpenRequest, Any], MemorySource]


@dataclass(frozen=True)
class StoreKind:
    """One kind of store: a registry entry (see the module docstring)."""

    name: str
    label: str
    needs: str
    """What the recognizer looks for, in words."""
    recognize: Callable[[Probe], bool]
    open: Opener
    options: type | None = None
    """The kind's options object (a dataclass; ``given_flags()`` lists what was given)."""
    options_apply_to: str = ""
    """The stores its options apply to, in words (``Qdrant stores``)."""
    extra: str | None = None
    """What part of it needs beyond memtui itself (an optional extra, a library)."""
    folders: str | None = None
    """The folders it opens, in words (``Qdrant local folders``); None for files only."""
    remote: Remote | None = None
    schemes: tuple[str, ...] = ()
    """URL schemes it opens in place of a path (``postgresql``); ``open_url`` opens them."""
    open_url: UrlOpener | None = None

    def opens_url(self, location: object) -> bool:
        """Whether ``location`` is a URL of one of the kind's schemes (``postgresql://...``)."""
        if not self.schemes or not isinstance(location, str):
            return False
        scheme, sep, _ = location.strip().partition("://")
        return bool(sep) and scheme.lower() in self.schemes

    def describe(self) -> str:
        return f"{self.label} ({self.needs})"

    def option_names(self) -> tuple[str, ...]:
        """The names of the kind's options (its options object's fields)."""
        if self.options is None or not is_dataclass(self.options):
            return ()
        return tuple(f.name for f in fields(self.options))

    def make_options(self, given: Any) -> Any:
        """The kind's options object from what was given (an options object or a mapping)."""
        if self.options is None:
            return None
        if isinstance(given, self.options):
            return given
        if given is None:
            return self.options()
        if isinstance(given, Mapping):
            return self.options(**given)
        raise TypeError(f"options for {self.name} are a {self.options.__name__} or a mapping")
