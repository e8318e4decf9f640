"""Commands that read any memory source: records, info, audit, cache (the changes are
in ``memtui.commands.changes``).

Each opens its PATH with ``open_source`` (recognized by its tables, never by
its name): a memtui database writable by default, any other store read-only
unless ``--allow-writes``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from memtui.commands.common import (
    DefaultCommandGroup,
    console,
    emit_json,
    filter_options,
    json_option,
    names_a_remote_store,
    open_cli_source,
    record_label,
    scope_filters,
    short_time,
    source_argument,
    source_options,
    store_kind_options,
    warn_refused,
)
from memtui.core.check import head_problem, parse_audit_head
from memtui.render import escape_controls, one_line, plural, safe_text
from memtui.sources import KINDS, MemorySource, SourceRecord
from memtui.sources.base import MAX_PAGE_SIZE
from memtui.sources.cache import cache_root, clear_caches, list_caches
from memtui.sources.capabilities import Refutable


def _scope_text(record: SourceRecord) -> str:
    parts = []
    for key, value in record.scope.items():
        if value is None or value == []:
            continue
        shown = ",".join(str(v) for v in value) if isinstance(value, list) else value
        parts.append(f"{key}={shown}")
    return " ".join(parts)


NARROW_RECORDS = 110
"""Below this many columns ``records`` prints each record on its own lines instead of
a table (a table of eight fields leaves no room for the content at 80)."""


def _state_cell(record: SourceRecord) -> Text:
    """The record's state, and ``damaged`` after it for a row another writer damaged
    (``--json`` and the app's detail say what is damaged)."""
    out = Text(record.state)
    if record.damage:
        out.append(" damaged", style="bold red")
    return out


def _record_fields(source: MemorySource, record: SourceRecord) -> list[str | Text]:
    """The fields of one record for the narrow listing, empty ones left out."""
    if isinstance(source, Refutable):  # a memtui database: tactics with their evidence
        meta = record.metadata
        evidence = " ".join(
            part
            for part in (
                str(meta.get("evidence_grade") or ""),
                f"{meta.get('total_successes', 0)}/{meta.get('total_attempts', 0)}"
                if "total_attempts" in meta
                else "",
            )
            if part
        )
        fields: list[str | Text] = [
            f"{record.tier} {record.record_type}",
            str(record.scope.get("tool_name") or ""),
            evidence,
            short_time(record.created_at),
        ]
    else:
        fields = [
            f"{record.tier} {record.record_type}",
            _scope_text(record),
            str(record.created_at or ""),
            "" if record.expires_at is None else f"expires {record.expires_at}",
            source.notes(record),
        ]
    return [field for field in [*fields, _state_cell(record)] if field]


def _print_record_lines(source: MemorySource, found: list[SourceRecord], width: int) -> None:
    """``records`` in a narrow terminal: a line of fields, then the content indented."""
    out = console()
    out.print(safe_text(f"{plural(len(found), 'record')} · {source.label}", style="bold"))
    indent = 4
    for record in found:
        style = "dim" if record.state != "live" else None
        head = safe_text(record_label(record.id), limit=60, style="bold")
        for field in _record_fields(source, record):
            head.append(" · ", style="dim")
            head.append_text(field if isinstance(field, Text) else one_line(field, 60))
        head.stylize(style or "")
        out.print(head, overflow="fold")
        body = one_line(record.content, 2 * (width - indent) - 1)
        body.stylize(style or "")
        out.print(Padding(body, (0, 0, 0, indent)))
    if not isinstance(source, Refutable):
        out.print(safe_text(source.expiry_rule, style="dim"))


def _print_records(source: MemorySource, found: list[SourceRecord]) -> None:
    width = console().width
    if width < NARROW_RECORDS:
        _print_record_lines(source, found, width)
        return
    table = Table(
        title=safe_text(f"{plural(len(found), 'record')} · {source.label}", style="table.title"),
        title_justify="left",
    )
    native = isinstance(source, Refutable)  # a memtui database: tactics with their evidence
    if native:
        columns = ("id", "tier", "type", "tool", "grade", "s/a", "created", "state")
    else:
        columns = ("id", "tier", "type", "scope", "created", "expires", "state", "notes")
    for column in columns:
        table.add_column(column, no_wrap=column not in ("scope", "notes"), min_width=len(column))
    table.add_column("content", overflow="fold", min_width=30, ratio=1)
    for record in found:
        if native:
            meta = record.metadata
            counts = (
                f"{meta.get('total_successes', 0)}/{meta.get('total_attempts', 0)}"
                if "total_attempts" in meta
                else ""
            )
            cells: list[str | Text] = [
                one_line(record.id, 20),
                record.tier,
                one_line(record.record_type, 20),
                one_line(record.scope.get("tool_name") or "", 20),
                str(meta.get("evidence_grade") or ""),
                counts,
                short_time(record.created_at),
                _state_cell(record),
            ]
        else:
            cells = [
                one_line(record.id, 60),
                one_line(record.tier, 30),
                one_line(record.record_type, 20),
                one_line(_scope_text(record), 80),
                one_line(str(record.created_at or ""), 19),
                one_line("" if record.expires_at is None else str(record.expires_at), 32),
                _state_cell(record),
                one_line(source.notes(record), 80),
            ]
        table.add_row(
            *cells,
            one_line(record.content, 160),
            style="dim" if record.state != "live" else None,
        )
    out = console()
    out.print(table)
    if not native:
        out.print(safe_text(source.expiry_rule, style="dim"))


@click.command()
@source_argument
@filter_options
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="Include hidden records (refuted, expired, inactive, deleted).",
)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most N records.")
@click.option("--after", default=None, metavar="ID", help="Only records after this id (paging).")
@source_options(writes=False)
@store_kind_options
@json_option
def records(
    db: Path | None,
    tier: str | None,
    record_type: str | None,
    profile: str | None,
    engagement: str | None,
    run_id: str | None,
    tool: str | None,
    extra: tuple[str, ...],
    show_all: bool,
    limit: int | None,
    after: str | None,
    now: str | None,
    store_options: dict[str, Any],
    as_json: bool,
) -> None:
    """List records of DB (any memory store memtui recognizes), filtered by scope.

    DB is a file, a Qdrant local folder, or nothing with --qdrant-url URL.
    """
    filters = scope_filters(tier, record_type, profile, engagement, run_id, tool, extra)
    with open_cli_source(db, read_only=True, now=now, options=store_options) as source:
        found: list[SourceRecord] = []
        cursor = after
        while limit is None or len(found) < limit:
            size = MAX_PAGE_SIZE if limit is None else min(MAX_PAGE_SIZE, limit - len(found))
            page = source.page(filters, after=cursor, limit=size, include_hidden=show_all)
            found.extend(page.records)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        if not found and "tier" in filters:
            _check_tier(source, filters["tier"])
        warn_refused(source)
        if as_json:
            emit_json([r.to_json() for r in found])
            return
        _print_records(source, found)


