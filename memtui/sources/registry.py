"""The registry of store kinds memtui opens: ``open_source`` asks it, in order.

Adding a kind is one module (its adapter, and a ``StoreKind`` saying how it is
recognized and opened) plus one line in ``BUILT_IN``; a caller's options for
one kind reach that kind only (``split_options``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

from memtui.sources import kinds
from memtui.sources.lancedb.kind import LANCEDB
from memtui.sources.store_kind import Probe, StoreKind

BUILT_IN: tuple[StoreKind, ...] = (
    kinds.NATIVE,
    kinds.LANGGRAPH,
    kinds.PREFERENCES,
    kinds.LETTA,
    kinds.TENANT,
    kinds.QDRANT,
    LANCEDB,
    kinds.CHROMA,
    kinds.POSTGRES,
)


class Registry(Sequence[StoreKind]):
    """The kinds in the order they are tried (the first that recognizes a path wins)."""

    def __init__(self, entries: Sequence[StoreKind]) -> None:
        self._entries = list(entries)

    @overload
    def __getitem__(self, index: int) -> StoreKind: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[StoreKind]: ...

    def __getitem__(self, index: int | slice) -> StoreKind | Sequence[StoreKind]:
        return self._entries[index]

    def __len__(self) -> int:
        return len(self._entries)

    def register(self, kind: StoreKind) -> None:
        """Add ``kind`` (tried after those registered before it)."""
        if any(k.name == kind.name for k in self._entries):
            raise ValueError(f"a store kind named {kind.name!r} is registered already")
        self._entries.append(kind)

    def unregister(self, name: str) -> None:
        self._entries = [k for k in self._entries if k.name != name]

    @contextlib.contextmanager
    def registered(self, kind: StoreKind) -> Iterator[StoreKind]:
        """``kind`` registered for the block (a test's own kind)."""
        self.register(kind)
        try:
            yield kind
        finally:
            self.unregister(kind.name)

    def get(self, name: str) -> StoreKind | None:
        return next((k for k in self._entries if k.name == name), None)

    def recognize(self, probe: Probe) -> StoreKind | None:
        return next((k for k in self._entries if k.recognize(probe)), None)

    def url_kind(self, location: object) -> StoreKind | None:
        """The kind that opens ``location`` as a URL (``postgresql://...``), or None."""
        return next((k for k in self._entries if k.opens_url(location)), None)

    def remote_named(self, given: Mapping[str, Any]) -> StoreKind | None:
        """The kind whose options in ``given`` name a store with no path (a server's
        URL), or None: then the command needs a PATH."""
        for kind, options in self.split_options(given).items():
            entry = self.get(kind)
            if entry is not None and entry.remote is not None and entry.remote.named_by(options):
                return entry
        return None

    def remote_flags(self) -> list[str]:
        """What names a store instead of a PATH, in words (``--qdrant-url URL for a
        Qdrant server``)."""
        return [f"{k.remote.flag} URL for {k.remote.what}" for k in self._entries if k.remote]

    def folder_kinds(self) -> list[str]:
        """The folders memtui opens, in words."""
        return [k.folders for k in self._entries if k.folders]

    def split_options(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Each kind's options object, built from ``given``.

        A key naming a kind holds that kind's options (an options object or a
        mapping); any other key is an option of every kind that declares it
        (``collection`` is Qdrant's and Postgres's). A value of None is an option
        not given.
        """
        per_kind: dict[str, dict[str, Any]] = {}
        objects: dict[str, Any] = {}
        for key, value in given.items():
            kind = self.get(key)
            if kind is not None:
                objects[key] = value
                continue
            if value is None:
                continue
            owners = [k for k in self._entries if key in k.option_names()]
            if not owners:
                raise TypeError(f"no store kind takes an option named {key!r}")
            for owner in owners:
                per_kind.setdefault(owner.name, {})[key] = value
        out: dict[str, Any] = {}
        for kind in self._entries:
            if kind.options is None:
                continue
            made = kind.make_options(objects.get(kind.name))
            extra = per_kind.get(kind.name)
            if extra:
                fields = {n: getattr(made, n) for n in kind.option_names()}
                made = kind.options(**{**fields, **extra})
            out[kind.name] = made
        return out


REGISTRY = Registry(BUILT_IN)
"""Every kind ``open_source`` recognizes (``memtui info --formats`` lists them)."""
