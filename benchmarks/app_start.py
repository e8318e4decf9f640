"""Opening the app to its first useful screen, beside a minimal Textual app started alike.

``python -m benchmarks.app_start DB [--repeats 5]`` measures it alone; the harness
(``python -m benchmarks``) prints it as a row of each size's table.

Each repetition starts two child processes the same way, a fresh interpreter
each (``python -m benchmarks.app_start child ...``), so interpreter start-up and
imports count for both:

- memtui: ``make_app(MemoryStore(db, read_only=True), poll_interval=None,
  check_on_start=False)`` run headless at 120x40 (``App.run(headless=True)``);
  ready when the scope tree lists the tiers (with their counts) and the records
  table holds its first page of rows;
- minimal: an ``App`` with a ``DataTable`` and a ``Footer`` that fills 50 rows
  when mounted; ready when the table holds them.

Both are watched the same way: an ``auto_pilot`` coroutine polls the widgets
every few milliseconds; once ready, it waits for the next refresh (the frame
that shows them is composed; headless, it is not written to a terminal), and
that moment is the figure: wall-clock time since the parent's ``time.time()``
just before it started the child. The child prints one JSON line with its
timestamps and exits without waiting for its threads. Repetitions alternate
which app goes first, after one unmeasured warm-up of each.

This module is also the child's entry point, so nothing but ``sys`` and ``time``
is imported at its top: the children's figures must not include the parent's
imports.
"""

from __future__ import annotations

import sys
import time

_T_SCRIPT = time.time()  # the child's first line (after interpreter start-up)

TIMEOUT = 60.0
"""Seconds a child may take before it is killed and the run counted as failed."""
SIZE = (120, 40)
MINIMAL_ROWS = 50
POLL = 0.005
"""Seconds between two looks at the widgets (both apps alike)."""


# ------------------------------------------------------------------ children


def _watch(app: object, ready: object, stamps: dict, limit: float) -> object:
    """An auto_pilot that polls ``ready(app)`` and stamps the frame that shows it; after
    ``limit`` seconds it gives up, with the last error it saw."""

    async def pilot(_pilot: object) -> None:
        import asyncio

        while True:
            try:
                state = ready(app)  # type: ignore[operator]
            except Exception as exc:  # a widget renamed, or not mounted yet
                state = None
                stamps["last_error"] = f"{type(exc).__name__}: {exc}"
            if state:
                break
            code = app.return_code  # type: ignore[attr-defined]
            if code is not None:  # the app stopped (it crashed, or quit) before it was ready
                stamps["failed"] = f"the app stopped (return code {code}) before its first screen"
                app.exit()  # type: ignore[attr-defined]
                return
            if time.time() - stamps["started"] > limit:
                stamps["failed"] = f"not ready after {limit:.0f} s; last error: " + stamps.get(
                    "last_error", "none (the widgets never filled)"
                )
                app.exit()  # type: ignore[attr-defined]
                return
            await asyncio.sleep(POLL)
        stamps["ready"] = time.time()
        stamps.update(state)
        painted = asyncio.Event()

        def frame() -> None:
            stamps["painted"] = time.time()
            painted.set()

        app.call_after_refresh(frame)  # type: ignore[attr-defined]
        await painted.wait()
        app.exit()  # type: ignore[attr-defined]

    return pilot


def _minimal_child(stamps: dict, limit: float) -> None:
    from textual.app import App, ComposeResult
    from textual.widgets import DataTable, Footer

    imported = time.time()

    class Minimal(App[None]):
        BINDINGS = [("q", "quit", "Quit")]

        def compose(self) -> ComposeResult:
            yield DataTable(id="table")
            yield Footer()

        def on_mount(self) -> None:
            table = self.query_one(DataTable)
            table.add_columns("id", "tier", "type", "content")
            for n in range(MINIMAL_ROWS):
                table.add_row(str(n + 1), "episodic", "finding", f"row {n + 1} of the minimal app")
            table.focus()

    def ready(app: App[None]) -> dict[str, float] | None:
        rows = app.query_one(DataTable).row_count
        return {"rows": rows} if rows >= MINIMAL_ROWS else None

    stamps["imported"] = imported
    app = Minimal()
    app.run(headless=True, size=SIZE, auto_pilot=_watch(app, ready, stamps, limit))  # type: ignore[arg-type]


def _memtui_child(stamps: dict, limit: float, db: str, now: str | None) -> None:
    from memtui.core.store import MemoryStore
    from memtui.tui.app import make_app

    imported = time.time()
    clock = None
    if now:
        from datetime import datetime

        moment = datetime.fromisoformat(now)

        def clock() -> datetime:
            return moment

    store = MemoryStore(db, read_only=True, clock=clock)
    app = make_app(store, poll_interval=None, check_on_start=False)

    def ready(app: object) -> dict[str, float] | None:
        from textual.widgets import DataTable, Tree

        query = app.query  # type: ignore[attr-defined]
        trees = query("#scope-tree") or query(Tree)
        tree = trees.first(Tree)
        rows = app.query_one("#records", DataTable).row_count  # type: ignore[attr-defined]
        # tier nodes whose labels carry their counts (not a placeholder)
        tiers = sum(any(c.isdigit() for c in str(node.label)) for node in tree.root.children)
        if tiers and rows:
            return {"rows": rows, "tiers": tiers}
        return None

    stamps["imported"] = imported
    app.run(headless=True, size=SIZE, auto_pilot=_watch(app, ready, stamps, limit))