def _check_tier(source: MemorySource, tier: Any) -> None:
    """Refuse a tier the store does not have, instead of listing no records for it.

    A memtui database refuses an unknown tier itself; another store's tiers are
    the ones it declares and the ones found in its data.
    """
    known = list(source.tiers)
    known += [t for t in source.tier_counts(include_hidden=True) if t not in known]
    if tier not in known:
        raise click.ClickException(
            f"unknown tier {escape_controls(repr(tier))}; "
            f"{escape_controls(source.label)} has tiers: "
            f"{', '.join(escape_controls(str(t)) for t in known) or 'none'}"
        )


@click.group(cls=DefaultCommandGroup, default_command="list", invoke_without_command=False)
def audit() -> None:
    """The audit log: `audit DB` lists it, `audit verify DB` checks its hash chain.

    For a foreign store the log is the memtui audit database beside it
    (<store>.memtui-audit.db) or the one given with --audit-db.
    """


audit_db_option = click.option(
    "--audit-db",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Audit log of a foreign store (default: <store>.memtui-audit.db).",
)


@audit.command("list")
@source_argument
@click.option("--limit", type=click.IntRange(min=1), default=None)
@audit_db_option
@store_kind_options
@json_option
def audit_list(
    db: Path | None,
    limit: int | None,
    audit_db: Path | None,
    store_options: dict[str, Any],
    as_json: bool,
) -> None:
    """List audit events, newest first."""
    with open_cli_source(db, read_only=True, audit_db=audit_db, options=store_options) as source:
        events = source.audit_events(limit=limit)
        broken = source.verify_audit()
    if as_json:
        emit_json(events)
        return
    table = Table(title=plural(len(events), "audit event"), title_justify="left")
    for column in ("#", "at", "operator", "action", "records", "tier", "type", "reason"):
        table.add_column(column, no_wrap=column != "reason")
    table.add_column("details", overflow="fold")
    interrupted = 0
    for event in events:
        ids = event["record_ids"]
        shown = ", ".join(str(i) for i in ids[:5]) + (f" (+{len(ids) - 5})" if len(ids) > 5 else "")
        action = event["action"]
        if event.get("status") == "interrupted":
            action += " (INTERRUPTED: no outcome)"
            interrupted += 1
        table.add_row(
            str(event["id"]),
            short_time(event["at"]),
            one_line(event["operator"], 30),
            action,
            one_line(shown, 120),
            one_line(event["tier"] or "", 30),
            one_line(event["record_type"] or "", 20),
            one_line(event["reason"] or "", 80),
            one_line(json.dumps(event["details"], sort_keys=True), 200),
            style="bold red" if event.get("status") == "interrupted" else None,
        )
    out = console()
    out.print(table)
    if interrupted:
        out.print(
            Text(
                f"{interrupted} interrupted forget(s): an intent without an outcome; "
                "check whether those records are gone and forget them again",
                style="bold red",
            )
        )
    out.print(
        Text("chain verified", style="green")
        if broken is None
        else safe_text(f"chain BROKEN: {broken}", style="bold red")
    )


