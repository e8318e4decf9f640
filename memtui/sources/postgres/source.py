"""What every store in a Postgres database shares: ``PostgresSource``.

It is a foreign store (``ForeignSource``: search on memtui's index, the
audit log, the forget protocol's hooks) whose connection is a ``PgConnection``:

- named by its URL without the password (``label``, ``location``, ``info``, the
  audit events), keyed in memtui's cache and data folders by server, database and
  schema (never by the password): ``anchor`` is a folder in the cache naming it,
  the audit log ``$XDG_DATA_HOME/memtui/audit/postgres-DB-KEY.memtui-audit.db``;
- its keyword index refreshed in place by what changed (``SyncedIndex``; the kind
  is the ``ChangeFeed``), its vector lane run in the database (``vector_search``);
- its change probe (``data_version``) the feed's probe, paced by its cost
  (``change_watch``): the app's live refresh;
- ``path_changed`` compares the database's and the store table's identities
  (oids) with those at open: a database or table dropped and made again under the
  same name is another store, and a change is refused.

A kind (``memtui.sources.postgres.langgraph``) adds its reads, its feed and its
vector lane. Forgetting in a Postgres store is refused until a kind implements it
(``forget_implemented``): with ``--allow-writes`` the refusal says so, without it
the read-only line says to pass ``--allow-writes``. A kind that forgets deletes in
one database transaction (``_apply_forget``); the purge after it and its checks are
``memtui.sources.postgres.erasure`` (``_purge_applied`` here).
"""

from __future__ import annotations

import gc
import hashlib
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from memtui.config import current
from memtui.sources.base import (
    DEFAULT_PAGE_SIZE,
    Page,
    SourceError,
    SourceRecord,
    SourceSummary,
    check_limit,
    require_reason,
)
from memtui.sources.cache import SourceIndex, cache_root, fingerprint_text
from memtui.sources.foreign import ForeignSource
from memtui.sources.foreign_erasure import Erasure, GapsOutcome
from memtui.sources.outcome import ForgetOutcome
from memtui.sources.postgres.catalog import Catalog, PgDatabase
from memtui.sources.postgres.change_watch import ChangeWatch, write_counters_sql
from memtui.sources.postgres.connection import PgConnection
from memtui.sources.postgres.erasure import UNREACHABLE, PgErasure
from memtui.sources.postgres.gaps import SCAN_LIMIT, OutsideGap, PgGaps
from memtui.sources.postgres.index_file import PostgresIndex
from memtui.sources.postgres.index_sync import ChangeFeed, SyncedIndex
from memtui.sources.postgres.page_purge import PagePurge
from memtui.sources.postgres.prefetch import prefetched
from memtui.sources.postgres.prefix_counts import KeptReads
from memtui.sources.postgres.url import PgTarget, quote_identifier

T = TypeVar("T")
STREAM_BATCH = 20_000
"""Rows per fetch of a server-side cursor (a build's read)."""


Query = Callable[..., list[tuple[Any, ...]]]
"""``query(sql, params=())``: the rows of one statement."""
Statement = Callable[[Query], tuple[str, Sequence[Any]]]
"""What makes a streamed read's SQL and parameters (``PostgresSource.stream``)."""


def _fetch_all(conn: Any, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    return list(conn.execute(sql, params or None).fetchall())


def store_key(conn: PgConnection, schema: str) -> tuple[str, dict[str, Any]]:
    """A short key naming the store (server, database, schema, never the password),
    and what it is made of."""
    info = conn.info()
    parts = {
        "host": info["host"],
        "port": info["port"],
        "dbname": info["dbname"],
        "schema": schema,
    }
    text = json.dumps(parts, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16], parts


def store_anchor(kind: str, key: str, target: PgTarget, root: Path | None) -> Path:
    """The folder in memtui's cache naming this store (its index is keyed on it)."""
    anchor = (root or cache_root()) / "servers" / f"{kind}-{key}"
    anchor.mkdir(parents=True, exist_ok=True)
    info = anchor / "server.json"
    if not info.exists():
        info.write_text(
            json.dumps({"url": target.display, "schema": target.schema}) + "\n", encoding="utf-8"
        )
    return anchor


def default_audit_path(kind: str, key: str, dbname: str) -> Path:
    """The audit log of a Postgres store: in the user's data folder, keyed like the cache."""
    folder = current().data_dir / "audit"
    folder.mkdir(parents=True, exist_ok=True)
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in dbname)[:40]
    return folder / f"{kind}-{name}-{key}.memtui-audit.db"