def _child(argv: list[str]) -> None:
    import json
    import os

    kind, started, limit = argv[0], float(argv[1]), float(argv[2])
    stamps: dict = {"started": started, "script": _T_SCRIPT}
    if kind == "minimal":
        _minimal_child(stamps, limit)
    elif kind == "memtui":
        _memtui_child(stamps, limit, argv[3], argv[4] if len(argv) > 4 else None)
    else:
        raise SystemExit(f"unknown child {kind!r}")
    sys.stdout.write(json.dumps(stamps) + "\n")
    sys.stdout.flush()
    os._exit(0 if "painted" in stamps else 1)  # threads (workers) are not waited for


# ------------------------------------------------------------------ parent

PHASES = ("python start-up", "imports", "to first screen", "last frame")


def _run_child(kind: str, db: str | None, now: str | None, timeout: float) -> dict:
    """One child's timestamps (seconds), or ``{"error": ...}``."""
    import json
    import os
    import subprocess
    from pathlib import Path

    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    extra = [str(db), *([now] if now else [])] if kind == "memtui" else []
    limit = max(1.0, timeout - 5)  # the child gives up first, and says why
    started = time.time()
    command = [
        sys.executable,
        "-m",
        "benchmarks.app_start",
        "child",
        kind,
        repr(started),
        str(limit),
        *extra,
    ]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            env=env,
            cwd=root,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"{kind}: no first screen within {timeout:g} s (killed)"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    stamps = json.loads(lines[-1]) if lines else {}
    last = (done.stderr or "").strip().splitlines()[-1:]  # e.g. the app's exception
    if stamps.get("failed"):
        return {"error": f"{kind}: {stamps['failed']}" + (f": {last[0][-300:]}" if last else "")}
    if done.returncode != 0 or "painted" not in stamps:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        return {"error": f"{kind}: exit {done.returncode}: {tail[-300:]}"}
    return stamps


def _phases(stamps: dict) -> dict[str, float]:
    """Milliseconds of each phase of one child's start."""
    return {
        "python start-up": (stamps["script"] - stamps["started"]) * 1000,
        "imports": (stamps["imported"] - stamps["script"]) * 1000,
        "to first screen": (stamps["ready"] - stamps["imported"]) * 1000,
        "last frame": (stamps["painted"] - stamps["ready"]) * 1000,
    }


def measure(
    db: str | None,
    repeats: int,
    *,
    now: str | None = None,
    timeout: float = TIMEOUT,
    warmup: bool = True,
) -> dict:
    """Milliseconds to the first useful screen, memtui's and the minimal app's.

    Returns ``{"memtui": [...], "minimal": [...], "breakdown": {kind: {phase: median}},
    "screen": {...}, "errors": [...]}``; a failed child leaves its run out and says
    why in ``errors`` (a child that hangs is killed after ``timeout`` seconds).
    """
    import statistics

    out: dict = {"memtui": [], "minimal": [], "errors": [], "screen": {}}
    phases: dict[str, list[dict[str, float]]] = {"memtui": [], "minimal": []}
    order = [("minimal", "memtui"), ("memtui", "minimal")]
    failed: set[str] = set()  # one failure is enough: a broken app is not retried
    for repeat in ([None] if warmup else []) + list(range(repeats)):
        for kind in order[(repeat or 0) % 2]:
            if kind in failed:
                continue
            stamps = _run_child(kind, db, now, timeout)
            if "error" in stamps:
                out["errors"].append(stamps["error"] + (" (warm-up)" if repeat is None else ""))
                failed.add(kind)
                continue
            if repeat is None:
                continue
            out[kind].append((stamps["painted"] - stamps["started"]) * 1000)
            phases[kind].append(_phases(stamps))
            if kind == "memtui":
                out["screen"] = {"tiers": int(stamps["tiers"]), "rows": int(stamps["rows"])}
    out["breakdown"] = {
        kind: {p: statistics.median(run[p] for run in runs_) for p in PHASES}
        for kind, runs_ in phases.items()
        if runs_
    }
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "child":
        _child(argv[1:])
        return 0
    import argparse
    import statistics

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.app_start",
        description="Time to memtui's first useful screen beside a minimal Textual app.",
    )
    parser.add_argument("db", help="a memtui database (e.g. one the harness generated)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--now", help="the store's clock, ISO-8601 (default: the real clock)")
    parser.add_argument("--timeout", type=float, default=TIMEOUT)
    args = parser.parse_args(argv)
    result = measure(args.db, args.repeats, now=args.now, timeout=args.timeout)
    for kind in ("memtui", "minimal"):
        values = result[kind]
        if values:
            parts = ", ".join(f"{k} {v:.0f}" for k, v in result["breakdown"][kind].items())
            print(
                f"{kind}: median {statistics.median(values):.0f} ms, max {max(values):.0f} ms "
                f"over {len(values)} runs ({parts} ms)"
            )
    if result["memtui"] and result["minimal"]:
        ratio = statistics.median(result["memtui"]) / statistics.median(result["minimal"])
        print(f"ratio {ratio:.2f}x; first screen {result['screen']}")
    for error in result["errors"]:
        print(f"failed: {error}", file=sys.stderr)
    return 0 if result["memtui"] and result["minimal"] else 1


if __name__ == "__main__":
    sys.exit(main())
