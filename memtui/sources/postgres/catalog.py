"""What a Postgres schema holds, read from the system catalogs (never from the tables).

``read_catalog`` lists the tables (and views) of one schema with their columns
and types, and the indexes on them with their access method and operator
class: what the store kinds recognize a store by (``memtui.sources.postgres.kinds``)
and what the vector lane asks (is there an HNSW or IVFFlat index it can use).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from memtui.sources.postgres.connection import PgConnection
from memtui.sources.postgres.url import PgTarget
from memtui.sources.shapes import SourceError

LISTED_TABLES = 8
"""The most table names a "holds N tables (...)" line lists."""
_DIMS = re.compile(r"^(?:[\w\"]+\.)?(vector|halfvec)\((\d+)\)$")


@dataclass(frozen=True)
class IndexInfo:
    """One index: its name, access method (``btree``, ``hnsw``...), columns, opclasses."""

    name: str
    method: str
    columns: tuple[str, ...]
    opclasses: tuple[str, ...]
    unique: bool = False


@dataclass(frozen=True)
class Catalog:
    """The tables of one schema: ``tables[name][column] = type`` (``format_type``)."""

    schema: str
    tables: dict[str, dict[str, str]]
    indexes: dict[str, list[IndexInfo]] = field(default_factory=dict)
    schemas: tuple[str, ...] = ()
    """Every schema of the database a user can see (to name them when one is missing)."""

    def has(self, table: str, columns: dict[str, str | None]) -> bool:
        """Whether ``table`` has these columns, each of the type given (None: any type)."""
        found = self.tables.get(table)
        if found is None:
            return False
        for column, wanted in columns.items():
            if column not in found:
                return False
            if wanted is not None and not found[column].startswith(wanted):
                return False
        return True

    def vector_column(self, table: str, column: str) -> tuple[str, int] | None:
        """``(type, dims)`` of a pgvector column (``vector(384)``), None for another type."""
        declared = self.tables.get(table, {}).get(column)
        match = _DIMS.match(declared or "")
        return (match.group(1), int(match.group(2))) if match else None

    def type_name(self, table: str, column: str) -> str:
        """The column's type without its modifier (``vector``, ``public.vector``)."""
        return self.tables[table][column].split("(", 1)[0]

    def describe(self, target: PgTarget) -> str:
        """``postgresql://…/db (schema public) holds 3 tables (a, b, c)``."""
        names = sorted(self.tables)
        where = f"{target.display} (schema {self.schema})"
        if not names:
            return f"{where} holds no tables"
        listed = ", ".join(names[:LISTED_TABLES]) + (", …" if len(names) > LISTED_TABLES else "")
        noun = "table" if len(names) == 1 else "tables"
        return f"{where} holds {len(names)} {noun} ({listed})"


_TABLES = """
SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod)
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_attribute AS a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
ORDER BY c.relname, a.attnum
"""

_INDEXES = """
SELECT t.relname, i.relname, am.amname, ix.indisunique,
       ARRAY(SELECT coalesce(a.attname, '(expression)')
             FROM unnest(ix.indkey) WITH ORDINALITY AS k(attnum, n)
             LEFT JOIN pg_catalog.pg_attribute AS a ON a.attrelid = t.oid AND a.attnum = k.attnum
             ORDER BY k.n),
       ARRAY(SELECT o.opcname
             FROM unnest(ix.indclass) WITH ORDINALITY AS k(oid, n)
             JOIN pg_catalog.pg_opclass AS o ON o.oid = k.oid
             ORDER BY k.n)
FROM pg_catalog.pg_index AS ix
JOIN pg_catalog.pg_class AS t ON t.oid = ix.indrelid
JOIN pg_catalog.pg_class AS i ON i.oid = ix.indexrelid
JOIN pg_catalog.pg_am AS am ON am.oid = i.relam
JOIN pg_catalog.pg_namespace AS n ON n.oid = t.relnamespace
WHERE n.nspname = %s AND ix.indisvalid
ORDER BY t.relname, i.relname
"""

_SCHEMAS = """
SELECT nspname FROM pg_catalog.pg_namespace
WHERE nspname NOT LIKE 'pg\\_%%' AND nspname <> 'information_schema'
ORDER BY nspname
"""


def read_catalog(conn: PgConnection, schema: str) -> Catalog:
    """The tables, columns and indexes of ``schema``; a missing schema is one line naming
    the schemas there are."""
    schemas = tuple(row[0] for row in conn.query(_SCHEMAS))
    if schema not in schemas:
        raise SourceError(
            f"{conn.target.display} has no schema {schema!r} "
            f"(schemas: {', '.join(schemas) or 'none'}); give one with --pg-schema"
        )
    tables: dict[str, dict[str, str]] = {}
    for table, column, declared in conn.query(_TABLES, (schema,)):
        tables.setdefault(str(table), {})[str(column)] = str(declared)
    indexes: dict[str, list[IndexInfo]] = {}
    for table, name, method, unique, columns, opclasses in conn.query(_INDEXES, (schema,)):
        indexes.setdefault(str(table), []).append(
            IndexInfo(
                name=str(name),
                method=str(method),
                columns=tuple(str(c) for c in columns),
                opclasses=tuple(str(o) for o in opclasses),
                unique=bool(unique),
            )
        )
    return Catalog(schema=schema, tables=tables, indexes=indexes, schemas=schemas)


@dataclass
class PgDatabase:
    """What recognizing a URL opened: the target, the connection and the schema's catalog.

    The kind that recognizes it takes the connection over (its source closes it).
    """

    target: PgTarget
    conn: PgConnection
    catalog: Catalog
