"""Commands that change a store: forget, forget-scope, forget-gaps, refute, reveal.

Each asks first (``--yes`` skips the question), then hands the confirmed change to the
pipeline the app uses too (``memtui.sources.changes``), and reports what the store's
outcome says, exiting 3 when erasure was not verified.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from memtui.commands.common import (
    confirm_or_abort,
    db_argument,
    names_a_remote_store,
    no_record,
    open_cli_source,
    operator_option,
    record_label,
    source_argument,
    source_options,
    store_and_argument,
    store_kind_options,
    store_path_required,
)
from memtui.core.secrets import secret_paths
from memtui.render import escape_controls, plural
from memtui.sources import SourceRecord
from memtui.sources.capabilities import GapClearable, Refutable, able
from memtui.sources.changes import Change, apply_change, scope_plan
from memtui.sources.outcome import ForgetOutcome, erasure_status


def _finish(outcome: ForgetOutcome, what: str) -> None:
    """The outcome's line; exit 3 when erasure was not verified."""
    click.echo(escape_controls(outcome.report(what)))
    if not outcome.verified:
        sys.exit(3)


@click.command()
@click.argument("args", nargs=-1, required=True, metavar="[DB] RECORD_ID")
@click.option("--reason", required=True, help="Why: written to the audit log.")
@click.option("--yes", "assume_yes", is_flag=True, help="Do not ask for confirmation.")
@source_options(writes=True)
@store_kind_options
@operator_option
def forget(
    args: tuple[str, ...],
    reason: str,
    assume_yes: bool,
    now: str | None,
    allow_writes: bool,
    audit_db: Path | None,
    store_options: dict[str, Any],
    operator: str | None,
) -> None:
    """Erase one record for good, by the store's own forget rule (audited, verified).

    `forget DB RECORD_ID`, or `forget RECORD_ID --qdrant-url URL` for a Qdrant server.
    """
    db, record_id = store_and_argument(args, store_options, "record", "RECORD_ID")
    with open_cli_source(
        db,
        allow_writes=allow_writes,
        audit_db=audit_db,
        now=now,
        operator=operator,
        options=store_options,
    ) as source:
        record = source.get(record_id)
        if record is None:
            raise no_record(source, record_id)
        preview = able(source, "forget").forget_preview(record_id)
        content = escape_controls(record.content[:60])
        others = [i for i in preview.get("records", []) if i != record.id]
        also = f" and {len(others)} more version(s)" if others else ""
        confirm_or_abort(
            f"Forget {escape_controls(_record_kind(record))} {record_label(record.id)} "
            f"('{content}'){also}? "
            f"Rule: {escape_controls(str(preview.get('rule', '')).rstrip(' .'))}. "
            "This cannot be undone",
            assume_yes,
        )
        saved = apply_change(source, Change("forget", record_id, reason, operator))
    assert saved.outcome is not None
    outcome = saved.outcome
    removed = [i for i in outcome.removed if i != outcome.record_id]
    extra = f" and {', '.join(removed)}" if removed else ""
    _finish(outcome, f"record {record_label(str(outcome.record_id))}{extra}")


def _record_kind(record: SourceRecord) -> str:
    """``tier type``, or one word when a store names both the same (``preference``)."""
    if record.tier == record.record_type:
        return record.tier
    return f"{record.tier} {record.record_type}"


@click.command()
@db_argument
@click.argument("record_id")
@click.option("--reason", required=True, help="Why: written to the audit log.")
@operator_option
def refute(db: Path, record_id: str, reason: str, operator: str | None) -> None:
    """Mark a tactic refuted: it stays on file but leaves reads and search."""
    with open_cli_source(db, operator=operator) as source:
        able(source, "refute")
        saved = apply_change(source, Change("refute", record_id, reason, operator))
    click.echo(f"refuted tactic #{escape_controls(record_id)} (audit event #{saved.event_id})")


