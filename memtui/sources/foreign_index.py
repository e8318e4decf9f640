"""``ForeignIndex``: memtui's keyword and vector index of a foreign store's records.

A foreign store has no FTS5 index of its own (or none memtui can rank with), so
memtui copies what search needs into a small SQLite file of its own and runs
the search engine on it (it speaks ``memtui.core.index.SearchIndex``):

- ``records``: the engine's columns (``id``, ``content``, ``refuted``,
  ``created_at``, ``expires_at``) and this index's own: ``source_id`` (the
  store's id of the record), its ``tier`` and ``record_type`` as the store
  names them, and one ``scope_KEY`` column per scope key of the store (text;
  a list, such as tags, as a JSON array). ``refuted`` is the store's hidden
  flag; ``expires_at`` is mapped so that the strict rule ``expires_at > now``
  gives the store's own expiry rule. Rows are written in source-id order, so
  ties break the same way in the index as in the store.
- the FTS5 table over ``content`` (external content), its ``records_refuted``
  and ``records_expiry`` indexes, the store's own ``vectors`` and ``meta``.

Metadata (and so secrets) stays in the store. The index is memtui's own file:
it is written by memtui alone, and a forget purges its copy (``purge``).
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memtui.core import vector_cache
from memtui.core.index import FTS_TABLE, SearchIndex
from memtui.core.index_db import IndexDatabase, byte_probe, files_holding, open_connection
from memtui.sources.shapes import Progress, SourceError, unknown_filter_error

CACHE_FORMAT = "2"
"""The index's format: a file of another format (an older memtui's) is rebuilt."""

VECTOR_EMBEDDER_PREFIX = "store-vectors"
LOAD_BATCH = 5000
_WORD = re.compile(r"\w+", re.UNICODE)

FilterSql = Callable[[str, Any, str], tuple[str, list[Any]]]
"""A source's own SQL for one filter: ``(key, value, column)`` to ``(sql, params)``, or
None for the plain ``column = value``; ``column`` is the index's expression for the key."""


class StaleIndex(Exception):
    """The file is not an index this memtui reads (another format, other scope keys)."""


@dataclass(frozen=True)
class CacheRow:
    """What the index keeps of one source record."""

    source_id: str
    tier: str
    record_type: str
    content: str
    scope: dict[str, Any]
    hidden: bool
    expires_at: str | None  # already mapped to the native strict rule
    vector: bytes | None = None  # little-endian float32
    key_hash: int | None = None  # a Postgres store's (``memtui.sources.postgres.key_buckets``)


def scope_column(key: str) -> str:
    """The quoted column that holds scope key ``key`` (a key of the source's code)."""
    return '"' + ("scope_" + key).replace('"', '""') + '"'


def scope_text(value: Any) -> str | None:
    """A scope value as the index keeps it: text (filters compare text); a list (tags)
    as a compact JSON array of text."""
    if value is None:
        return None
    if isinstance(value, list | tuple):
        return json.dumps([str(v) for v in value], separators=(",", ":"), ensure_ascii=False)
    return str(value)


