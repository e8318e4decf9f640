"""memtui's Postgres connection: read-only in the database, busy statements retried with
backoff, every failure one line without the password."""

from __future__ import annotations

import sys
import threading

import psycopg
import pytest

from memtui.sources import SourceError, open_source
from memtui.sources.postgres.connection import (
    BusyDatabase,
    PgConnection,
    ReadOnlyRefusal,
    connect_problem,
)
from memtui.sources.postgres.url import PgTarget, is_postgres_url, like_prefix, redact, scrub

from .conftest import PASSWORD, PASSWORD_USER, database_url
from .support import sql


def test_the_displayed_url_never_holds_the_password():
    url = "postgresql://ana:s3cr%40t-Pw@db1.example:5432,db2.example/agents?sslmode=require"
    target = PgTarget(url)
    assert target.password == "s3cr@t-Pw"
    assert target.display == "postgresql://ana@db1.example:5432,db2.example/agents?sslmode=require"
    assert redact("postgres://bo@/agents?host=/run/pg&password=hunter22") == (
        "postgres://bo@/agents?host=/run/pg"
    )
    assert redact("postgresql://?service=agents") == "postgresql://?service=agents"
    assert PgTarget(url, schema="mem").display_with_schema.endswith(
        "agents?sslmode=require (schema mem)"
    )
    message = (
        f"invalid connection option: {url} \"password=s3cr@t-Pw\" host=db1 password='a b' "
        "postgresql://ana:other-pw@db3.example/x"
    )
    cleaned = scrub(message, url)
    for secret in ("s3cr@t-Pw", "s3cr%40t-Pw", "a b'", "other-pw"):
        assert secret not in cleaned, cleaned
    assert is_postgres_url("POSTGRES://x") and not is_postgres_url("store.db")
    assert like_prefix("a_b%c\\d.") == "a\\_b\\%c\\\\d.%"


def test_reads_are_read_only_in_the_database(lg_url):
    conn = PgConnection(PgTarget(lg_url))
    try:
        assert conn.query("SHOW default_transaction_read_only") == [("on",)]
        with pytest.raises(ReadOnlyRefusal, match="pass --allow-writes to change it"):
            conn.query("DELETE FROM store")
        with pytest.raises(ReadOnlyRefusal):
            conn.run(lambda c: c.execute("UPDATE store SET value = '{}'"), transaction=True)
        with pytest.raises(ReadOnlyRefusal):
            conn.query("CREATE TABLE scratch (a int)")
    finally:
        conn.close()
    assert sql(lg_url, "SELECT count(*) FROM store WHERE value = '{}'") == [(0,)]
    with open_source(lg_url) as source:
        with pytest.raises(ReadOnlyRefusal):
            source.pg.query("DELETE FROM store WHERE key = 'trip'")
        with pytest.raises(SourceError, match="open read-only .*pass --allow-writes"):
            source.forget("lg:memories.user-1/trip", reason="r")
        assert source.get("lg:memories.user-1/trip") is not None
    with open_source(lg_url, allow_writes=True) as source:
        assert source.pg.query("SHOW default_transaction_read_only") == [("off",)]


def hold_lock(url: str, until: threading.Event, locked: threading.Event) -> None:
    with psycopg.connect(url) as conn:
        conn.execute("LOCK TABLE store IN ACCESS EXCLUSIVE MODE")
        locked.set()
        until.wait(10)
        conn.rollback()


def test_a_busy_statement_is_retried_with_backoff_then_given_up(lg_url):
    release, locked = threading.Event(), threading.Event()
    holder = threading.Thread(target=hold_lock, args=(lg_url, release, locked))
    holder.start()
    locked.wait(10)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 2:
            release.set()
            holder.join()

    conn = PgConnection(
        PgTarget(lg_url), lock_timeout_ms=30, backoff=(0.01, 0.02, 0.04), sleep=sleep
    )
    try:
        assert conn.query("SELECT count(*) FROM store")[0][0] > 0
        assert slept == [0.01, 0.02] and conn.retries == 2
    finally:
        conn.close()
    release2, locked2 = threading.Event(), threading.Event()
    holder = threading.Thread(target=hold_lock, args=(lg_url, release2, locked2))
    holder.start()
    locked2.wait(10)
    conn = PgConnection(
        PgTarget(lg_url), lock_timeout_ms=30, backoff=(0.0, 0.0), sleep=lambda s: None
    )
    try:
        with pytest.raises(BusyDatabase) as raised:
            conn.query("SELECT count(*) FROM store")
        assert "stayed busy" in str(raised.value) and "through 3 tries; try again" in str(
            raised.value
        )
        assert "\n" not in str(raised.value)
    finally:
        conn.close()
        release2.set()
        holder.join()


