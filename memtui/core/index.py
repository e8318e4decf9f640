"""What the search engine needs from a database: the ``SearchIndex`` protocol.

The engine (``memtui.core.search``, the vector cache, the explain helpers) runs
on any SQLite file that speaks this protocol: memtui's own store, and the small
index a foreign store's records are copied into. It reads these tables and no
others, so an index needs only these columns (it may have more):

- ``records(id INTEGER PRIMARY KEY, content TEXT, refuted INTEGER,
  created_at TEXT, expires_at TEXT)`` with two partial indexes the engine names
  (``INDEXED BY``): ``records_expiry`` on ``(expires_at, refuted, ...) WHERE
  expires_at IS NOT NULL`` and ``records_refuted`` on ``(...) WHERE refuted != 0``;
- the FTS5 table named ``FTS_TABLE`` over ``records.content`` (external content,
  rowid = ``records.id``), with its ``_data`` and ``_docsize`` shadow tables;
- ``vectors(record_id INTEGER PRIMARY KEY, vector BLOB)`` (little-endian float32);
  when a trigger on ``records`` deletes a record's vector with it (memtui's
  indexes have one), the vector lane trusts its cached matrix's rows to have
  their records and does not look its pool up again (otherwise it does, at each
  search);
- ``meta(key TEXT PRIMARY KEY, value TEXT)`` holding ``vectors_generation``,
  ``database_id`` and, when vectors are recorded, ``embedder_name`` and
  ``embedder_dim``.

Which rows a filter keeps is the index's own business (``scope_clause``): the
engine never names a scope column.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

FTS_TABLE = "records_fts"

_T = TypeVar("_T")

Params = Sequence[Any] | dict[str, Any]


@runtime_checkable
class SearchIndex(Protocol):
    """The calls the engine makes on the database it searches."""

    path: Path | None

    @property
    def lock(self) -> threading.RLock:
        """Held around every statement on the main connection; the vector cache
        holds it to read the vectors table consistently."""
        ...

    def now(self) -> datetime: ...

    def now_text(self) -> str: ...

    def query(self, sql: str, params: Params = ()) -> list[Any]: ...

    def query_tuples(
        self,
        sql: str,
        params: Params = (),
        *,
        when_busy: Callable[[], None] | None = None,
        busy_steps: int = 0,
        cancelled: Callable[[], bool] | None = None,
    ) -> list[tuple]: ...

    def side_query(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]] | None: ...

    def scope_clause(
        self,
        filters: dict[str, Any] | None,
        *,
        include_refuted: bool = False,
        include_expired: bool = False,
        alias: str = "",
    ) -> tuple[str, list[Any]]: ...

    def derived(self, name: str, build: Callable[[Any], _T]) -> _T: ...

    def record_count(self) -> int: ...

    def recorded_embedder(self) -> dict[str, Any] | None: ...