VACUUM_WARN_BYTES = 256 * 2**20
"""Indexes this large make a forget's vacuum take seconds: the dialog says so."""
VACUUM_WARN_DEAD = 1000
"""Rows others deleted that the forget's vacuum also cleans, from which the dialog says so."""


class PostgresSource(ForeignSource):
    """A memory store in a Postgres schema that memtui did not write."""

    #: the table whose identity names the store (``path_changed`` compares its oid)
    main_table: str = ""
    #: whether the kind's forget is implemented (until then a change is refused whole)
    forget_implemented: bool = False
    write_capabilities = frozenset({"forget", "forget_scope"})
    #: the store's tables: a forgotten text is looked for in their text and jsonb columns
    store_tables: tuple[str, ...] = ()
    #: the tables a forget deletes from (vacuumed after it)
    forget_tables: tuple[str, ...] = ()

    def __init__(
        self,
        database: PgDatabase,
        *,
        read_only: bool = True,
        clock: Any = None,
        operator: str | None = None,
        audit_db: str | Path | None = None,
        cache_root: Path | None = None,
    ) -> None:
        self.database = database
        self.target: PgTarget = database.target
        self.pg: PgConnection = database.conn
        self.catalog: Catalog = database.catalog
        self.schema = database.target.schema
        self.key, self.server = store_key(self.pg, self.schema)
        anchor = store_anchor(self.kind, self.key, self.target, cache_root)
        audit = audit_db
        if audit is None:
            audit = default_audit_path(self.kind, self.key, str(self.server["dbname"]))
            audit.parent.mkdir(parents=True, exist_ok=True)
        self._identity = self._read_identity()
        super().__init__(
            anchor,
            read_only=read_only,
            clock=clock,
            operator=operator,
            audit_db=audit,
            cache_root=cache_root,
        )
        self.opened_files = []  # no file of the store's: ``path_changed`` asks the database
        self._side: PgConnection | None = None
        self._side_lock = threading.Lock()
        self._watch = ChangeWatch(self.fingerprint, self._write_counters)
        self.kept = KeptReads(self.data_version)
        """Whole-table reads (counts) kept until the store changes (``reread``)."""

    def record(self, row: Sequence[Any]) -> SourceRecord:
        """The kind's record for one row of its ``select``."""
        raise NotImplementedError

    def page_sql(
        self,
        filters: Mapping[str, Any] | None,
        *,
        after: str | None,
        limit: int,
        include_hidden: bool,
    ) -> tuple[str, list[Any]]:
        """The kind's keyset page statement, asking for ``limit + 1`` rows."""
        raise NotImplementedError

    def page(
        self,
        filters: Mapping[str, Any] | None = None,
        *,
        after: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
        include_hidden: bool = False,
    ) -> Page:
        """One keyset page: the kind's ``page_sql`` asks for one row more than ``limit``,
        which says whether there is a next page."""
        limit = check_limit(limit)
        sql, params = self.page_sql(
            filters, after=after, limit=limit, include_hidden=include_hidden
        )
        rows = self.query(sql, params)
        return Page.of((self.record(r) for r in rows), limit)

    # -- the connection

    def _connect(self) -> Any:
        return self.pg

    def _columns(self) -> dict[str, list[str]]:
        return {table: list(columns) for table, columns in self.catalog.tables.items()}

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        """One read, fetched to the end (retried while the database is busy)."""
        with self._lock:
            return self.pg.query(sql, params)

    def side_query(
        self, sql: str, params: Sequence[Any] | dict[str, Any] = ()
    ) -> list[tuple[Any, ...]]:
        """One read on a second, read-only connection (opened at its first use), so that a
        long read (a refresh's key hashes) runs in the server beside this connection's;
        on this connection when the second cannot be opened (the server's connection
        limit reached)."""
        with self._side_lock:
            if self._side is None:
                pg = self.pg
                try:
                    self._side = PgConnection(
                        self.target,
                        read_only=True,
                        backoff=pg.backoff,
                        sleep=pg.sleep,
                        lock_timeout_ms=pg.lock_timeout_ms,
                        statement_timeout_ms=pg.statement_timeout_ms,
                    )
                except SourceError:
                    return self.query(sql, params)
            return self._side.query(sql, params)

    def stream(self, statement: Statement, convert: Callable[[Sequence[Any]], T]) -> list[T]:
        """Every row of one read, through a server-side cursor in batches of
        ``STREAM_BATCH``, each turned by ``convert`` while the next is fetched
        (``prefetched``). The read runs in one
        ``REPEATABLE READ`` transaction with ``statement(query)``, which makes the SQL
        and its parameters from what ``query`` reads first: both see one snapshot."""

        def work(conn: Any) -> list[T]:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            sql, params = statement(lambda text, args=(): _fetch_all(conn, text, args))
            out: list[T] = []
            collecting = gc.isenabled()
            gc.disable()  # the rows made here are all kept: no cycle to collect among them
            try:
                with conn.cursor(name="memtui_stream") as cursor:
                    cursor.itersize = STREAM_BATCH
                    cursor.execute(sql, params)
                    for rows in prefetched(cursor, STREAM_BATCH):
                        out.extend(map(convert, rows))
            finally:
                if collecting:
                    gc.enable()
            return out

        with self._lock:
            return self.pg.run(work, transaction=True)

    def table(self, name: str) -> str:
        """``"schema"."name"``: a table of the store, quoted."""
        return f"{quote_identifier(self.schema)}.{quote_identifier(name)}"

    def _close_connection(self) -> None:
        self.pg.close()
        with self._side_lock:
            if self._side is not None:
                self._side.close()
                self._side = None

    # -- what it is

    @property
    def label(self) -> str:
        return f"{self.target.display_with_schema} ({self.kind_label})"

    @property
    def location(self) -> str:
        return self.target.display_with_schema

    def audit_source(self) -> dict[str, Any]:
        return {"kind": self.kind, "store": self.target.display, "schema": self.schema}

    def read_only_message(self) -> str:
        return (
            f"{self.label} is open read-only (the session is read-only in the database): "
            "memtui opens foreign stores read-only; pass --allow-writes to change it"
        )

    def summary(self) -> SourceSummary:
        base = super().summary()
        notes = list(base.notes)
        mode = "read-only" if self.read_only else "writable (--allow-writes)"
        notes.append(f"session: {mode} in the database; schema {self.schema}")
        status = self.index_status()
        if status.get("refreshed_at"):
            notes.append(f"keyword index: brought up to date {status['refreshed_at']}")
        counts = dict(base.counts)
        if self.forget_implemented:
            notes.append(self.erasure_reach())
            gap = self.gaps().measure(limit=SCAN_LIMIT, checkpoint=False)
            counts["dead_row_versions"] = gap.dead_rows
            if not gap.unread:
                counts["free_space_remnant_bytes"] = gap.remnant_bytes
            if gap.open:
                notes.insert(
                    0,
                    f"erasure gap: {gap.sentence()}, as of the server's last checkpoint "
                    "(the store's own deletes and updates leave them); clear them with "
                    "`memtui forget-gaps URL --allow-writes`",
                )
            elif gap.unread:
                notes.append(f"erasure gap: not measured in the pages ({gap.unread})")
        return SourceSummary(
            kind=base.kind,
            label=base.label,
            path=self.location,
            read_only=base.read_only,
            counts=counts,
            notes=notes,
        )

    # -- memtui's index of it

    def change_feed(self) -> ChangeFeed:
        """What the index asks the store (the kind implements it)."""
        raise NotImplementedError

    def make_index(self, cache_root: Path | None) -> SourceIndex:
        index = SyncedIndex(
            feed=self.change_feed(),
            anchor=self.path,
            fingerprint=lambda: str(self.data_version()),
            kind=self.kind,
            allowed=self.filter_keys,
            filter_sql=self.cache_filter_sql(),
            clock=self.cache_now,
            count=self.record_count,
            root=cache_root,
        )
        index.on_open = self.prepare_index
        return index

    def prepare_index(self, index: PostgresIndex) -> None:
        """Set what the index asks the database for (the kind's vector lane)."""

    def fingerprint(self) -> str:
        """The change probe, as the index records it (``data_version`` too)."""
        return fingerprint_text(self.change_feed().probe().to_json())

    def data_version(self) -> Any:
        """The change probe, paced by its cost (``change_watch``): the app asks every
        second."""
        return self._watch.version()

    def reread(self) -> None:
        """The next reads ask the store afresh: its change probe runs again when next
        asked (not here: the app calls this on its UI thread) and the kept counts go."""
        self._watch.expire()
        self.kept.clear()

    def _write_counters(self) -> tuple[int, ...]:
        return tuple(int(n) for n in self.query(write_counters_sql(), [self.schema])[0])

    def index_refreshed(self) -> str | None:
        """When the keyword index was last brought up to date, and what that read."""
        sync = getattr(self.index, "last_sync", None)
        if sync is not None:
            return sync.line()
        refreshed = self.index_status().get("refreshed_at")
        return f"up to date as of {refreshed}" if refreshed else None

    # -- the same store?

    def _read_identity(self) -> tuple[Any, ...]:
        rows = self.pg.query(
            "SELECT (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database()), "
            "to_regclass(%s)::oid",
            (self.table(self.main_table),),
        )
        return tuple(rows[0]) if rows else ()

    def path_changed(self) -> str | None:
        try:
            now = self._read_identity()
        except SourceError as exc:
            return f"{self.target.display_with_schema} cannot be read ({exc})"
        if now != self._identity:
            return (
                f"the database or the {self.main_table} table at {self.target.display_with_schema}"
                " was dropped and made again"
            )
        return None

    # -- changing it

    def erasure(self) -> PgErasure:
        """The purge and checks after a forget, on this store's tables."""
        return PgErasure(self.pg, self.schema, self.store_tables, self.catalog.tables)

    def erasure_reach(self) -> str:
        """What a forget here verifies and what it cannot reach, in one line."""
        root, why = self.erasure().data_directory()
        if root is not None:
            checked = "the rows, the text and jsonb columns and the tables' files are checked"
        else:
            checked = (
                "the rows and the text and jsonb columns are checked, the freed blocks "
                f"overwritten but not read: their files cannot be read ({why})"
            )
        return f"forget: {checked}; out of memtui's reach: {UNREACHABLE}"

    def forget_reach(self) -> str:
        """The end of a forget's rule in the dialog: how it is purged, what that costs
        when the tables are large, and what it cannot reach."""
        return (
            "the tables are vacuumed, the freed space of the rows' blocks overwritten and "
            "those blocks read back (a TOASTed value: its table rewritten, VACUUM FULL). "
            f"{self.vacuum_cost()}Not reached, not verified: {UNREACHABLE}."
        )

    def vacuum_cost(self) -> str:
        """What the forget's vacuum will read, when it is worth a warning: it reads every
        index of the tables whole (pgvector's HNSW index three times) and also cleans
        the rows others deleted since the last vacuum; '' for small tables."""
        tables = [self.table(t) for t in self.forget_tables]
        if not tables:
            return ""
        (index_bytes, dead) = self.query(
            "SELECT coalesce(sum(pg_indexes_size(t::regclass)), 0), "
            "coalesce(sum(s.n_dead_tup), 0) FROM unnest(%s::text[]) AS t "
            "LEFT JOIN pg_catalog.pg_stat_user_tables AS s ON s.relid = t::regclass",
            [tables],
        )[0]
        index_bytes, dead = int(index_bytes), int(dead)
        if index_bytes < VACUUM_WARN_BYTES and dead < VACUUM_WARN_DEAD:
            return ""
        waiting = (
            f"; {dead:,} rows deleted by others since the last vacuum are cleaned with it"
            if dead >= VACUUM_WARN_DEAD
            else ""
        )
        return (
            f"The vacuum reads the tables' indexes whole ({index_bytes / 2**20:,.0f} MiB"
            f"{waiting}): expect seconds at a million vectors, minutes with many such rows. "
        )

    def _purge_applied(self, applied: dict[str, Any]) -> tuple[dict[str, bool], dict[str, Any]]:
        """Vacuum the changed tables and check the forgotten texts (``probes``: their UTF-8
        bytes) and vectors (``vector_probes``) are gone; the remark says how (a rewrite,
        a scan that could not run)."""
        self.reread()  # the forget's deletions are committed: counts kept before are not
        texts = [bytes(p).decode("utf-8", "replace") for p in applied.get("probes", [])]
        vectors = list(applied.get("vector_probes", []))
        pages = applied["pages"]  # a kind's forget notes its rows' blocks (note_blocks)
        report = PagePurge(self.erasure(), self.forget_tables, texts, vectors, pages).run()
        details: dict[str, Any] = {"purge": report.steps, **report.details}
        if report.remarks:
            details["remarks"] = list(report.remarks)
            details["remark"] = "; ".join(report.remarks)
        return report.checks, details

    # -- the erasure gap: what the store's own deletes and updates left in its pages

    def gaps(self) -> PgGaps:
        return PgGaps(self.erasure(), self.forget_tables)

    def outside_gap(self) -> OutsideGap | None:
        """What the store keeps outside its tables of what it deleted, when a kind keeps
        such a place (mem0's history.db) and it holds any; None here."""
        return None

    def clear_outside_gap(self) -> tuple[dict[str, bool], dict[str, Any], str]:
        """Clear ``outside_gap`` (checks, details for the event, the step in words)."""
        raise AssertionError("a kind with an outside gap overrides clear_outside_gap")

    def forget_gaps_preview(self) -> dict[str, Any]:
        gap = self.gaps().measure()
        outside = self.outside_gap()
        counts = gap.to_dict()
        actions = []
        if gap.holding():
            actions.append(
                f"rewrite {', '.join(gap.holding())} (VACUUM FULL: it locks the tables while "
                f"it runs) to erase {gap.sentence()}"
            )
        if outside is not None:
            counts[outside.key] = outside.count
            actions.append(outside.action)
        question = "; and ".join(actions)
        return {
            "records": gap.holding() + ([outside.place] if outside else []),
            "rule": "the store's tables rewritten (VACUUM FULL), then measured again",
            "counts": counts,
            "nothing": f"no erasure gap: {gap.sentence()}",
            "question": f"{question[:1].upper()}{question[1:]}? This cannot be undone",
        }

    def forget_gaps(self, *, reason: str, operator: str | None = None) -> GapsOutcome:
        """Rewrite the tables holding what the store's own deletes and updates left, and
        clear what the kind keeps of them elsewhere (audited, one change), then measure
        again: verified when none is left."""
        self._refuse_unbuilt_forget()
        require_reason(reason)
        gaps = self.gaps()
        before = gaps.measure()
        tables = before.holding()
        outside = self.outside_gap()
        if not tables and outside is None:
            raise SourceError(f"no erasure gap to clear: {before.sentence()}")
        plan = before.to_dict()
        done = [f"rewrote {', '.join(tables)} (erased {before.sentence()})"] if tables else []
        if outside is not None:
            plan[outside.key] = outside.count
            done.append(outside.done)

        def erase() -> Erasure:
            checks: dict[str, bool] = {}
            details: dict[str, Any] = {"purge": [], "before": before.to_dict()}
            note = None
            if tables:
                details["purge"].append(gaps.rewrite(tables))
                after = gaps.measure()
                details["after"] = after.to_dict()
                checks["dead_rows_gone"] = after.dead_rows == 0
                if after.unread:
                    checks["free_space_read"] = False
                    note = (
                        f"the tables were rewritten; their pages could not be read ({after.unread})"
                    )
                else:
                    checks["free_space_zero"] = after.remnant_bytes == 0
            if outside is not None:
                cleared, cleared_details, step = self.clear_outside_gap()
                checks.update(cleared)
                details.update(cleared_details)
                details["purge"].append(step)
            return Erasure(checks=checks, details=details, note=note)

        intent, event, erased = self._audited_erasure(
            ids=[],
            tier="table",
            record_type="row-version",
            reason=reason,
            operator=operator,
            plan={"plan": plan},
            erase=erase,
            failure="forget-gaps failed, nothing was changed",
            operation="forget-gaps",
        )
        return GapsOutcome.of([], "; ".join(done), intent, event, erased)

    def _refuse_unbuilt_forget(self) -> None:
        self._require_writable()
        if not self.forget_implemented:
            raise SourceError(
                f"forgetting in a {self.kind_label} is not available in this memtui; "
                "nothing was changed"
            )

    def _apply_forget(self, record: SourceRecord) -> dict[str, Any]:
        """The kind's forget rule in one database transaction (a kind that forgets sets
        ``forget_implemented`` and overrides this)."""
        self._refuse_unbuilt_forget()
        raise AssertionError("a kind that forgets overrides _apply_forget")

    def forget(self, record_id: str, *, reason: str, operator: str | None = None) -> ForgetOutcome:
        self._refuse_unbuilt_forget()
        return super().forget(record_id, reason=reason, operator=operator)

    def forget_scope(
        self,
        *,
        engagement: str | None = None,
        scope: tuple[str, str] | None = None,
        reason: str,
        operator: str | None = None,
    ) -> ForgetOutcome:
        self._refuse_unbuilt_forget()
        return super().forget_scope(
            engagement=engagement, scope=scope, reason=reason, operator=operator
        )