def test_a_statement_timeout_is_retried_like_a_lock(lg_url):
    conn = PgConnection(
        PgTarget(lg_url), statement_timeout_ms=20, backoff=(0.0,), sleep=lambda s: None
    )
    try:
        with pytest.raises(BusyDatabase, match="canceling statement due to statement timeout"):
            conn.query("SELECT pg_sleep(1)")
        assert conn.retries == 1
    finally:
        conn.close()


def test_a_password_is_used_and_never_shown(pg_server, lg_url):
    database = lg_url.split("?")[0].rsplit("/", 1)[1]
    url = database_url(pg_server, database, f"{PASSWORD_USER}:{PASSWORD}")
    with open_source(url) as source:
        assert source.record_count() > 0
        shown = [source.label, source.location, str(source.audit_source()), str(source.path)]
        shown += [str(source.audit_path), repr(source), str(source.summary())]
        assert all(PASSWORD not in text for text in shown)
    wrong = database_url(pg_server, database, f"{PASSWORD_USER}:not-{PASSWORD}x")
    with pytest.raises(SourceError) as raised:
        open_source(wrong)
    message = str(raised.value)
    assert message.startswith(f"authentication failed for postgresql://{PASSWORD_USER}@/")
    assert "PGPASSWORD or ~/.pgpass" in message and PASSWORD not in message
    none = database_url(pg_server, database, PASSWORD_USER)
    with pytest.raises(SourceError, match="asks for a password|authentication failed"):
        open_source(none)


def test_pgpassword_reaches_libpq(pg_server, lg_url, monkeypatch):
    database = lg_url.split("?")[0].rsplit("/", 1)[1]
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    with open_source(database_url(pg_server, database, PASSWORD_USER)) as source:
        assert source.record_count() > 0


@pytest.mark.parametrize(
    ("url", "start"),
    [
        (
            "postgresql://ana:pw-Secret9@127.0.0.1:1/agents",
            "cannot connect to postgresql://ana@127.0.0.1:1/agents: ",
        ),
        (
            "postgresql://ana:pw-Secret9@/agents?host=/nonexistent/folder",
            "cannot connect to postgresql://ana@/agents?host=/nonexistent/folder: ",
        ),
    ],
)
def test_an_unreachable_server_is_one_line(url, start):
    with pytest.raises(SourceError) as raised:
        open_source(url)
    message = str(raised.value)
    assert message.startswith(start) and "\n" not in message
    assert message.endswith(
        "check that the server is running and the host, port or socket folder in the URL"
    )
    assert "pw-Secret9" not in message


def test_a_missing_database_is_one_line(pg_server):
    url = database_url(pg_server, "no_such_db")
    with pytest.raises(
        SourceError, match=r"^no such database at postgresql://postgres@/no_such_db\?host="
    ):
        open_source(url)


def test_without_psycopg_the_extra_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(SourceError) as raised:
        open_source("postgresql://ana:pw@db.example/agents")
    assert str(raised.value) == (
        "opening a Postgres store needs the postgres extra: pip install 'memtui[postgres]'"
    )


def test_connect_problem_names_what_to_do():
    target = PgTarget("postgresql://ana:Zz9-secret@db.example/agents")
    text = connect_problem(target, 'FATAL:  role "ana" does not exist')
    assert (
        text == "no such user at postgresql://ana@db.example/agents: check the user name in the URL"
    )


def test_a_dropped_session_is_opened_again_for_a_read(lg_url):
    with open_source(lg_url) as source:
        pid = source.pg.query("SELECT pg_backend_pid()")[0][0]
        sql(lg_url, "SELECT pg_terminate_backend(%s)", (pid,))
        assert source.record_count() > 0
        assert source.pg.query("SELECT pg_backend_pid()")[0][0] != pid
        assert source.pg.query("SHOW default_transaction_read_only") == [("on",)]


def test_memtui_imports_and_lists_its_stores_without_psycopg():
    import subprocess

    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from click.testing import CliRunner\n"
        "from memtui.cli import main\n"
        "out = CliRunner().invoke(main, ['info', '--formats']).output\n"
        "assert ('Postgres database (LangGraph PostgresStore, mem0 pgvector collection, '\n"
        "    'Letta server)') in out, out\n"
        "out = CliRunner().invoke(main, ['info', 'postgresql://ana:pw9-x@db.example/a']).output\n"
        'assert out.strip() == "Error: opening a Postgres store needs the postgres extra: '
        "pip install 'memtui[postgres]'\", out\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
