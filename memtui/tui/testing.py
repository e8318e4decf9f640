"""Helpers for driving the app headless: tests, screenshots and the tmux-free checks.

Not imported by the app itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from textual.app import App
from textual.pilot import Pilot
from textual.worker import WorkerCancelled

from memtui.core.corpus import load_corpus
from memtui.core.embed import HashEmbedder
from memtui.core.store import MemoryStore

FIXED_NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
SAMPLE_CORPUS = Path(__file__).resolve().parents[2] / "sample_corpus" / "memory-corpus.json"


def fixed_clock() -> datetime:
    return FIXED_NOW


def build_sample_db(
    path: Path, *, clock: Callable[[], datetime] = fixed_clock, corpus: Path = SAMPLE_CORPUS
) -> Path:
    """A database at ``path`` loaded from the sample corpus with the hash embedder."""
    with MemoryStore(path, clock=clock, embedder=HashEmbedder(), operator="tester") as store:
        store.ingest(load_corpus(corpus), source=corpus.name)
    return path


async def settle(pilot: Pilot, rounds: int = 8) -> None:
    """Wait until no worker is running and every message they posted is handled.

    One pause when the app is already idle: after each pause (which handles the
    messages queued so far and brings the screen up to date) the app is settled once no
    worker runs, no node is mounting and none has a message or callback waiting.
    Otherwise wait for the running workers and pause again, ``rounds`` times at most
    (an app that polls starts a worker every second)."""
    app = pilot.app
    for _ in range(rounds):
        await _workers_done(app)
        await pilot.pause()
        if not _busy(app):
            return


async def _workers_done(app: App) -> None:
    """Wait for the app's running workers; one that is cancelled (an exclusive worker
    that a newer one replaced) is done too. A worker that failed fails the test."""
    for worker in list(app.workers):
        if worker.is_running:
            with contextlib.suppress(WorkerCancelled):
                await worker.wait()


def _busy(app: App) -> bool:
    """A worker runs, a node is still mounting or has a message or callback waiting.

    Reads Textual's private queues (no public call says whether an app is idle); the
    version is pinned in pyproject.toml, and a Textual that renames them fails every
    Pilot test at its first ``settle``.
    """
    if any(worker.is_running for worker in app.workers):
        return True
    screens = app._screen_stack
    if any(screen._callbacks for screen in screens):
        return True
    for node in {app, *screens, *app._registry}:
        queue = node.__dict__.get("_message_queue")  # made with a node's first message
        if (queue is not None and queue.qsize()) or node._next_callbacks:
            return True
        if not node._mounted_event.is_set():
            return True
    return False


async def wait_for(
    pilot: Pilot,
    condition: Callable[[], bool],
    timeout: float = 10.0,
    interval: float = 0.02,
    what: str = "the app",
) -> None:
    """Let the app run (timers, workers, messages) until ``condition`` holds.

    Fails the test after ``timeout`` seconds (saying it waited for ``what``): the
    condition is checked between short sleeps, never assumed after a fixed number of
    them. A sleep, not ``pilot.pause``: ``pilot``'s app runs meanwhile all the same (its
    own timer draws the screen), and a pause makes every widget handle a message.
    """
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(interval)


def _full_screen_update(app: App):
    """The current screen composed as one full repaint: the segments a terminal gets.

    Textual has no public call for this: ``App.export_screenshot`` (public) makes
    exactly this call but returns SVG only, and the headless test driver writes
    nothing. It reads the screen's private compositor and background-screen stack,
    which is why ``textual`` is pinned to one version in pyproject.toml; a test
    (tests/app/test_app_shell.py) checks it against ``export_screenshot``, so a
    Textual that changes it fails there first.
    """
    return app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)


def screen_text(app: App, width: int | None = None) -> str:
    """The current screen as plain text (what a terminal would show, without colour)."""
    size = app.size
    console = Console(
        width=width or size.width,
        height=size.height,
        record=True,
        file=io.StringIO(),
        color_system=None,
        legacy_windows=False,
    )
    console.print(_full_screen_update(app))
    return console.export_text()


# ---------------------------------------------------------------- hostile content

ESC_SEQUENCES = {
    "clear": "\x1b[2J",
    "red": "\x1b[31m",
    "cursor": "\x1b[10;10H",
    "osc52": "\x1b]52;c;SGVsbG8=\x07",
    "osc8": "\x1b]8;;https://evil.example\x1b\\",
    "title": "\x1b]0;pwned\x07",
}
CONTROLS = "\x00\x07\x08\x7f\x9b"
MARKUP = "[bold red]boom[/] [link=https://evil.example]x[/link]"
HOSTILE_LINE = (
    f"hostile {MARKUP} " + " ".join(ESC_SEQUENCES.values()) + f" ctl{CONTROLS}end \u202eevil"
)
INTERNATIONAL = (
    "intl \u202eright-to-left override; مرحبا بالعالم; שלום עולם; "
    "e\u0301\u0301\u0301 combining; 漢字テキスト全角; 👩‍💻🔥🎉 emoji"
)
MEGABYTE = 1_000_000
LONG_LINE = 50_000


def build_hostile_db(path: Path, *, clock: Callable[[], datetime] = fixed_clock) -> Path:
    """A database whose text is written the way an attacker would write it.

    Markup, ANSI/OSC escape sequences (screen clear, colour, cursor move, OSC 52
    clipboard write, OSC 8 link, title change), other control characters, a 1 MB
    string, a 50,000-character line, bidi overrides, RTL scripts, combining marks,
    wide CJK and emoji, in content, scope fields, metadata keys and values, tool
    names, finding titles, audit reasons and the operator's name.
    """
    hostile_meta = {
        f"key{MARKUP}\x1b[2J": f"value {HOSTILE_LINE}",
        "nested": {"deep": HOSTILE_LINE, "api_token": "tok-SECRET-0042"},
        "password": "hunter2-SECRET",
        "token\x1b]0;pwned\x07[b]": "SECRET-T0KEN",
        "note": INTERNATIONAL,
    }
    with MemoryStore(path, clock=clock, embedder=HashEmbedder(), operator="tester") as store:
        store.add_record(
            tier="working",
            record_type="note\x1b[31m",
            content=HOSTILE_LINE + "\nsecond line " + MARKUP,
            metadata=hostile_meta,
            engagement=f"eng{MARKUP}\x1b]0;pwned\x07",
            profile_hash="php:\x1b[2J:[bold]x[/]:漢字:👩‍💻",
            tool_name="sqlmap\x1b[31m[b]",
            run_id="run\x00\x07",
        )
        store.add_record(
            tier="working",
            record_type="note",
            content="megabyte hostile " + ("0123456789" * (MEGABYTE // 10)) + " TAILMARK",
            metadata={"blob": "m" * MEGABYTE},
        )
        store.add_record(
            tier="working",
            record_type="note",
            content="longline hostile " + ("x" * LONG_LINE) + " LINEEND",
        )
        store.add_record(
            tier="working",
            record_type="observation",
            content=INTERNATIONAL + " hostile",
            tool_name="漢字ツール👩‍💻",
            engagement="שלום-عربي-漢字-👩‍💻",
        )
        profile = "python:postgresql:waf_present:generic_waf:rest:flask"
        for tool in (f"sqlmap{MARKUP}", "burp\x1b]52;c;SGVsbG8=\x07"):
            store.record_success(
                profile_hash=profile,
                tool=tool,
                endpoint=f"/api/1/{MARKUP}\x1b[2J",
                param="q\x1b[31m",
                technique=f"tamper {HOSTILE_LINE}",
                proof=f"proof {HOSTILE_LINE}",
                content=f"hostile tactic {HOSTILE_LINE}",
                metadata={"cookie": "sid=SECRET-COOKIE"},
            )
        for severity in ("high", "medium"):
            store.record_finding(
                finding_id=f"F-{severity}\x1b[31m",
                run_id="run-1\x07",
                engagement=f"eng{MARKUP}\x1b]0;pwned\x07",
                severity=severity,
                title=f"hostile finding {HOSTILE_LINE}",
                url=f"https://target.example/{MARKUP}\x1b]8;;https://evil.example\x1b\\",
                type="sqli\x1b[2J",
            )
        tactic = store.fetch(record_type="tactic", limit=1)[0]
        store.refute(
            tactic.id,
            reason=f"refuted {HOSTILE_LINE}",
            operator=f"mallory{MARKUP}\x1b]0;pwned\x07",
        )
    return path


_SGR = re.compile(r"\x1b\[[0-9;:]*m")
_CURSOR_TO = re.compile(r"\x1b\[(\d+);(\d+)H")
_TERMINAL_CONTROLS = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def terminal_output(app: App) -> str:
    """Exactly what the app would write to a terminal for a full repaint of the screen."""
    size = app.size
    console = Console(
        width=size.width,
        height=size.height,
        file=io.StringIO(),
        force_terminal=True,
        color_system="truecolor",
        legacy_windows=False,
    )
    return _full_screen_update(app).render_segments(console)


def stray_controls(output: str, height: int) -> list[str]:
    """Control characters in ``output`` other than the ones Textual itself writes.

    Textual writes one cursor move per screen line (``ESC [ y ; 1 H``, in order), SGR
    colour sequences and newlines; anything else (a raw ESC, BEL, NUL, a C1 CSI, an
    OSC 8 link or an OSC 52 clipboard write) came from the data.
    """
    moves = [(int(y), int(x)) for y, x in _CURSOR_TO.findall(output)]
    problems: list[str] = []
    if moves != [(y, 1) for y in range(1, height + 1)]:
        problems.append(f"unexpected cursor moves: {moves[:5]}… ({len(moves)})")
    rest = _CURSOR_TO.sub("", _SGR.sub("", output))
    problems.extend(repr(m.group()) for m in _TERMINAL_CONTROLS.finditer(rest))
    return problems
