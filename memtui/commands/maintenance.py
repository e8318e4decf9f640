"""Commands that check and maintain a database file: check, compact, reindex-text, migrate."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from memtui.commands.common import (
    database_file_argument,
    emit_json,
    fixed_clock,
    json_option,
    open_store,
    operator_option,
)
from memtui.core.check import AuditHead, check_database, parse_audit_head
from memtui.core.store import migrate_database
from memtui.render import escape_controls, plural
from memtui.sources.detect import recognize


def _audit_head(ctx: click.Context, param: click.Parameter, value: str | None) -> AuditHead | None:
    if value is None:
        return None
    try:
        return parse_audit_head(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command()
@database_file_argument
@click.option(
    "--audit-head",
    metavar="HEAD",
    default=None,
    callback=_audit_head,
    help="A chain head recorded earlier with `memtui audit head` (ID HASH, ID:HASH or "
    "HASH): also report a log that no longer reaches it (truncated and its sequence "
    "rewritten, or the whole file replaced).",
)
@json_option
def check(db: Path, audit_head: AuditHead | None, as_json: bool) -> None:
    """Check DB: SQLite and FTS5 integrity, index and vector counts, audit chain, schema.

    Exits 1 with one line per problem; notes do not fail the check.
    """
    report = check_database(db, audit_head=audit_head, store_kind=lambda p: recognize(p)[0])
    if as_json:
        emit_json(report.to_dict())
    else:
        for finding in report.findings:
            line = f"{finding.severity}: {finding.check}: {escape_controls(finding.message)}"
            click.echo(line, err=finding.severity == "problem")
        if report.ok:
            click.echo(f"ok: {', '.join(report.passed)}")
    if not report.ok:
        sys.exit(1)


@click.command()
@database_file_argument
@operator_option
def compact(db: Path, operator: str | None) -> None:
    """Rewrite DB without free pages, so no old deleted content survives in them."""
    with open_store(db, operator=operator) as store:
        result = store.compact()
        event = store.last_event_id
    click.echo(
        f"compacted {escape_controls(str(db))}: {result['free_pages_before']} free pages removed "
        f"(audit event #{event})"
    )


@click.command("reindex-text")
@database_file_argument
@operator_option
def reindex_text(db: Path, operator: str | None) -> None:
    """Rebuild DB's full-text index from its records."""
    with open_store(db, operator=operator) as store:
        count = store.rebuild_text_index()
        event = store.last_event_id
    click.echo(f"rebuilt the full-text index over {plural(count, 'record')} (audit event #{event})")


@click.command()
@database_file_argument
@operator_option
def migrate(db: Path, operator: str | None) -> None:
    """Upgrade DB, written by an older memtui, to this memtui's schema (in place, audited).

    A writable open does this on its own; read-only opens (records, audit,
    check, the app with --read-only) ask for it first. Forward-only: an older
    memtui cannot open the file afterwards.
    """
    done = migrate_database(db, operator=operator, clock=fixed_clock())
    if done["event_id"] is None:
        click.echo(f"{escape_controls(str(db))} is already at schema {done['to_schema']}")
        return
    click.echo(
        f"upgraded {escape_controls(str(db))} from schema {done['from_schema']} to "
        f"{done['to_schema']} (audit event #{done['event_id']})"
    )