def _recorded_head(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    try:
        return parse_audit_head(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@audit.command("verify")
@source_argument
@click.option(
    "--head",
    "recorded",
    default=None,
    metavar="HEAD",
    callback=_recorded_head,
    help="A head recorded earlier with `memtui audit head` (ID HASH, ID:HASH or HASH): "
    "also exit 1 when the log no longer reaches it.",
)
@audit_db_option
@store_kind_options
def audit_verify(
    db: Path | None, recorded: Any, audit_db: Path | None, store_options: dict[str, Any]
) -> None:
    """Check the audit log's hash chain; exit 1 at the first broken link."""
    with open_cli_source(db, read_only=True, audit_db=audit_db, options=store_options) as source:
        broken = source.verify_audit()
        events = source.audit_events()
    if broken is not None:
        raise click.ClickException(f"audit chain broken: {broken}")
    if recorded is not None:
        problem = head_problem({e["id"]: e["hash"] for e in events}, recorded)
        if problem is not None:
            raise click.ClickException(f"audit chain does not reach the recorded head: {problem}")
        click.echo(
            f"audit chain verified: {plural(len(events), 'event')}, reaching the recorded head"
        )
        return
    click.echo(f"audit chain verified: {plural(len(events), 'event')}")


@audit.command("head")
@source_argument
@audit_db_option
@store_kind_options
def audit_head(db: Path | None, audit_db: Path | None, store_options: dict[str, Any]) -> None:
    """Print the chain head (last event id and hash) to record elsewhere."""
    with open_cli_source(db, read_only=True, audit_db=audit_db, options=store_options) as source:
        head = source.audit_head()
    if head is None:
        click.echo("audit log is empty")
    else:
        click.echo(f"{head['id']} {head['hash']}")


@click.group()
def cache() -> None:
    """memtui's keyword indexes of foreign stores, kept in the user's cache folder."""


@cache.command("list")
@json_option
def cache_list(as_json: bool) -> None:
    """List the cached indexes: which store each indexes, its size and rows."""
    found = list_caches()
    if as_json:
        emit_json({"folder": str(cache_root()), "caches": found})
        return
    table = Table(
        title=safe_text(
            f"{plural(len(found), 'cached index', 'cached indexes')} in {cache_root()}",
            style="table.title",
        ),
        title_justify="left",
    )
    for column in ("kind", "store", "rows", "bytes", "built"):
        table.add_column(column, no_wrap=column != "store")
    for item in found:
        store = item.get("source") or "?"
        if item.get("source") and not item.get("source_exists"):
            store += " (gone)"
        table.add_row(
            str(item.get("kind") or "?"),
            one_line(store, 200),
            str(item.get("rows", "?")),
            str(item.get("bytes", 0)),
            short_time(item.get("built_at")),
        )
    console().print(table)


@cache.command("clear")
def cache_clear() -> None:
    """Remove every cached index (they are rebuilt on the next search)."""
    removed = clear_caches()
    click.echo(
        f"removed {plural(len(removed), 'cached index', 'cached indexes')} "
        f"from {escape_controls(str(cache_root()))}"
    )


def _print_formats(as_json: bool) -> None:
    """Every store kind memtui recognizes and what it looks for, one a line."""
    if as_json:
        emit_json([{"kind": k.name, "label": k.label, "needs": k.needs} for k in KINDS])
        return
    click.echo("memtui opens (recognized by tables and columns, never by name):")
    for kind in KINDS:
        click.echo(f"  {kind.label}: {kind.needs}")
    click.echo("  a Qdrant server: --qdrant-url URL instead of a path")


@click.command()
@source_argument
@click.option(
    "--formats", "list_formats", is_flag=True, help="List the stores memtui opens (no DB)."
)
@source_options(writes=False)
@store_kind_options
@json_option
def info(
    db: Path | None,
    list_formats: bool,
    now: str | None,
    store_options: dict[str, Any],
    as_json: bool,
) -> None:
    """What DB is: its kind, what memtui can do with it, its expiry rule, counts and gaps."""
    if list_formats:
        if db is not None or names_a_remote_store(store_options):
            raise click.UsageError("--formats lists the stores memtui opens: give it alone")
        _print_formats(as_json)
        return
    with open_cli_source(db, read_only=True, now=now, options=store_options) as source:
        summary = source.summary()
        facets = source.facets(include_hidden=True)
        live = {f.tier: f.count for f in source.facets()}
        data: dict[str, Any] = {
            "kind": source.kind,
            "label": source.label,
            "path": source.location,
            "capabilities": sorted(source.capabilities),
            "with_allow_writes": sorted(source.write_capabilities),
            "expiry_rule": source.expiry_rule,
            "scope_keys": list(source.scope_keys),
            "counts": summary.counts,
            "notes": summary.notes,
            "tiers": [
                {
                    "tier": f.tier,
                    "records": f.count,
                    "live": live.get(f.tier, 0),
                    "scopes": f.scopes,
                }
                for f in facets
            ],
            "index": source.index_status(),
        }
        collections = getattr(source, "collections", None)
        if callable(collections):
            data["collections"] = [c.to_json() for c in collections()]
    if as_json:
        emit_json(data)
        return
    _print_info(data)


def _print_info(data: dict[str, Any]) -> None:
    """``info`` for a person: what the store is and can do, its counts, tiers, collections."""
    out = console()
    out.print(safe_text(f"{data['label']}: {data['path']}", style="bold"))
    out.print(Text("can: " + ", ".join(data["capabilities"])))
    out.print(Text("opened writable also: " + ", ".join(data["with_allow_writes"])))
    out.print(Text("scope keys: " + ", ".join(data["scope_keys"])))
    out.print(Text("counts: " + ", ".join(f"{k} {v}" for k, v in data["counts"].items())))
    for note in data["notes"]:
        loud = ("erasure gap", "interrupted", "the agent is live", "refused")
        style = "bold yellow" if note.startswith(loud) else "dim"
        out.print(safe_text(note, style=style))
    table = Table(title="tiers", title_justify="left")
    for column in ("tier", "records", "live", "scopes"):
        table.add_column(column, overflow="fold")
    for tier in data["tiers"]:
        scopes = "; ".join(
            f"{key}: " + ", ".join(f"{value} {n}" for value, n in list(values.items())[:8])
            for key, values in tier["scopes"].items()
            if values
        )
        table.add_row(
            one_line(tier["tier"], 40),
            str(tier["records"]),
            str(tier["live"]),
            one_line(scopes, 400),
        )
    out.print(table)
    if data.get("collections"):
        listing = Table(title="collections in this store", title_justify="left")
        for column in ("collection", "points", "dims", "distance", "holds"):
            listing.add_column(column, overflow="fold")
        for item in data["collections"]:
            listing.add_row(
                one_line(item["name"], 80),
                str(item["points"]),
                str(item["dims"]),
                one_line(str(item["distance"]), 20),
                item["label"],
            )
        out.print(listing)
