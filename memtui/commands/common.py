"""Helpers shared by every command: opening stores, output, common options."""

from __future__ import annotations

import functools
import json
import math
import os
import sys
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from memtui.config import ConfigError, current
from memtui.core.corpus import CorpusError
from memtui.core.embed import EmbedderError, resolve_embedder
from memtui.core.records import MemoryRecord, parse_timestamp
from memtui.core.secrets import mask_metadata
from memtui.core.store import (
    FILTER_ALLOWLIST,
    MemoryStore,
    MemoryStoreError,
    empty_database_problem,
)
from memtui.render import escape_controls, escape_json_controls
from memtui.sources import MemorySource, open_source

EXPECTED_ERRORS = (MemoryStoreError, CorpusError, EmbedderError, ConfigError)


class DefaultCommandGroup(click.Group):
    """A group that runs ``default_command`` when the first word is not a subcommand."""

    def __init__(self, *args: Any, default_command: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.default_command = default_command

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        for arg in args:
            if arg in ("--help", "-h"):
                break
            if arg.startswith("-"):
                continue
            if arg not in self.commands:
                args = [self.default_command, *args]
            break
        return super().parse_args(ctx, args)


class OneLineUsageError(click.UsageError):
    """A usage error as one line: what is wrong, then the ``--help`` to read (exit status 2)."""

    def __init__(self, error: click.UsageError, fallback: click.Context) -> None:
        ctx = error.ctx or fallback
        message = escape_controls(error.format_message()).rstrip(".")
        super().__init__(f"{message} (see '{ctx.command_path} --help')", ctx=ctx)

    def show(self, file: Any = None) -> None:
        click.echo(f"Error: {self.format_message()}", file=file, err=True)


def one_line_usage(error: click.UsageError, ctx: click.Context) -> click.UsageError:
    """``error`` as one line, except a bare group's help (``memtui audit`` alone)."""
    if isinstance(error, (click.exceptions.NoArgsIsHelpError, OneLineUsageError)):
        return error
    return OneLineUsageError(error, ctx)


class ErrorReportingGroup(DefaultCommandGroup):
    """Expected failures become one line on stderr and exit status 1, never a traceback;
    usage errors one line too, naming the ``--help`` to read (exit status 2).

    Every error message is shown with its control characters escaped: click's own
    (a path it refuses) and ours name paths and store strings.
    """

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:
            fallback = click.Context(self, info_name=info_name, parent=parent)
            raise one_line_usage(exc, fallback) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except EXPECTED_ERRORS as exc:
            raise click.ClickException(escape_controls(str(exc))) from None
        except click.UsageError as exc:
            raise one_line_usage(exc, ctx) from None
        except click.ClickException as exc:
            # click types the message Final; replacing it keeps the exception's own class
            # (its usage line, its exit status, help for a bare group).
            exc.message = escape_controls(exc.message, keep_lines=True)  # type: ignore[misc]
            raise


def fixed_clock() -> Callable[[], datetime] | None:
    """A clock pinned by ``MEMTUI_NOW`` (ISO-8601), for reproducible runs; else None."""
    value = current().now
    if not value:
        return None
    try:
        moment = parse_timestamp(value)
    except ValueError as exc:
        raise click.ClickException(f"MEMTUI_NOW: {exc}") from None
    return lambda: moment


def open_store(
    path: str | Path,
    *,
    read_only: bool = False,
    embedder: str | None = None,
    operator: str | None = None,
) -> MemoryStore:
    empty = empty_database_problem(Path(path)) if Path(path).exists() else None
    if empty is not None:
        raise click.ClickException(empty)
    return MemoryStore(
        path,
        read_only=read_only,
        clock=fixed_clock(),
        embedder=resolve_embedder(embedder) if embedder else None,
        operator=operator,
    )


def open_cli_source(
    path: str | Path | None,
    *,
    read_only: bool | None = None,
    allow_writes: bool = False,
    audit_db: Path | None = None,
    now: str | None = None,
    operator: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> MemorySource:
    """Open any memory store the CLI is pointed at (see ``memtui.sources.open_source``).

    ``MEMTUI_NOW`` pins the clock of time-based stores; ``--now`` overrides it
    (ISO-8601, or a whole number for a logical-time store). ``options`` holds
    the options of one kind of store (``store_kind_options``: a server URL instead
    of a PATH, the collection, Cyber-AutoAgent's memory mode, mem0's history),
    which the registry hands to that kind.
    """
    return open_source(
        path,
        read_only=read_only,
        allow_writes=allow_writes,
        audit_db=audit_db,
        now=now,
        clock=fixed_clock(),
        operator=operator,
        options=options,
    )


def names_a_remote_store(options: Mapping[str, Any]) -> bool:
    """Whether the store options name a store with no PATH (``--qdrant-url``): the
    registry's kinds say, not the command."""
    from memtui.sources.registry import REGISTRY

    return REGISTRY.remote_named(options) is not None


def store_and_argument(
    args: tuple[str, ...],
    store_options: Mapping[str, Any],
    what: str,
    name: str,
    many_hint: str = "",
) -> tuple[str | Path | None, str]:
    """``DB NAME`` from a command's arguments, or only ``NAME`` when a store option names
    a store with no PATH (``--qdrant-url``): the store (None then) and the argument."""
    if len(args) == 2:
        return store_location(args[0]), args[1]
    if len(args) == 1 and names_a_remote_store(store_options):
        return None, args[0]
    if len(args) == 1:
        raise click.UsageError(f"give the store and the {what}: DB {name}")
    raise click.UsageError(f"too many arguments: DB {name}{many_hint}")


def store_path_required() -> click.UsageError:
    """The usage error of a command given neither a store PATH nor a server option."""
    from memtui.sources.registry import REGISTRY

    servers = " or ".join(REGISTRY.remote_flags())
    return click.UsageError(f"give a store PATH (or {servers})" if servers else "give a store PATH")


FOLDER_AND_QDRANT_KEYS = ("qdrant_url", "api_key", "collection", "memory_mode", "mem0_history")
POSTGRES_KEYS = ("pg_schema",)
STORE_KEYS = FOLDER_AND_QDRANT_KEYS + POSTGRES_KEYS
"""Every store kind's option the commands take (``store_kind_options`` gathers them)."""


def store_kind_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--qdrant-url``, ``--api-key``, ``--collection``, ``--memory-mode``, ``--mem0-history``,
    and Postgres's ``--pg-schema``.

    The command receives them as one dict argument, ``store_options``, for ``open_cli_source``
    (the registry hands each option to the kind that takes it).
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["store_options"] = {key: kwargs.pop(key, None) for key in STORE_KEYS}
        return func(*args, **kwargs)

    options = [
        click.option(
            "--qdrant-url",
            default=None,
            metavar="URL",
            help="Open a Qdrant server instead of a PATH (needs pip install 'memtui[qdrant]').",
        ),
        click.option(
            "--api-key",
            envvar="QDRANT_API_KEY",
            default=None,
            metavar="KEY",
            help="API key of the Qdrant server (default: $QDRANT_API_KEY).",
        ),
        click.option(
            "--collection",
            default=None,
            metavar="NAME",
            help="Qdrant collection (default: cyber_autoagent_memories or mem0 when present), "
            "a Chroma folder's collection, or mem0's pgvector collection (its table) in a "
            "postgresql:// store.",
        ),
        click.option(
            "--memory-mode",
            type=click.Choice(["operation", "shared"]),
            default=None,
            help="Cyber-AutoAgent's scope rule for --filter target=... (operation also needs "
            "--filter operation=ID; shared drops it).",
        ),
        click.option(
            "--mem0-history",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="mem0's history.db (default: found inside or next to the folder, "
            "$MEM0_DIR, ~/.mem0; for a postgresql:// store, only as given).",
        ),
        click.option(
            "--pg-schema",
            default=None,
            metavar="SCHEMA",
            help="Schema of a postgresql:// store (default: public).",
        ),
    ]
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


def source_options(*, writes: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--now`` (and, for commands that change a store, ``--allow-writes`` and ``--audit-db``)."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        options = [
            click.option(
                "--now",
                default=None,
                metavar="TIME",
                help="What 'now' is for expiry: ISO-8601, or a whole number for a "
                "logical-time store (default: $MEMTUI_NOW, else the clock).",
            )
        ]
        if writes:
            options += [
                click.option(
                    "--allow-writes",
                    is_flag=True,
                    help="Let memtui change a foreign store (it opens them read-only otherwise).",
                ),
                click.option(
                    "--audit-db",
                    type=click.Path(dir_okay=False, path_type=Path),
                    default=None,
                    help="Audit log of a foreign store (default: <store>.memtui-audit.db).",
                ),
            ]
        for option in reversed(options):
            func = option(func)
        return func

    return decorate


def warn_refused(source: MemorySource) -> None:
    """What the store holds that memtui refused to read (a Qdrant point), a line each on stderr."""
    for line in getattr(source, "refused", ()):
        click.echo(f"warning: {escape_controls(line)}", err=True)


def console() -> Console:
    """A console that prints no markup and, when piped, is wide enough for a table."""
    width = None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "160"))
    return Console(soft_wrap=False, highlight=False, markup=False, emoji=False, width=width)


