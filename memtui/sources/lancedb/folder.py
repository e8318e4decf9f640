"""A LanceDB database folder: which tables it holds, read without lancedb."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memtui.sources.base import SourceError

SUFFIX = ".lance"
CREWAI_TABLE = "memories"
INSTALL_HINT = "pip install 'memtui[lancedb]'"


def table_dirs(folder: Path) -> list[Path]:
    """The ``NAME.lance`` tables of a folder (a table has a ``_versions`` folder)."""
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return []
    return [p for p in entries if p.name.endswith(SUFFIX) and (p / "_versions").is_dir()]


def find_lance_folder(path: Path) -> Path | None:
    """The database at ``path`` (a folder of tables), or the one a table folder is in."""
    if not path.is_dir():
        return None
    if table_dirs(path):
        return path
    if path.name.endswith(SUFFIX) and (path / "_versions").is_dir():
        return path.parent
    return None


def lance_available() -> bool:
    try:
        return importlib.util.find_spec("lance") is not None
    except ValueError:  # imported as None: blocked
        return False


def require_lance() -> None:
    if not lance_available():
        raise SourceError(f"this folder is a LanceDB database; reading it needs {INSTALL_HINT}")


@dataclass(frozen=True)
class TableInfo:
    """One table, for choosing (``describe`` is what a picker and an error show)."""

    name: str
    points: int | None
    dim: int | None
    distance: str | None = None
    kind: str = "table"

    plural = "LanceDB tables"
    """What a picker calls several of them."""

    @property
    def label(self) -> str:
        return "crewAI memory" if self.kind == "crewai" else "LanceDB table"

    def describe(self) -> str:
        dims = f", {self.dim} dims" if self.dim else ""
        count = "?" if self.points is None else str(self.points)
        return f"{self.name} ({count} rows{dims})"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "points": self.points,
            "dims": self.dim,
            "distance": self.distance,
            "kind": self.kind,
            "label": self.label,
        }


def table_infos(folder: Path) -> list[TableInfo]:
    """Every table with its row count and vector dimension (read with pylance)."""
    require_lance()
    import lance

    from memtui.sources.lancedb.rows import vector_column

    out = []
    for path in table_dirs(folder):
        name = path.name[: -len(SUFFIX)]
        try:
            dataset = lance.dataset(str(path))
            rows: int | None = dataset.count_rows()
            column = vector_column(dataset.schema)
            dim = column[1] if column else None
        except Exception:  # an unreadable table is listed, and fails when opened
            rows, dim = None, None
        kind = "crewai" if name == CREWAI_TABLE else "table"
        out.append(TableInfo(name=name, points=rows, dim=dim, kind=kind))
    return out


def folder_files(root: Path) -> list[Path]:
    """Every file under ``root`` (a table folder), for the byte check."""
    found: list[Path] = []
    for base, _dirs, files in os.walk(root):
        found.extend(Path(base) / f for f in files)
    return sorted(found)
