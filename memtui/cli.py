"""The command line: ``memtui DB`` opens the app; subcommands script the store."""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import click

from memtui.commands.changes import forget, forget_gaps, forget_scope, refute, reveal
from memtui.commands.common import (
    ErrorReportingGroup,
    fixed_clock,
    names_a_remote_store,
    operator_option,
    source_argument,
    source_options,
    store_kind_options,
    store_path_required,
)
from memtui.commands.evaluate import evaluate
from memtui.commands.lanes import lanes
from memtui.commands.maintenance import check, compact, migrate, reindex_text
from memtui.commands.search import reindex, search
from memtui.commands.sources import audit, cache, info, records
from memtui.config import Config, activated, current
from memtui.core.corpus import load_corpus
from memtui.core.embed import DEFAULT_EMBEDDER_NAME, resolve_embedder
from memtui.core.store import MemoryStore, MemoryStoreError
from memtui.render import escape_controls, plural


@click.group(cls=ErrorReportingGroup, default_command="open")
@click.version_option(package_name="memtui")
@click.pass_context
def main(ctx: click.Context) -> None:
    """memtui: inspect, explain and correct AI-agent memory databases.

    `memtui DB` opens the app on a memory database; the commands below script it.
    """
    ctx.obj = ctx.with_resource(activated(Config.from_environment(os.environ)))


@main.command("open", hidden=True)
@source_argument
@click.option("--read-only", is_flag=True, help="Open without write access.")
@source_options(writes=True)
@store_kind_options
@operator_option
@click.option(
    "--embedder",
    "embedder_name",
    default=None,
    metavar="NAME",
    help="Query embedder for a foreign store's vectors (hash, hash-N, minilm or module:callable).",
)
@click.option(
    "--questions",
    "questions",
    default=None,
    metavar="FILE",
    help="A questions file (as memtui eval reads it) for the Eval tab, run when it is shown.",
)
def open_command(
    db: Path | None,
    read_only: bool,
    now: str | None,
    allow_writes: bool,
    audit_db: Path | None,
    store_options: dict[str, Any],
    operator: str | None,
    embedder_name: str | None,
    questions: str | None,
) -> None:
    """Open the app on DB (any store memtui recognizes), or on --qdrant-url URL."""
    from memtui.core.embed import EmbedderError
    from memtui.tui.launch import run_app

    if db is None and not names_a_remote_store(store_options):
        raise store_path_required()
    try:
        embedder = resolve_embedder(embedder_name)
    except EmbedderError as exc:
        raise click.BadParameter(str(exc), param_hint="--embedder") from None
    run_app(
        db,
        read_only=read_only,
        operator=operator,
        clock=fixed_clock(),
        allow_writes=allow_writes,
        audit_db=audit_db,
        now=now,
        embedder=embedder,
        options=store_options,
        questions=questions,
    )


@main.command()
@click.argument("corpus", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--db", "db", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--embedder",
    default=DEFAULT_EMBEDDER_NAME,
    show_default=True,
    help="none, hash, hash-N, minilm, or module:callable.",
)
@operator_option
def ingest(corpus: Path, db: Path, embedder: str, operator: str | None) -> None:
    """Load a corpus (JSON list of records) into DB, all or nothing."""
    rows = load_corpus(corpus)  # validated whole before anything is opened
    chosen = resolve_embedder(embedder)
    created = not db.exists()
    try:
        with MemoryStore(db, clock=fixed_clock(), embedder=chosen, operator=operator) as store:
            with _LoadingBar(len(rows), "ingesting") as progress:
                ids = store.ingest(rows, source=corpus.name, progress=progress)
            counts = store.tier_counts(include_refuted=True, include_expired=True)
    except BaseException:
        if created:  # all or nothing: a database this command made and failed to fill goes
            for suffix in ("", "-wal", "-shm"):
                Path(str(db) + suffix).unlink(missing_ok=True)
        raise
    summary = ", ".join(f"{tier} {n}" for tier, n in counts.items())
    click.echo(f"ingested {plural(len(ids), 'record')} into {escape_controls(str(db))} ({summary})")


class _LoadingBar:
    """A progress bar on stderr that appears only once loading is under way.

    The store calls ``progress(done, total)`` after each batch it has loaded
    (and once at the end): a corpus refused before the first batch (a tactic
    already in the database, say) prints its one error line and no label.
    """

    def __init__(self, total: int, label: str) -> None:
        self.total, self.label = total, label
        self.bar: Any = None
        self.done = 0

    def __enter__(self) -> _LoadingBar:
        return self

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            if done >= total:
                return  # finished at once: nothing to show
            self.bar = click.progressbar(
                length=self.total, label=self.label, file=sys.stderr, show_pos=True
            )
            self.bar.__enter__()
        self.bar.update(done - self.done)
        self.done = done

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)


def sample_corpus_path() -> Path:
    path = Path(__file__).resolve().parent.parent / "sample_corpus" / "memory-corpus.json"
    if not path.exists():
        raise click.ClickException(
            "the sample corpus was not found beside the package; "
            "memtui demo runs from a source checkout installed with pip install -e ."
        )
    return path


def demo_db_path() -> Path:
    folder = current().data_dir
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "demo.db"


