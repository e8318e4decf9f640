"""The registry entry of LanceDB databases (nothing here imports lancedb)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memtui.sources.base import MemorySource, SourceError
from memtui.sources.store_kind import OpenRequest, Probe, StoreKind


@dataclass(frozen=True)
class LanceOptions:
    """``collection`` names the table (``--collection``, as for Qdrant folders)."""

    collection: str | None = None

    def given_flags(self) -> list[str]:
        return ["--collection"] if self.collection else []


def is_lancedb(probe: Probe) -> bool:
    if not probe.is_folder:
        return False
    from memtui.sources.lancedb.folder import find_lance_folder

    return find_lance_folder(probe.path) is not None


def open_lancedb(probe: Probe, request: OpenRequest, options: Any) -> MemorySource:
    from memtui.sources.lancedb.folder import (
        CREWAI_TABLE,
        SUFFIX,
        find_lance_folder,
        require_lance,
        table_infos,
    )

    folder = find_lance_folder(probe.path)
    if folder is None:
        raise SourceError(f"{probe.path} is not a LanceDB database folder")
    require_lance()
    from memtui.sources.lancedb.source import LanceSource, TableChoiceError

    name = options.collection if options is not None else None
    if name is None and probe.path.name.endswith(SUFFIX):
        name = probe.path.name[: -len(SUFFIX)]
    tables = table_infos(folder)
    names = [t.name for t in tables]
    if name is not None and name not in names:
        raise SourceError(
            f"{folder} has no LanceDB table {name!r}; its tables: {', '.join(names) or 'none'}"
        )
    if name is None:
        if CREWAI_TABLE in names:
            name = CREWAI_TABLE
        elif len(names) == 1:
            name = names[0]
        else:
            raise TableChoiceError(str(folder), tables)
    return LanceSource(Path(folder), table=name, **request.foreign())


LANCEDB = StoreKind(
    "lancedb",
    "LanceDB database (crewAI 1.x memory)",
    "a folder of NAME.lance tables (what lancedb.connect() was given)",
    is_lancedb,
    open_lancedb,
    options=LanceOptions,
    options_apply_to="LanceDB databases",
    extra="lancedb: pip install 'memtui[lancedb]'",
    folders="LanceDB database folders",
)
