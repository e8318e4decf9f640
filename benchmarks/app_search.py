"""Search in the app, timed to the screen, beside the calls the app's workers make.

The other rows time the core (``hybrid_search``, ``explain_keyword``); these time
what an operator waits for. The app runs in this process, headless at 120x40, on
the benchmark's store and embedder, as ``memtui DB`` would start it (no polling,
no file check). Each query is put in the query box and timed from the ``enter``
that runs it to the first frame that shows its results; then the first result the
keyword lane found is timed from the ``enter`` that expands it to the frame that
shows its breakdown with the per-term BM25 lines. Keys go in as a terminal's
would (``App.simulate_key``, not the test pilot, which waits for the process to
go idle after each key); the app's state is polled every millisecond.

Baselines, interleaved with the app, on the same store: what the search worker
calls (``source.search`` and ``source.get_many`` of the candidates) and what the
explanation worker calls (``source.explain``). The ratio is the app's own cost:
threads, messages, building and rendering the list.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from memtui.core.store import MemoryStore

SIZE = (120, 40)
POLL = 0.001
TIMEOUT = 60.0


async def _until(app: Any, done: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    """Poll until ``done()``, then wait for the frame that shows it."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the app did not get there within {timeout:g} s")
        await asyncio.sleep(POLL)
    painted = asyncio.Event()
    app.call_after_refresh(painted.set)
    await painted.wait()


async def _drive(store: MemoryStore, embedder: Any, queries: list[str], repeats: int) -> dict:
    from textual.widgets import Input

    from memtui.tui.app import make_app
    from memtui.tui.search_view import RESULT_LIMIT, SearchPane

    app = make_app(store, embedder=embedder, poll_interval=None, check_on_start=False)
    source = app.source
    out: dict[str, Any] = {"search": [], "search_base": [], "breakdown": [], "breakdown_base": []}
    shown: list[int] = []

    def worker_search(text: str) -> None:
        response = source.search(text, embedder=embedder, limit=RESULT_LIMIT, filters={})
        source.get_many([c.id for c in response.candidates])

    async with app.run_test(size=SIZE) as pilot:
        await _until(app, lambda: bool(app.browse.table.records))
        await pilot.press("2")  # the Search tab is built when first shown
        await _until(app, lambda: app.mounted_pane("search") is not None)
        pane = app.query_one(SearchPane)
        box = app.query_one("#query", Input)

        async def search(text: str) -> float:
            box.value = text
            box.focus()
            await pilot.pause()
            before = pane.base
            start = time.perf_counter()
            app.simulate_key("enter")
            await _until(app, lambda: pane.base is not before and not pane.searching)
            return time.perf_counter() - start

        async def expand_first_keyword_result() -> tuple[float, str] | None:
            """Seconds to expand the first result the keyword lane found, and its id."""
            response = pane.response
            if response is None:
                return None
            found = [i for i, r in enumerate(response.results) if r.trace.keyword.raw is not None]
            if not found:
                return None
            record_id = response.results[found[0]].id
            pane.results.highlighted = found[0]
            pane.results.focus()
            await pilot.pause()
            start = time.perf_counter()
            app.simulate_key("enter")
            await _until(app, lambda: record_id in pane.explanations and record_id in pane.expanded)
            took = time.perf_counter() - start
            await pilot.press("enter")  # collapse it again
            await pilot.pause()
            return took, record_id

        await search(queries[0])  # warm-up: the vector cache is mapped here
        for repeat in range(repeats):
            for text in queries:
                if repeat % 2:  # which of the two goes first alternates
                    out["search_base"].append(_ms(worker_search, text))
                out["search"].append(await search(text) * 1000)
                if not repeat % 2:
                    out["search_base"].append(_ms(worker_search, text))
                shown.append(len(pane.response.results) if pane.response else 0)
                expanded = await expand_first_keyword_result()
                if expanded is not None:
                    took, record_id = expanded
                    out["breakdown"].append(took * 1000)
                    out["breakdown_base"].append(_ms(source.explain, text, record_id))
        await pilot.press("q")
    out["results_shown"] = shown
    return out


def _ms(fn: Callable[..., Any], *args: Any) -> float:
    start = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - start) * 1000


def measure(store: MemoryStore, embedder: Any, queries: list[str], repeats: int) -> dict:
    """Milliseconds: ``search`` / ``search_base`` and ``breakdown`` / ``breakdown_base``
    (one list each), and how many results each search showed."""
    return asyncio.run(_drive(store, embedder, queries, repeats))
