"""A server-side cursor's batches with the next one fetched while the caller uses this one.

A build reads every row of a store through a server-side cursor: the server makes each
batch (the content joined in SQL, the key hash) while memtui waits, then memtui turns
the batch into index rows while the server waits. Fetching the next batch in a thread
overlaps the two (psycopg releases the GIL while it waits for the server): at a million
LangGraph items the server's share was about a third of the build.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Sequence
from typing import Any

AHEAD = 2
"""Batches fetched ahead at most (memory: this many batches beside the one in use)."""


def prefetched(cursor: Any, size: int) -> Iterator[Sequence[Any]]:
    """``cursor.fetchmany(size)`` batches in order, each next one fetched by a thread while
    the caller works on the last; an error of the fetch is raised here. When the caller
    stops early (or raises), the thread is stopped and joined before this returns."""
    batches: queue.Queue[Sequence[Any] | BaseException] = queue.Queue(maxsize=AHEAD)
    stop = threading.Event()

    def fetch() -> None:
        try:
            while not stop.is_set():
                rows = cursor.fetchmany(size)
                batches.put(rows)
                if not rows:
                    return
        except BaseException as exc:  # handed to the caller, raised there
            batches.put(exc)

    thread = threading.Thread(target=fetch, name="memtui-pg-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item = batches.get()
            if isinstance(item, BaseException):
                raise item
            if not item:
                return
            yield item
    finally:
        stop.set()
        while thread.is_alive():  # a fetch under way may still put: make room for it
            try:
                batches.get(timeout=0.05)
            except queue.Empty:
                pass
        thread.join()
