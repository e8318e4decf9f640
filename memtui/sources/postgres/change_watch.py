"""The app's live look at a Postgres store, paced by what it costs the server.

The app asks ``data_version`` once a second. A SQLite file answers from a counter
in its header; a Postgres store's change probe (``ChangeFeed.probe``: counts, the
latest ``updated_at``, the expiries' digest) reads the whole table: 0.3 s of a
server core at a million items, which an idle inspector would then spend every
second on a production database. ``ChangeWatch`` keeps the last probe's answer and
runs a probe that costs more than ``CHEAP_SECONDS`` again only

- when at least ``cost / PROBE_SHARE`` seconds have passed since it last ran (the
  probe takes at most that share of one server core), and
- then only when the server's own write counters for the schema
  (``pg_stat_user_tables``: rows inserted, updated, deleted) moved since, or
  ``SAFETY_SECONDS`` passed (the counters reach the statistics some time after a
  commit, up to about 10 s; statistics can be off or reset: the probe still runs
  that often).

A cheap probe (a small store) runs every time it is asked, as before.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PROBE_SHARE = 0.1
"""The share of one server core the live probe may take while the app watches."""
CHEAP_SECONDS = 0.05
"""A probe up to this long runs whenever it is asked."""
SAFETY_SECONDS = 30.0
"""The longest an expensive probe waits for the write counters to move."""


@dataclass
class _Probed:
    version: Any
    at: float
    cost: float
    counters: Any


class ChangeWatch:
    """``version()``: the store's change probe, or its last answer while running it
    again would cost more than its share (see the module docstring)."""

    def __init__(
        self,
        probe: Callable[[], Any],
        counters: Callable[[], Any],
        clock: Callable[[], float] = time.monotonic,
        cheap_seconds: float = CHEAP_SECONDS,
    ) -> None:
        self.probe = probe
        self.counters = counters
        self.clock = clock
        self.cheap_seconds = cheap_seconds
        """A probe up to this long runs whenever it is asked."""
        self.probes = 0
        """How many times the probe ran."""
        self._last: _Probed | None = None
        self._lock = threading.Lock()

    def expire(self) -> None:
        """The next ``version`` runs the probe, whatever it costs."""
        self._last = None

    def version(self) -> Any:
        """The probe's answer, run again or kept (the module docstring says when); callers
        at once wait for one probe."""
        with self._lock:
            return self._version()

    def _version(self) -> Any:
        last = self._last
        now = self.clock()
        if last is not None and last.cost > self.cheap_seconds:
            elapsed = now - last.at
            if elapsed < last.cost / PROBE_SHARE:
                return last.version
            if elapsed < SAFETY_SECONDS:
                counters = self.counters()
                if counters == last.counters:
                    return last.version
                return self.run(counters)
        return self.run()

    def observe(self, read: Callable[[], tuple[Any, Any]]) -> tuple[Any, Any]:
        """``read()``, a read whose scan also gives the probe's answer (``(value,
        version)``): that answer is kept as the probe's, paced by the read's cost."""
        with self._lock:
            counters = self.counters()
            started = self.clock()
            value, version = read()
            self.probes += 1
            self._last = _Probed(version, started, self.clock() - started, counters)
            return value, version

    def run(self, counters: Any = None) -> Any:
        """The probe now (its answer kept for ``version``); ``counters`` read just before,
        if they were."""
        if counters is None:
            counters = self.counters()
        started = self.clock()
        version = self.probe()
        self.probes += 1
        self._last = _Probed(version, started, self.clock() - started, counters)
        return version


def write_counters_sql() -> str:
    """The schema's write counters (rows inserted, updated, deleted; one row)."""
    return (
        "SELECT coalesce(sum(n_tup_ins), 0), coalesce(sum(n_tup_upd), 0), "
        "coalesce(sum(n_tup_del), 0) FROM pg_catalog.pg_stat_user_tables WHERE schemaname = %s"
    )