@click.command()
@db_argument
@click.argument("record_id")
@click.argument("field")
@click.option("--reason", required=True, help="Why: written to the audit log.")
@click.option("--yes", "assume_yes", is_flag=True, help="Do not ask for confirmation.")
@operator_option
def reveal(
    db: Path, record_id: str, field: str, reason: str, assume_yes: bool, operator: str | None
) -> None:
    """Show one masked metadata FIELD of a record (e.g. session_cookie); audited."""
    with open_cli_source(db, operator=operator) as source:
        able(source, "reveal")
        record = source.get(record_id)
        if record is None:
            raise no_record(source, record_id)
        masked = secret_paths(record.metadata or {})
        if field not in masked:
            raise click.ClickException(
                f"record #{escape_controls(record_id)} has no masked field "
                f"'{escape_controls(field)}'; masked fields: "
                f"{escape_controls(', '.join(masked)) or 'none'}"
            )
        confirm_or_abort(
            f"Reveal {escape_controls(field)} of record #{escape_controls(record_id)}? "
            "It is printed in clear and the reveal is audited",
            assume_yes,
        )
        saved = apply_change(source, Change("reveal", (record_id, field), reason, operator))
    value = saved.value
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    click.echo(escape_controls(shown))
    number = "?" if saved.event_id is None else saved.event_id
    click.echo(
        f"(revealed {escape_controls(field)} of record #{escape_controls(record_id)}; "
        f"audit event #{number})",
        err=True,
    )


@click.command("forget-scope")
@source_argument
@click.option("--engagement", default=None, help="The engagement whose records go (memtui).")
@click.option(
    "--scope",
    "scope_text",
    default=None,
    metavar="KEY=VALUE",
    help="The scope whose records go: a mem0 user_id=, agent_id= or run_id=, a LangGraph "
    "namespace= (and what nests under it), a Letta archive=, tag= or agent= (the archives it is "
    "attached to), a Cyber-AutoAgent "
    "target=, operation= or category=, a plain Qdrant collection's payload KEY=VALUE.",
)
@click.option("--reason", required=True, help="Why: written to the audit log.")
@click.option("--yes", "assume_yes", is_flag=True, help="Do not ask for confirmation.")
@source_options(writes=True)
@store_kind_options
@operator_option
def forget_scope(
    db: Path | None,
    engagement: str | None,
    scope_text: str | None,
    reason: str,
    assume_yes: bool,
    now: str | None,
    allow_writes: bool,
    audit_db: Path | None,
    store_options: dict[str, Any],
    operator: str | None,
) -> None:
    """Erase every record of one scope: a memtui engagement (tactics are not
    engagement-scoped and stay), or a foreign store's scope with --scope KEY=VALUE
    (needs --allow-writes). Shows the blast radius and asks first."""
    key, value = _scope_option(engagement, scope_text)
    if db is None and not names_a_remote_store(store_options):
        raise store_path_required()
    with open_cli_source(
        db,
        allow_writes=allow_writes,
        audit_db=audit_db,
        now=now,
        operator=operator,
        options=store_options,
    ) as source:
        radius, rule = scope_plan(source, (key, value))
        total = sum(n for types in radius.values() for n in types.values())
        what = f"{escape_controls(key)} '{escape_controls(value)}'"
        if not total:
            raise click.ClickException(f"{what} has no records to forget")
        parts = [
            f"{tier}/{rtype} {n}" for tier, types in radius.items() for rtype, n in types.items()
        ]
        click.echo(f"{what}: {plural(total, 'record')} ({escape_controls(', '.join(parts))})")
        if not isinstance(source, Refutable):  # the command's help says a memtui database's
            click.echo(escape_controls(rule))
        every = "all " if total > 1 else ""
        confirm_or_abort(
            f"Forget {every}{plural(total, 'record')}? This cannot be undone", assume_yes
        )
        saved = apply_change(source, Change("forget-scope", (key, value), reason, operator))
    assert saved.outcome is not None
    _finish(saved.outcome, f"{plural(saved.outcome.forgotten, 'record')} of {what}")