DEMO_OPERATOR = "memtui-demo"
DEMO_CORPUS = "memory-corpus.json"


def build_demo_db(path: Path) -> None:
    """Build the demo database at ``path`` from the sample corpus, whole or not at all.

    It is built beside ``path`` under another name and then moved over it, so a reader
    never sees it half built; an app that still has the old file open finds its path
    replaced (and says so) instead of reading a file being rebuilt under it.
    """
    rows = load_corpus(sample_corpus_path())
    building = path.with_name(f".{path.name}.building")
    _remove_database(building)
    try:
        with MemoryStore(
            building,
            clock=fixed_clock(),
            embedder=resolve_embedder(DEFAULT_EMBEDDER_NAME),
            operator=DEMO_OPERATOR,
        ) as store:
            store.ingest(rows, source=DEMO_CORPUS)
        # The old file's WAL and shared memory must not be read as the new file's.
        for suffix in ("-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        os.replace(building, path)
    finally:
        _remove_database(building)


def _remove_database(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def is_demo_database(path: Path) -> bool:
    """Whether ``path`` is a memtui database that ``memtui demo`` built: its first audit
    event is the demo's ingest of the sample corpus. Read without changing the file."""
    try:
        with MemoryStore(path, read_only=True) as store:
            first = store.audit_events(limit=1, before_id=2)
    except (MemoryStoreError, OSError, sqlite3.Error):
        return False
    return bool(first) and (
        first[0]["action"] == "ingest"
        and first[0]["operator"] == DEMO_OPERATOR
        and (first[0].get("details") or {}).get("source") == DEMO_CORPUS
    )


def prepare_demo_db(db: Path | None, reset: bool) -> tuple[Path, str]:
    """The demo database to open, built when missing (or asked to with ``reset``), and a
    line saying which: built, rebuilt, or kept from the last run.

    A file that is not a demo database is never replaced, except the demo's own file in
    the data folder with ``--reset``.
    """
    path = db or demo_db_path()
    shown = escape_controls(str(path))
    if not path.exists():
        build_demo_db(path)
        return path, f"built the demo database at {shown} from the sample corpus"
    if not is_demo_database(path) and (db is not None or not reset):
        if db is not None:
            raise click.ClickException(
                f"{shown} already exists and is not a demo database; memtui demo replaces "
                f"nothing: give a path that does not exist, or open it with memtui {shown}"
            )
        raise click.ClickException(
            f"{shown} is not a demo database (damaged, or written by something else); "
            "memtui demo --reset rebuilds it from the sample corpus"
        )
    if reset:
        build_demo_db(path)
        return path, (
            f"rebuilt the demo database at {shown} from the sample corpus "
            "(its refutes, forgets and audit log are gone)"
        )
    return path, (
        f"demo database at {shown} kept from the last run, with its refutes, forgets and "
        "audit log (memtui demo --reset rebuilds it)"
    )


@main.command()
@click.option(
    "--db",
    "db",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where the demo database is (default: the user data folder).",
)
@click.option("--summary", is_flag=True, help="Print a summary instead of opening the app.")
@click.option(
    "--reset",
    is_flag=True,
    help="Rebuild the demo database from the sample corpus (its changes are lost).",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the byte-stable JSON walkthrough of the sample corpus here instead.",
)
def demo(db: Path | None, summary: bool, reset: bool, out: Path | None) -> None:
    """Open the demo database (built from the sample corpus on first use; kept after)."""
    if out is not None:
        from memtui.walkthrough import render_walkthrough

        text = render_walkthrough(sample_corpus_path())
        if str(out) == "-":
            click.echo(text, nl=False)
        else:
            try:
                out.write_text(text, encoding="utf-8")
            except OSError as exc:
                raise click.ClickException(
                    f"cannot write the walkthrough to {escape_controls(str(out))}: "
                    f"{exc.strerror or exc}"
                ) from None
            click.echo(f"wrote the walkthrough to {escape_controls(str(out))}")
        return
    path, said = prepare_demo_db(db, reset)
    click.echo(said)
    if summary:
        # Read-only: a summary beside a running app changes nothing under it.
        with MemoryStore(path, read_only=True, clock=fixed_clock()) as store:
            counts = store.tier_counts()
            engagements = store.engagements()
            profiles = store.profiles()
        click.echo("records by tier: " + ", ".join(f"{t} {n}" for t, n in counts.items()))
        click.echo(f"engagements: {', '.join(engagements)}")
        click.echo(f"profiles: {len(profiles)}")
        return
    from memtui.tui.launch import run_app

    questions = sample_corpus_path().with_name("questions.json")
    run_app(
        path,
        read_only=False,
        operator=None,
        clock=fixed_clock(),
        questions=str(questions) if questions.is_file() else None,
    )


main.add_command(lanes)
main.add_command(reveal)
main.add_command(forget_scope)

main.add_command(records)
main.add_command(forget)
main.add_command(forget_gaps)
main.add_command(refute)
main.add_command(audit)
main.add_command(cache)
main.add_command(info)

main.add_command(search)
main.add_command(evaluate)
main.add_command(reindex)

main.add_command(check)
main.add_command(compact)
main.add_command(reindex_text)
main.add_command(migrate)

if __name__ == "__main__":
    main()
