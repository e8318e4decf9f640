"""What memtui's index asks a LangGraph ``PostgresStore`` (``index_sync.ChangeFeed``):
the change probe, the changed rows (by key, from the probe's own scan, where the server
can), a build's rows, the key hashes' side of the comparison, the expiries."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memtui.core.records import format_timestamp
from memtui.sources.base import FIELD_SEPARATOR, decode_id, encode_id
from memtui.sources.foreign_index import CacheRow
from memtui.sources.langgraph_read import ID_PREFIX, parse_value, secret_field, text_fields
from memtui.sources.postgres.index_sync import StoreProbe
from memtui.sources.postgres.key_buckets import StoreBuckets, hash_sql
from memtui.sources.postgres.record_ids import id_sql
from memtui.sources.postgres.source import Query

if TYPE_CHECKING:
    from memtui.sources.postgres.langgraph import LangGraphPostgresSource

MAX_KEYS = 256
"""A build joins the content in the database when the values have at most this many
distinct top-level keys (each one is checked for a secret name first)."""


def iso(moment: Any) -> str | None:
    """A timestamp from the database as ISO-8601 text (None stays None)."""
    if moment is None:
        return None
    return moment.isoformat() if isinstance(moment, datetime) else str(moment)


PARALLEL_ARRAY_AGG = 160000
"""The server version from which ``array_agg`` runs in parallel workers (Postgres 16)."""


class LangGraphFeed:
    """What memtui's index asks a LangGraph ``PostgresStore`` (``ChangeFeed``)."""

    def __init__(self, source: LangGraphPostgresSource) -> None:
        self.source = source
        self.buckets = StoreBuckets(
            source, source._store, key_texts("t"), "t.prefix, t.key", _record_id
        )

    def probe(self) -> StoreProbe:
        """Rows, the latest ``updated_at``, and the expiries' count and sum in
        microseconds (``PostgresIndex.expiry_digest`` computes the same on the index)."""
        rows, latest, with_ttl, ttl_sum = self.source.query(self._probe_sql())[0]
        return StoreProbe(rows=int(rows), latest=iso(latest), expiries=[int(with_ttl), ttl_sum])

    def _probe_sql(self, also: str = "") -> str:
        source = self.source
        ttl = (
            ", count(expires_at), sum((extract(epoch FROM expires_at) * 1000000)::bigint)::text"
            if source._has_ttl()
            else ", 0, NULL"
        )
        return f"SELECT count(*), max(s.updated_at){ttl}{also} FROM {source._store} AS s"

    def probe_changed(self, since: str) -> StoreProbe:
        """``probe`` with the keys of the rows updated after ``since`` (``StoreProbe.changed``),
        in the same scan. Postgres 16 aggregates arrays in parallel workers; before it
        this is the plain probe, which they still run."""
        if self.source.pg.raw.info.server_version < PARALLEL_ARRAY_AGG:
            return self.probe()
        rows, latest, with_ttl, ttl_sum, keys = self.source.query(
            self._probe_sql(", array_agg(ARRAY[s.prefix, s.key]) FILTER (WHERE s.updated_at > %s)"),
            [datetime.fromisoformat(since)],
        )[0]
        return StoreProbe(
            rows=int(rows),
            latest=iso(latest),
            expiries=[int(with_ttl), ttl_sum],
            changed=tuple(encode_id(ID_PREFIX, prefix, key) for prefix, key in keys or ()),
        )

    def database_now(self) -> str:
        moment = self.source.query("SELECT clock_timestamp()")[0][0]
        return iso(moment) or ""

    def _select(self) -> str:
        """What the index keeps of a row, and nothing more (no vector fields, no times)."""
        source = self.source
        expires = "s.expires_at" if source._has_ttl() else "NULL"
        return (
            f"SELECT s.prefix, s.key, s.value::text, {expires}, "
            f"{hash_sql(*key_texts('s'))} FROM {source._store} AS s"
        )

    @staticmethod
    def _index_row(row: Sequence[Any]) -> CacheRow:
        prefix, key, raw, expires, key_hash = row
        if isinstance(raw, str | bytes | bytearray):
            value, problem = parse_value(raw)
        else:
            value, problem = raw, None
        return CacheRow(
            source_id=encode_id(ID_PREFIX, prefix, key),
            tier=prefix.split(".", 1)[0] if prefix else "",
            record_type="item",
            content=FIELD_SEPARATOR.join(text_fields(value)) if problem is None else str(value),
            scope={"namespace": prefix},
            hidden=False,
            expires_at=format_timestamp(expires) if expires is not None else None,
            key_hash=int(key_hash),
        )

    def changed_rows(self, since: str | None) -> Iterator[CacheRow]:
        source = self.source
        if since is not None:
            rows = source.query(
                f"{self._select()} WHERE s.updated_at > %s ORDER BY s.prefix, s.key",
                [datetime.fromisoformat(since)],
            )
            yield from map(self._index_row, rows)
            return
        yield from source.stream(self._build_select, self._built_row)

    def _build_select(self, query: Query) -> tuple[str, list[Any]]:
        """A build's read: the id and the key hash as the database makes them, the
        namespace, the expiry, and the content: a flat object's strings joined by the
        database (its secret-named fields left out: its distinct top-level keys are read
        first, in the same snapshot, and checked here), else the value as text for
        ``text_fields``. Beyond ``MAX_KEYS`` distinct keys every value comes as text."""
        source = self.source
        expires = "s.expires_at" if source._has_ttl() else "NULL"
        keys = query(
            f"SELECT DISTINCT k FROM {source._store} AS s, jsonb_object_keys("
            "CASE WHEN jsonb_typeof(s.value) = 'object' THEN s.value END) AS k LIMIT %s",
            [MAX_KEYS + 1],
        )
        secret = [str(k) for (k,) in keys if secret_field(str(k))]
        flat = (
            "jsonb_typeof(s.value) = 'object' AND NOT jsonb_path_exists(s.value, "
            '\'$.* ? (@.type() == "object" || @.type() == "array")\')'
            if len(keys) <= MAX_KEYS
            else "FALSE"
        )
        strings = "jsonb_path_query_array(s.value - %s::text[], '$.* ? (@.type() == \"string\")')"
        sql = (
            f"SELECT {id_sql(ID_PREFIX, 's.prefix', 's.key')}, s.prefix, c.flat, "
            "CASE WHEN c.flat THEN array_to_string(ARRAY(SELECT jsonb_array_elements_text("
            f"{strings})), %s) ELSE s.value::text END, "
            f"{expires}, {hash_sql(*key_texts('s'))} FROM {source._store} AS s "
            f"CROSS JOIN LATERAL (SELECT {flat} AS flat) AS c "
            # in key order, near the index's: the rows are then sorted and written in
            # about the order they were made in (measured faster than the heap's order)
            "ORDER BY s.prefix, s.key"
        )
        return sql, [secret, FIELD_SEPARATOR]

    @staticmethod
    def _built_row(row: Sequence[Any]) -> CacheRow:
        """A build's row as an index row (``_built_values``' fields)."""
        record_id, content, tier, record_type, _hidden, expires, prefix, key_hash = (
            LangGraphFeed._built_values(row)
        )
        return CacheRow(
            source_id=record_id,
            tier=tier,
            record_type=record_type,
            content=content,
            scope={"namespace": prefix},
            hidden=False,
            expires_at=expires,
            key_hash=key_hash,
        )

    def build_values(self, scope_keys: Sequence[str]) -> list[tuple[Any, ...]] | None:
        """Every row for a build as ``PostgresIndex.load_values`` writes it (source id,
        content, tier, record type, hidden, expiry, namespace, key hash): what
        ``changed_rows(None)`` gives, without a ``CacheRow`` made for each row. None for
        an index whose scope keys are not this store's (``namespace``)."""
        if tuple(scope_keys) != ("namespace",):
            return None
        return self.source.stream(self._build_select, self._built_values)

    @staticmethod
    def _built_values(row: Sequence[Any]) -> tuple[Any, ...]:
        """A build's row (``_build_select``'s) as the index writes it (``row_values``' order,
        the key hash last): a nested value's text decoded here."""
        record_id, prefix, flat, content, expires, key_hash = row
        if not flat:
            value, problem = parse_value(content)
            content = FIELD_SEPARATOR.join(text_fields(value)) if problem is None else str(value)
        return (
            record_id,
            content or "",
            prefix.split(".", 1)[0] if prefix else "",
            "item",
            0,
            format_timestamp(expires) if expires is not None else None,
            prefix,
            int(key_hash),
        )

    def rows_by_id(self, ids: Sequence[str]) -> list[CacheRow]:
        return [self._index_row(row) for row in self._by_key(self._select(), ids)]

    def existing(self, ids: Sequence[str]) -> set[str]:
        select = f"SELECT s.prefix, s.key FROM {self.source._store} AS s"
        return {_record_id(row) for row in self._by_key(select, ids)}

    def _by_key(self, select: str, ids: Sequence[str]) -> list[tuple[Any, ...]]:
        """``select``'s rows of these ids, by the primary key (``store_pkey``)."""
        keys = [k for k in (decode_id(ID_PREFIX, i, 2) for i in ids) if k is not None]
        out: list[tuple[Any, ...]] = []
        for start in range(0, len(keys), 1000):
            chunk = keys[start : start + 1000]
            out += self.source.query(
                f"{select} WHERE (s.prefix, s.key) IN "
                "(SELECT * FROM unnest(%s::text[], %s::text[]))",
                [[k[0] for k in chunk], [k[1] for k in chunk]],
            )
        return out

    def expiries(self) -> dict[str, str | None]:
        source = self.source
        if not source._has_ttl():
            return {}
        rows = source.query(
            f"SELECT prefix, key, expires_at FROM {source._store} WHERE expires_at IS NOT NULL"
        )
        return {encode_id(ID_PREFIX, p, k): format_timestamp(e) for p, k, e in rows}

    def refreshed_expiries(self, since: str) -> dict[str, str | None]:
        """The expiries LangGraph refreshed after ``since`` (its ``refresh_ttl`` sets
        ``expires_at = now() + ttl_minutes``, leaving ``updated_at``): the rows whose
        expiry less their TTL is after it."""
        source = self.source
        if not source._has_ttl():
            return {}
        rows = source.query(
            f"SELECT prefix, key, expires_at FROM {source._store} WHERE expires_at IS NOT NULL "
            "AND ttl_minutes IS NOT NULL AND expires_at - ttl_minutes * interval '1 minute' > %s",
            [datetime.fromisoformat(since)],
        )
        return {encode_id(ID_PREFIX, p, k): format_timestamp(e) for p, k, e in rows}


def key_texts(alias: str) -> tuple[str, str]:
    """A LangGraph row's key, as the text parts its key hash is made of."""
    return (f"{alias}.prefix", f"{alias}.key")


def _record_id(row: Sequence[Any]) -> str:
    return encode_id(ID_PREFIX, row[0], row[1])