def _scope_option(engagement: str | None, scope_text: str | None) -> tuple[str, str]:
    """The scope to forget: ``--engagement E`` or ``--scope KEY=VALUE`` (exactly one)."""
    if engagement is not None and scope_text is not None:
        raise click.UsageError("give --engagement E or --scope KEY=VALUE, not both")
    if engagement is not None:
        return "engagement", engagement
    if scope_text is None:
        raise click.UsageError(
            "name the scope to forget: --scope KEY=VALUE (--engagement E for a memtui database)"
        )
    key, sep, value = scope_text.partition("=")
    if not sep or not key.strip():
        raise click.BadParameter(
            f"takes KEY=VALUE, got {escape_controls(repr(scope_text))}", param_hint="--scope"
        )
    return key.strip(), value


@click.command("forget-gaps")
@source_argument
@click.option("--reason", required=True, help="Why: written to the audit log.")
@click.option("--yes", "assume_yes", is_flag=True, help="Do not ask for confirmation.")
@source_options(writes=True)
@store_kind_options
@operator_option
def forget_gaps(
    db: Path | None,
    reason: str,
    assume_yes: bool,
    now: str | None,
    allow_writes: bool,
    audit_db: Path | None,
    store_options: dict[str, Any],
    operator: str | None,
) -> None:
    """Clear what a store's own deletes left behind (mem0: deleted memories' history;
    LangGraph: orphaned vectors of deleted items; Letta: soft-deleted passages;
    Chroma: deleted documents' queue rows, stale pages, HNSW heap bytes; LanceDB:
    rows older versions and data files still hold; a Postgres store: dead row
    versions and the bytes VACUUM leaves in pages' free space).

    mem0's delete removes the point but keeps the memory's text in history.db
    (the DELETE row's old_memory, the ADD and UPDATE rows). This clears that
    text in every such row (the events stay), with secure_delete on, purges the
    freed pages of history.db and storage.sqlite (VACUUM), checks the bytes,
    and writes an intent and an outcome audit event. Needs --allow-writes.

    LangGraph's delete leaves the item's rows in store_vectors (its cascade
    never fires). This deletes those orphaned vectors in one transaction, with
    secure_delete on, purges the freed pages (VACUUM), checks the bytes, and
    writes an intent and an outcome audit event. Needs --allow-writes.

    A Postgres store (LangGraph's PostgresStore, mem0's pgvector collection) keeps
    deleted and replaced rows' text in its pages: this rewrites the tables that hold
    any (VACUUM FULL, which locks them while it runs), then measures again; with
    --mem0-history, mem0's collection also has the history text of the memories
    mem0 deleted cleared, in the same audited change.
    """
    with open_cli_source(
        db,
        allow_writes=allow_writes,
        audit_db=audit_db,
        now=now,
        operator=operator,
        options=store_options,
    ) as source:
        if not isinstance(source, GapClearable):
            raise click.ClickException(
                "forget-gaps clears what the own deletes of mem0, LangGraph, Letta, Chroma, "
                "LanceDB and Postgres stores leave behind; "
                f"{source.kind_label} has no such gap for memtui to clear"
            )
        clears = able(source, "forget-gaps")
        preview = clears.forget_gaps_preview()
        if not preview["records"] and not preview.get("unattributed"):
            click.echo(preview["nothing"])
            return
        confirm_or_abort(preview["question"], assume_yes)
        source.require_same_path()  # the file may have been replaced while we asked
        outcome = clears.forget_gaps(reason=reason, operator=operator)
    status = escape_controls(erasure_status(outcome.verified, outcome.problem))
    click.echo(
        f"{outcome.done}: {status} "
        f"(audit events #{outcome.intent_event_id} intent, #{outcome.event_id} outcome)"
    )
    if not outcome.verified:
        sys.exit(3)