def json_text(data: Any) -> str:
    """Strict JSON for scripts, safe to print to a terminal.

    Strict: NaN and Infinity are not JSON (``json.loads`` elsewhere refuses
    them), so a value that holds one (read from a store memtui did not fill)
    is printed with it as the text ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``.
    Safe: controls that ``json.dumps`` leaves raw (DEL, C1, bidi overrides,
    line separators) are written as ``\\uXXXX`` escapes, which parse back to
    the same text. Other non-ASCII text stays readable.
    """
    try:
        try:
            text = json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)
        except ValueError as exc:
            if "float" not in str(exc):  # "Out of range float values are not JSON compliant"
                raise
            text = json.dumps(_finite(data), indent=2, ensure_ascii=False, allow_nan=False)
    except RecursionError:
        raise click.ClickException("the data is nested too deeply to print as JSON") from None
    return escape_json_controls(text)


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by its name as text."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def emit_json(data: Any) -> None:
    click.echo(json_text(data))


def record_state(record: MemoryRecord, store: MemoryStore) -> str:
    if record.refuted:
        return "refuted"
    if record.is_expired(store.now()):
        return "expired"
    return "live"


def record_json(record: MemoryRecord, store: MemoryStore) -> dict[str, Any]:
    """The one record shape every ``--json`` output uses."""
    return {
        "id": record.id,
        "tier": record.tier,
        "record_type": record.record_type,
        "content": record.content,
        "scope": {
            "profile_hash": record.profile_hash,
            "engagement": record.engagement,
            "run_id": record.run_id,
            "tool_name": record.tool_name,
            "url_pattern": record.url_pattern,
        },
        "created_at": record.created_at,
        "expires_at": record.expires_at,
        "state": record_state(record, store),
        "signature": record.signature,
        "metadata": mask_metadata(record.metadata),
    }