def _schema(scope_keys: Sequence[str]) -> list[str]:
    scopes = "".join(f",\n    {scope_column(key)} TEXT" for key in scope_keys)
    bump = "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'vectors_generation';"
    return [
        f"""CREATE TABLE records (
    id INTEGER PRIMARY KEY,
    source_id TEXT NOT NULL UNIQUE,
    tier TEXT NOT NULL,
    record_type TEXT NOT NULL,
    content TEXT NOT NULL,
    refuted INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    expires_at TEXT{scopes}
)""",
        "CREATE INDEX records_refuted ON records(refuted) WHERE refuted != 0",
        "CREATE INDEX records_expiry ON records(expires_at, refuted) WHERE expires_at IS NOT NULL",
        f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5(content, content='records', "
        "content_rowid='id')",
        "CREATE TABLE vectors (record_id INTEGER PRIMARY KEY, vector BLOB NOT NULL)",
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "INSERT INTO meta (key, value) VALUES ('vectors_generation', '0')",
        "INSERT INTO meta (key, value) VALUES ('database_id', lower(hex(randomblob(16))))",
        f"""CREATE TRIGGER records_ad AFTER DELETE ON records BEGIN
    INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, content) VALUES ('delete', old.id, old.content);
    DELETE FROM vectors WHERE record_id = old.id;
END""",
        f"""CREATE TRIGGER records_au AFTER UPDATE OF content ON records BEGIN
    INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO {FTS_TABLE}(rowid, content) VALUES (new.id, new.content);
END""",
        *(
            f"CREATE TRIGGER vectors_generation_{suffix} AFTER {event} ON vectors BEGIN {bump} END"
            for suffix, event in (("ai", "INSERT"), ("ad", "DELETE"), ("au", "UPDATE"))
        ),
    ]


# Kept apart so that a build loads its rows and indexes them in one statement.
_INSERT_TRIGGER = f"""CREATE TRIGGER records_ai AFTER INSERT ON records BEGIN
    INSERT INTO {FTS_TABLE}(rowid, content) VALUES (new.id, new.content);
END"""


class ForeignIndex(IndexDatabase):
    """The index file of one foreign store; its filters are the store's own scope keys."""

    def __init__(
        self,
        path: Path,
        *,
        allowed: frozenset[str],
        filter_sql: FilterSql | None,
        clock: Callable[[], datetime],
        create: bool = False,
    ) -> None:
        self._allowed = allowed
        self._filter_sql = filter_sql
        self.scope_keys = tuple(sorted(allowed - {"tier", "record_type"}))
        super().__init__(
            open_connection(path, create=create, busy_timeout_ms=5000), path, clock=clock
        )
        try:
            if create:
                with self.write() as conn:
                    for statement in _schema(self.scope_keys):
                        conn.execute(statement)
                    self._set_meta(
                        conn, {"cache_format": CACHE_FORMAT, "scope_keys": self._keys_text()}
                    )
            else:
                self._check_format()
        except BaseException:
            super().close()
            raise

    def _keys_text(self) -> str:
        return json.dumps(list(self.scope_keys))

    def _check_format(self) -> None:
        meta = self.meta()
        if meta.get("cache_format") != CACHE_FORMAT or meta.get("scope_keys") != self._keys_text():
            raise StaleIndex(f"{self.path} is not an index of this format")

    def busy_error(self) -> Exception:
        return SourceError("the database is busy (another process is writing); try again")

    def close(self) -> None:
        """Close the file, once a vector matrix built from it is published (or deleted)."""
        vector_cache.wait_for_writes()
        super().close()

    # -- what the engine reads

    def scope_clause(
        self,
        filters: dict[str, Any] | None,
        *,
        include_refuted: bool = False,
        include_expired: bool = False,
        alias: str = "",
    ) -> tuple[str, list[Any]]:
        """SQL for the source's filters (its allowlist, its own SQL for some keys) and the
        live rule: not hidden, and ``expires_at > now`` (strict)."""
        prefix = f"{alias}." if alias else ""
        clauses: list[str] = []
        params: list[Any] = []
        for key, value in (filters or {}).items():
            if key not in self._allowed:
                raise unknown_filter_error(key, self._allowed)
            if key in ("tier", "record_type"):
                column = f"{prefix}{key}"
            else:
                column = f"{prefix}{scope_column(key)}"
            if value is None:
                clauses.append(f"{column} IS NULL")
                continue
            custom = self._filter_sql(key, value, column) if self._filter_sql else None
            if custom is not None:
                clauses.append(custom[0])
                params.extend(custom[1])
                continue
            clauses.append(f"{column} = ?")
            params.append(str(value))
        if not include_refuted:
            clauses.append(f"{prefix}refuted = 0")
        if not include_expired:
            clauses.append(f"({prefix}expires_at IS NULL OR {prefix}expires_at > ?)")
            params.append(self.now_text())
        return (" AND ".join(clauses) or "1"), params

    def record_count(self) -> int:
        return self.query("SELECT count(*) FROM records")[0][0]

    def recorded_embedder(self) -> dict[str, Any] | None:
        """The store's vectors as the engine names them (``store-vectors-DIM``); None
        when the store has none."""
        meta = self.meta()
        if "embedder_name" not in meta:
            return None
        return {"name": meta["embedder_name"], "dim": int(meta["embedder_dim"])}

    # -- meta

    def meta(self) -> dict[str, str]:
        return {k: v for k, v in self.query("SELECT key, value FROM meta")}

    @staticmethod
    def _set_meta(conn: sqlite3.Connection, values: Mapping[str, str]) -> None:
        conn.executemany(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", list(values.items())
        )

    def set_meta(self, values: Mapping[str, str]) -> None:
        with self.write() as conn:
            self._set_meta(conn, values)

    # -- building

    @contextlib.contextmanager
    def building(self) -> Iterator[None]:
        """The writes of a build into a new file (one no reader has yet): without a
        rollback journal or syncs, a file that a crash leaves half written is thrown
        away, never opened (``SourceIndex._rebuild`` moves it into place only once it is
        whole and on disk). The file is in WAL mode again after."""
        with self.lock:
            self._conn.execute("PRAGMA journal_mode = OFF")
            self._conn.execute("PRAGMA synchronous = OFF")
        yield
        with self.lock:
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")

    def _state_params(self, row: CacheRow) -> tuple[Any, ...]:
        """The row's tier, type, hidden flag, expiry and scope values, in column order."""
        return (
            row.tier,
            row.record_type or "record",
            int(row.hidden),
            row.expires_at,
            *(scope_text(row.scope.get(key)) for key in self.scope_keys),
        )

    def _scope_assignments(self) -> str:
        return "".join(f", {scope_column(key)} = ?" for key in self.scope_keys)

    def row_values(self, row: CacheRow) -> tuple[Any, ...]:
        """The row as ``load_values`` writes it: source id, content, tier, record type,
        hidden (0 or 1), expiry, then each scope key's text (``scope_keys``' order)."""
        return (row.source_id, row.content or "", *self._state_params(row))

    def load(self, rows: Sequence[CacheRow], progress: Progress | None = None) -> None:
        """Write the rows (already in source-id order, ids 1, 2...), index them, and the
        store's vectors when they all have one dimension. Once, into a new index."""
        self._write_values([self.row_values(row) for row in rows], progress)
        with self.write() as conn:
            self._load_vectors(conn, rows)

    def load_values(
        self, values: Sequence[Sequence[Any]], progress: Progress | None = None
    ) -> None:
        """Write the rows given as ``row_values`` gives them (already in source-id order,
        ids 1, 2...; what follows a row's scope values is left for a subclass: a Postgres
        index's key hash) and index their content. Once, into a new index."""
        self._write_values(values, progress)

    def _write_values(self, values: Sequence[Sequence[Any]], progress: Progress | None) -> None:
        columns = "".join(f", {scope_column(key)}" for key in self.scope_keys)
        marks = ", ?" * len(self.scope_keys)
        width = 6 + len(self.scope_keys)
        insert = (
            "INSERT INTO records (id, created_at, source_id, content, tier, record_type, "
            f"refuted, expires_at{columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?{marks})"
        )
        now = self.now_text()
        total = len(values)
        with self.write() as conn:
            for start in range(0, total, LOAD_BATCH):
                batch = values[start : start + LOAD_BATCH]
                conn.executemany(
                    insert, [(n, now, *v[:width]) for n, v in enumerate(batch, start=start + 1)]
                )
                done = start + len(batch)
                if progress and done < total:
                    progress(done, total)
            # FTS5's own settings: with more postings held in memory (hashsize) or no merges
            # along the way (automerge 0) the rebuild is faster, but its one segment is left
            # on a low level, where a refresh's merges rewrite it (at 200,000 items three
            # refreshes of 1,000 changes took three times the CPU)
            conn.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('rebuild')")
            conn.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('optimize')")
            conn.execute(_INSERT_TRIGGER)
        if progress:
            progress(total, total)

    def _load_vectors(self, conn: sqlite3.Connection, rows: Sequence[CacheRow]) -> None:
        dims = {len(r.vector) // 4 for r in rows if r.vector}
        if len(dims) != 1:
            return
        dim = dims.pop()
        conn.executemany(
            "INSERT OR REPLACE INTO vectors (record_id, vector) VALUES (?, ?)",
            [
                (cache_id, row.vector)
                for cache_id, row in enumerate(rows, start=1)
                if row.vector and len(row.vector) == dim * 4
            ],
        )
        self._set_meta(
            conn, {"embedder_name": f"{VECTOR_EMBEDDER_PREFIX}-{dim}", "embedder_dim": str(dim)}
        )

    # -- ids

    def cache_ids(self, source_ids: Iterable[str]) -> dict[str, int]:
        """The index's row id of each of these source ids it holds."""
        ids = list(source_ids)
        out: dict[str, int] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for cache_id, source_id in self.query(
                f"SELECT id, source_id FROM records WHERE source_id IN ({marks})", chunk
            ):
                out[source_id] = cache_id
        return out

    def source_ids_of(self, cache_ids: Iterable[int]) -> dict[int, str]:
        """The source id of each of these row ids."""
        ids = [int(i) for i in cache_ids]
        out: dict[int, str] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for cache_id, source_id in self.query(
                f"SELECT id, source_id FROM records WHERE id IN ({marks})", chunk
            ):
                out[cache_id] = source_id
        return out

    # -- keeping it in line with the store

    def replace_vectors(self, vectors: Mapping[str, bytes]) -> int:
        """Make these records' vectors the ones given (a record with a vector per field:
        the one that counts for the next search); returns how many changed."""
        found = self.cache_ids(vectors)
        current = dict(
            self.query(
                "SELECT record_id, vector FROM vectors "
                "WHERE record_id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(found.values())),),
            )
        )
        changed = [
            (cache_id, vectors[source_id])
            for source_id, cache_id in found.items()
            if current.get(cache_id) != vectors[source_id]
        ]
        if changed:
            with self.write() as conn:
                conn.executemany(
                    "INSERT OR REPLACE INTO vectors (record_id, vector) VALUES (?, ?)", changed
                )
        return len(changed)

    def update_row(self, row: CacheRow) -> None:
        """Bring one row in line with the store (state, expiry, scope, text)."""
        found = self.cache_ids([row.source_id])
        if row.source_id not in found:
            return
        cache_id = found[row.source_id]
        with self.write() as conn:
            conn.execute(
                "UPDATE records SET tier = ?, record_type = ?, refuted = ?, expires_at = ?"
                f"{self._scope_assignments()} WHERE id = ?",
                (*self._state_params(row), cache_id),
            )
            current = conn.execute("SELECT content FROM records WHERE id = ?", (cache_id,))
            held = current.fetchone()
            if held is not None and held[0] != row.content:
                conn.execute("UPDATE records SET content = ? WHERE id = ?", (row.content, cache_id))
                conn.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('optimize')")
        self.checkpoint()

    # -- erasure

    def purge(self, source_ids: Sequence[str]) -> bool:
        """Erase these records' copies: the row, its postings (merged away), its vector and
        its rows of the vector lane's cached matrix; then the WAL is truncated and the
        file searched for the texts. True when every check held (nothing to erase: True).
        """
        found = self.cache_ids(source_ids)
        if not found:
            return True
        ids = sorted(found.values())
        chunk = json.dumps(ids)
        with self.lock:  # no search between the commit and the vector cache's carry-over
            with self.write() as conn:
                held = conn.execute(
                    "SELECT id, content FROM records WHERE id IN (SELECT value FROM json_each(?)) "
                    "ORDER BY id",
                    (chunk,),
                ).fetchall()
                contents = [row[1] for row in held]
                before = vector_cache.identity(self)
                conn.execute(
                    "DELETE FROM records WHERE id IN (SELECT value FROM json_each(?))", (chunk,)
                )
                conn.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('optimize')")
                erasure = vector_cache.erase(self, ids, before)
                gone = self._rows_gone(conn, chunk) and self._postings_gone(conn, held)
            vector_cache.carry_over(self, erasure)
        gone = gone and erasure.erased is not False
        gone = self.checkpoint() and self._bytes_gone(contents) and gone
        vector_cache.empty_trash()
        return gone

    @staticmethod
    def _rows_gone(conn: sqlite3.Connection, chunk: str) -> bool:
        for table, column in (("records", "id"), ("vectors", "record_id")):
            if conn.execute(
                f"SELECT 1 FROM {table} WHERE {column} IN (SELECT value FROM json_each(?)) LIMIT 1",
                (chunk,),
            ).fetchone():
                return False
        return True

    @staticmethod
    def _postings_gone(conn: sqlite3.Connection, rows: Sequence[Any]) -> bool:
        """No posting of a forgotten row is left: none of its first words matches at its id."""
        sql = f"SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH ? AND rowid = ?"
        for cache_id, content in rows:
            words = list(dict.fromkeys(_WORD.findall(content.lower())))[:8]
            if not words:
                continue
            probe = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
            if conn.execute(sql, (probe, cache_id)).fetchone() is not None:
                return False
        return True

    def _bytes_gone(self, contents: Sequence[str]) -> bool:
        """Whether the forgotten texts are gone from the file and its WAL: a text still
        found there must be one that a live row (or the schema) holds too."""
        probes = [p for p in dict.fromkeys(byte_probe(text) for text in contents) if p]
        if not probes or self.path is None:
            return True
        parts = [p for p in (self.path, Path(f"{self.path}-wal")) if p.exists()]
        found = files_holding(parts, probes)
        if found is None:
            return False
        return all(self._text_kept(probes[i]) for i in found)

    def _text_kept(self, probe: bytes) -> bool:
        columns = [
            "source_id",
            "tier",
            "record_type",
            "content",
            *map(scope_column, self.scope_keys),
        ]
        sql = (
            "SELECT 1 FROM records WHERE "
            + " OR ".join(f"instr({column}, ?1) > 0" for column in columns)
            + " UNION ALL SELECT 1 FROM meta WHERE instr(value, ?1) > 0"
            + " UNION ALL SELECT 1 FROM sqlite_master WHERE instr(sql, ?1) > 0"
        )
        return bool(self.query(f"{sql} LIMIT 1", (probe.decode("utf-8"),)))


if TYPE_CHECKING:

    def _speaks_search_index(index: ForeignIndex) -> SearchIndex:
        """mypy checks here that the index has every call the engine makes."""
        return index
