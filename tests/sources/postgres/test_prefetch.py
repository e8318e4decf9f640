"""The build's prefetch of a server-side cursor's batches: every batch in order, a fetch
error raised to the caller, and no thread left behind when the caller stops early."""

from __future__ import annotations

import threading

import pytest

from memtui.sources.postgres.prefetch import AHEAD, prefetched


class Batches:
    """A cursor's ``fetchmany`` over made-up rows (``fail_at``: the call that raises)."""

    def __init__(self, rows: int, fail_at: int | None = None) -> None:
        self.rows = list(range(rows))
        self.calls = 0
        self.fail_at = fail_at
        self.threads: set[str] = set()

    def fetchmany(self, size: int) -> list[int]:
        self.calls += 1
        self.threads.add(threading.current_thread().name)
        if self.calls == self.fail_at:
            raise RuntimeError("server closed the connection")
        out, self.rows = self.rows[:size], self.rows[size:]
        return out


def prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "memtui-pg-prefetch"]


def test_every_batch_comes_in_order_from_the_fetching_thread():
    cursor = Batches(10_001)
    batches = list(prefetched(cursor, 1000))
    assert [len(b) for b in batches] == [1000] * 10 + [1]
    assert [row for batch in batches for row in batch] == list(range(10_001))
    assert cursor.threads == {"memtui-pg-prefetch"}
    assert cursor.calls == 12  # the last, empty batch ends it
    assert not prefetch_threads()


def test_a_fetch_error_is_raised_to_the_caller_after_the_batches_before_it():
    cursor = Batches(5000, fail_at=3)
    seen = []
    with pytest.raises(RuntimeError, match="server closed the connection"):
        for batch in prefetched(cursor, 1000):
            seen.extend(batch)
    assert seen == list(range(2000))
    assert not prefetch_threads()


def test_a_caller_that_stops_early_leaves_no_thread_and_fetches_little_ahead():
    cursor = Batches(100_000)
    for n, _batch in enumerate(prefetched(cursor, 100)):
        if n == 2:
            break
    assert not prefetch_threads()
    assert cursor.calls <= 3 + AHEAD + 1