def counts_text(record: MemoryRecord) -> str:
    meta = record.metadata
    if "total_attempts" in meta:
        return f"{meta.get('total_successes', 0)}/{meta.get('total_attempts', 0)}"
    return ""


def short_time(value: str | None) -> str:
    return value[:16].replace("T", " ") if value else ""


def no_record(source: MemorySource, record_id: str) -> click.ClickException:
    """ "No record with id X", and which id to use when X names one as the store's own
    tools do (a LangGraph ``namespace/key``, a bare point id)."""
    text = escape_controls(source.missing_record_message(record_id))
    hint = source.id_hint(record_id)
    return click.ClickException(f"{text}; {escape_controls(hint)}" if hint else text)


def record_label(record_id: str) -> str:
    """``#12`` for a memtui database's whole-number id; any other store's id as it is
    (as the app shows them)."""
    shown = escape_controls(str(record_id))
    return f"#{shown}" if shown.isdigit() else shown


def confirm_or_abort(question: str, assume_yes: bool) -> None:
    """Ask before erasing; no answer (end of input) counts as no."""
    if assume_yes:
        return
    try:
        answer = click.confirm(question, default=False, err=True)
    except click.Abort:
        answer = False
    if not answer:
        raise click.ClickException("not confirmed; nothing was changed (--yes skips the question)")


operator_option = click.option(
    "--operator",
    envvar="MEMTUI_OPERATOR",
    default=None,
    help="Who is acting, for the audit log (default: $MEMTUI_OPERATOR, then the OS user).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


def store_location(text: str | Path) -> str | Path:
    """A store as the command line names it: a URL a kind opens (``postgresql://...``)
    stays text, anything else is a path."""
    from memtui.sources.detect import names_url_store

    if isinstance(text, str) and names_url_store(text):
        return text.strip()
    return Path(text)


class StoreLocation(click.ParamType):
    """A store PATH, or a URL in its place (``postgresql://...``: kept as text, whole)."""

    name = "path"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return store_location(value)


class DatabaseFile(click.ParamType):
    """The PATH of a memtui database file; a URL in its place is refused in one line
    (without the URL itself: it may hold a password)."""

    name = "path"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        location = store_location(value)
        if isinstance(location, str):
            scheme = location.partition("://")[0]
            self.fail(f"this command works on a memtui database file, not a {scheme}:// URL")
        return location


#: a store PATH (a file or a Qdrant folder) or a postgresql:// URL, optional when
#: --qdrant-url names a server
source_argument = click.argument("db", required=False, type=StoreLocation())
#: any store, required (the command refuses the kinds it does not apply to)
db_argument = click.argument("db", type=StoreLocation())
#: a memtui database file
database_file_argument = click.argument("db", type=DatabaseFile())


def scope_filters(
    tier: str | None,
    record_type: str | None,
    profile: str | None,
    engagement: str | None,
    run_id: str | None,
    tool: str | None,
    extra: tuple[str, ...],
) -> dict[str, str]:
    filters = {
        key: value
        for key, value in (
            ("tier", tier),
            ("record_type", record_type),
            ("profile_hash", profile),
            ("engagement", engagement),
            ("run_id", run_id),
            ("tool_name", tool),
        )
        if value is not None
    }
    for item in extra:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.ClickException(f"--filter takes KEY=VALUE, got {item!r}")
        filters[key.strip()] = value
    return filters


def filter_options(func: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--tier", default=None, help="working, episodic, longterm or knowledge."),
        click.option("--type", "record_type", default=None, help="Record type, e.g. tactic."),
        click.option("--profile", default=None, help="Stack profile hash."),
        click.option("--engagement", default=None, help="Engagement name."),
        click.option("--run", "run_id", default=None, help="Run id."),
        click.option("--tool", default=None, help="Tool name."),
        click.option(
            "--filter",
            "extra",
            multiple=True,
            metavar="KEY=VALUE",
            help="Any scope key of the store (a memtui database: "
            f"{', '.join(sorted(FILTER_ALLOWLIST))}).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func
